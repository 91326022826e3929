"""Slurm over two Kubernetes nodes (kind: 1 control plane + 2 workers, the session's cluster of
tests/run's second process): Slurm nodes spread over the workers, a job spans both and the jail
is one filesystem on both, Slurm's topology follows each worker's switch label, a lost Kubernetes
node sets its Slurm node DOWN and its pod moves, a hardware-drained node on a cordoned worker is
replaced on the other. (Moved from test_kind.py, whose own cluster now proves kind itself: the
Slurm images and an operator were loaded and installed there a second time.)
"""

from __future__ import annotations

import json
from typing import Callable, Iterator

import pytest
from kube_helpers import Cluster, wait_for
from node_loss import (
    docker,
    keep_an_operator_off,
    kubernetes_node_of,
    kubernetes_node_ready,
    through_a_node_loss,
    workers,
)
from slurm_helpers import (
    TINY,
    Operator,
    SlurmView,
    in_service,
    running_cluster,
    tiny_cluster_spec,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = [pytest.mark.k8s, pytest.mark.second_lane]


SLURM = "kc"
# Each kind worker is labelled with the switch it hangs off; Slurm's tree follows the label.
SWITCH_LABEL = "example.com/switch"
SWITCHES = ("rack-a", "rack-b")


@pytest.fixture(scope="module")
def slurm(kube_cluster: Cluster, slurm_images: dict, operator: Operator) -> Iterator[SlurmView]:
    """A Slurm cluster of two nodes made by the operator, as users run it, the jail on
    slurmkube-shared; each worker labelled with its switch (the labels go with the module)."""
    kube = kube_cluster
    if len(workers(kube)) != 2:
        pytest.skip("needs a kind cluster with two workers (SLURMKUBE_TEST_KIND_WORKERS=2)")
    for host, switch in zip(workers(kube), SWITCHES):
        label_switch(kube, host, switch)
    base = tiny_cluster_spec()
    spec = dict(base, login={"replicas": 1, "resources": TINY},
                jail={"size": "2Gi", "storageClassName": "slurmkube-shared"},
                healthChecks={"replaceDrainedNodes": True}, slurm=dict(base["slurm"], switchLabel=SWITCH_LABEL))
    try:
        with running_cluster(kube, operator, SLURM, slurm_images, spec, [("cpu", 2)]) as view:
            yield view
    finally:
        for host in workers(kube):
            kube.kubectl("label", "node", host, SWITCH_LABEL + "-", check=False)


def test_slurm_nodes_spread_over_the_workers_and_the_controller_and_login_avoid_the_control_plane(
        slurm: SlurmView):
    kube = slurm.kube
    hosts = {kubernetes_node_of(kube, "%s-cpu-%d" % (SLURM, i)) for i in (0, 1)}
    assert hosts == set(workers(kube)), "one Slurm node per Kubernetes worker (the node set's spread)"
    for pod in ("%s-controller-0" % SLURM, "%s-login-0" % SLURM):
        assert kubernetes_node_of(kube, pod) in workers(kube), pod


def test_a_job_spans_two_kubernetes_nodes_and_jobs_on_each_share_the_jail(slurm: SlurmView):
    """One root filesystem everywhere: what a job writes on one Kubernetes node, a job on the
    other reads (the jail is one ReadWriteMany volume of slurmkube-shared)."""
    first, second = "%s-cpu-0" % SLURM, "%s-cpu-1" % SLURM
    slurm.run("sbatch", "--wait", "-N2", "-o", "/root/kind-span.out", "--wrap", "srun hostname")
    slurm.run("sbatch", "--wait", "-w", first, "-o", "/dev/null", "--wrap",
              "echo $SLURMD_NODENAME > /root/kind-written")
    slurm.run("sbatch", "--wait", "-w", second, "-o", "/dev/null", "--wrap",
              "cat /root/kind-written > /root/kind-read && echo $SLURMD_NODENAME >> /root/kind-read")
    jail_root = C.JAIL_MOUNT_PATH + "/root/"
    assert sorted(slurm.run("cat", jail_root + "kind-span.out").split()) == [first, second]
    assert slurm.run("cat", jail_root + "kind-read").split() == [first, second]


def label_switch(kube: Cluster, host: str, switch: str) -> None:
    kube.kubectl("label", "node", host, "%s=%s" % (SWITCH_LABEL, switch), "--overwrite")


def test_slurm_topology_follows_the_switch_label_of_each_workers_kubernetes_node(slurm: SlurmView):
    """spec.slurm.switchLabel: a leaf switch per label value, named after it, every leaf under
    'top'; a machine relabelled moves its Slurm node to the other leaf without a restart."""
    kube = slurm.kube
    on_host = {kubernetes_node_of(kube, "%s-cpu-%d" % (SLURM, i)): "%s-cpu-%d" % (SLURM, i) for i in (0, 1)}
    first, second = workers(kube)
    everyone = frozenset(on_host.values())
    wait_for(lambda: slurm.switches() == {
        SWITCHES[0]: (frozenset([on_host[first]]), ""), SWITCHES[1]: (frozenset([on_host[second]]), ""),
        "top": (everyone, ",".join(SWITCHES))}, 240, 3, explain=lambda: slurm.run("scontrol", "show", "topology"))
    controller = kube.get_json("pod", "%s-controller-0" % SLURM)["metadata"]["uid"]
    label_switch(kube, second, SWITCHES[0])
    try:
        wait_for(lambda: slurm.switches() == {SWITCHES[0]: (everyone, ""), "top": (everyone, SWITCHES[0])},
                 240, 3, explain=lambda: slurm.run("scontrol", "show", "topology"))
        # Both nodes now hang off one leaf: a job that wants one switch for two nodes starts.
        out = slurm.run("srun", "-N2", "--switches=1", "hostname")
        assert sorted(out.split()) == sorted(everyone), out
    finally:
        label_switch(kube, second, SWITCHES[1])
    assert kube.get_json("pod", "%s-controller-0" % SLURM)["metadata"]["uid"] == controller


def slurm_reason(slurm: SlurmView, node: str) -> str:
    return slurm.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").strip()


def made_again_on(kube: Cluster, pod: str, old_uid: str, host: str) -> Callable[[], bool]:
    """Whether the pod has been made again (a new uid) on the host; absent in between counts as not."""
    def moved() -> bool:
        found = kube.find_json("pod", pod)
        return bool(found) and found["metadata"]["uid"] != old_uid and found["spec"].get("nodeName") == host
    return moved


def test_a_lost_kubernetes_node_sets_its_slurm_node_down_the_job_finishes_elsewhere_and_the_pod_moves(
        slurm: SlurmView, request: pytest.FixtureRequest):
    """`docker stop` of a kind worker: once Kubernetes calls it NotReady, the operator sets its
    Slurm node DOWN with the reason, Slurm requeues the job that ran there and it finishes on the
    other node; after the node set's lostNodeTimeoutSeconds the stuck pod is deleted by force and
    made again on the other Kubernetes node, and its Slurm node serves again. The stopped node
    comes back Ready and nothing is left out of service."""
    kube = slurm.kube
    controller_host = kubernetes_node_of(kube, "%s-controller-0" % SLURM)
    lost = next(h for h in workers(kube) if h != controller_host)
    moving = next(p for p in ("%s-cpu-0" % SLURM, "%s-cpu-1" % SLURM) if kubernetes_node_of(kube, p) == lost)
    staying = next(p for p in ("%s-cpu-0" % SLURM, "%s-cpu-1" % SLURM) if p != moving)
    keep_an_operator_off(kube, lost)
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "cpu", "--type=merge",
                 "-p", json.dumps({"spec": {"lostNodeTimeoutSeconds": 20}}))
    # The job starts on the node that will be lost (the other one drained meanwhile); its run
    # after a requeue (SLURM_RESTART_COUNT set) ends at once.
    slurm.run("scontrol", "update", "nodename=" + staying, "state=drain", "reason=test: keep free")
    try:
        job = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap",
                        'test -n "$SLURM_RESTART_COUNT" || sleep 3600').strip()
        # Should this test fail, its hour-long job must not hold a node the next test drains.
        request.addfinalizer(lambda: slurm.kube.exec("%s-controller-0" % SLURM, "scancel", job, check=False))
        slurm.wait_running(job)
    finally:
        slurm.run("scontrol", "update", "nodename=" + staying, "state=resume")
    assert slurm.job(job)["nodes"] == moving
    old_uid = kube.get_json("pod", moving)["metadata"]["uid"]
    docker("stop", lost)
    try:
        reason = "%s %s %s lost" % (C.DRAIN_REASON_PREFIX, C.REASON_NODE_LOST, lost)
        wait_for(through_a_node_loss(lambda: slurm_reason(slurm, moving) == reason), 180, 3, explain=slurm.explain)
        wait_for(through_a_node_loss(lambda: slurm.job_state(job) == "COMPLETED"), 120, 3, explain=slurm.explain)
        # It ran again away from the lost node: on the other Slurm node, or on its own node's new
        # pod when that serves first (Slurm holds a requeued job for cred_expire, 30 s here, and
        # the pod is made again after 20 s); the wait below finds that pod on the other host.
        finished = slurm.job(job)
        assert finished["restart_cnt"] >= 1 and finished["nodes"] in (staying, moving), finished

        # The pod, stuck on the lost node, is made again on the other one and its node serves.
        wait_for(made_again_on(kube, moving, old_uid, controller_host), 120, 3, explain=slurm.explain)
        wait_for(through_a_node_loss(lambda: in_service(slurm.nodes().get(moving, set()))), 120, 3,
                 explain=slurm.explain)
    finally:
        docker("start", lost)
    wait_for(lambda: kubernetes_node_ready(kube, lost), 180, 3)
    wait_for(lambda: set(slurm.nodes()) == {moving, staying} and all(map(in_service, slurm.nodes().values())),
             120, 3, explain=slurm.explain)
    assert kube.get_json("pod", moving)["spec"]["nodeName"] == controller_host


def test_a_hardware_drained_node_on_a_cordoned_kubernetes_node_is_replaced_on_another_and_rejoins(
        slurm: SlurmView):
    """A node drained for its hardware (here as a long check would: the fast check never lifts
    that) gets a new pod; its Kubernetes node is cordoned, so the pod lands on the other one, and
    the node serves again. The Slurm nodes on the cordoned host are drained for the eviction
    meanwhile (the hardware reason replaces that one), and the others serve again once the host
    is uncordoned."""
    kube = slurm.kube
    nodes = ("%s-cpu-0" % SLURM, "%s-cpu-1" % SLURM)
    replaced = nodes[0]
    host = kubernetes_node_of(kube, replaced)
    other_host = next(h for h in workers(kube) if h != host)
    old_uid = kube.get_json("pod", replaced)["metadata"]["uid"]
    kube.kubectl("cordon", host)
    try:
        # The operator drains a cordoned host's nodes for the eviction first. The hardware reason
        # comes after that drain: a pass that read the node before the reason was set would
        # otherwise write its eviction reason over it, and nothing would be replaced (CI saw it).
        eviction = "%s kubernetes eviction since " % C.DRAIN_REASON_PREFIX
        wait_for(lambda: slurm_reason(slurm, replaced).startswith(eviction), 60, 2, explain=slurm.explain)
        slurm.run("scontrol", "update", "nodename=" + replaced, "state=drain", "reason=%s %s memory bandwidth "
                  "512 MiB/s < 1000 MiB/s" % (C.DRAIN_REASON_PREFIX, C.DRAIN_REASON_LONG_CHECK))
        wait_for(made_again_on(kube, replaced, old_uid, other_host), 180, 3, explain=slurm.explain)
        wait_for(lambda: in_service(slurm.nodes()[replaced]), 120, 3, explain=slurm.explain)
    finally:
        kube.kubectl("uncordon", host)
    wait_for(lambda: all(in_service(slurm.nodes()[n]) for n in nodes), 120, 3, explain=slurm.explain)
