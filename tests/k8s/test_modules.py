"""The modules against a real API server: changed, idempotent, check mode, diff, failures before writes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from kube_helpers import REPO, Cluster, wait_for

sys.path.insert(0, str(REPO / "tests"))
from playbook_runner import run_module, run_playbook

# Objects in the API only, no pods: either lane's cluster serves (either_lane).
pytestmark = [pytest.mark.k8s, pytest.mark.either_lane(seconds=400)]


@pytest.fixture(scope="module")
def kube(kube_cluster: Cluster) -> Iterator[Cluster]:
    """A namespace of its own that no operator watches: the clusters these tests write stay
    objects in the API and start no pods beside the operator tests' clusters."""
    kube_cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in ("slurmclusters.slurmkube.io", "nodesets.slurmkube.io"):
        kube_cluster.wait_crd_established(crd)
    own = Cluster(env=kube_cluster.env, namespace=kube_cluster.namespace + "-modules")
    own.kubectl("create", "namespace", own.namespace)
    yield own
    own.kubectl("delete", "namespace", own.namespace, "--wait=false", check=False)


def module(kube: Cluster, tmp_path: Path, name: str, args: dict, *flags: str):
    full = dict(args, namespace=kube.namespace, kubeconfig=kube.env["KUBECONFIG"])
    return run_module(tmp_path, name, full, *flags, env=kube.env)


def test_munge_key_created_once_never_shown(kube: Cluster, tmp_path: Path):
    proc, first = module(kube, tmp_path, "munge_key", {"cluster": "mk"}, "-vvv")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert first["changed"] is True and first["fingerprint"].startswith("sha256:")
    secret = kube.get_json("secret", "mk-munge-key")
    key = secret["data"]["munge.key"]
    assert key not in proc.stdout + proc.stderr
    assert len(base64.b64decode(key)) == 1024
    again = module(kube, tmp_path, "munge_key", {"cluster": "mk"})[1]
    assert again["changed"] is False and again["fingerprint"] == first["fingerprint"]


def test_munge_key_import_is_checked_and_hidden(kube: Cluster, tmp_path: Path):
    short = base64.b64encode(b"k" * 16).decode()
    proc, result = module(kube, tmp_path, "munge_key", {"cluster": "short", "content": short})
    assert result is None and "32 to 1024 bytes, got 16" in proc.stdout
    assert kube.kubectl("-n", kube.namespace, "get", "secret", "short-munge-key", check=False).returncode != 0
    good = base64.b64encode(b"s" * 64).decode()
    proc, result = module(kube, tmp_path, "munge_key", {"cluster": "imported", "content": good}, "-vvv")
    assert result["changed"] is True and good not in proc.stdout + proc.stderr


def cluster_args(replicas: int) -> dict:
    return {"name": "mod", "wait": False, "spec": {"login": {"replicas": 0}},
            "node_sets": [{"name": "cpu", "spec": {"replicas": replicas, "resources": {"cpu": 1, "memory": "1Gi"}}}]}


def test_slurm_cluster_changed_then_idempotent_check_and_diff(kube: Cluster, tmp_path: Path):
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(2), "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is True
    assert kube.kubectl("-n", kube.namespace, "get", "slurmcluster", "mod", check=False).returncode != 0
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(2))
    assert result["changed"] is True
    assert kube.get_json("nodeset", "cpu")["spec"]["clusterName"] == "mod"
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(2))
    assert result["changed"] is False
    # result: the SlurmCluster as the API server has it (its uid and generation are the server's)
    live = kube.get_json("slurmcluster.slurmkube.io", "mod")
    assert result["result"]["metadata"]["uid"] == live["metadata"]["uid"]
    assert result["result"]["spec"] == live["spec"] and result["result"]["kind"] == "SlurmCluster"
    proc, result = module(kube, tmp_path, "slurm_cluster", cluster_args(5), "--check", "--diff")
    assert result["changed"] is True and "replicas" in proc.stdout
    assert kube.get_json("nodeset", "cpu")["spec"]["replicas"] == 2


@pytest.mark.parametrize(("spec", "message"), [
    ({"replicas": -1, "resources": {"cpu": 1}}, "spec.replicas: must be at least 0, got -1"),
    ({"replicas": 1, "resources": {"cpu": 1, "memory": "lots"}},
     "spec.resources.memory: must be a Kubernetes quantity"),
])
def test_slurm_cluster_bad_options_fail_before_writing(kube: Cluster, tmp_path: Path, spec, message):
    args = {"name": "bad", "wait": False, "node_sets": [{"name": "badset", "spec": spec}]}
    proc, result = module(kube, tmp_path, "slurm_cluster", args)
    assert result is None and message in proc.stdout
    assert kube.kubectl("-n", kube.namespace, "get", "nodeset", "badset", check=False).returncode != 0


def test_slurm_cluster_absent_keeps_nothing_but_says_so(kube: Cluster, tmp_path: Path):
    module(kube, tmp_path, "slurm_cluster", cluster_args(1))
    result = module(kube, tmp_path, "slurm_cluster", {"name": "mod", "state": "absent"})[1]
    assert result["changed"] is True
    names = json.loads(kube.kubectl("-n", kube.namespace, "get", "nodesets", "-o", "json").stdout)["items"]
    assert not [n for n in names if n["spec"]["clusterName"] == "mod"]


SEMANTICS_SPEC = {"login": {"replicas": 0}, "partitions": [{"name": "main", "default": True}]}


def semantics_args(**changes) -> dict:
    args = {"name": "sem", "wait": False, "spec": SEMANTICS_SPEC, "node_sets": [
        {"name": "sem-cpu", "spec": {"replicas": 1, "resources": {"cpu": 1, "memory": "1Gi"}}},
        {"name": "sem-big", "spec": {"replicas": 1, "resources": {"cpu": 2, "memory": "2Gi"}}}]}
    args.update(changes)
    return {k: v for k, v in args.items() if v is not None}


def sem_nodesets(kube: Cluster) -> dict:
    items = kube.get_json("nodesets")["items"]
    return {n["metadata"]["name"]: n["spec"] for n in items if n["spec"]["clusterName"] == "sem"}


def test_slurm_cluster_leaves_alone_what_it_is_not_told(kube: Cluster, tmp_path: Path):
    assert module(kube, tmp_path, "slurm_cluster", semantics_args())[1]["changed"] is True
    # node_sets left out: both node sets stay; spec left out: the live spec stays.
    proc, result = module(kube, tmp_path, "slurm_cluster", {"name": "sem", "wait": False}, "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is False and result["spec"]["partitions"] == SEMANTICS_SPEC["partitions"]
    assert set(sem_nodesets(kube)) == {"sem-cpu", "sem-big"}
    # A list that does not name a node set keeps it, unless pruning is asked for.
    only_cpu = semantics_args(spec=None, node_sets=semantics_args()["node_sets"][:1])
    assert module(kube, tmp_path, "slurm_cluster", only_cpu)[1]["changed"] is False
    assert set(sem_nodesets(kube)) == {"sem-cpu", "sem-big"}
    proc, result = module(kube, tmp_path, "slurm_cluster", dict(only_cpu, prune_node_sets=True), "--diff")
    assert result["changed"] is True and "NodeSet %s/sem-big" % kube.namespace in proc.stdout
    assert set(sem_nodesets(kube)) == {"sem-cpu"}


def test_an_out_of_band_edit_is_seen_named_in_the_diff_and_reverted(kube: Cluster, tmp_path: Path):
    args = semantics_args(name="oob", node_sets=[])
    module(kube, tmp_path, "slurm_cluster", args)
    kube.kubectl("-n", kube.namespace, "patch", "slurmcluster", "oob", "--type=merge", "-p", json.dumps(
        {"spec": {"partitions": SEMANTICS_SPEC["partitions"] + [{"name": "sneaky"}]}}))
    proc, result = module(kube, tmp_path, "slurm_cluster", args, "--check", "--diff")
    assert result["changed"] is True and "sneaky" in proc.stdout and "managedFields" not in proc.stdout
    proc, result = module(kube, tmp_path, "slurm_cluster", args)
    assert result["changed"] is True
    assert [p["name"] for p in kube.get_json("slurmcluster", "oob")["spec"]["partitions"]] == ["main"]
    assert module(kube, tmp_path, "slurm_cluster", args)[1]["changed"] is False


def test_replicas_set_by_kubectl_scale_are_kept_unless_the_play_names_a_number(kube: Cluster, tmp_path: Path):
    args = semantics_args(name="scaled", node_sets=[
        {"name": "scaled-cpu", "spec": {"replicas": 1, "resources": {"cpu": 1, "memory": "1Gi"}}}])
    module(kube, tmp_path, "slurm_cluster", args)
    kube.kubectl("-n", kube.namespace, "scale", "nodeset", "scaled-cpu", "--replicas=3")
    unnamed = dict(args, node_sets=[{"name": "scaled-cpu", "spec": {"resources": {"cpu": 1, "memory": "1Gi"}}}])
    proc, result = module(kube, tmp_path, "slurm_cluster", unnamed, "--diff")
    assert result["changed"] is False, proc.stdout[-2000:]
    assert kube.get_json("nodeset", "scaled-cpu")["spec"]["replicas"] == 3
    assert module(kube, tmp_path, "slurm_cluster", args)[1]["changed"] is True
    assert kube.get_json("nodeset", "scaled-cpu")["spec"]["replicas"] == 1


KUBE_MODULES = {
    "gpu_healthcheck": {"name": "c"},
    "jail_user": {"name": "u", "cluster": "c"},
    "jail_volume": {"name": "v", "populate": False},
    "munge_key": {"cluster": "c"},
    "slurm_cluster": {"name": "c", "wait": False},
    "slurm_cluster_info": {"name": "c"},
    "slurm_operator": {"namespace": "unused", "wait": False},
}


def api_server(kube: Cluster) -> str:
    config = yaml.safe_load(Path(kube.env["KUBECONFIG"]).read_text())
    return config["clusters"][0]["cluster"]["server"]


def test_every_module_fails_cleanly_naming_why_it_cannot_connect(kube: Cluster, tmp_path: Path):
    causes = [
        # kubernetes.core marks kubeconfig no_log (it may hold credentials): Ansible masks the path.
        ("missing kubeconfig", {"kubeconfig": str(tmp_path / "nowhere.yaml")}, "kubeconfig: ******** does not exist"),
        ("unknown context", {"kubeconfig": kube.env["KUBECONFIG"], "context": "nosuch"}, "nosuch"),
        ("unreachable host", {"host": "https://127.0.0.1:1", "api_key": "not-a-token", "validate_certs": False},
         "Connection refused"),
        ("wrong token", {"host": api_server(kube), "api_key": "not-a-token", "validate_certs": False},
         "HTTP 401 Unauthorized"),
    ]
    tasks = [{"name": "%s / %s" % (name, cause), "slurmkube.core." + name: dict(args, **auth),
              "register": "r_%s_%d" % (name, i), "ignore_errors": True}
             for name, args in KUBE_MODULES.items() for i, (cause, auth, expected) in enumerate(causes)]
    playbook = tmp_path / "connect.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    proc = run_playbook(playbook, env={k: v for k, v in kube.env.items() if k != "KUBECONFIG"})
    assert "Traceback" not in proc.stdout + proc.stderr and "MODULE FAILURE" not in proc.stdout
    for name in KUBE_MODULES:
        for cause, auth, expected in causes:
            block = proc.stdout.split("TASK [%s / %s]" % (name, cause), 1)[1].split("TASK [", 1)[0]
            assert "fatal:" in block and expected in block, (name, cause, auth, block[-1500:])


def test_connection_options_come_from_k8s_auth_variables_too(kube: Cluster, tmp_path: Path):
    env = dict(kube.env, K8S_AUTH_KUBECONFIG=kube.env["KUBECONFIG"])
    proc, result = run_module(tmp_path, "munge_key", {"cluster": "fromenv", "namespace": kube.namespace}, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result["changed"] is True


def test_slurm_cluster_refuses_a_setting_that_would_add_another_before_writing(kube: Cluster, tmp_path: Path):
    spec = {"slurm": {"config": {"MinJobAge": "300\nPlugStackConfig=/dev/null"}}}
    proc, result = module(kube, tmp_path, "slurm_cluster", {"name": "inject", "wait": False, "spec": spec})
    assert result is None and "spec.slurm.config.MinJobAge: must be one word" in proc.stdout
    assert kube.kubectl("-n", kube.namespace, "get", "slurmcluster", "inject", check=False).returncode != 0


def test_slurm_cluster_refuses_a_node_set_named_twice_in_check_mode_too_writing_nothing(kube: Cluster,
                                                                                        tmp_path: Path):
    twice = [{"name": "twin", "spec": {"replicas": 1}}, {"name": "twin", "spec": {"replicas": 3}}]
    for flags in (("--check",), ()):
        proc, result = module(kube, tmp_path, "slurm_cluster", {"name": "twins", "wait": False, "node_sets": twice},
                              *flags)
        assert result is None and "node_sets[1].name: is used twice: 'twin'" in proc.stdout, (flags, proc.stdout)
    for kind, name in (("slurmcluster", "twins"), ("nodeset", "twin")):
        assert kube.kubectl("-n", kube.namespace, "get", kind, name, check=False).returncode != 0


def can_i(kube: Cluster, account: str, *question: str) -> bool:
    return kube.kubectl("auth", "can-i", "--as", account, *question, check=False).returncode == 0


def test_an_operator_watching_one_namespace_reads_no_secret_outside_it(kube: Cluster, tmp_path: Path):
    """kubectl auth can-i as the operator's ServiceAccount: Secrets by name in the watched
    namespace only, never listed; exec into pods there only; nodes read, not changed."""
    operator_ns, elsewhere = kube.namespace + "-op", "default"
    args = {"namespace": operator_ns, "watch_namespaces": [kube.namespace], "replicas": 0, "wait": False,
            "kubeconfig": kube.env["KUBECONFIG"]}
    proc, result = run_module(tmp_path, "slurm_operator", args, env=kube.env)
    assert result and result["changed"], proc.stdout[-3000:]
    account = "system:serviceaccount:%s:slurmkube-operator" % operator_ns
    try:
        allowed = {
            ("get", "secrets", "-n", kube.namespace): True,
            ("create", "secrets", "-n", kube.namespace): True,
            ("list", "secrets", "-n", kube.namespace): False,
            ("watch", "secrets", "-n", kube.namespace): False,
            ("get", "secrets", "-n", elsewhere): False,
            ("list", "secrets", "--all-namespaces"): False,
            ("create", "pods", "--subresource=exec", "-n", kube.namespace): True,
            ("create", "pods", "--subresource=exec", "-n", elsewhere): False,
            ("create", "statefulsets.apps", "-n", elsewhere): False,
            ("list", "nodes"): True,
            ("patch", "nodes"): False,
            ("create", "clusterrolebindings.rbac.authorization.k8s.io"): False,
        }
        answers = {question: can_i(kube, account, *question) for question in allowed}
        assert answers == allowed
        narrowed = dict(args, watch_namespaces=[kube.namespace + "-other"])
        kube.kubectl("create", "namespace", kube.namespace + "-other")
        assert run_module(tmp_path, "slurm_operator", narrowed, env=kube.env)[1]["changed"]
        assert not can_i(kube, account, "get", "secrets", "-n", kube.namespace)
        assert can_i(kube, account, "get", "secrets", "-n", kube.namespace + "-other")
    finally:
        gone = dict(args, state="absent")
        run_module(tmp_path, "slurm_operator", gone, env=kube.env)
        kube.kubectl("delete", "namespace", operator_ns, kube.namespace + "-other", "--wait=false", check=False)
    assert not can_i(kube, account, "get", "secrets", "-n", kube.namespace + "-other")


def test_an_operator_installed_with_default_settings_has_no_rights_outside_its_namespace(
        kube: Cluster, tmp_path: Path):
    """Least privilege by default: no watch_namespaces, no cluster_scope. In a namespace it does
    not manage (the test's, kube-system): no exec, no Secrets, no workloads; in its own, what a
    cluster there needs. cluster_scope=true, asked for explicitly, grants every namespace."""
    operator_ns = kube.namespace + "-own"
    args = {"namespace": operator_ns, "replicas": 0, "wait": False, "kubeconfig": kube.env["KUBECONFIG"]}
    proc, result = run_module(tmp_path, "slurm_operator", args, env=kube.env)
    assert result and result["changed"], proc.stdout[-3000:]
    account = "system:serviceaccount:%s:slurmkube-operator" % operator_ns
    questions = [("create", "pods", "--subresource=exec"), ("get", "secrets"), ("create", "secrets"),
                 ("delete", "statefulsets.apps"), ("patch", "deployments.apps"), ("create", "jobs.batch")]
    try:
        for elsewhere in (kube.namespace, "kube-system"):
            granted = [q for q in questions if can_i(kube, account, *q, "-n", elsewhere)]
            assert granted == [], elsewhere
        assert [q for q in questions if not can_i(kube, account, *q, "-n", operator_ns)] == []
        assert not can_i(kube, account, "list", "secrets", "-n", operator_ns)
        wide = dict(args, cluster_scope=True)
        assert run_module(tmp_path, "slurm_operator", wide, env=kube.env)[1]["changed"]
        assert can_i(kube, account, "create", "pods", "--subresource=exec", "-n", kube.namespace)
        narrowed = run_module(tmp_path, "slurm_operator", args, env=kube.env)[1]
        assert narrowed["changed"] and not can_i(kube, account, "get", "secrets", "-n", kube.namespace)
    finally:
        run_module(tmp_path, "slurm_operator", dict(args, state="absent"), env=kube.env)
        kube.kubectl("delete", "namespace", operator_ns, "--wait=false", check=False)


def server_dry_run(kube: Cluster, namespace: str, name: str, spec: dict) -> subprocess.CompletedProcess:
    """Create a SlurmCluster as a server-side dry run: admission runs, nothing is stored."""
    obj = {"apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
           "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    return kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)


# The model's rules the API server applies by itself: the CRD's schema (patterns, CEL for unique
# names and items) and the spec-rules policy beside it (CEL for the Slurm settings maps). What each
# refusal must name.
REFUSED_BY_THE_API_SERVER = {
    "config-key-newline": ({"slurm": {"config": {"MinJobAge\nPlugStackConfig": 300}}}, "spec.slurm.config: keys"),
    "config-value-newline": ({"slurm": {"config": {"MinJobAge": "300\nPlugStackConfig=/dev/null"}}},
                             "spec.slurm.config: values must be one word"),
    "config-list-blank": ({"slurm": {"config": {"SchedulerParameters": ["bf_continue", "x y"]}}},
                          "spec.slurm.config: values must be one word"),
    "managed-key": ({"slurm": {"config": {"SlurmctldHost": "evil"}}}, "spec.slurm.config: sets a key"),
    "root-program": ({"slurm": {"config": {"Prolog": "/x"}}}, "spec.slurm.privilegedConfig"),
    "partition-key": ({"partitions": [{"name": "a", "config": {"Max\nTime": 1}}]}, "spec.partitions[*].config"),
    "node-root": ({"jail": {"subMounts": [{"name": "n", "mountPath": "/scratch", "hostPath": "/"}]}},
                  "spec.jail.subMounts[0].hostPath"),
    "escape": ({"jail": {"subMounts": [{"name": "n", "mountPath": "/s", "hostPath": "/mnt/nvme/../../etc"}]}},
               "spec.jail.subMounts[0].hostPath"),
    "two-partitions": ({"partitions": [{"name": "a"}, {"name": "a"}]}, "spec.partitions: Invalid value: two items"),
    "two-sub-mounts": ({"jail": {"subMounts": [{"name": "n", "mountPath": "/a"}, {"name": "n", "mountPath": "/b"}]}},
                       "spec.jail.subMounts: Invalid value: two items"),
    "node-set-twice": ({"partitions": [{"name": "a", "nodeSets": ["cpu", "cpu"]}]},
                       "spec.partitions[0].nodeSets: Invalid value: an item is listed twice"),
    "two-switches": ({"slurm": {"topology": [{"name": "s", "nodes": "n1"}, {"name": "s", "nodes": "n2"}]}},
                     "spec.slurm.topology: Invalid value: two items"),
}


def test_the_api_server_refuses_what_the_model_refuses_naming_the_field(kube: Cluster, tmp_path: Path):
    """Server-side dry runs, with the CRDs and the spec-rules policy the module installs and no
    admission policy of the admin's: each bad spec is refused with its field named; a spec using
    every kind of Slurm value passes. (A partition naming a node set that does not exist cannot
    be checked here, node sets being objects of their own: the operator reports it.)"""
    operator_ns = kube.namespace + "-rules"
    args = {"namespace": operator_ns, "replicas": 0, "wait": False, "kubeconfig": kube.env["KUBECONFIG"]}
    proc, result = run_module(tmp_path, "slurm_operator", args, env=kube.env)
    assert result is not None, proc.stdout[-3000:]
    good = {"slurm": {"config": {"MinJobAge": 300, "SchedulerParameters": ["bf_continue", "bf_interval=30"],
                                 "EnforcePartLimits": True, "MaxArraySize": None}},
            "partitions": [{"name": "a", "nodeSets": ["cpu"], "config": {"MaxTime": "1:00:00"}}]}
    try:
        # The API server compiles a new policy asynchronously: wait until it refuses.
        wait_for(lambda: server_dry_run(kube, kube.namespace, "probe",
                                        REFUSED_BY_THE_API_SERVER["managed-key"][0]).returncode != 0, 60)
        for name, (spec, field) in REFUSED_BY_THE_API_SERVER.items():
            out = server_dry_run(kube, kube.namespace, name, spec)
            assert out.returncode != 0 and field in out.stderr, (name, out.stderr)
        out = server_dry_run(kube, kube.namespace, "good", good)
        assert out.returncode == 0, out.stderr
    finally:
        run_module(tmp_path, "slurm_operator", dict(args, state="absent"), env=kube.env)
        kube.kubectl("delete", "namespace", operator_ns, "--wait=false", check=False)


SITE = "registry.example.com/hpc/"
SITE_IMAGES = {part: SITE + part + ":1" for part in ("controller", "worker", "login", "jail")}
BACKUP = {"enabled": True, "claimName": "backups", "passwordSecret": "backup-password"}
DIRECTORY = {"ldap": {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}}


def test_an_admission_policy_refuses_what_the_admin_did_not_allow(kube: Cluster, tmp_path: Path):
    """The API server itself evaluates the policy's CEL: in the watched namespace, only the site's
    images, host directories below /mnt/nvme, the cluster's own munge Secret and no root programs."""
    operator_ns = kube.namespace + "-vap"
    policy = {"image_prefixes": [SITE], "host_path_prefixes": ["/mnt/nvme"]}
    args = {"namespace": operator_ns, "watch_namespaces": [kube.namespace], "replicas": 0, "wait": False,
            "kubeconfig": kube.env["KUBECONFIG"], "admission_policy": policy}
    proc, result = run_module(tmp_path, "slurm_operator", args, env=kube.env)
    assert result and result["changed"], proc.stdout[-3000:]
    nvme = {"name": "nvme", "mountPath": "/scratch", "hostPath": "/mnt/nvme/scratch"}
    refused = {
        "default-images": ({}, "spec.images"),
        "other-image": ({"images": dict(SITE_IMAGES, worker="docker.io/evil/worker:1")}, "spec.images"),
        "accounting-default-image": ({"images": SITE_IMAGES, "accounting": {"enabled": True}}, "spec.images"),
        "exporter-default-image": ({"images": SITE_IMAGES, "exporter": {"enabled": True}}, "spec.images"),
        "backup-default-image": ({"images": SITE_IMAGES, "backup": BACKUP}, "spec.images"),
        # A restore runs the backup image with the backups off.
        "restore-other-image": ({"images": dict(SITE_IMAGES, backup="docker.io/evil/backup:1"), "backup": dict(
            BACKUP, enabled=False, restore={"name": "r1", "jail": True})}, "spec.images"),
        "directory-default-image": ({"images": SITE_IMAGES, "directory": DIRECTORY}, "spec.images"),
        # "/" and "/mnt/nvme/../../etc" the CRD's schema refuses before any policy (test below).
        "sibling": ({"images": SITE_IMAGES, "jail": {"subMounts": [dict(nvme, hostPath="/mnt/nvme-other")]}},
                    "hostPath"),
        "other-secret": ({"images": SITE_IMAGES, "munge": {"secretName": "someone-elses-key"}}, "secretName"),
        "other-db-secret": ({"images": SITE_IMAGES, "accounting": {"database": {
            "host": "db.example.com", "passwordSecret": "someone-elses-password"}}}, "passwordSecret"),
        "prolog": ({"images": SITE_IMAGES, "slurm": {"privilegedConfig": {"Prolog": "/x"}}}, "privilegedConfig"),
    }
    allowed = {
        "site": {"images": SITE_IMAGES, "jail": {"subMounts": [nvme]}},
        "site-accounting": {"images": dict(SITE_IMAGES, slurmdbd=SITE + "slurmdbd:1", mariadb=SITE + "mariadb:1"),
                            "accounting": {"enabled": True}},
        "site-exporter": {"images": dict(SITE_IMAGES, exporter=SITE + "exporter:1"), "exporter": {"enabled": True}},
        "site-backup": {"images": dict(SITE_IMAGES, backup=SITE + "backup:1"), "backup": BACKUP},
        "site-directory": {"images": dict(SITE_IMAGES, sssd=SITE + "sssd:1"), "directory": DIRECTORY},
        "own-secret": {"images": SITE_IMAGES, "munge": {"secretName": "own-secret-munge-key"}},
        "own-db-secret": {"images": SITE_IMAGES, "accounting": {"database": {
            "host": "db.example.com", "passwordSecret": "own-db-secret-accounting-db"}}},
    }
    try:
        # The API server compiles a new policy and binding asynchronously: wait until it refuses.
        wait_for(lambda: server_dry_run(kube, kube.namespace, "probe", {}).returncode != 0, 60)
        for name, (spec, field) in refused.items():
            out = server_dry_run(kube, kube.namespace, name, spec)
            assert out.returncode != 0 and field in out.stderr and "denied" in out.stderr, (name, out.stderr)
        for name, spec in allowed.items():
            out = server_dry_run(kube, kube.namespace, name, spec)
            assert out.returncode == 0, (name, out.stderr)
        # Namespaces the operator does not serve are not its business.
        assert server_dry_run(kube, "default", "elsewhere", {}).returncode == 0
        removed = dict(args, admission_policy={"state": "absent"})
        assert run_module(tmp_path, "slurm_operator", removed, env=kube.env)[1]["changed"]
        wait_for(lambda: server_dry_run(kube, kube.namespace, "probe", {}).returncode == 0, 60)
    finally:
        run_module(tmp_path, "slurm_operator", dict(args, state="absent"), env=kube.env)
        kube.kubectl("delete", "namespace", operator_ns, "--wait=false", check=False)
