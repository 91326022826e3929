#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_manifests
short_description: Render the Kubernetes manifests and Slurm config of a Slurm cluster
version_added: "0.1.0"
description:
  - Validates a C(SlurmCluster) and its C(NodeSet) resources with the same model the
    operator uses, and returns every Kubernetes object the operator would create, plus the
    generated Slurm configuration files.
  - With O(dest), writes one YAML file per object into that directory (for GitOps or
    review); files are only rewritten when their content changes.
  - Talks to no cluster.
author:
  - slurmkube maintainers (@slurmkube)
options:
  cluster:
    description:
      - The C(SlurmCluster) resource, with C(metadata.name), C(metadata.namespace) and C(spec).
      - See the C(slurmclusters.slurmkube.io) CRD for every field of C(spec).
    type: dict
    required: true
  node_sets:
    description:
      - The cluster's C(NodeSet) resources, each with C(metadata) and C(spec).
    type: list
    elements: dict
    default: []
  dest:
    description:
      - Directory to write the manifests to, one C(<kind>-<name>.yaml) file each.
      - Created when missing. Other files in it are left alone.
    type: path
  include_crds:
    description:
      - Also return (and write) the C(SlurmCluster) and C(NodeSet) CustomResourceDefinitions.
    type: bool
    default: false
seealso:
  - module: slurmkube.core.slurm_cluster
  - module: kubernetes.core.k8s
attributes:
  check_mode:
    support: full
    description: Reports which files would change without writing them.
  diff_mode:
    support: full
    description: Shows the change of every file under O(dest).
notes:
  - The munge key and ssh host key Secrets are not rendered; they hold generated secrets.
"""

EXAMPLES = r"""
- name: Render a small CPU cluster into a GitOps directory
  slurmkube.core.cluster_manifests:
    cluster:
      metadata: {name: demo, namespace: hpc}
      spec:
        login: {serviceType: NodePort, nodePort: 30022}
    node_sets:
      - metadata: {name: cpu, namespace: hpc}
        spec: {clusterName: demo, replicas: 4, resources: {cpu: 4, memory: 8Gi}}
    dest: /srv/gitops/hpc/demo
    include_crds: true

- name: Look at the slurm.conf a spec gives
  slurmkube.core.cluster_manifests:
    cluster: "{{ lookup('file', 'demo-cluster.yml') | from_yaml }}"
  register: rendered

- name: Show it
  ansible.builtin.debug:
    msg: "{{ rendered.config_files['slurm.conf'] }}"
"""

RETURN = r"""
manifests:
  description: Every Kubernetes object of the cluster, in apply order.
  returned: always
  type: list
  elements: dict
config_files:
  description: Generated Slurm configuration files by name (C(slurm.conf), C(gres.conf), ...).
  returned: always
  type: dict
  sample: {"slurm.conf": "ClusterName=demo\n..."}
files:
  description: Paths written (or, in check mode, that would be written) under O(dest).
  returned: when O(dest) is set
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.cluster_manifests import (
    render_manifest_set,
    sync_directory,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cluster": {"type": "dict", "required": True},
            "node_sets": {"type": "list", "elements": "dict", "default": []},
            "dest": {"type": "path"},
            "include_crds": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        rendered = render_manifest_set(params["cluster"], params["node_sets"], params["include_crds"])
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    result = {"changed": False, "manifests": rendered.manifests, "config_files": rendered.config_files}
    if params["dest"]:
        sync = sync_directory(params["dest"], rendered.files, write=not module.check_mode)
        result.update(changed=sync.changed, files=sync.paths)
        if module._diff:
            result["diff"] = sync.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
