"""The operator on a real Kubernetes (kind): a Slurm cluster made, changed, scaled and healed.

The operator runs in the cluster as users run it (the slurm_operator module's Deployment, two
replicas electing a leader); the pods run the project's images, imported into the cluster's
containerd (nothing is pulled).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional, Sequence

import pytest
from kube_helpers import Cluster, wait_for
from playbook_runner import run_module
from slurm_helpers import (
    QUICK_REQUEUE,
    TINY_NODES,
    Operator,
    SlurmView,
    cluster_manifest,
    cluster_status,
    in_service,
    kopf_retries_pending,
    manifests,
    nodeset_manifest,
    our_writes,
    running_cluster,
    tiny_cluster_spec,
    wait_ready,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator.volume_refresh import (
    files_digest,
    mounts_config_map,
)

# Nothing here needs several Kubernetes nodes, so tests/run's two pytest processes can both run
# it, each on its own cluster: whichever is free first does (the second ran past the deadline of a
# CI run with this module in it, 2026-11-30, while the first ended before).
pytestmark = [pytest.mark.k8s, pytest.mark.either_lane(seconds=750)]

CLUSTER = "demo"
CONFIG_MAP = CLUSTER + "-slurm-config"
# A second cluster, whose controller image cannot be pulled.
NO_PULL = "nopull"


@pytest.fixture(scope="module")
def slurm_cluster(kube_cluster: Cluster, slurm_images, operator: Operator) -> Cluster:
    kube = kube_cluster
    spec = {"partitions": [{"name": "main", "default": True}, {"name": "big", "nodeSets": ["big"]}],
            "slurm": {"topology": [{"name": "leaf", "nodes": "demo-cpu-[0-9],demo-big-0"},
                                   {"name": "spine", "switches": ["leaf"]}], "config": dict(QUICK_REQUEUE)}}
    with running_cluster(kube, operator, CLUSTER, slurm_images, spec, [("cpu", 3), ("big", 1)]):
        # Ready is Slurm's view (nodes in service); slurmd registers before the kubelet's first
        # readiness probe (every 10 s) marks its pod Ready, and the NodeSets' readyReplicas follow
        # the pods. The tests below start from a cluster both agree on (CI saw the gap once).
        wait_for(lambda: all(kube.get_json("nodeset", name).get("status", {}).get("readyReplicas") == replicas
                             for name, replicas in (("cpu", 3), ("big", 1))), 120, 2)  # fmt: skip
        yield kube


@pytest.fixture(scope="module")
def slurm(slurm_cluster: Cluster) -> SlurmView:
    return SlurmView(slurm_cluster, CLUSTER)


def worker_pods(kube: Cluster, nodeset: str) -> set:
    pods = kube.get_json("pods", "-l", "slurmkube.io/nodeset=" + nodeset)["items"]
    return {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def pods_by_uid(kube: Cluster) -> dict:
    pods = kube.get_json("pods", "-l", "slurmkube.io/cluster=%s" % CLUSTER)["items"]
    return {p["metadata"]["name"]: (p["metadata"]["uid"], sum(c.get("restartCount", 0) for c in
                                                              p["status"].get("containerStatuses") or []))
            for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/component") != "jail"}


def nodes_in_tree(slurm: SlurmView) -> set:
    """Nodes Slurm's topology tree holds, as the top switch lists them."""
    return set(slurm.switches().get("spine", (frozenset(), ""))[0])


def patch(kube: Cluster, kind: str, name: str, body: dict) -> None:
    kube.kubectl("-n", kube.namespace, "patch", kind, name, "--type=merge", "-p", json.dumps(body))


def test_cluster_with_two_nodesets_comes_up_idle(slurm_cluster: Cluster, slurm: SlurmView):
    assert cluster_status(slurm_cluster, CLUSTER)["nodes"] == {"ready": 4, "desired": 4}
    nodes = slurm.nodes()
    assert set(nodes) == {"demo-cpu-0", "demo-cpu-1", "demo-cpu-2", "demo-big-0"}
    assert all("IDLE" in states and "DRAIN" not in states for states in nodes.values()), nodes
    nodeset = slurm_cluster.get_json("nodeset", "cpu")["status"]
    assert nodeset["replicas"] == 3 and nodeset["readyReplicas"] == 3
    # No finalizer: a cluster whose operator is gone (uninstalled, namespace deleted) still deletes.
    assert not slurm_cluster.get_json("slurmcluster", CLUSTER)["metadata"].get("finalizers")


def test_topology_places_every_node(slurm: SlurmView):
    wait_for(lambda: nodes_in_tree(slurm) == {"demo-cpu-0", "demo-cpu-1", "demo-cpu-2", "demo-big-0"}, 120, 3)


def test_partitions_are_what_the_spec_says(slurm: SlurmView):
    partitions = json.loads(slurm.run("scontrol", "show", "partition", "--json"))["partitions"]
    assert {p["name"]: p["node_sets"] for p in partitions} == {"main": "big,cpu", "big": "big"}
    assert {p["name"]: p["nodes"]["total"] for p in partitions} == {"main": 4, "big": 1}
    # The JSON has no default flag; the one-line form does (key=value words, not columns).
    words = dict(w.split("=", 1) for w in slurm.run("scontrol", "-o", "show", "partition", "main").split() if "=" in w)
    assert words["Default"] == "YES"


def test_a_steady_cluster_sees_no_writes(slurm_cluster: Cluster, operator: Operator):
    """Three passes of the leader over a Ready cluster change no object (status included).

    Steady means kopf too is done: a handler that failed while the cluster was being made is
    retried a minute later (kopf's delay), and clearing its record is a write. CI once saw both
    NodeSets written exactly a minute after they were made; the log lines below say why.
    """
    wait_for(lambda: not kopf_retries_pending(slurm_cluster, CLUSTER), 90, 2)
    before = our_writes(slurm_cluster, CLUSTER)
    assert len(before) > 10 and all(before.values())
    time.sleep(35)
    after = our_writes(slurm_cluster, CLUSTER)
    why = [line for line in operator.logs(400).splitlines() if "etry" in line or "failed" in line or "rror" in line]
    assert after == before, "\n".join(why)


def test_the_operator_asks_for_nothing_its_grants_refuse(slurm_cluster: Cluster, operator: Operator):
    """Watching named namespaces, it may not list namespaces cluster-wide: kopf's restricted mode
    takes the names as given instead of asking again and logging each refusal."""
    logs = operator.logs(tail=20000)
    assert "leading as" in logs, logs[-3000:]
    refused = [line for line in logs.splitlines() if "forbidden" in line.lower()]
    assert not refused, "\n".join(refused[:10])


def test_setting_change_reaches_slurm_without_restarting_pods(slurm_cluster: Cluster, slurm: SlurmView):
    """A slurm.conf setting and the login Service's exposure (issue 38: an internal load balancer,
    the ranges it admits) change in one edit; the API server takes the Service as rendered, and no
    pod is made again."""
    before = pods_by_uid(slurm_cluster)
    exposure = {"serviceType": "LoadBalancer", "service": {
        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
        "loadBalancerSourceRanges": ["203.0.113.0/24"], "externalTrafficPolicy": "Cluster"}}
    patch(slurm_cluster, "slurmcluster", CLUSTER, {"spec": {"slurm": {"config": {"MinJobAge": 600}},
                                                            "login": exposure}})
    wait_for(lambda: "MinJobAge               = 600" in slurm.run("scontrol", "show", "config"), 240, 5)

    def exposed() -> Optional[dict]:
        service = slurm_cluster.get_json("service", "%s-login" % CLUSTER)
        return service if service["spec"]["type"] == "LoadBalancer" else None

    service = wait_for(exposed, 60, 2)
    assert service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert service["spec"]["externalTrafficPolicy"] == "Cluster"
    assert pods_by_uid(slurm_cluster) == before
    # The operator had the kubelet of every pod that mounts the files refresh them at once.
    files = slurm_cluster.get_json("configmap", CONFIG_MAP)["data"]
    pods = slurm_cluster.get_json("pods", "-l", "slurmkube.io/cluster=%s" % CLUSTER)["items"]
    mounting = {p["metadata"]["name"]: p["metadata"].get("annotations", {}).get(C.ANNOTATION_CONFIG_FILES)
                for p in pods if mounts_config_map(p, CONFIG_MAP)}
    assert {"demo-controller-0", "demo-cpu-0", "demo-login-0"} <= set(mounting)
    assert set(mounting.values()) == {files_digest(files)}, mounting


def test_scale_3_5_2_with_a_job_on_a_removed_node_while_the_leader_dies(
        slurm_cluster: Cluster, slurm: SlurmView, operator: Operator):
    kube = slurm_cluster
    patch(kube, "nodeset", "cpu", {"spec": {"replicas": 5}})
    wanted = {"demo-cpu-%d" % i for i in range(5)} | {"demo-big-0"}
    wait_for(lambda: set(slurm.nodes()) == wanted and all("IDLE" in s for s in slurm.nodes().values()), 240, 3,
             explain=slurm.explain)
    # topology/tree ignores dynamic nodes until a reconfigure: the operator makes one for new nodes.
    wait_for(lambda: nodes_in_tree(slurm) == wanted, 120, 3)
    job = slurm.run("sbatch", "--parsable", "-w", "demo-cpu-4", "-o", "/tmp/scale-%j.out",
                    "--wrap", "sleep 30; echo done").strip()
    slurm.wait_running(job)
    patch(kube, "nodeset", "cpu", {"spec": {"replicas": 2}})
    # The leader has started the scale-down (the doomed nodes drain) when it is killed.
    wait_for(lambda: "DRAIN" in slurm.nodes()["demo-cpu-4"], 60, 1)
    # Not Ready while a removed node still holds a job: modules waiting for Ready wait for it.
    # (A pass that began before the new replica count may still write its own count first.)
    wait_for(lambda: "leaving" in nodes_ready_message(kube), 60, 1, explain=lambda: nodes_ready_message(kube))
    leader = operator.leader()
    kube.kubectl("-n", kube.namespace, "delete", "pod", leader, "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: operator.leader() not in ("", leader), 60, 1)
    wait_for(lambda: set(slurm.nodes()) == {"demo-cpu-0", "demo-cpu-1", "demo-big-0"}, 300, 3, explain=slurm.explain)
    assert slurm.job_state(job) == "COMPLETED"
    # Slurm forgot the nodes first; their pods go on the next pass, never the other way round.
    wait_for(lambda: worker_pods(kube, "cpu") == {"demo-cpu-0", "demo-cpu-1"}, 180, 3)
    assert set(slurm.nodes()) == {"demo-cpu-0", "demo-cpu-1", "demo-big-0"}
    wait_ready(kube, CLUSTER, operator)
    assert cluster_status(kube, CLUSTER)["nodes"] == {"ready": 3, "desired": 3}


def nodes_ready_message(kube: Cluster) -> str:
    """NodesReady's message while that condition is False, else ''."""
    conditions = cluster_status(kube, CLUSTER).get("conditions") or []
    found = next((c for c in conditions if c["type"] == "NodesReady"), {})
    return found.get("message", "") if found.get("status") == "False" else ""


def test_deleted_worker_pod_comes_back_and_registers(slurm_cluster: Cluster, slurm: SlurmView):
    kube = slurm_cluster
    old = kube.get_json("pod", "demo-big-0")["metadata"]["uid"]
    kube.kubectl("-n", kube.namespace, "delete", "pod", "demo-big-0", "--wait=true", timeout=180)
    wait_for(lambda: kube.pod_uid("demo-big-0") not in (None, old), 120, 2)
    kube.wait_pod_ready("demo-big-0", timeout=180)
    wait_for(lambda: "IDLE" in slurm.nodes()["demo-big-0"] and "DRAIN" not in slurm.nodes()["demo-big-0"], 120, 2)
    job = slurm.run("sbatch", "--parsable", "-p", "big", "-o", "/tmp/back-%j.out", "--wrap", "hostname").strip()
    wait_for(lambda: slurm.job_state(job) == "COMPLETED", 120, 2)
    assert list(slurm.nodes()).count("demo-big-0") == 1


def test_a_node_deleted_from_slurm_under_a_running_pod_registers_again(slurm_cluster: Cluster, slurm: SlurmView):
    """What an interrupted scale-down or an admin's `scontrol delete` leaves: a pod but no node."""
    kube = slurm_cluster
    # A pod that serves: a slurmd still starting would register the deleted node by itself.
    kube.wait_pod_ready("demo-big-0", timeout=180)
    wait_for(lambda: "IDLE" in slurm.nodes().get("demo-big-0", set()), 120, 2)
    old = kube.get_json("pod", "demo-big-0")["metadata"]["uid"]
    slurm.run("scontrol", "delete", "nodename=demo-big-0")
    assert "demo-big-0" not in slurm.nodes()
    wait_for(lambda: "IDLE" in slurm.nodes().get("demo-big-0", set()), 240, 3)
    assert kube.get_json("pod", "demo-big-0")["metadata"]["uid"] != old


def test_controller_restart_keeps_running_and_queued_jobs(slurm_cluster: Cluster, slurm: SlurmView):
    kube = slurm_cluster
    # Root jobs may not write to the worker's own root (the jail plugin makes it read-only).
    job = slurm.run("sbatch", "--parsable", "-o", "/tmp/restart-%j.out", "--wrap", "sleep 30").strip()
    queued = slurm.run("sbatch", "--parsable", "--hold", "-o", "/tmp/held-%j.out", "--wrap", "true").strip()
    slurm.wait_running(job)
    kube.kubectl("-n", kube.namespace, "delete", "pod", "%s-controller-0" % CLUSTER, "--wait=true")
    kube.wait_pod_ready("%s-controller-0" % CLUSTER, timeout=180)
    wait_for(lambda: slurm.job_state(job) == "COMPLETED", 120, 3, explain=slurm.explain)
    assert slurm.job_state(queued) == "PENDING"
    slurm.run("scontrol", "release", queued)
    wait_for(lambda: slurm.job_state(queued) == "COMPLETED", 120, 2, explain=slurm.explain)


def test_invalid_spec_is_reported_and_nothing_changes(slurm_cluster: Cluster):
    kube = slurm_cluster
    before = pods_by_uid(kube)
    rejected = kube.kubectl("-n", kube.namespace, "patch", "nodeset", "cpu", "--type=merge",
                            "-p", '{"spec":{"replicas":-2}}', check=False)
    assert rejected.returncode != 0 and "spec.replicas" in rejected.stderr
    patch(kube, "nodeset", "big", {"spec": {"resources": {"cpu": "1500m"}}})
    wait_for(lambda: (kube.get_json("nodeset", "big").get("status") or {}).get("phase") == "Invalid", 60, 2)
    assert "whole number of CPUs" in kube.get_json("nodeset", "big")["status"]["message"]
    time.sleep(15)
    after = pods_by_uid(kube)
    assert {k: v for k, v in after.items() if "big" not in k} == {k: v for k, v in before.items() if "big" not in k}
    patch(kube, "nodeset", "big", {"spec": {"resources": {"cpu": 1}}})


def exactly_these_in_service(nodes: dict, names: set) -> bool:
    """Slurm knows these nodes (name → states) and no other, and every one is idle and well."""
    return set(nodes) == names and all(in_service(states) for states in nodes.values())


def invalid_spec_warnings(kube: Cluster) -> list:
    """(count, message) of the cluster's InvalidSpec Events (repeats of one Event add to its count)."""
    events = json.loads(kube.kubectl("-n", kube.namespace, "get", "events", "-o", "json", "--field-selector",
                                     "involvedObject.name=%s,reason=InvalidSpec" % CLUSTER).stdout)["items"]
    return [(e.get("count") or (e.get("series") or {}).get("count") or 1, e["message"]) for e in events]


def test_a_partition_naming_an_unknown_node_set_is_reported_and_nothing_changes(
        slurm_cluster: Cluster, slurm: SlurmView, operator: Operator):
    kube = slurm_cluster
    before = pods_by_uid(kube)
    partitions = kube.get_json("slurmcluster", CLUSTER)["spec"]["partitions"]
    patch(kube, "slurmcluster", CLUSTER, {"spec": {"partitions": [*partitions, {"name": "gpu", "nodeSets": ["gpu"]}]}})
    try:
        message = wait_for(lambda: cluster_status(kube, CLUSTER).get("phase") == "Invalid"
                           and cluster_status(kube, CLUSTER)["message"], 60, 2)
        assert "spec.partitions[%d].nodeSets: unknown node set 'gpu'; known: big, cpu" % len(partitions) in message
        time.sleep(15)  # passes go on (resyncs, node events): the status says it, no new Warning
        assert pods_by_uid(kube) == before
        # This generation's: the cluster's first passes, before its node sets existed, had their own.
        warnings = [w for w in invalid_spec_warnings(kube) if "unknown node set 'gpu'" in w[1]]
        assert sum(w[0] for w in warnings) == 1 and "\n" not in warnings[0][1], warnings
        assert "gpu" not in kube.get_json("configmap", "%s-slurm-config" % CLUSTER)["data"]["slurm.conf"]
        assert {p["name"] for p in json.loads(slurm.run("scontrol", "show", "partition", "--json"))["partitions"]} \
            == {"main", "big"}
    finally:
        patch(kube, "slurmcluster", CLUSTER, {"spec": {"partitions": partitions}})
    wait_ready(kube, CLUSTER, operator)


def test_a_setting_slurmd_reads_at_start_replaces_nodes_one_at_a_time_and_loses_no_job(
        slurm_cluster: Cluster, slurm: SlurmView, operator: Operator):
    """cgroup.conf is read by slurmd only when it starts: every worker gets a new pod, one node of
    each node set at a time (the next drains once the one before serves again), each drained and
    idle first; the controller, which reconfigure serves, keeps its pod."""
    kube = slurm_cluster
    before = pods_by_uid(kube)
    workers = {n: before[n][0] for n in worker_pods(kube, "cpu") | worker_pods(kube, "big")}
    job = slurm.run("sbatch", "--parsable", "-w", "demo-cpu-0", "-o", "/tmp/cgroup-%j.out",
                    "--wrap", "sleep 40").strip()
    slurm.wait_running(job)
    patch(kube, "slurmcluster", CLUSTER, {"spec": {"slurm": {"cgroupConfig": {"MinRAMSpace": 31}}}})
    out_for_update = {"cpu": [], "big": []}

    def every_worker_replaced_and_idle() -> bool:
        nodes = json.loads(slurm.run("scontrol", "show", "nodes", "--json"))["nodes"]
        for nodeset, seen in out_for_update.items():
            seen.append(sorted(n["name"] for n in nodes if n["name"].startswith("demo-%s-" % nodeset)
                               and "DRAIN" in n["state"] and n.get("reason", "").startswith("slurmkube: update since")))
        pods = pods_by_uid(kube)
        return all(n in pods and pods[n][0] != uid for n, uid in workers.items()) \
            and exactly_these_in_service({n["name"]: set(n["state"]) for n in nodes}, set(workers))

    wait_for(every_worker_replaced_and_idle, 600, 2, explain=slurm.explain)
    # demo-cpu-0 stays drained while its job runs: seen for sure; demo-big-0 may come and go between reads.
    most = {nodeset: max(len(names) for names in seen) for nodeset, seen in out_for_update.items()}
    assert most["cpu"] == 1 and most["big"] <= 1, out_for_update
    finished = slurm.job(job)
    assert (finished["job_state"], finished["restart_cnt"], finished["nodes"]) == (["COMPLETED"], 0, "demo-cpu-0")
    assert pods_by_uid(kube)["%s-controller-0" % CLUSTER] == before["%s-controller-0" % CLUSTER]
    assert "MinRAMSpace=31" in kube.exec("demo-cpu-0", "cat", "/etc/slurm/cgroup.conf").stdout.splitlines()
    wait_ready(kube, CLUSTER, operator)


def events_of(kube: Cluster, reason: str) -> list:
    """The messages of the cluster's Events with this reason."""
    items = kube.get_json("events", "--field-selector", "involvedObject.name=%s,reason=%s" % (CLUSTER, reason))
    return [e["message"] for e in items["items"]]


def start_on(slurm: SlurmView, node: str, known: set, sbatch: Sequence[str], busy: frozenset = frozenset()) -> str:
    """A job started on `node` once Slurm knows exactly `known` and those not `busy` are idle (the
    other idle ones drained meanwhile), free to run anywhere later."""
    free = known - busy

    def ready(nodes: dict) -> bool:
        return set(nodes) == known and all(in_service(nodes[name]) for name in free)

    wait_for(lambda: ready(slurm.nodes()), 240, 3, explain=slurm.explain)
    held = ",".join(sorted(free - {node}))
    slurm.run("scontrol", "update", "nodename=" + held, "state=drain", "reason=test: keep free")
    try:
        job = slurm.run("sbatch", "--parsable", *sbatch).strip()
        slurm.wait_running(job)
    finally:
        slurm.run("scontrol", "update", "nodename=" + held, "state=resume")
    assert slurm.job(job)["nodes"] == node
    return job


def test_drain_timeout_requeues_the_job_of_a_removed_node_and_it_finishes_elsewhere(
        slurm_cluster: Cluster, slurm: SlurmView, operator: Operator):
    """Past the drain timeout the operator requeues the node's job (an Event names it). A job sent
    with --no-requeue is not retried: one Event and the cluster's status name it, it runs on, and
    the node leaves once it ends. Both in one scale-down, from 4 to 2: the StatefulSet lets its
    highest ordinal go first, so the requeued job is on demo-cpu-3 and the stuck one on demo-cpu-2."""
    kube = slurm_cluster
    staying = {"demo-cpu-0", "demo-cpu-1", "demo-big-0"}
    patch(kube, "nodeset", "cpu", {"spec": {"replicas": 4, "drainTimeoutSeconds": 5}})
    in_service = staying | {"demo-cpu-2", "demo-cpu-3"}
    # The nodes have one CPU: one job each.
    stuck = start_on(slurm, "demo-cpu-2", in_service, ("--no-requeue", "-o", "/dev/null", "--wrap", "sleep 3600"))
    # Its first run outlasts any test; the run after a requeue (SLURM_RESTART_COUNT set) ends at once.
    job = start_on(slurm, "demo-cpu-3", in_service, ("-o", "/tmp/requeue-%j.out", "--wrap",
                                                     'test -n "$SLURM_RESTART_COUNT" || sleep 3600'),
                   busy=frozenset({"demo-cpu-2"}))
    patch(kube, "nodeset", "cpu", {"spec": {"replicas": 2}})
    wait_for(lambda: slurm.job_state(job) == "COMPLETED", 300, 3, explain=slurm.explain)
    finished = slurm.job(job)
    assert finished["restart_cnt"] >= 1 and finished["nodes"] in staying, finished
    assert any("requeued job %s from demo-cpu-3" % job in m for m in events_of(kube, "JobRequeued"))
    # The operator's log says it too (issue 39: every action a log line with its object and reason).
    said = "JobRequeued SlurmCluster %s/%s: requeued job %s from demo-cpu-3" % (kube.namespace, CLUSTER, job)
    assert said in operator.logs(tail=5000), said
    reported = [{"jobId": int(stuck), "node": "demo-cpu-2"}]
    wait_for(lambda: cluster_status(kube, CLUSTER).get("jobsNotRequeued") == reported, 60, 3)
    reported_at = operator.passes(kube.namespace, CLUSTER)  # the pass that posted the Event is counted
    wait_for(lambda: set(slurm.nodes()) == staying | {"demo-cpu-2"}, 180, 3, explain=slurm.explain)
    operator.wait_passes(kube.namespace, CLUSTER, reported_at, 3)  # two whole passes more, at least
    # still one Event, and the job still runs
    said = [m for m in events_of(kube, "JobNotRequeued") if "job %s on demo-cpu-2" % stuck in m]
    assert len(said) == 1, said
    assert slurm.job_state(stuck) == "RUNNING" and "demo-cpu-2" in slurm.nodes()
    slurm.run("scancel", stuck)
    wait_for(lambda: set(slurm.nodes()) == staying, 180, 3, explain=slurm.explain)
    wait_for(lambda: worker_pods(kube, "cpu") == {"demo-cpu-0", "demo-cpu-1"}, 180, 3)
    wait_for(lambda: "demo-cpu-2" not in pods_by_uid(kube), 120, 2)  # gone, not just terminating
    wait_for(lambda: cluster_status(kube, CLUSTER).get("jobsNotRequeued") == [], 60, 3)
    patch(kube, "nodeset", "cpu", {"spec": {"drainTimeoutSeconds": 600}})
    wait_ready(kube, CLUSTER, operator)


def test_one_operator_keeps_clusters_in_two_namespaces(slurm_cluster: Cluster, slurm_images, operator: Operator,
                                                       tmp_path):
    """The operator, changed to watch a second namespace, runs a cluster there too; changing it
    restarts its own pods only, and the first cluster's pods stay as they were."""
    kube = slurm_cluster
    other = Cluster(env=kube.env, namespace=kube.namespace + "-b")
    before = pods_by_uid(kube)
    other.kubectl("create", "namespace", other.namespace)
    try:
        operator.install(tmp_path / "both", [kube.namespace, other.namespace])
        other.apply(manifests(cluster_manifest(other.namespace, "other", slurm_images, tiny_cluster_spec()),
                              nodeset_manifest(other.namespace, "other", "cpu", 1, TINY_NODES)))
        assert wait_ready(other, "other", operator)["nodes"] == {"ready": 1, "desired": 1}
        assert in_service(SlurmView(other, "other").nodes()["other-cpu-0"])
        assert pods_by_uid(kube) == before
        assert wait_ready(kube, CLUSTER, operator)["nodes"] == {"ready": 3, "desired": 3}
    finally:
        other.kubectl("delete", "namespace", other.namespace, "--wait=true", check=False, timeout=300)
        operator.install(tmp_path / "one", [kube.namespace])


def test_an_image_the_pods_cannot_pull_fails_the_modules_wait_in_under_two_minutes_naming_it(
        slurm_cluster: Cluster, slurm_images, tmp_path: Path):
    """What site.yml's cluster step runs (slurm_cluster, wait: true, 600 s): the controller's image
    is on a registry that refuses connections; the module fails at once the kubelet backs off,
    naming the image and the pod, the status says so and a Warning Event too."""
    kube = slurm_cluster
    missing = "localhost:1/slurmkube/controller:absent"
    spec = cluster_manifest(kube.namespace, NO_PULL, slurm_images, {"login": {"replicas": 0}})["spec"]
    spec["images"] = dict(spec["images"], controller=missing, pullPolicy="IfNotPresent")
    # The demo cluster's jail, filled already: what is tested is the pull, not a second copy of the jail.
    spec["jail"] = {"existingClaim": "%s-jail" % CLUSTER}
    args = {"name": NO_PULL, "namespace": kube.namespace, "spec": spec, "wait": True, "wait_timeout": 600,
            "kubeconfig": kube.env["KUBECONFIG"]}
    started = time.monotonic()
    try:
        proc, result = run_module(tmp_path, "slurm_cluster", args, env=kube.env)
        waited = time.monotonic() - started
        assert result is None and "image %s (pod %s-controller-0): ImagePullBackOff" % (missing, NO_PULL) \
            in proc.stdout, proc.stdout[-3000:]
        assert waited < 120, waited
        status = cluster_status(kube, NO_PULL)
        found = next(c for c in status["conditions"] if c["type"] == C.CONDITION_IMAGES_PULLED)
        assert found["status"] == "False" and missing in found["message"], status
        events = kube.get_json("events", "--field-selector", "reason=ImagePullFailed,involvedObject.name=" + NO_PULL)
        assert any(missing in e["message"] for e in events["items"]), events
    finally:
        kube.kubectl("-n", kube.namespace, "delete", "slurmcluster", NO_PULL, "--wait=true", check=False, timeout=180)


def test_deleting_the_cluster_removes_what_it_owns_but_keeps_the_jail(slurm_cluster: Cluster):
    kube = slurm_cluster
    kube.kubectl("-n", kube.namespace, "delete", "slurmcluster", CLUSTER, "--wait=true", timeout=180)
    owned = "statefulsets,services,configmaps,cronjobs,poddisruptionbudgets,networkpolicies"
    wait_for(lambda: not kube.get_json(owned, "-l", "slurmkube.io/cluster=%s" % CLUSTER)["items"], 180, 3)
    wait_for(lambda: not kube.get_json("pods", "-l", "slurmkube.io/cluster=%s" % CLUSTER)["items"], 180, 3)
    claim = kube.get_json("pvc", "%s-jail" % CLUSTER)
    assert claim["status"]["phase"] == "Bound" and not claim["metadata"].get("deletionTimestamp")
