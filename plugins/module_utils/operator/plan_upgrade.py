# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deciding a new Slurm image for a running cluster: what its pre-flight Job said, whether Slurm
allows the jump from the release that runs, and which images each stage of the rollout renders.
Pure functions; upgrade.py does the API calls.

Slurm's rules (https://slurm.schedmd.com/upgrades.html): a major release reads the state and
accepts the messages of the major releases before it -- two of them, three since 24.11 (the
six-month cycle) -- and never those of a newer one, so a major downgrade loses the state. Hence
the order: slurmdbd first (it must be at least as new as the slurmctld that sends it records),
then slurmctld, then slurmd and the clients (login, jail, exporter, health checks). Their upgrade
guide also asks for a copy of StateSaveLocation and of the database before: with spec.backup, a
backup run comes first (the snapshot stage), the way back once slurmctld runs the new major.

A new worker image is tried on one worker first (the canary): the workers are replaced one at a
time anyway (plan_nodes.plan_update), so the first one replaced runs it while login, jail and
exporter stay as they are. Once a worker of the new image is Ready (slurmd answers its /readyz)
the rest follow; a worker of the new image stuck (its image not pulled, its containers crashing,
not Ready CANARY_READY_TIMEOUT after it was placed on a node) turns the workers back to the
image in effect, and the image is not tried again until the spec names another. An older slurmd
under a newer slurmctld is what Slurm's order allows, so turning the workers back never needs
slurmctld's.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import parse_time, pod_ready, pod_terminating
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Images, SlurmCluster

# The images that carry Slurm (spec.images' keys); MariaDB's does not.
SLURM_IMAGE_KEYS = ("slurmdbd", "controller", "worker", "login", "jail", "exporter")
# With spec.backup, a backup run comes first (SchedMD: save StateSaveLocation and the database
# before an upgrade); it holds every Slurm image at the one in effect.
STAGE_SNAPSHOT = "snapshot"
STAGE_SLURMDBD = "slurmdbd"
STAGE_CONTROLLER = "controller"
STAGE_CANARY = "canary"
# What a stage holds at the images in effect: everything Slurm's order puts after it.
HELD_DURING = {STAGE_SNAPSHOT: SLURM_IMAGE_KEYS,
               STAGE_SLURMDBD: ("controller", "worker", "login", "jail", "exporter"),
               STAGE_CONTROLLER: ("worker", "login", "jail", "exporter"),
               STAGE_CANARY: ("login", "jail", "exporter")}
# The image each stage after the snapshot tries.
STAGE_IMAGE_KEY = {STAGE_SLURMDBD: "slurmdbd", STAGE_CONTROLLER: "controller", STAGE_CANARY: "worker"}
# What turns back when the new worker image fails on a worker: it and what its stage held.
CANARY_KEYS = (STAGE_IMAGE_KEY[STAGE_CANARY], *HELD_DURING[STAGE_CANARY])
# A worker starts in well under a minute (its image present); one of the new image not Ready
# this long after its pod was placed on a node is taken as failed: an image pulled from afar or
# a worker waiting for its jail gets this much. A pod waiting for room in the cluster is not.
CANARY_READY_TIMEOUT = datetime.timedelta(minutes=10)
# Container states kubelet keeps a pod in until someone changes it: the canary failed.
STUCK_REASONS = frozenset(("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
                           "CrashLoopBackOff", "CreateContainerError", "CreateContainerConfigError",
                           "RunContainerError"))

# The workloads whose pods run each image of spec.images, by their component label: where the
# images of a cluster an earlier release made are read, and what keeps its live spec while its
# image is held. The jail's image runs in its populate Job.
WORKLOAD_IMAGE_KEYS = {C.COMPONENT_CONTROLLER: "controller", C.COMPONENT_WORKER: "worker",
                       C.COMPONENT_LOGIN: "login", C.COMPONENT_SLURMDBD: "slurmdbd",
                       C.COMPONENT_EXPORTER: "exporter", C.COMPONENT_JAIL: "jail",
                       C.COMPONENT_DATABASE: "mariadb"}
# What the snapshot stage holds besides the Slurm images: the database it dumps (a MariaDB pod
# replaced under the dump would fail the backup).
HELD_LIVE_DURING_SNAPSHOT = ("mariadb",)
WORKLOAD_KINDS = (("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"), ("batch/v1", "Job"))

_RELEASE = re.compile(r"\b(\d{2})\.(\d{2})\.(\d+)\b")
# The first major release that reads the state of the three before it.
THREE_BACK_SINCE = (24, 11)


class CanaryVerdict(NamedTuple):
    """How the workers of a new image fare: one serves (passed), one is stuck (failure says which
    and why), or neither yet."""

    passed: bool
    failure: str


class PreflightResult(NamedTuple):
    """A pre-flight Job's outcome: still running, passed, or failed (with why)."""

    finished: bool
    passed: bool
    version: str
    error: str


def slurm_release(text: str) -> Optional[Tuple[int, int, int]]:
    """(year, month, patch) of the first Slurm release in TEXT ("slurm-wlm 26.05.5"); None if none."""
    match = _RELEASE.search(text)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def major_ordinal(year: int, month: int) -> int:
    """Major releases in order: two a year (YY.05 and YY.11 since 24.05; 23.02 and 23.11 before)."""
    return year * 2 + (1 if month >= 11 else 0)


def upgrade_refusal(running: str, new: str) -> Optional[str]:
    """Why Slurm NEW cannot take over from Slurm RUNNING in place; None when it can, or when the
    running release is not known (a slurmctld that never answered has recorded nothing to lose)."""
    old, target = slurm_release(running), slurm_release(new)
    if target is None:
        return "the new controller image reported no Slurm release (%r)" % new
    if old is None:
        return None
    behind = major_ordinal(*target[:2]) - major_ordinal(*old[:2])
    if behind < 0:
        return ("Slurm %s cannot replace Slurm %s: an older major release cannot read a newer one's state"
                % (new, running))
    window = 3 if target[:2] >= THREE_BACK_SINCE else 2
    if behind > window:
        return ("Slurm %s reads the state of the %d major releases before it, and %s is %d behind: "
                "upgrade through a release between them first" % (new, window, running, behind))
    return None


def termination_message(pods: Sequence[Mapping[str, Any]]) -> str:
    """The pre-flight container's termination message, from its (newest) pod."""
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated") or {}
            if terminated.get("message"):
                return str(terminated["message"])
    return ""


def preflight_result(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> PreflightResult:
    """What the Job's status and its pod's termination message say (`version=`, `error=` lines)."""
    conditions = {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or []
                  if c.get("status") == "True"}
    finished = "Complete" in conditions or "Failed" in conditions
    if not finished:
        return PreflightResult(False, False, "", "")
    words = dict(line.split("=", 1) for line in termination_message(pods).splitlines() if "=" in line)
    version, error = words.get("version", ""), words.get("error", "")
    if "Complete" in conditions:
        return PreflightResult(True, True, version, "")
    failed = conditions["Failed"]
    return PreflightResult(True, False, version, error or "the pre-flight Job failed (%s: %s)" % (
        failed.get("reason", ""), failed.get("message", "")))


def slurm_images(images: Images) -> Dict[str, str]:
    """spec.images' Slurm images, by key."""
    return {key: getattr(images, key) for key in SLURM_IMAGE_KEYS}


def is_slurm_config(cluster: str, obj: Mapping[str, Any]) -> bool:
    """Whether OBJ is CLUSTER's Slurm configuration (the ConfigMap an earlier release's slurmctld
    keeps until its pod is replaced)."""
    return obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == names.slurm_config(cluster)


def rendered_images(render: Optional[Mapping[str, str]], images: Images) -> Dict[str, str]:
    """The Slurm images a pass renders: RENDER (SlurmState.render) while a rollout's stage holds
    some back, else spec.images'."""
    return dict(render or slurm_images(images))


def first_stage(runs_slurmdbd: bool, in_effect: Mapping[str, str], target: Mapping[str, str]) -> str:
    """Where a rollout that passed its pre-flight starts: slurmdbd when the cluster runs one and
    its image changes, else slurmctld."""
    if runs_slurmdbd and in_effect.get("slurmdbd") != target["slurmdbd"]:
        return STAGE_SLURMDBD
    return STAGE_CONTROLLER


def staged_images(in_effect: Mapping[str, str], target: Mapping[str, str], stage: Optional[str]) -> Dict[str, str]:
    """The images a pass renders: the target's, but those a stage holds at the ones in effect."""
    held = HELD_DURING.get(stage or "", ())
    return {key: in_effect.get(key) or image if key in held else image for key, image in target.items()}


def with_images(cluster: SlurmCluster, images: Mapping[str, str]) -> SlurmCluster:
    """The cluster as rendered with these images."""
    spec = dataclasses.replace(cluster.spec, images=dataclasses.replace(cluster.spec.images, **images))
    return dataclasses.replace(cluster, spec=spec)


def workload_image_key(cluster: str, obj: Mapping[str, Any]) -> Optional[str]:
    """The spec.images key of the Slurm image a workload of CLUSTER runs (its component's), or None
    for any other object (a Job but the jail's populate Job among them)."""
    if (obj.get("apiVersion"), obj.get("kind")) not in WORKLOAD_KINDS:
        return None
    if obj["kind"] == "Job" and not names.is_jail_populate_job(cluster, obj["metadata"]["name"]):
        return None
    return WORKLOAD_IMAGE_KEYS.get((obj["metadata"].get("labels") or {}).get(C.LABEL_COMPONENT) or "")


def template_image(obj: Mapping[str, Any]) -> str:
    """The image of a workload's first container ("" when it has none)."""
    containers = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return containers[0].get("image") or ""


def images_in_workloads(cluster: str, workloads: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """The Slurm images CLUSTER's live workloads run, by spec.images key."""
    found: Dict[str, str] = {}
    for obj in workloads:
        key, image = workload_image_key(cluster, obj), template_image(obj)
        if key in SLURM_IMAGE_KEYS and image and not obj["metadata"].get("deletionTimestamp"):
            found.setdefault(key, image)
    return found


def kept_earlier(earlier: Mapping[str, str], rendered: Mapping[str, str],
                 controller_images: Sequence[str] = ()) -> Dict[str, str]:
    """The images of an earlier release a pass still renders: their workloads keep that release's
    templates (an image and the templates of its release go together: its pods' probes, programs
    and mounts are that release's). One the pass renders another image for leaves the list, but
    the controller's stays while a controller pod still runs it (CONTROLLER_IMAGES: what they run):
    the Slurm configuration files are that release's until its slurmctld is replaced."""
    return {key: image for key, image in earlier.items()
            if rendered.get(key) == image or (key == "controller" and image in controller_images)}


def held_live(earlier: Mapping[str, str], rendered: Mapping[str, str],
              rollout: Optional[Mapping[str, Any]]) -> FrozenSet[str]:
    """The spec.images keys whose workloads keep their live spec this pass: an earlier release's
    images still RENDERED, and during a rollout's snapshot the database's."""
    during = HELD_LIVE_DURING_SNAPSHOT if (rollout or {}).get("stage") == STAGE_SNAPSHOT else ()
    return frozenset((*(key for key, image in earlier.items() if rendered.get(key) == image), *during))


def with_live_workloads(cluster: str, objects: Sequence[Dict[str, Any]], live: Mapping[Tuple[str, str], Any],
                        held: FrozenSet[str]) -> List[Dict[str, Any]]:
    """The rendered OBJECTS, where a workload runs the image of a key in HELD: its live spec (its
    pod template, and the service name and claim templates the server keeps as made: a change of
    those would make it again, from whatever template is rendered then), but the replicas of the
    scale plan. Such a workload not live (deleted, or a node set added meanwhile) is not made: an
    earlier release's image would run a template of this one. The jail's populate Job is left as
    it is (a Job's template cannot change). LIVE: the live objects by (kind, name)."""
    out = []
    for obj in objects:
        key = workload_image_key(cluster, obj)
        if key is None or key not in held:
            out.append(obj)
            continue
        have = live.get((obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] == "Job" or have is None:
            continue
        spec = dict(have["spec"])
        if "replicas" in obj["spec"]:
            spec["replicas"] = obj["spec"]["replicas"]
        out.append(dict(obj, spec=spec))
    return out


def runs_image(pod: Mapping[str, Any], image: str) -> bool:
    """Any of the pod's containers (init containers too) is made from IMAGE."""
    spec = pod.get("spec") or {}
    return any(c.get("image") == image for c in (spec.get("initContainers") or []) + (spec.get("containers") or []))


def stuck_container(pod: Mapping[str, Any]) -> str:
    """'<container>: <reason> (<message>)' of the first container kubelet keeps stuck; "" if none."""
    status = pod.get("status") or {}
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            message = waiting.get("message") or ""
            return "%s: %s%s" % (container.get("name", ""), waiting["reason"], " (%s)" % message if message else "")
    return ""


def scheduled_since(pod: Mapping[str, Any]) -> Optional[datetime.datetime]:
    """When the pod was bound to a node; None while it waits for one (room in the cluster is not
    the image's to prove)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


def canary_verdict(pods: Sequence[Mapping[str, Any]], image: str, now: datetime.datetime) -> CanaryVerdict:
    """The verdict on worker image IMAGE from the cluster's worker pods: passed once one of them
    is Ready, failed when one is stuck or not Ready CANARY_READY_TIMEOUT after it was placed."""
    trying = [pod for pod in pods if runs_image(pod, image) and not pod_terminating(pod)]
    if any(pod_ready(pod) for pod in trying):
        return CanaryVerdict(True, "")
    for pod in trying:
        why = stuck_container(pod)
        placed = scheduled_since(pod)
        if not why and placed is not None and now - placed > CANARY_READY_TIMEOUT:
            why = "not Ready %d minutes after it was placed on a node" % (CANARY_READY_TIMEOUT.total_seconds() // 60)
        if why:
            return CanaryVerdict(False, "pod %s: %s" % (pod["metadata"]["name"], why))
    return CanaryVerdict(False, "")
