#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jail_volume
short_description: Ensure a Slurm jail volume and fill it once from the jail image
version_added: "0.2.0"
description:
  - Ensures the jail, the shared root filesystem that every login session and job of a Slurm
    cluster sees as C(/), as a ReadWriteMany PersistentVolumeClaim; a new claim of a storage
    class, an existing claim, or an NFS export (a PersistentVolume reserved for the claim).
  - Fills it from the jail image with a Job, once. The jail keeps a version marker (the image,
    or O(version)); a Job that finds its version there does nothing. A new version replaces
    the image's C(/usr) and adds missing files; users, homes and edited configuration stay.
  - The objects are the ones the slurmkube operator renders for a cluster's own jail. To use
    the volume, give the cluster O(name) as C(spec.jail.existingClaim) and the same image as
    C(spec.images.jail); the operator then makes no claim, and its own populate Job finds the
    marker at that version and does nothing.
  - Node-local mounts inside the jail (sub-mounts) are part of the cluster, see
    C(spec.jail.subMounts) of the SlurmCluster.
  - Options are checked before anything is written; the storage class must exist (or a
    default class, when none is named).
author:
  - slurmkube maintainers (@slurmkube)
options:
  name:
    description:
      - Name of the claim this module makes, and prefix of the populate Jobs.
      - With O(existing_claim), only the Jobs' prefix.
    type: str
    required: true
  namespace:
    description: Namespace of the claim (the cluster's namespace).
    type: str
    default: default
  state:
    description:
      - V(present) ensures the volume and its population.
      - V(absent) removes the populate Jobs. The claim and the jail's data stay unless
        O(purge=true).
    type: str
    choices: [present, absent]
    default: present
  size:
    description: Requested size of a new claim, a Kubernetes quantity; a claim never shrinks.
    type: str
    default: 10Gi
  storage_class:
    description:
      - ReadWriteMany storage class of a new claim; the cluster's default class when unset.
      - Mutually exclusive with O(existing_claim) and O(nfs).
    type: str
  existing_claim:
    description: Populate this ReadWriteMany claim instead of making one; it is never deleted.
    type: str
  nfs:
    description:
      - An NFS export to use as the jail, through a PersistentVolume C(<namespace>-<name>)
        (reclaim policy Retain) and a claim bound to it.
    type: dict
    suboptions:
      server:
        description: NFS server name or address.
        type: str
        required: true
      path:
        description: Exported path.
        type: str
        required: true
  image:
    description: The jail image (C(slurmkube/jail)); required to populate.
    type: str
  image_pull_policy:
    description: Pull policy of the populate Job.
    type: str
    choices: [Always, IfNotPresent, Never]
    default: IfNotPresent
  image_pull_secrets:
    description:
      - Secrets of O(namespace) (type C(kubernetes.io/dockerconfigjson)) the populate Job pulls
        O(image) with, for a registry that asks a login. Empty adds none.
    type: list
    elements: str
    default: []
    version_added: "0.4.0"
  version:
    description: What the jail's marker records; the image when unset.
    type: str
  populate:
    description: Run the populate Job.
    type: bool
    default: true
  repopulate:
    description:
      - Run a populate Job now even when the marker is at the version, updating the image's
        files (the users' files stay). Reports a change every time.
    type: bool
    default: false
  purge:
    description:
      - With O(state=absent), also delete the claim this module made (and its NFS
        PersistentVolume), which deletes the data when the class's reclaim policy is Delete.
        Refused while a pod mounts the claim. An NFS export's files are never deleted.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - slurmkube.core.kube_auth
  - slurmkube.core.kube_auth.wait
seealso:
  - module: slurmkube.core.jail_user
  - module: slurmkube.core.slurm_cluster
attributes:
  check_mode:
    support: full
    description: Changes are sent as a server-side dry run.
  diff_mode:
    support: full
    description: Shows the spec before and after of each object that changes.
notes:
  - With O(wait=true) the module waits until the populate Job has completed.
"""

EXAMPLES = r"""
- name: A 100Gi jail on a ReadWriteMany class, filled from the jail image
  slurmkube.core.jail_volume:
    name: demo-jail-data
    namespace: slurm
    storage_class: nfs-client
    size: 100Gi
    image: slurmkube/jail:4fe1148c8f22
  register: jail

- name: The cluster mounts that jail
  slurmkube.core.slurm_cluster:
    name: demo
    namespace: slurm
    spec:
      images: {jail: slurmkube/jail:4fe1148c8f22}
      jail: {existingClaim: "{{ jail.claim }}"}

- name: A jail on an existing NFS export
  slurmkube.core.jail_volume:
    name: demo-jail-data
    namespace: slurm
    nfs: {server: nfs.example.org, path: /exports/jail}
    size: 1Ti
    image: slurmkube/jail:4fe1148c8f22

- name: Stop managing the jail, keep its data
  slurmkube.core.jail_volume:
    name: demo-jail-data
    namespace: slurm
    state: absent
"""

RETURN = r"""
claim:
  description: The PersistentVolumeClaim pods mount (C(spec.jail.existingClaim) of the cluster).
  returned: always
  type: str
  sample: demo-jail-data
populate_job:
  description: Name of the populate Job for this version.
  returned: when O(state=present) and O(populate=true) or O(repopulate=true)
  type: str
  sample: demo-jail-data-populate-1b2c3d4e
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    kube_for,
    wait_options,
    waits,
    with_common,
)
from ansible_collections.slurmkube.core.plugins.module_utils.ops.jail_volume import (
    ensure_absent,
    ensure_present,
    wait_populated,
    wanted_from_params,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=with_common({
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": "default"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "size": {"type": "str", "default": "10Gi"},
            "storage_class": {"type": "str"},
            "existing_claim": {"type": "str"},
            "nfs": {"type": "dict", "options": {
                "server": {"type": "str", "required": True},
                "path": {"type": "str", "required": True},
            }},
            "image": {"type": "str"},
            "image_pull_policy": {"type": "str", "choices": ["Always", "IfNotPresent", "Never"],
                                  "default": "IfNotPresent"},
            "image_pull_secrets": {"type": "list", "elements": "str", "default": [], "no_log": False},
            "version": {"type": "str"},
            "populate": {"type": "bool", "default": True},
            "repopulate": {"type": "bool", "default": False},
            "purge": {"type": "bool", "default": False},
        }, wait=True),
        mutually_exclusive=[("storage_class", "existing_claim", "nfs")],
        supports_check_mode=True,
    )
    p = module.params
    try:
        want = wanted_from_params(p)
        waiting = wait_options(module)
        kube = kube_for(module)
        if want.state == "absent":
            result = ensure_absent(kube, want, module.check_mode)
        else:
            result = ensure_present(kube, want, module.check_mode)
            if result.populate_job and waits(module, waiting):
                wait_populated(kube, want.namespace, result.populate_job, waiting.timeout, waiting.timer)
    except SlurmkubeError as exc:
        module.fail_json(msg=str(exc))
    out = {"changed": result.changed, "claim": result.claim}
    if result.populate_job:
        out["populate_job"] = result.populate_job
    if module._diff:
        out["diff"] = result.diffs
    module.exit_json(**out)


if __name__ == "__main__":
    main()
