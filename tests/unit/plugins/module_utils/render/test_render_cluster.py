"""What the component renderers promise, checked on the example clusters."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from example_clusters import EXAMPLES, example, example_resources

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import node_conf, slurm_mem_spec_limit_mib
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.render.cluster import render_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.policy import render_network_policies
from ansible_collections.slurmkube.core.plugins.module_utils.render.seccomp import (
    worker_seccomp_profile,
    worker_seccomp_profile_name,
)


def render_raw(raw):
    return render_cluster(parse_cluster(raw["cluster"]), [parse_nodeset(n) for n in raw["nodesets"]]).objects


def by_kind_and_name(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def containers(statefulset):
    return statefulset["spec"]["template"]["spec"]["containers"]


def env_of(container):
    return {e["name"]: e.get("value") for e in container["env"]}


def test_cpu_cluster_objects():
    objects = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    assert set(objects) == {
        ("ServiceAccount", "cpu-slurm"), ("ConfigMap", "cpu-slurm-config"), ("ConfigMap", "cpu-sshd-config"),
        ("PersistentVolumeClaim", "cpu-jail"), ("Service", "cpu-controller"), ("StatefulSet", "cpu-controller"),
        ("PersistentVolumeClaim", "state-cpu-controller-0"), ("Service", "cpu-controller-hosts"),
        ("Service", "cpu-compute"), ("StatefulSet", "cpu-compute"), ("PodDisruptionBudget", "cpu-compute"),
        ("Service", "cpu-login"), ("Service", "cpu-login-hosts"), ("StatefulSet", "cpu-login"),
        ("NetworkPolicy", "cpu-internal"), ("NetworkPolicy", "cpu-login-ssh"), ("NetworkPolicy", "cpu-egress"),
    } | {k for k in objects if k[0] == "Job"}
    workers = objects[("StatefulSet", "cpu-compute")]
    assert workers["spec"]["replicas"] == 4
    assert workers["spec"]["updateStrategy"] == {"type": "OnDelete"}
    env = env_of(containers(workers)[0])
    assert env[C.ENV_CPUS] == "4"
    assert env[C.ENV_MEMORY_MB] == "8192"
    assert env[C.ENV_NODE_CONF] == "Feature=compute MemSpecLimit=409"
    assert env[C.ENV_CONTROLLER_HOST] == "cpu-controller.research.svc.cluster.local"
    assert objects[("Service", "cpu-compute")]["spec"]["clusterIP"] == "None"
    assert objects[("PersistentVolumeClaim", "cpu-jail")]["spec"]["accessModes"] == ["ReadWriteMany"]


def test_login_pods_have_dns_names_the_controller_and_workers_search():
    """srun on a login pod reports its bare hostname; slurmctld must resolve it to answer."""
    objects = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    hosts = objects[("Service", "cpu-login-hosts")]["spec"]
    assert hosts["clusterIP"] == "None" and hosts["publishNotReadyAddresses"] is True
    assert hosts["selector"] == objects[("StatefulSet", "cpu-login")]["spec"]["selector"]["matchLabels"]
    assert objects[("StatefulSet", "cpu-login")]["spec"]["serviceName"] == "cpu-login-hosts"
    for name in ("cpu-controller", "cpu-compute"):
        pod = objects[("StatefulSet", name)]["spec"]["template"]["spec"]
        assert pod["dnsConfig"] == {"searches": ["cpu-login-hosts.research.svc.cluster.local"]}, name
    # The user-facing Service stays what users connect to.
    assert objects[("Service", "cpu-login")]["spec"]["ports"][0]["port"] == C.SSH_PORT


def test_gpu_workers_request_gpus_and_declare_gres():
    objects = by_kind_and_name(render_cluster(*example("gpu")).objects)
    h100 = containers(objects[("StatefulSet", "gpu-h100")])[0]
    assert h100["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert h100["resources"]["requests"] == h100["resources"]["limits"]
    assert env_of(h100)[C.ENV_NODE_CONF] == "Feature=h100,ib,hopper MemSpecLimit=%d Gres=gpu:h100:8,nic:ib:8" % (
        slurm_mem_spec_limit_mib(next(ns for ns in example("gpu")[1] if ns.name == "h100")))
    pod = objects[("StatefulSet", "gpu-h100")]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert "nvidia.com/gpu" not in containers(objects[("StatefulSet", "gpu-prep")])[0]["resources"]["limits"]


def test_sub_mounts_reach_worker_pods_and_the_plugin():
    objects = by_kind_and_name(render_cluster(*example("gpu")).objects)
    pod = objects[("StatefulSet", "gpu-h100")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["sub-scratch"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert volumes["sub-nvme"]["hostPath"]["path"] == "/mnt/nvme"
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/mnt/slurmkube/submounts/scratch"]["name"] == "sub-scratch"
    plugstack = objects[("ConfigMap", "gpu-slurm-config")]["data"]["plugstack.conf"]
    assert "/mnt/slurmkube/submounts/scratch:/scratch" in plugstack


def test_jobs_get_a_node_local_tmp_and_the_jail_plugin_mirrors_user_paths():
    objects = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    pod = objects[("StatefulSet", "cpu-compute")]["spec"]["template"]["spec"]
    assert {"name": "node-tmp", "mountPath": "/mnt/slurmkube/tmp"} in pod["containers"][0]["volumeMounts"]
    assert {"name": "node-tmp", "emptyDir": {}} in pod["volumes"]
    plugstack = objects[("ConfigMap", "cpu-slurm-config")]["data"]["plugstack.conf"]
    assert "mirrors=/home,/root" in plugstack
    assert "submounts=/mnt/slurmkube/tmp:/tmp" in plugstack
    # ...and at its pod path too: slurmstepd makes per-step directories there (TmpFS) that
    # the job's ranks open by that path (PMIx's client directory).
    assert "binds=/etc/hosts:ro,/etc/resolv.conf:ro,/mnt/slurmkube/tmp " in plugstack
    security = pod["containers"][0]["securityContext"]
    assert security["capabilities"] == {"add": ["SYS_ADMIN", "SYS_NICE", "SYS_PTRACE"],
                                        "drop": ["NET_RAW", "MKNOD", "SETFCAP"]}
    assert "privileged" not in security and security["readOnlyRootFilesystem"] is True
    written = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert {"/run", "/tmp", "/etc/munge", "/var/lib/munge", "/var/log"} <= written
    memory = {v["name"] for v in pod["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"}
    assert {"run", "munge-etc", "munge-lib"} <= memory  # the key's copy never on the node's disk


@pytest.mark.parametrize(("setuid_in_jobs", "words"), [(None, []), (False, []), (True, ["setuid=yes"])])
def test_setuid_in_jobs_is_off_unless_asked_and_reaches_the_jail_plugin(setuid_in_jobs, words):
    """Unset or false, the plugin's default holds (nosuid mounts, no_new_privs for every task)."""
    raw = example_resources("cpu-only")
    if setuid_in_jobs is not None:
        raw["cluster"]["spec"].setdefault("jail", {})["setuidInJobs"] = setuid_in_jobs
    plugstack = by_kind_and_name(render_raw(raw))[("ConfigMap", "cpu-slurm-config")]["data"]["plugstack.conf"]
    line = next(ln for ln in plugstack.splitlines() if ln.startswith("required "))
    assert [w for w in line.split() if w.startswith("setuid=")] == words


def test_pods_that_mount_nothing_run_under_the_runtimes_seccomp_profile_without_escalation():
    objects = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    controller = objects[("StatefulSet", "cpu-controller")]["spec"]["template"]["spec"]["containers"][0]
    assert controller["securityContext"] == {"allowPrivilegeEscalation": False,
                                             "seccompProfile": {"type": "RuntimeDefault"},
                                             "capabilities": {"drop": ["NET_RAW", "MKNOD", "SETFCAP"]}}
    login = objects[("StatefulSet", "cpu-login")]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert login["seccompProfile"] == {"type": "RuntimeDefault"}
    for name, obj in objects.items():
        pod = (obj.get("spec", {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            assert "securityContext" in container, (name, container["name"])
            assert container["securityContext"].get("seccompProfile", {}).get("type") != "Unconfined", \
                (name, container["name"])


def worker_pod(spec: dict) -> dict:
    raw = example_resources("cpu-only")
    raw["cluster"]["spec"] = spec
    return by_kind_and_name(render_raw(raw))[("StatefulSet", "cpu-compute")]["spec"]["template"]["spec"]


def test_slurmd_runs_under_the_profile_its_init_container_writes_into_the_kubelets_directory():
    pod = worker_pod({"workerSeccomp": {"kubeletRootDir": "/var/snap/microk8s/common/var/lib/kubelet"}})
    writer = pod["initContainers"][0]
    env = {v["name"]: v["value"] for v in writer["env"]}
    slurmd = pod["containers"][0]["securityContext"]
    assert slurmd["seccompProfile"] == {"type": "Localhost", "localhostProfile": "slurmkube/" + env["NAME"]}
    assert json.loads(env["PROFILE"]) == worker_seccomp_profile()
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount = writer["volumeMounts"] == [{"name": "seccomp-profiles", "mountPath": env["DIR"]}]
    assert mount and volumes["seccomp-profiles"]["hostPath"] == {
        "path": "/var/snap/microk8s/common/var/lib/kubelet/seccomp/slurmkube", "type": "DirectoryOrCreate"}
    # Written before anything else runs in the pod, by a root without capabilities.
    assert writer["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert writer["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "seccomp-profiles" not in {m["name"] for m in pod["containers"][0]["volumeMounts"]}


def test_the_init_container_writes_the_profile_whole_under_its_name(tmp_path):
    writer = worker_pod({})["initContainers"][0]
    env = dict(os.environ, **{v["name"]: v["value"] for v in writer["env"]})
    env["DIR"] = str(tmp_path)
    subprocess.run(writer["command"], env=env, check=True)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert ["slurmkube/" + p.relative_to(tmp_path).as_posix() for p in written] == [worker_seccomp_profile_name()]
    assert json.loads(written[0].read_text()) == worker_seccomp_profile()


def test_an_unconfined_worker_has_no_profile_to_write():
    pod = worker_pod({"workerSeccomp": {"profile": "Unconfined"}})
    assert pod["containers"][0]["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert [c["name"] for c in pod["initContainers"]] == ["wait-for-controller"]
    assert "seccomp-profiles" not in {v["name"] for v in pod["volumes"]}


def test_jail_claim_kept_out_when_nfs_is_used():
    raw = example_resources("cpu-only")
    raw["cluster"]["spec"] = {"jail": {"nfs": {"server": "10.0.0.5", "path": "/export/jail"}}}
    objects = render_raw(raw)
    claims = [o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert claims == ["state-cpu-controller-0"]
    controller = by_kind_and_name(objects)[("StatefulSet", "cpu-controller")]
    volumes = {v["name"]: v for v in controller["spec"]["template"]["spec"]["volumes"]}
    assert volumes["jail"] == {"name": "jail", "nfs": {"server": "10.0.0.5", "path": "/export/jail"}}


def test_login_service_type_and_pdb():
    objects = by_kind_and_name(render_cluster(*example("gpu")).objects)
    assert objects[("Service", "gpu-login")]["spec"]["type"] == "LoadBalancer"
    assert objects[("PodDisruptionBudget", "gpu-login")]["spec"]["minAvailable"] == 1
    cpu = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    assert ("PodDisruptionBudget", "cpu-login") not in cpu


def test_the_login_service_carries_the_sites_annotations_source_ranges_and_traffic_policy():
    raw = example_resources("cpu-only")
    plain = by_kind_and_name(render_raw(raw))[("Service", "cpu-login")]
    assert "annotations" not in plain["metadata"]
    assert not {"loadBalancerSourceRanges", "externalTrafficPolicy"} & set(plain["spec"])  # unset: Kubernetes'
    raw["cluster"]["spec"]["login"] = {"serviceType": "LoadBalancer", "service": {
        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
        "loadBalancerSourceRanges": ["203.0.113.0/24", "2001:db8::/32"], "externalTrafficPolicy": "Local"}}
    service = by_kind_and_name(render_raw(raw))[("Service", "cpu-login")]
    assert service["metadata"]["annotations"] == {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}
    assert service["metadata"]["labels"] == plain["metadata"]["labels"]
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24", "2001:db8::/32"]
    assert service["spec"]["externalTrafficPolicy"] == "Local"


def test_slurmdbd_conf_takes_the_sites_settings_over_the_products():
    raw = example_resources("multi-accounting")
    before = by_kind_and_name(render_raw(raw))[("ConfigMap", "hpc-slurmdbd")]["data"]["slurmdbd.conf"]
    raw["cluster"]["spec"]["accounting"]["config"] = {
        "PurgeJobAfter": "12month", "CommitDelay": 1, "DebugLevel": "verbose", "LogTimeFormat": None}
    after = by_kind_and_name(render_raw(raw))[("ConfigMap", "hpc-slurmdbd")]["data"]["slurmdbd.conf"]
    assert {"PurgeJobAfter=12month", "CommitDelay=1", "DebugLevel=verbose"} <= set(after.splitlines())
    assert "LogTimeFormat" in before and "LogTimeFormat" not in after and "DebugLevel=info" not in after
    assert [ln for ln in after.splitlines() if ln.startswith("Storage")] == \
        [ln for ln in before.splitlines() if ln.startswith("Storage")]


def test_slurmdbd_reaches_an_external_database_over_tls_with_the_sites_ca():
    raw = example_resources("multi-accounting")
    raw["cluster"]["spec"]["accounting"]["database"] = {"host": "db.site.example", "passwordSecret": "db",
                                                        "tlsCaSecret": "site-ca"}
    objects = by_kind_and_name(render_raw(raw))
    conf = objects[("ConfigMap", "hpc-slurmdbd")]["data"]["slurmdbd.conf"].splitlines()
    assert "StorageParameters=SSL_CA=%s/%s" % (C.SLURMDBD_DATABASE_CA_DIR, C.DB_CA_SECRET_KEY) in conf
    pod = objects[("StatefulSet", "hpc-slurmdbd")]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "site-ca"]
    assert volume["secret"]["items"] == [{"key": C.DB_CA_SECRET_KEY, "path": C.DB_CA_SECRET_KEY}]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": C.SLURMDBD_DATABASE_CA_DIR, "readOnly": True}
    plain = example_resources("multi-accounting")
    assert "StorageParameters" not in by_kind_and_name(render_raw(plain))[("ConfigMap", "hpc-slurmdbd")]["data"][
        "slurmdbd.conf"]


def test_long_checks_cronjob_only_when_enabled():
    assert ("CronJob", "gpu-healthcheck") in by_kind_and_name(render_cluster(*example("gpu")).objects)
    assert not [o for o in render_cluster(*example("cpu-only")).objects if o["kind"] == "CronJob"]


def test_slurm_setting_change_does_not_roll_pods_but_restart_setting_does():
    raw = example_resources("cpu-only")

    def hashes(config, field="config"):
        raw["cluster"]["spec"] = {"slurm": {field: config}}
        objects = render_raw(raw)
        return {o["metadata"]["name"]: o["spec"]["template"]["metadata"]["annotations"][C.ANNOTATION_CONFIG_HASH]
                for o in objects if o["kind"] == "StatefulSet"}

    base = hashes({})
    assert hashes({"SchedulerParameters": ["bf_continue"], "MinJobAge": 600}) == base
    assert hashes(2048, "maxNodeCount") == base  # scontrol reconfigure applies it (spec.slurm.maxNodeCount's doc)
    changed = hashes({"PluginDir": "/opt/slurm/lib"}, "privilegedConfig")
    assert all(changed[name] != base[name] for name in ("cpu-controller", "cpu-compute"))
    assert changed["cpu-login"] == base["cpu-login"]


def test_scaling_changes_only_replicas():
    raw = example_resources("cpu-only")
    before = render_raw(raw)
    raw["nodesets"][0]["spec"]["replicas"] = 40
    after = render_raw(raw)
    changed = [(b["kind"], b["metadata"]["name"]) for b, a in zip(before, after) if a != b]
    assert changed == [("StatefulSet", "cpu-compute")]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_pod_runs_as_the_tokenless_service_account(name):
    for obj in render_cluster(*example(name)).objects:
        template = obj.get("spec", {}).get("template") or obj.get("spec", {}).get("jobTemplate", {}).get(
            "spec", {}).get("template")
        if template:
            assert template["spec"]["automountServiceAccountToken"] is False
            assert template["spec"]["serviceAccountName"] == "%s-slurm" % obj["metadata"]["labels"][C.LABEL_CLUSTER]


def test_node_conf_without_gpu_type():
    ns = parse_nodeset({"metadata": {"name": "g"}, "spec": {"clusterName": "c", "resources": {"gpus": 2}}})
    assert node_conf(ns) == "Feature=g MemSpecLimit=256 Gres=gpu:2"


def test_cpu_request_overcommits_without_changing_what_slurm_sees():
    raw = example_resources("cpu-only")
    raw["nodesets"][0]["spec"]["resources"]["cpuRequest"] = "250m"
    objects = by_kind_and_name(render_raw(raw))
    slurmd = containers(objects[("StatefulSet", "cpu-compute")])[0]
    assert slurmd["resources"]["requests"]["cpu"] == "250m"
    assert slurmd["resources"]["limits"]["cpu"] == "4"
    assert env_of(slurmd)[C.ENV_CPUS] == "4"


def test_a_workers_budget_covers_only_pods_not_labelled_evictable_and_allows_no_disruption():
    objects = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    pdb = objects[("PodDisruptionBudget", "cpu-compute")]["spec"]
    sts = objects[("StatefulSet", "cpu-compute")]
    assert pdb["maxUnavailable"] == 0
    assert pdb["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    assert pdb["selector"]["matchExpressions"] == [{"key": C.LABEL_EVICTABLE, "operator": "DoesNotExist"}]
    # The operator owns the label: the pod template never sets it.
    assert C.LABEL_EVICTABLE not in sts["spec"]["template"]["metadata"]["labels"]


def spread_of(nodeset_spec: dict) -> list:
    raw = example_resources("cpu-only")
    raw["nodesets"][0]["spec"].update(nodeset_spec)
    template = by_kind_and_name(render_raw(raw))[("StatefulSet", "cpu-compute")]["spec"]["template"]
    return template["spec"].get("topologySpreadConstraints", [])


def test_a_node_sets_pods_spread_over_kubernetes_nodes_unless_told_otherwise():
    sts = by_kind_and_name(render_cluster(*example("cpu-only")).objects)[("StatefulSet", "cpu-compute")]
    assert spread_of({}) == [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]}, "nodeTaintsPolicy": "Honor"}]
    zones = spread_of({"spread": {"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 2,
                                  "whenUnsatisfiable": "DoNotSchedule"}})
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in zones] == [
        ("topology.kubernetes.io/zone", 2, "DoNotSchedule")]
    assert spread_of({"spread": {"topologyKey": ""}}) == []
    with pytest.raises(SpecError, match=r"whenUnsatisfiable"):
        spread_of({"spread": {"whenUnsatisfiable": "Sometimes"}})
    with pytest.raises(SpecError, match=r"maxSkew"):
        spread_of({"spread": {"maxSkew": 0}})


def test_a_stopping_worker_hands_its_jobs_back_first():
    sts = by_kind_and_name(render_cluster(*example("cpu-only")).objects)[("StatefulSet", "cpu-compute")]
    hook = containers(sts)[0]["lifecycle"]["preStop"]
    assert hook == {"exec": {"command": [C.WORKER_STOP_PROGRAM]}}


def test_a_stopping_controller_leaves_its_service_before_slurmctld_is_signalled():
    objects = by_kind_and_name(render_cluster(*example("cpu-only")).objects)
    sts, service = objects[("StatefulSet", "cpu-controller")], objects[("Service", "cpu-controller")]
    container = containers(sts)[0]
    program, *wait, port = container["lifecycle"]["preStop"]["exec"]["command"]
    min_s, quiet, max_s = map(int, wait)
    assert program == C.CONTROLLER_STOP_PROGRAM
    # Where it asks whether this slurmctld serves (a serving one hands control to a backup).
    assert port == str(C.SLURMCTLD_PORT) == str(container["readinessProbe"]["httpGet"]["port"])
    # The Service selects the pod by a label the operator turns off when the pod is deleted; the
    # StatefulSet does not select by it (a pod out of the Service is still the set's pod).
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["selector"][C.LABEL_SERVING] == "true"
    assert C.LABEL_SERVING not in sts["spec"]["selector"]["matchLabels"]
    # The hook counts connections: the kubelet's readiness probe, one per period, must leave
    # quiet gaps longer than QUIET. slurmctld keeps a third of the grace period at least.
    assert 2 <= quiet < container["readinessProbe"]["periodSeconds"]
    assert min_s < max_s and max_s * 3 <= sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] * 2


def egress_of(spec):
    model = parse_cluster({"metadata": {"name": "demo", "namespace": "hpc"}, "spec": spec})
    return {o["metadata"]["name"]: o for o in render_network_policies(model)}.get("demo-egress")


def test_pods_connect_to_each_other_and_dns_only_unless_the_spec_allows_more():
    policy = egress_of({})
    assert policy["spec"]["policyTypes"] == ["Egress"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {C.LABEL_CLUSTER: "demo"}}
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    kube_dns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    assert policy["spec"]["egress"] == [{"to": [{"podSelector": {"matchLabels": {C.LABEL_CLUSTER: "demo"}}}]},
                                        {"to": [kube_dns], "ports": dns_ports}]
    assert egress_of({"networkPolicy": False}) is None


def test_dns_goes_to_the_dns_server_the_spec_names_and_an_empty_selector_is_refused():
    dns = {"namespace": "openshift-dns", "podLabels": {"dns.operator.openshift.io/daemonset-dns": "default"}}
    rule = egress_of({"egress": {"dns": dns}})["spec"]["egress"][1]
    assert rule["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-dns"}},
                           "podSelector": {"matchLabels": {"dns.operator.openshift.io/daemonset-dns": "default"}}}]
    with pytest.raises(SpecError, match=r"spec\.egress\.dns\.podLabels: must select the DNS server pods"):
        parse_cluster({"metadata": {"name": "demo"}, "spec": {"egress": {"dns": {"podLabels": {}}}}})
    with pytest.raises(SpecError, match=r"spec\.egress\.dns\.podLabels: must be Kubernetes label keys"):
        parse_cluster({"metadata": {"name": "demo"}, "spec": {"egress": {"dns": {"podLabels": {"a b": "x"}}}}})


def test_internet_leaves_out_where_api_servers_kubelets_and_metadata_live():
    rule = egress_of({"egress": {"internet": True}})["spec"]["egress"][2]
    v4 = rule["to"][0]["ipBlock"]
    assert v4["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= set(v4["except"])


def test_the_admins_rules_come_last_and_must_look_like_egress_rules():
    slurmdbd = {"to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}], "ports": [{"protocol": "TCP", "port": 6819}]}
    assert egress_of({"egress": {"to": [slurmdbd]}})["spec"]["egress"][-1] == slurmdbd
    with pytest.raises(SpecError, match=r"spec\.egress\.to\[0\]: must be a NetworkPolicy egress rule"):
        parse_cluster({"metadata": {"name": "demo"}, "spec": {"egress": {"to": [{"cidr": "0.0.0.0/0"}]}}})


def test_the_controllers_state_claim_is_shared_and_in_the_jails_class_unless_named():
    raw = example_resources("cpu-only")
    raw["cluster"]["spec"] = {"jail": {"storageClassName": "nfs"}}
    claim = by_kind_and_name(render_raw(raw))[("PersistentVolumeClaim", "state-cpu-controller-0")]["spec"]
    assert (claim["accessModes"], claim["storageClassName"]) == (["ReadWriteMany"], "nfs")
    raw["cluster"]["spec"]["controller"] = {"stateVolume": {"storageClassName": "cephfs"}}
    claim = by_kind_and_name(render_raw(raw))[("PersistentVolumeClaim", "state-cpu-controller-0")]["spec"]
    assert claim["storageClassName"] == "cephfs"
