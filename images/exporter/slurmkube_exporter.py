"""Prometheus exporter of one Slurm cluster.

Runs next to the cluster as its own Deployment, with munged and the cluster's slurm.conf, so
it still answers (slurm_up 0) while slurmctld's pod is replaced. Each scrape asks slurmctld
once per kind (nodes, jobs, sdiag) at most every MIN_INTERVAL seconds, whatever the number of
Prometheus servers scraping: the answers are cached and shared. The jail, mounted read-only,
gives its own usage and the health checks' results; a hung jail volume costs its families,
never the scrape. What the jail's files take, in all and per home, the jail-usage container
beside it counts (slurmkube_jail_usage.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import AbstractSet, Any, Dict, Iterator, List, Optional, Tuple

from prometheus_client import start_http_server
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.metrics import (
    SQUEUE_FORMAT,
    Family,
    health_families,
    jail_families,
    jail_usage_families,
    job_families,
    long_check_families,
    node_families,
    node_names,
    scheduler_families,
    up_family,
)

COMMANDS = {
    "nodes": ["scontrol", "show", "nodes", "--json"],
    # Every partition's jobs, hidden ones too.
    "jobs": ["squeue", "--all", "--noheader", "--format=" + SQUEUE_FORMAT],
    "sdiag": ["sdiag", "--json"],
}
PARSERS = {"nodes": node_families, "jobs": job_families, "sdiag": scheduler_families}
MIN_INTERVAL = float(os.environ.get(C.ENV_EXPORTER_MIN_INTERVAL, "15"))
COMMAND_TIMEOUT = 20
JAIL_TIMEOUT = 10
LOG_TAIL_BYTES = 65536  # a long check's result lines are at the end of its log


class SlurmCollector:
    """prometheus-client collector over a cache of Slurm's answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.taken: Optional[float] = None  # when Slurm was last asked; never yet
        self.families: List[Family] = up_family({source: False for source in COMMANDS})
        self.jail = JailReader(C.JAIL_MOUNT_PATH)

    def refresh(self) -> None:
        families: List[Family] = []
        answered: Dict[str, bool] = {}
        nodes: AbstractSet[str] = frozenset()
        for kind, argv in COMMANDS.items():
            text = run(argv)
            answered[kind] = text is not None
            if text is None:
                continue
            families.extend(PARSERS[kind](text))
            if kind == "nodes":
                nodes = node_names(text)
        families.extend(self.jail.families(nodes))
        self.families = up_family(answered) + families
        self.taken = time.monotonic()

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            if self.taken is None or time.monotonic() - self.taken >= MIN_INTERVAL:
                self.refresh()
            families = list(self.families)
        for family in families:
            yield converted(family)


class JailReader:
    """Reads the jail in a worker thread with a time limit: a hung NFS server must not hang
    scrapes. While one read hangs, no other starts."""

    def __init__(self, root: str, usage_dir: str = C.JAIL_USAGE_DIR) -> None:
        self.root = root
        self.usage_dir = usage_dir
        claim = os.environ.get(C.ENV_JAIL_CLAIM_BYTES)
        self.claim_bytes = float(claim) if claim else None
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.pending: Optional[Future] = None

    def families(self, nodes: AbstractSet[str]) -> List[Family]:
        if self.pending is not None and not self.pending.done():
            return []
        self.pending = self.pool.submit(self.read, nodes)
        try:
            return self.pending.result(timeout=JAIL_TIMEOUT)
        except (FutureTimeout, OSError):
            return []

    def read(self, nodes: AbstractSet[str]) -> List[Family]:
        usage = os.statvfs(self.root)
        families = jail_families(usage.f_frsize * usage.f_blocks, usage.f_frsize * usage.f_bavail,
                                 usage.f_files, usage.f_favail)
        health = {name: text for name, (_mtime, text) in files_in(self.root + C.HEALTH_RESULTS_DIR).items()}
        long_checks = {name: found for name, found in files_in(self.root + C.LONG_CHECK_RESULTS_DIR).items()
                       if name.endswith(".log")}
        return (families + jail_usage_families(usage_report(self.usage_dir), self.claim_bytes)
                + health_families(health, nodes) + long_check_families(long_checks, nodes))


def usage_report(directory: str) -> Dict[str, Any]:
    """The jail-usage container's last count ({} before its first, or when unreadable)."""
    try:
        with open(os.path.join(directory, C.JAIL_USAGE_FILE), encoding="utf-8") as report:
            found = json.load(report)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def files_in(directory: str) -> Dict[str, Tuple[float, str]]:
    """(mtime, the last LOG_TAIL_BYTES) of each visible file in a directory; none when it is absent."""
    found: Dict[str, Tuple[float, str]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for name in names:
        if name.startswith("."):
            continue
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - LOG_TAIL_BYTES))
                found[name] = (os.fstat(handle.fileno()).st_mtime, handle.read().decode("utf-8", "replace"))
        except OSError:
            continue
    return found


def run(argv: List[str]) -> Optional[str]:
    """A command's output, or None when it fails or hangs (slurmctld away)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def converted(family: Family) -> Metric:
    names = sorted({key for pairs, _value in family.samples for key, _label in pairs})
    kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
    metric = kind(family.name, family.help, labels=names)
    for pairs, value in family.samples:
        values: Dict[str, str] = dict(pairs)
        metric.add_metric([values.get(n, "") for n in names], value)
    return metric


def main() -> None:
    port = int(os.environ.get(C.ENV_EXPORTER_PORT, "9341"))
    REGISTRY.register(SlurmCollector())
    start_http_server(port)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
