"""The reconciler and an on-demand node set: what a pass renders (a PodTemplate, no StatefulSet),
the pods it makes and deletes as Slurm's power states change, the nodes it keeps up, the failed
resume it explains, and a fixed set that may not turn on-demand.

Slurm is test_reconcile_health's table behind the exec API, its nodes in the power states slurmctld
26.05 reports; pods and objects live in the in-memory API.
"""

from __future__ import annotations

import datetime

import pytest
from test_reconcile_health import T0, SlurmKube, make_world

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.pass_state import NodeTemplates
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_nodes import NodeAction
from ansible_collections.slurmkube.core.plugins.module_utils.operator.power import power_cycle

NS = "research"
BASE = "cpu-compute"
ASLEEP = ("IDLE", "CLOUD", "POWERED_DOWN")


class PowerKube(SlurmKube):
    """SlurmKube that also takes `scontrol update state=power_up|power_down`, as slurmctld would,
    and carries the memory of one operator (the templates its passes rendered) for its passes and
    its power loop."""

    def __init__(self):
        super().__init__()
        self.templates = NodeTemplates()

    def exec(self, namespace, pod, container, command, timeout=60):
        if command[:2] == ["scontrol", "update"] and command[3] in ("state=power_up", "state=power_down"):
            node = self.nodes[command[2].split("=", 1)[1]]
            flag = "POWER_UP" if command[3] == "state=power_up" else "POWER_DOWN"
            node["state"] = sorted(set(node["state"]) | {flag})
            self.execs.append((pod, container, tuple(command)))
            return 0, "", ""
        return super().exec(namespace, pod, container, command, timeout)


def reconcile_at(kube, cluster, when):
    return R.Reconciler(kube, clock=lambda: when, templates=kube.templates).reconcile(cluster)


def power(kube, cluster):
    return power_cycle(kube, cluster, kube.templates)


@pytest.fixture
def world(monkeypatch):
    kube = PowerKube()
    kube, cluster = make_world(monkeypatch, kube)
    for i in range(4):  # the fixed set's pods and nodes go: the set becomes a new, on-demand one
        del kube.objects[("Pod", NS, "%s-%d" % (BASE, i))]
        del kube.nodes["%s-%d" % (BASE, i)]
    del kube.objects[("StatefulSet", NS, BASE)]
    nodeset = kube.objects[("NodeSet", NS, "compute")]
    nodeset["spec"] = dict(nodeset["spec"], replicas=0, maxReplicas=3)
    nodeset["metadata"].pop("annotations", None)  # made anew: no earlier valid spec
    reconcile_at(kube, cluster, T0)
    for i in range(3):
        kube.node("%s-%d" % (BASE, i), *ASLEEP)
    return kube, cluster


def pods(kube):
    return sorted(key[2] for key in kube.objects if key[0] == "Pod" and key[2].startswith(BASE))


def events(outcome, reason):
    return [e.message for e in outcome.events if e.reason == reason]


def test_an_on_demand_set_is_a_pod_template_and_cloud_nodes_with_no_pod(world):
    kube, cluster = world
    assert ("StatefulSet", NS, BASE) not in kube.objects
    template = kube.objects[("PodTemplate", NS, BASE)]
    assert template["metadata"]["annotations"][C.ANNOTATION_NODES] == "3"
    env = template["template"]["spec"]["containers"][0]["env"]
    assert {"name": C.ENV_CLOUD_NODE, "value": "1"} in env
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    assert "NodeName=cpu-compute-[0-2] State=CLOUD CPUs=" in conf and "ResumeProgram=/bin/true" in conf
    outcome = reconcile_at(kube, cluster, T0)
    assert pods(kube) == [] and outcome.nodeset_status["compute"]["phase"] == "Ready"


def test_resumed_nodes_get_pods_from_the_template_and_a_steady_pass_writes_nothing(world):
    kube, cluster = world
    for i in (0, 2):
        kube.node("%s-%d" % (BASE, i), "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    outcome = reconcile_at(kube, cluster, T0)
    assert pods(kube) == [BASE + "-0", BASE + "-2"]
    pod = kube.objects[("Pod", NS, BASE + "-2")]
    template = kube.objects[("PodTemplate", NS, BASE)]["template"]
    assert pod["spec"]["hostname"] == BASE + "-2" and pod["spec"]["subdomain"] == BASE
    assert pod["spec"]["containers"] == template["spec"]["containers"]
    assert pod["metadata"]["labels"][C.REVISION_LABEL]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == C.KIND_CLUSTER
    assert len(events(outcome, "NodeMakePod")) == 2
    writes = kube.writes
    outcome = reconcile_at(kube, cluster, T0)
    assert kube.writes == writes and events(outcome, "NodeMakePod") == []


def test_a_powered_down_nodes_pod_is_deleted(world):
    kube, cluster = world
    kube.node(BASE + "-1", "ALLOCATED", "CLOUD", "POWERING_UP")
    reconcile_at(kube, cluster, T0)
    kube.node(BASE + "-1", "IDLE", "CLOUD", "POWERING_DOWN")
    outcome = reconcile_at(kube, cluster, T0)
    assert pods(kube) == [] and events(outcome, "NodeDeletePod") == [
        "delete-pod %s-1: Slurm powered %s-1 down" % (BASE, BASE)]


def test_replicas_are_powered_up_by_the_operator(world):
    kube, cluster = world
    kube.objects[("NodeSet", NS, "compute")]["spec"]["replicas"] = 1
    reconcile_at(kube, cluster, T0)
    assert ("cpu-controller-0", C.CONTAINER_CONTROLLER,
            ("scontrol", "update", "nodename=%s-0" % BASE, "state=power_up")) in kube.execs
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    assert "SuspendExcNodes=cpu-compute-[0-2]:1" in conf


def test_a_failed_resume_gets_the_pods_reason_and_a_warning(world):
    kube, cluster = world
    kube.node(BASE + "-0", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    reconcile_at(kube, cluster, T0)
    kube.objects[("Pod", NS, BASE + "-0")]["status"] = {"containerStatuses": [{"state": {"waiting": {
        "reason": "ErrImagePull", "message": "pull access denied for no/such"}}}]}
    kube.node(BASE + "-0", "DOWN", "CLOUD", "POWERED_DOWN", reason="ResumeTimeout reached")
    outcome = reconcile_at(kube, cluster, T0 + datetime.timedelta(minutes=5))
    assert kube.nodes[BASE + "-0"]["reason"] == \
        "slurmkube: resume failed: ErrImagePull: pull access denied for no/such"
    assert pods(kube) == []
    warned = [e for e in outcome.events if e.reason == "NodeResumeFailed"]
    assert warned and warned[0].kind == "Warning" and "state=resume" in warned[0].message


def test_a_fixed_set_may_not_become_on_demand(monkeypatch):
    kube, cluster = make_world(monkeypatch, PowerKube())
    nodeset = kube.objects[("NodeSet", NS, "compute")]
    nodeset["spec"] = dict(nodeset["spec"], maxReplicas=8)
    outcome = reconcile_at(kube, cluster, T0)
    status = outcome.nodeset_status["compute"]
    assert status["phase"] == "Invalid" and "spec.maxReplicas" in status["message"]
    assert ("StatefulSet", NS, BASE) in kube.objects and ("PodTemplate", NS, BASE) not in kube.objects


def test_the_power_cycle_makes_and_deletes_pods_between_passes_as_the_pass_would(world):
    kube, cluster = world
    kube.node(BASE + "-1", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    report = power(kube, cluster)
    assert report.actions == [NodeAction("make-pod", BASE + "-1", "Slurm resumed %s-1" % BASE)]
    made = kube.objects[("Pod", NS, BASE + "-1")]
    template = kube.objects[("PodTemplate", NS, BASE)]
    assert made["metadata"]["labels"][C.REVISION_LABEL] == template["metadata"]["annotations"][C.ANNOTATION_REVISION]
    assert kube.events[-1][2] == "NodeMakePod"
    assert power(kube, cluster).actions == []
    # The pass finds the pod current: no update, nothing more to make.
    outcome = reconcile_at(kube, cluster, T0)
    assert pods(kube) == [BASE + "-1"] and not events(outcome, "NodeMakePod") and not events(outcome, "NodeDrain")
    kube.node(BASE + "-1", "IDLE", "CLOUD", "POWERING_DOWN")
    assert [a.kind for a in power(kube, cluster).actions] == ["delete-pod"] and pods(kube) == []


def test_the_power_cycle_leaves_a_cluster_without_on_demand_sets_after_one_call(monkeypatch):
    kube, cluster = make_world(monkeypatch, PowerKube())
    execs = len(kube.execs)
    assert power(kube, cluster) is None and len(kube.execs) == execs


def test_a_deleted_on_demand_set_lets_its_nodes_go_only_once_they_sleep(world):
    kube, cluster = world
    kube.node(BASE + "-1", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    reconcile_at(kube, cluster, T0)  # the pod of node 1, resumed for a job
    kube.node(BASE + "-1", "ALLOCATED", "CLOUD")
    del kube.objects[("NodeSet", NS, "compute")]
    outcome = reconcile_at(kube, cluster, T0)
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    # Node 1 still declared (node 2, asleep, no longer), drained, its pod kept while the job runs.
    assert "NodeName=cpu-compute-[0-1] State=CLOUD" in conf, conf
    assert "DRAIN" in kube.nodes[BASE + "-1"]["state"] and pods(kube) == [BASE + "-1"]
    assert not events(outcome, "NodeSetRetired")
    # The job ended: the node is powered down, its pod deleted, the file stops declaring it.
    kube.node(BASE + "-1", "IDLE", "DRAIN", "CLOUD", reason=kube.nodes[BASE + "-1"]["reason"])
    reconcile_at(kube, cluster, T0)
    assert ("cpu-controller-0", C.CONTAINER_CONTROLLER,
            ("scontrol", "update", "nodename=%s-1" % BASE, "state=power_down")) in kube.execs
    kube.node(BASE + "-1", "IDLE", "DRAIN", "CLOUD", "POWERING_DOWN")
    reconcile_at(kube, cluster, T0)
    assert pods(kube) == []
    kube.node(BASE + "-1", "IDLE", "DRAIN", "CLOUD", "POWERED_DOWN")
    outcome = reconcile_at(kube, cluster, T0)
    assert ("PodTemplate", NS, BASE) not in kube.objects and events(outcome, "NodeSetRetired")
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    assert "cpu-compute" not in conf


def test_the_power_cycle_leaves_a_failed_resumes_pod_for_the_pass_to_explain(world):
    kube, cluster = world
    kube.node(BASE + "-0", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    power(kube, cluster)
    kube.objects[("Pod", NS, BASE + "-0")]["status"] = {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient memory."}]}
    kube.node(BASE + "-0", "DOWN", "CLOUD", "POWERED_DOWN", reason="ResumeTimeout reached")
    assert power(kube, cluster).actions == [] and pods(kube) == [BASE + "-0"]
    reconcile_at(kube, cluster, T0)
    assert kube.nodes[BASE + "-0"]["reason"] == \
        "slurmkube: resume failed: Unschedulable: 0/1 nodes are available: 1 Insufficient memory."
    assert pods(kube) == []


def tamper(kube):
    """An editor of the namespace rewrites the live PodTemplate: another command, privileged."""
    live = kube.objects[("PodTemplate", NS, BASE)]
    container = live["template"]["spec"]["containers"][0]
    container.update(command=["sh", "-c", "cat /etc/munge/munge.key"], securityContext={"privileged": True})
    return container


def test_pods_are_made_from_the_template_the_pass_rendered_never_the_live_one(world):
    kube, cluster = world
    rendered = dict(kube.objects[("PodTemplate", NS, BASE)]["template"]["spec"]["containers"][0])
    tampered = dict(tamper(kube))
    kube.node(BASE + "-0", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    assert [a.kind for a in power(kube, cluster).actions] == ["make-pod"]
    kube.node(BASE + "-1", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    before = reconcile_at(kube, cluster, T0)  # the pass applies its own template back, then makes pod 1
    for i in (0, 1):
        made = kube.objects[("Pod", NS, "%s-%d" % (BASE, i))]["spec"]["containers"][0]
        assert made == rendered and made != tampered
    assert events(before, "NodeMakePod")


def test_the_power_loop_makes_no_pod_before_a_pass_has_rendered_the_template(world):
    kube, cluster = world
    kube.templates = NodeTemplates()  # the operator restarted: the live PodTemplate is all there is
    kube.node(BASE + "-0", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")
    execs = len(kube.execs)
    assert power(kube, cluster) is None and pods(kube) == [] and len(kube.execs) == execs
    reconcile_at(kube, cluster, T0)
    assert pods(kube) == [BASE + "-0"]


def test_a_deleted_set_after_a_restart_makes_no_pod_from_its_live_template(world):
    kube, cluster = world
    del kube.objects[("NodeSet", NS, "compute")]
    tamper(kube)
    kube.templates = NodeTemplates()
    kube.node(BASE + "-2", "ALLOCATED", "CLOUD", "POWERING_UP", "NOT_RESPONDING")  # given before the drain
    reconcile_at(kube, cluster, T0)
    assert pods(kube) == [] and power(kube, cluster) is None
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    assert "NodeName=cpu-compute-[0-2] State=CLOUD CPUs=" in conf  # the words it kept, as rendered


def test_a_deleted_sets_words_that_slurmkube_does_not_write_stay_out_of_slurm_conf(world):
    kube, cluster = world
    del kube.objects[("NodeSet", NS, "compute")]
    kube.templates = NodeTemplates()
    kube.node(BASE + "-2", "ALLOCATED", "CLOUD")  # busy: declared until its job ends
    kube.objects[("PodTemplate", NS, BASE)]["metadata"]["annotations"][C.ANNOTATION_NODE_WORDS] = \
        "State=CLOUD CPUs=1\nSlurmctldProlog=/tmp/evil NodeAddr=attacker.example"
    outcome = reconcile_at(kube, cluster, T0)
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    assert "evil" not in conf and "attacker" not in conf
    assert "NodeName=cpu-compute-[0-2] State=CLOUD\n" in conf
    refused = [e for e in outcome.events if e.reason == "NodeSetWordsRefused"]
    assert refused and refused[0].kind == "Warning" and C.ANNOTATION_NODE_WORDS in refused[0].message


def test_a_live_node_count_past_max_node_count_is_not_declared(world):
    kube, cluster = world
    kube.templates = NodeTemplates()
    del kube.objects[("NodeSet", NS, "compute")]
    kube.objects[("PodTemplate", NS, BASE)]["metadata"]["annotations"][C.ANNOTATION_NODES] = "5000"
    kube.node(BASE + "-4999", "ALLOCATED", "CLOUD")  # busy: what the count annotation would keep declared
    reconcile_at(kube, cluster, T0)
    conf = kube.objects[("ConfigMap", NS, "cpu-slurm-config")]["data"]["slurm.conf"]
    assert "MaxNodeCount=1024" in conf and "cpu-compute-[0-4999]" not in conf


def test_a_pass_lists_the_worker_pods_as_often_for_three_on_demand_sets_as_for_one(world):
    """The status counts every on-demand set's pods from one listing of the cluster's worker pods."""
    kube, cluster = world

    def pod_lists_of_a_pass():
        kinds = []
        listing = kube.list

        def counted(api_version, kind, *args, **kwargs):
            kinds.append(kind)
            return listing(api_version, kind, *args, **kwargs)

        kube.list = counted
        try:
            outcome = reconcile_at(kube, cluster, T0)
        finally:
            del kube.list
        assert outcome.nodeset_status
        return kinds.count("Pod")

    one = pod_lists_of_a_pass()
    compute = kube.objects[("NodeSet", NS, "compute")]
    for name in ("more", "most"):
        kube.apply(dict(compute, metadata={"name": name, "namespace": NS}))
    reconcile_at(kube, cluster, T0)
    assert {"more", "most"} <= set(reconcile_at(kube, cluster, T0).nodeset_status)
    assert pod_lists_of_a_pass() == one
