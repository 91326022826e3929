"""The exporter's objects: its own unprivileged pod that reads the jail read-only, a Service
whose port is 'metrics', and a NetworkPolicy that admits only the scrapers named."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.exporter import render_exporter

PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


def cluster(**exporter):
    return parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": {"exporter": exporter}})


def test_nothing_without_the_exporter():
    assert render_exporter(cluster()) == []


def test_the_exporter_pod_reads_slurm_and_the_jail_and_may_write_nothing():
    objects = {o["kind"]: o for o in render_exporter(cluster(enabled=True, scrapeFrom=[PROMETHEUS]))}
    assert set(objects) == {"Service", "Deployment", "NetworkPolicy"}
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "metrics", "containerPort": 9341, "protocol": "TCP"} in container["ports"]
    jail = next(m for m in container["volumeMounts"] if m["mountPath"] == C.JAIL_MOUNT_PATH)
    assert jail["readOnly"] is True
    assert all(m.get("readOnly") for m in container["volumeMounts"])
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"name": C.ENV_EXPORTER_MIN_INTERVAL, "value": "15"} in container["env"]
    service = objects["Service"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9341, "targetPort": 9341, "protocol": "TCP"}]
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert service["spec"]["clusterIP"] == "None"  # DNS discovery finds the pod itself
    policy = objects["NetworkPolicy"]["spec"]
    assert policy["ingress"] == [{"ports": [{"protocol": "TCP", "port": 9341}], "from": [PROMETHEUS]}]
    assert policy["podSelector"]["matchLabels"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]


def test_the_jails_usage_is_counted_beside_by_root_that_can_only_read_and_the_exporter_knows_the_claims_size():
    pod = next(o for o in render_exporter(cluster(enabled=True, jailUsageIntervalSeconds=60))
               if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    exporter, usage = pod["containers"]
    assert usage["name"] == C.CONTAINER_JAIL_USAGE and usage["command"][-1] == C.JAIL_USAGE_PROGRAM
    assert usage["env"] == [{"name": C.ENV_JAIL_USAGE_INTERVAL, "value": "60"}]
    context = usage["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["DAC_READ_SEARCH"]}
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m for m in usage["volumeMounts"]}
    assert mounts[C.JAIL_MOUNT_PATH]["readOnly"] is True and not mounts[C.JAIL_USAGE_DIR].get("readOnly")
    shared = next(m for m in exporter["volumeMounts"] if m["mountPath"] == C.JAIL_USAGE_DIR)
    assert shared["readOnly"] is True and shared["name"] == mounts[C.JAIL_USAGE_DIR]["name"]
    # The jail's claim asks for 10Gi (spec.jail.size's default).
    assert {"name": C.ENV_JAIL_CLAIM_BYTES, "value": str(10 << 30)} in exporter["env"]
    own_claim = parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": {
        "exporter": {"enabled": True}, "jail": {"existingClaim": "site-jail"}}})
    exporter = next(o for o in render_exporter(own_claim) if o["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]
    assert C.ENV_JAIL_CLAIM_BYTES not in {e["name"] for e in exporter["env"]}
