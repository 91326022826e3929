#!/usr/bin/env python
"""Benchmark: what one bridge cycle costs with 1,000 pods waiting in Slurm's queue, against 10.

The cycle is the operator's own (operator/bridge.py, plan_bridge.py) over an in-memory API
(tests/unit/memory_kube.py) and Slurm's recorded answers for external jobs (tests/unit/fixtures/
slurm/squeue-external-26.05.txt, the cycle's one-line-per-job listing, and the same jobs as
`squeue --json`, which the cycle read before): one pending job's answer copied per pod. What is
measured is our side, the CPU seconds a cycle takes in the operator, the calls it makes and the
bytes it reads from Slurm; not slurmctld's time to answer nor the exec's transfer, which the bytes
stand for. Each pod waits alone (its own gang), its job PENDING: the steady state of a long queue.

Prints one JSON object: per size, the median CPU seconds of a cycle, its API and Slurm calls and
the bytes squeue printed; the ratio of the large to the small; and, for the large queue, what
parsing squeue's JSON answer instead would cost. No assertion on time. Last measured:
tests/bench/bridge_cycle.json.

Usage: python tests/bench/bench_bridge_cycle.py [--pods N] [--repeat N]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "unit"))
from collection_path import ensure_importable  # noqa: E402

ensure_importable()
sys.path.insert(0, str(TESTS / "unit" / "plugins" / "module_utils" / "operator"))
from test_bridge_cycle import BRIDGE, CLUSTER, kube_with  # noqa: E402

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.operator.bridge import (  # noqa: E402
    BridgeCycle,
    BridgeMemory,
)
from ansible_collections.slurmkube.core.plugins.module_utils.operator.plan_bridge import gang_key  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import (  # noqa: E402
    COMMENT_PREFIX,
    ExternalJobs,
    parse_external_jobs,
)

FIXTURES = TESTS / "unit" / "fixtures" / "slurm"
LISTING = FIXTURES / "squeue-external-26.05.txt"
JSON_ANSWER = FIXTURES / "squeue-external-26.05.json"


def pending_pod(index: int) -> Dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p-%04d" % index, "namespace": "ml", "uid": "uid-%04d" % index, "labels": {},
                         "annotations": {}, "creationTimestamp": "2026-11-29T10:00:00Z"},
            "spec": {"schedulerName": C.BRIDGE_SCHEDULER_NAME,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"}}


def pending_line() -> str:
    """The recorded listing's line of a pending bridge job."""
    return next(line for line in LISTING.read_text().splitlines() if "|PENDING|" in line and COMMENT_PREFIX in line)


def squeue_listing(pods: Sequence[Dict[str, Any]]) -> str:
    """Slurm's listing with each pod's job pending: the recorded pending line, once per pod."""
    fields = pending_line().split("|")
    return "".join("|".join([str(1000 + i)] + fields[1:-1] + [COMMENT_PREFIX + gang_key([pod])]) + "\n"
                   for i, pod in enumerate(pods))


def squeue_json(pods: Sequence[Dict[str, Any]]) -> str:
    """The same jobs as `squeue --json` prints them: the recorded pending job, once per pod."""
    recorded = json.loads(JSON_ANSWER.read_text())
    template = next(j for j in recorded["jobs"] if (j.get("comment") or "").startswith(COMMENT_PREFIX)
                    and j["job_state"] == ["PENDING"])
    jobs = []
    for index, pod in enumerate(pods):
        job = copy.deepcopy(template)
        job.update(job_id=1000 + index, comment=COMMENT_PREFIX + gang_key([pod]))
        jobs.append(job)
    return json.dumps(dict(recorded, jobs=jobs))


def json_parse_seconds(pods: Sequence[Dict[str, Any]], repeat: int) -> Dict[str, Any]:
    """What reading the same queue from `squeue --json` costs: the median parse, and its size."""
    answer = squeue_json(pods)
    seconds = []
    for _attempt in range(repeat):
        start = time.process_time()
        parse_external_jobs(answer)
        seconds.append(time.process_time() - start)
    return {"parse_cpu_seconds_median": round(statistics.median(seconds), 5), "bytes": len(answer)}


class RecordedSlurm:
    """The controller's answers: squeue's recorded output; counts calls and bytes."""

    def __init__(self, answer: str) -> None:
        self.answer, self.calls, self.bytes = answer, 0, 0

    def __call__(self, argv: Sequence[str]) -> Tuple[int, str, str]:
        self.calls += 1
        if argv[0] != "squeue":
            raise AssertionError("a steady queue calls only squeue, not %s" % argv[0])
        self.bytes += len(self.answer)
        return 0, self.answer, ""


def measure(count: int, repeat: int) -> Dict[str, Any]:
    pods = [pending_pod(i) for i in range(count)]
    kube = kube_with(*pods)  # the cycle's unit tests' API: the cluster's worker pod and these pods
    slurm = RecordedSlurm(squeue_listing(pods))
    memory = BridgeMemory()
    seconds: List[float] = []
    report = None
    for _attempt in range(repeat):
        calls_before = slurm.calls
        start = time.process_time()
        report = BridgeCycle(kube, memory).run(CLUSTER, BRIDGE, lambda: ExternalJobs(SlurmControl(slurm)))
        seconds.append(time.process_time() - start)
        if report.submitted or report.bound or report.cancelled or slurm.calls - calls_before != 1:
            raise AssertionError("not a steady queue: %s" % report.summary())
    assert report is not None
    return {"pods": count, "cycle_cpu_seconds_median": round(statistics.median(seconds), 5),
            "api_calls": report.api_calls, "slurm_calls": report.slurm_calls,
            "squeue_bytes": slurm.bytes // repeat, "pending": report.queue["pending"]}


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    baseline, large = measure(10, args.repeat), measure(args.pods, args.repeat)
    pods = [pending_pod(i) for i in range(args.pods)]
    print(json.dumps({"benchmark": "bridge_cycle", "baseline": baseline, "large": large,
                      "cpu_ratio": round(large["cycle_cpu_seconds_median"] / baseline["cycle_cpu_seconds_median"], 1),
                      "per_pod_cpu_ms": round(1000 * large["cycle_cpu_seconds_median"] / args.pods, 3),
                      "large_as_squeue_json": json_parse_seconds(pods, args.repeat)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
