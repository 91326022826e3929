"""An S3-compatible endpoint on this machine for the backup tests: VersityGW (an S3 gateway over a
directory, Apache-2.0), built from the Go module proxy once per version into the cache, serving on
the kind network's gateway (which pods reach through their node) with one access key: a request
not signed with its secret is refused, as a site's object store would. Debian's rclone is built
without its S3 server, and no object store is packaged."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

from registry_helpers import free_port, kind_gateway

VERSITYGW = "github.com/versity/versitygw/cmd/versitygw"
VERSITYGW_VERSION = "v1.8.0"


class S3(NamedTuple):
    host: str
    port: int
    access_key: str
    secret_key: str
    data: Path  # where the store keeps the buckets, a directory each

    def repository(self, bucket: str, path: str) -> str:
        """restic's URL of a repository at BUCKET/PATH."""
        return "s3:http://%s:%d/%s/%s" % (self.host, self.port, bucket, path)


def versitygw_program() -> Path:
    """The gateway's program, built on first use (minutes: its modules come from the proxy)."""
    cache = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "versitygw" / VERSITYGW_VERSION
    program = cache / "versitygw"
    if not program.exists():
        cache.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, GOBIN=str(cache), GOFLAGS="-buildvcs=false -modcacherw", CGO_ENABLED="0")
        built = subprocess.run(["go", "install", "%s@%s" % (VERSITYGW, VERSITYGW_VERSION)], env=env,
                               capture_output=True, text=True, timeout=1800, check=False)  # fmt: skip
        assert built.returncode == 0, "go install %s failed: %s" % (VERSITYGW, built.stderr[-3000:])
    return program


@contextmanager
def serving(work: Path, bucket: str) -> Iterator[S3]:
    """The gateway up over WORK/data, with BUCKET made, while the block runs. A site makes its
    bucket: restic makes a missing one at `init` only, and its first look (`cat config`) at a
    store that answers a missing bucket's location with 404 retries for minutes instead."""
    program = versitygw_program()
    host = kind_gateway()
    s3 = S3(host, free_port(host), "slurmkube" + secrets.token_hex(4), secrets.token_urlsafe(24), work / "data")
    (s3.data / bucket).mkdir(parents=True, exist_ok=True)
    log = open(work / "versitygw.log", "w")  # noqa: SIM115  # open while the gateway runs
    process = subprocess.Popen([str(program), "--access", s3.access_key, "--secret", s3.secret_key,
                                "--port", "%s:%d" % (host, s3.port), "posix", str(s3.data)],
                               stdout=log, stderr=log)  # fmt: skip
    try:
        wait_until_listening(s3, process, work)
        yield s3
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def wait_until_listening(s3: S3, process: subprocess.Popen, work: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("versitygw ended: " + (work / "versitygw.log").read_text()[-3000:])
        try:
            with socket.create_connection((s3.host, s3.port), timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("versitygw did not listen in 30 s: " + (work / "versitygw.log").read_text()[-3000:])
