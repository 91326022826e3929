"""A registry on this machine: the distribution registry Debian packages (docker-registry),
unpacked, not installed (no service of its own starts). registry_program is test_kind's too;
serving runs it as a site's: over TLS with a certificate from a CA of its own, behind a login
(htpasswd), on the kind network's gateway, which the kind nodes and docker both reach."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from base64 import b64encode
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

DOCKER_CERTS = Path("/etc/docker/certs.d")
APT_INSTALL = Path(__file__).resolve().parents[2] / "tools" / "apt-install.sh"


class Registry(NamedTuple):
    address: str  # host:port
    user: str
    password: str
    ca: Path

    def get(self, path: str, login: bool) -> tuple:
        """(HTTP status, body) of GET https://ADDRESS/v2/PATH, with the login or without; the
        certificate checked against the registry's CA."""
        request = urllib.request.Request("https://%s/v2/%s" % (self.address, path))
        if login:
            token = b64encode(("%s:%s" % (self.user, self.password)).encode()).decode()
            request.add_header("Authorization", "Basic " + token)
        try:
            with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(self.ca)),
                                        timeout=10) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as refused:
            return refused.code, b""

    def tags(self, repository: str) -> list:
        status, body = self.get(repository + "/tags/list", login=True)
        assert status == 200, status
        return json.loads(body)["tags"]


def apt_download(package: str, cwd: Path) -> None:
    """PACKAGE's .deb into CWD; when that fails, again after apt-get update (a fresh machine's
    lists), queued with our other apt calls (tools/apt-install.sh says why)."""
    command = ["apt-get", "download", "-qq", package]
    if subprocess.run(command, cwd=cwd, capture_output=True, timeout=600, check=False).returncode != 0:
        subprocess.run(["bash", str(APT_INSTALL), "--update"], check=True, capture_output=True, timeout=2400)
        subprocess.run(command, cwd=cwd, check=True, capture_output=True, timeout=600)


def registry_program(base: Path) -> Path:
    """Debian's docker-registry, downloaded and unpacked under BASE: the program's path."""
    apt_download("docker-registry", base)
    (deb,) = base.glob("docker-registry_*.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(base / "root")], check=True, timeout=60)
    return base / "root/usr/bin/docker-registry"


def htpasswd_line(user: str, password: str) -> str:
    """USER's line of an htpasswd file, bcrypt (the registry takes no other): apache2-utils' htpasswd,
    installed when missing (a program and two libraries, no service)."""
    if not shutil.which("htpasswd"):
        subprocess.run(["bash", str(APT_INSTALL), "--no-install-recommends", "apache2-utils"], check=True,
                       capture_output=True, timeout=2400)  # fmt: skip
    return subprocess.run(["htpasswd", "-Bbn", user, password], check=True, capture_output=True, text=True,
                          timeout=60).stdout


def kind_gateway() -> str:
    """The kind network's IPv4 gateway: this machine's address on the nodes' network."""
    network = json.loads(subprocess.run(["docker", "network", "inspect", "kind"], check=True, capture_output=True,
                                        text=True, timeout=60).stdout)[0]
    return next(c["Gateway"] for c in network["IPAM"]["Config"] if "." in c.get("Gateway", ""))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def certificates(work: Path, host: str) -> None:
    """ca.crt, and registry.crt/.key for HOST (an IP address) signed by it."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True, timeout=120)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=slurmkube test registry CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "registry.key", "-out", "registry.csr",
            "-subj", "/CN=" + host)
    (work / "san.ext").write_text("subjectAltName=IP:%s\n" % host)
    openssl("x509", "-req", "-in", "registry.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "registry.crt", "-days", "2", "-extfile", "san.ext")


def config(work: Path, address: str) -> Path:
    path = work / "config.yml"
    path.write_text(json.dumps({
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(work / "data")}},
        "http": {"addr": address, "tls": {"certificate": str(work / "registry.crt"),
                                          "key": str(work / "registry.key")}},
        "auth": {"htpasswd": {"realm": "slurmkube-test", "path": str(work / "htpasswd")}},
    }))  # JSON is YAML
    return path


@contextmanager
def serving(work: Path) -> Iterator[Registry]:
    """The registry up (and trusted by docker) while the block runs."""
    program = registry_program(work)
    host = kind_gateway()
    address = "%s:%d" % (host, free_port(host))
    certificates(work, host)
    user, password = "slurmkube", secrets.token_urlsafe(16)
    (work / "htpasswd").write_text(htpasswd_line(user, password))
    trust = DOCKER_CERTS / address
    trust.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "ca.crt", trust / "ca.crt")
    log = open(work / "registry.log", "w")  # noqa: SIM115  # open while the registry runs
    process = subprocess.Popen([str(program), "serve", str(config(work, address))], stdout=log, stderr=log)
    registry = Registry(address, user, password, work / "ca.crt")
    try:
        wait_until_answering(registry, process, work)
        yield registry
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(trust, ignore_errors=True)


def wait_until_answering(registry: Registry, process: subprocess.Popen, work: Path) -> None:
    deadline = time.monotonic() + 30
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("docker-registry ended: " + (work / "registry.log").read_text()[-3000:])
        try:
            if registry.get("", login=False)[0] == 401:
                return
        except OSError as error:
            last = error
        time.sleep(0.5)
    raise AssertionError("the registry did not answer in 30 s (%s): %s" % (last, (work / "registry.log").read_text()))
