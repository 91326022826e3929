"""Health-check logic on real recorded tool output (tests/unit/fixtures/gpu/README.md), thresholds at their edges."""

from __future__ import annotations

import dataclasses
import datetime

import nodecheck as N
import pytest
from example_clusters import FIXTURES

GPU = FIXTURES / "gpu"
DEFAULTS = N.Limits()


def fixture(name):
    return (GPU / name).read_text()


def limits(**changes):
    return dataclasses.replace(DEFAULTS, **changes)


@pytest.fixture(scope="module")
def p100():
    return N.parse_nvidia_smi_xml(fixture("p100-healthy.xml"))


@pytest.fixture(scope="module")
def v100():
    return N.parse_nvidia_smi_xml(fixture("v100-volatile-dbe-retirement-pending.xml"))


# --------------------------------------------------------------------------- nvidia-smi -q -x


def test_healthy_p100_parses_and_passes(p100):
    assert p100 == [N.GpuState("00000000:00:04.0", 38, 0, False, False, False, False)]
    assert N.gpu_problems(p100, 1, DEFAULTS) == []


def test_healthy_h200_recorded_on_a_lent_machine_passes_and_a_missing_second_gpu_is_named():
    h200 = N.parse_nvidia_smi_xml(fixture("h200-healthy.xml"))
    assert h200 == [N.GpuState("00000000:00:06.0", 35, 0, False, False, False, False)]
    assert N.gpu_problems(h200, 1, DEFAULTS) == []
    # What the fast check printed on that machine with --gres gpu:2 (fixtures/gpu/README.md).
    assert N.gpu_problems(h200, 2, DEFAULTS) == ["1 of 2 GPUs visible to nvidia-smi"]


def test_aggregate_ecc_history_alone_is_not_a_problem(p100):
    # The P100 has 3 lifetime single-bit errors and none since the driver loaded.
    assert "<total>3</total>" in fixture("p100-healthy.xml")
    assert p100[0].volatile_uncorrectable_ecc == 0


def test_v100_with_a_volatile_double_bit_error_and_pending_retirement_fails(v100):
    assert N.gpu_problems(v100, 1, DEFAULTS) == [
        "gpu 00000000:34:00.0: 1 uncorrectable ECC errors (max 0)",
        "gpu 00000000:34:00.0: page retirement pending (reset needed)",
    ]


def test_uncorrectable_ecc_limit_edges(v100):
    assert not any("ECC" in p for p in N.gpu_state_problems(v100[0], limits(gpu_max_uncorrectable_ecc=1)))
    assert any("ECC" in p for p in N.gpu_state_problems(v100[0], limits(gpu_max_uncorrectable_ecc=0)))


def test_temperature_at_the_limit_passes_one_degree_below_fails(p100, v100):
    assert N.gpu_problems(p100, 1, limits(gpu_max_temperature_c=38)) == []
    assert N.gpu_problems(p100, 1, limits(gpu_max_temperature_c=37)) == ["gpu 00000000:00:04.0: 38 C (max 37 C)"]
    assert "gpu 00000000:34:00.0: 33 C (max 32 C)" in N.gpu_problems(v100, 1, limits(gpu_max_temperature_c=32))


def test_gpu_count_against_gres(p100, v100):
    # attached_gpus says 16 in the V100 record, but one <gpu> answered: that is what counts.
    assert N.gpu_count_problems(v100, 1) == []
    assert N.gpu_count_problems(v100, 2) == ["1 of 2 GPUs visible to nvidia-smi"]
    assert N.gpu_count_problems(p100, 8) == ["1 of 8 GPUs visible to nvidia-smi"]


@pytest.mark.parametrize(("gres", "count"), [
    ("gpu:h100:8(S:0-1)", 8),
    ("gpu:8", 8),
    ("gpu:a100:4(S:0),gpu:t4:2(S:1),shard:16", 6),
    ("shard:16", 0),
    ("", 0),
    ("(null)", 0),
])
def test_expected_gpus_from_slurm_gres(gres, count):
    assert N.expected_gpus(gres) == count


def test_missing_gpu_error_line_names_the_gpu():
    assert N.nvidia_smi_error_problems(fixture("missing-gpu-nvidia-smi.txt")) == [
        "gpu 0000:0B:00.0 unreachable (Unknown Error)"]


def test_xid_79_in_the_kernel_log_is_critical_once_per_gpu():
    events = N.xid_events(fixture("xid79-kernel.log"))
    assert events == [("0000:44:00", 79)]
    assert N.xid_problems(events + events, DEFAULTS.gpu_critical_xids) == ["gpu 0000:44:00: Xid 79"]
    assert N.xid_problems(events, (48, 95)) == []


def test_probe_gpus_uses_nvidia_smi_and_dmesg_outputs():
    outputs = {
        "nvidia-smi": (0, fixture("v100-volatile-dbe-retirement-pending.xml")),
        "dmesg": (0, fixture("xid79-kernel.log")),
    }
    problems = N.probe_gpus("gpu:v100:2", DEFAULTS, lambda argv: outputs[argv[0]])
    assert problems == [
        "1 of 2 GPUs visible to nvidia-smi",
        "gpu 00000000:34:00.0: 1 uncorrectable ECC errors (max 0)",
        "gpu 00000000:34:00.0: page retirement pending (reset needed)",
        "gpu 0000:44:00: Xid 79",
    ]


def test_probe_gpus_when_nvidia_smi_cannot_reach_a_gpu():
    outputs = {"nvidia-smi": (15, fixture("missing-gpu-nvidia-smi.txt")),
               "dmesg": (1, "dmesg: read kernel buffer failed")}
    assert N.probe_gpus("gpu:1", DEFAULTS, lambda argv: outputs[argv[0]]) == [
        "gpu 0000:0B:00.0 unreachable (Unknown Error)"]


def test_probe_gpus_skips_nodes_without_gpus():
    def fail(argv):
        raise AssertionError("no GPU tool may run on a CPU node")
    assert N.probe_gpus("(null)", DEFAULTS, fail) == []


# --------------------------------------------------------------------------- all-reduce


def test_h100_two_nodes_all_reduce_peak_bus_bandwidth():
    run = N.parse_allreduce_output(fixture("all-reduce-h100-2x8.txt"))
    assert len(run.rows) == 31 and run.out_of_bounds == 0
    assert N.peak_bus_bandwidth(run) == 338.82
    assert N.allreduce_problems(run, DEFAULTS.min_nccl_bus_bandwidth_gb_per_s) == []


def test_all_reduce_threshold_edges():
    run = N.parse_allreduce_output(fixture("all-reduce-h100-2x8.txt"))
    assert N.allreduce_problems(run, 338.82) == []
    assert N.allreduce_problems(run, 338.83) == ["all-reduce bus bandwidth 338.82 GB/s < 338.83 GB/s"]


def test_pcie_without_p2p_fails_the_default_threshold():
    run = N.parse_allreduce_output(fixture("all-reduce-2080ti-pcie-no-p2p.txt"))
    assert N.peak_bus_bandwidth(run) == 4.0
    assert N.allreduce_problems(run, DEFAULTS.min_nccl_bus_bandwidth_gb_per_s) == [
        "all-reduce bus bandwidth 4.00 GB/s < 10.00 GB/s"]
    assert N.allreduce_problems(run, 4.0) == []


def test_wrong_values_and_out_of_bounds_fail_whatever_the_bandwidth():
    text = fixture("all-reduce-2080ti-pcie-no-p2p.txt").replace(
        "268588    4.00    4.00      0", "268588    4.00    4.00      3").replace(
        "# Out of bounds values : 0 OK", "# Out of bounds values : 2 FAILED")
    assert N.allreduce_problems(N.parse_allreduce_output(text), 1.0) == ["all-reduce: 5 wrong values"]


def test_no_rows_is_a_problem():
    assert N.allreduce_problems(N.parse_allreduce_output("ncclCommInitAll failed: unhandled cuda error\n"), 1.0) == [
        "all-reduce printed no results"]


def test_mpi_prefixed_lines_are_read():
    text = "\n".join("[1,0]<stdout>:" + line for line in fixture("all-reduce-2080ti-pcie-no-p2p.txt").splitlines())
    assert N.peak_bus_bandwidth(N.parse_allreduce_output(text)) == 4.0


# --------------------------------------------------------------------------- every node


def test_scratch_edges():
    gib = 2**30
    both = limits(scratch_min_free_mib=1024, scratch_min_free_percent=5)
    assert N.scratch_problems("/s", 20 * gib, gib, both) == []
    mib_only = limits(scratch_min_free_mib=1024, scratch_min_free_percent=0)
    assert N.scratch_problems("/s", 20 * gib, gib - 1, mib_only) == [
        "scratch /s: 1023 MiB free (5.0%), need 1024 MiB and 0%"]
    assert N.scratch_problems("/s", 20 * gib, gib, limits(scratch_min_free_mib=0, scratch_min_free_percent=6)) == [
        "scratch /s: 1024 MiB free (5.0%), need 0 MiB and 6%"]


def test_memory_pressure_edges():
    psi = N.parse_pressure("some avg10=80.00 avg60=61.50 avg300=20.00 total=123\n"
                           "full avg10=70.00 avg60=50.00 avg300=10.00 total=99\n")
    assert N.memory_problems(psi, limits(memory_max_stall_percent=50)) == []
    assert N.memory_problems(psi, limits(memory_max_stall_percent=49)) == [
        "memory pressure: all tasks stalled 50.0% of the last minute (max 49%)"]
    assert N.memory_problems({}, DEFAULTS) == []


def test_clock_against_slurmctld_edges():
    # As a real slurmctld 24.11 answered (it stamps the time of its answer).
    controller = N.parse_controller_time("Configuration data as of 2026-11-22T04:23:59\n"
                                         "AccountingStorageBackupHost = (null)\n")
    assert controller == datetime.datetime(2026, 11, 22, 4, 23, 59)
    at = datetime.datetime(2026, 11, 22, 4, 24, 59, tzinfo=datetime.timezone.utc)
    assert N.clock_problems(at, controller, limits(clock_max_skew_seconds=60)) == []
    assert N.clock_problems(at, controller, limits(clock_max_skew_seconds=59)) == [
        "clock 60 s off slurmctld's (max 59 s)"]
    assert N.clock_problems(at, None, DEFAULTS) == []


def test_clock_before_the_floor_is_a_dead_rtc():
    epoch = datetime.datetime(1970, 1, 1, 0, 5, tzinfo=datetime.timezone.utc)
    assert N.clock_problems(epoch, None, DEFAULTS) == ["clock at 1970-01-01T00:05:00Z, before 2024-01-01"]


# --------------------------------------------------------------------------- CPU long checks


def test_cpu_benchmark_edges():
    edge = limits(min_memory_bandwidth_mib_per_s=2000.0, min_compute_mib_per_s=300.0)
    assert N.cpu_benchmark_problems(N.CpuBenchmark(2000.0, 300.0), edge) == []
    assert N.cpu_benchmark_problems(N.CpuBenchmark(1999.0, 299.0), edge) == [
        "memory bandwidth 1999 MiB/s < 2000 MiB/s", "compute 299 MiB/s SHA-256 per CPU < 300 MiB/s"]


def test_latency_edges():
    assert N.latency_problems("n-1", 1000.0, limits(max_latency_us=1000.0)) == []
    assert N.latency_problems("n-1", 1000.5, limits(max_latency_us=1000.0)) == ["latency to n-1 1000 us > 1000 us"]


def test_result_line_is_one_greppable_line():
    assert N.result_line("n-0", [], {"compute_mib_per_s": 512.0}) == \
        "slurmkube-result node=n-0 compute_mib_per_s=512.00 PASS"
    assert N.result_line("n-0", ["a", "b"], {}) == "slurmkube-result node=n-0  FAIL: a; b"


def test_real_measurements_on_this_machine_are_positive():
    assert N.measure_memory_bandwidth(mib=8, rounds=2) > 0
    assert N.measure_compute(mib=4) > 0


# --------------------------------------------------------------------------- config


def test_rendered_config_overrides_defaults():
    text = ("# header\nSLURMKUBE_HC_CHECKS='munged jail gpu'\nSLURMKUBE_HC_GPU_MAX_TEMPERATURE_C=80\n"
            "SLURMKUBE_HC_GPU_CRITICAL_XIDS='48 79'\nSLURMKUBE_HC_MAX_LATENCY_US=250\nOTHER=1\n")
    got = N.limits_from_config(N.parse_config(text))
    assert got == limits(checks=("munged", "jail", "gpu"), gpu_max_temperature_c=80, gpu_critical_xids=(48, 79),
                         max_latency_us=250.0)


def test_command_line_fast_check_reports_scratch(tmp_path, capsys):
    config = tmp_path / "health.conf"
    config.write_text("SLURMKUBE_HC_SCRATCH_MIN_FREE_PERCENT=101\n")
    code = N.main(["--config", str(config), "fast", "--checks", "scratch", "--scratch-dir", str(tmp_path)])
    assert code == 1
    assert capsys.readouterr().out.startswith("scratch %s: " % tmp_path)


def test_command_line_fast_check_tags_each_problem_with_its_check(tmp_path, capsys):
    """The health check records a verdict per check from these tags."""
    config = tmp_path / "health.conf"
    config.write_text("SLURMKUBE_HC_SCRATCH_MIN_FREE_PERCENT=101\n")
    code = N.main(["--config", str(config), "fast", "--tagged", "--checks", "scratch,memory",
                   "--scratch-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert [line.split("\t")[0] for line in out.splitlines()] == ["scratch"], out
    assert out.startswith("scratch\tscratch %s: " % tmp_path)


def test_command_line_nccl_judges_a_saved_run(capsys):
    code = N.main(["--node", "g-0", "nccl", str(GPU / "all-reduce-2080ti-pcie-no-p2p.txt")])
    assert code == 1
    assert capsys.readouterr().out == (
        "slurmkube-result node=g-0 busbw_gb_per_s=4.00 FAIL: all-reduce bus bandwidth 4.00 GB/s < 10.00 GB/s\n")


# --------------------------------------------------------------------------- the rendered settings


def test_rendered_settings_reach_the_node_checks_under_the_names_they_read():
    from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
    from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_health_conf

    cluster = parse_cluster({"metadata": {"name": "c"}, "spec": {"healthChecks": {
        "checks": ["munged", "gpu"], "scratchMinFreeMib": 7, "scratchMinFreePercent": 8, "memoryMaxStallPercent": 9,
        "clockMaxSkewSeconds": 11, "gpuMaxTemperatureCelsius": 70, "gpuMaxUncorrectableEccErrors": 2,
        "gpuCriticalXids": [79], "longChecks": {"minMemoryBandwidthMibPerSecond": 12, "minComputeMibPerSecond": 13,
                                                "maxLatencyMicroseconds": 14, "minNcclBusBandwidthGbPerSecond": 15}}}})
    got = N.limits_from_config(N.parse_config(render_health_conf(cluster)))
    assert got == N.Limits(scratch_min_free_mib=7, scratch_min_free_percent=8, memory_max_stall_percent=9,
                           clock_max_skew_seconds=11, gpu_max_temperature_c=70, gpu_max_uncorrectable_ecc=2,
                           gpu_critical_xids=(79,), min_memory_bandwidth_mib_per_s=12.0, min_compute_mib_per_s=13.0,
                           max_latency_us=14.0, min_nccl_bus_bandwidth_gb_per_s=15.0, checks=("munged", "gpu"))


def test_model_defaults_are_the_node_checks_defaults():
    from ansible_collections.slurmkube.core.plugins.module_utils.model import health
    from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
    from ansible_collections.slurmkube.core.plugins.module_utils.render.slurm_config import render_health_conf

    assert health.FAST_CHECKS == N.FAST_CHECKS and health.CRITICAL_XIDS == N.CRITICAL_XIDS
    cluster = parse_cluster({"metadata": {"name": "c"}, "spec": {}})
    assert N.limits_from_config(N.parse_config(render_health_conf(cluster))) == DEFAULTS


def test_our_nccl_program_prints_rows_the_parser_reads():
    import nccl_check as program

    text = "\n".join([
        "# nccl_check nGpus 8 minBytes 1048576 maxBytes 2097152 iters: 20 warmup iters: 5",
        program.format_row(1 << 20, (30.5, 34.38, 60.16, 0, 30.1, 34.84, 60.97, 0)),
        program.format_row(1 << 21, (40.0, 52.43, 91.75, 0, 41.0, 51.15, 89.51, 2)),
        "# Out of bounds values : 2 FAILED",
    ])
    run = N.parse_allreduce_output(text)
    assert [r.size_bytes for r in run.rows] == [1 << 20, 1 << 21]
    assert N.peak_bus_bandwidth(run) == 91.75
    assert N.allreduce_problems(run, 91.75) == ["all-reduce: 4 wrong values"]
