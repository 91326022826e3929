"""A new controller image reaches a running cluster only through its pre-flight (issue 34, item
2): a Job runs the image on the configuration rendered for it before anything changes. Refused
(a configuration the new slurmctld will not start on), the running cluster stays exactly as it
was and the status and an Event say slurmctld's words; passed, the image rolls out and the jobs
running meanwhile go on. Real API server, real Job, real slurmctld in both places.

The image tried is the project's controller image under a second name: a change of image as
the operator sees it, with the Slurm release of the images built here.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from kube_helpers import Cluster, load_images, wait_for
from slurm_helpers import (
    TINY_NODES,
    Operator,
    SlurmView,
    cluster_status,
    running_cluster,
    tiny_cluster_spec,
    wait_ready,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = pytest.mark.k8s

CLUSTER = "upg"
CONTROLLER_POD = "%s-controller-0" % CLUSTER


@pytest.fixture(scope="module")
def slurm(kube_cluster: Cluster, slurm_images: dict, operator: Operator) -> SlurmView:
    with running_cluster(kube_cluster, operator, CLUSTER, slurm_images, tiny_cluster_spec(),
                         [("cpu", 1, TINY_NODES)]) as view:
        yield view


@pytest.fixture(scope="module")
def renamed_controller_image(kube_cluster: Cluster, slurm_images: dict) -> str:
    """The controller image under another name, in the test cluster."""
    image = slurm_images["controller"]
    renamed = image.replace(":", ":upgrade-", 1)
    subprocess.run(["docker", "tag", image, renamed], check=True, capture_output=True)
    load_images(renamed)
    return renamed


def patch_spec(kube: Cluster, spec: dict) -> None:
    kube.kubectl("-n", kube.namespace, "patch", "slurmcluster", CLUSTER, "--type=merge", "-p",
                 json.dumps({"spec": spec}))


def events_of(kube: Cluster, reason: str) -> list:
    items = kube.get_json("events", "--field-selector", "involvedObject.name=%s,reason=%s" % (CLUSTER, reason))
    return [e["message"] for e in items["items"]]


def controller_pod(kube: Cluster) -> tuple:
    pod = kube.get_json("pod", CONTROLLER_POD)
    return pod["metadata"]["uid"], pod["spec"]["containers"][0]["image"]


def test_an_upgrade_refused_by_its_preflight_leaves_the_cluster_as_it_was_then_a_good_one_rolls_out(
        slurm: SlurmView, operator: Operator, renamed_controller_image: str):
    kube = slurm.kube
    before = cluster_status(kube, CLUSTER)["slurm"]
    assert before["version"] == slurm.run("scontrol", "version").split()[-1], before
    job = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 240").split()[0]
    slurm.wait_running(job)
    pod = controller_pod(kube)
    config = kube.get_json("configmap", "%s-slurm-config" % CLUSTER)["data"]["slurm.conf"]

    patch_spec(kube, {"images": {"controller": renamed_controller_image},
                      "slurm": {"config": {"SchedulerType": "sched/nope"}}})
    refusal = wait_for(lambda: cluster_status(kube, CLUSTER).get("slurm", {}).get("refusal"), 240, 3,
                       explain=lambda: json.dumps(cluster_status(kube, CLUSTER)) + operator.logs()[-3000:])
    assert "sched/nope" in refusal and renamed_controller_image in refusal, refusal
    assert any("sched/nope" in m for m in events_of(kube, "UpgradeRefused"))
    assert events_of(kube, "PreFlight")
    held = {c["type"]: c for c in cluster_status(kube, CLUSTER)["conditions"]}
    assert held["SlurmImageInUse"]["status"] == "False" and held["Ready"]["status"] == "False"
    # Nothing of the running cluster changed: its controller pod, its configuration, its job.
    assert controller_pod(kube) == pod
    assert kube.get_json("configmap", "%s-slurm-config" % CLUSTER)["data"]["slurm.conf"] == config
    assert slurm.job_state(job) == "RUNNING"

    patch_spec(kube, {"slurm": {"config": {"SchedulerType": None}}})
    status = wait_ready(kube, CLUSTER, operator, timeout=420)
    assert status["slurm"]["image"] == renamed_controller_image and "refusal" not in status["slurm"], status
    assert status["slurm"]["version"] == before["version"]
    uid, image = controller_pod(kube)
    assert uid != pod[0] and image == renamed_controller_image
    assert events_of(kube, "Upgrade")
    # The pre-flights are gone; the job that ran through the controller's restart is still there.
    left = [j["metadata"]["name"] for j in kube.get_json("jobs")["items"]
            if j["metadata"].get("labels", {}).get(C.LABEL_COMPONENT) == C.COMPONENT_PREFLIGHT]
    assert left == []
    assert slurm.job_state(job) in ("RUNNING", "COMPLETED")
    slurm.run("scancel", job)
