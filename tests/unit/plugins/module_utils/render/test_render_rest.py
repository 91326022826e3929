"""The REST API's objects: unprivileged slurmrestd pods holding no key, a Service, a
NetworkPolicy that admits only the peers named, and auth/jwt on slurmctld and slurmdbd with the
public key set alone."""

from __future__ import annotations

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.render.accounting import (
    render_slurmdbd_conf,
    render_slurmdbd_statefulset,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.controller import render_controller_statefulset
from ansible_collections.slurmkube.core.plugins.module_utils.render.policy import render_network_policies
from ansible_collections.slurmkube.core.plugins.module_utils.render.preflight import render_preflight
from ansible_collections.slurmkube.core.plugins.module_utils.render.rest import render_rest

PORTAL = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "portal"}}}


def cluster(**spec):
    return parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": spec})


def rest_objects(model):
    return render_rest(model, "h")


def test_nothing_without_the_rest_api():
    plain = cluster(accounting={"enabled": True})
    assert render_rest(plain, "h") == []
    assert "AuthAlt" not in render_cluster(plain, []).config_files["slurm.conf"]
    assert "AuthAlt" not in render_slurmdbd_conf(plain)
    pod = render_controller_statefulset(plain, "h")["spec"]["template"]["spec"]
    assert all("secret" not in v or v["secret"]["secretName"] != "c1-jwt-keys" for v in pod["volumes"])


def test_slurmrestd_runs_unprivileged_from_the_controller_image_with_no_key():
    objects = {o["kind"]: o for o in rest_objects(cluster(rest={"enabled": True, "allowFrom": [PORTAL]}))}
    assert set(objects) == {"Service", "Deployment", "PodDisruptionBudget", "NetworkPolicy"}
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "slurmkube/controller:latest"
    security = container["securityContext"]
    assert security["runAsUser"] == C.SLURMRESTD_UID != 99 and security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"] == {"drop": ["ALL"]}
    assert [v["name"] for v in pod["volumes"]] == ["slurm-config"]  # no munge key, no JWT key
    assert {"name": C.ENV_ROLE, "value": C.ROLE_REST} in container["env"]
    assert objects["Service"]["spec"]["ports"] == [
        {"name": "rest", "port": C.SLURMRESTD_PORT, "targetPort": C.SLURMRESTD_PORT, "protocol": "TCP"}]


def test_only_the_named_peers_reach_the_rest_api_and_none_when_none_are_named():
    named = {o["kind"]: o for o in rest_objects(cluster(rest={"enabled": True, "allowFrom": [PORTAL]}))}
    assert named["NetworkPolicy"]["spec"]["ingress"] == [
        {"from": [PORTAL], "ports": [{"protocol": "TCP", "port": C.SLURMRESTD_PORT}]}]
    unnamed = {o["kind"]: o for o in rest_objects(cluster(rest={"enabled": True}))}
    assert unnamed["NetworkPolicy"]["spec"]["ingress"] == []
    assert unnamed["NetworkPolicy"]["spec"]["policyTypes"] == ["Ingress"]
    # The cluster's own pods (jobs) are not let in by the policy between them.
    internal = next(p for p in render_network_policies(cluster(rest={"enabled": True}))
                    if p["metadata"]["name"] == "c1-internal")
    (excluded,) = internal["spec"]["podSelector"]["matchExpressions"]
    assert C.COMPONENT_REST in excluded["values"] and excluded["operator"] == "NotIn"


def test_slurmctld_and_slurmdbd_check_tokens_against_the_mounted_public_key_set():
    with_rest = cluster(rest={"enabled": True}, accounting={"enabled": True})
    slurm_conf = render_cluster(with_rest, []).config_files["slurm.conf"]
    expected = ["AuthAltParameters=disable_token_creation,jwks=/etc/slurmkube/jwt/jwks.json", "AuthAltTypes=auth/jwt"]
    assert all(line in slurm_conf.splitlines() for line in expected)
    assert all(line in render_slurmdbd_conf(with_rest).splitlines() for line in expected)
    (preflight,) = [o for o in render_preflight(with_rest, {"slurm.conf": slurm_conf}) if o["kind"] == "Job"]
    for pod in (render_controller_statefulset(with_rest, "h")["spec"]["template"]["spec"],
                render_slurmdbd_statefulset(with_rest)["spec"]["template"]["spec"],
                preflight["spec"]["template"]["spec"]):  # an upgrade's new slurmctld loads it too
        volume = next(v for v in pod["volumes"] if v["name"] == "jwt-keys")
        assert volume["secret"]["items"] == [{"key": C.JWKS_SECRET_KEY, "path": C.JWKS_SECRET_KEY}]
        assert volume["secret"]["defaultMode"] & 0o002 == 0  # auth/jwt refuses a file others may write
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "jwt-keys")
        assert mount == {"name": "jwt-keys", "mountPath": C.JWT_KEYS_MOUNT_DIR, "readOnly": True}


@pytest.mark.parametrize(("spec", "message"), [
    ({"rest": {"allowFrom": [{}]}}, "spec.rest.allowFrom[0]: must be a NetworkPolicy peer"),
    ({"rest": {"allowFrom": [{"ports": [80]}]}}, "spec.rest.allowFrom[0]: must be a NetworkPolicy peer"),
    ({"exporter": {"scrapeFrom": [{"namespace": "x"}]}}, "spec.exporter.scrapeFrom[0]: must be a NetworkPolicy peer"),
    ({"rest": {"tokenMaxLifetimeSeconds": 10}}, "spec.rest.tokenMaxLifetimeSeconds: must be at least 60"),
    ({"slurm": {"config": {"AuthAltTypes": "auth/jwt"}}}, "AuthAltTypes"),
])
def test_bad_rest_settings_are_refused_naming_the_field(spec, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        cluster(**spec)


def test_two_or_more_slurmrestd_keep_one_up_through_drains_and_roll_with_slurmctlds_restart_settings():
    objects = {o["kind"]: o for o in render_rest(cluster(rest={"enabled": True}), "abc")}
    assert objects["PodDisruptionBudget"]["spec"]["minAvailable"] == 1
    template = objects["Deployment"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {C.ANNOTATION_CONFIG_HASH: "abc"}
    single = render_rest(cluster(rest={"enabled": True, "replicas": 1}), "abc")
    assert "PodDisruptionBudget" not in {o["kind"] for o in single}
