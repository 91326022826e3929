"""Metric families from recorded Slurm 24.11 JSON: bounded labels, totals that add up."""

from __future__ import annotations

import json

from example_clusters import FIXTURES

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.metrics import (
    gpus_in,
    health_families,
    jail_families,
    jail_usage_families,
    job_families,
    long_check_families,
    node_families,
    node_names,
    node_state,
    reason_kind,
    scheduler_families,
    series_count,
    up_family,
)

SLURM = FIXTURES / "slurm"


def by_name(families):
    return {f.name: dict(f.samples) for f in families}


def test_node_state_prefers_down_then_drain_then_load():
    assert node_state(["IDLE", "DRAIN", "DYNAMIC_NORM"]) == "drain"
    assert node_state(["IDLE", "NOT_RESPONDING", "DRAIN"]) == "down"
    assert node_state(["MIXED"]) == "mixed"
    assert node_state(["FUTURE"]) == "other"


def test_reasons_fold_into_who_set_them():
    assert reason_kind("slurmkube: scale-down since 2026-11-25T10:00:00Z") == "planned:scale-down"
    assert reason_kind("slurmkube: kubernetes eviction since 2026-11-25T10:00:00Z") == "planned:kubernetes eviction"
    assert reason_kind("slurmkube: long check: memory bandwidth 10 MiB/s below 100") == "long-check"
    assert reason_kind("slurmkube: pod restarted, jobs lost: 14") == "pod-lost"
    assert reason_kind("slurmkube: scratch /tmp has 10 MiB free") == "health-check"
    assert reason_kind("bad DIMM, ticket 4711") == "other"
    assert reason_kind("") == "none"


def test_gpus_are_counted_from_any_gres_spelling():
    assert gpus_in("gpu:2") == 2
    assert gpus_in("gpu:h100:8(S:0-1)") == 8
    assert gpus_in("gpu:a100:4(IDX:0-3),gpu:t4:1") == 5
    assert gpus_in("") == 0


def test_nodes_add_up_by_node_set_and_state():
    text = (SLURM / "nodes-drained.json").read_text()
    nodes = json.loads(text)["nodes"]
    families = by_name(node_families(text))
    assert sum(families["slurm_nodes"].values()) == len(nodes)
    # capacity and use are families of their own: a sum over one is the cluster's
    assert sum(families["slurm_cpus_total"].values()) == sum(n["cpus"] for n in nodes)
    assert sum(families["slurm_cpus_alloc"].values()) == sum(n["alloc_cpus"] for n in nodes)
    assert sum(families["slurm_memory_total_bytes"].values()) == sum(n["real_memory"] for n in nodes) * 2 ** 20
    assert all(set(dict(k)) == {"node_set"} for name in ("slurm_cpus_total", "slurm_gpus_alloc")
               for k in families[name])
    drained = families["slurm_nodes_unavailable"]
    assert all(dict(k)["state"] in ("down", "drain") for k in drained)


# squeue --noheader --format=%P|%T|%r|%u, as slurmctld 24.11 answers it.
QUEUE = """main|RUNNING|None|alice
main|RUNNING|None|bob
main|PENDING|Resources|alice
big|PENDING|Priority|carol
main,big|PENDING|QOSMaxJobsPerUserLimit|alice
garbled line
"""


def test_jobs_by_partition_state_and_pending_reason():
    families = by_name(job_families(QUEUE))
    assert families["slurm_jobs"] == {(("partition", "main"), ("state", "running")): 2,
                                      (("partition", "main"), ("state", "pending")): 1,
                                      (("partition", "big"), ("state", "pending")): 1,
                                      (("partition", "main,big"), ("state", "pending")): 1}
    assert families["slurm_jobs_pending"][(("partition", "big"), ("reason", "Priority"))] == 1
    assert families["slurm_user_jobs"][(("state", "pending"), ("user", "alice"))] == 2


def test_users_beyond_the_busiest_fold_into_other():
    families = by_name(job_families(QUEUE, top_users=1))
    assert {dict(k)["user"] for k in families["slurm_user_jobs"]} == {"alice", "other"}
    assert sum(families["slurm_user_jobs"].values()) == 5


def test_a_thousand_jobs_of_five_hundred_users_stay_within_the_bound():
    lines = "".join("main|PENDING|Priority|u%d\n" % (i % 500) for i in range(1000))
    families = job_families(lines)
    # 1 partition x 1 state, 1 reason, 20 users + other: never one series per job or per user.
    assert series_count(families) <= 1 + 1 + 21
    assert by_name(families)["slurm_jobs"][(("partition", "main"), ("state", "pending"))] == 1000


def test_scheduler_statistics_from_a_real_sdiag():
    text = (SLURM / "sdiag.json").read_text()
    stats = json.loads(text)["statistics"]
    families = by_name(scheduler_families(text))
    assert families["slurm_scheduler_cycles_total"][()] == stats["schedule_cycle_total"]
    assert families["slurm_scheduler_cycle_last_seconds"][()] == stats["schedule_cycle_last"] / 1e6
    assert families["slurm_dbd_agent_queue_size"][()] == stats["dbd_agent_queue_size"]
    rpcs = families["slurm_rpcs_total"]
    assert rpcs[(("type", "REQUEST_PING"),)] == next(r["count"] for r in stats["rpcs_by_message_type"]
                                                     if r["message_type"] == "REQUEST_PING")


def test_health_verdicts_per_node_and_check_only_for_nodes_slurm_has():
    results = {"cpu-0": "time 1795660000\nmunged pass\njail fail\nbogus fail\nscratch maybe\n",
               "gone-7": "time 1795600000\nmunged pass\n"}
    families = by_name(health_families(results, {"cpu-0", "cpu-1"}))
    assert families["slurm_node_health_check_failed"] == {
        (("check", "jail"), ("node", "cpu-0")): 1.0, (("check", "munged"), ("node", "cpu-0")): 0.0}
    assert families["slurm_node_health_check_timestamp_seconds"] == {(("node", "cpu-0"),): 1795660000.0}


def test_long_check_results_in_base_units_and_the_pairs_latency_under_its_measuring_node():
    node_log = ("2026-11-26T03:00:00Z slurmkube-long-check[cpu-0]: scratch passed\n"
                "slurmkube-result node=cpu-0 compute_mib_per_s=500.00 memory_mib_per_s=8192.00 PASS\n"
                "slurmkube-result node=cpu-0 SKIP: all-reduce needs 2 GPUs, the node has 0\n")
    pair_log = "x slurmkube-result node=cpu-1 latency_us=42.00 FAIL: latency to cpu-0 42 us > 10 us\n"
    results = {"cpu-0.log": (100.0, node_log), "cpu-0-latency.log": (200.0, pair_log),
               "gone-1.log": (50.0, "slurmkube-result node=gone-1 FAIL: no\n")}
    families = by_name(long_check_families(results, {"cpu-0", "cpu-1"}))
    assert families["slurm_node_long_check_failed"] == {
        (("check", "node"), ("node", "cpu-0")): 0.0, (("check", "latency"), ("node", "cpu-1")): 1.0}
    assert families["slurm_node_long_check_timestamp_seconds"][(("check", "latency"), ("node", "cpu-1"))] == 200.0
    assert families["slurm_node_memory_bandwidth_bytes_per_second"] == {(("node", "cpu-0"),): 8192.0 * 2 ** 20}
    assert families["slurm_node_compute_bytes_per_second"] == {(("node", "cpu-0"),): 500.0 * 2 ** 20}
    assert families["slurm_node_latency_seconds"] == {(("node", "cpu-1"),): 42e-6}
    assert families["slurm_node_gpu_bus_bandwidth_bytes_per_second"] == {}


def test_jail_usage_and_node_names():
    families = by_name(jail_families(100.0, 40.0, 10.0, 7.0))
    assert families["slurm_jail_volume_free_bytes"] == {(): 40.0}
    assert families["slurm_jail_volume_files_free"] == {(): 7.0}
    text = (SLURM / "nodes-drained.json").read_text()
    assert node_names(text) == {n["name"] for n in json.loads(text)["nodes"]}


def test_the_jails_counted_usage_per_home_folds_beyond_the_largest_and_names_the_claims_size():
    report = {"time": 1795660000.0, "used_bytes": 900, "homes": {"ann": 500, "bo": 200, "cy": 100, "di": 50}}
    families = by_name(jail_usage_families(report, 1000.0, top_homes=2))
    assert families["slurm_jail_used_bytes"] == {(): 900.0}
    assert families["slurm_jail_home_used_bytes"] == {
        (("user", "ann"),): 500.0, (("user", "bo"),): 200.0, (("user", "other"),): 150.0}
    assert families["slurm_jail_claim_size_bytes"] == {(): 1000.0}
    assert families["slurm_jail_usage_counted_timestamp_seconds"] == {(): 1795660000.0}
    # Before the first count, and for a site's own claim: the families, without samples.
    empty = by_name(jail_usage_families({}, None))
    assert set(empty) == set(families) and not any(empty.values())


def test_an_nccl_result_line_becomes_bus_bandwidth_and_a_failed_check():
    """The line nodecheck.py prints for the recorded 2x RTX 2080 Ti all-reduce (test_nodecheck's
    test_command_line_nccl_judges_a_saved_run), as the long check's log holds it."""
    line = "slurmkube-result node=g-0 busbw_gb_per_s=4.00 FAIL: all-reduce bus bandwidth 4.00 GB/s < 10.00 GB/s\n"
    families = by_name(long_check_families({"g-0.log": (1.0, line)}, {"g-0"}))
    assert families["slurm_node_gpu_bus_bandwidth_bytes_per_second"] == {(("node", "g-0"),): 4e9}
    assert families["slurm_node_long_check_failed"] == {(("check", "node"), ("node", "g-0")): 1.0}


def test_slurm_up_is_any_answer_and_each_source_says_its_own():
    families = by_name(up_family({"nodes": True, "jobs": False, "sdiag": True}))
    assert families["slurm_up"] == {(): 1.0}
    assert families["slurm_scrape_success"] == {(("source", "jobs"),): 0.0, (("source", "nodes"),): 1.0,
                                                (("source", "sdiag"),): 1.0}
    assert by_name(up_family({"nodes": False, "jobs": False}))["slurm_up"] == {(): 0.0}
