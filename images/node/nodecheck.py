# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node health checks: what a tool printed → the problems found, as short drain reasons.

Every ``*_problems`` function is pure and returns a list of reasons ("gpu 00000000:34:00.0: 1
uncorrectable ECC error"); an empty list means healthy. The reasons become Slurm drain reasons
after the 'slurmkube:' prefix, so each names the part and the measured value against its limit.

The same file runs on the nodes (``python3 nodecheck.py fast ...``, see ``main``): the worker
and jail images carry a copy, so it imports nothing but the standard library. Only the command
line part at the bottom touches files, clocks and programs.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, fields
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

# Xid codes that mean the GPU needs a reset or a repair (NVIDIA's Xid catalogue): double-bit
# ECC (48), micro-controller halt (62), row-remapper failure (64), NVLink error (74), fallen off
# the bus (79), high single-bit ECC rate (92), uncontained ECC error (95), GSP errors (119, 120),
# unrecovered ECC error (140). Application faults (13, 31, 43, ...) are the job's business.
CRITICAL_XIDS = (48, 62, 64, 74, 79, 92, 95, 119, 120, 140)
# A clock before this is a dead RTC, not a time zone problem.
CLOCK_FLOOR = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
CONFIG_PREFIX = "SLURMKUBE_HC_"
FAST_CHECKS = ("munged", "slurmd", "jail", "scratch", "memory", "clock", "gpu")


@dataclass(frozen=True)
class Limits:
    """Thresholds of every check; the rendered health config overrides the defaults.

    A value exactly at its limit passes: minimums are "at least", maximums "at most".
    """

    scratch_min_free_mib: int = 1024
    scratch_min_free_percent: int = 5
    memory_max_stall_percent: int = 50
    clock_max_skew_seconds: int = 60
    gpu_max_temperature_c: int = 85
    gpu_max_uncorrectable_ecc: int = 0
    gpu_critical_xids: Tuple[int, ...] = CRITICAL_XIDS
    min_memory_bandwidth_mib_per_s: float = 1000.0
    min_compute_mib_per_s: float = 100.0
    max_latency_us: float = 1000.0
    min_nccl_bus_bandwidth_gb_per_s: float = 10.0
    checks: Tuple[str, ...] = field(default=FAST_CHECKS)


def parse_config(text: str) -> Dict[str, str]:
    """KEY=value lines of the rendered health config (shell syntax, comments allowed)."""
    values: Dict[str, str] = {}
    for word in shlex.split(text, comments=True):
        key, sep, value = word.partition("=")
        if sep and key.startswith(CONFIG_PREFIX):
            values[key[len(CONFIG_PREFIX):].lower()] = value
    return values


def limits_from_config(values: Mapping[str, str]) -> Limits:
    """Limits with the config's values in place of the defaults; unknown keys are ignored."""
    chosen: Dict[str, object] = {}
    for fld in fields(Limits):
        raw = values.get(fld.name)
        if raw is None:
            continue
        default = getattr(Limits, fld.name, None)
        if isinstance(default, tuple):
            words = raw.replace(",", " ").split()
            chosen[fld.name] = tuple(int(w) for w in words) if fld.name == "gpu_critical_xids" else tuple(words)
        elif isinstance(default, float):
            chosen[fld.name] = float(raw)
        else:
            chosen[fld.name] = int(raw)
    return Limits(**chosen)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- GPUs: nvidia-smi


class GpuState(NamedTuple):
    """What the checks read of one GPU in `nvidia-smi -q -x`; None where the GPU reports N/A."""

    bus_id: str
    temperature_c: Optional[int]
    volatile_uncorrectable_ecc: Optional[int]
    retirement_pending: bool
    remapping_pending: bool
    remapping_failed: bool
    thermal_slowdown: bool


def _number(text: Optional[str]) -> Optional[int]:
    match = re.match(r"\s*(-?\d+)", text or "")
    return int(match.group(1)) if match else None


def _yes(node: ET.Element, path: str) -> bool:
    return (node.findtext(path) or "").strip().lower() == "yes"


def _volatile_uncorrectable(gpu: ET.Element) -> Optional[int]:
    """Volatile uncorrectable ECC errors: double_bit/total (drivers before ~525) or the sum of
    dram_uncorrectable and the sram_uncorrectable* counters (newer drivers)."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    counts = [_number(volatile.findtext("double_bit/total"))]
    counts += [_number(child.text) for child in volatile if child.tag.endswith("_uncorrectable")
               or child.tag.startswith("sram_uncorrectable")]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _thermal_slowdown(gpu: ET.Element) -> bool:
    """A hardware or software thermal slowdown is active (clocks_throttle_reasons before driver
    530, clocks_event_reasons after)."""
    for section in ("clocks_throttle_reasons", "clocks_event_reasons"):
        reasons = gpu.find(section)
        if reasons is None:
            continue
        for child in reasons:
            if "thermal_slowdown" in child.tag and (child.text or "").strip() == "Active":
                return True
    return False


def parse_nvidia_smi_xml(text: str) -> List[GpuState]:
    """Every <gpu> of `nvidia-smi -q -x` (the count of elements, not <attached_gpus>, is what
    answered)."""
    root = ET.fromstring(text)
    return [
        GpuState(
            bus_id=gpu.get("id") or gpu.findtext("pci/pci_bus_id") or "?",
            temperature_c=_number(gpu.findtext("temperature/gpu_temp")),
            volatile_uncorrectable_ecc=_volatile_uncorrectable(gpu),
            retirement_pending=_yes(gpu, "retired_pages/pending_retirement"),
            remapping_pending=_yes(gpu, "remapped_rows/remapped_row_pending"),
            remapping_failed=_yes(gpu, "remapped_rows/remapped_row_failure"),
            thermal_slowdown=_thermal_slowdown(gpu),
        )
        for gpu in root.findall("gpu")
    ]


def expected_gpus(gres: str) -> int:
    """GPUs a node's Slurm record promises: the counts of its gpu GRES ('gpu:h100:8(S:0-1)')."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres or ""):
        parts = re.sub(r"\(.*\)$", "", item.strip()).split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def gpu_count_problems(gpus: Sequence[GpuState], expected: int) -> List[str]:
    """Fewer GPUs answer than Slurm schedules on this node."""
    if len(gpus) < expected:
        return ["%d of %d GPUs visible to nvidia-smi" % (len(gpus), expected)]
    return []


def gpu_state_problems(gpu: GpuState, limits: Limits) -> List[str]:
    """ECC, retirement, row remapping and temperature of one GPU against the limits."""
    problems = []
    where = "gpu %s" % gpu.bus_id
    errors = gpu.volatile_uncorrectable_ecc
    if errors is not None and errors > limits.gpu_max_uncorrectable_ecc:
        problems.append("%s: %d uncorrectable ECC errors (max %d)" % (where, errors, limits.gpu_max_uncorrectable_ecc))
    if gpu.retirement_pending:
        problems.append("%s: page retirement pending (reset needed)" % where)
    if gpu.remapping_pending:
        problems.append("%s: row remapping pending (reset needed)" % where)
    if gpu.remapping_failed:
        problems.append("%s: row remapping failed" % where)
    if gpu.temperature_c is not None and gpu.temperature_c > limits.gpu_max_temperature_c:
        problems.append("%s: %d C (max %d C)" % (where, gpu.temperature_c, limits.gpu_max_temperature_c))
    if gpu.thermal_slowdown:
        problems.append("%s: thermal slowdown active" % where)
    return problems


def gpu_problems(gpus: Sequence[GpuState], expected: int, limits: Limits) -> List[str]:
    """Every GPU problem of a node."""
    problems = gpu_count_problems(gpus, expected)
    for gpu in gpus:
        problems.extend(gpu_state_problems(gpu, limits))
    return problems


_HANDLE_ERROR = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+):\s*(.+)")


def nvidia_smi_error_problems(text: str) -> List[str]:
    """GPUs nvidia-smi could not reach ('Unable to determine the device handle for GPU ...')."""
    return ["gpu %s unreachable (%s)" % (m.group(1), m.group(2).strip())
            for m in _HANDLE_ERROR.finditer(text)]


_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)")


def xid_events(kernel_log: str) -> List[Tuple[str, int]]:
    """(PCI address, Xid) of every NVRM Xid line in a kernel log."""
    return [(m.group(1), int(m.group(2))) for m in _XID.finditer(kernel_log)]


def xid_problems(events: Sequence[Tuple[str, int]], critical: Sequence[int]) -> List[str]:
    """One reason per GPU and critical Xid, in the order first seen."""
    seen: List[Tuple[str, int]] = []
    for event in events:
        if event[1] in critical and event not in seen:
            seen.append(event)
    return ["gpu %s: Xid %d" % event for event in seen]


# --------------------------------------------------------------------------- GPUs: all-reduce


class AllReduceRow(NamedTuple):
    """One message size of an all-reduce run: bus bandwidths (GB/s) and wrong values (None: N/A)."""

    size_bytes: int
    busbw_out_of_place: float
    busbw_in_place: Optional[float]
    wrong: int


class AllReduceRun(NamedTuple):
    """An all-reduce bandwidth run (nccl-tests' all_reduce_perf or our slurmkube-nccl-allreduce)."""

    rows: List[AllReduceRow]
    out_of_bounds: Optional[int]


def _float(word: str) -> Optional[float]:
    try:
        return float(word)
    except ValueError:
        return None


def _wrong(word: str) -> int:
    value = _float(word)
    return int(value) if value is not None else 0


def parse_allreduce_output(text: str) -> AllReduceRun:
    """Rows and the out-of-bounds count of all_reduce_perf-style output.

    Columns are read from the right (time algbw busbw #wrong, out-of-place then in-place):
    older nccl-tests print no redop/root columns, and MPI launchers prefix lines.
    """
    rows = []
    out_of_bounds = None
    for line in text.splitlines():
        line = re.sub(r"^\[[^\]]*\]<stdout>:", "", line).strip()
        oob = re.match(r"#\s*Out of bounds values\s*:\s*(\d+)", line)
        if oob:
            out_of_bounds = int(oob.group(1))
            continue
        words = line.split()
        if len(words) < 10 or line.startswith("#") or not words[0].isdigit():
            continue
        busbw = _float(words[-6])
        if busbw is None:
            continue
        rows.append(AllReduceRow(int(words[0]), busbw, _float(words[-2]), _wrong(words[-5]) + _wrong(words[-1])))
    return AllReduceRun(rows, out_of_bounds)


def peak_bus_bandwidth(run: AllReduceRun) -> Optional[float]:
    """Bus bandwidth (GB/s) at the largest message: the number to compare, since small
    messages measure latency and the printed average mixes both."""
    if not run.rows:
        return None
    largest = max(run.rows, key=lambda r: r.size_bytes)
    return max(bw for bw in (largest.busbw_out_of_place, largest.busbw_in_place) if bw is not None)


def allreduce_problems(run: AllReduceRun, min_bus_bandwidth: float) -> List[str]:
    """Wrong results, or a bus bandwidth below the limit."""
    peak = peak_bus_bandwidth(run)
    if peak is None:
        return ["all-reduce printed no results"]
    problems = []
    wrong = sum(r.wrong for r in run.rows) + (run.out_of_bounds or 0)
    if wrong:
        problems.append("all-reduce: %d wrong values" % wrong)
    if peak < min_bus_bandwidth:
        problems.append("all-reduce bus bandwidth %.2f GB/s < %.2f GB/s" % (peak, min_bus_bandwidth))
    return problems


# --------------------------------------------------------------------------- every node


def scratch_problems(path: str, total_bytes: int, free_bytes: int, limits: Limits) -> List[str]:
    """Free space of the node's scratch below either limit."""
    if total_bytes <= 0:
        return ["scratch %s: no file system" % path]
    free_mib = free_bytes // 2**20
    percent = 100.0 * free_bytes / total_bytes
    if free_mib < limits.scratch_min_free_mib or percent < limits.scratch_min_free_percent:
        return ["scratch %s: %d MiB free (%.1f%%), need %d MiB and %d%%"
                % (path, free_mib, percent, limits.scratch_min_free_mib, limits.scratch_min_free_percent)]
    return []


def parse_pressure(text: str) -> Dict[str, Dict[str, float]]:
    """A PSI file ('some avg10=0.00 avg60=1.25 ...' / 'full ...') as {kind: {key: value}}."""
    out: Dict[str, Dict[str, float]] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        out[kind] = {k: float(v) for k, sep, v in (p.partition("=") for p in pairs) if sep}
    return out


def memory_problems(pressure: Mapping[str, Mapping[str, float]], limits: Limits) -> List[str]:
    """Memory stall: the share of the last minute in which every task waited for memory."""
    stall = pressure.get("full", {}).get("avg60")
    if stall is not None and stall > limits.memory_max_stall_percent:
        return ["memory pressure: all tasks stalled %.1f%% of the last minute (max %d%%)"
                % (stall, limits.memory_max_stall_percent)]
    return []


def parse_controller_time(text: str) -> Optional[datetime.datetime]:
    """slurmctld's time from `scontrol show config` ('Configuration data as of <ISO time>'),
    which the controller stamps when it answers; None when absent."""
    match = re.search(r"Configuration data as of (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", text)
    if not match:
        return None
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")


def clock_problems(now: datetime.datetime, controller: Optional[datetime.datetime], limits: Limits) -> List[str]:
    """The clock is before CLOCK_FLOOR, or further from slurmctld's than the limit (munge
    credentials expire after 300 s, so skew breaks Slurm itself long before that)."""
    if now < CLOCK_FLOOR:
        return ["clock at %s, before %s" % (now.strftime("%Y-%m-%dT%H:%M:%SZ"), CLOCK_FLOOR.date())]
    if controller is None:
        return []
    skew = abs((now.replace(tzinfo=None) - controller).total_seconds())
    if skew > limits.clock_max_skew_seconds:
        return ["clock %d s off slurmctld's (max %d s)" % (skew, limits.clock_max_skew_seconds)]
    return []


# --------------------------------------------------------------------------- CPU long checks


class CpuBenchmark(NamedTuple):
    """Results of the CPU long check on one node."""

    memory_bandwidth_mib_per_s: float
    compute_mib_per_s: float


def cpu_benchmark_problems(result: CpuBenchmark, limits: Limits) -> List[str]:
    """Memory bandwidth (copy) and compute (SHA-256 per CPU) below their limits."""
    problems = []
    if result.memory_bandwidth_mib_per_s < limits.min_memory_bandwidth_mib_per_s:
        problems.append("memory bandwidth %.0f MiB/s < %.0f MiB/s"
                        % (result.memory_bandwidth_mib_per_s, limits.min_memory_bandwidth_mib_per_s))
    if result.compute_mib_per_s < limits.min_compute_mib_per_s:
        problems.append("compute %.0f MiB/s SHA-256 per CPU < %.0f MiB/s"
                        % (result.compute_mib_per_s, limits.min_compute_mib_per_s))
    return problems


def latency_problems(peer: str, latency_us: float, limits: Limits) -> List[str]:
    """One-way TCP latency to another node above the limit."""
    if latency_us > limits.max_latency_us:
        return ["latency to %s %.0f us > %.0f us" % (peer, latency_us, limits.max_latency_us)]
    return []


def result_line(node: str, problems: Sequence[str], measured: Mapping[str, float]) -> str:
    """The one line per node and check that job output and the CronJob log show."""
    values = " ".join("%s=%.2f" % kv for kv in sorted(measured.items()))
    verdict = "FAIL: " + "; ".join(problems) if problems else "PASS"
    return "slurmkube-result node=%s %s %s" % (node, values, verdict)


# --------------------------------------------------------------------------- measurements


def measure_memory_bandwidth(mib: int = 128, rounds: int = 5) -> float:
    """MiB/s of copying a buffer larger than caches (best of a few rounds)."""
    source = bytearray(os.urandom(1 << 20)) * mib
    target = bytearray(len(source))
    best = float("inf")
    for attempt in range(rounds):  # noqa: B007  # only the count matters
        start = time.perf_counter()
        target[:] = source
        best = min(best, time.perf_counter() - start)
    return mib / best


def measure_compute(mib: int = 64) -> float:
    """MiB/s of SHA-256 on one CPU: C code inside CPython, so a slow or throttled core shows."""
    block = bytes(1 << 20)
    digest = hashlib.sha256()
    start = time.perf_counter()
    for chunk in [block] * mib:
        digest.update(chunk)
    return mib / (time.perf_counter() - start)


def measure_latency(peer_host: str, port: int, rounds: int = 200) -> float:
    """One-way latency in µs: half the median round trip of 1-byte TCP messages."""
    with socket.create_connection((peer_host, port), timeout=30) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        trips = []
        for payload in [b"x"] * rounds:
            start = time.perf_counter()
            conn.sendall(payload)
            if conn.recv(1) != b"x":
                raise OSError("peer closed the connection")
            trips.append(time.perf_counter() - start)
        conn.sendall(b"q")
    trips.sort()
    return trips[len(trips) // 2] / 2 * 1e6


def serve_latency(listener: socket.socket) -> None:
    """Echo one client's bytes until it sends 'q'."""
    conn = listener.accept()[0]
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(1)
            if not data or data == b"q":
                return
            conn.sendall(data)


# --------------------------------------------------------------------------- command line


def run_tool(argv: Sequence[str], timeout: int = 60) -> Tuple[int, str]:
    """Exit code and combined output of a program; 127 when it is missing, 124 on timeout."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, "%s: not found" % argv[0]
    except subprocess.TimeoutExpired:
        return 124, "%s: no answer within %d s" % (argv[0], timeout)
    return done.returncode, done.stdout + done.stderr


def probe_gpus(gres: str, limits: Limits, run: Callable[[Sequence[str]], Tuple[int, str]] = run_tool) -> List[str]:
    """The GPU checks on this node: nvidia-smi's view against the node's gpu GRES, then Xids."""
    wanted = expected_gpus(gres)
    if not wanted:
        return []
    code, out = run(["nvidia-smi", "-q", "-x"])
    problems = nvidia_smi_error_problems(out)
    start = out.find("<?xml") if "<?xml" in out else out.find("<nvidia_smi_log")
    if start >= 0:
        try:
            problems.extend(gpu_problems(parse_nvidia_smi_xml(out[start:]), wanted, limits))
        except ET.ParseError as exc:
            problems.append("nvidia-smi -q -x unreadable (%s)" % exc)
    elif not problems:
        last = (out.strip().splitlines() or [""])[-1]
        problems.append("nvidia-smi failed (exit %d): %s" % (code, last))
    code, log = run(["dmesg"])
    if code == 0:
        problems.extend(xid_problems(xid_events(log), limits.gpu_critical_xids))
    return problems


def probe_scratch(path: str, limits: Limits) -> List[str]:
    """Free space of the file system holding the node's scratch."""
    try:
        stat = os.statvfs(path)
    except OSError as exc:
        return ["scratch %s: %s" % (path, exc.strerror)]
    return scratch_problems(path, stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize, limits)


def probe_memory(limits: Limits) -> List[str]:
    """PSI of this pod's cgroup (v2), else of the whole machine; no PSI, no verdict."""
    for path in ("/sys/fs/cgroup/memory.pressure", "/proc/pressure/memory"):
        try:
            with open(path, encoding="ascii") as handle:
                return memory_problems(parse_pressure(handle.read()), limits)
        except OSError:
            continue
    return []


def fast_problems(args: argparse.Namespace, limits: Limits) -> List[Tuple[str, str]]:
    """The node-local checks the fast health check delegates to Python: (check, problem) pairs."""
    problems: List[Tuple[str, str]] = []
    wanted = set(args.checks.split(",")) & set(limits.checks)
    if "scratch" in wanted and args.scratch_dir:
        problems.extend(("scratch", p) for p in probe_scratch(args.scratch_dir, limits))
    if "memory" in wanted:
        problems.extend(("memory", p) for p in probe_memory(limits))
    if "clock" in wanted:
        now = datetime.datetime.now(datetime.timezone.utc)
        found = clock_problems(now, parse_controller_time(args.controller_config or ""), limits)
        problems.extend(("clock", p) for p in found)
    if "gpu" in wanted:
        problems.extend(("gpu", p) for p in probe_gpus(args.gres or "", limits))
    return problems


def cpu_long_check(node: str, limits: Limits) -> Tuple[List[str], Dict[str, float]]:
    """Measure and judge this node's memory bandwidth and per-CPU compute."""
    result = CpuBenchmark(measure_memory_bandwidth(), measure_compute())
    measured = {"memory_mib_per_s": result.memory_bandwidth_mib_per_s, "compute_mib_per_s": result.compute_mib_per_s}
    return cpu_benchmark_problems(result, limits), measured


def latency_long_check(args: argparse.Namespace, limits: Limits) -> Tuple[List[str], Dict[str, float]]:
    """Rank 0 of a 2-node job serves; rank 1 measures. They meet through a file in the shared
    jail: each pod's address is its own, and the jail is the one place both see."""
    rendezvous = args.rendezvous
    if args.rank == 0:
        with socket.socket() as listener:
            listener.bind(("0.0.0.0", 0))
            listener.listen(1)
            address = "%s %d" % (socket.gethostbyname(socket.gethostname()), listener.getsockname()[1])
            with open(rendezvous + ".tmp", "w", encoding="ascii") as handle:
                handle.write(address)
            os.rename(rendezvous + ".tmp", rendezvous)
            listener.settimeout(120)
            serve_latency(listener)
        return [], {}
    deadline = time.monotonic() + 120
    while not os.path.exists(rendezvous):
        if time.monotonic() > deadline:
            return ["latency peer %s never listened" % args.peer], {}
        time.sleep(0.2)
    with open(rendezvous, encoding="ascii") as handle:
        host, port = handle.read().split()
    os.unlink(rendezvous)
    latency = measure_latency(host, int(port))
    return latency_problems(args.peer, latency, limits), {"latency_us": latency}


def nccl_long_check(args: argparse.Namespace, limits: Limits) -> Tuple[List[str], Dict[str, float]]:
    """Judge all-reduce output (ours or nccl-tests') saved in a file."""
    with open(args.output, encoding="utf-8", errors="replace") as handle:
        run = parse_allreduce_output(handle.read())
    peak = peak_bus_bandwidth(run)
    return allreduce_problems(run, limits.min_nccl_bus_bandwidth_gb_per_s), \
        ({"busbw_gb_per_s": peak} if peak is not None else {})


def argument_parser() -> argparse.ArgumentParser:
    """Subcommands: fast (prints problems; with --tagged, each after its check's name), cpu,
    latency, nccl (print one result line)."""
    parser = argparse.ArgumentParser(prog="slurmkube-nodecheck", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="rendered health config (KEY=value lines)")
    parser.add_argument("--node", default=socket.gethostname())
    sub = parser.add_subparsers(dest="command", required=True)
    fast = sub.add_parser("fast")
    fast.add_argument("--checks", default=",".join(FAST_CHECKS))
    fast.add_argument("--tagged", action="store_true", help="print each problem as <check><TAB><problem>")
    fast.add_argument("--scratch-dir")
    fast.add_argument("--gres", help="the node's Gres from slurmctld")
    fast.add_argument("--controller-config", help="output of `scontrol show config`")
    sub.add_parser("cpu")
    latency = sub.add_parser("latency")
    latency.add_argument("--rank", type=int, required=True)
    latency.add_argument("--peer", required=True)
    latency.add_argument("--rendezvous", required=True)
    nccl = sub.add_parser("nccl")
    nccl.add_argument("output")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one check; exit 1 when it found problems."""
    args = argument_parser().parse_args(argv)
    text = ""
    if args.config and os.path.exists(args.config):
        with open(args.config, encoding="utf-8") as handle:
            text = handle.read()
    limits = limits_from_config(parse_config(text))
    if args.command == "fast":
        problems = fast_problems(args, limits)
        for check, problem in problems:
            sys.stdout.write(("%s\t%s\n" % (check, problem)) if args.tagged else problem + "\n")
        return 1 if problems else 0
    check = {"cpu": lambda: cpu_long_check(args.node, limits), "latency": lambda: latency_long_check(args, limits),
             "nccl": lambda: nccl_long_check(args, limits)}[args.command]
    problems, measured = check()
    if measured or problems:
        sys.stdout.write(result_line(args.node, problems, measured) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
