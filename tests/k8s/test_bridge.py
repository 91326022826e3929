"""Slurm schedules Kubernetes pods (the bridge, issue 36) on a real multi-node Kubernetes (kind,
two workers) with real slurmctld, slurmd, slurmdbd and MariaDB: pods created in an opted-in
namespace get the bridge's scheduler at admission, wait for their Slurm job, run on the Kubernetes
nodes of the Slurm nodes it got, share a node with a native job core by core, and their job is in
sacct under the account they name, COMPLETED when they succeeded. Pod deleted: job cancelled; job cancelled: pods ended;
slurmctld and the operator restarted: nothing killed, nothing submitted twice; a pod of a high
PriorityClass placed before 200 older low ones, which all run after; a pod's Kubernetes node lost:
the pod deleted by force after the timeout, its job ended.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import List, Optional

import pytest
import yaml
from bridge_helpers import ONE_CPU, SMALL_POD, TWO_CPU, Bridged, bare_pod, bridged_cluster, parallel_job
from kube_helpers import Cluster, wait_for
from node_loss import docker, keep_an_operator_off, kubernetes_node_ready, through_a_node_loss, workers
from slurm_helpers import OPERATOR_LABEL, Operator, in_service

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = [pytest.mark.k8s, pytest.mark.second_lane]

CLUSTER = "bridge"
ACCOUNT = "ml"
# The 1-CPU nodes take the Job's pods; the 2-CPU node, alone in partition 'wide', is shared;
# partition 'pool' (six 2-CPU nodes) runs the priority test's 201 pods twelve at a time.
WIDE_NODE = "%s-wide-0" % CLUSTER
POOL_NODES = 6
PARTITION_OF_NODE_SET = {"cpu": "main", "wide": "wide", "pool": "pool"}


@pytest.fixture(scope="module")
def bridged(kube_cluster: Cluster, slurm_images: dict, operator: Operator, tmp_path_factory) -> Bridged:
    partitions = [{"name": "main", "default": True, "nodeSets": ["cpu"]}, {"name": "wide", "nodeSets": ["wide"]},
                  {"name": "pool", "nodeSets": ["pool"]}]
    nodesets = [("cpu", 2, ONE_CPU), ("wide", 1, TWO_CPU), ("pool", POOL_NODES, TWO_CPU)]
    with bridged_cluster(kube_cluster, slurm_images, operator, tmp_path_factory.mktemp("operator-bridge"), CLUSTER,
                         partitions, nodesets, account=ACCOUNT) as found:
        yield found


def test_a_job_of_two_pods_runs_where_its_slurm_job_was_placed_and_is_accounted_under_its_account(bridged):
    ns = bridged.namespace
    job = parallel_job(ns, "train", "sleep 20", {C.ANNOTATION_BRIDGE_ACCOUNT: ACCOUNT})
    bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
    selector = "job-name=train"

    def placed() -> Optional[List[dict]]:
        pods = bridged.pods(selector)
        return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(placed, 180, 2, explain=bridged.explain)
    assert {p["spec"]["schedulerName"] for p in pods} == {C.BRIDGE_SCHEDULER_NAME}  # set at admission
    (job_id,) = {p["metadata"]["labels"][C.LABEL_SLURM_JOB] for p in pods}
    name, state, account, nodes = bridged.squeue("-j", job_id, "-o", "%j %T %a %N").split()
    assert (name, state, account) == ("%s/train" % ns, "RUNNING", ACCOUNT)
    slurm_nodes = bridged.slurm.run("scontrol", "show", "hostnames", nodes).split()
    assert {p["metadata"]["annotations"][C.ANNOTATION_SLURM_NODE] for p in pods} == set(slurm_nodes)
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(
        bridged.worker_host(p["metadata"]["annotations"][C.ANNOTATION_SLURM_NODE]) for p in pods)
    wait_for(lambda: json.loads(bridged.kubectl("get", "job", "train", "-o", "json").stdout)
             .get("status", {}).get("succeeded") == 2, 180, 2, explain=bridged.explain)
    # The pods done, their job ends as they did: it is in sacct, COMPLETED with their exit code, with
    # the name and account users see in squeue.
    wait_for(lambda: not bridged.squeue("-j", job_id, "-t", "PD,R"), 60, 2, explain=bridged.explain)
    row = bridged.slurm.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobName,Account,AllocCPUS,State,ExitCode")
    assert row.split() == ["%s/train|%s|2|COMPLETED|0:0" % (ns, ACCOUNT)]


def test_a_pod_and_a_native_job_share_a_two_cpu_node_and_a_third_waits_then_pod_and_job_follow_each_other(bridged):
    ns, slurm = bridged.namespace, bridged.slurm
    native = slurm.run("sbatch", "--parsable", "-p", "wide", "-c1", "-A", ACCOUNT, "-o", "/dev/null",
                       "--wrap", "sleep 600").split()[0]
    wide = {C.ANNOTATION_BRIDGE_PARTITION: "wide", C.ANNOTATION_BRIDGE_ACCOUNT: ACCOUNT}
    bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        [bare_pod(ns, "first", "sleep 600", wide), bare_pod(ns, "second", "sleep 600", wide)]))
    try:
        slurm.wait_running(native)

        def running(pod: str) -> bool:
            found = bridged.pod(pod) or {}
            return (found.get("status") or {}).get("phase") == "Running"

        # Whichever pod Slurm took first runs beside the native job; the other waits for a CPU.
        wait_for(lambda: running("first") or running("second"), 180, 2, explain=bridged.explain)
        first, second = ("first", "second") if running("first") else ("second", "first")
        placed = bridged.pod(first)
        assert placed["metadata"]["annotations"][C.ANNOTATION_SLURM_NODE] == WIDE_NODE
        assert placed["spec"]["nodeName"] == bridged.worker_host(WIDE_NODE)
        assert slurm.job_state(native) == "RUNNING"
        # One CPU each on the node (squeue: sinfo's CPU counts missed the external job, 1/1/0/2 with both
        # running, on 26.05.5).
        running_there = bridged.squeue("-w", WIDE_NODE, "-t", "R", "-o", "%i %C").splitlines()
        beside = {tuple(line.split()) for line in running_there}
        assert beside == {(native, "1"), (placed["metadata"]["labels"][C.LABEL_SLURM_JOB], "1")}
        time.sleep(10)
        assert not (bridged.pod(second) or {})["spec"].get("nodeName")
        assert bridged.squeue("-n", "%s/%s" % (ns, second), "-o", "%T %r").split() == ["PENDING", "Resources"]

        slurm.run("scancel", native)  # the native job's CPU goes to the waiting pod
        wait_for(lambda: running(second), 120, 2, explain=bridged.explain)

        # A pod deleted: its job is cancelled within seconds of its containers stopping.
        job_id = bridged.pod(first)["metadata"]["labels"][C.LABEL_SLURM_JOB]
        deleted = time.monotonic()
        bridged.kubectl("delete", "pod", first, "--wait=true", timeout=120)
        wait_for(lambda: slurm.job_state(job_id) == "CANCELLED", 60, 1, explain=lambda: bridged.explain(job_id),
                 what="Slurm job %s of the deleted pod %s cancelled" % (job_id, first))
        print("pod deleted -> its Slurm job cancelled in %.1f s" % (time.monotonic() - deleted))

        # A job cancelled in Slurm: its pod is ended.
        other = bridged.pod(second)["metadata"]["labels"][C.LABEL_SLURM_JOB]
        slurm.run("scancel", other)
        wait_for(lambda: bridged.pod(second) is None, 90, 2, explain=bridged.explain)
    finally:
        slurm.run("scancel", native)
        bridged.kubectl("delete", "pod", "first", "second", "--ignore-not-found", "--wait=false", check=False)


# scheduler-plugins' PodGroup as the bridge reads it (spec.minMember); the CRD only declares the
# kind: no scheduler-plugins controller runs here, and the bridge needs none.
POD_GROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "shortNames": ["pg"]},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_a_pod_group_waits_whole_while_only_one_of_its_pods_fits_then_starts_whole(bridged):
    ns, slurm = bridged.namespace, bridged.slurm
    bridged.kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(POD_GROUP_CRD))
    bridged.kube.wait_crd_established(POD_GROUP_CRD["metadata"]["name"])
    native = slurm.run("sbatch", "--parsable", "-p", "wide", "-c1", "-A", ACCOUNT, "-o", "/dev/null",
                       "--wrap", "sleep 600").split()[0]
    group = {"apiVersion": C.POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": "pair", "namespace": ns},
             "spec": {"minMember": 2}}
    wide = {C.ANNOTATION_BRIDGE_PARTITION: "wide", C.ANNOTATION_BRIDGE_ACCOUNT: ACCOUNT}
    members = [bare_pod(ns, "pair-%d" % i, "sleep 600", wide) for i in (0, 1)]
    for member in members:
        member["metadata"]["labels"] = {C.LABEL_POD_GROUP: "pair"}
    try:
        slurm.wait_running(native)
        bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([group, *members]))
        # One CPU of the node is free: one member would fit, the group does not.
        wait_for(lambda: bridged.squeue("-n", "%s/pair" % ns, "-o", "%T %r %C").split()
                 == ["PENDING", "Resources", "2"], 120, 2, explain=bridged.explain)
        time.sleep(10)
        assert not [p for p in bridged.pods("%s=pair" % C.LABEL_POD_GROUP) if p["spec"].get("nodeName")]
        slurm.run("scancel", native)

        def both_placed() -> Optional[List[dict]]:
            pods = bridged.pods("%s=pair" % C.LABEL_POD_GROUP)
            return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

        pods = wait_for(both_placed, 120, 2, explain=bridged.explain)
        assert len({p["metadata"]["labels"][C.LABEL_SLURM_JOB] for p in pods}) == 1
        assert {p["spec"]["nodeName"] for p in pods} == {bridged.worker_host(WIDE_NODE)}
    finally:
        slurm.run("scancel", native)
        bridged.kubectl("delete", "pod", "pair-0", "pair-1", "--ignore-not-found", "--wait=false", check=False)
        bridged.kube.kubectl("delete", "crd", POD_GROUP_CRD["metadata"]["name"], "--wait=false", check=False)


def test_slurmctld_and_the_operator_restarted_mid_run_kill_no_job_delete_no_pod_and_submit_nothing_twice(bridged):
    """A gang runs, another waits in Slurm's queue; slurmctld's pod, then every operator pod, are
    deleted and made again: the running pods and their job go on, the waiting gang still has one
    job, and the new operator places it once the first job's CPUs are free."""
    ns, slurm = bridged.namespace, bridged.slurm
    main = {C.ANNOTATION_BRIDGE_ACCOUNT: ACCOUNT}
    bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump(parallel_job(ns, "steady", "sleep 600", main)))
    try:
        steady = wait_for(lambda: bridged.running("job-name=steady", 2), 180, 2, explain=bridged.explain)
        uids = {p["metadata"]["uid"] for p in steady}
        (steady_job,) = {p["metadata"]["labels"][C.LABEL_SLURM_JOB] for p in steady}
        # Both 1-CPU nodes of partition main are taken: the second gang waits in Slurm's queue.
        bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump(parallel_job(ns, "queued", "sleep 5", main)))
        queued = "%s/queued" % ns
        wait_for(lambda: bridged.squeue("-n", queued, "-o", "%T %r").split() == ["PENDING", "Resources"], 120, 2,
                 explain=bridged.explain)
        (queued_job,) = bridged.squeue("-n", queued, "-o", "%i").split()

        controller = "%s-controller-0" % CLUSTER
        bridged.kube.kubectl("-n", bridged.kube.namespace, "delete", "pod", controller, "--wait=true", timeout=180)
        bridged.kube.wait_pod_ready(controller, timeout=240)
        wait_for(lambda: slurm.job_state(steady_job) == "RUNNING", 120, 3, explain=bridged.explain)

        old_leader = bridged.operator.leader()
        bridged.kube.kubectl("-n", bridged.kube.namespace, "delete", "pod", "-l", OPERATOR_LABEL, "--wait=true",
                             timeout=180)
        wait_for(lambda: bridged.operator.leader() in bridged.operator.pods(), 180, 2)
        assert bridged.operator.leader() != old_leader
        time.sleep(15)  # a few of the new leader's cycles

        assert bridged.squeue("-n", queued, "-o", "%i %T").split() == [queued_job, "PENDING"]
        assert slurm.job_state(steady_job) == "RUNNING"
        now = bridged.pods("job-name=steady")
        assert {p["metadata"]["uid"] for p in now} == uids and all(p["status"]["phase"] == "Running" for p in now)

        slurm.run("scancel", steady_job)  # the steady pods end, the queued gang starts on their CPUs
        wait_for(lambda: json.loads(bridged.kubectl("get", "job", "queued", "-o", "json").stdout)
                 .get("status", {}).get("succeeded") == 2, 180, 2, explain=bridged.explain)
        assert {p["metadata"]["labels"][C.LABEL_SLURM_JOB] for p in bridged.pods("job-name=queued")} == {queued_job}
    finally:
        bridged.kubectl("delete", "job", "steady", "queued", "--ignore-not-found", "--wait=false", check=False)


def test_a_cordoned_kubernetes_node_drains_its_slurm_nodes_and_past_the_drain_timeout_cancels_a_pods_job(bridged):
    """Cordon (the first step of kubectl drain) of the kind worker under a bridged pod: the operator
    drains its Slurm nodes for the eviction, as for native jobs; past the node set's drain timeout
    the pod's job, which Slurm cannot requeue, is cancelled and the bridge ends the pod. Uncordoned,
    the nodes serve again."""
    kube, ns, slurm = bridged.kube, bridged.namespace, bridged.slurm
    host = bridged.worker_host(WIDE_NODE)
    wide = {C.ANNOTATION_BRIDGE_PARTITION: "wide", C.ANNOTATION_BRIDGE_ACCOUNT: ACCOUNT}
    bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump(bare_pod(ns, "evicted", "sleep 600", wide)))
    placed = wait_for(lambda: (bridged.pod("evicted") or {}).get("status", {}).get("phase") == "Running"
                      and bridged.pod("evicted"), 180, 2, explain=bridged.explain)
    assert placed["spec"]["nodeName"] == host
    job_id = placed["metadata"]["labels"][C.LABEL_SLURM_JOB]
    kube.kubectl("-n", kube.namespace, "patch", "nodeset", "wide", "--type=merge",
                 "-p", json.dumps({"spec": {"drainTimeoutSeconds": 5}}))
    kube.kubectl("cordon", host)
    try:
        eviction = "%s kubernetes eviction since " % C.DRAIN_REASON_PREFIX
        wait_for(lambda: slurm.run("sinfo", "-h", "-N", "-n", WIDE_NODE, "-o", "%E").startswith(eviction), 60, 2,
                 explain=bridged.explain)
        wait_for(lambda: slurm.job_state(job_id) == "CANCELLED", 90, 2, explain=bridged.explain)
        wait_for(lambda: bridged.pod("evicted") is None, 90, 2, explain=bridged.explain)
    finally:
        kube.kubectl("uncordon", host)
        kube.kubectl("-n", kube.namespace, "patch", "nodeset", "wide", "--type=merge",
                     "-p", json.dumps({"spec": {"drainTimeoutSeconds": 600}}))
        bridged.kubectl("delete", "pod", "evicted", "--ignore-not-found", "--wait=false", check=False)
    said = kube.kubectl("-n", kube.namespace, "get", "events", "--field-selector", "reason=JobCancelled",
                        "-o", "json").stdout
    assert [e for e in json.loads(said)["items"] if "job %s " % job_id in e["message"]], said[-2000:]
    wait_for(lambda: all(in_service(states) for node, states in slurm.nodes().items()
                         if bridged.worker_host(node) == host), 120, 3, explain=bridged.explain)


LOW_PODS = 200


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": "Never", "description": "slurmkube bridge test"}


def prioritised_pod(namespace: str, name: str, command: str, priority_class_name: str) -> dict:
    pod = bare_pod(namespace, name, command, {C.ANNOTATION_BRIDGE_PARTITION: "pool"}, SMALL_POD)
    pod["metadata"]["labels"] = {"priority-test": priority_class_name}
    pod["spec"]["priorityClassName"] = priority_class_name
    # A container the runtime fails to start is started again, as a Job's pod's would be: of 201
    # pods on a loaded host, one ended Failed at once on runc's "unable to freeze" (cgroup v1, CI-like
    # run, 2026-12-02), which says nothing of the bridge; every pod must still end Succeeded.
    pod["spec"]["restartPolicy"] = "OnFailure"
    return pod


def all_succeeded(pods: List[dict], count: int) -> bool:
    """Whether COUNT pods are there and all Succeeded; a Failed one ends the wait at once, with why."""
    failed = {p["metadata"]["name"]: p["status"] for p in pods if p["status"].get("phase") == "Failed"}
    assert not failed, "pods failed: %s" % json.dumps(failed, indent=1)[:4000]
    return len(pods) == count and all(p["status"].get("phase") == "Succeeded" for p in pods)


def test_a_high_priority_pod_gets_the_first_cpu_that_frees_before_200_older_low_priority_pods_which_all_run(bridged):
    """The pool's twelve CPUs held by native jobs, 200 pods of a low PriorityClass wait in Slurm's
    queue, then one of a high class: the first CPU that frees goes to the high one (its job's
    Slurm priority is raised by its class's value, plan_bridge.gang_nice), and once the natives
    end every low pod runs too (no starvation)."""
    ns, slurm = bridged.namespace, bridged.slurm
    low, high = "%s-low" % ns, "%s-high" % ns
    classes = [priority_class(low, 10), priority_class(high, 100000)]
    bridged.kube.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(classes))
    natives = [slurm.run("sbatch", "--parsable", "-p", "pool", "-c1", "--mem=64", "-o", "/dev/null", "--wrap",
                         "sleep 600").split()[0] for _cpu in range(2 * POOL_NODES)]

    def queue() -> str:
        pods = bridged.pods("priority-test")
        phases = sorted((p["metadata"]["labels"]["priority-test"], p["status"].get("phase", "")) for p in pods)
        counted = {key: len(list(group)) for key, group in itertools.groupby(phases)}
        return "pods by class and phase: %s\nSlurm's pool queue (state, nice, count): %s\n%s" % (
            counted, slurm.run("sh", "-c", "squeue -h -p pool -o '%T %y' | sort | uniq -c"), slurm.explain()[-2500:])

    try:
        for native in natives:
            slurm.wait_running(native)
        bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            [prioritised_pod(ns, "low-%03d" % i, "true", low) for i in range(LOW_PODS)]))
        wait_for(lambda: len(bridged.squeue("-p", "pool", "-t", "PD", "-o", "%i").split()) == LOW_PODS, 300, 3,
                 explain=queue)
        bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump(prioritised_pod(ns, "urgent", "sleep 20", high)))
        urgent = "%s/urgent" % ns
        wait_for(lambda: bridged.squeue("-n", urgent, "-o", "%T").split() == ["PENDING"], 120, 2, explain=queue)
        (nice,) = bridged.squeue("-n", urgent, "-o", "%y").split()
        assert nice == "-100000"
        slurm.run("scancel", natives[0])  # one CPU frees: Slurm gives it to the urgent pod's job
        placed = wait_for(lambda: (bridged.pod("urgent") or {}).get("spec", {}).get("nodeName"), 120, 1,
                          explain=queue)
        assert not [p["metadata"]["name"] for p in bridged.pods("priority-test=" + low) if p["spec"].get("nodeName")]
        print("the urgent pod placed on %s before any of %d older pods" % (placed, LOW_PODS))
        slurm.run("scancel", *natives[1:])
        wait_for(lambda: all_succeeded(bridged.pods("priority-test=" + low), LOW_PODS), 900, 5, explain=queue)
        wait_for(lambda: not bridged.squeue("-p", "pool", "-t", "PD,R"), 120, 3, explain=queue)
        done = slurm.run("sacct", "-X", "-n", "-P", "-r", "pool", "-S", "now-1hour", "-o", "JobName,State")
        states = [line.split("|") for line in done.splitlines()]  # "CANCELLED by 0": a state with spaces
        assert sum(name.startswith(ns + "/low-") and state == "COMPLETED" for name, state in states) == LOW_PODS
    finally:
        slurm.run("scancel", *natives)
        bridged.kubectl("delete", "pods", "-l", "priority-test", "--wait=false", check=False)
        bridged.kube.kubectl("delete", "priorityclass", low, high, "--ignore-not-found", check=False)


def test_a_pod_on_a_lost_kubernetes_node_is_ended_by_force_and_its_job_ends_after_the_timeout(bridged):
    """`docker stop` of the kind worker under a bridged pod: its kubelet will never say the pod
    stopped. The operator sets the node's Slurm nodes DOWN (Slurm ends the pod's job), and after
    spec.bridge.lostNodeTimeoutSeconds the pod is deleted by force with an Event; the Kubernetes
    node back, it is Ready again."""
    kube, ns, slurm = bridged.kube, bridged.namespace, bridged.slurm
    controller_host = bridged.worker_host("%s-controller-0" % CLUSTER)
    (lost,) = [host for host in workers(kube) if host != controller_host]
    there = sorted(node for node in slurm.nodes() if bridged.worker_host(node) == lost)
    elsewhere = sorted(node for node in slurm.nodes() if node not in there)
    assert there, "no Slurm node on %s" % lost
    partition = PARTITION_OF_NODE_SET[there[0].split("-")[-2]]  # <cluster>-<node set>-<n>
    keep_an_operator_off(kube, lost)
    kube.kubectl("-n", kube.namespace, "patch", "slurmcluster", CLUSTER, "--type=merge",
                 "-p", json.dumps({"spec": {"bridge": {"lostNodeTimeoutSeconds": 15}}}))
    for node in elsewhere:  # the pod can only go to the node that will be lost
        slurm.run("scontrol", "update", "nodename=" + node, "state=drain", "reason=test: keep free")
    try:
        bridged.kubectl("apply", "-f", "-", input=yaml.safe_dump(bare_pod(ns, "stranded", "sleep 3600", {
            C.ANNOTATION_BRIDGE_ACCOUNT: ACCOUNT, C.ANNOTATION_BRIDGE_PARTITION: partition})))
        placed = wait_for(lambda: (bridged.pod("stranded") or {}).get("status", {}).get("phase") == "Running"
                          and bridged.pod("stranded"), 180, 2, explain=bridged.explain)
    finally:
        for node in elsewhere:
            slurm.run("scontrol", "update", "nodename=" + node, "state=resume")
    assert placed["spec"]["nodeName"] == lost
    job_id = placed["metadata"]["labels"][C.LABEL_SLURM_JOB]
    docker("stop", lost)
    try:
        wait_for(through_a_node_loss(lambda: bridged.pod("stranded") is None), 240, 3, explain=bridged.explain)
        said = bridged.kubectl("get", "events", "--field-selector", "reason=BridgeNodeLost", "-o", "json").stdout
        (event,) = [e for e in json.loads(said)["items"] if e["involvedObject"]["name"] == "stranded"]
        assert lost in event["message"] and "by force" in event["message"], event["message"]
        ended = wait_for(through_a_node_loss(lambda: slurm.job_state(job_id) in ("NODE_FAIL", "CANCELLED")
                                             and slurm.job_state(job_id)), 60, 2, explain=bridged.explain)
        print("the lost node's pod: deleted by force; its Slurm job %s" % ended)
        wait_for(through_a_node_loss(lambda: all("DOWN" in slurm.nodes()[node] for node in there)), 60, 2,
                 explain=slurm.explain)
    finally:
        docker("start", lost)
        kube.kubectl("-n", kube.namespace, "patch", "slurmcluster", CLUSTER, "--type=merge",
                     "-p", json.dumps({"spec": {"bridge": {"lostNodeTimeoutSeconds": None}}}), check=False)
    # Back for the modules after this one (Slurm nodes returning to service after a loss:
    # test_multinode_slurm.py).
    wait_for(lambda: kubernetes_node_ready(kube, lost), 180, 3)
