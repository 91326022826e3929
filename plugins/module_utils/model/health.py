# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster model's health-check part (SlurmClusterSpec.healthChecks), beside types.py: which
checks run on the nodes, their limits, and the long checks run as Slurm jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import PROGRAM_PATH, spec_field

# The fast checks there are (images/common/slurmkube-healthcheck runs them in this order).
FAST_CHECKS = ("munged", "slurmd", "jail", "scratch", "memory", "clock", "gpu")
# Xids that mean the GPU needs a reset or a repair (NVIDIA's Xid catalogue); see nodecheck.py.
CRITICAL_XIDS = (48, 62, 64, 74, 79, 92, 95, 119, 120, 140)


@dataclass(frozen=True)
class LongChecks:
    """Long health checks submitted as Slurm jobs on a schedule: per node, scratch I/O, memory
    bandwidth and compute; node pairs, TCP latency; GPU nodes, NCCL all-reduce bus bandwidth.
    A node that fails is drained with reason 'slurmkube: long check: ...', which only a person
    or a replacement (replaceDrainedNodes) clears."""

    enabled: bool = spec_field("Run the long checks.", False)
    schedule: str = spec_field("Cron schedule of the CronJob.", "0 */6 * * *")
    min_memory_bandwidth_mib_per_second: int = spec_field(
        "Least memory copy bandwidth (MiB/s, one CPU, 128 MiB buffers) a node must reach.",
        1000, minimum=0, maximum=10**7,
    )
    min_compute_mib_per_second: int = spec_field(
        "Least SHA-256 throughput (MiB/s) of one CPU: a slow or throttled core shows here.",
        100, minimum=0, maximum=10**6,
    )
    max_latency_microseconds: int = spec_field(
        "Most one-way TCP latency (microseconds, median of 200 round trips) between two nodes.",
        1000, minimum=1, maximum=10**7,
    )
    min_nccl_bus_bandwidth_gb_per_second: int = spec_field(
        "Least NCCL all-reduce bus bandwidth (GB/s, at the largest message) of a GPU node's GPUs. "
        "Intra-node NVLink gives hundreds; PCIe without peer-to-peer about 4.",
        10, minimum=0, maximum=100000,
    )
    nccl_python: str = spec_field(
        "Python in the jail that has the nvidia-nccl-cu12 and nvidia-cuda-runtime-cu12 wheels "
        "(the GPU check loads NCCL from them; the product images ship no CUDA).",
        "/opt/slurmkube/nccl/bin/python3", pattern=PROGRAM_PATH,
    )


@dataclass(frozen=True)
class HealthChecks:
    """Checks that drain bad nodes (reason prefixed 'slurmkube:') and resume the nodes they
    drained once they pass again; an administrator's drain is never undone."""

    enabled: bool = spec_field("Run fast checks as Slurm's HealthCheckProgram.", True)
    interval: int = spec_field("HealthCheckInterval in seconds.", 60, minimum=10, maximum=86400)
    node_state: str = spec_field(
        "HealthCheckNodeState: which nodes are checked.",
        "ANY",
        enum=("ANY", "IDLE", "ALLOC", "MIXED", "NONDRAINED_IDLE"),
    )
    checks: List[str] = spec_field(
        "Fast checks to run: munged (answers), slurmd (running), jail (readable), scratch (free "
        "space of the node's /tmp), memory (pressure stall), clock (against slurmctld's), gpu "
        "(nvidia-smi: count against the node's gpu GRES, ECC, retirement and row remapping, "
        "temperature, critical Xids; skipped on nodes without GPUs).",
        factory=lambda: list(FAST_CHECKS), enum=FAST_CHECKS,
    )
    scratch_min_free_mib: int = spec_field("Least free space (MiB) on the node's scratch.", 1024, minimum=0)
    scratch_min_free_percent: int = spec_field(
        "Least free space (percent) on the node's scratch.", 5, minimum=0, maximum=100)
    memory_max_stall_percent: int = spec_field(
        "Most share of the last minute in which every task of the node waited for memory "
        "(PSI 'full avg60').", 50, minimum=1, maximum=100,
    )
    clock_max_skew_seconds: int = spec_field(
        "Most difference between the node's clock and slurmctld's (munge rejects credentials "
        "beyond 300 s).", 60, minimum=1, maximum=86400,
    )
    gpu_max_temperature_celsius: int = spec_field("Hottest a GPU may be.", 85, minimum=1, maximum=150)
    gpu_max_uncorrectable_ecc_errors: int = spec_field(
        "Most volatile (since driver load) uncorrectable ECC errors a GPU may have.", 0, minimum=0)
    gpu_critical_xids: List[int] = spec_field(
        "Xid codes in the kernel log that drain a GPU node (application faults such as 13 or 31 "
        "are left out by default).",
        factory=lambda: list(CRITICAL_XIDS), minimum=1, maximum=1000,
    )
    replace_drained_nodes: bool = spec_field(
        "Delete the pod of a node drained by these checks for a hardware reason (GPU, scratch, "
        "clock, a long check) once it is idle; its StatefulSet makes a new one (elsewhere when "
        "its Kubernetes node is cordoned) and the node is resumed when the new pod is ready.",
        False,
    )
    long_checks: LongChecks = spec_field("Scheduled long checks.", factory=LongChecks)
