# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the jail_volume module does: the jail's ReadWriteMany volume, filled once from the jail image.

The objects come from render/jail.py, the renderers the operator uses, so a jail made here is
the jail a SlurmCluster would have made. A cluster then mounts it through
``spec.jail.existingClaim``; the operator renders no claim of its own for it, and its populate
Job finds the marker already at the image's version and does nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, diff_of
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import (
    REAL_TIME,
    Poll,
    Timer,
    job_outcome,
    wait_until,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import is_object_name
from ansible_collections.slurmkube.core.plugins.module_utils.quantity import QuantityError, parse_quantity
from ansible_collections.slurmkube.core.plugins.module_utils.render import jail as render_jail
from ansible_collections.slurmkube.core.plugins.module_utils.render.common import JAIL_VOLUME

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Job names become a pod label (63 characters): "<name>-repopulate-<8 hex>" must fit.
NAME_MAX = 63 - len("-repopulate-") - 8
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


class JailVolumeError(SlurmkubeError):
    """The jail volume cannot be ensured as asked; the message names the option or the object."""


@dataclass(frozen=True)
class WantedVolume:
    """The module's options."""

    name: str
    namespace: str
    state: str = "present"
    size: str = "10Gi"
    storage_class: Optional[str] = None
    existing_claim: Optional[str] = None
    nfs_server: Optional[str] = None
    nfs_path: Optional[str] = None
    image: Optional[str] = None
    pull_policy: str = "IfNotPresent"
    # Secrets of the namespace the populate Job pulls the image with.
    image_pull_secrets: Tuple[str, ...] = ()
    version: Optional[str] = None
    populate: bool = True
    repopulate: bool = False
    purge: bool = False

    @property
    def claim(self) -> str:
        """The claim pods mount: the user's own, or the one made here."""
        return self.existing_claim or self.name

    @property
    def marker_version(self) -> str:
        """What the jail's marker records: the version given, else the image."""
        return self.version or self.image or ""

    @property
    def nfs(self) -> bool:
        """The jail is an NFS export (a PersistentVolume made here, and its claim)."""
        return self.nfs_server is not None


class VolumeResult(NamedTuple):
    """Outcome of ensuring the jail volume."""

    changed: bool
    claim: str
    populate_job: Optional[str]
    diffs: List[Dict[str, Any]]


def wanted_from_params(params: Mapping[str, Any]) -> WantedVolume:
    """The options as a WantedVolume, checked; the error names the bad option."""
    nfs = params.get("nfs") or {}
    want = WantedVolume(
        name=params["name"], namespace=params["namespace"], state=params.get("state") or "present",
        size=str(params.get("size") or "10Gi"), storage_class=params.get("storage_class"),
        existing_claim=params.get("existing_claim"), nfs_server=nfs.get("server"), nfs_path=nfs.get("path"),
        image=params.get("image"), pull_policy=params.get("image_pull_policy") or "IfNotPresent",
        image_pull_secrets=tuple(params.get("image_pull_secrets") or ()),
        version=params.get("version"), populate=params.get("populate", True) is not False,
        repopulate=bool(params.get("repopulate")), purge=bool(params.get("purge")))
    check_wanted(want)
    return want


def check_wanted(want: WantedVolume) -> None:
    """Fail on options the API server would refuse, or that contradict each other."""
    if not DNS1123_LABEL.match(want.name) or len(want.name) > NAME_MAX:
        raise JailVolumeError("name: %r must be a DNS label of at most %d characters" % (want.name, NAME_MAX))
    if want.existing_claim is not None and not DNS1123_LABEL.match(want.existing_claim):
        raise JailVolumeError("existing_claim: %r is not a valid claim name" % want.existing_claim)
    sources = [o for o, v in (("storage_class", want.storage_class), ("existing_claim", want.existing_claim),
                              ("nfs", want.nfs_server)) if v is not None]
    if len(sources) > 1:
        raise JailVolumeError("%s: only one of storage_class, existing_claim and nfs may be set" % sources[1])
    try:
        if parse_quantity(want.size) <= 0:
            raise QuantityError("must be more than 0")
    except QuantityError as exc:
        raise JailVolumeError("size: %r is not a Kubernetes quantity such as 10Gi (%s)" % (want.size, exc)) from exc
    if want.nfs and (not want.nfs_server or not (want.nfs_path or "").startswith("/")):
        raise JailVolumeError("nfs: needs a server and an absolute path, got %r:%r" % (want.nfs_server, want.nfs_path))
    if want.state == "present" and (want.populate or want.repopulate) and not want.image:
        raise JailVolumeError("image: the jail image is required to populate the jail (or set populate=false)")
    if want.pull_policy not in PULL_POLICIES:
        raise JailVolumeError("image_pull_policy: must be one of %s" % ", ".join(PULL_POLICIES))
    for secret in want.image_pull_secrets:
        if not is_object_name(secret):
            raise JailVolumeError("image_pull_secrets: must be Secret names, got %r" % secret)
    if want.version is not None and (not want.version.strip() or "\n" in want.version):
        raise JailVolumeError("version: must be one non-empty line")


def metadata(want: WantedVolume, name: str, namespaced: bool = True) -> Dict[str, Any]:
    """Object metadata with the module's labels."""
    meta: Dict[str, Any] = {"name": name, "labels": names.standalone_labels(want.name, C.COMPONENT_JAIL)}
    if namespaced:
        meta["namespace"] = want.namespace
    return meta


def nfs_volume_name(want: WantedVolume) -> str:
    """PersistentVolumes are cluster-wide: the name carries the namespace."""
    return names.jail_volume_pv(want.namespace, want.name)


def populate_job_name(want: WantedVolume, now: Callable[[], float] = time.time) -> str:
    """One Job per version; a repopulation gets a Job of its own each time it is asked for."""
    if want.repopulate:
        return names.jail_volume_repopulate_job(want.name, content_hash([want.marker_version, repr(now())])[:8])
    return names.jail_volume_populate_job(want.name, render_jail.populate_job_suffix(want.marker_version))


def render_volume(want: WantedVolume) -> List[Dict[str, Any]]:
    """The PersistentVolume (NFS) and the claim, or nothing for an existing claim."""
    if want.existing_claim is not None:
        return []
    if want.nfs:
        pv = render_jail.nfs_volume(metadata(want, nfs_volume_name(want), namespaced=False), want.size,
                                    want.nfs_server or "", want.nfs_path or "", want.namespace, want.name)
        claim = render_jail.jail_claim(metadata(want, want.name), want.size, "", nfs_volume_name(want))
        return [pv, claim]
    return [render_jail.jail_claim(metadata(want, want.name), want.size, want.storage_class)]


def render_populate_job(want: WantedVolume, job_name: str) -> Dict[str, Any]:
    """The populate Job on the claim, as the namespace's default ServiceAccount without a token."""
    volume = {"name": JAIL_VOLUME, "persistentVolumeClaim": {"claimName": want.claim}}
    settings: Dict[str, Any] = {"automountServiceAccountToken": False, "enableServiceLinks": False}
    if want.image_pull_secrets:
        settings["imagePullSecrets"] = [{"name": secret} for secret in want.image_pull_secrets]
    labels = names.standalone_labels(want.name, C.COMPONENT_JAIL)
    return render_jail.populate_job(metadata(want, job_name), labels, want.image or "", want.pull_policy,
                                    want.marker_version, volume, settings,
                                    command=render_jail.populate_command(want.repopulate))


def check_against_cluster(kube: Kube, want: WantedVolume) -> None:
    """What only the API can tell, checked before any write: the class, the claim, immutable fields."""
    if want.existing_claim is not None:
        claim = kube.get("v1", "PersistentVolumeClaim", want.existing_claim, want.namespace)
        if claim is None:
            raise JailVolumeError("existing_claim: no PersistentVolumeClaim %s in namespace %s"
                                  % (want.existing_claim, want.namespace))
        if "ReadWriteMany" not in ((claim.get("spec") or {}).get("accessModes") or []):
            raise JailVolumeError("existing_claim: %s is not ReadWriteMany (every login and worker pod mounts "
                                  "the jail)" % want.existing_claim)
        return
    if not want.nfs:
        check_storage_class(kube, want.storage_class)
    live = kube.get("v1", "PersistentVolumeClaim", want.name, want.namespace)
    if live is not None:
        check_claim_change(want, live)


def check_storage_class(kube: Kube, name: Optional[str]) -> None:
    """The class exists, or a default class does when none is named (else the claim stays Pending)."""
    if name is not None:
        if kube.get("storage.k8s.io/v1", "StorageClass", name) is None:
            raise JailVolumeError("storage_class: no StorageClass named %s in the cluster" % name)
        return
    classes = kube.list("storage.k8s.io/v1", "StorageClass")
    if not any(((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
               for c in classes):
        raise JailVolumeError("storage_class: not set and the cluster has no default StorageClass")


def check_claim_change(want: WantedVolume, live: Mapping[str, Any]) -> None:
    """A claim's class cannot change and its size cannot shrink."""
    spec = live.get("spec") or {}
    if want.storage_class is not None and spec.get("storageClassName") != want.storage_class:
        raise JailVolumeError("storage_class: claim %s already uses class %s; a claim's class cannot change"
                              % (want.name, spec.get("storageClassName")))
    current = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if current is not None and parse_quantity(str(current)) > parse_quantity(want.size):
        raise JailVolumeError("size: claim %s has %s; a claim cannot shrink to %s" % (want.name, current, want.size))


def ensure_present(kube: Kube, want: WantedVolume, check_mode: bool) -> VolumeResult:
    """Apply the volume and the populate Job where they differ (a server-side dry run in check mode)."""
    check_against_cluster(kube, want)
    objects = render_volume(want)
    job_name = None
    if want.populate or want.repopulate:
        job_name = populate_job_name(want)
        objects.append(render_populate_job(want, job_name))
    applied = apply_changed(kube, objects, dry_run=check_mode)
    return VolumeResult(bool(applied), want.claim, job_name, [diff_of(a) for a in applied])


def populate_jobs(kube: Kube, want: WantedVolume) -> List[Dict[str, Any]]:
    """The populate Jobs this module made for the volume."""
    return kube.list("batch/v1", "Job", want.namespace, {C.LABEL_INSTANCE: want.name,
                                                         C.LABEL_COMPONENT: C.COMPONENT_JAIL,
                                                         C.LABEL_MANAGED_BY: C.MANAGED_BY})


def ensure_absent(kube: Kube, want: WantedVolume, check_mode: bool) -> VolumeResult:
    """Remove the populate Jobs; the claim and its data only with purge, and never a claim in use."""
    doomed = populate_jobs(kube, want)
    if want.purge and want.existing_claim is None:
        doomed += purgeable(kube, want)
    diffs = [{"before_header": "%s %s" % (o["kind"], o["metadata"]["name"]), "before": {"spec": o.get("spec")},
              "after": {}} for o in doomed]
    if not check_mode:
        for obj in doomed:
            meta = obj["metadata"]
            kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    return VolumeResult(bool(doomed), want.claim, None, diffs)


def purgeable(kube: Kube, want: WantedVolume) -> List[Dict[str, Any]]:
    """The claim (and NFS PersistentVolume) this module made, when no pod mounts the claim."""
    users = pods_mounting(kube, want.namespace, want.name)
    if users:
        raise JailVolumeError("purge: claim %s is still mounted by pod %s; remove the cluster first"
                              % (want.name, ", ".join(users)))
    found = [kube.get("v1", "PersistentVolumeClaim", want.name, want.namespace),
             kube.get("v1", "PersistentVolume", nfs_volume_name(want))]
    return [o for o in found if o is not None and made_here(o, want)]


def made_here(obj: Mapping[str, Any], want: WantedVolume) -> bool:
    """The object carries this module's labels for this volume (a user's own claim is never purged)."""
    found = (obj.get("metadata") or {}).get("labels") or {}
    return found.get(C.LABEL_INSTANCE) == want.name and found.get(C.LABEL_MANAGED_BY) == C.MANAGED_BY


def pods_mounting(kube: Kube, namespace: str, claim: str) -> List[str]:
    """Names of pods in the namespace that mount the claim (finished pods hold no mount)."""
    names = []
    for pod in kube.list("v1", "Pod", namespace):
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        volumes = (pod.get("spec") or {}).get("volumes") or []
        if any((v.get("persistentVolumeClaim") or {}).get("claimName") == claim for v in volumes):
            names.append(pod["metadata"]["name"])
    return sorted(names)


def wait_populated(kube: Kube, namespace: str, job_name: str, timeout: int, timer: Timer = REAL_TIME) -> None:
    """Until the populate Job has completed; fails when it failed or took longer than timeout."""
    def probe() -> Poll:
        job = kube.get("batch/v1", "Job", job_name, namespace)
        outcome = job_outcome(job)
        if outcome == "Failed":
            raise JailVolumeError("populate Job %s/%s failed: %s (see its pod's log)"
                                  % (namespace, job_name, failure_message(job)))
        return Poll(outcome == "Complete")

    if not wait_until(probe, timeout, timer).done:
        raise JailVolumeError("populate Job %s/%s not complete after %ds" % (namespace, job_name, timeout))


def failure_message(job: Optional[Mapping[str, Any]]) -> str:
    """The Failed condition's reason and message."""
    conds: Sequence[Mapping[str, Any]] = (job or {}).get("status", {}).get("conditions") or []
    failed = next((c for c in conds if c.get("type") == "Failed"), {})
    return "%s: %s" % (failed.get("reason", "unknown"), failed.get("message", ""))
