# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Options every module that talks to Kubernetes takes (twin of module_utils.args.KUBE_AUTH_ARGS)."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file.
      - When neither O(kubeconfig) nor O(context) is set, the in-cluster service account is
        tried first, then the default kubeconfig (E(KUBECONFIG) or C(~/.kube/config)).
    type: path
  context:
    description:
      - Context of the kubeconfig to use; its current context when unset.
    type: str
requirements:
  - kubernetes >= 30.0 (Python)
"""

    WAIT = r"""
options:
  wait:
    description:
      - Wait until the object reports the state asked for.
    type: bool
    default: true
  wait_timeout:
    description:
      - How many seconds to wait when O(wait=true).
    type: int
    default: 600
"""
