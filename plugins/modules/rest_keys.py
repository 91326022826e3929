#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rest_keys
short_description: Show or rotate the signing keys of a Slurm cluster's REST API
version_added: "0.4.0"
description:
  - The REST API's tokens (M(slurmkube.core.slurm_token)) are signed with one RSA key of the
    C(<cluster>-jwt-keys) Secret; slurmctld and slurmdbd check them against the public half of
    every key the Secret holds. Besides the signing key it holds the next one, published ahead,
    and the keys a rotation retired, until the tokens they signed have expired.
  - With O(rotate=true) the next key signs from now on, a fresh key becomes the next, and the old
    signing key stays in the set for C(spec.rest.tokenMaxLifetimeSeconds), so the tokens it signed
    keep working until they expire; then the operator removes it. Neither slurmctld nor slurmrestd
    restarts; the operator has slurmctld read the new set with C(scontrol reconfigure). slurmdbd,
    which reads keys only when it starts, already holds the new signing key (it was the next) and
    is replaced when the old key leaves.
  - A rotation is refused while the last one is not in effect or its old key still retires.
  - With O(revoke=true) (a key that leaked) the rotation drops the old signing key and any key
    still retiring from the set at once, instead of after their tokens' lifetime, whatever the
    last rotation's state; every token they signed stops working once slurmctld reads the new
    set (within the operator's next pass). slurmdbd is replaced to load the set anew.
  - No key is returned, only key ids.
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
  rotate:
    description: Rotate the keys; false only reports them (unless O(revoke=true)).
    type: bool
    default: false
  revoke:
    description:
      - Rotate the keys and drop the old ones from the set at once; the tokens they signed stop
        working. Implies O(rotate=true).
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
requirements:
  - cryptography (Python)
seealso:
  - module: slurmkube.core.slurm_token
  - module: slurmkube.core.munge_key
attributes:
  check_mode:
    support: full
    description: With O(rotate=true), says what would change and writes nothing.
  diff_mode:
    support: none
    description: Keys are never shown.
notes:
  - With O(wait=true), waits until slurmctld checks tokens with the new key set.
"""

EXAMPLES = r"""
- name: Rotate the REST API's signing key of cluster demo
  slurmkube.core.rest_keys:
    cluster: demo
    namespace: slurm
    rotate: true

- name: A signing key leaked - its tokens must stop working now
  slurmkube.core.rest_keys:
    cluster: demo
    namespace: slurm
    revoke: true

- name: Which key signs
  slurmkube.core.rest_keys:
    cluster: demo
    namespace: slurm
  register: keys
"""

RETURN = r"""
signing:
  description: Id (C(kid)) of the key that signs new tokens.
  returned: always
  type: str
next:
  description: Id of the key that signs after the next rotation (published already).
  returned: always
  type: str
retiring:
  description: Ids of the keys a rotation retired, with when they leave the key set.
  returned: always
  type: dict
  sample: {"3q2-7wAAAAAAAAAA": "2026-11-30T09:00:00Z"}
in_effect:
  description: slurmctld checks tokens with this key set.
  returned: always
  type: bool
revoked:
  description: Ids of the keys O(revoke=true) dropped from the set.
  returned: when rotated
  type: list
  elements: str
  sample: ["3q2-7wAAAAAAAAAA"]
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import CRYPTOGRAPHY_IMPORT_ERROR, HAS_CRYPTOGRAPHY
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    kube_for,
    wait_options,
    waits,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.rest_keys import rotate, show, wait_in_effect


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "cluster": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "rotate": {"type": "bool", "default": False},
            "revoke": {"type": "bool", "default": False},
        }, wait=True),
        supports_check_mode=True,
    )
    if not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"), exception=str(CRYPTOGRAPHY_IMPORT_ERROR))
    p = module.params
    try:
        waiting = wait_options(module)
        kube = kube_for(module)
        if not (p["rotate"] or p["revoke"]):
            result = show(kube, p["cluster"], p["namespace"])
        else:
            result = rotate(kube, p["cluster"], p["namespace"], int(time.time()), module.check_mode, p["revoke"])
            if waits(module, waiting):
                result["in_effect"] = wait_in_effect(kube, p["cluster"], p["namespace"], waiting.timeout,
                                                     waiting.timer)
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
