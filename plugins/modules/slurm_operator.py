#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_operator
short_description: Install the slurmkube CRDs and operator
version_added: "0.1.0"
description:
  - Applies the C(SlurmCluster) and C(NodeSet) CRDs (generated from the same model as
    everything else), and the operator with its ServiceAccount, least-privilege
    roles and Deployment.
  - Beside the CRDs, the C(slurmkube-spec-rules) ValidatingAdmissionPolicy checks what their
    schema cannot (Slurm option names and one-word values in the settings maps, keys slurmkube
    sets itself, root programs outside C(spec.slurm.privilegedConfig)). The API server refuses
    such a spec, naming the field, before the operator sees it. It goes with the CRDs
    (O(remove_crds)).
  - Only objects that differ are written; check mode is a server-side dry run.
author:
  - slurmkube maintainers (@slurmkube)
options:
  namespace:
    description: Namespace the operator runs in; created when missing.
    type: str
    default: slurmkube-system
  image:
    description: The operator image (built by C(images/build.sh); no registry is needed).
    type: str
    default: slurmkube/operator:latest
  image_pull_policy:
    description:
      - imagePullPolicy of the operator pod.
      - Named C(pull_policy) before 0.4.0; that name still works and is deprecated (as
        kubernetes.core and M(slurmkube.core.jail_volume) name it).
    type: str
    aliases: [pull_policy]
    choices: [Always, IfNotPresent, Never]
    default: IfNotPresent
  image_pull_secrets:
    description:
      - Secrets of O(namespace) (type C(kubernetes.io/dockerconfigjson)) the operator's pods pull
        O(image) with, for a registry that asks a login. Empty adds none.
    type: list
    elements: str
    default: []
    version_added: "0.4.0"
  replicas:
    description:
      - Operator pods. They elect a leader through a Lease in O(namespace) and only the
        leader acts; the others stand by and take over within seconds when it stops.
      - V(0) stops the operator; the Slurm clusters keep running unmanaged.
    type: int
    default: 1
    version_added: "0.2.0"
  watch_namespaces:
    description:
      - Namespaces whose clusters this operator manages; empty means O(namespace) only, unless
        O(cluster_scope=true).
      - Two operators must never watch the same namespace.
      - The operator's rights on the clusters' objects (pods and their exec, Secrets by name,
        StatefulSets, ...) are Roles in these namespaces, which must exist; its ClusterRole keeps
        only reading nodes and the CRDs. A namespace dropped from the list loses its Role.
    type: list
    elements: str
    default: []
    version_added: "0.2.0"
  cluster_scope:
    description:
      - Manage clusters in every namespace. The operator's ClusterRole then holds its rights on
        the clusters' objects in every namespace, C(kube-system) included (pods and their exec,
        Secrets by name, StatefulSets, Deployments, Jobs). Ask for it only when clusters come
        and go in namespaces not known in advance.
      - V(false) grants only the namespaces of O(watch_namespaces) (or O(namespace)); a former
        cluster-wide grant is narrowed. Mutually exclusive with a non-empty O(watch_namespaces).
    type: bool
    default: false
    version_added: "0.3.0"
  bridge_namespaces:
    description:
      - Namespaces whose pods Slurm schedules (the bridge). A MutatingAdmissionPolicy gives every
        pod created there that names the default scheduler the scheduler C(slurmkube-bridge); the
        operator submits one Slurm job per pod (a Job's parallel pods, one job for all) and binds
        the pods where Slurm placed it. The SlurmCluster whose C(spec.bridge.namespaces) lists a
        namespace schedules its pods.
      - The operator gets a Role in each (read, label, bind and delete pods, read Jobs and
        PodGroups, post Events); they must exist. A pod that names another scheduler keeps it.
      - Needs MutatingAdmissionPolicy, GA in Kubernetes 1.36; on 1.34 and 1.35 the API server must
        enable its feature gate and C(admissionregistration.k8s.io/v1beta1). Empty removes the
        policy and the bridge's grants.
    type: list
    elements: str
    default: []
    version_added: "0.4.0"
  state:
    description:
      - V(present) installs or updates; V(absent) removes the operator.
    type: str
    choices: [present, absent]
    default: present
  remove_crds:
    description:
      - With O(state=absent), also delete the CRDs, and with them every SlurmCluster and
        NodeSet in the cluster. Jail volumes are kept.
    type: bool
    default: false
  admission_policy:
    description:
      - A ValidatingAdmissionPolicy (built into Kubernetes) that refuses a SlurmCluster, in
        the watched namespaces, asking for an image, a host directory, a munge
        key or database password Secret or root programs (C(spec.slurm.privilegedConfig)) that
        the administrator did not allow. Whoever may write a SlurmCluster otherwise chooses what runs as root on
        the Slurm pods.
      - Left out, an existing policy is left as it is. It is removed with the operator.
    type: dict
    version_added: "0.3.0"
    suboptions:
      state:
        description: V(present) applies the policy; V(absent) removes it.
        type: str
        choices: [present, absent]
        default: present
      image_prefixes:
        description: Images of C(spec.images) (the defaults included) must start with one of these.
        type: list
        elements: str
        default: [slurmkube/]
      host_path_prefixes:
        description:
          - Directories of the nodes that C(spec.jail.subMounts[].hostPath) may name (they and
            below). Empty allows no host directory.
        type: list
        elements: str
        default: []
      munge_secret_names:
        description:
          - Secrets C(spec.munge.secretName) may name besides the cluster's own
            C(<cluster>-munge-key).
        type: list
        elements: str
        default: []
      database_secret_names:
        description:
          - Secrets C(spec.accounting.database.passwordSecret) may name besides the cluster's
            own C(<cluster>-accounting-db). slurmdbd sends that password to the database host
            the spec names.
        type: list
        elements: str
        default: []
      privileged_config:
        description: Allow C(spec.slurm.privilegedConfig) (Prolog, Epilog and the like, run as root).
        type: bool
        default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
seealso:
  - module: slurmkube.core.slurm_cluster
attributes:
  check_mode:
    support: full
    description: Changes are sent as a server-side dry run.
  diff_mode:
    support: full
    description: Shows each object that changes.
"""

EXAMPLES = r"""
- name: Install the operator, managing the clusters of its own namespace
  slurmkube.core.slurm_operator:
    image: slurmkube/operator:3f2a9c1d0b7e
    image_pull_policy: Never

- name: One operator for clusters in any namespace (a ClusterRole over every namespace)
  slurmkube.core.slurm_operator:
    image: slurmkube/operator:3f2a9c1d0b7e
    cluster_scope: true

- name: Two operator replicas (one leads), managing the clusters of two namespaces only
  slurmkube.core.slurm_operator:
    image: slurmkube/operator:3f2a9c1d0b7e
    replicas: 2
    watch_namespaces: [hpc-prod, hpc-dev]

- name: Slurm schedules the pods of namespace ml (the cluster's spec.bridge.namespaces names it too)
  slurmkube.core.slurm_operator:
    watch_namespaces: [hpc-prod]
    bridge_namespaces: [ml]

- name: Let spec authors use only the site's images and its NVMe directories
  slurmkube.core.slurm_operator:
    watch_namespaces: [hpc-prod]
    admission_policy:
      image_prefixes: [registry.example.com/hpc/]
      host_path_prefixes: [/mnt/nvme]
"""

RETURN = r"""
namespace:
  description: Namespace of the operator.
  returned: always
  type: str
  sample: slurmkube-system
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    kube_for,
    wait_options,
    waits,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_operator import (
    OperatorSettings,
    admission_settings,
    ensure_operator,
    remove_operator,
    wait_operator,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "namespace": {"type": "str", "default": "slurmkube-system"},
            "image": {"type": "str", "default": "slurmkube/operator:latest"},
            "image_pull_policy": {"type": "str", "choices": ["Always", "IfNotPresent", "Never"],
                                  "default": "IfNotPresent", "aliases": ["pull_policy"],
                                  "deprecated_aliases": [{"name": "pull_policy", "version": "1.0.0",
                                                          "collection_name": "slurmkube.core"}]},
            "image_pull_secrets": {"type": "list", "elements": "str", "default": [], "no_log": False},
            "replicas": {"type": "int", "default": 1},
            "watch_namespaces": {"type": "list", "elements": "str", "default": []},
            "cluster_scope": {"type": "bool", "default": False},
            "bridge_namespaces": {"type": "list", "elements": "str", "default": []},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "remove_crds": {"type": "bool", "default": False},
            "admission_policy": {"type": "dict", "options": {
                "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
                "image_prefixes": {"type": "list", "elements": "str", "default": ["slurmkube/"]},
                "host_path_prefixes": {"type": "list", "elements": "str", "default": []},
                "munge_secret_names": {"type": "list", "elements": "str", "default": [], "no_log": False},
                "database_secret_names": {"type": "list", "elements": "str", "default": [], "no_log": False},
                "privileged_config": {"type": "bool", "default": False},
            }},
        }, wait=True),
        supports_check_mode=True,
    )
    p = module.params
    if p["replicas"] < 0:
        module.fail_json(msg="replicas: must be 0 or more, got %d" % p["replicas"])
    try:
        waiting = wait_options(module)
        kube = kube_for(module)
        if p["state"] == "absent":
            change = remove_operator(kube, p["namespace"], p["remove_crds"], module.check_mode)
        else:
            admission, remove_admission = admission_settings(p["admission_policy"])
            settings = OperatorSettings(p["namespace"], p["image"], p["image_pull_policy"], p["replicas"],
                                        tuple(p["watch_namespaces"]), p["cluster_scope"], admission,
                                        remove_admission, tuple(p["bridge_namespaces"]),
                                        tuple(p["image_pull_secrets"]))
            change = ensure_operator(kube, settings, module.check_mode)
            if waits(module, waiting):
                wait_operator(kube, p["namespace"], p["replicas"], waiting.timeout, waiting.timer)
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    result = {"changed": change.changed, "namespace": p["namespace"]}
    if module._diff:
        result["diff"] = change.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
