"""The jail image fills the jail volume once, and an upgrade keeps users' data."""

from __future__ import annotations

import os

import pytest
from docker_cluster import (
    populate,
    remove_as_root,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = pytest.mark.slurm


@pytest.fixture
def jail_dir(tmp_path):
    jail = tmp_path / "jail"
    jail.mkdir()
    yield jail
    remove_as_root(jail)


def test_jail_populate_once_then_noop_and_user_data_survives_upgrade(images, jail_dir):
    log = populate(images, jail_dir, "v1")
    marker = jail_dir / C.JAIL_MARKER_FILE
    assert marker.read_text() == "v1\n"
    assert (jail_dir / "usr/bin/srun").exists()
    assert os.path.lexists(jail_dir / "usr/bin/mpirun")  # an alternatives link, absolute
    assert (jail_dir / "etc/hosts").exists()  # an empty bind target, not the container's
    assert not (jail_dir / ".dockerenv").exists()
    assert not any((jail_dir / C.JAIL_MOUNT_PATH.lstrip("/")).glob("*"))
    assert oct((jail_dir).stat().st_mode & 0o7777) == "0o755"  # sshd's ChrootDirectory checks

    user_file = jail_dir / "home/alice/results.txt"
    user_file.parent.mkdir(parents=True)
    user_file.write_text("precious\n")
    with open(jail_dir / "etc/passwd", "a") as passwd:
        passwd.write("alice:x:2000:2000::/home/alice:/bin/bash\n")

    log = populate(images, jail_dir, "v1")
    assert "nothing to do" in log
    assert user_file.read_text() == "precious\n"

    log = populate(images, jail_dir, "v2")
    assert marker.read_text() == "v2\n"
    assert user_file.read_text() == "precious\n"
    assert "alice:x:2000" in (jail_dir / "etc/passwd").read_text()
