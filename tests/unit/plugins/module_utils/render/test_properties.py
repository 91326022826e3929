"""Invariants of the renderers over generated clusters (hypothesis)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_slurm_conf

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
label = st.from_regex(r"\A[a-z][a-z0-9]{0,7}\Z")


@st.composite
def clusters(draw):
    name = draw(label)
    namespace = draw(label)
    set_names = draw(st.lists(label, min_size=0, max_size=5, unique=True))
    nodesets = []
    for set_name in set_names:
        gpus = draw(st.integers(0, 8))
        spec = {
            "clusterName": name,
            "replicas": draw(st.integers(0, 50)),
            "resources": {"cpu": draw(st.integers(1, 128)), "memory": "%dGi" % draw(st.integers(1, 512)),
                          "gpus": gpus},
            "catchAll": draw(st.booleans()),
        }
        nodesets.append({"metadata": {"name": set_name, "namespace": namespace}, "spec": spec})
    partitions = []
    for i in range(draw(st.integers(0, 3))):
        members = draw(st.lists(st.sampled_from(set_names), unique=True)) if set_names else []
        partitions.append({"name": "p%d" % i, "nodeSets": members})
    cluster_spec = {
        "partitions": partitions,
        "login": {"replicas": draw(st.integers(0, 3)),
                  "serviceType": draw(st.sampled_from(["NodePort", "LoadBalancer", "ClusterIP"]))},
        "healthChecks": {"longChecks": {"enabled": draw(st.booleans())}},
    }
    cluster = parse_cluster({"metadata": {"name": name, "namespace": namespace}, "spec": cluster_spec})
    return cluster, [parse_nodeset(n) for n in nodesets]


def partition_members(slurm_conf):
    members = {}
    for line in slurm_conf.splitlines():
        if line.startswith("PartitionName="):
            words = dict(w.split("=", 1) for w in line.split())
            members[words["PartitionName"]] = set(words.get("Nodes", "").split(",")) - {""}
    return members


common = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(clusters())
def test_names_are_dns_labels_and_unique_per_kind(model):
    objects = render_cluster(*model).objects
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys))
    for name in (key[1] for key in keys):
        assert DNS1123.match(name) and len(name) <= 63, name
    for obj in objects:
        if obj["kind"] == "StatefulSet":
            assert len(obj["metadata"]["name"]) <= 52


@common
@given(clusters())
def test_every_nodeset_is_reachable_unless_excluded(model):
    cluster, nodesets = model
    members = partition_members(render_slurm_conf(cluster, nodesets))
    covered = set().union(*members.values()) if members else set()
    partitions = cluster.spec.partitions
    named = {ref for p in partitions for ref in p.node_sets}
    has_catch_all = not partitions or any(not p.node_sets for p in partitions)
    expected = {ns.name for ns in nodesets if ns.name in named or (has_catch_all and ns.spec.catch_all)}
    assert covered == expected


@common
@given(clusters())
def test_services_select_the_pods_they_serve_on_ports_they_open(model):
    objects = render_cluster(*model).objects
    workloads = [o for o in objects if o["kind"] == "StatefulSet"]
    for svc in (o for o in objects if o["kind"] == "Service"):
        selector = svc["spec"]["selector"]
        matches = [w for w in workloads
                   if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert len(matches) == 1, svc["metadata"]["name"]
        target = matches[0]
        opened = {p["containerPort"] for c in target["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= opened
    for workload in workloads:
        assert workload["spec"]["selector"]["matchLabels"].items() <= \
            workload["spec"]["template"]["metadata"]["labels"].items()
        service_names = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
        assert workload["spec"]["serviceName"] in service_names


@common
@given(clusters())
def test_slurm_conf_grows_with_nodesets_not_nodes(model):
    cluster, nodesets = model
    text = render_slurm_conf(cluster, nodesets)
    scaled = [parse_nodeset({"metadata": {"name": ns.name, "namespace": ns.namespace},
                             "spec": {"clusterName": ns.spec.cluster_name, "replicas": ns.spec.replicas * 10 + 1,
                                      "resources": {"cpu": ns.spec.resources.cpu,
                                                    "memory": ns.spec.resources.memory,
                                                    "gpus": ns.spec.resources.gpus},
                                      "catchAll": ns.spec.catch_all}})
              for ns in nodesets]
    assert render_slurm_conf(cluster, scaled) == text
    assert text.count("\nNodeSet=") == len(nodesets)


@common
@given(clusters())
def test_every_object_is_labelled_with_its_cluster(model):
    cluster = model[0]
    for obj in render_cluster(*model).objects:
        assert obj["metadata"]["labels"][C.LABEL_CLUSTER] == cluster.name
        assert obj["metadata"]["namespace"] == cluster.namespace
