#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_cluster_info
short_description: Read a Slurm cluster's nodes, partitions and jobs, and its SlurmCluster status
version_added: "0.2.0"
description:
  - Returns the C(SlurmCluster)'s spec and status, and what slurmctld reports, that is every
    node with its state flags and reason, the partitions, and the jobs in the queue.
  - Slurm is read with C(scontrol) and C(squeue) JSON output, run in a ready controller pod
    through the Kubernetes exec API. Nothing is changed.
  - While slurmctld cannot answer (the cluster is still starting), the Slurm lists are empty,
    RV(slurm_reachable) is false and RV(slurm_error) says why; the status is still returned.
  - Without O(name), lists the namespace's clusters (RV(clusters)) and asks no Slurm.
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description:
      - Name of the SlurmCluster.
      - Left out, the module returns only RV(clusters), every SlurmCluster of O(namespace).
    type: str
  namespace:
    description: Namespace of the cluster.
    type: str
    default: default
  jobs:
    description: Read the job queue too (it can be long on a busy cluster).
    type: bool
    default: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
seealso:
  - module: slurmkube.core.slurm_cluster
  - module: kubernetes.core.k8s_info
attributes:
  check_mode:
    support: full
    description: The module only reads.
  diff_mode:
    support: none
    description: Nothing is changed.
"""

EXAMPLES = r"""
- name: Read cluster demo
  slurmkube.core.slurm_cluster_info:
    name: demo
    namespace: slurm
  register: demo

- name: List the clusters of namespace slurm
  slurmkube.core.slurm_cluster_info:
    namespace: slurm
  register: listed

- name: Fail when a node is drained
  ansible.builtin.assert:
    that: demo.nodes_by_state.drain | default(0) == 0
    fail_msg: "drained: {{ demo.nodes | selectattr('state', 'contains', 'DRAIN') | map(attribute='name') | list }}"
"""

RETURN = r"""
clusters:
  description: The namespace's SlurmClusters, by name, each with its spec and status.
  returned: when O(name) is not given
  type: list
  elements: dict
  version_added: "0.4.0"
  sample: [{"name": "demo", "namespace": "slurm", "spec": {}, "status": {"phase": "Ready"}}]
spec:
  description: The SlurmCluster's spec.
  returned: when O(name) is given
  type: dict
status:
  description: The SlurmCluster's status (phase, conditions, nodes ready/desired, nodes by state).
  returned: when O(name) is given
  type: dict
  sample: {"phase": "Ready", "nodes": {"ready": 2, "desired": 2}}
slurm_reachable:
  description: slurmctld answered; the Slurm lists below are empty when it did not.
  returned: when O(name) is given
  type: bool
slurm_error:
  description: Why Slurm could not be read.
  returned: when RV(slurm_reachable) is false
  type: str
slurm_version:
  description: The release of the Slurm that slurmctld runs, as it reports it.
  returned: when RV(slurm_reachable) is true
  type: str
  version_added: "0.4.0"
  sample: "26.05.5"
nodes:
  description: Every node slurmctld knows, by name.
  returned: when O(name) is given
  type: list
  elements: dict
  sample:
    - name: demo-cpu-0
      state: [IDLE, DRAIN]
      reason: "slurmkube: healthcheck failed"
      cpus: 4
      alloc_cpus: 0
      real_memory_mb: 7936
      partitions: [main]
      features: [cpu]
nodes_by_state:
  description: How many nodes are idle, allocated, mixed, down, future, drain.
  returned: when O(name) is given
  type: dict
  sample: {"idle": 3, "drain": 1}
partitions:
  description: The partitions, in slurm.conf order.
  returned: when O(name) is given
  type: list
  elements: dict
  sample:
    - name: main
      state: [UP]
      default: true
      nodes: demo-cpu-[0-3]
      total_nodes: 4
      total_cpus: 16
      node_sets: [cpu]
      max_time_minutes: null
accounting:
  description:
    - With C(spec.accounting.enabled), slurmdbd as the controller pod sees it; empty otherwise.
    - C(dbd_agent_queue_size) counts the records slurmctld holds that slurmdbd has not taken
      yet; it grows while slurmdbd or its database is away and drains when they are back.
  returned: when O(name) is given
  type: dict
  version_added: "0.3.0"
  sample:
    slurmdbd_reachable: true
    clusters: [demo]
    dbd_agent_queue_size: 0
jobs:
  description: The jobs in the queue (empty when O(jobs=false)), by id.
  returned: when O(name) is given
  type: list
  elements: dict
  sample:
    - job_id: 42
      name: train
      user: alice
      state: [RUNNING]
      state_reason: None
      partition: main
      nodes: demo-cpu-[0-1]
      node_count: 2
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import kube_for, with_common
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_cluster_info import gather, listed


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "name": {"type": "str"},
            "namespace": {"type": "str", "default": "default"},
            "jobs": {"type": "bool", "default": True},
        }),
        supports_check_mode=True,
    )
    p = module.params
    try:
        kube = kube_for(module)
        facts = gather(kube, p["name"], p["namespace"], p["jobs"]) if p["name"] else {
            "clusters": listed(kube, p["namespace"])}
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
