"""tools/apt-install.sh: our scripts' apt calls queue on one lock, so that the scripts a fresh
machine runs at once (each test lane's image build installing docker, the VM test's qemu,
debootstrap) do not fail on apt's and dpkg's locks, as a cold run's cgroup v2 module did.

apt-get is a stand-in on PATH that fails, as apt-get does, when another one is running (its own
marker file instead of dpkg's lock) and records each call; the script under test is the real one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from collection_path import REPO

APT_INSTALL = REPO / "tools/apt-install.sh"

# Fails at once while another call runs; `install` fails until `update` ran (no lists yet);
# `install` of the package "daemon" leaves a process behind, as docker.io's scripts start dockerd.
FAKE_APT_GET = """#!/usr/bin/env bash
set -u
if ! mkdir "$WORK/running" 2>/dev/null; then echo overlap >>"$WORK/calls"; exit 100; fi
words=" $* "
case "$words" in
  *" update "*) echo update >>"$WORK/calls"; touch "$WORK/lists" ;;
  *" install "*)
    if [[ ! -e $WORK/lists ]]; then echo install-without-lists >>"$WORK/calls"; rmdir "$WORK/running"; exit 100; fi
    echo "install ${*: -1}" >>"$WORK/calls"
    [[ $words == *" daemon "* ]] && { sleep 600 & echo $! >"$WORK/daemon.pid"; } ;;
esac
sleep 0.3
rmdir "$WORK/running"
"""


def stand_in(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(FAKE_APT_GET)
    (bin_dir / "apt-get").chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", WORK=str(tmp_path),
                SLURMKUBE_CACHE=str(tmp_path / "cache"))  # fmt: skip


def calls(tmp_path: Path) -> list:
    return (tmp_path / "calls").read_text().splitlines()


def test_three_scripts_installing_at_once_take_turns_and_all_succeed(tmp_path: Path):
    env = stand_in(tmp_path)
    runs = [subprocess.Popen(["bash", str(APT_INSTALL), "--no-install-recommends", package], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for package in ("docker.io", "qemu-system-x86", "debootstrap")]  # fmt: skip
    results = [(run.wait(timeout=60), run.stderr.read()) for run in runs]
    assert [rc for rc, _stderr in results] == [0, 0, 0], results
    made = calls(tmp_path)
    assert "overlap" not in made, made
    # The first one in found no lists: it updated them once, and the others installed at once.
    assert made.count("update") == 1, made
    assert sorted(line for line in made if line.startswith("install ")) == [
        "install debootstrap", "install docker.io", "install qemu-system-x86"], made


def test_a_daemon_a_package_starts_does_not_keep_the_queue(tmp_path: Path):
    env = stand_in(tmp_path)
    (tmp_path / "lists").touch()
    try:
        run = subprocess.run(["bash", str(APT_INSTALL), "daemon"], env=env, capture_output=True, text=True, timeout=60,
                             check=False)  # fmt: skip
        assert run.returncode == 0, run.stderr
        lock = tmp_path / "cache/apt.lock"
        assert subprocess.run(["flock", "-n", str(lock), "true"], check=False).returncode == 0, "the lock is held"
    finally:
        pid = tmp_path / "daemon.pid"
        if pid.exists():
            subprocess.run(["kill", pid.read_text().strip()], check=False)


def test_a_package_apt_cannot_install_fails_the_script(tmp_path: Path):
    env = stand_in(tmp_path)
    (tmp_path / "bin/apt-get").write_text("#!/bin/sh\necho 'E: Unable to locate package nosuch' >&2\nexit 100\n")
    run = subprocess.run(["bash", str(APT_INSTALL), "nosuch"], env=env, capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert run.returncode == 100 and "Unable to locate package nosuch" in run.stderr, run.stderr


def test_a_lists_update_alone_takes_its_turn_beside_an_install(tmp_path: Path):
    """--update (ensure-vm.sh and the registry test read the lists themselves) queues as installs do."""
    env = stand_in(tmp_path)
    runs = [subprocess.Popen(["bash", str(APT_INSTALL), *args], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for args in (["--update"], ["cpio"])]  # fmt: skip
    results = [(run.wait(timeout=60), run.stderr.read()) for run in runs]
    assert [rc for rc, _stderr in results] == [0, 0], results
    made = calls(tmp_path)
    assert "overlap" not in made and "install cpio" in made and made.count("update") >= 1, made
