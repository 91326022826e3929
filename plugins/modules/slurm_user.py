#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_user
short_description: Ensure a Slurm user's accounts, default account, admin level and limits
version_added: "0.3.0"
description:
  - Gives a user associations with accounts in a cluster's accounting database, with
    C(sacctmgr); which accounts it may charge, its default account, its admin level, and the
    share, QoS and limits of each of its associations. Only what differs is changed.
  - With M(slurmkube.core.jail_user) (the Linux account in the jail) this makes a person who
    can log in and run jobs. Slurm keys associations by user name.
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description: The user name (one word), as in the jail's C(/etc/passwd).
    type: str
    required: true
  state:
    description: V(present) ensures the user; V(absent) removes all its associations in the cluster.
    type: str
    choices: [present, absent]
    default: present
  default_account:
    description: The account of jobs that name none; required for a user new to the cluster.
    type: str
  accounts:
    description:
      - The complete list of accounts the user may charge (O(default_account) among them);
        associations with other accounts are removed. Not managed when unset.
    type: list
    elements: str
  admin_level:
    description: Slurm administration rights.
    type: str
    choices: [None, Operator, Administrator]
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.slurm_accounting
  - slurmkube.core.slurm_accounting.limits
seealso:
  - module: slurmkube.core.slurm_account
  - module: slurmkube.core.slurm_qos
  - module: slurmkube.core.jail_user
attributes:
  check_mode:
    support: full
    description: The user is read; nothing is written.
  diff_mode:
    support: full
    description: The user's accounts and settings before and after.
notes:
  - O(fairshare), O(qos), O(default_qos) and O(limits) apply to each of the user's associations in the cluster.
"""

EXAMPLES = r"""
- name: Alice charges physics by default, and astro
  slurmkube.core.slurm_user:
    cluster: demo
    namespace: slurm
    name: alice
    default_account: physics
    accounts: [physics, astro]
    limits:
      max_jobs: 20
"""

RETURN = r"""
record:
  description: The user as sacctmgr shows it after the task (in check mode, as it would); empty when absent.
  returned: always
  type: dict
  sample:
    default_account: physics
    admin_level: None
    accounts: [astro, physics]
    associations:
      physics: {fairshare: "1", qos: [normal], default_qos: "", max_jobs: "20", grp_tres: "", grp_jobs: "",
                grp_submit_jobs: "", max_submit_jobs: "", max_tres_per_job: "", max_wall: ""}
requests:
  description: The sacctmgr requests made (in check mode, that would be made).
  returned: always
  type: list
  elements: str
  sample: ["add user alice Cluster=demo Account=astro,physics DefaultAccount=physics MaxJobs=20"]
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
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_user import ensure_user, wanted_user


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common(dict(
            ACCOUNTING_ARGS,
            **ASSOCIATION_ARGS,
            name={"type": "str", "required": True},
            state={"type": "str", "choices": ["present", "absent"], "default": "present"},
            default_account={"type": "str"},
            accounts={"type": "list", "elements": "str"},
            admin_level={"type": "str", "choices": ["None", "Operator", "Administrator"]},
        )),
        supports_check_mode=True,
    )
    p = module.params

    def ensure(mgr: Sacctmgr) -> Outcome:
        return ensure_user(mgr, p["cluster"], p["name"], p["state"], wanted_user(p), module.check_mode)

    run_accounting_module(module, ensure, module._diff)


if __name__ == "__main__":
    main()
