#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_token
short_description: Issue a token for a user of a Slurm cluster's REST API
version_added: "0.4.0"
description:
  - Signs a JSON Web Token (RS256) for O(user) with the signing key of the cluster's
    C(<cluster>-jwt-keys) Secret, which the operator makes once C(spec.rest.enabled) is true.
    slurmctld and slurmdbd check it against that Secret's public keys (Slurm's C(auth/jwt) with a
    key set), so a request to C(slurmrestd) carrying it (in the header C(X-SLURM-USER-TOKEN), or
    as a C(Bearer) token of the header C(Authorization)) acts as O(user), and a job it submits
    runs under O(user)'s uid.
  - Nothing is written; the token is returned. Set C(no_log) to true on the task that
    registers it, or Ansible prints it in its output and logs.
  - Whoever can read the Secret can issue a token for any user, C(root) and C(slurm) included;
    grant C(get) on it as you would root on the cluster.
author:
  - slurmkube maintainers (@slurmkube)
options:
  cluster:
    description: Name of the SlurmCluster.
    type: str
    required: true
  namespace:
    description: Namespace of the cluster.
    type: str
    default: default
  user:
    description:
      - The user the token acts as, by name (Slurm's C(sun) claim); slurmctld resolves it to a
        uid, so it must exist where the cluster's users live (the jail).
    type: str
    required: true
  lifetime:
    description:
      - Seconds the token is valid for, at most C(spec.rest.tokenMaxLifetimeSeconds) of the
        cluster. Slurm's own C(scontrol token) defaults to 1800 too.
    type: int
    default: 1800
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
requirements:
  - cryptography (Python)
seealso:
  - module: slurmkube.core.rest_keys
  - name: slurmrestd and JWT authentication
    link: https://slurm.schedmd.com/jwt.html
    description: How Slurm checks the tokens.
attributes:
  check_mode:
    support: full
    description: Issuing a token changes nothing; check mode issues it too.
  diff_mode:
    support: none
    description: Nothing is changed.
"""

EXAMPLES = r"""
- name: A token for alice, valid one hour
  slurmkube.core.slurm_token:
    cluster: demo
    namespace: slurm
    user: alice
    lifetime: 3600
  register: alice
  no_log: true

# From a pod of a namespace spec.rest.allowFrom names: the Service demo-rest, port 6820.
- name: List the jobs as alice
  ansible.builtin.uri:
    url: http://demo-rest.slurm:6820/slurm/v0.0.45/jobs
    headers:
      X-SLURM-USER-TOKEN: "{{ alice.token }}"
  no_log: true
"""

RETURN = r"""
token:
  description: The token. Keep it out of logs (C(no_log) on the task).
  returned: success
  type: str
expires:
  description: When the token stops being accepted, in seconds since the epoch.
  returned: success
  type: int
  sample: 1795000000
key_id:
  description: The C(kid) of the key that signed it.
  returned: success
  type: str
  sample: 3q2-7wAAAAAAAAAA
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import CRYPTOGRAPHY_IMPORT_ERROR, HAS_CRYPTOGRAPHY
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import kube_for, with_common
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_token import issue_token


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "cluster": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "user": {"type": "str", "required": True},
            "lifetime": {"type": "int", "default": 1800},
        }),
        supports_check_mode=True,
    )
    if not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"), exception=str(CRYPTOGRAPHY_IMPORT_ERROR))
    p = module.params
    try:
        result = issue_token(kube_for(module), p["cluster"], p["namespace"], p["user"], p["lifetime"],
                             int(time.time()))
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
