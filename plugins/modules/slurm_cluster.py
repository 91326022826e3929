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
      - The C(spec) of the SlurmCluster (see the C(slurmclusters.slurmkube.io) CRD).
    type: dict
    default: {}
  node_sets:
    description:
      - The cluster's node sets. This list is complete, node sets of this cluster that it
        does not name are deleted (the operator drains their nodes first).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name of the NodeSet; its Slurm nodes are C(<cluster>-<name>-<n>).
        type: str
        required: true
      spec:
        description: The C(spec) of the NodeSet; C(clusterName) is filled in.
        type: dict
        default: {}
extends_documentation_fragment:
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
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

- name: Scale a node set
  slurmkube.core.slurm_cluster:
    name: demo
    namespace: slurm
    spec: "{{ cluster.spec }}"
    node_sets:
      - name: cpu
        spec: {replicas: 8, resources: {cpu: 4, memory: 8Gi}}

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
  description: The spec that was applied.
  returned: when O(state=present)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.model.spec import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import kube_for, with_common
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_cluster import (
    Change,
    ClusterError,
    cluster_resource,
    ensure_absent,
    ensure_present,
    nodeset_resource,
    stale_nodesets,
    validate,
    wait_ready,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "spec": {"type": "dict", "default": {}},
            "node_sets": {"type": "list", "elements": "dict", "default": [], "options": {
                "name": {"type": "str", "required": True},
                "spec": {"type": "dict", "default": {}},
            }},
        }, wait=True),
        supports_check_mode=True,
    )
    p = module.params
    cluster = cluster_resource(p["name"], p["namespace"], p["spec"])
    nodesets = [nodeset_resource(p["name"], p["namespace"], item) for item in p["node_sets"]]
    result = {"changed": False}
    try:
        kube = kube_for(module)
        if p["state"] == "absent":
            record(module, result, ensure_absent(kube, p["name"], p["namespace"], module.check_mode))
        else:
            validate(cluster, nodesets)
            stale = stale_nodesets(kube, p["name"], p["namespace"], [n["metadata"]["name"] for n in nodesets])
            # Node sets first: the operator reads the cluster's references as soon as it appears.
            record(module, result, ensure_present(kube, [*nodesets, cluster], stale, module.check_mode))
            result["spec"] = cluster["spec"]
            if p["wait"] and not module.check_mode:
                result["status"] = wait_ready(kube, p["name"], p["namespace"], p["wait_timeout"])
    except SpecError as exc:
        module.fail_json(msg="invalid cluster: %s" % exc)
    except (ClusterError, KubeError) as exc:
        module.fail_json(msg=str(exc), **result)
    module.exit_json(**result)


def record(module: AnsibleModule, result: dict, change: Change) -> None:
    """Put what changed (and its diff, in diff mode) into the result."""
    result["changed"] = change.changed
    if module._diff:
        result["diff"] = change.diffs


if __name__ == "__main__":
    main()
