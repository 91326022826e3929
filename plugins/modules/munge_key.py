#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: munge_key
short_description: Ensure the Secret holding a Slurm cluster's munge key
version_added: "0.1.0"
description:
  - Creates the Secret with the munge key every Slurm daemon of a cluster shares.
  - A missing key is generated (1024 random bytes) or imported from O(src) or O(content).
    An existing key is never replaced unless O(rotate=true).
  - The key is never returned or logged; the module returns its SHA-256 fingerprint.
author:
  - slurmkube maintainers (@slurmkube)
options:
  cluster:
    description:
      - Name of the SlurmCluster; the Secret is then C(<cluster>-munge-key), the name the
        cluster uses when its spec does not name one.
      - One of O(cluster) and O(secret_name) is required.
    type: str
  secret_name:
    description: Name of the Secret, when not derived from O(cluster).
    type: str
  namespace:
    description: Namespace of the Secret (the cluster's namespace).
    type: str
    default: default
  state:
    description: V(present) ensures the Secret; V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  src:
    description:
      - File holding the key (for example an existing C(/etc/munge/munge.key)); 32 to 1024 bytes.
    type: path
  content:
    description:
      - The key, base64-encoded; 32 to 1024 bytes once decoded.
    type: str
  rotate:
    description:
      - Replace an existing key (with O(src), O(content), or a new random one).
      - The operator rolls the new key out to the running cluster without restarting a pod
        or a job. Once the kubelet has mounted the new key in every pod of the cluster
        (about a minute), munged restarts with it in the controller and then in every worker
        and login pod. Slurm's daemons and the jobs keep running; Slurm retries the messages
        sent in the second munged is away. Commands users run in that second may fail.
      - With O(wait=true) and O(cluster), the module returns once every daemon of the
        cluster runs the new key (RV(rolled_out)).
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
seealso:
  - module: slurmkube.core.slurm_cluster
  - module: slurmkube.core.rest_keys
attributes:
  check_mode:
    support: full
    description: Changes are sent as a server-side dry run.
  diff_mode:
    support: none
    description: A diff would show the key.
"""

EXAMPLES = r"""
- name: Generate the munge key of cluster demo once
  slurmkube.core.munge_key:
    cluster: demo
    namespace: slurm

- name: Bring the key of an existing Slurm installation
  slurmkube.core.munge_key:
    cluster: demo
    namespace: slurm
    src: /etc/munge/munge.key
"""

RETURN = r"""
fingerprint:
  description: SHA-256 of the key in the Secret, C(sha256:<hex>); empty after O(state=absent) when nothing existed.
  returned: always
  type: str
  sample: sha256:5e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
secret:
  description: Name of the Secret.
  returned: always
  type: str
  sample: demo-munge-key
rolled_out:
  description:
    - Whether every daemon of O(cluster) runs the key of RV(fingerprint), after a rotation
      waited for (O(rotate=true), O(wait=true)). False when nothing was waited for.
  returned: always
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    kube_for,
    wait_options,
    waits,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.munge_key import (
    ensure_key,
    key_from_params,
    remove_key,
    secret_name_for,
    wait_rolled_out,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "cluster": {"type": "str"},
            "secret_name": {"type": "str"},
            "namespace": {"type": "str", "default": "default"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "src": {"type": "path"},
            "content": {"type": "str", "no_log": True},
            "rotate": {"type": "bool", "default": False},
        }, wait=True),
        required_one_of=[("cluster", "secret_name")],
        mutually_exclusive=[("src", "content")],
        supports_check_mode=True,
    )
    p = module.params
    try:
        name = secret_name_for(p)
        waiting = wait_options(module)
        kube = kube_for(module)
        if p["state"] == "absent":
            result = remove_key(kube, name, p["namespace"], module.check_mode)
        else:
            given = key_from_params(p["content"], p["src"])
            result = ensure_key(kube, name, p["namespace"], given, p["rotate"], p["cluster"], module.check_mode)
        rolled_out = False
        if result.replaced and p["cluster"] and waits(module, waiting):
            rolled_out = wait_rolled_out(kube, p["cluster"], p["namespace"], result.fingerprint, waiting.timeout,
                                         waiting.timer)
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=result.changed, fingerprint=result.fingerprint, secret=result.secret,
                     rolled_out=rolled_out)


if __name__ == "__main__":
    main()
