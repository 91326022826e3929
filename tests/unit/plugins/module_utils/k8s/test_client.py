"""An exec never routes the calls of the client the operator's threads share over websocket.

The kubernetes library's stream() swaps the call_api of the ApiClient it is given for a
websocket one while the exec runs. Here the websocket is refused at the point it would connect,
and what the shared client's call_api is at that moment is recorded.
"""

from __future__ import annotations

import logging

import pytest
from kubernetes.client import ApiClient, Configuration
from kubernetes.stream import ws_client

from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube, KubeError, listed_items


def test_while_an_exec_connects_the_shared_clients_calls_still_go_over_plain_https(monkeypatch):
    shared = ApiClient(Configuration(host="https://127.0.0.1:1"))
    plain = shared.call_api
    kube = Kube.__new__(Kube)  # without its discovery client, which asks a server at once
    kube.client = shared
    calls = []
    kube.observe = calls.append
    seen = []

    def connect(configuration, url, headers=None):
        seen.append(shared.call_api == plain)
        raise ConnectionRefusedError("no API server in a unit test")

    monkeypatch.setattr(ws_client, "create_websocket", connect)
    with pytest.raises(KubeError, match="cannot exec sinfo in ns/pod"):
        kube.exec("ns", "pod", "slurmctld", ["sinfo"])
    assert seen == [True]
    assert shared.call_api == plain
    assert calls == ["exec"]  # counted as made, failed or not (slurmkube_operator_api_calls_total)


def test_a_lists_items_carry_the_api_version_and_kind_the_server_leaves_out():
    listed = {"apiVersion": "apps/v1", "kind": "StatefulSetList",
              "items": [{"metadata": {"name": "a"}}, {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                      "metadata": {"name": "b"}}]}
    assert listed_items(listed, "StatefulSet") == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "a"}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "b"}}]
    assert listed_items({"apiVersion": "v1", "kind": "PodList", "items": None}, "Pod") == []


def test_every_event_posted_is_also_a_log_line_naming_its_object_and_reason(caplog):
    kube = Kube.__new__(Kube)  # without its discovery client, which asks a server at once
    kube.observe, kube.writes, posted = None, 0, []

    class Events:
        def create(self, body, namespace):
            posted.append(body)

    kube._resource = lambda api_version, kind: Events()
    cluster = {"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
               "metadata": {"name": "demo", "namespace": "hpc", "uid": "u"}}
    with caplog.at_level(logging.INFO, logger="slurmkube.actions"):
        kube.post_event(cluster, "Normal", "NodeDrain", "drain demo-cpu-1: scale-down", "slurmkube-operator")
        kube.post_event(cluster, "Warning", "NodeResumeFailed", "demo-cpu-2: Unschedulable", "slurmkube-operator")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "NodeDrain SlurmCluster hpc/demo: drain demo-cpu-1: scale-down"),
        ("WARNING", "NodeResumeFailed SlurmCluster hpc/demo: demo-cpu-2: Unschedulable")]
    assert [e["reason"] for e in posted] == ["NodeDrain", "NodeResumeFailed"]
