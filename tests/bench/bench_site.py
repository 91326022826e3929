"""First `site.yml` run against its idempotent re-run, on the embedded cluster (localkube).

Deploys a small cluster (controller, login, two 1-CPU workers, its own operator) into its own
namespace with playbooks/site.yml, as `quickstart.sh` runs it (no kubeconfig: localkube;
images imported when missing), times the first run (the Slurm cluster made and Ready) and a
second run (nothing to change), then teardown.yml with slurmkube_purge and the namespace.
The embedded cluster and the images are expected warm: their cold times are in
localkube_bringup.md and images.json.
Writes tests/bench/site.json; reports, never asserts, the times.

    python tests/bench/bench_site.py
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Tuple

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "k8s"))

from collection_path import ensure_importable  # noqa: E402
from localkube_helpers import localkube_env  # noqa: E402

NAMESPACE = "slurmkube-bench-site"
CLUSTER = "bench"
IMAGES = ("controller", "worker", "login", "jail", "operator")


def cluster_vars(images: Dict[str, str]) -> Dict[str, object]:
    small = {"cpu": 1, "cpuRequest": "100m", "memory": "512Mi"}
    return {
        # Built once beforehand: a source edit between the two runs must not count as a change.
        "slurmkube_images": images,
        # The embedded cluster this bench times (site.yml's own default is kind: bench_quickstart.sh).
        "slurmkube_kubernetes": "localkube",
        # An operator of its own that manages only this namespace (the Kubernetes is shared).
        "slurmkube_operator_namespace": NAMESPACE,
        "slurmkube_operator_watch_namespaces": [NAMESPACE],
        "slurmkube_cluster": {
            "apiVersion": "slurmkube.io/v1alpha1", "kind": "SlurmCluster",
            "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
            "spec": {"controller": {"resources": small, "stateVolume": {"size": "1Gi"}},
                     "login": {"serviceType": "NodePort", "resources": small},
                     "jail": {"size": "5Gi"},
                     "partitions": [{"name": "main", "default": True}]},
        },
        "slurmkube_node_sets": [{
            "apiVersion": "slurmkube.io/v1alpha1", "kind": "NodeSet",
            "metadata": {"name": "cpu", "namespace": NAMESPACE},
            "spec": {"clusterName": CLUSTER, "replicas": 2,
                     "resources": {"cpu": 1, "cpuRequest": "100m", "memory": "768Mi"}},
        }],
    }


def run_playbook(name: str, extra_vars: Path, *more: str) -> Tuple[float, Dict[str, int]]:
    """Seconds of one playbook run and its recap counts (fails loudly when the run fails)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ensure_importable().parents[2]), ANSIBLE_NOCOLOR="1")
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    start = time.monotonic()
    argv = [playbook, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", "@%s" % extra_vars, *more, str(REPO / "playbooks" / name)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit("%s failed:\n%s%s" % (name, proc.stdout[-4000:], proc.stderr[-2000:]))
    recap = re.search(r"localhost\s+:\s+(.*)", proc.stdout.split("PLAY RECAP")[-1])
    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", recap.group(1))} if recap else {}
    return seconds, counts


def kubectl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=localkube_env(), check=False,
                          timeout=600)


def main() -> None:
    kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=300s")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    build = subprocess.run(["bash", str(REPO / "images" / "build.sh"), *IMAGES], capture_output=True, text=True,
                           check=True)
    images = {name: ref for name, ref in json.loads(build.stdout).items() if name in IMAGES}
    with tempfile.TemporaryDirectory() as tmp:
        extra = Path(tmp) / "bench.yml"
        extra.write_text(yaml.safe_dump(cluster_vars(images)))
        try:
            first_s, first = run_playbook("site.yml", extra)
            rerun_s, rerun = run_playbook("site.yml", extra)
        finally:
            teardown_s = run_playbook("teardown.yml", extra, "-e", "slurmkube_purge=true",
                                      "-e", "slurmkube_remove_operator=true")[0]
            kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=300s")
    result = {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": "%d CPUs, load %s (shared with other work)" % (os.cpu_count() or 0, load),
        "method": "ansible-playbook playbooks/site.yml, no kubeconfig (localkube already up; images built "
                  "beforehand and given as slurmkube_images, imported when missing), controller + login + 2 workers "
                  "of 1 CPU and an operator in a new namespace; then the same run again; then teardown.yml with "
                  "slurmkube_purge",
        "first_run_s": round(first_s, 1),
        "first_run_changed": first.get("changed"),
        "rerun_s": round(rerun_s, 1),
        "rerun_changed": rerun.get("changed"),
        "first_over_rerun": round(first_s / rerun_s, 2),
        "teardown_purge_s": round(teardown_s, 1),
    }
    (HERE / "site.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
