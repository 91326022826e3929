"""slurm.conf and cgroup.conf hold jobs to what they were given, and small jobs share nodes."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, reject
from hypothesis import settings as examples
from hypothesis import strategies as st

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    slurm_cpus,
    slurm_job_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster, parse_nodeset
from ansible_collections.slurmkube.core.plugins.module_utils.model.problems import SpecError
from ansible_collections.slurmkube.core.plugins.module_utils.render.power_saving import (
    are_cloud_node_words,
    cloud_node_words,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import (
    render_cgroup_conf,
    render_slurm_conf,
)


def cluster(spec=None):
    return parse_cluster({"metadata": {"name": "demo", "namespace": "hpc"}, "spec": spec or {}})


def nodeset(name, cpu, memory):
    return parse_nodeset({"metadata": {"name": name, "namespace": "hpc"},
                          "spec": {"clusterName": "demo", "resources": {"cpu": cpu, "memory": memory}}})  # fmt: skip


def settings(text):
    return dict(re.findall(r"^(\w+)=(.*)$", text, re.MULTILINE))


def partition(text, name):
    line = next(ln for ln in text.splitlines() if ln.startswith("PartitionName=%s " % name))
    return dict(word.split("=", 1) for word in line.split())


SMALL = nodeset("small", "2", "4Gi")  # 4096 - 256 for the daemons: 1920 MiB per CPU
LARGE = nodeset("large", "4", "16Gi")  # 16384 - 819: 3891 MiB per CPU


def test_jobs_are_confined_by_cgroups_and_accounted():
    conf = settings(render_slurm_conf(cluster(), [SMALL]))
    assert conf["ProctrackType"] == "proctrack/cgroup"
    assert conf["TaskPlugin"] == "task/cgroup,task/affinity"
    assert conf["JobAcctGatherType"] == "jobacct_gather/cgroup"
    assert conf["SelectTypeParameters"] == "CR_Core_Memory"
    assert conf["LogTimeFormat"] == "iso8601_ms,format_stderr"


def test_slurmd_reports_every_jobs_end_so_the_next_jobs_start_at_once():
    """Any Epilog makes slurmd send EPILOG_COMPLETE, on which slurmctld schedules immediately."""
    assert settings(render_slurm_conf(cluster(), [SMALL]))["Epilog"] == "/bin/true"
    site = cluster({"slurm": {"privilegedConfig": {"Epilog": "/opt/site/epilog"}}})
    mine = settings(render_slurm_conf(site, [SMALL]))
    assert mine["Epilog"] == "/opt/site/epilog"


def test_the_high_throughput_profile_gathers_no_usage_and_forgets_ended_jobs_sooner():
    general = settings(render_slurm_conf(cluster(), [SMALL]))
    assert general["MinJobAge"] == "300"
    tuned = settings(render_slurm_conf(cluster({"slurm": {"profile": "highThroughput"}}), [SMALL]))
    assert tuned["JobAcctGatherType"] == "jobacct_gather/none" and "JobAcctGatherFrequency" not in tuned
    assert tuned["MinJobAge"] == "10"
    changed = {k for k in set(general) | set(tuned) if general.get(k) != tuned.get(k)}
    assert changed == {"JobAcctGatherType", "JobAcctGatherFrequency", "MinJobAge"}


def test_the_high_throughput_profile_keeps_ended_jobs_300_s_for_the_bridge_and_yields_to_the_users_config():
    bridged = cluster({"slurm": {"profile": "highThroughput"}, "bridge": {"namespaces": ["ml"]}})
    assert settings(render_slurm_conf(bridged, [SMALL]))["MinJobAge"] == "300"
    mine = cluster({"slurm": {"profile": "highThroughput",
                              "config": {"MinJobAge": 60, "SchedulerParameters": ["bf_continue"]}}})
    conf = settings(render_slurm_conf(mine, [SMALL]))
    assert conf["MinJobAge"] == "60" and conf["SchedulerParameters"] == "bf_continue"


def test_an_unknown_profile_is_refused_naming_the_field():
    with pytest.raises(SpecError, match=r"spec\.slurm\.profile"):
        cluster({"slurm": {"profile": "fast"}})


def test_mpi_ranks_get_pmi2_and_the_pods_scratch_is_tmpfs():
    conf = settings(render_slurm_conf(cluster(), [SMALL]))
    assert conf["MpiDefault"] == "pmi2"
    assert conf["TmpFS"] == C.NODE_TMP_DIR


def test_cgroup_conf_constrains_cores_memory_swap_and_devices_in_the_writable_mount():
    conf = settings(render_cgroup_conf(cluster()))
    for key in ("ConstrainCores", "ConstrainRAMSpace", "ConstrainSwapSpace", "ConstrainDevices", "IgnoreSystemd",
                "EnableControllers"):  # fmt: skip
        assert conf[key] == "YES", key
    assert conf["AllowedSwapSpace"] == "0"
    assert conf["CgroupMountpoint"] == C.CGROUP_MOUNT_DIR
    assert conf["CgroupPlugin"] == "autodetect"


def test_cgroup_conf_overrides_win_and_null_removes():
    overrides = {"ConstrainDevices": False, "AllowedSwapSpace": None}
    conf = settings(render_cgroup_conf(cluster({"slurm": {"cgroupConfig": overrides}})))
    assert conf["ConstrainDevices"] == "NO"
    assert "AllowedSwapSpace" not in conf


def test_default_memory_per_cpu_is_the_smallest_share_among_the_partitions_node_sets():
    text = render_slurm_conf(cluster(), [SMALL, LARGE])
    main = partition(text, "main")
    assert main["DefMemPerCPU"] == str(min(slurm_job_memory_mib(ns) // slurm_cpus(ns) for ns in (SMALL, LARGE)))
    assert main["DefMemPerCPU"] == "1920"


def test_each_partition_gets_its_own_node_sets_share():
    spec = {"partitions": [{"name": "small", "nodeSets": ["small"], "default": True},
                           {"name": "large", "nodeSets": ["large"]}]}  # fmt: skip
    text = render_slurm_conf(cluster(spec), [SMALL, LARGE])
    assert partition(text, "small")["DefMemPerCPU"] == "1920"
    assert partition(text, "large")["DefMemPerCPU"] == "3891"


@pytest.mark.parametrize("key", ["DefMemPerCPU", "DefMemPerNode", "DefMemPerGPU"])
def test_a_users_memory_default_for_the_partition_replaces_ours(key):
    spec = {"partitions": [{"name": "main", "default": True, "config": {key: 1000}}]}
    main = partition(render_slurm_conf(cluster(spec), [SMALL]), "main")
    assert main[key] == "1000"
    assert [k for k in main if k.startswith("DefMem")] == [key]


def test_a_users_cluster_wide_memory_default_is_not_hidden_by_a_partition_one():
    text = render_slurm_conf(cluster({"slurm": {"config": {"DefMemPerNode": 2048}}}), [SMALL])
    assert settings(text)["DefMemPerNode"] == "2048"
    assert "DefMemPerCPU" not in partition(text, "main")


def test_a_partition_without_node_sets_gets_no_memory_default():
    spec = {"partitions": [{"name": "main", "default": True}, {"name": "empty", "nodeSets": ["none"]}]}
    assert "DefMemPerCPU" not in partition(render_slurm_conf(cluster(spec), [SMALL]), "empty")


SLURM_WORD = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,12}\Z")
GRES = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_]{0,6}(:[A-Za-z0-9_.-]{1,6})?:[0-9]{1,3}\Z")


@examples(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(features=st.lists(SLURM_WORD, max_size=3), gres=st.lists(GRES, max_size=2),
       gpus=st.integers(0, 8), gpu_type=st.one_of(st.none(), SLURM_WORD))
def test_every_on_demand_sets_words_are_what_a_deleted_sets_template_may_bring_back(features, gres, gpus, gpu_type):
    """A deleted set's words come back from its live PodTemplate only when they are words the
    renderer writes: every set the model accepts must give such words, and nothing else may."""
    spec = {"clusterName": "demo", "maxReplicas": 4, "features": features, "gres": gres, "gpuType": gpu_type,
            "resources": {"cpu": "2", "memory": "4Gi", "gpus": gpus}}
    try:
        nodeset = parse_nodeset({"metadata": {"name": "burst", "namespace": "hpc"}, "spec": spec})
    except SpecError:
        reject()  # only what the model accepts is rendered
    words = cloud_node_words(nodeset)
    assert are_cloud_node_words(words), words
    assert not are_cloud_node_words(words + "\nSlurmctldProlog=/tmp/x")
    assert not are_cloud_node_words(words.replace("State=CLOUD", "State=CLOUD NodeAddr=elsewhere"))
