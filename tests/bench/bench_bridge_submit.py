"""The bridge's submissions: 100 external jobs by one call into the controller, their sbatch one
after the other against four at a time (SlurmControl.each, EACH_AT_ONCE), alternating, in one run.

Uses the docker tier's cluster (tests/images/docker_cluster.py, images from images/build.sh): a
controller and one worker, drained so that no job starts; each round submits JOBS jobs (1 CPU each)
through the operator's own code (slurm/external.py), timed from the call to its answer, then
cancels them. Writes tests/bench/bridge_submit.json; no assertions.

    python tests/bench/bench_bridge_submit.py [JOBS] [ROUNDS]   # default 100 jobs, 3 rounds each
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS))

from collection_path import ensure_importable  # noqa: E402

ensure_importable()

sys.path.insert(0, str(TESTS / "images"))
import docker_cluster as smoke  # noqa: E402

from ansible_collections.slurmkube.core.plugins.module_utils.slurm import control  # noqa: E402
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import (  # noqa: E402
    ExternalJobRequest,
    ExternalJobs,
)


def submit_seconds(cluster: smoke.Cluster, jobs: int, at_once: int, round_no: int) -> float:
    """Seconds to submit JOBS external jobs with AT_ONCE sbatch side by side; all are cancelled after."""
    def run(argv):
        done = cluster.exec(smoke.CONTROLLER_POD, *argv, check=False, timeout=600)
        return done.returncode, done.stdout, done.stderr

    control.EACH_AT_ONCE = at_once
    requests = [ExternalJobRequest(gang="r%d-%d-%d" % (round_no, at_once, i), name="bench/%d" % i, tasks=1,
                                   cpus_per_task=1, mem_per_cpu_mib=16) for i in range(jobs)]
    started = time.monotonic()
    ids = ExternalJobs(control.SlurmControl(run)).submit(requests)
    seconds = time.monotonic() - started
    refused = [i for i in ids if not isinstance(i, int)]
    if refused:
        sys.exit("refused: %s" % refused[0])
    cluster.exec(smoke.CONTROLLER_POD, "scancel", "--user=root")
    return seconds


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    images = json.loads(smoke.run("bash", str(smoke.BUILD), timeout=3600).stdout)
    smoke.IMAGES.update(images)
    seconds: dict = {1: [], 4: []}
    with tempfile.TemporaryDirectory(prefix="slurmkube-bench-submit.") as tmp:
        cluster = smoke.Cluster(images, Path(tmp))
        try:
            cluster.prepare()
            cluster.start_controller()
            cluster.start_worker(smoke.WORKERS[0])
            smoke.wait_for("the worker idle", lambda: smoke.WORKERS[0] in cluster.idle_nodes(), timeout=120)
            cluster.exec(smoke.CONTROLLER_POD, "scontrol", "update", "nodename=" + smoke.WORKERS[0],
                         "state=drain", "reason=bench: no job starts")
            for round_no in range(rounds):
                for at_once in (1, 4):
                    seconds[at_once].append(submit_seconds(cluster, jobs, at_once, round_no))
        finally:
            cluster.destroy()
    one, four = statistics.median(seconds[1]), statistics.median(seconds[4])
    result = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s" % (os.cpu_count(), " ".join(Path("/proc/loadavg").read_text().split()[:3])),
        "method": "%d external jobs by ExternalJobs.submit (one docker exec), %d rounds alternating" % (jobs, rounds),
        "one_at_a_time_s": [round(s, 2) for s in seconds[1]],
        "four_at_once_s": [round(s, 2) for s in seconds[4]],
        "median_ratio_four_to_one": round(four / one, 3),
        "per_job_ms_one_at_a_time": round(one / jobs * 1000, 1),
    }
    (HERE / "bridge_submit.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
