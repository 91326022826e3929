#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_account
short_description: Ensure a Slurm account, its place in the tree, share and limits
version_added: "0.3.0"
description:
  - Adds, changes or removes a Slurm account in a cluster's accounting database with
    C(sacctmgr); its description and organization, and its association in the cluster
    (parent account, fair share, QoS, limits). Only settings that differ are changed.
  - Users are given accounts with M(slurmkube.core.slurm_user).
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description: The account name (one word).
    type: str
    required: true
  state:
    description:
      - V(present) ensures the account; V(absent) removes its association in the cluster
        (sacctmgr refuses while users or child accounts remain).
    type: str
    choices: [present, absent]
    default: present
  parent:
    description: The parent account; V(root) for a new account when unset. It must exist.
    type: str
  description:
    description: Free text (one line, no quotes or C(|)); the account's name for a new one when unset.
    type: str
  organization:
    description: Free text (one line, no quotes or C(|)).
    type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.slurm_accounting
  - slurmkube.core.slurm_accounting.limits
seealso:
  - module: slurmkube.core.slurm_user
  - module: slurmkube.core.slurm_qos
attributes:
  check_mode:
    support: full
    description: The account is read; nothing is written.
  diff_mode:
    support: full
    description: The account's settings before and after.
"""

EXAMPLES = r"""
- name: A department under root, and a group under it with nine times the share
  slurmkube.core.slurm_account:
    cluster: demo
    namespace: slurm
    name: "{{ item.name }}"
    parent: "{{ item.parent }}"
    fairshare: "{{ item.share }}"
    limits:
      grp_tres: "{{ item.tres | default(omit) }}"
  loop:
    - {name: physics, parent: root, share: 10, tres: "cpu=512"}
    - {name: astro, parent: physics, share: 9}
"""

RETURN = r"""
record:
  description: The account as sacctmgr shows it after the task (in check mode, as it would); empty when absent.
  returned: always
  type: dict
  sample:
    description: physics
    organization: science
    parent: root
    fairshare: "10"
    qos: [normal]
    default_qos: ""
    grp_tres: cpu=512
    grp_jobs: ""
    grp_submit_jobs: ""
    max_jobs: ""
    max_submit_jobs: ""
    max_tres_per_job: ""
    max_wall: ""
requests:
  description: The sacctmgr requests made (in check mode, that would be made).
  returned: always
  type: list
  elements: str
  sample: ["add account physics Cluster=demo Parent=root Fairshare=10 GrpTRES=cpu=512"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    ACCOUNTING_ARGS,
    ASSOCIATION_ARGS,
    Outcome,
    Sacctmgr,
    run_accounting_module,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_account import ensure_account, wanted_account


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common(dict(
            ACCOUNTING_ARGS,
            **ASSOCIATION_ARGS,
            name={"type": "str", "required": True},
            state={"type": "str", "choices": ["present", "absent"], "default": "present"},
            parent={"type": "str"},
            description={"type": "str"},
            organization={"type": "str"},
        )),
        supports_check_mode=True,
    )
    p = module.params

    def ensure(mgr: Sacctmgr) -> Outcome:
        return ensure_account(mgr, p["cluster"], p["name"], p["state"], wanted_account(p), module.check_mode)

    run_accounting_module(module, ensure, module._diff)


if __name__ == "__main__":
    main()
