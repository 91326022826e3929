#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_qos
short_description: Ensure a Slurm Quality of Service (QoS) in a cluster's accounting database
version_added: "0.3.0"
description:
  - Adds, changes or removes one QoS with C(sacctmgr), its priority, preemption, flags and
    limits. Only settings that differ are changed.
  - Limits are enforced by slurmctld when C(AccountingStorageEnforce) holds C(limits) and
    C(qos) (set it in the cluster's C(spec.slurm.config)).
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description: The QoS name (one word).
    type: str
    required: true
  state:
    description: V(present) ensures the QoS; V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  description:
    description: Free text (one line, no quotes or C(|)).
    type: str
  priority:
    description: Priority added to jobs of this QoS (C(PriorityWeightQOS) scales it).
    type: int
  preempt:
    description: QoS whose jobs this one may preempt (C(PreemptType=preempt/qos)); V([]) clears it.
    type: list
    elements: str
  preempt_mode:
    description: How its jobs are preempted, e.g. V(requeue), V(cancel), V(suspend,gang); V(cluster) follows slurm.conf.
    type: str
  flags:
    description: QoS flags, e.g. V(DenyOnLimit), V(NoReserve); the list is complete; V([]) clears it.
    type: list
    elements: str
  max_jobs_per_user:
    description: Running jobs a user may have in this QoS (C(MaxJobsPU)).
    type: int
  max_submit_jobs_per_user:
    description: Running and pending jobs a user may have (C(MaxSubmitPU)).
    type: int
  max_tres_per_user:
    description: TRES a user's running jobs may hold together, e.g. V(cpu=64,gres/gpu=8) (C(MaxTRESPU)).
    type: str
  max_tres_per_job:
    description: TRES one job may hold (C(MaxTRES)).
    type: str
  max_wall:
    description: Longest wall time of a job, in minutes or V([days-]hours:minutes:seconds).
    type: str
  grp_tres:
    description: TRES all running jobs of the QoS may hold together.
    type: str
  grp_jobs:
    description: Running jobs of the QoS together.
    type: int
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.slurm_accounting
seealso:
  - module: slurmkube.core.slurm_account
  - module: slurmkube.core.slurm_user
attributes:
  check_mode:
    support: full
    description: The QoS is read; nothing is written.
  diff_mode:
    support: full
    description: The QoS's settings before and after.
"""

EXAMPLES = r"""
- name: One running job per user, at most a day
  slurmkube.core.slurm_qos:
    cluster: demo
    namespace: slurm
    name: debug
    priority: 100
    max_jobs_per_user: 1
    max_wall: "1-00:00:00"
    flags: [DenyOnLimit]

- name: Remove it
  slurmkube.core.slurm_qos:
    cluster: demo
    namespace: slurm
    name: debug
    state: absent
"""

RETURN = r"""
record:
  description: The QoS as sacctmgr shows it after the task (in check mode, as it would); empty when absent.
  returned: always
  type: dict
  sample:
    description: debug
    priority: "100"
    preempt: []
    preempt_mode: cluster
    flags: [DenyOnLimit]
    max_jobs_per_user: "1"
    max_submit_jobs_per_user: ""
    max_tres_per_user: ""
    max_tres_per_job: ""
    max_wall: "1-00:00:00"
    grp_tres: ""
    grp_jobs: ""
requests:
  description: The sacctmgr requests made (in check mode, that would be made).
  returned: always
  type: list
  elements: str
  sample: ["modify qos where name=debug set MaxJobsPerUser=1"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    ACCOUNTING_ARGS,
    Outcome,
    Sacctmgr,
    run_accounting_module,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_qos import ensure_qos, wanted_qos


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common(dict(
            ACCOUNTING_ARGS,
            name={"type": "str", "required": True},
            state={"type": "str", "choices": ["present", "absent"], "default": "present"},
            description={"type": "str"},
            priority={"type": "int"},
            preempt={"type": "list", "elements": "str"},
            preempt_mode={"type": "str"},
            flags={"type": "list", "elements": "str"},
            max_jobs_per_user={"type": "int"},
            max_submit_jobs_per_user={"type": "int"},
            max_tres_per_user={"type": "str"},
            max_tres_per_job={"type": "str"},
            max_wall={"type": "str"},
            grp_tres={"type": "str"},
            grp_jobs={"type": "int"},
        )),
        supports_check_mode=True,
    )
    p = module.params

    def ensure(mgr: Sacctmgr) -> Outcome:
        return ensure_qos(mgr, p["name"], p["state"], wanted_qos(p), module.check_mode)

    run_accounting_module(module, ensure, module._diff)


if __name__ == "__main__":
    main()
