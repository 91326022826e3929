"""Munge key rotation: the rollout planner, and the reconciler driving pods that answer as
slurmkube-munge-key does (the script itself runs for real in the docker tier)."""

from __future__ import annotations

import base64

import pytest
from example_clusters import example_resources
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.keys import key_fingerprint
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator import secrets as operator_secrets
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_munge_key import (
    KeyView,
    parse_key_status,
    plan_key_rollout,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster

OLD, NEW = b"o" * 32, b"n" * 32
OLD_FP, NEW_FP = key_fingerprint(OLD), key_fingerprint(NEW)


def view(pod, component, running, mounted):
    return KeyView(pod, component, running, mounted)


def test_nothing_to_do_when_every_pod_runs_the_target():
    plan = plan_key_rollout(NEW_FP, [view("c-0", "controller", NEW_FP, NEW_FP), view("w-0", "worker", NEW_FP, NEW_FP)])
    assert plan.done and plan.waiting == [] and plan.batches == []


def test_no_pod_switches_while_any_still_has_the_old_key_mounted():
    plan = plan_key_rollout(NEW_FP, [view("c-0", "controller", OLD_FP, NEW_FP), view("w-1", "worker", OLD_FP, OLD_FP),
                                     view("w-0", "worker", OLD_FP, NEW_FP)])
    assert not plan.done
    assert plan.waiting == ["w-1"]
    assert plan.batches == []


def test_the_controller_switches_first_then_every_other_pod_behind():
    plan = plan_key_rollout(NEW_FP, [view("w-1", "worker", OLD_FP, NEW_FP), view("login-0", "login", OLD_FP, NEW_FP),
                                     view("c-0", "controller", OLD_FP, NEW_FP), view("w-0", "worker", NEW_FP, NEW_FP)])
    assert plan.batches == [["c-0"], ["login-0", "w-1"]]


def test_slurmdbd_switches_with_the_controller_and_the_exporter_with_the_clients():
    plan = plan_key_rollout(NEW_FP, [view("w-0", "worker", OLD_FP, NEW_FP), view("x-0", "exporter", OLD_FP, NEW_FP),
                                     view("db-0", "slurmdbd", OLD_FP, NEW_FP),
                                     view("c-0", "controller", OLD_FP, NEW_FP)])
    assert plan.batches == [["c-0", "db-0"], ["w-0", "x-0"]]


def test_a_controller_already_switched_is_not_restarted_again():
    plan = plan_key_rollout(NEW_FP, [view("c-0", "controller", NEW_FP, NEW_FP), view("w-0", "worker", OLD_FP, NEW_FP)])
    assert plan.batches == [["w-0"]]


@pytest.mark.parametrize("text, expected", [
    ("running=sha256:ab mounted=sha256:cd\n", ("sha256:ab", "sha256:cd")),
    ("running=none mounted=sha256:cd", ("none", "sha256:cd")),
    ("bash: slurmkube-munge-key: not found", None),
    ("", None),
])
def test_status_line_is_parsed_or_refused(text, expected):
    assert parse_key_status(text) == expected


class PodsKube(MemoryKube):
    """Pods that answer `slurmkube-munge-key` like the script: status, and switch to a mounted key."""

    def __init__(self):
        super().__init__()
        self.keys = {}  # pod -> [running, mounted]
        self.execs = []
        self.broken = set()
        self.switch_fails = set()
        self.pod_patches = []

    def add_pod(self, name, component, running, mounted):
        self.objects[("Pod", "research", name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "research",
                         "labels": {C.LABEL_CLUSTER: "cpu", C.LABEL_COMPONENT: component}},
            "status": {"phase": "Running"}}  # not Ready: the reconciler does not ask Slurm
        self.keys[name] = [running, mounted]

    def merge_patch(self, api_version, kind, name, namespace, patch):
        if kind == "Pod":
            self.pod_patches.append(name)
        return super().merge_patch(api_version, kind, name, namespace, patch)

    def exec(self, namespace, pod, container, command, timeout=60):
        self.execs.append((pod, container, tuple(command)))
        assert command[0] == C.MUNGE_KEY_PROGRAM
        if pod in self.broken:
            return 1, "", "munged did not come back"
        running, mounted = self.keys[pod]
        if command[1] == "status":
            return 0, "running=%s mounted=%s\n" % (running, mounted), ""
        if pod in self.switch_fails:
            return 1, "", "munged did not come back"
        if command[2] != mounted:
            return 3, "", "the mounted key is %s" % mounted
        self.keys[pod][0] = mounted
        return 0, "munged runs with %s\n" % mounted, ""


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setattr(operator_secrets, "new_ssh_host_keys", lambda types: {"ssh_host_ed25519_key": b"k"})
    kube = PodsKube()
    raw = example_resources("cpu-only")
    cluster = dict(raw["cluster"], metadata=dict(raw["cluster"]["metadata"], uid="u-1", generation=1))
    for nodeset in raw["nodesets"]:
        kube.apply(nodeset)
    kube.objects[("Secret", "research", "cpu-munge-key")] = {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cpu-munge-key", "namespace": "research"},
        "data": {C.MUNGE_KEY_SECRET_KEY: base64.b64encode(OLD).decode()}}
    kube.add_pod("cpu-controller-0", C.COMPONENT_CONTROLLER, OLD_FP, OLD_FP)
    kube.add_pod("cpu-compute-0", C.COMPONENT_WORKER, OLD_FP, OLD_FP)
    kube.add_pod("cpu-compute-1", C.COMPONENT_WORKER, OLD_FP, OLD_FP)
    kube.add_pod("cpu-login-0", C.COMPONENT_LOGIN, OLD_FP, OLD_FP)
    kube.add_pod("cpu-slurmdbd-0", C.COMPONENT_SLURMDBD, OLD_FP, OLD_FP)
    kube.add_pod("cpu-exporter-0", C.COMPONENT_EXPORTER, OLD_FP, OLD_FP)
    return kube, cluster


def rotate_secret(kube):
    kube.objects[("Secret", "research", "cpu-munge-key")]["data"][C.MUNGE_KEY_SECRET_KEY] = \
        base64.b64encode(NEW).decode()


def rotate_with_every_key_mounted_but_a_switch_failing(kube, cluster, failing_pod):
    """A rotation whose key every pod has mounted, munged failing to come back in failing_pod."""
    cluster["status"] = {"mungeKey": OLD_FP}
    rotate_secret(kube)
    for keys in kube.keys.values():
        keys[1] = NEW_FP
    kube.switch_fails.add(failing_pod)


def key_condition(status):
    return next(c for c in status["conditions"] if c["type"] == "MungeKeyInUse")


def test_a_new_cluster_records_the_secrets_key_without_asking_any_pod(world):
    kube, cluster = world
    status = R.Reconciler(kube).reconcile(cluster).status
    assert status["mungeKey"] == OLD_FP
    assert key_condition(status)["status"] == "True"
    assert kube.execs == []


def test_an_unchanged_key_asks_no_pod(world):
    kube, cluster = world
    cluster["status"] = {"mungeKey": OLD_FP}
    R.Reconciler(kube).reconcile(cluster)
    assert kube.execs == []


def test_a_new_key_waits_for_every_mount_then_switches_controller_first(world):
    kube, cluster = world
    cluster["status"] = {"mungeKey": OLD_FP}
    rotate_secret(kube)
    for pod in ("cpu-controller-0", "cpu-compute-0", "cpu-login-0", "cpu-slurmdbd-0", "cpu-exporter-0"):
        kube.keys[pod][1] = NEW_FP
    waiting = R.Reconciler(kube).reconcile(cluster)
    assert waiting.status["mungeKey"] == OLD_FP
    condition = key_condition(waiting.status)
    assert condition["status"] == "False"
    assert "not mounted yet in cpu-compute-1" in condition["message"]
    assert waiting.status["phase"] != "Ready"
    assert not [e for e in kube.execs if e[2][1] == "switch"]

    kube.keys["cpu-compute-1"][1] = NEW_FP
    kube.execs.clear()
    done = R.Reconciler(kube).reconcile(cluster)
    switched = [e[0] for e in kube.execs if e[2][1] == "switch"]
    assert switched[:2] == ["cpu-controller-0", "cpu-slurmdbd-0"]
    assert sorted(switched[2:]) == ["cpu-compute-0", "cpu-compute-1", "cpu-exporter-0", "cpu-login-0"]
    assert {pod: keys[0] for pod, keys in kube.keys.items()} == dict.fromkeys(kube.keys, NEW_FP)
    assert done.status["mungeKey"] == NEW_FP
    assert key_condition(done.status)["status"] == "True"
    assert ("Normal", "MungeKeyRotated") in [(e.kind, e.reason) for e in done.events]
    containers = {e[0]: e[1] for e in kube.execs}
    assert containers == {"cpu-controller-0": "slurmctld", "cpu-compute-0": "slurmd", "cpu-compute-1": "slurmd",
                          "cpu-login-0": "sshd", "cpu-slurmdbd-0": "slurmdbd", "cpu-exporter-0": "exporter"}


def test_the_key_in_use_is_the_new_one_only_once_slurmdbd_runs_it_too(world):
    """The condition comes from every daemon with a munged: slurmdbd failing to switch keeps
    it False, though slurmctld, the workers and the login node already run the new key."""
    kube, cluster = world
    rotate_with_every_key_mounted_but_a_switch_failing(kube, cluster, "cpu-slurmdbd-0")
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert outcome.status["mungeKey"] == OLD_FP
    assert key_condition(outcome.status)["status"] == "False"
    assert "cpu-slurmdbd-0" in key_condition(outcome.status)["message"]
    kube.switch_fails.clear()
    done = R.Reconciler(kube).reconcile(cluster)
    assert kube.keys["cpu-slurmdbd-0"][0] == NEW_FP
    assert done.status["mungeKey"] == NEW_FP and key_condition(done.status)["status"] == "True"


def test_every_rendered_pod_that_mounts_the_munge_key_is_in_the_rotations_list():
    """The list the rotation works from, checked against what the renderers make: every
    long-running pod template mounting the munge Secret names its component's container there."""
    raw = example_resources("cpu-only")
    raw["cluster"]["spec"]["exporter"] = {"enabled": True}
    raw["cluster"]["spec"]["accounting"] = {"enabled": True}
    objects = render_cluster(parse_cluster(raw["cluster"]), [parse_nodeset(n) for n in raw["nodesets"]]).objects
    seen = set()
    for obj in objects:
        if obj["kind"] not in ("StatefulSet", "Deployment"):
            continue
        template = obj["spec"]["template"]
        munge = [v["name"] for v in template["spec"].get("volumes", []) if "secret" in v
                 and v["secret"]["secretName"] == "cpu-munge-key"]
        if not munge:
            continue
        component = template["metadata"]["labels"][C.LABEL_COMPONENT]
        container = next(c for c in template["spec"]["containers"] if c["name"] == C.MUNGE_DAEMON_CONTAINERS[component])
        assert {m["name"] for m in container["volumeMounts"]} >= set(munge), obj["metadata"]["name"]
        seen.add(component)
    assert seen == set(C.MUNGE_DAEMON_CONTAINERS)


def test_pods_that_have_not_mounted_the_new_key_are_annotated_once_so_their_kubelet_syncs_them(world):
    """A change to a pod makes its kubelet sync it, which refreshes its Secret volumes at once."""
    kube, cluster = world
    cluster["status"] = {"mungeKey": OLD_FP}
    rotate_secret(kube)
    kube.keys["cpu-controller-0"][1] = NEW_FP
    R.Reconciler(kube).reconcile(cluster)
    behind = ["cpu-compute-0", "cpu-compute-1", "cpu-exporter-0", "cpu-login-0", "cpu-slurmdbd-0"]
    assert sorted(kube.pod_patches) == behind
    annotations = {name: (kube.get("v1", "Pod", name, "research")["metadata"].get("annotations") or {})
                   .get(C.ANNOTATION_MUNGE_KEY) for name in kube.keys}
    assert annotations == dict(dict.fromkeys(behind, NEW_FP), **{"cpu-controller-0": None})
    R.Reconciler(kube).reconcile(cluster)  # still behind: they are not annotated again
    assert sorted(kube.pod_patches) == behind


def test_a_failed_switch_keeps_the_old_fingerprint_and_says_where(world):
    kube, cluster = world
    rotate_with_every_key_mounted_but_a_switch_failing(kube, cluster, "cpu-compute-1")
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert outcome.status["mungeKey"] == OLD_FP
    assert "cpu-compute-1: munged did not come back" in key_condition(outcome.status)["message"]
    assert ("Warning", "MungeKeyRotation") in [(e.kind, e.reason) for e in outcome.events]
    # The next pass finishes the pods still behind, and only those.
    kube.switch_fails.clear()
    kube.execs.clear()
    done = R.Reconciler(kube).reconcile(cluster)
    assert [e[0] for e in kube.execs if e[2][1] == "switch"] == ["cpu-compute-1"]
    assert done.status["mungeKey"] == NEW_FP


def test_a_pod_that_cannot_say_its_key_holds_the_rollout(world):
    kube, cluster = world
    cluster["status"] = {"mungeKey": OLD_FP}
    rotate_secret(kube)
    kube.broken.add("cpu-login-0")
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert outcome.status["mungeKey"] == OLD_FP
    assert "cannot read the munge key of cpu-login-0" in key_condition(outcome.status)["message"]
    assert not [e for e in kube.execs if e[2][1] == "switch"]
