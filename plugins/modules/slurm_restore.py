#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_restore
short_description: Restore a Slurm cluster's jail, controller state or accounting database from its backups
version_added: "0.4.0"
description:
  - Asks the operator for a restore from the restic repository of the cluster's C(spec.backup)
    (the backups need not run; a new cluster of the same name and namespace restores an old
    one's snapshots), and waits until it has ended.
  - The request is written as C(spec.backup.restore) of the SlurmCluster; the operator runs a
    restore once per O(name). Restoring O(controller_state) stops slurmctld (every controller),
    restoring O(accounting_database) stops slurmdbd, until the restore's Job C(<cluster>-restore-<name>)
    has ended; then they start again and read what was restored. Paths of the jail are restored
    while the cluster runs.
  - The cluster's C(status.restore) says where the restore is; Events say when it starts, when
    its Job is made and how it ended. A restore asked for while a Slurm upgrade rolls out waits
    until the rollout is over.
  - A name that was run (or is running) is not run again; the module then reports on it, unchanged.
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
  name:
    description:
      - The restore's name, a DNS-1123 label of at most 40 characters. A new name is a new restore.
    type: str
    required: true
  snapshot:
    description:
      - V(latest) restores each part from its newest snapshot of this cluster; a snapshot's ID (as
        C(restic snapshots) lists it) restores the one part it is a snapshot of.
    type: str
    default: latest
  jail:
    description: Restore O(jail_paths) of the jail.
    type: bool
    default: false
  jail_paths:
    description:
      - Paths in the jail (a user's home, a file) restored with what they hold; V(/) is the whole jail.
    type: list
    elements: str
    default: ["/"]
  exact:
    description:
      - Files under O(jail_paths) that the snapshot does not hold are deleted, so the paths become
        what the snapshot holds. Unset, they are left as they are.
    type: bool
    default: false
  controller_state:
    description:
      - Restore slurmctld's StateSaveLocation as the snapshot holds it (the queue and reservations
        of that time). Jobs running now that it does not hold are ended by slurmctld when their
        nodes report them.
    type: bool
    default: false
  accounting_database:
    description:
      - Restore the accounting database from its dump. The database is dropped first, then loaded;
        what slurmdbd recorded since the snapshot is lost.
      - Only where slurmkube runs slurmdbd (C(spec.accounting.enabled) without C(host)).
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
seealso:
  - module: slurmkube.core.slurm_cluster
  - module: slurmkube.core.slurm_cluster_info
  - name: restic restore
    link: https://restic.readthedocs.io/en/stable/050_restore.html
    description: What the restore's Job runs.
attributes:
  check_mode:
    support: full
    description: The request is checked against the cluster's spec and not written.
  diff_mode:
    support: full
    description: The cluster's C(spec.backup.restore) before and after.
"""

EXAMPLES = r"""
- name: Bring back alice's home as last night's backup has it
  slurmkube.core.slurm_restore:
    cluster: demo
    namespace: slurm
    name: alice-home-1
    jail: true
    jail_paths: [/home/alice]
    wait: true
    wait_timeout: 1800

- name: The queue and the job history as the newest backup has them
  slurmkube.core.slurm_restore:
    cluster: demo
    namespace: slurm
    name: after-incident-42
    controller_state: true
    accounting_database: true
    wait: true
    wait_timeout: 1800
"""

RETURN = r"""
restore:
  description:
    - The cluster's C(status.restore) once the restore ended (when waited for), else as the
      operator last wrote it; its name, C(phase) (V(Pending), V(Stopping), V(Restoring),
      V(Succeeded), V(Failed)), the parts, the snapshot, its Job, a message, start and end times.
  returned: always
  type: dict
  sample: {"name": "alice-home-1", "phase": "Succeeded", "parts": ["jail"], "snapshot": "latest",
           "jailPaths": ["/home/alice"], "exact": false, "job": "demo-restore-alice-home-1",
           "message": "restored jail", "startTime": "2026-12-02T03:00:00Z", "completionTime": "2026-12-02T03:01:10Z"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    kube_for,
    wait_options,
    waits,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_restore import (
    ask,
    recorded,
    request_spec,
    wait_ended,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "cluster": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "name": {"type": "str", "required": True},
            "snapshot": {"type": "str", "default": "latest"},
            "jail": {"type": "bool", "default": False},
            "jail_paths": {"type": "list", "elements": "str", "default": ["/"]},
            "exact": {"type": "bool", "default": False},
            "controller_state": {"type": "bool", "default": False},
            "accounting_database": {"type": "bool", "default": False},
        }, wait=True),
        supports_check_mode=True,
    )
    p = module.params
    result = {"changed": False, "restore": {}}
    try:
        waiting = wait_options(module)
        kube = kube_for(module)
        asked = ask(kube, p["cluster"], p["namespace"], request_spec(p), module.check_mode)
        result["changed"] = asked.changed
        if module._diff:
            result["diff"] = {"before": asked.before, "after": asked.after}
        if waits(module, waiting):
            result["restore"] = wait_ended(kube, p["cluster"], p["namespace"], p["name"], waiting.timeout,
                                           waiting.timer)
        else:
            result["restore"] = recorded(kube, p["cluster"], p["namespace"])
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
