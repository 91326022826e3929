# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that lets a new controller image reach a running cluster only through its
pre-flight. The image is tried first in a Job (render/preflight.py) on the configuration just
rendered: it reports its Slurm release and starts slurmctld on that configuration. Until the Job
passes, and when Slurm does not allow the jump from the release that runs (plan_upgrade.py),
the pass stops before it applies anything: the running cluster stays as it was, and the status
and an Event say why. A new cluster takes its images as they are, and the release it runs is
read from slurmctld once it answers."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass, SlurmState
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import (
    preflight_result,
    slurm_release,
    upgrade_refusal,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.preflight import preflight_name, render_preflight
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def check_upgrade(p: Pass) -> None:
    """p.slurm_state: the image and release the cluster runs; pending while a new image may not
    replace it yet (the pass then applies nothing)."""
    recorded = p.previous_status.get("slurm") or {}
    image = p.cluster.spec.images.controller
    running_image, version = recorded.get("image") or "", recorded.get("version") or ""
    if not running_image or running_image == image:
        remove_preflight(p, recorded.get("preflight") or "")
        p.slurm_state = SlurmState(image, version or release_of(p, image))
        return
    p.slurm_state = preflight_state(p, recorded, running_image, version)
    if p.slurm_state.pending:
        # Nothing is reconfigured: the configuration in effect stays the recorded one.
        p.config_hash = p.previous_status.get("configHash", "")


def release_of(p: Pass, image: str) -> str:
    """The release slurmctld's pod reports once it answers and runs IMAGE; "" before (a pod of an
    earlier image, about to be replaced, would report another)."""
    if p.slurm is None or controller_image(p) != image:
        return ""
    try:
        release = slurm_release(p.slurm.release())
    except (SlurmError, KubeError):
        return ""
    return "%d.%02d.%d" % release if release else ""


def controller_image(p: Pass) -> str:
    """The image slurmctld's pod runs; "" when there is no such pod."""
    pod = p.kube.get("v1", "Pod", names.controller_pod(p.cluster.name), p.cluster.namespace) or {}
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return containers[0].get("image") or ""


def replaced(version: str, running_image: str) -> str:
    """What a new image replaces, as Events and the status name it."""
    return "Slurm %s" % version if version else running_image


def preflight_state(p: Pass, recorded: Mapping[str, Any], running_image: str, version: str) -> SlurmState:
    """Where the new image stands: its pre-flight started, running, refused, or passed."""
    cluster, image = p.cluster, p.cluster.spec.images.controller
    name = preflight_name(cluster, p.rendered.config_files)
    running = "the pre-flight of %s runs (Job %s)" % (image, name)
    job = p.kube.get("batch/v1", "Job", name, cluster.namespace)
    if job is None:
        remove_preflight(p, recorded.get("preflight") or "")
        preflight = render_preflight(cluster, p.rendered.config_files)
        apply_changed(p.kube, [owned_by(obj, p.cluster_obj) for obj in preflight])
        p.events.append(Event("Normal", "PreFlight", "trying %s on the new configuration before it replaces %s"
                              % (image, replaced(version, running_image))))
        return SlurmState(running_image, version, name, waiting=running)
    pods = p.kube.list("v1", "Pod", cluster.namespace, {JOB_NAME_LABEL: name})
    result = preflight_result(job, pods)
    if not result.finished:
        return SlurmState(running_image, version, name, waiting=running)
    refusal = upgrade_refusal(version, result.version) if result.passed else result.error
    if refusal:
        message = "%s may not replace %s: %s" % (image, replaced(version, running_image), refusal)
        if recorded.get("refusal") != message:
            p.events.append(Event("Warning", "UpgradeRefused", message))
        return SlurmState(running_image, version, name, refusal=message)
    p.events.append(Event("Normal", "Upgrade", "Slurm %s (%s) replaces %s: it passed its pre-flight"
                          % (result.version, image, replaced(version, running_image))))
    remove_preflight(p, name)
    return SlurmState(image, result.version)


def remove_preflight(p: Pass, name: str) -> None:
    """An earlier pre-flight's Job (and its pod) and ConfigMap, once nothing waits on them."""
    if name:
        p.kube.delete("batch/v1", "Job", name, p.cluster.namespace)
        p.kube.delete("v1", "ConfigMap", name, p.cluster.namespace)
