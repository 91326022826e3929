# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pass's step that lets a new controller image reach a running cluster only through its
pre-flight, then rolls it out in Slurm's order.

The image is tried first in a Job (render/preflight.py) on the configuration rendered for it:
it reports its Slurm release and starts slurmctld on that configuration. Until the Job passes,
and when Slurm does not allow the jump from the release that runs (plan_upgrade.py), the pass
stops before it renders or applies anything: the running cluster stays as it was, and the
status and an Event say why. Once it passed, slurmdbd gets its new image first (when the
cluster runs one) while everything else keeps the images in effect; slurmctld follows once
slurmdbd serves from its new pod; the workers (drained and replaced one at a time, as for any
change they read at start), login, jail and exporter once slurmctld does.

status.slurm records what is in effect, stage by stage, so a rollout interrupted (the operator
restarted, another image asked for) never takes a part back to an older image, and one turned
back after slurmdbd moved on is refused (the database and slurmctld's state may be the new
release's already). A new cluster
takes its images as they are, and the release it runs is read from slurmctld once it answers.
A new worker image, with the controller's or alone, is tried on one worker first, login, jail and
exporter held (the canary, plan_upgrade.py): once a worker of it serves, the rest follow; when it
fails, the workers go back to the image in effect and the status and a Warning say why. The other
images that change alone roll out as any other change does. With spec.backup, a backup run (a Job of
the backup CronJob's template) comes before slurmdbd: nothing is upgraded until it completed."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import apply_changed, owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import statefulset_ready
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import backup_parts, runs_slurmdbd
from ansible_collections.slurmkube.core.plugins.module_utils.operator.backups import finished
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import Pass, SlurmState
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_upgrade import (
    CANARY_KEYS,
    STAGE_CANARY,
    STAGE_CONTROLLER,
    STAGE_SLURMDBD,
    STAGE_SNAPSHOT,
    WORKLOAD_KINDS,
    CanaryVerdict,
    canary_verdict,
    first_stage,
    images_in_workloads,
    kept_earlier,
    preflight_result,
    rendered_images,
    slurm_images,
    slurm_release,
    staged_images,
    template_image,
    upgrade_refusal,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import Event
from ansible_collections.slurmkube.core.plugins.module_utils.render.backup import render_backup_run
from ansible_collections.slurmkube.core.plugins.module_utils.render.preflight import preflight_name, render_preflight
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_slurm_config
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmError

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def check_upgrade(p: Pass) -> None:
    """p.slurm_state: the images and release in effect, the rollout under way and the images this
    pass renders; pending while a new controller image may not replace the one in effect yet
    (the pass then renders and applies nothing); the images of an earlier release whose
    workloads keep their templates."""
    recorded = p.previous_status.get("slurm") or made_earlier(p)
    earlier = recorded.get("earlierRelease") or {}
    check_images(p, recorded)
    state = p.slurm_state
    p.slurm_state = state._replace(earlier=dict(earlier) if state.pending
                                   else kept_earlier(earlier, rendered_images(state.render, p.cluster.spec.images),
                                                     p.controllers.images if p.controllers else ()))


def made_earlier(p: Pass) -> Dict[str, Any]:
    """status.slurm for a cluster an earlier release made (its status written by an operator that
    recorded no Slurm images; a new cluster has no status yet): the images its workloads run, in
    effect, and the release slurmctld answers with. Empty for a new cluster."""
    if not p.previous_status:
        return {}
    workloads = [obj for api_version, kind in WORKLOAD_KINDS
                 for obj in p.kube.list(api_version, kind, p.cluster.namespace, {C.LABEL_CLUSTER: p.cluster.name})]
    running = images_in_workloads(p.cluster.name, workloads)
    if not running.get("controller"):
        return {}
    p.events.append(Event("Normal", "EarlierRelease", "made by an earlier slurmkube release: its pods keep the "
                          "templates that release made them with until spec.images names new images, which "
                          "replace them in Slurm's order (%s)" % ", ".join(sorted(running))))
    return {"images": dict(slurm_images(p.cluster.spec.images), **running),
            "version": release_of(p, running["controller"]), "earlierRelease": running}


def check_images(p: Pass, recorded: Mapping[str, Any]) -> None:
    """check_upgrade's p.slurm_state, from status.slurm as RECORDED."""
    wanted = slurm_images(p.cluster.spec.images)
    in_effect: Dict[str, str] = dict(recorded.get("images") or {})
    version = recorded.get("version") or ""
    rollout: Optional[Dict[str, Any]] = dict(recorded["rollout"]) if recorded.get("rollout") else None
    if not in_effect:
        # A new cluster runs what its spec says.
        p.slurm_state = SlurmState(wanted, release_of(p, wanted["controller"]))
        return
    heading_for = (rollout or {}).get("images", in_effect)["controller"]
    if wanted["controller"] != heading_for:
        state = preflight_state(p, recorded, in_effect, version)
        if state.pending:
            p.slurm_state = state
            # Nothing is reconfigured: the configuration in effect stays the recorded one.
            p.config_hash = p.previous_status.get("configHash", "")
            return
        rollout = opening(p, in_effect, wanted, state.version)
    elif rollout is None:
        remove_preflight(p, recorded.get("preflight") or "")
        failed = recorded.get("canaryFailure")
        if failed and failed["images"].get("worker") == wanted["worker"]:
            p.slurm_state = turned_back(in_effect, version, wanted, failed)
            return
        if in_effect.get("worker") == wanted["worker"]:
            p.slurm_state = SlurmState(wanted, version or release_of(p, wanted["controller"]))
            return
        rollout = {"stage": STAGE_CANARY, "images": wanted, "version": version}
        p.events.append(Event("Normal", "Canary", "one worker tries %s before the others, login, jail and "
                              "exporter follow" % wanted["worker"]))
    else:
        rollout["images"] = wanted  # other images asked for meanwhile join the rollout
    p.slurm_state = advance(p, in_effect, version, rollout)


def opening(p: Pass, in_effect: Mapping[str, str], wanted: Mapping[str, str], version: str) -> Dict[str, Any]:
    """A rollout that passed its pre-flight: with spec.backup, a backup run first (its Job named
    for this rollout), else slurmdbd's stage or slurmctld's."""
    rollout: Dict[str, Any] = {"images": dict(wanted), "version": version}
    if not p.cluster.spec.backup.enabled:
        return dict(rollout, stage=first_stage(runs_slurmdbd(p.cluster), in_effect, wanted))
    started = content_hash([wanted["controller"], p.clock().isoformat()])[:8]
    return dict(rollout, stage=STAGE_SNAPSHOT, snapshot=names.upgrade_backup(p.cluster.name, started))


def advance(p: Pass, in_effect: Dict[str, str], version: str, rollout: Dict[str, Any]) -> SlurmState:
    """The rollout moved on as far as the live pods allow, and the images this pass renders."""
    target = rollout["images"]
    if rollout["stage"] == STAGE_SNAPSHOT:
        after = first_stage(runs_slurmdbd(p.cluster), in_effect, target)
        if not backed_up(p, rollout, after):
            return SlurmState(in_effect, version, rollout, render=staged_images(in_effect, target, STAGE_SNAPSHOT))
        rollout["stage"] = after
        rollout.pop("snapshotFailed", None)
    # A cluster that stopped running slurmdbd meanwhile has no slurmdbd to wait for.
    if rollout["stage"] == STAGE_SLURMDBD and (not runs_slurmdbd(p.cluster)
                                               or serves(p, names.slurmdbd(p.cluster.name), target["slurmdbd"])):
        in_effect["slurmdbd"] = target["slurmdbd"]
        rollout["stage"] = STAGE_CONTROLLER
        p.events.append(Event("Normal", "UpgradeStage", "slurmdbd serves from %s; slurmctld next"
                              % target["slurmdbd"]))
    if rollout["stage"] == STAGE_CONTROLLER and p.slurm_nodes is not None \
            and controllers_serve(p, target["controller"]):
        in_effect["controller"], version = target["controller"], rollout["version"]
        if in_effect.get("worker") == target["worker"]:
            p.events.append(Event("Normal", "Upgraded", "slurmctld runs Slurm %s from %s; login, jail and "
                                  "exporter follow" % (version, target["controller"])))
            return SlurmState(dict(target), version)
        rollout["stage"] = STAGE_CANARY
        p.events.append(Event("Normal", "UpgradeStage", "slurmctld runs Slurm %s from %s; one worker tries %s "
                              "next" % (version, target["controller"], target["worker"])))
    if rollout["stage"] == STAGE_CANARY:
        if target["worker"] == in_effect.get("worker"):
            return SlurmState(dict(target), rollout["version"])  # the spec went back: nothing to try
        return try_canary(p, in_effect, rollout)
    return SlurmState(in_effect, version, rollout, render=staged_images(in_effect, target, rollout["stage"]))


def backed_up(p: Pass, rollout: Dict[str, Any], after: str) -> bool:
    """The snapshot stage's backup run: its Job made when missing (again once deleted); True once it
    completed, or when spec.backup was turned off meanwhile (AFTER: the stage that follows, for the
    Events). A failed run holds the rollout, with one Warning."""
    name, namespace = rollout["snapshot"], p.cluster.namespace
    then = "slurmdbd" if after == STAGE_SLURMDBD else "slurmctld"
    if not p.cluster.spec.backup.enabled:
        p.events.append(Event("Normal", "UpgradeStage", "spec.backup was turned off: no backup before the "
                              "upgrade (Job %s); %s next" % (name, then)))
        return True
    job = p.kube.get("batch/v1", "Job", name, namespace)
    if job is None:
        apply_changed(p.kube, [owned_by(render_backup_run(p.cluster, name), p.cluster_obj)])
        rollout.pop("snapshotFailed", None)
        p.events.append(Event("Normal", "UpgradeSnapshot", "Job %s backs up %s before Slurm %s replaces the release "
                              "in effect; nothing is upgraded until it completed"
                              % (name, ", ".join(backup_parts(p.cluster)), rollout["version"])))
        return False
    end = finished(job)
    if end is not None and end[0] == "Complete":
        p.events.append(Event("Normal", "UpgradeStage", "the backup before the upgrade is done (Job %s); %s next"
                              % (name, then)))
        return True
    if end is not None and not rollout.get("snapshotFailed"):
        rollout["snapshotFailed"] = True
        p.events.append(Event("Warning", "UpgradeSnapshotFailed", "the backup before the upgrade failed (kubectl "
                              "logs job/%s): nothing is upgraded until one succeeds; delete the Job to run it "
                              "again, or turn spec.backup off to upgrade without one" % name))
    return False


def try_canary(p: Pass, in_effect: Dict[str, str], rollout: Dict[str, Any]) -> SlurmState:
    """The canary's stage: the new worker image on the workers replaced so far, login, jail and
    exporter held; the whole target once one of them serves; the workers turned back when one is
    stuck."""
    target, version = rollout["images"], rollout["version"]
    if any(nodeset.spec.replicas for nodeset in p.nodesets):
        pods = p.kube.list("v1", "Pod", p.cluster.namespace,
                           names.selector_labels(p.cluster.name, C.COMPONENT_WORKER))
        verdict = canary_verdict(pods, target["worker"], p.clock())
    else:
        verdict = CanaryVerdict(True, "")  # no worker to try it on
    if verdict.passed:
        p.events.append(Event("Normal", "CanaryPassed", "a worker serves from %s: the other workers, login, jail "
                              "and exporter follow" % target["worker"]))
        return SlurmState(dict(target), version)
    if verdict.failure:
        message = ("%s failed on a worker (%s): the workers, login, jail and exporter stay on the images in "
                   "effect (worker %s) until the spec names another worker image"
                   % (target["worker"], verdict.failure, in_effect["worker"]))
        p.events.append(Event("Warning", "CanaryFailed", message))
        return turned_back(in_effect, version, target, {"images": dict(target), "message": message})
    return SlurmState(in_effect, version, rollout, render=staged_images(in_effect, target, STAGE_CANARY))


def turned_back(in_effect: Mapping[str, str], version: str, wanted: Mapping[str, str],
                failed: Mapping[str, Any]) -> SlurmState:
    """After a failed canary: the workers, login, jail and exporter at the images in effect, the
    rest as the spec asks (and so in effect)."""
    render = dict(wanted, **{key: in_effect[key] for key in CANARY_KEYS if key in in_effect})
    return SlurmState(render, version, render=render, canary_failure=failed)


def serves(p: Pass, statefulset: str, image: str) -> bool:
    """The StatefulSet's pods run IMAGE, its rollout over and every pod Ready."""
    sts = p.kube.get("apps/v1", "StatefulSet", statefulset, p.cluster.namespace)
    return statefulset_ready(sts) and template_image(sts or {}) == image


def controllers_serve(p: Pass, image: str) -> bool:
    """The controllers' template runs IMAGE, every controller pod was made from it and is up, and
    one serves (a standby is never Ready: the StatefulSet's own counts cannot say this)."""
    sts = p.kube.get("apps/v1", "StatefulSet", names.controller(p.cluster.name), p.cluster.namespace)
    c = p.controllers
    return template_image(sts or {}) == image and c is not None and bool(c.serving) \
        and not c.down and c.outdated == ()


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
    """The image the serving slurmctld pod runs; "" when none serves."""
    serving = p.controllers.serving if p.controllers else ""
    pod = (p.kube.get("v1", "Pod", serving, p.cluster.namespace) if serving else None) or {}
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return containers[0].get("image") or ""


def replaced(version: str, running_image: str) -> str:
    """What a new image replaces, as Events and the status name it."""
    return "Slurm %s" % version if version else running_image


def preflight_state(p: Pass, recorded: Mapping[str, Any], in_effect: Mapping[str, str], version: str) -> SlurmState:
    """Where the new controller image stands: its pre-flight started, running, refused, or passed
    (then the state's version is the image's release)."""
    cluster, image = p.cluster, p.cluster.spec.images.controller
    files = render_slurm_config(cluster, sorted(p.nodesets, key=lambda ns: ns.name), p.placement).files
    name = preflight_name(cluster, files)
    current = replaced(version, in_effect["controller"])
    running = "the pre-flight of %s runs (Job %s)" % (image, name)
    held = dict(recorded.get("rollout") or {})
    job = p.kube.get("batch/v1", "Job", name, cluster.namespace)
    if job is None:
        remove_preflight(p, recorded.get("preflight") or "")
        apply_changed(p.kube, [owned_by(obj, p.cluster_obj) for obj in render_preflight(cluster, files)])
        p.events.append(Event("Normal", "PreFlight", "trying %s on the new configuration before it replaces %s"
                              % (image, current)))
        return SlurmState(in_effect, version, held or None, name, waiting=running)
    result = preflight_result(job, p.kube.list("v1", "Pod", cluster.namespace, {JOB_NAME_LABEL: name}))
    if not result.finished:
        return SlurmState(in_effect, version, held or None, name, waiting=running)
    refusal = refusal_of(result.version, version, written_by(recorded, version)) if result.passed \
        else result.error
    if refusal:
        message = "%s may not replace %s: %s" % (image, current, refusal)
        if recorded.get("refusal") != message:
            p.events.append(Event("Warning", "UpgradeRefused", message))
        return SlurmState(in_effect, version, held or None, name, refusal=message)
    p.events.append(Event("Normal", "Upgrade", "Slurm %s (%s) replaces %s in Slurm's order: it passed its "
                          "pre-flight" % (result.version, image, current)))
    remove_preflight(p, name)
    return SlurmState(in_effect, result.version)


def written_by(recorded: Mapping[str, Any], version: str) -> str:
    """The newest release that may have written the cluster's state or database: a rollout's once
    it passed its slurmdbd stage (slurmdbd converted the database, the new slurmctld may have
    saved its state), else the one in effect."""
    rollout = recorded.get("rollout") or {}
    return rollout.get("version") or version if rollout.get("stage") == STAGE_CONTROLLER else version


def refusal_of(new: str, version: str, written: str) -> Optional[str]:
    """Why Slurm NEW may not follow the release in effect, or the one that wrote the state last
    (a rollout turned back after its first stage)."""
    refusal = upgrade_refusal(version, new)
    if refusal is None and written != version:
        later = upgrade_refusal(written, new)
        return "Slurm %s may have written the cluster's state or database already: %s" % (written, later) \
            if later else None
    return refusal


def remove_preflight(p: Pass, name: str) -> None:
    """An earlier pre-flight's Job (and its pod) and ConfigMap, once nothing waits on them."""
    if name:
        p.kube.delete("batch/v1", "Job", name, p.cluster.namespace)
        p.kube.delete("v1", "ConfigMap", name, p.cluster.namespace)
