"""A real directory for the directory-user tests (spec.directory): Debian's OpenLDAP server
(images/directory) holding users and groups in the RFC 2307 schema, TLS with a certificate from a
CA of the test's own, an account SSSD binds as, and anonymous reads refused, as a site's is. The
docker tier runs it as a container, the kind tier as a pod; both give it the files written here."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List, NamedTuple, Sequence, Tuple

SUFFIX = "dc=hpc,dc=example"
PEOPLE, GROUPS = "ou=people," + SUFFIX, "ou=groups," + SUFFIX
READER_DN = "cn=sssd,ou=services," + SUFFIX
# Where the server's files are mounted in its container.
FILES_DIR = "/etc/slurmkube-test-directory"
CONFIG, DATA = "slapd.conf", "data.ldif"
CA, CERTIFICATE, KEY = "ca.crt", "server.crt", "server.key"


class User(NamedTuple):
    name: str
    uid: int
    gid: int
    password: str


class Group(NamedTuple):
    name: str
    gid: int
    members: Tuple[str, ...]


# Names no test cluster's jail holds (jail_user's alice would come first: files before sss).
DANA, ELI, FAY, GIL = "dana", "eli", "fay", "gil"


def users(password_of: Dict[str, str]) -> Tuple[User, ...]:
    """dana, eli and gil of group physics, dana also in chemistry; fay's uid is below the cluster's
    minimum (SSSD must not resolve her: a directory uid must never become a system account's)."""
    return (User(DANA, 5001, 5000, password_of[DANA]), User(ELI, 5002, 5000, password_of[ELI]),
            User(FAY, 900, 5000, password_of[FAY]), User(GIL, 5003, 5000, password_of[GIL]))  # fmt: skip


GROUPS_OF_SITE = (Group("physics", 5000, (DANA, ELI, GIL)), Group("chemistry", 5100, (DANA,)))


def slapd_config(admin_password: str) -> str:
    """slapd.conf: the schemas users need, one MDB database, TLS, and who reads what."""
    return "\n".join([
        *("include /etc/ldap/schema/%s.schema" % s for s in ("core", "cosine", "nis", "inetorgperson")),
        "modulepath /usr/lib/ldap",
        "moduleload back_mdb",
        "pidfile /tmp/slapd.pid",
        "TLSCACertificateFile %s/%s" % (FILES_DIR, CA),
        "TLSCertificateFile %s/%s" % (FILES_DIR, CERTIFICATE),
        "TLSCertificateKeyFile %s/%s" % (FILES_DIR, KEY),
        "database mdb",
        "maxsize 16777216",
        'suffix "%s"' % SUFFIX,
        'rootdn "cn=admin,%s"' % SUFFIX,
        "rootpw %s" % admin_password,
        "directory /var/lib/ldap",
        "access to attrs=userPassword by anonymous auth by self write by * none",
        'access to * by dn.exact="%s" read by self read by * none' % READER_DN,
    ]) + "\n"


def entries(site_users: Sequence[User], reader_password: str) -> str:
    """The directory's content, as slapadd reads it."""
    blocks = [
        "dn: %s\nobjectClass: dcObject\nobjectClass: organization\no: HPC example\ndc: hpc" % SUFFIX,
        *("dn: ou=%s,%s\nobjectClass: organizationalUnit\nou: %s" % (ou, SUFFIX, ou)
          for ou in ("people", "groups", "services")),
        "dn: %s\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: sssd\nuserPassword: %s"
        % (READER_DN, reader_password),
    ]
    blocks += ["dn: uid=%s,%s\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: %s\ncn: %s\nsn: %s\n"
               "uidNumber: %d\ngidNumber: %d\nhomeDirectory: /home/%s\nloginShell: /bin/bash\nuserPassword: %s"
               % (u.name, PEOPLE, u.name, u.name.title(), u.name, u.uid, u.gid, u.name, u.password)
               for u in site_users]
    blocks += ["dn: cn=%s,%s\nobjectClass: posixGroup\ncn: %s\ngidNumber: %d\n%s"
               % (g.name, GROUPS, g.name, g.gid, "\n".join("memberUid: %s" % m for m in g.members))
               for g in GROUPS_OF_SITE]
    return "\n\n".join(blocks) + "\n"


def write_certificates(work: Path, hostnames: Sequence[str]) -> None:
    """ca.crt, and server.crt/.key for HOSTNAMES signed by it."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True, timeout=120)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", CA, "-days", "2",
            "-subj", "/CN=slurmkube test directory CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", KEY, "-out", "server.csr",
            "-subj", "/CN=" + hostnames[0])
    (work / "san.ext").write_text("subjectAltName=%s\n" % ",".join("DNS:" + h for h in hostnames))
    openssl("x509", "-req", "-in", "server.csr", "-CA", CA, "-CAkey", "ca.key", "-CAcreateserial",
            "-out", CERTIFICATE, "-days", "2", "-extfile", "san.ext")


def write_server_files(work: Path, hostnames: Sequence[str], site_users: Sequence[User], reader_password: str,
                       admin_password: str) -> Dict[str, str]:
    """Every file the server reads, in WORK; returned as name -> text (a Secret's data)."""
    write_certificates(work, hostnames)
    (work / CONFIG).write_text(slapd_config(admin_password))
    (work / DATA).write_text(entries(site_users, reader_password))
    return {name: (work / name).read_text() for name in (CONFIG, DATA, CA, CERTIFICATE, KEY)}


# The server's command: the content loaded into an empty database, then slapd in the foreground on
# ldap:// (StartTLS) and ldaps://.
_CONFIG_PATH, _DATA_PATH = "%s/%s" % (FILES_DIR, CONFIG), "%s/%s" % (FILES_DIR, DATA)
SERVER_COMMAND = ["sh", "-c", f"slapadd -q -f {_CONFIG_PATH} -l {_DATA_PATH} && "
                              f"exec slapd -d none -f {_CONFIG_PATH} -h 'ldap:/// ldaps:///'"]


# The kind tier's server: a pod and its Service in the test namespace.
APP_LABEL = {"app": "slurmkube-test-directory"}
LDAPS_PORT = 636


def server_hostnames(namespace: str, service: str = "directory") -> Tuple[str, ...]:
    return ("%s.%s.svc.cluster.local" % (service, namespace), "%s.%s.svc" % (service, namespace), service)


def server_manifests(namespace: str, image: str, files: Dict[str, str], service: str = "directory") -> List[dict]:
    """A Secret of the server's files, the server's pod (Ready once it takes connections on
    ldaps://) and its Service."""
    meta = {"name": service, "namespace": namespace, "labels": APP_LABEL}
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": files},
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
            "containers": [{"name": "slapd", "image": image, "imagePullPolicy": "Never",
                            "command": SERVER_COMMAND, "ports": [{"containerPort": LDAPS_PORT}],
                            "readinessProbe": {"tcpSocket": {"port": LDAPS_PORT}, "periodSeconds": 2},
                            "volumeMounts": [{"name": "files", "mountPath": FILES_DIR, "readOnly": True}]}],
            "volumes": [{"name": "files", "secret": {"secretName": service}}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
            "selector": APP_LABEL, "ports": [{"name": "ldaps", "port": LDAPS_PORT}]}},
    ]


def egress_to_server() -> dict:
    """The spec.egress.to rule a cluster's pods need to reach the server (the guide's example)."""
    return {"to": [{"podSelector": {"matchLabels": APP_LABEL}}], "ports": [{"port": LDAPS_PORT, "protocol": "TCP"}]}
