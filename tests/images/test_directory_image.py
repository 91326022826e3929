"""The sssd image as spec.directory's sidecar runs it, against a real OpenLDAP server: the container
the renderer writes (its environment, mounts, read-only root and capabilities) run by docker, its
sssd.conf template the renderer's and the bind password from the Secret; the controller, worker
and jail images resolve directory users and groups through its sockets (mounted read-only, as in
the pods), TLS checked against the site's CA (StartTLS on ldap://), a uid below minId never
resolved, root always the image's own."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from directory_server import (
    DANA,
    ELI,
    FAY,
    FILES_DIR,
    GIL,
    READER_DN,
    SERVER_COMMAND,
    SUFFIX,
    users,
    write_server_files,
)
from docker_cluster import docker, remove_as_root, wait_for

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.model.parse import parse_cluster
from ansible_collections.slurmkube.core.plugins.module_utils.render.directory import (
    STATE_DIRS,
    render_sssd_config,
    sssd_sidecar,
)

pytestmark = pytest.mark.slurm

SERVER = "directory"
PASSWORDS = {name: secrets.token_urlsafe(12) for name in (DANA, ELI, FAY, GIL, "reader", "admin")}


def directory_model():
    return parse_cluster({"metadata": {"name": "demo", "namespace": "hpc"}, "spec": {"directory": {"ldap": {
        "uris": ["ldap://%s" % SERVER], "searchBase": SUFFIX, "bindDn": READER_DN,
        "bindPasswordSecret": "directory-bind", "caSecret": "directory-ca", "minId": 1000}}}})


def sidecar_words(container: Dict, template: Path, ca: Path, pipes: str) -> List[str]:
    """docker run's words for the rendered sidecar: its env (the Secret's password put in), its
    security context, and its mounts with the host's stand-ins (tmpfs for its emptyDir's subPaths)."""
    words = []
    for var in container["env"]:
        words += ["-e", "%s=%s" % (var["name"], var["value"] if "value" in var else PASSWORDS["reader"])]
    context = container["securityContext"]
    words += ["--user", str(context["runAsUser"]), "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    words += [w for cap in context["capabilities"]["add"] for w in ("--cap-add", cap)]
    words += ["--read-only"] if context["readOnlyRootFilesystem"] else []
    stand_ins = {C.SSSD_PIPES_DIR: pipes, C.SSSD_TEMPLATE_MOUNT_DIR: str(template), C.DIRECTORY_CA_MOUNT_DIR: str(ca)}
    for mount in container["volumeMounts"]:
        path = mount["mountPath"]
        if path in STATE_DIRS:
            words += ["--tmpfs", path]
        else:
            words += ["-v", "%s:%s%s" % (stand_ins[path], path, ":ro" if mount.get("readOnly") else "")]
    return words


@pytest.fixture(scope="module")
def sockets(images, tmp_path_factory) -> Iterator[str]:
    """The directory server and the rendered SSSD sidecar on one docker network; the docker volume
    holding SSSD's sockets."""
    root = tmp_path_factory.mktemp("directory")
    network = "slurmkube-directory-%s" % uuid.uuid4().hex[:8]
    pipes, sssd = network + "-pipes", network + "-sssd"
    server_files, template, ca = root / "server", root / "template", root / "ca"
    for folder in (server_files, template, ca):
        folder.mkdir()
    site_users = users(PASSWORDS)
    write_server_files(server_files, [SERVER], site_users, PASSWORDS["reader"], PASSWORDS["admin"])
    (ca / C.DIRECTORY_CA_SECRET_KEY).write_text((server_files / "ca.crt").read_text())
    model = directory_model()
    ldap = model.spec.directory.ldap
    (template / C.SSSD_CONFIG_FILE).write_text(render_sssd_config(model, ldap))
    docker("network", "create", network)
    docker("volume", "create", pipes)
    try:
        docker("run", "-d", "--name", network + "-server", "--network", network, "--network-alias", SERVER,
               "-v", "%s:%s:ro" % (server_files, FILES_DIR), "--entrypoint", SERVER_COMMAND[0], images["directory"],
               *SERVER_COMMAND[1:])  # fmt: skip
        docker("run", "-d", "--name", sssd, "--network", network,
               *sidecar_words(sssd_sidecar(model, ldap), template, ca, pipes), images["sssd"])  # fmt: skip

        def answers() -> bool:
            return lookup(images, "controller", pipes, "passwd", DANA).returncode == 0

        wait_for("a directory user resolved through sssd", answers, timeout=90, interval=2,
                 explain=lambda: docker("logs", "--tail", "40", sssd, check=False).stderr
                 + docker("logs", "--tail", "20", network + "-server", check=False).stderr)
        yield pipes
    finally:
        docker("rm", "-f", sssd, network + "-server", check=False)
        docker("volume", "rm", "-f", pipes, check=False)
        docker("network", "rm", network, check=False)
        remove_as_root(root)


def lookup(images: dict, image: str, pipes: str, *getent: str):
    """getent in a container of IMAGE with SSSD's sockets mounted read-only, as in the pods."""
    return docker("run", "--rm", "--network", "none", "-v", "%s:%s:ro" % (pipes, C.SSSD_PIPES_DIR),
                  "--entrypoint", "getent", images[image], *getent, check=False)  # fmt: skip


@pytest.mark.parametrize("image", ["controller", "worker", "login", "jail", "slurmdbd"])
def test_directory_users_and_groups_resolve_in_each_image_through_the_sidecars_sockets(images, sockets, image):
    dana = lookup(images, image, sockets, "passwd", DANA)
    assert dana.stdout.split(":")[2:4] == ["5001", "5000"], dana
    assert dana.stdout.strip().endswith(":/home/%s:/bin/bash" % DANA), dana
    assert lookup(images, image, sockets, "passwd", "5002").stdout.startswith(ELI + ":"), image
    physics = lookup(images, image, sockets, "group", "physics").stdout.strip()
    assert physics.split(":")[2] == "5000" and set(physics.split(":")[3].split(",")) == {DANA, ELI, GIL}, physics
    assert DANA in lookup(images, image, sockets, "group", "chemistry").stdout


@pytest.mark.parametrize("image", ["controller", "worker"])
def test_a_uid_below_min_id_is_never_resolved_and_root_stays_the_images(images, sockets, image):
    assert lookup(images, image, sockets, "passwd", FAY).returncode == 2
    assert lookup(images, image, sockets, "passwd", "root").stdout.startswith("root:x:0:0:")


def test_without_the_sockets_lookups_fail_cleanly_and_local_accounts_still_resolve(images):
    """A pod whose sidecar is not up yet (or a cluster without a directory): the sss module finds
    no socket and answers 'not found' at once."""
    none = docker("run", "--rm", "--network", "none", "--entrypoint", "getent", images["worker"], "passwd", DANA,
                  check=False, timeout=60)  # fmt: skip
    assert none.returncode == 2, none
    assert docker("run", "--rm", "--network", "none", "--entrypoint", "getent", images["worker"], "passwd",
                  "root").stdout.startswith("root:")
