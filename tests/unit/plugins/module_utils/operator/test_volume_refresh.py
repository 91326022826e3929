"""New config files reach the pods at once: while the configuration in effect is not the rendered
one, the operator annotates each running pod that mounts the cluster's ConfigMap, and a change to
a pod makes its kubelet sync it (and refresh its ConfigMap volumes) at once."""

from __future__ import annotations

import copy

import pytest
from test_reconcile_health import T0, make_world
from test_topology import ControllerKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import KubeError
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.volume_refresh import (
    config_readers,
    files_digest,
    refresh_pods,
)

CONFIG_MAP = "cpu-slurm-config"


def pod(name, phase="Running", config_map=CONFIG_MAP, digest=None, deleting=False):
    meta = {"name": name, "annotations": {C.ANNOTATION_CONFIG_FILES: digest} if digest else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-27T12:00:00Z"
    return {"metadata": meta, "status": {"phase": phase},
            "spec": {"volumes": [{"name": "munge", "secret": {"secretName": "k"}},
                                 {"name": "config", "configMap": {"name": config_map}}]}}


def test_only_running_pods_that_mount_the_config_map_read_it():
    pods = [pod("fresh"), pod("pending", phase="Pending"), pod("other-map", config_map="exporter-config"),
            pod("done", digest="d1"), pod("leaving", deleting=True)]
    assert [p["metadata"]["name"] for p in config_readers(pods, CONFIG_MAP)] == ["fresh", "done"]


def test_a_pod_is_annotated_unless_it_carries_the_value_and_a_vanished_one_is_skipped():
    kube = KubeletKube()
    pods = [pod("fresh"), pod("done", digest="d1"), pod("stale", digest="d0"), pod("gone")]
    for each in pods[:3]:
        kube.objects[("Pod", "research", each["metadata"]["name"])] = copy.deepcopy(each)
    refresh_pods(kube, "research", pods, C.ANNOTATION_CONFIG_FILES, "d1")
    assert kube.pod_patches == ["fresh", "stale"]
    assert {name: kube.get("v1", "Pod", name, "research")["metadata"]["annotations"][C.ANNOTATION_CONFIG_FILES]
            for name in ("fresh", "done", "stale")} == dict.fromkeys(("fresh", "done", "stale"), "d1")


def test_the_digest_follows_every_file_name_and_content():
    files = {"slurm.conf": "a\n", "cgroup.conf": "b\n"}
    assert files_digest(files) == files_digest(dict(reversed(list(files.items()))))
    assert files_digest(files) != files_digest(dict(files, **{"cgroup.conf": "c\n"}))
    assert files_digest(files) != files_digest({"slurm.conf": "a\n", "gres.conf": "b\n"})


class KubeletKube(ControllerKube):
    """ControllerKube whose pods see the ConfigMap as their kubelet last synced it: when the pod
    was made, and whenever the pod object changes (never on a timer here); pod patches are
    counted by pod."""

    def __init__(self):
        super().__init__()
        self.mounted = {}
        self.pod_patches = []

    def config(self):
        return copy.deepcopy((self.get("v1", "ConfigMap", CONFIG_MAP, "research") or {}).get("data"))

    def start(self, name):
        """The pod is running, with its StatefulSet's volumes and the ConfigMap as it is now."""
        live = self.objects[("Pod", "research", name)]
        sts = self.get("apps/v1", "StatefulSet", name.rsplit("-", 1)[0], "research")
        live["spec"]["volumes"] = sts["spec"]["template"]["spec"]["volumes"]
        live["status"]["phase"] = "Running"
        self.mounted[name] = self.config()

    def merge_patch(self, api_version, kind, name, namespace, patch):
        if self.key(kind, name, namespace) not in self.objects:
            raise KubeError("cannot patch %s %s/%s: not found" % (kind, namespace, name))
        result = super().merge_patch(api_version, kind, name, namespace, patch)
        if kind == "Pod":
            self.pod_patches.append(name)
            self.mounted[name] = self.config()
        return result

    def files_seen(self, pod):
        return self.mounted[pod]


@pytest.fixture
def running(monkeypatch):
    """The cpu-only cluster, its controller and four workers running, its configuration in effect."""
    kube, obj = make_world(monkeypatch, KubeletKube())
    assert names.slurm_config(parse_cluster(obj).name) == CONFIG_MAP
    pods = ["cpu-controller-0"] + ["cpu-compute-%d" % i for i in range(4)]
    for name in pods:
        kube.start(name)
    obj["status"] = R.Reconciler(kube, clock=lambda: T0).reconcile(obj).status
    kube.pod_patches.clear()
    kube.reconfigures = 0
    return kube, obj, pods


def test_a_changed_setting_has_every_pod_refreshed_once_and_slurmctld_reconfigured(running):
    kube, obj, pods = running
    before = kube.config()
    obj["spec"]["healthChecks"]["interval"] = 120
    outcome = R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    now = kube.config()
    assert now != before
    assert sorted(kube.pod_patches) == sorted(pods)
    assert all(kube.mounted[name] == now for name in pods)
    assert all(kube.get("v1", "Pod", name, "research")["metadata"]["annotations"][C.ANNOTATION_CONFIG_FILES]
               == files_digest(now) for name in pods)
    assert kube.reconfigures == 1
    obj["status"] = outcome.status
    R.Reconciler(kube, clock=lambda: T0).reconcile(obj)
    assert (len(kube.pod_patches), kube.reconfigures) == (len(pods), 1)


def test_a_cluster_whose_configuration_is_in_effect_touches_no_pod(running):
    kube, obj = running[:2]
    for _pass in range(2):
        obj["status"] = R.Reconciler(kube, clock=lambda: T0).reconcile(obj).status
    assert (kube.pod_patches, kube.reconfigures) == ([], 0)
