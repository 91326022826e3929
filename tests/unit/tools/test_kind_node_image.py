"""tools/kind/kind.sh's node image: upstream's kindest/node when docker can pull it, else the one
node-image.sh builds here. On a host without a registry the refused pull took 72 s in CI (its
lookups retried), and the quickstart, which promises a line from kind.sh at least once a minute
while the cluster is made, printed nothing in that time. The pull now runs under progress_run.

docker is a stand-in on PATH (no image here; a pull that is refused after a while, or one that
works); node-image.sh is a stand-in (KIND_HERE points at it) that prints the name of the image it
"built". The function is the real one, sourced from kind.sh.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from collection_path import REPO

UPSTREAM = "kindest/node:v9.9.9"

FAKE_DOCKER = """#!/usr/bin/env bash
case "$1" in
  image) exit 1 ;;
  pull) sleep "$PULL_SECONDS"; [[ -n ${PULL_WORKS:-} ]] && exit 0
        echo "Error response from daemon: Get https://registry-1.docker.io/v2/: dial tcp: lookup failed" >&2; exit 1 ;;
  *) echo "unexpected docker $*" >&2; exit 3 ;;
esac
"""


def node_image(tmp_path: Path, pull_seconds: float, pull_works: bool) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    here = tmp_path / "kind"
    here.mkdir(exist_ok=True)
    (here / "node-image.sh").write_text("echo slurmkube/kind-node:built-here\n")
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURMKUBE_CACHE=str(tmp_path / "cache"),
               SLURMKUBE_KIND_UPSTREAM_NODE_IMAGE=UPSTREAM, PULL_SECONDS=str(pull_seconds), PROGRESS_SECONDS="1")
    if pull_works:
        env["PULL_WORKS"] = "1"
    script = f'set -euo pipefail; . "{REPO}/tools/kind/kind.sh"; KIND_HERE="{here}"; node_image'
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_slow_refused_pull_is_reported_each_interval_and_the_image_is_built_here(tmp_path: Path):
    got = node_image(tmp_path, pull_seconds=3.5, pull_works=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "slurmkube/kind-node:built-here", got.stdout
    heartbeats = re.findall(r"^\[kind \d\d:\d\d:\d\d\] pulling %s: 0 min 0\d s so far" % re.escape(UPSTREAM),
                            got.stderr, flags=re.M)  # fmt: skip
    assert len(heartbeats) >= 2, got.stderr
    assert "lookup failed" in got.stderr, got.stderr  # why, from docker's own words
    assert re.search(r"^\[kind [\d:]+\] cannot pull %s: the node image is built here" % re.escape(UPSTREAM),
                     got.stderr, flags=re.M), got.stderr  # fmt: skip


def test_a_pull_that_works_uses_upstreams_image(tmp_path: Path):
    got = node_image(tmp_path, pull_seconds=0, pull_works=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == UPSTREAM, got.stdout
    assert "cannot pull" not in got.stderr, got.stderr
