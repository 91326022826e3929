"""slurmctld's and slurmd's readiness probe (images/common/slurmkube-ready PORT).

Slurm 25.11 and later answer HTTP on the daemon's port: the probe is ready when GET /readyz
says 2xx (Slurm's 204 when ready, 500 when not). A Slurm before 25.11 has no HTTP server: ready
when the port takes a connection. Here it runs in a network namespace of its own against a real
listener on loopback: an HTTP server answering as slurmctld does, or one that speaks no HTTP.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from collection_path import REPO

PROBE = REPO / "images/common/slurmkube-ready"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
                                reason="needs root, unshare and ip for a network namespace")

# An HTTP/1.1 server on 127.0.0.1:6817 answering every GET with STATUS and no body, as slurmctld's
# /readyz does; it records the request line it got in the file REQUEST_LINE names.
HTTP_SERVER = """
import http.server, os, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        open(os.environ["REQUEST_LINE"], "w").write(self.requestline)
        self.send_response(int(sys.argv[1])); self.send_header("Content-Length", "0"); self.end_headers()
http.server.HTTPServer(("127.0.0.1", 6817), Handler).serve_forever()
"""
# A listener that speaks no HTTP: it closes every connection at once (a pre-25.11 daemon reads
# an RPC header and drops what is not one).
SILENT_SERVER = ("import socket; s = socket.create_server((\"127.0.0.1\", 6817)); "
                 "[s.accept()[0].close() for _ in iter(int, 1)]")


def probe(server: str, release: str, *server_args: str) -> tuple[int, str]:
    """The probe's exit status with SERVER listening (or nothing, when empty) and the request
    line the HTTP server saw."""
    with tempfile.TemporaryDirectory() as tmp:
        return probe_in(Path(tmp) / "request-line", server, release, *server_args)


def probe_in(request_line: Path, server: str, release: str, *server_args: str) -> tuple[int, str]:
    start = "python3 -c %s %s &\nuntil (exec 3<>/dev/tcp/127.0.0.1/6817) 2>/dev/null; do sleep 0.05; done\n" % (
        _quote(server), " ".join(server_args)) if server else ""
    script = ("ip link set lo up\nexport REQUEST_LINE=%s\n" % request_line + start +
              "set +e; SLURMKUBE_SLURM_RELEASE=%s %s 6817; echo \"rc=$?\"\n"
              "cat \"$REQUEST_LINE\" 2>/dev/null; kill %%1 2>/dev/null; wait\n" % (release, PROBE))
    out = subprocess.run(["unshare", "--net", "bash", "-euo", "pipefail", "-c", script], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    status = next(int(line[3:]) for line in lines if line.startswith("rc="))
    return status, "\n".join(line for line in lines if not line.startswith("rc="))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_a_current_slurm_is_ready_when_readyz_says_so():
    status, request = probe(HTTP_SERVER, "26.05.5-1", "204")
    assert status == 0
    assert request == "GET /readyz HTTP/1.1"


def test_a_current_slurm_that_answers_not_ready_is_not_ready():
    assert probe(HTTP_SERVER, "26.05.5-1", "500")[0] != 0


def test_a_current_slurm_that_speaks_no_http_is_not_ready():
    assert probe(SILENT_SERVER, "25.11.8-1")[0] != 0


def test_a_slurm_before_25_11_is_ready_once_its_port_takes_a_connection():
    assert probe(SILENT_SERVER, "24.11.5-1")[0] == 0


def test_nothing_listening_is_never_ready():
    assert probe("", "26.05.5-1")[0] != 0
    assert probe("", "24.11.5-1")[0] != 0


def test_an_image_that_does_not_say_its_release_is_not_ready():
    assert probe(HTTP_SERVER, "", "204")[0] != 0
