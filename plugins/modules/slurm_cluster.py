#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_cluster
short_description: Ensure a Slurm cluster (SlurmCluster and its NodeSets) on Kubernetes
version_added: "0.1.0"
description:
  - Creates, updates or deletes a C(SlurmCluster) and its C(NodeSet) objects; the
    slurmkube operator then makes the Slurm cluster match them.
  - The spec is validated with the operator's own model before anything is written, and the
    error names the field and the bad value.
  - Only objects that differ are written. In check mode the changes are sent as a
    server-side dry run, so the API server validates them too.
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description: Name of the SlurmCluster (a DNS label).
    type: str
    required: true
  namespace:
    description: Namespace of the cluster and its node sets.
    type: str
    default: default
  state:
    description:
      - V(present) ensures the objects; V(absent) deletes the cluster and its node sets.
      - The jail volume is never deleted with the cluster.
    type: str
    choices: [present, absent]
    default: present
  spec:
    description:
      - The C(spec) of the SlurmCluster (see the C(slurmclusters.slurmkube.io) CRD). It is
        applied whole, so a field left out of it gets the CRD's default.
      - Left out, the live spec is kept as it is; a cluster that does not exist yet is made
        with the CRD's defaults.
    type: dict
  node_sets:
    description:
      - Node sets of the cluster to ensure. Left out, the cluster's node sets are left as
        they are. A name listed twice is refused before anything is written.
      - Node sets of the cluster that the list does not name are kept, unless
        O(prune_node_sets=true).
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the NodeSet; its Slurm nodes are C(<cluster>-<name>-<n>).
        type: str
        required: true
      spec:
        description:
          - The C(spec) of the NodeSet; C(clusterName) is filled in.
          - Without C(replicas), an existing NodeSet keeps its live count, so that
            C(kubectl scale nodesets.slurmkube.io) or an autoscaler (HPA, KEDA) is not undone; a new one
            gets the CRD's default. With C(replicas), that number is applied.
        type: dict
        default: {}
  prune_node_sets:
    description:
      - Delete the cluster's node sets that O(node_sets) does not name (the operator drains
        their nodes first, requeueing jobs after the node set's drain timeout).
      - Needs O(node_sets).
    type: bool
    default: false
    version_added: "0.2.0"
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
seealso:
  - module: slurmkube.core.slurm_cluster_info
  - module: slurmkube.core.slurm_operator
  - module: kubernetes.core.k8s
attributes:
  check_mode:
    support: full
    description: Changes are sent as a server-side dry run.
  diff_mode:
    support: full
    description: Shows the spec before and after for each object that changes.
notes:
  - With O(wait=true) the module waits until the operator reports the cluster Ready.
"""

EXAMPLES = r"""
- name: A CPU cluster with two node sets
  slurmkube.core.slurm_cluster:
    name: demo
    namespace: slurm
    spec:
      login: {serviceType: NodePort, nodePort: 30022}
      partitions:
        - {name: main, default: true}
    node_sets:
      - name: cpu
        spec: {replicas: 4, resources: {cpu: 4, memory: 8Gi}}
      - name: big
        spec: {replicas: 1, resources: {cpu: 16, memory: 64Gi}}
  register: cluster

- name: Scale a node set; the cluster's spec and its other node sets stay as they are
  slurmkube.core.slurm_cluster:
    name: demo
    namespace: slurm
    node_sets:
      - name: cpu
        spec: {replicas: 8, resources: {cpu: 4, memory: 8Gi}}

- name: Keep only the cpu node set (big is drained, then deleted)
  slurmkube.core.slurm_cluster:
    name: demo
    namespace: slurm
    node_sets:
      - name: cpu
        spec: {resources: {cpu: 4, memory: 8Gi}}
    prune_node_sets: true

- name: Remove the cluster, keep the jail's data
  slurmkube.core.slurm_cluster:
    name: demo
    namespace: slurm
    state: absent
"""

RETURN = r"""
status:
  description: The SlurmCluster's status (phase, conditions, nodes ready/desired, nodes by Slurm state).
  returned: when O(state=present) and O(wait=true)
  type: dict
  sample: {"phase": "Ready", "nodes": {"ready": 5, "desired": 5}, "nodesByState": {"idle": 5}}
spec:
  description: The SlurmCluster's spec as it is after the task (the live one when O(spec) was left out).
  returned: when O(state=present)
  type: dict
result:
  description:
    - The SlurmCluster as the API server has it after the task (metadata, spec, status), as
      kubernetes.core.k8s returns its object; in check mode, as the task would write it.
  returned: when O(state=present)
  type: dict
  version_added: "0.4.0"
  sample: {"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster", "metadata": {"name": "demo"},
           "spec": {}, "status": {"phase": "Ready"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    Change,
    kube_for,
    wait_options,
    waits,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_cluster import (
    Request,
    cluster_after,
    ensure_absent,
    ensure_present,
    plan_present,
    wait_ready,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "spec": {"type": "dict"},
            "node_sets": {"type": "list", "elements": "dict", "options": {
                "name": {"type": "str", "required": True},
                "spec": {"type": "dict", "default": {}},
            }},
            "prune_node_sets": {"type": "bool", "default": False},
        }, wait=True),
        supports_check_mode=True,
    )
    p = module.params
    if p["prune_node_sets"] and p["node_sets"] is None:
        module.fail_json(msg="prune_node_sets: needs node_sets, the node sets to keep")
    result = {"changed": False}
    try:
        waiting = wait_options(module)
        kube = kube_for(module)
        if p["state"] == "absent":
            record(module, result, ensure_absent(kube, p["name"], p["namespace"], module.check_mode))
        else:
            plan = plan_present(kube, Request(p["name"], p["namespace"], p["spec"], p["node_sets"],
                                              p["prune_node_sets"]))
            record(module, result, ensure_present(kube, plan.objects, plan.doomed, module.check_mode))
            result["spec"] = plan.spec
            if waits(module, waiting):
                result["status"] = wait_ready(kube, p["name"], p["namespace"], waiting.timeout, waiting.timer)
            result["result"] = cluster_after(kube, p["name"], p["namespace"], plan, module.check_mode)
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc), **result)
    module.exit_json(**result)


def record(module: AnsibleModule, result: dict, change: Change) -> None:
    """Put what changed (and its diff, in diff mode) into the result."""
    result["changed"] = change.changed
    if module._diff:
        result["diff"] = change.diffs


if __name__ == "__main__":
    main()
