"""Launch overhead of a container step (`srun --container`, Charliecloud's ch-run in the jail)
against a plain step, in one run on one worker.

Uses the docker tier's cluster (tests/images/docker_cluster.py, images from images/build.sh): a
controller, one worker and the login node; the plain user converts the demo image
(tests/container-demo) into their home, then runs `srun -w NODE true` and `srun -w NODE
--container=~/demo true` alternately, one after another, each timed in the user's ssh session
from srun's start to its exit (launch + teardown: what a user waits for). Writes
tests/bench/container_steps.json; no assertions.

    python tests/bench/bench_container_steps.py [STEPS]      # default 100 of each
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

from container_demo import PRETTY_NAME, export_demo_container  # noqa: E402

sys.path.insert(0, str(TESTS / "images"))
import docker_cluster as dc  # noqa: E402

NODE = dc.WORKERS[0]

LOOP = r"""
for i in $(seq %(steps)d); do
  for kind in plain container; do
    if [ $kind = plain ]; then set -- true; else set -- --container=$HOME/demo true; fi
    start=$(date +%%s%%N)
    srun -w %(node)s "$@" || echo "failed $kind"
    echo "$kind $(( $(date +%%s%%N) - start ))"
  done
done
"""


def summary(values: list) -> dict:
    return {
        "steps": len(values),
        "mean_ms": round(statistics.mean(values) * 1000, 1),
        "median_ms": round(statistics.median(values) * 1000, 1),
    }


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    images = json.loads(dc.run("bash", str(dc.BUILD), timeout=3600).stdout)
    dc.IMAGES.update(images)
    with tempfile.TemporaryDirectory(prefix="slurmkube-bench-containers.") as tmp:
        cluster = dc.Cluster(images, Path(tmp))
        try:
            cluster.prepare()
            cluster.start_controller()
            cluster.start_worker(NODE)
            cluster.start_login()
            dc.wait_for("the worker idle", lambda: NODE in cluster.idle_nodes(), timeout=120)
            tarball = export_demo_container(images["base"], dc.jail_home(cluster) / "demo.tar")
            os.chown(tarball, dc.JAIL_UID, dc.JAIL_UID)
            dc.ssh_to_login(cluster, "ch-convert -o dir demo.tar demo && rm demo.tar")
            check = dc.ssh_to_login(cluster, "srun -w %s --container=$HOME/demo cat /etc/os-release" % NODE)
            if PRETTY_NAME not in check.stdout:
                sys.exit("setup is wrong: the container step printed %r" % (check.stdout + check.stderr))
            out = dc.ssh_to_login(cluster, LOOP % {"steps": steps, "node": NODE}, timeout=3600).stdout
        finally:
            cluster.destroy()
    seconds: dict = {"plain": [], "container": []}
    for line in out.splitlines():
        kind, _sep, ns = line.partition(" ")
        if kind in seconds and ns.isdigit():
            seconds[kind].append(int(ns) / 1e9)
    plain, container = summary(seconds["plain"]), summary(seconds["container"])
    result = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s" % (os.cpu_count(), " ".join(Path("/proc/loadavg").read_text().split()[:3])),
        "method": "srun -w NODE [--container=~/demo] true, alternating, sequential, timed in the user's ssh session",
        "plain_step": plain,
        "container_step": container,
        "latency_ratio_container_over_plain": round(container["mean_ms"] / plain["mean_ms"], 3),
        "extra_ms_per_container_step": round(container["mean_ms"] - plain["mean_ms"], 1),
        "failed_steps": sum(1 for line in out.splitlines() if line.startswith("failed")),
    }
    (HERE / "container_steps.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
