"""A new controller image reaches a running cluster only through its pre-flight, then in Slurm's
order (issue 34, item 2): a Job runs the image on the configuration rendered for it before
anything changes. Refused (a configuration the new slurmctld will not start on), the running
cluster stays exactly as it was and the status and an Event say slurmctld's words; passed,
slurmdbd gets its new pod first, slurmctld once slurmdbd serves, the worker once slurmctld does
(and once its job ended: a worker is replaced drained and idle); the job running meanwhile goes
on and its record reaches slurmdbd. A worker image that fails on the first worker to run it (the
canary) turns the workers back to the image in effect. Real API server, Job, slurmctld, slurmdbd
and MariaDB.

The images tried are the project's under second names: a change of images as the operator
sees it, with the Slurm release of the images built here (an upgrade from release 0.3.0's images,
Slurm 24.11: test_upgrade_from_release.py).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from kube_helpers import Cluster, load_images, wait_for
from manual_blocks import run_commands
from slurm_helpers import (
    ACCOUNTING_IMAGES,
    SLURM_IMAGES,
    TINY,
    TINY_NODES,
    Operator,
    SlurmView,
    cluster_status,
    in_service,
    running_cluster,
    tiny_cluster_spec,
    wait_ready,
    with_accounting_images,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

# On one Kubernetes node or several: in whichever of tests/run's two pytest processes reaches it
# first (either_lane).
pytestmark = [pytest.mark.k8s, pytest.mark.either_lane(seconds=230)]

CLUSTER = "upg"
CONTROLLER_POD = "%s-controller-0" % CLUSTER
SLURMDBD_POD = "%s-slurmdbd-0" % CLUSTER
WORKER_POD = "%s-cpu-0" % CLUSTER
# The images the upgrade changes, renamed.
RENAMED = ("controller", "slurmdbd", "worker")
# The Events of an upgrade (operator/upgrade.py, operator/images.py): what the manual's commands keep.
UPGRADE_REASONS = {"PreFlight", "UpgradeRefused", "Upgrade", "UpgradeStage", "Upgraded", "Canary", "CanaryPassed",
                   "CanaryFailed", "ImagePullFailed"}


@pytest.fixture(scope="module")
def images(kube_cluster: Cluster, slurm_images: dict) -> dict:
    return with_accounting_images(slurm_images)


@pytest.fixture(scope="module")
def slurm(kube_cluster: Cluster, images: dict, operator: Operator) -> SlurmView:
    spec = dict(tiny_cluster_spec(), accounting={
        "enabled": True, "resources": TINY,
        "database": {"resources": dict(TINY, memory="512Mi"), "storage": {"size": "1Gi"}}})
    spec["images"] = dict({n: images[n] for n in (*SLURM_IMAGES, *ACCOUNTING_IMAGES)}, pullPolicy="Never")
    with running_cluster(kube_cluster, operator, CLUSTER, images, spec, [("cpu", 1, TINY_NODES)]) as view:
        yield view


@pytest.fixture(scope="module")
def renamed(kube_cluster: Cluster, images: dict) -> dict:
    """The images an upgrade changes, under other names, in the test cluster."""
    out = {}
    for key in RENAMED:
        out[key] = images[key].replace(":", ":upgrade-", 1)
        subprocess.run(["docker", "tag", images[key], out[key]], check=True, capture_output=True)
    load_images(*out.values())
    return out


def patch_spec(kube: Cluster, spec: dict) -> None:
    kube.kubectl("-n", kube.namespace, "patch", "slurmcluster", CLUSTER, "--type=merge", "-p",
                 json.dumps({"spec": spec}))


def events_of(kube: Cluster, reason: str) -> list:
    items = kube.get_json("events", "--field-selector", "involvedObject.name=%s,reason=%s" % (CLUSTER, reason))
    return [e["message"] for e in items["items"]]


def pod(kube: Cluster, name: str) -> dict:
    """uid, image, creation time and readiness of a pod ({} while there is none)."""
    found = kube.kubectl("-n", kube.namespace, "get", "pod", name, "-o", "json", check=False)
    if found.returncode != 0:
        return {}
    obj = json.loads(found.stdout)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in obj["status"].get("conditions", []))
    return {"uid": obj["metadata"]["uid"], "image": obj["spec"]["containers"][0]["image"],
            "created": obj["metadata"]["creationTimestamp"], "ready": ready and not obj["metadata"].get(
                "deletionTimestamp")}


def upgrade_progress(kube: Cluster) -> tuple:
    """What the manual's commands for following an upgrade print (docs/manual/upgrades.md, run as
    written): status.slurm, the SlurmImageInUse condition's line, each pod's image, and the upgrade
    Events as (type, reason)."""
    said = run_commands("upgrade-progress", kube.env, CLUSTER, kube.namespace).splitlines()
    pods_at = next(i for i, line in enumerate(said) if line.split() == ["POD", "IMAGE"])
    events_at = next(i for i, line in enumerate(said) if line.split()[:3] == ["TIME", "TYPE", "REASON"])
    assert pods_at == 2 and events_at > pods_at, said
    images = dict(line.split() for line in said[pods_at + 1:events_at])
    events = [tuple(line.split(None, 3)[1:3]) for line in said[events_at + 1:]]
    return json.loads(said[0]), said[1], images, events


def runs(kube: Cluster, name: str, image: str) -> dict:
    """The pod once it runs IMAGE and is Ready; {} before."""
    now = pod(kube, name)
    return now if now.get("image") == image and now["ready"] else {}


def test_an_upgrade_refused_by_its_preflight_leaves_the_cluster_as_it_was_then_a_good_one_rolls_in_slurms_order(
        slurm: SlurmView, operator: Operator, renamed: dict):
    kube = slurm.kube
    before = cluster_status(kube, CLUSTER)["slurm"]
    assert before["version"] == slurm.run("scontrol", "version").split()[-1], before
    job = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 600").split()[0]
    slurm.wait_running(job)
    pods = {name: pod(kube, name) for name in (CONTROLLER_POD, SLURMDBD_POD, WORKER_POD)}
    config = kube.get_json("configmap", "%s-slurm-config" % CLUSTER)["data"]["slurm.conf"]

    def explain() -> str:
        return json.dumps(cluster_status(kube, CLUSTER)) + operator.logs()[-3000:]

    # Refused: the new slurmctld does not start on this configuration.
    patch_spec(kube, {"images": renamed, "slurm": {"config": {"SchedulerType": "sched/nope"}}})
    refusal = wait_for(lambda: cluster_status(kube, CLUSTER).get("slurm", {}).get("refusal"), 240, 3, explain=explain)
    assert "sched/nope" in refusal and renamed["controller"] in refusal, refusal
    assert any("sched/nope" in m for m in events_of(kube, "UpgradeRefused"))
    assert events_of(kube, "PreFlight")
    held = {c["type"]: c for c in cluster_status(kube, CLUSTER)["conditions"]}
    assert held["SlurmImageInUse"]["status"] == "False" and held["Ready"]["status"] == "False"
    # Nothing of the running cluster changed: its pods, its configuration, its job.
    assert {name: pod(kube, name) for name in pods} == pods
    assert kube.get_json("configmap", "%s-slurm-config" % CLUSTER)["data"]["slurm.conf"] == config
    assert slurm.job_state(job) == "RUNNING"
    # As the manual's commands show it: the refusal, the images in effect, the Events.
    said, image_in_use, images, events = upgrade_progress(kube)
    assert said["refusal"] == refusal and said["images"] == before["images"], said
    assert image_in_use == "False UpgradeRefused: " + refusal, image_in_use
    assert {name: images.get(name) for name in pods} == {name: pods[name]["image"] for name in pods}, images
    assert {("Normal", "PreFlight"), ("Warning", "UpgradeRefused")} <= set(events), events

    # Passed: slurmdbd, then slurmctld; the worker waits for slurmctld, and for its job to end.
    patch_spec(kube, {"slurm": {"config": {"SchedulerType": None}}})
    controller = wait_for(lambda: runs(kube, CONTROLLER_POD, renamed["controller"]), 420, 3, explain=explain)
    slurmdbd = pod(kube, SLURMDBD_POD)
    assert slurmdbd.get("image") == renamed["slurmdbd"] and slurmdbd["created"] <= controller["created"], (
        slurmdbd, controller, kube.kubectl("-n", kube.namespace, "get", "pods", "-o", "wide").stdout)
    assert pod(kube, WORKER_POD) == pods[WORKER_POD]  # busy: not replaced under its job
    assert slurm.job_state(job) == "RUNNING"

    slurm.run("scancel", job)
    worker = wait_for(lambda: runs(kube, WORKER_POD, renamed["worker"]), 420, 3, explain=explain)
    assert worker["created"] >= controller["created"], (worker, controller)
    status = wait_ready(kube, CLUSTER, operator, timeout=420)
    slurm_status = status["slurm"]
    assert {key: slurm_status["images"][key] for key in RENAMED} == renamed, slurm_status
    assert "rollout" not in slurm_status and "refusal" not in slurm_status
    assert slurm_status["version"] == before["version"]
    # slurmdbd's and slurmctld's stages, then the worker as the canary (login, jail, exporter after it).
    assert events_of(kube, "Upgrade") and len(events_of(kube, "UpgradeStage")) == 2
    assert any(renamed["worker"] in m for m in events_of(kube, "CanaryPassed"))
    # As the manual's commands show it: the release and images in effect, each stage's Event.
    said, image_in_use, images, events = upgrade_progress(kube)
    assert said == slurm_status, (said, slurm_status)
    assert image_in_use == "True SlurmImage: Slurm %s runs from %s" % (slurm_status["version"], renamed["controller"])
    assert {name: images.get(name) for name in (CONTROLLER_POD, SLURMDBD_POD, WORKER_POD)} == {
        CONTROLLER_POD: renamed["controller"], SLURMDBD_POD: renamed["slurmdbd"], WORKER_POD: renamed["worker"]}
    assert {("Normal", reason) for reason in ("PreFlight", "Upgrade", "UpgradeStage", "CanaryPassed")} <= set(events)
    assert {reason for _kind, reason in events} <= UPGRADE_REASONS, events
    # The pre-flights are gone; the job that ran through the upgrade is in slurmdbd's records.
    left = [j["metadata"]["name"] for j in kube.get_json("jobs")["items"]
            if j["metadata"].get("labels", {}).get(C.LABEL_COMPONENT) == C.COMPONENT_PREFLIGHT]
    assert left == []
    record = wait_for(lambda: slurm.run("sacct", "-X", "-n", "-P", "-o", "State", "-j", job).strip(), 120, 3)
    assert record.startswith("CANCELLED"), record


def test_a_worker_image_that_fails_on_the_first_worker_turns_the_workers_back_and_says_why(
        slurm: SlurmView, operator: Operator, renamed: dict):
    kube = slurm.kube
    in_effect = cluster_status(kube, CLUSTER)["slurm"]["images"]["worker"]
    # Never built nor loaded, and the cluster's pods never pull: kubelet cannot start it.
    missing = in_effect.replace(":", ":missing-", 1)

    def explain() -> str:
        return json.dumps(cluster_status(kube, CLUSTER)) + operator.logs()[-3000:]

    patch_spec(kube, {"images": {"worker": missing}})
    failure = wait_for(lambda: cluster_status(kube, CLUSTER).get("slurm", {}).get("canaryFailure"), 300, 3,
                       explain=explain)
    assert "pod %s" % WORKER_POD in failure["message"] and "ErrImageNeverPull" in failure["message"], failure
    assert failure["images"]["worker"] == missing
    assert [m for m in events_of(kube, "CanaryFailed") if missing in m]
    held = {c["type"]: c for c in cluster_status(kube, CLUSTER)["conditions"]}["SlurmImageInUse"]
    assert (held["status"], held["reason"]) == ("False", "CanaryFailed"), held
    # The worker is back on the image in effect, its drain for the update lifted, and runs jobs.
    wait_for(lambda: runs(kube, WORKER_POD, in_effect), 300, 3, explain=explain)
    wait_for(lambda: in_service(slurm.nodes().get(WORKER_POD, set())), 180, 3, explain=slurm.explain)
    assert slurm.run("srun", "-N1", "-t", "1", "hostname").strip() == WORKER_POD
    # The spec back on the image in effect: nothing to try, the cluster Ready again.
    patch_spec(kube, {"images": {"worker": in_effect}})
    status = wait_ready(kube, CLUSTER, operator, timeout=300)
    assert "canaryFailure" not in status["slurm"] and status["slurm"]["images"]["worker"] == in_effect
