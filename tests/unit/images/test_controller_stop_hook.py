"""slurmctld's preStop hook serves until connections stop reaching the pod.

The hook (images/common/slurmkube-controller-stop) lets slurmctld serve after the pod said it is
not ready, until the Service has dropped the pod: at least MIN seconds, then until no connection
came in for QUIET seconds, at most MAX. It counts connections with the kernel's TCP PassiveOpens
of the pod's network namespace. Here its waiting function runs in a network namespace of its own
with a real listener and a real client on loopback, standing for a Service that still routes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from collection_path import REPO

HOOK = REPO / "images/common/slurmkube-controller-stop"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
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


def test_the_hook_serves_while_connections_still_arrive_then_until_quiet():
    waited, last = wait_while_clients_connect(connect_for=4, min_s=1, quiet=2, max_s=30)
    assert 3.5 <= last <= 5.5  # it saw the client's connections to their end, not just MIN
    assert last + 2 <= waited <= last + 5


def test_the_hook_waits_its_minimum_when_nobody_connects():
    waited, last = wait_while_clients_connect(connect_for=0, min_s=3, quiet=1, max_s=30)
    assert last == 0 and 3 <= waited <= 6


def test_the_hook_stops_waiting_at_its_maximum():
    waited, last = wait_while_clients_connect(connect_for=20, min_s=1, quiet=2, max_s=4)
    assert 4 <= waited <= 7 and last >= 3
