"""tools/kind/pod-network.sh: a new kind cluster is up only once every node routes to every other
node's pod range and lists every range in kube-router's pod-subnets ipset; a kube-router that
never learnt a range (a quickstart's worker then waited 15 minutes for slurmctld, its traffic
masqueraded and refused by the other node's NetworkPolicies) is restarted once.

docker is a stand-in on PATH answering for three nodes (the node list, each node's ipset and
routes, the kube-router deletion); the functions under test are the real ones, sourced as kind.sh
sources them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from collection_path import REPO

RANGES = {"c-control-plane": "10.0.0.0/24", "c-worker": "10.0.1.0/24", "c-worker2": "10.0.2.0/24"}

# c-worker2's ipset lacks c-worker's range until its kube-router is deleted (when $HEALS), as the
# quickstart's did; every route is there.
FAKE_DOCKER = """#!/usr/bin/env bash
[[ $1 == exec ]] || { echo "unexpected docker $*" >>"$WORK/calls"; exit 3; }
shift; [[ $1 == -i ]] && shift
node=$1; shift
case "$*" in
  *"get nodes"*) printf 'c-control-plane 10.0.0.0/24\\nc-worker 10.0.1.0/24\\nc-worker2 10.0.2.0/24\\n' ;;
  *"delete pod"*) echo "$node: $*" >>"$WORK/calls"; [[ -n ${HEALS:-} ]] && touch "$WORK/restarted" ;;
  "ipset list kube-router-pod-subnets")
    echo "Name: kube-router-pod-subnets"; echo "Members:"
    for range in 10.0.0.0/24 10.0.1.0/24 10.0.2.0/24; do
      [[ $node == c-worker2 && $range == 10.0.1.0/24 && ! -e $WORK/restarted ]] && continue
      echo "$range timeout 0"
    done ;;
  "ip route show "*) echo "${*: -1} via 172.18.0.9 dev eth0" ;;
  *) echo "unexpected docker exec $node $*" >>"$WORK/calls"; exit 3 ;;
esac
"""


def wait(tmp_path: Path, seconds: int, heals: bool) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", WORK=str(tmp_path),
               SLURMKUBE_CACHE=str(tmp_path / "cache"), POD_NETWORK_RESTART_AFTER="1", POD_NETWORK_POLL_SECONDS="0.2")
    if heals:
        env["HEALS"] = "1"
    script = (f'set -euo pipefail; . "{REPO}/tools/kind/lib.sh"; . "{REPO}/tools/kind/pod-network.sh"; '
              f"wait_for_pod_network c {seconds}")
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)


def calls(tmp_path: Path) -> list:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_a_kube_router_missing_a_nodes_range_is_restarted_once_and_the_wait_ends_when_it_has_it(tmp_path: Path):
    run = wait(tmp_path, 20, heals=True)
    assert run.returncode == 0, run.stderr
    assert calls(tmp_path) == [
        "c-control-plane: kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system delete pod -l "
        "k8s-app=kube-router --field-selector spec.nodeName=c-worker2 --wait=false"]
    assert "c-worker2's kube-router lacks another node's pod range (route or ipset): restarting it" in run.stderr


def test_a_range_that_never_comes_fails_the_wait_naming_the_node_after_one_restart(tmp_path: Path):
    run = wait(tmp_path, 3, heals=False)
    assert run.returncode == 1, run.stderr
    assert "the pod network of c is incomplete on: c-worker2" in run.stderr
    assert len(calls(tmp_path)) == 1, calls(tmp_path)


def test_a_complete_network_is_up_at_once_with_nothing_restarted(tmp_path: Path):
    (tmp_path / "restarted").touch()
    run = wait(tmp_path, 20, heals=False)
    assert run.returncode == 0 and calls(tmp_path) == [], (run.stderr, calls(tmp_path))
