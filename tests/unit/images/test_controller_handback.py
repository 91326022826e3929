"""A primary slurmctld that starts while a backup serves first stops that backup, and starts once
the backup answers no more as the one in control (images/common/roles/controller,
relieve_serving_backup): the backup then saves its state before the primary reads it, instead
of at the moment it does (Slurm 26.05's REQUEST_CONTROL; the role file says why).

Here the backup is a local HTTP server answering GET /readyz as slurmctld does (200 in control,
503 standing by), `scontrol` a stand-in that records what it was asked and makes the backup stop
serving, as `scontrol shutdown slurmctld` does. Real controllers: tests/k8s/test_controller_failover.py.
"""

from __future__ import annotations

import http.server
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from collection_path import REPO

ROLE = REPO / "images/common/roles/controller"
LIBRARY = REPO / "images/common/lib/slurm.sh"


def function(path: Path, name: str) -> str:
    """One shell function of PATH, as text (sourcing the role would run it)."""
    lines = path.read_text().splitlines()
    start = lines.index("%s() {" % name)
    end = lines.index("}", start)
    return "\n".join(lines[start:end + 1]) + "\n"


class Backup(http.server.ThreadingHTTPServer):
    """A backup slurmctld's /readyz: UNREACHABLE answers never given first (a network not up yet),
    then 200 while it serves; once SHUTDOWN exists, SILENT answers never given (one stopping), then
    503 (standing by again)."""

    def __init__(self, serving: bool, shutdown: Path, silent: int = 0, unreachable: int = 0):
        self.serving, self.shutdown_file, self.silent = serving, shutdown, silent
        self.unreachable = unreachable
        self.asked: List[int] = []
        super().__init__(("127.0.0.1", 0), Answer)


class Answer(http.server.BaseHTTPRequestHandler):
    server: Backup

    def do_GET(self) -> None:
        backup = self.server
        stopped = backup.shutdown_file.exists()
        if backup.unreachable > 0 or (stopped and backup.silent > 0):
            if backup.unreachable > 0:
                backup.unreachable -= 1
            else:
                backup.silent -= 1
            time.sleep(4)  # past readyz_of's 3 s: "none"
            return
        code = 200 if backup.serving and not stopped else 503
        backup.asked.append(code)
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def backup_server(request, tmp_path: Path) -> Iterator[Backup]:
    serving, silent, unreachable = (*request.param, 0)[:3]
    server = Backup(serving, tmp_path / "shutdown-asked", silent, unreachable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def relieve(tmp_path: Path, me: str, backup: Backup, with_backup: bool = True,
            release: str = "26.05.5-1") -> subprocess.CompletedProcess:
    """relieve_serving_backup as pod ME of a cluster whose controllers are primary and, WITH_BACKUP,
    backup (at BACKUP's address)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hpc\nSlurmctldHost=primary(127.0.0.2)\n%sSlurmctldPort=%d\n"
                    "SlurmctldAddr=hpc-controller.ns.svc\n"
                    % ("SlurmctldHost=backup(127.0.0.1)\n" if with_backup else "", backup.server_address[1]))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_ins = {"hostname": "echo %s" % me,
                 "scontrol": 'echo "$*" >>%s' % shlex.quote(str(backup.shutdown_file))}
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/bin/bash\n%s\n" % body)
        (bin_dir / name).chmod(0o755)
    functions = ("controller_hosts", "backup_addresses", "readyz_of", "relieve_serving_backup")
    script = ('SLURM_CONF=%s SLURMCTLD_PORT=6817\nlog() { echo "LOG $*"; }\n' % shlex.quote(str(conf))
              + function(LIBRARY, "slurm_conf_value") + "".join(function(ROLE, name) for name in functions)
              + "relieve_serving_backup\n")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120,
                          check=False, env=dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]),
                                                SLURMKUBE_SLURM_RELEASE=release))


@pytest.mark.parametrize("backup_server", [(True, 1)], indirect=True)
def test_a_primary_stops_a_serving_backup_and_waits_until_it_no_longer_serves(tmp_path, backup_server):
    done = relieve(tmp_path, "primary", backup_server)
    assert done.returncode == 0, done.stderr
    assert backup_server.shutdown_file.read_text().split("\n") == ["shutdown slurmctld", ""]
    # Asked while it served, then it stopped answering (saving), then it stood by: the wait ended.
    assert backup_server.asked == [200, 503], done.stdout
    assert "backup 127.0.0.1 serves: stopping it" in done.stdout
    assert "backup 127.0.0.1: 503 after 1 s" in done.stdout, done.stdout


@pytest.mark.parametrize("backup_server", [(True, 0, 1)], indirect=True)
def test_a_primary_that_cannot_reach_a_backup_yet_asks_again_before_it_decides(tmp_path, backup_server):
    done = relieve(tmp_path, "primary", backup_server)
    assert done.returncode == 0, done.stderr
    assert backup_server.asked == [200, 503], done.stdout
    assert backup_server.shutdown_file.read_text() == "shutdown slurmctld\n"


@pytest.mark.parametrize("backup_server", [(False, 0)], indirect=True)
def test_a_primary_leaves_a_standing_by_backup_alone(tmp_path, backup_server):
    done = relieve(tmp_path, "primary", backup_server)
    assert done.returncode == 0, done.stderr
    assert not backup_server.shutdown_file.exists() and backup_server.asked == [503]
    assert "stopping" not in done.stdout and "LOG backup 127.0.0.1: 503" in done.stdout


@pytest.mark.parametrize("backup_server", [(True, 0)], indirect=True)
def test_a_backup_that_starts_asks_nothing(tmp_path, backup_server):
    done = relieve(tmp_path, "backup", backup_server)
    assert done.returncode == 0, done.stderr
    assert not backup_server.shutdown_file.exists() and backup_server.asked == []


@pytest.mark.parametrize("backup_server", [(True, 0)], indirect=True)
def test_a_lone_controller_asks_nothing(tmp_path, backup_server):
    done = relieve(tmp_path, "primary", backup_server, with_backup=False)
    assert done.returncode == 0, done.stderr
    assert not backup_server.shutdown_file.exists() and backup_server.asked == []


@pytest.mark.parametrize("backup_server", [(True, 0)], indirect=True)
def test_a_24_11_primary_asks_nothing_its_backup_could_not_answer(tmp_path, backup_server):
    done = relieve(tmp_path, "primary", backup_server, release="24.11.5-1")
    assert done.returncode == 0, done.stderr
    assert not backup_server.shutdown_file.exists() and backup_server.asked == []
