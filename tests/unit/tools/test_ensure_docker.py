"""images/ensure-docker.sh starts dockerd holding none of its caller's descriptors.

Our builds hold their locks on open descriptors (images/build.sh, tools/kind/node-image.sh,
kind.sh) and may be the first to need docker. A dockerd started with the lock's descriptor keeps
the lock for as long as it runs: CI timed out so (issue 18), every kind test waiting an hour
for the node image's lock after the node image build beside the tests had started the daemon.
Here dockerd, docker and pgrep are stand-ins on PATH (no daemon is running, the stand-in
answers once started); the script under test is the real one.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from collection_path import REPO

ENSURE_DOCKER = REPO / "images/ensure-docker.sh"

# Records what it holds open, then runs as a daemon does.
FAKE_DOCKERD = """#!/usr/bin/env bash
for fd in /proc/$$/fd/*; do readlink "$fd"; done >"$WORK/dockerd.fds"
echo $$ >"$WORK/dockerd.pid"
exec sleep 600
"""
FAKE_DOCKER = """#!/usr/bin/env bash
[[ $1 == info && -s $WORK/dockerd.pid ]]
"""
FAKE_PGREP = "#!/bin/sh\nexit 1\n"


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def test_dockerd_started_under_a_callers_lock_does_not_hold_it(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    for name, text in (("dockerd", FAKE_DOCKERD), ("docker", FAKE_DOCKER), ("pgrep", FAKE_PGREP)):
        executable(bin_dir / name, text)
    lock = tmp_path / "build.lock"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", WORK=str(tmp_path),
               SLURMKUBE_CACHE=str(tmp_path / "cache"))  # fmt: skip
    # The caller as node-image.sh is: its lock on descriptor 9, taken before docker is needed.
    caller = f'exec 9>"{lock}"; flock 9; exec bash "{ENSURE_DOCKER}"'
    try:
        run = subprocess.run(["bash", "-c", caller], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 0, run.stderr
        daemon_pid = int((tmp_path / "dockerd.pid").read_text())
        os.kill(daemon_pid, 0)  # still running, as dockerd would be
        held = (tmp_path / "dockerd.fds").read_text().splitlines()
        assert str(lock) not in held, held
        assert subprocess.run(["flock", "-n", str(lock), "true"], check=False).returncode == 0, "the lock is held"
        assert str(tmp_path / "cache/dockerd.log") in held, held
    finally:
        pid_file = tmp_path / "dockerd.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


# pgrep -x dockerd as the real one answers: whether the stand-in daemon runs.
FAKE_PGREP_DOCKERD = """#!/usr/bin/env bash
[[ -s $WORK/dockerd.pid ]] && kill -0 "$(cat "$WORK/dockerd.pid")" 2>/dev/null
"""
# Counts its starts, and answers only after a while, as a daemon starting up does.
FAKE_SLOW_DOCKERD = """#!/usr/bin/env bash
echo started >>"$WORK/dockerd.starts"
sleep 2
echo $$ >"$WORK/dockerd.pid"
exec sleep 600
"""


def test_two_callers_at_once_start_one_daemon(tmp_path: Path):
    """Both test lanes' image builds need docker at the same moment on a fresh machine."""
    bin_dir = tmp_path / "bin"
    for name, text in (("dockerd", FAKE_SLOW_DOCKERD), ("docker", FAKE_DOCKER), ("pgrep", FAKE_PGREP_DOCKERD)):
        executable(bin_dir / name, text)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", WORK=str(tmp_path),
               SLURMKUBE_CACHE=str(tmp_path / "cache"))  # fmt: skip
    try:
        runs = [subprocess.Popen(["bash", str(ENSURE_DOCKER)], env=env, stderr=subprocess.PIPE, text=True)
                for _caller in range(2)]  # fmt: skip
        results = [(run.wait(timeout=90), run.stderr.read()) for run in runs]
        assert [rc for rc, _stderr in results] == [0, 0], results
        assert (tmp_path / "dockerd.starts").read_text().splitlines() == ["started"]
    finally:
        pid_file = tmp_path / "dockerd.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
