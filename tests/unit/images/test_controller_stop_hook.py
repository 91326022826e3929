"""slurmctld's preStop hook serves until connections stop reaching the pod, or hands control to a
backup.

The hook (images/common/slurmkube-controller-stop) lets slurmctld serve after the pod said it is
not ready, until the Service has dropped the pod: at least MIN seconds, then until no connection
came in for QUIET seconds, at most MAX. It counts connections with the kernel's TCP PassiveOpens
of the pod's network namespace. Here its waiting function runs in a network namespace of its own
with a real listener and a real client on loopback, standing for a Service that still routes.

Its choice of a backup to hand over to reads `scontrol ping`; here a stand-in prints what Slurm
26.05's scontrol prints (src/scontrol/scontrol.c) and records the takeover asked. Whether its
slurmctld serves it asks GET /readyz; here of local HTTP servers answering as a serving and a
standing-by slurmctld do, and of one that closes the connection as 24.11's does. The hand-over
itself, with real controllers, is in tests/k8s/test_controller_failover.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import Optional

import pytest
from collection_path import REPO

HOOK = REPO / "images/common/slurmkube-controller-stop"

needs_a_network_namespace = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
    reason="needs root, unshare and ip for a network namespace")


def hook_function(name: str) -> str:
    """One function of the hook, as text (sourcing the script would run it)."""
    lines = HOOK.read_text().splitlines()
    start = lines.index("%s() {" % name)
    end = lines.index("}", start)
    return "\n".join(lines[start:end + 1]) + "\n"


def wait_while_clients_connect(connect_for: float, min_s: int, quiet: int, max_s: int) -> tuple[float, float]:
    """Runs wait_until_unrouted while a client connects every 0.2 s for `connect_for` seconds;
    returns (waited, last connection) as the function printed them."""
    script = hook_function("accepted_connections") + hook_function("wait_until_unrouted") + (
        "ip link set lo up\n"
        "python3 -c 'import socket; s = socket.create_server((\"127.0.0.1\", 6817)); "
        "[s.accept()[0].close() for _ in iter(int, 1)]' &\n"
        "until (exec 3<>/dev/tcp/127.0.0.1/6817) 2>/dev/null; do sleep 0.05; done\n"
        "end=$(awk -v t=\"$(date +%%s.%%N)\" 'BEGIN { printf \"%%.3f\", t + %s }')\n"
        "( while awk -v t=\"$(date +%%s.%%N)\" -v e=\"$end\" 'BEGIN { exit !(t < e) }'; do\n"
        "    (exec 3<>/dev/tcp/127.0.0.1/6817); sleep 0.2; done ) &\n"
        "wait_until_unrouted %d %d %d\n"
        "kill %%1 %%2 2>/dev/null; wait\n" % (connect_for, min_s, quiet, max_s))
    out = subprocess.run(["unshare", "--net", "bash", "-euo", "pipefail", "-c", script], capture_output=True,
                         text=True, timeout=120, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    found = re.search(r"waited ([\d.]+) s; the last connection came ([\d.]+) s in", out.stdout)
    assert found, out.stdout + out.stderr
    return float(found.group(1)), float(found.group(2))


@needs_a_network_namespace
def test_the_hook_serves_while_connections_still_arrive_then_until_quiet():
    waited, last = wait_while_clients_connect(connect_for=4, min_s=1, quiet=2, max_s=30)
    assert 3.5 <= last <= 5.5  # it saw the client's connections to their end, not just MIN
    assert last + 2 <= waited <= last + 5


@needs_a_network_namespace
def test_the_hook_waits_its_minimum_when_nobody_connects():
    waited, last = wait_while_clients_connect(connect_for=0, min_s=3, quiet=1, max_s=30)
    assert last == 0 and 3 <= waited <= 6


@needs_a_network_namespace
def test_the_hook_stops_waiting_at_its_maximum():
    waited, last = wait_while_clients_connect(connect_for=20, min_s=1, quiet=2, max_s=4)
    assert 4 <= waited <= 7 and last >= 3


def hand_over(tmp_path: Path, me: str, serving: bool, ping: str, takeover_rc: int = 0) -> tuple[int, str, str]:
    """Runs hand_over as pod ME whose slurmctld serves or not, `scontrol ping` printing PING;
    returns (exit status, what it printed, the takeovers asked)."""
    bin_dir, asked = tmp_path / "bin", tmp_path / "asked"
    bin_dir.mkdir(exist_ok=True)
    asked.write_text("")
    stand_ins = {
        "hostname": "echo %s" % me,
        "sleep": ":",
        "scontrol": 'case $1 in ping) printf "%%s" %s;; takeover) echo "$2" >>%s; exit %d;; esac'
                    % (shlex.quote(ping), asked, takeover_rc),
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/bin/bash\n%s\n" % body)
        (bin_dir / name).chmod(0o755)
    serves = "serves() { [[ $1 == 6817 ]] && %s; }\n" % ("true" if serving else "false")
    script = serves + hook_function("backup_up") + hook_function("hand_over_target") + hook_function("hand_over") + (
        'rc=0; out=$(hand_over 4 6817) || rc=$?; printf "%s\\n%s\\n" "$rc" "$out"\n')
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=30,
                          check=False, env=dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"])))
    assert done.returncode == 0, done.stderr
    rc, printed = done.stdout.splitlines()[:2]
    return int(rc), printed, " ".join(asked.read_text().split())


def pings(*states: str) -> str:
    modes = ["primary", "backup"] if len(states) == 2 else ["primary"] + ["backup%d" % i for i in range(1, 3)]
    return "".join("Slurmctld(%s) at hpc-controller-%d is %s\n" % (modes[i], i, state)
                   for i, state in enumerate(states))


def test_the_serving_primary_hands_control_to_the_backup_that_answers(tmp_path: Path):
    rc, printed, asked = hand_over(tmp_path, "hpc-controller-0", True, pings("UP", "UP"))
    assert (rc, asked) == (0, "1") and "SlurmctldHost[1]" in printed
    rc, _printed, asked = hand_over(tmp_path, "hpc-controller-0", True, pings("UP", "DOWN", "UP"))
    assert (rc, asked) == (0, "2")


def test_a_serving_backup_hands_control_to_another_backup_never_to_itself(tmp_path: Path):
    rc, _printed, asked = hand_over(tmp_path, "hpc-controller-1", True, pings("DOWN", "UP", "UP"))
    assert (rc, asked) == (0, "2")
    rc, _printed, asked = hand_over(tmp_path, "hpc-controller-1", True, pings("UP", "UP"))
    assert (rc, asked) == (1, "")


def test_no_hand_over_from_a_standby_without_a_backup_up_or_when_refused(tmp_path: Path):
    assert hand_over(tmp_path, "hpc-controller-1", False, pings("UP", "UP"))[::2] == (1, "")
    assert hand_over(tmp_path, "hpc-controller-0", True, pings("UP", "DOWN"))[::2] == (1, "")
    assert hand_over(tmp_path, "hpc-controller-0", True, pings("UP"))[::2] == (1, "")
    rc, printed, asked = hand_over(tmp_path, "hpc-controller-0", True, pings("UP", "UP"), takeover_rc=1)
    assert (rc, printed, asked) == (1, "", "1")


def behind(answer: bytes, argv: list, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """Runs ARGV (its last word: the port) while a local port answers one request with ANSWER
    (b"": it closes the connection)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def answer_once() -> None:
            conn, _address = server.accept()
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:  # bash writes the request line by line
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                conn.sendall(answer)

        thread = threading.Thread(target=answer_once)
        thread.start()
        done = subprocess.run(argv + [str(port)], capture_output=True, text=True, timeout=30, check=False, env=env)
        thread.join(timeout=10)
    return done


def serves_behind(answer: bytes) -> bool:
    """Whether `serves` says a slurmctld serves when its port answers ANSWER."""
    return behind(answer, ["bash", "-euo", "pipefail", "-c", hook_function("serves") + 'serves "$0"']).returncode == 0


def test_only_a_controller_answering_readyz_2xx_serves():
    assert serves_behind(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert not serves_behind(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
    assert not serves_behind(b"")


def test_the_operator_is_told_which_backup_a_serving_controller_would_hand_over_to(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"hostname": "echo hpc-controller-0",
                       "scontrol": 'printf "%s" ' + shlex.quote(pings("UP", "UP"))}.items():
        (bin_dir / name).write_text("#!/bin/bash\n%s\n" % body)
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    ok, standby = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 503 x\r\nContent-Length: 0\r\n\r\n"
    serving = behind(ok, [str(HOOK), "--hand-over-to"], env)
    assert (serving.returncode, serving.stdout) == (0, "1\n"), serving.stderr
    assert behind(standby, [str(HOOK), "--hand-over-to"], env).returncode == 1
