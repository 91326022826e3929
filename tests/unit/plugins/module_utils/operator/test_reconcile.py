"""Reconcile decisions against an in-memory API (the real API server is the k8s tier's job)."""

from __future__ import annotations

import base64
import copy
import datetime

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.jwt import KeySet, key_set_from_text, new_key_set, rotated
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.apply import owned_by
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.operator import reconcile as R
from ansible_collections.slurmkube.core.plugins.module_utils.operator.reconfigure import controller_has_config
from ansible_collections.slurmkube.core.plugins.module_utils.operator.status import condition, phase_of, ready_condition
from ansible_collections.slurmkube.core.plugins.module_utils.render.jwt_auth import JWKS_PATH
from ansible_collections.slurmkube.core.plugins.module_utils.render.secrets import render_jwt_keys_secret
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl


def test_first_pass_creates_everything_second_pass_writes_nothing(world):
    kube, cluster = world
    first = R.Reconciler(kube).reconcile(cluster)
    assert "StatefulSet/cpu-compute" in first.applied
    assert kube.objects[("Secret", "research", "cpu-munge-key")]
    writes = kube.writes
    second = R.Reconciler(kube).reconcile(cluster)
    assert second.applied == []
    assert kube.writes == writes
    assert second.status["phase"] == "Pending"  # no controller pod answers in memory


def test_owned_objects_point_at_the_cluster_but_the_jail_claim_does_not(world):
    kube, cluster = world
    R.Reconciler(kube).reconcile(cluster)
    sts = kube.objects[("StatefulSet", "research", "cpu-compute")]
    assert sts["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert "ownerReferences" not in kube.objects[("PersistentVolumeClaim", "research", "cpu-jail")]["metadata"]


def test_a_field_removed_from_the_spec_is_reapplied(world):
    kube, cluster = world
    R.Reconciler(kube).reconcile(cluster)
    nodeset = kube.objects[("NodeSet", "research", "compute")]
    nodeset["spec"]["placement"] = {"nodeSelector": {"disk": "ssd"}}
    R.Reconciler(kube).reconcile(cluster)
    del nodeset["spec"]["placement"]
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert outcome.applied == ["StatefulSet/cpu-compute"]
    assert "nodeSelector" not in kube.objects[("StatefulSet", "research", "cpu-compute")]["spec"]["template"]["spec"]


def test_features_turned_off_leave_no_objects_but_their_claims_and_secrets(world):
    """Issue 38: the exporter, the REST API, accounting, backups, the directory and NetworkPolicies turned off;
    what they rendered is deleted with one Event, what holds data or keys stays, and an object of
    the same label that the cluster does not own is left alone."""
    kube, cluster = world
    backup = {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password"}
    directory = {"ldap": {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}}
    cluster["spec"] = dict(cluster["spec"], exporter={"enabled": True}, rest={"enabled": True},
                           accounting={"enabled": True}, backup=backup, directory=directory)
    R.Reconciler(kube).reconcile(cluster)
    on = set(kube.objects)
    assert {("Deployment", "research", "cpu-exporter"), ("StatefulSet", "research", "cpu-slurmdbd"),
            ("StatefulSet", "research", "cpu-mariadb"), ("Secret", "research", "cpu-accounting-db"),
            ("NetworkPolicy", "research", "cpu-database"), ("CronJob", "research", "cpu-backup"),
            ("ConfigMap", "research", "cpu-sssd")} <= on
    theirs = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "cpu-exporter-extra", "namespace": "research",
        "labels": {C.LABEL_CLUSTER: "cpu", C.LABEL_COMPONENT: C.COMPONENT_EXPORTER}}}
    kube.apply(theirs)
    cluster["spec"] = dict(cluster["spec"], exporter={"enabled": False}, rest={"enabled": False},
                           accounting={"enabled": False}, networkPolicy=False, backup=dict(backup, enabled=False),
                           directory={})
    outcome = R.Reconciler(kube).reconcile(cluster)
    gone = on - set(kube.objects)
    assert {(kind, name) for kind, _ns, name in gone} == {
        ("Deployment", "cpu-exporter"), ("Service", "cpu-exporter"), ("Deployment", "cpu-rest"),
        ("Service", "cpu-rest"), ("PodDisruptionBudget", "cpu-rest"), ("StatefulSet", "cpu-slurmdbd"),
        ("Service", "cpu-slurmdbd"),
        ("ConfigMap", "cpu-slurmdbd"), ("StatefulSet", "cpu-mariadb"), ("Service", "cpu-mariadb"),
        ("CronJob", "cpu-backup"), ("ConfigMap", "cpu-sssd"),
        *{(kind, name) for kind, _ns, name in on if kind == "NetworkPolicy"}}
    assert ("Secret", "research", "cpu-accounting-db") in kube.objects  # the password of the kept database
    assert ("Secret", "research", "cpu-jwt-keys") in kube.objects
    assert ("ConfigMap", "research", "cpu-exporter-extra") in kube.objects  # not the cluster's
    (event,) = [e.message for e in outcome.events if e.reason == "ObjectsPruned"]
    assert "Deployment/cpu-exporter" in event and "StatefulSet/cpu-mariadb" in event
    writes = kube.writes
    again = R.Reconciler(kube).reconcile(cluster)
    assert kube.writes == writes and not [e for e in again.events if e.reason == "ObjectsPruned"]


def test_scale_down_without_slurm_keeps_the_pods(world):
    kube, cluster = world
    R.Reconciler(kube).reconcile(cluster)
    kube.objects[("NodeSet", "research", "compute")]["spec"]["replicas"] = 1
    R.Reconciler(kube).reconcile(cluster)
    assert kube.objects[("StatefulSet", "research", "cpu-compute")]["spec"]["replicas"] == 4


def test_invalid_spec_changes_nothing_and_says_why(world):
    kube, cluster = world
    bad = copy.deepcopy(cluster)
    bad["spec"] = {"login": {"replicas": -1}}
    outcome = R.Reconciler(kube).reconcile(bad)
    assert outcome.status["phase"] == "Invalid"
    assert "spec.login.replicas: must be at least 0, got -1" in outcome.status["message"]
    assert kube.writes == 0


def test_an_invalid_spec_is_warned_about_once_per_generation_in_one_line(world):
    """Every resync and node event reconciles again: the status keeps saying it, the Warning
    Event goes out for the first pass of each generation only."""
    kube, cluster = world
    bad = copy.deepcopy(cluster)
    bad["metadata"]["generation"] = 4
    bad["spec"] = {"slurm": {"config": {"MinJobAge\nPlugStackConfig": 300}}}
    first = R.Reconciler(kube).reconcile(bad)
    warnings = [e for e in first.events if e.reason == "InvalidSpec"]
    assert len(warnings) == 1 and "\n" not in warnings[0].message
    assert "spec.slurm.config['MinJobAge\\nPlugStackConfig']: is not a Slurm option name" in warnings[0].message
    bad["status"] = first.status
    assert R.Reconciler(kube).reconcile(bad).events == []
    bad["metadata"]["generation"] = 5
    assert [e.reason for e in R.Reconciler(kube).reconcile(bad).events] == ["InvalidSpec"]


def test_never_valid_nodeset_is_reported_on_itself_and_left_out(world):
    kube, cluster = world
    kube.objects[("NodeSet", "research", "compute")]["spec"]["resources"]["cpu"] = "1500m"
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert outcome.nodeset_status["compute"]["phase"] == "Invalid"
    assert "whole number of CPUs" in outcome.nodeset_status["compute"]["message"]
    assert ("StatefulSet", "research", "cpu-compute") not in kube.objects


def test_bad_edit_of_a_nodeset_keeps_its_last_valid_spec_running(world):
    kube, cluster = world
    R.Reconciler(kube).reconcile(cluster)
    before = copy.deepcopy(kube.objects)
    kube.objects[("NodeSet", "research", "compute")]["spec"]["resources"]["cpu"] = "1500m"
    outcome = R.Reconciler(kube).reconcile(cluster)
    assert outcome.nodeset_status["compute"]["phase"] == "Invalid"
    assert outcome.applied == []
    key = ("StatefulSet", "research", "cpu-compute")
    assert kube.objects[key] == before[key]


def populate_jobs(kube):
    return sorted(key[2] for key in kube.objects if key[0] == "Job" and "populate" in key[2])


def test_a_new_jail_image_retires_the_old_populate_job_before_starting_its_own(world):
    kube, cluster = world
    R.Reconciler(kube).reconcile(cluster)
    [first] = populate_jobs(kube)
    # The jail_volume module's own Job (another name) is none of the operator's business.
    kube.apply({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "cpu-jail-data-populate-0", "namespace": "research"}})
    upgraded = copy.deepcopy(cluster)
    upgraded["spec"].setdefault("images", {})["jail"] = "registry.example/jail:2"
    held = R.Reconciler(kube).reconcile(upgraded)
    assert populate_jobs(kube) == ["cpu-jail-data-populate-0"]
    assert not [name for name in held.applied if name.startswith("Job/")]
    R.Reconciler(kube).reconcile(upgraded)
    [second] = [name for name in populate_jobs(kube) if name.startswith("cpu-jail-populate-")]
    assert second != first
    assert "cpu-jail-data-populate-0" in populate_jobs(kube)


def test_ready_is_the_sum_of_the_other_conditions_and_names_the_first_missing(world):
    kube, cluster = world
    status = R.Reconciler(kube).reconcile(cluster).status
    *others, ready = status["conditions"]
    assert ready["type"] == "Ready" and ready["status"] == "False"
    assert ready["reason"] == "ControllerReady"  # nothing runs in memory
    missing = [c for c in others if c["status"] != "True"]
    assert ready["message"] == "; ".join(c["message"] for c in missing)
    now = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)
    held = [condition(t, True, "R", "fine", 1, [], now) for t in ("A", "B")]
    assert ready_condition(held, 1, [], now)["status"] == "True"
    assert phase_of(held + [ready_condition(held, 1, [], now)]) == "Ready"


def test_the_rest_api_gets_its_keys_once_and_its_pods_only_the_public_half(world):
    kube, cluster = world
    cluster["spec"]["rest"] = {"enabled": True}
    first = R.Reconciler(kube).reconcile(cluster)
    secret = kube.objects[("Secret", "research", "cpu-jwt-keys")]
    assert set(secret["data"]) == {C.JWKS_SECRET_KEY, C.JWT_SIGNING_SECRET_KEY}
    assert [e for e in first.events if e.reason == "JwtKeysCreated"]
    assert "Deployment/cpu-rest" in first.applied
    again = R.Reconciler(kube).reconcile(cluster)
    assert kube.objects[("Secret", "research", "cpu-jwt-keys")] == secret and again.applied == []
    controller = kube.objects[("StatefulSet", "research", "cpu-controller")]["spec"]["template"]["spec"]
    (volume,) = [v for v in controller["volumes"] if v.get("secret", {}).get("secretName") == "cpu-jwt-keys"]
    assert volume["secret"]["items"] == [{"key": C.JWKS_SECRET_KEY, "path": C.JWKS_SECRET_KEY}]


def test_no_reconfigure_until_the_controller_pod_holds_the_key_set_its_new_configuration_names():
    cluster_model = parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": {"rest": {"enabled": True}}})
    files = {"slurm.conf": "AuthAltTypes=auth/jwt\n"}
    present = {"jwks": False}

    def run(argv):
        if argv[0] == "cat":
            return 0, files["slurm.conf"], ""
        return (0 if present["jwks"] else 1), "", ""

    slurm = SlurmControl(run)
    assert not controller_has_config(cluster_model, slurm, files)
    present["jwks"] = True
    assert controller_has_config(cluster_model, slurm, files)


def rolled(deployment, ready, updated, unavailable=0):
    """A Deployment's status once its controller saw its latest spec."""
    deployment["status"] = {"observedGeneration": deployment["metadata"].get("generation"), "replicas": ready,
                            "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": updated,
                            "unavailableReplicas": unavailable}


def test_rest_ready_waits_for_every_slurmrestd_pod_on_the_latest_spec_the_part_for_one(world):
    """RestReady (part of Ready) asks every pod, of the latest spec; the control plane's rest part
    is up while one pod takes requests (as LoginReady and the login part)."""
    kube, cluster = world
    cluster["spec"]["rest"] = {"enabled": True}
    status = R.Reconciler(kube).reconcile(cluster).status
    rest = condition_of(status, "RestReady")
    assert rest["status"] == "False" and rest["message"] == "0/2 slurmrestd pods ready"
    deployment = kube.objects[("Deployment", "research", "cpu-rest")]
    rolled(deployment, ready=1, updated=2, unavailable=1)
    status = R.Reconciler(kube).reconcile(cluster).status
    assert condition_of(status, "RestReady")["status"] == "False" and status["controlPlane"]["rest"] is True
    rolled(deployment, ready=2, updated=2)
    status = R.Reconciler(kube).reconcile(cluster).status
    assert condition_of(status, "RestReady")["status"] == "True"
    assert "slurmrestd" not in status["message"]
    # A new spec whose pod cannot start: the old pods serve, RestReady says the spec is not there.
    rolled(deployment, ready=2, updated=1, unavailable=1)
    status = R.Reconciler(kube).reconcile(cluster).status
    rest = condition_of(status, "RestReady")
    assert rest["status"] == "False" and "not yet on the latest spec" in rest["message"], rest


def test_exporter_ready_waits_for_the_exporter_pod_of_the_latest_spec(world):
    """A new exporter image whose pod cannot start keeps Ready false while the old pod serves: a
    wait for Ready then sees the pod refused its image (slurm_cluster fails naming it)."""
    kube, cluster = world
    cluster["spec"]["exporter"] = {"enabled": True}
    status = R.Reconciler(kube).reconcile(cluster).status
    assert condition_of(status, "ExporterReady")["status"] == "False"
    deployment = kube.objects[("Deployment", "research", "cpu-exporter")]
    rolled(deployment, ready=1, updated=1)
    assert condition_of(R.Reconciler(kube).reconcile(cluster).status, "ExporterReady")["status"] == "True"
    rolled(deployment, ready=1, updated=1, unavailable=1)
    exporter = condition_of(R.Reconciler(kube).reconcile(cluster).status, "ExporterReady")
    assert exporter["status"] == "False" and exporter["message"] == \
        "1/1 exporter pods ready, not yet on the latest spec (the new pods' Events say why)"


def test_no_rest_or_exporter_ready_condition_without_them(world):
    kube, cluster = world
    status = R.Reconciler(kube).reconcile(cluster).status
    assert not {"RestReady", "ExporterReady"} & {c["type"] for c in status["conditions"]}


def condition_of(status, kind):
    return next(c for c in status["conditions"] if c["type"] == kind)


def keys_in(kube):
    secret = kube.objects[("Secret", "research", "cpu-jwt-keys")]
    return key_set_from_text(base64.b64decode(secret["data"][C.JWT_SIGNING_SECRET_KEY]).decode())


def slurmdbd_hash(kube):
    sts = kube.objects[("StatefulSet", "research", "cpu-slurmdbd")]
    return sts["spec"]["template"]["metadata"]["annotations"][C.ANNOTATION_CONFIG_HASH]


def at(epoch):
    return lambda: datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)


def test_a_rotated_key_leaves_the_set_when_its_tokens_have_expired_and_only_then_slurmdbd_is_replaced(world):
    kube, cluster = world
    cluster["spec"]["rest"] = {"enabled": True, "tokenMaxLifetimeSeconds": 600}
    cluster["spec"]["accounting"] = {"enabled": True}
    R.Reconciler(kube, clock=at(1000)).reconcile(cluster)
    first, loaded = keys_in(kube), slurmdbd_hash(kube)
    # What the rest_keys module writes.
    kube.apply(owned_by(render_jwt_keys_secret(parse_cluster(cluster), rotated(first, 1000, 600)), cluster))
    outcome = R.Reconciler(kube, clock=at(1599)).reconcile(cluster)
    assert keys_in(kube).signing == first.next and first.signing in keys_in(kube).private
    assert outcome.status["restKeys"]["retiring"] == {first.signing: "1970-01-01T00:26:40Z"}
    assert slurmdbd_hash(kube) == loaded  # it loaded the new signing key as the next one
    outcome = R.Reconciler(kube, clock=at(1600)).reconcile(cluster)
    assert first.signing not in keys_in(kube).private and outcome.status["restKeys"]["retiring"] == {}
    assert [e for e in outcome.events if e.reason == "JwtKeyRetired" and first.signing in e.message]
    assert slurmdbd_hash(kube) != loaded  # now it must load the new next key
    assert "PRIVATE" not in str(outcome.status)


def test_a_key_set_without_a_next_key_gets_one_published(world):
    kube, cluster = world
    cluster["spec"]["rest"] = {"enabled": True}
    fresh = new_key_set()
    only = KeySet(fresh.signing, {fresh.signing: fresh.private[fresh.signing]})
    kube.apply(owned_by(render_jwt_keys_secret(parse_cluster(cluster), only), cluster))
    outcome = R.Reconciler(kube).reconcile(cluster)
    completed = keys_in(kube)
    assert completed.signing == fresh.signing and completed.next and completed.next != fresh.signing
    assert [e for e in outcome.events if e.reason == "JwtKeyPublished"]


def test_the_key_set_is_read_on_reconfigure_with_the_files_and_counts_in_effect_once_the_pod_holds_it():
    cluster_model = parse_cluster({"metadata": {"name": "c1", "namespace": "hpc"}, "spec": {"rest": {"enabled": True}}})
    files = {"slurm.conf": "AuthAltTypes=auth/jwt\n", JWKS_PATH: '{"keys": []}'}
    mounted = {"/etc/slurm/slurm.conf": files["slurm.conf"], JWKS_PATH: '{"keys": ["old"]}'}

    def run(argv):
        assert argv[0] == "cat"
        return 0, "".join(mounted[path] for path in argv[1:]), ""

    slurm = SlurmControl(run)
    assert not controller_has_config(cluster_model, slurm, files)
    mounted[JWKS_PATH] = files[JWKS_PATH]
    assert controller_has_config(cluster_model, slurm, files)
