"""200 tiny jobs with the jail plugin against the same jobs without it, in one run.

Uses the docker tier's cluster (tests/images/docker_cluster.py, images from images/build.sh): one
worker loads the SPANK jail plugin (plugstack.conf), the other an empty plugstack.conf; the
jobs alternate between them, `srun -N1 -w NODE true` one after another from inside the
controller container, each timed from srun's start to its exit (launch + teardown: what
a user waits for). Writes tests/bench/jail_jobs.json; no assertions.

    python tests/bench/bench_jail_jobs.py [JOBS]      # default 200 per worker
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS))

from collection_path import ensure_importable  # noqa: E402

ensure_importable()

sys.path.insert(0, str(TESTS / "images"))
import docker_cluster as smoke  # noqa: E402

JAILED, PLAIN = smoke.WORKERS[:2]


class BenchCluster(smoke.Cluster):
    """The smoke-test cluster, with PLAIN reading a config dir whose plugstack.conf is empty."""

    def prepare(self) -> None:
        super().prepare()
        plain = self.root / "slurm-plain"
        plain.mkdir()
        for rendered in (self.root / "slurm").iterdir():
            (plain / rendered.name).write_text(rendered.read_text())
        (plain / "plugstack.conf").write_text("# no SPANK plugin: the baseline\n")

    def common_args(self, host: str) -> list:
        args = super().common_args(host)
        if host == PLAIN:
            mine, plain = "%s:" % (self.root / "slurm"), "%s:" % (self.root / "slurm-plain")
            args = [a.replace(mine, plain, 1) if a.startswith(mine) else a for a in args]
        return args


LOOP = r"""
for i in $(seq "$1"); do
  for node in "$2" "$3"; do
    start=$(date +%s%N)
    srun -N1 -w "$node" true || echo "failed $node"
    echo "$node $(( $(date +%s%N) - start ))"
  done
done
"""


def check_setup(cluster: BenchCluster) -> None:
    """Jobs on JAILED see the jail as /, jobs on PLAIN the worker's own root."""
    marker = "/" + smoke.C.JAIL_MARKER_FILE
    jailed = cluster.exec(smoke.CONTROLLER_POD, "srun", "-w", JAILED, "cat", marker, check=False)
    plain = cluster.exec(smoke.CONTROLLER_POD, "srun", "-w", PLAIN, "test", "-e", marker, check=False)
    if jailed.stdout.strip() != "test" or plain.returncode == 0:
        sys.exit("setup is wrong: jailed=%r plain rc=%d" % (jailed.stdout + jailed.stderr, plain.returncode))


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    if not smoke.spank_plugin_expected():
        sys.exit("spank/Makefile does not exist: nothing to compare")
    images = json.loads(smoke.run("bash", str(smoke.BUILD), timeout=3600).stdout)
    smoke.IMAGES.update(images)
    with tempfile.TemporaryDirectory(prefix="slurmkube-bench-jobs.") as tmp:
        cluster = BenchCluster(images, Path(tmp))
        try:
            cluster.prepare()
            cluster.start_controller()
            for worker in (JAILED, PLAIN):
                cluster.start_worker(worker)
            smoke.wait_for("both workers idle", lambda: cluster.idle_nodes() >= {JAILED, PLAIN}, timeout=120)
            check_setup(cluster)
            out = cluster.exec(smoke.CONTROLLER_POD, "bash", "-c", LOOP, "loop", str(jobs), JAILED, PLAIN,
                               timeout=3600).stdout  # fmt: skip
        finally:
            cluster.destroy()
    failed = [line for line in out.splitlines() if line.startswith("failed")]
    seconds: dict = {JAILED: [], PLAIN: []}
    for line in out.splitlines():
        node, _sep, ns = line.partition(" ")
        if node in seconds:
            seconds[node].append(int(ns) / 1e9)

    def summary(values: list) -> dict:
        return {
            "jobs": len(values),
            "jobs_per_s": round(len(values) / sum(values), 2),
            "mean_launch_latency_ms": round(statistics.mean(values) * 1000, 1),
            "median_launch_latency_ms": round(statistics.median(values) * 1000, 1),
        }

    with_jail, without = summary(seconds[JAILED]), summary(seconds[PLAIN])
    result = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s" % (os.cpu_count(), " ".join(Path("/proc/loadavg").read_text().split()[:3])),
        "method": "srun -N1 -w NODE true, alternating nodes, sequential, timed inside the controller container",
        "with_jail_plugin": with_jail,
        "without_plugin": without,
        "latency_ratio_with_over_without": round(
            with_jail["mean_launch_latency_ms"] / without["mean_launch_latency_ms"], 3
        ),
        "failed_jobs": len(failed),
    }
    (HERE / "jail_jobs.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
