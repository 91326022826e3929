"""What a site adds to the product's pods (spec.pods, a component's pod, a node set's pod): it
reaches every pod template the cluster renders, each component's only its own pods, without
taking away anything of the product's; bad options are refused naming the field."""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from example_clusters import EXAMPLES, example_resources

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.model.rules import check_references
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.preflight import render_preflight

SITE = {
    "labels": {"example.org/team": "hpc"},
    "annotations": {"example.org/cost-centre": "42"},
    "imagePullSecrets": ["registry-login"],
    "priorityClassName": "hpc-standard",
    "nodeSelector": {"example.org/pool": "hpc"},
    "tolerations": [{"key": "example.org/dedicated", "operator": "Equal", "value": "hpc", "effect": "NoSchedule"}],
    "env": [{"name": "HTTPS_PROXY", "value": "http://proxy.example.org:3128"}],
    "volumes": [{"name": "site-ca", "configMap": {"name": "site-ca"}}],
    "volumeMounts": [{"name": "site-ca", "mountPath": "/etc/site-ca", "readOnly": True}],
}


def resources_with(name: str, spec: Optional[Dict[str, Any]] = None,
                   nodeset_pod: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """An example cluster's raw resources, SPEC merged into its spec (a key at a time), NODESET_POD
    on its first node set."""
    raw = copy.deepcopy(example_resources(name))
    for key, value in (spec or {}).items():
        raw["cluster"]["spec"][key] = {**raw["cluster"]["spec"].get(key, {}), **value} if isinstance(value, dict) \
            and key != "pods" else value
    if nodeset_pod is not None:
        raw["nodesets"][0]["spec"]["pod"] = nodeset_pod
    return raw


def rendered(raw: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], List[Any]]:
    cluster = parse_cluster(raw["cluster"])
    nodesets = [parse_nodeset(n) for n in raw["nodesets"]]
    objects = render_cluster(cluster, nodesets).objects
    files = {"slurm.conf": "ClusterName=%s\n" % cluster.name}
    return objects + render_preflight(cluster, files), nodesets


def pod_templates(objects: List[Dict[str, Any]]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(kind/name, pod template) of every object that makes pods."""
    for obj in objects:
        spec = obj.get("spec") or {}
        template = obj.get("template") or spec.get("template") or \
            ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
        if template:
            yield "%s/%s" % (obj["kind"], obj["metadata"]["name"]), template


# Every example with accounting, the exporter, the REST API, long checks and backups on: every component.
EVERYTHING = {"accounting": {"enabled": True}, "exporter": {"enabled": True}, "rest": {"enabled": True},
              "healthChecks": {"longChecks": {"enabled": True}},
              "backup": {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password"},
              "directory": {"ldap": {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}}}


@pytest.mark.parametrize("name", EXAMPLES)
def test_spec_pods_reaches_every_pod_template_and_keeps_the_products_own(name):
    plain = rendered(resources_with(name, EVERYTHING))[0]
    site = rendered(resources_with(name, {**EVERYTHING, "pods": SITE}))[0]
    before = dict(pod_templates(plain))
    after = dict(pod_templates(site))
    kinds = {where.split("/")[0] for where in after}
    assert {"StatefulSet", "Deployment", "Job", "CronJob"} <= kinds, kinds
    assert before.keys() == after.keys()
    for where, template in after.items():
        meta, spec = template["metadata"], template["spec"]
        ours = before[where]
        assert meta["labels"] == {**SITE["labels"], **ours["metadata"]["labels"]}, where
        assert meta["annotations"] == {**SITE["annotations"], **ours["metadata"].get("annotations", {})}, where
        assert spec["imagePullSecrets"] == [{"name": "registry-login"}], where
        assert spec["priorityClassName"] == "hpc-standard", where
        # spec.pods first, then the component's placement (the gpu example's node set has one).
        assert spec["nodeSelector"] == {**SITE["nodeSelector"], **ours["spec"].get("nodeSelector", {})}, where
        assert spec["tolerations"] == SITE["tolerations"] + ours["spec"].get("tolerations", []), where
        assert spec["volumes"] == ours["spec"]["volumes"] + SITE["volumes"], where
        for container, own in zip(spec["containers"], ours["spec"]["containers"]):
            assert container["env"] == own.get("env", []) + SITE["env"], where
            assert container["volumeMounts"] == own.get("volumeMounts", []) + SITE["volumeMounts"], where
        # Init containers are the product's steps: nothing of the site's in them.
        assert spec.get("initContainers") == ours["spec"].get("initContainers"), where
        assert spec.get("affinity") == ours["spec"].get("affinity"), where


def test_a_components_pod_goes_to_its_own_pods_only_after_the_clusters():
    raw = resources_with("multi-accounting", {
        **EVERYTHING,
        "pods": {"labels": {"example.org/team": "hpc"}, "priorityClassName": "hpc-standard",
                 "env": [{"name": "LOG_LEVEL", "value": "info"}]},
        "controller": {"replicas": 2, "pod": {
            "labels": {"example.org/team": "control"}, "priorityClassName": "hpc-critical",
            "env": [{"name": "LOG_LEVEL", "value": "debug"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "example.org/ssd", "operator": "Exists"}]}]}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone",
                                                       "labelSelector": {"matchLabels": {"app": "x"}}}}]}}}}},
        nodeset_pod={"tolerations": [{"key": "example.org/gpu", "operator": "Exists"}]})
    objects, nodesets = rendered(raw)
    templates = dict(pod_templates(objects))
    controller = templates["StatefulSet/" + names.controller("hpc")]
    assert controller["metadata"]["labels"]["example.org/team"] == "control"
    assert controller["spec"]["priorityClassName"] == "hpc-critical"
    assert [e for e in controller["spec"]["containers"][0]["env"] if e["name"] == "LOG_LEVEL"] == [
        {"name": "LOG_LEVEL", "value": "debug"}]
    affinity = controller["spec"]["affinity"]
    # The product's one controller per Kubernetes node stays required; the site's terms are added.
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == \
        C.HOSTNAME_LABEL
    assert affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 10
    assert "nodeAffinity" in affinity
    login = templates["StatefulSet/" + names.login("hpc")]
    assert login["metadata"]["labels"]["example.org/team"] == "hpc"
    assert login["spec"]["priorityClassName"] == "hpc-standard"
    assert "affinity" not in login["spec"]
    first, *others = nodesets
    worker = templates["StatefulSet/" + names.nodeset("hpc", first.name)]
    assert worker["spec"]["tolerations"] == [{"key": "example.org/gpu", "operator": "Exists"}]
    for other in others:
        assert "tolerations" not in templates["StatefulSet/" + names.nodeset("hpc", other.name)]["spec"]


def test_placement_and_pod_add_up_and_the_pod_wins_a_node_selector_key():
    raw = resources_with("cpu-only", nodeset_pod={"nodeSelector": {"example.org/pool": "b"},
                                                  "tolerations": [{"key": "b", "operator": "Exists"}]})
    raw["nodesets"][0]["spec"]["placement"] = {"nodeSelector": {"example.org/pool": "a", "example.org/disk": "ssd"},
                                               "tolerations": [{"key": "a", "operator": "Exists"}]}
    objects, nodesets = rendered(raw)
    worker = dict(pod_templates(objects))["StatefulSet/" + names.nodeset("cpu", nodesets[0].name)]["spec"]
    assert worker["nodeSelector"] == {"example.org/pool": "b", "example.org/disk": "ssd"}
    assert [t["key"] for t in worker["tolerations"]] == ["a", "b"]


def test_an_on_demand_sets_template_revision_follows_its_pod_options():
    """The operator rolls an on-demand set's pods when the revision changes: a new pull secret must."""
    def revision(pods):
        objects = rendered(resources_with("on-demand", {"pods": pods} if pods else None))[0]
        return [o["metadata"]["annotations"][C.ANNOTATION_REVISION] for o in objects if o["kind"] == "PodTemplate"]
    assert revision(None) != revision({"imagePullSecrets": ["registry-login"]})


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_volume_of_the_products_pods_is_one_a_site_may_not_name(name):
    objects = rendered(resources_with(name, EVERYTHING))[0]
    used = {v["name"] for _where, t in pod_templates(objects) for v in t["spec"].get("volumes", [])}
    ours = {v for v in used if not v.startswith(C.SUB_MOUNT_VOLUME_PREFIX)}
    assert ours <= C.PRODUCT_VOLUMES, sorted(ours - C.PRODUCT_VOLUMES)


REFUSED = [
    ({"labels": {"app.kubernetes.io/name": "x"}}, "spec.pods.labels", "the product's own key"),
    ({"labels": {"team": "a b"}}, "spec.pods.labels.team", "label value"),
    ({"annotations": {"slurmkube.io/config-hash": "x"}}, "spec.pods.annotations", "the product's own key"),
    ({"imagePullSecrets": ["Bad_Name"]}, "spec.pods.imagePullSecrets[0]", ""),
    ({"imagePullSecrets": ["a", "a"]}, "spec.pods.imagePullSecrets[1]", "used twice"),
    ({"priorityClassName": "Not Valid"}, "spec.pods.priorityClassName", ""),
    ({"affinity": {"nodeSelector": {}}}, "spec.pods.affinity", "nodeAffinity, podAffinity, podAntiAffinity"),
    ({"env": [{"name": "SLURMKUBE_ROLE", "value": "x"}]}, "spec.pods.env[0].name", "the product's own"),
    ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "spec.pods.env[1].name", "used twice"),
    ({"env": [{"name": "A"}]}, "spec.pods.env[0]", "exactly one of value and valueFrom"),
    ({"env": [{"name": "A", "value": 1}]}, "spec.pods.env[0].value", "must be text"),
    ({"volumes": [{"name": "jail", "emptyDir": {}}]}, "spec.pods.volumes[0].name", "a volume of the product's"),
    ({"volumes": [{"name": "sub-data", "emptyDir": {}}]}, "spec.pods.volumes[0].name", "a volume of the product's"),
    ({"volumes": [{"name": "data2"}]}, "spec.pods.volumes[0]", "where the volume comes from"),
    ({"volumeMounts": [{"name": "nowhere", "mountPath": "/x"}]}, "spec.pods.volumeMounts[0].name",
     "must name a volume"),
    ({"volumes": [{"name": "v", "emptyDir": {}}], "volumeMounts": [{"name": "v", "mountPath": "x"}]},
     "spec.pods.volumeMounts[0].mountPath", "absolute"),
]


@pytest.mark.parametrize("pods,field,words", REFUSED, ids=[r[1] + ":" + (r[2] or "pattern") for r in REFUSED])
def test_bad_pod_options_are_refused_naming_the_field(pods, field, words):
    with pytest.raises(SpecError) as refused:
        parse_cluster(resources_with("cpu-only", {"pods": pods})["cluster"])
    message = str(refused.value)
    assert field + ":" in message and words in message, message


def test_a_components_mounts_may_name_the_clusters_volumes_and_a_node_sets_too():
    shared = {"volumes": [{"name": "datasets", "nfs": {"server": "nfs.example.org", "path": "/datasets"}}]}
    mount = {"volumeMounts": [{"name": "datasets", "mountPath": "/datasets", "readOnly": True}]}
    raw = resources_with("cpu-only", {"pods": shared, "login": {"pod": mount}}, nodeset_pod=mount)
    objects = rendered(raw)[0]
    assert any(m["name"] == "datasets" for _w, t in pod_templates(objects) for c in t["spec"]["containers"]
               for m in c.get("volumeMounts", []))
    raw["nodesets"][0]["spec"]["pod"] = {"volumeMounts": [{"name": "elsewhere", "mountPath": "/x"}]}
    cluster = parse_cluster(raw["cluster"])
    nodesets = [parse_nodeset(n) for n in raw["nodesets"]]  # alone, it cannot know the cluster's volumes
    with pytest.raises(SpecError) as refused:
        check_references(cluster, nodesets)
    assert "spec.pod.volumeMounts[0].name: must name a volume" in str(refused.value)
