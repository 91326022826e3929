"""On-demand node sets (issue 37): nodes that come when Slurm resumes them for a job and go when
idle, on Slurm's own power saving, against a real slurmctld, the operator and the API server.

One cluster for the module: `burst` (0 kept up, at most 2, suspended after 20 s idle) and `huge`
(at most 1, asking for more memory than any Kubernetes node has, so its pod never schedules: the
"no Kubernetes capacity" case), both in the default partition, jobs choosing a set by its feature
(a partition naming a set would make the cluster invalid once the set is deleted). The job for
`huge` is sent first, so that Slurm's ResumeTimeout runs out while the other tests run.
"""

from __future__ import annotations

import json
import time
from typing import Dict, Iterator, Set

import pytest
from kube_helpers import Cluster, wait_for
from slurm_helpers import Operator, SlurmView, running_cluster, tiny_cluster_spec

pytestmark = [pytest.mark.k8s, pytest.mark.either_lane(seconds=340)]

SLURM = "od"
BURST, HUGE = "%s-burst" % SLURM, "%s-huge" % SLURM
SUSPEND_TIME = 20
# Long enough for a burst pod to start and register on a loaded CI machine, short enough to wait.
RESUME_TIMEOUT = 150


@pytest.fixture(scope="module")
def slurm(kube_cluster: Cluster, slurm_images: dict, operator: Operator) -> Iterator[SlurmView]:
    base = tiny_cluster_spec()
    spec = dict(base, slurm=dict(base["slurm"], config=dict(base["slurm"]["config"], ResumeTimeout=RESUME_TIMEOUT)))
    nodesets = [("burst", 0, {"maxReplicas": 2, "suspendTimeSeconds": SUSPEND_TIME}),
                ("huge", 0, {"maxReplicas": 1, "resources": {"cpu": 1, "cpuRequest": "100m", "memory": "4000Gi"}})]
    with running_cluster(kube_cluster, operator, SLURM, slurm_images, spec, nodesets) as view:
        yield view


@pytest.fixture(scope="module")
def huge_job(slurm: SlurmView) -> str:
    """A job for the node that cannot start, sent before the other tests run."""
    return slurm.run("sbatch", "--parsable", "-C", "huge", "-o", "/dev/null", "--wrap", "true").strip()


def node_pods(slurm: SlurmView, nodeset: str) -> Set[str]:
    items = slurm.kube.get_json("pods", "-l", "slurmkube.io/cluster=%s,slurmkube.io/nodeset=%s"
                                % (SLURM, nodeset))["items"]
    return {p["metadata"]["name"] for p in items}


def power_states(slurm: SlurmView) -> Dict[str, Set[str]]:
    return {name: states for name, states in slurm.nodes().items() if name.startswith(BURST)}


def sinfo_states(slurm: SlurmView) -> Dict[str, str]:
    """`sinfo`'s state of each burst node, with its power suffix (idle~, alloc#, ...)."""
    words = slurm.run("sinfo", "-h", "-N", "-o", "%N %t").split()
    return {node: state for node, state in zip(words[::2], words[1::2]) if node.startswith(BURST)}


def powered_down_without_pods(slurm: SlurmView) -> bool:
    return not node_pods(slurm, "burst") and all(
        "POWERED_DOWN" in s and "POWERING_DOWN" not in s for s in power_states(slurm).values())


def test_an_on_demand_set_starts_powered_down_with_no_pod(slurm: SlurmView, huge_job: str):
    assert huge_job.isdigit(), huge_job
    assert sinfo_states(slurm) == {BURST + "-0": "idle~", BURST + "-1": "idle~"}, slurm.explain()
    assert node_pods(slurm, "burst") == set()
    template = slurm.kube.get_json("podtemplate", BURST)
    assert template["metadata"]["annotations"]["slurmkube.io/nodes"] == "2"


def test_a_two_node_job_starts_two_pods_runs_and_they_go_after_the_idle_time(slurm: SlurmView):
    job = slurm.run("sbatch", "--parsable", "-N2", "-C", "burst", "-o", "/root/od-span.out",
                    "--wrap", "srun hostname").strip()
    wait_for(lambda: node_pods(slurm, "burst") == {BURST + "-0", BURST + "-1"}, 60, 1, explain=slurm.explain)
    # While the pods start the nodes are allocated and powering up: alloc#.
    assert set(sinfo_states(slurm).values()) <= {"alloc#", "mix#", "alloc", "mix", "comp", "idle"}, slurm.explain()
    wait_for(lambda: slurm.job_state(job) == "COMPLETED", RESUME_TIMEOUT + 60, 2, explain=slurm.explain)
    ran = json.loads(slurm.run("scontrol", "show", "job", job, "--json"))["jobs"][0]["nodes"]
    assert slurm.run("scontrol", "show", "hostnames", ran).split() == [BURST + "-0", BURST + "-1"]
    # Idle for SuspendTime, then powered down (SuspendTimeout, 30 s): the pods are deleted.
    wait_for(lambda: powered_down_without_pods(slurm), SUSPEND_TIME + 30 + 90, 2, explain=slurm.explain)
    assert sinfo_states(slurm) == {BURST + "-0": "idle~", BURST + "-1": "idle~"}, slurm.explain()
    events = slurm.kube.kubectl("-n", slurm.kube.namespace, "get", "events", "-o", "json").stdout
    reasons = {e["reason"] for e in json.loads(events)["items"]}
    assert {"NodeMakePod", "NodeDeletePod"} <= reasons, reasons


def test_a_busy_node_is_never_suspended_and_an_admins_drain_survives_resume_and_suspend(slurm: SlurmView):
    """Both at once, on the set's two nodes: one runs a job past twice the idle time, the other,
    drained by the admin, is powered up by the admin (to look at it) and suspended when idle."""
    drained = BURST + "-1"
    slurm.run("scontrol", "update", "nodename=" + drained, "state=drain", "reason=admin: bad dimm")
    # The job goes to the other node: Slurm resumes only nodes it may use.
    job = slurm.run("sbatch", "--parsable", "-N1", "-C", "burst", "-o", "/dev/null",
                    "--wrap", "sleep %d" % (SUSPEND_TIME * 3)).strip()
    slurm.run("scontrol", "update", "nodename=" + drained, "state=power_up")
    # Up, and idle: Slurm suspends it SuspendTime later, so this is looked at first (the job shows
    # RUNNING only once slurmctld's next check finds its node booted, up to 30 s later).
    wait_for(lambda: drained in node_pods(slurm, "burst") and not power_states(slurm)[drained]
             & {"POWERED_DOWN", "POWERING_UP"}, RESUME_TIMEOUT, 1, explain=slurm.explain)
    assert "DRAIN" in power_states(slurm)[drained] and admin_reason(slurm, drained) == "admin: bad dimm", \
        slurm.explain()
    # RUNNING alone: while its node's pod starts the job is RUNNING and CONFIGURING.
    wait_for(lambda: (slurm.job(job) or {}).get("job_state") == ["RUNNING"], RESUME_TIMEOUT + 30, 2,
             explain=slurm.explain)
    busy = json.loads(slurm.run("scontrol", "show", "job", job, "--json"))["jobs"][0]["nodes"]
    assert busy == BURST + "-0", slurm.explain()
    started = time.monotonic()
    while slurm.job_state(job) == "RUNNING":
        states = power_states(slurm)[busy]
        assert not states & {"POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"}, (states, slurm.explain())
        assert busy in node_pods(slurm, "burst")
        time.sleep(3)
    assert time.monotonic() - started > SUSPEND_TIME * 2, "the job ran past twice the idle time"
    wait_for(lambda: powered_down_without_pods(slurm), SUSPEND_TIME + 30 + 90, 2, explain=slurm.explain)
    assert "DRAIN" in power_states(slurm)[drained] and admin_reason(slurm, drained) == "admin: bad dimm", \
        slurm.explain()
    slurm.run("scontrol", "update", "nodename=" + drained, "state=resume")


def admin_reason(slurm: SlurmView, node: str) -> str:
    return slurm.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").strip()


def test_a_node_that_cannot_start_is_down_with_the_reason_and_its_job_requeued(slurm: SlurmView, huge_job: str):
    node = HUGE + "-0"

    def reason() -> str:
        return slurm.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").strip()

    wait_for(lambda: reason().startswith("slurmkube: resume failed:"), RESUME_TIMEOUT + 120, 3, explain=slurm.explain)
    assert "Insufficient memory" in reason(), reason()
    states = slurm.nodes()[node]
    assert {"DOWN", "POWERED_DOWN"} <= states, states
    # Requeued: back to PENDING once Slurm has finished with its first try.
    wait_for(lambda: (slurm.job(huge_job) or {}).get("restart_cnt", 0) >= 1
             and slurm.job(huge_job)["job_state"] == ["PENDING"], 120, 2, explain=slurm.explain)
    wait_for(lambda: node_pods(slurm, "huge") == set(), 90, 2, explain=slurm.explain)
    events = json.loads(slurm.kube.kubectl("-n", slurm.kube.namespace, "get", "events", "-o", "json").stdout)
    failed = [e["message"] for e in events["items"] if e["reason"] == "NodeResumeFailed"]
    assert failed and node in failed[0] and "Insufficient memory" in failed[0], failed
    slurm.run("scancel", huge_job)


def test_a_deleted_on_demand_set_keeps_a_busy_node_until_its_job_ends(slurm: SlurmView):
    job = slurm.run("sbatch", "--parsable", "-N1", "-C", "burst", "-o", "/dev/null", "--wrap", "sleep 45").strip()
    wait_for(lambda: (slurm.job(job) or {}).get("job_state") == ["RUNNING"], RESUME_TIMEOUT + 30, 2,
             explain=slurm.explain)
    node = json.loads(slurm.run("scontrol", "show", "job", job, "--json"))["jobs"][0]["nodes"]
    slurm.kube.kubectl("-n", slurm.kube.namespace, "delete", "nodeset", "burst")
    wait_for(lambda: "DRAIN" in slurm.nodes()[node], 60, 2, explain=slurm.explain)
    assert slurm.job_state(job) == "RUNNING" and node in node_pods(slurm, "burst")
    wait_for(lambda: slurm.job_state(job) == "COMPLETED", 120, 2, explain=slurm.explain)
    # Idle and drained: powered down, its pod deleted, then slurm.conf and the objects let it go.
    wait_for(lambda: slurm.kube.find_json("podtemplate", BURST) is None, 240, 3, explain=slurm.explain)
    assert node_pods(slurm, "burst") == set()
    wait_for(lambda: not any(name.startswith(BURST) for name in slurm.nodes()), 120, 3, explain=slurm.explain)
    events = json.loads(slurm.kube.kubectl("-n", slurm.kube.namespace, "get", "events", "-o", "json").stdout)
    assert any(e["reason"] == "NodeSetRetired" and BURST in e["message"] for e in events["items"])
