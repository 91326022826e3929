# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """What every module that talks to Kubernetes needs besides kubernetes.core.k8s_auth_options
    (the connection options, used with their argument spec and client setup), and the wait
    options (twin of module_utils.ops.common.WAIT_ARGS)."""

    DOCUMENTATION = r"""
requirements:
  - kubernetes >= 30.0 (Python)
  - the kubernetes.core collection (its connection options and client)
notes:
  - Connection options and their E(K8S_AUTH_*) variables are those of kubernetes.core. With
    none given, the in-cluster service account is tried first, then the default kubeconfig
    (E(KUBECONFIG) or C(~/.kube/config)).
  - A missing kubeconfig, an unknown context, an unreachable API server or refused
    credentials fail the task with the cause, before anything is read or written.
attributes:
  action_group:
    description: Use C(group/slurmkube.core.kube) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - slurmkube.core.kube
"""

    WAIT = r"""
options:
  wait:
    description:
      - Wait until the object reports the state asked for.
      - Left out, the module waits (V(true)) and warns that from 1.0.0 the default is V(false),
        as kubernetes.core's.
    type: bool
  wait_timeout:
    description:
      - How many seconds to wait when O(wait=true).
      - Left out, 600 (a cluster's pods start in minutes); from 1.0.0, 120 as kubernetes.core's.
    type: int
  wait_sleep:
    description:
      - Seconds between two looks while waiting. An API error that may pass (HTTP 429 or 5xx, no
        answer) does not end the wait; it fails the task only if it lasts until O(wait_timeout).
    type: int
    default: 5
    version_added: "0.4.0"
"""
