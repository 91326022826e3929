"""The plugin as the images build and run it: compiled in the trixie `spank-build` image (gcc 14,
the headers of the images' Slurm, default SLURM_INCLUDE), and entering a jail inside a
docker container, where the runtime's default seccomp profile refuses pivot_root.

Needs docker and a slurmkube/spank-build image (made by images/build.sh); skipped otherwise."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from spank_support import SPANK

from ansible_collections.slurmkube.core.plugins.module_utils.render.seccomp import worker_seccomp_profile_text

pytestmark = pytest.mark.slurm

SETUP = """
set -e
cp -r /src /tmp/spank && rm -rf /tmp/spank/build
make -s -C /tmp/spank harness >/dev/null
mkdir -p /srv/t/jail /srv/t/node/slurm /srv/t/node/munge
touch /srv/t/jail/.slurmkube-jail
echo jail > /srv/t/jail/jail-only
echo host > /srv/t/host-only
"""
HARNESS = "/tmp/spank/build/tests/jail_harness"
WORDS = "jail=/srv/t/jail submounts=/srv/t/node/slurm:/etc/slurm,/srv/t/node/munge:/run/munge"
IN_JAIL = "--expect-file /jail-only=jail --expect-absent /srv/t/host-only --expect-proc"


def run_image(name: str) -> str | None:
    """NAME's image for this run's sources and Slurm series (images/build.sh --print-tags), when
    docker holds it. Not the newest one: the upgrade test builds release 0.3.0's images too."""
    if not shutil.which("docker"):
        return None
    tags = subprocess.run(["bash", str(SPANK.parent / "images" / "build.sh"), "--print-tags"],
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    if tags.returncode != 0:
        return None
    ref = json.loads(tags.stdout).get(name)
    if not ref:
        return None
    held = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, check=False, timeout=60)
    return ref if held.returncode == 0 else None


@pytest.fixture(scope="module")
def image() -> str:
    found = run_image("spank-build")
    if not found:
        pytest.skip("no docker or no slurmkube/spank-build image (run images/build.sh spank-build)")
    return found


@pytest.fixture(scope="module")
def jail_image() -> str:
    found = run_image("jail")
    if not found:
        pytest.skip("no docker or no slurmkube/jail image (run images/build.sh jail)")
    return found


def in_container(image: str, script: str, *docker_options: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [
            *("docker", "run", "--rm", "--entrypoint", "bash", *docker_options),
            *("-v", "%s:/src:ro" % SPANK, image, "-c", script),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    print(result.stdout, result.stderr)
    return result


def test_builds_in_trixie_with_its_own_headers_and_unit_tests_pass(image):
    result = in_container(image, "cp -r /src /tmp/s && rm -rf /tmp/s/build && make -C /tmp/s test")
    assert result.returncode == 0
    assert "-Wall -Wextra -Werror" in result.stdout
    assert re.search(r"^# \d+ passed, 0 failed$", result.stdout, re.MULTILINE)


def test_docker_default_seccomp_gets_the_chroot_fallback(image):
    script = SETUP + "%s %s --expect-no-cap sys_chroot -- %s" % (HARNESS, IN_JAIL, WORDS)
    result = in_container(image, script, "--cap-add", "SYS_ADMIN")
    assert result.returncode == 0
    assert "pivot_root into /srv/t/jail refused (Operation not permitted), falling back to chroot" in result.stderr


def test_root_job_in_a_container_gets_a_read_only_node_for_its_slurmstepd(image):
    script = SETUP + (
        "mkdir -p /etc/slurmkube/munge && echo secret > /etc/slurmkube/munge/munge.key\n"
        "%s --uid 0 --stepd-expect-readonly / --stepd-expect-absent /etc/slurmkube/munge/munge.key "
        "--stepd-expect-writable /srv/t/jail %s --expect-writable / -- %s" % (HARNESS, IN_JAIL, WORDS)
    )
    result = in_container(image, script, "--cap-add", "SYS_ADMIN")
    assert result.returncode == 0


def test_unconfined_seccomp_gets_pivot_root(image):
    script = SETUP + "%s %s --expect-one-root --expect-cap sys_chroot -- %s" % (HARNESS, IN_JAIL, WORDS)
    result = in_container(image, script, "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined")
    assert result.returncode == 0
    assert "chroot" not in result.stderr


def test_the_workers_seccomp_profile_gets_pivot_root(image, tmp_path):
    """What the worker pods run under (render/seccomp.py) lets the jail pivot its root."""
    profile = tmp_path / "worker.json"
    profile.write_text(worker_seccomp_profile_text())
    script = SETUP + "%s %s --expect-one-root --expect-cap sys_chroot -- %s" % (HARNESS, IN_JAIL, WORDS)
    result = in_container(image, script, "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=%s" % profile)
    assert result.returncode == 0
    assert "chroot" not in result.stderr


def test_without_cap_sys_admin_the_task_fails_instead_of_running_on_the_node(image):
    script = SETUP + "set +e; %s --no-test-namespace %s -- %s; echo harness-exit=$?" % (HARNESS, IN_JAIL, WORDS)
    result = in_container(image, script)
    assert "harness-exit=2" in result.stdout
    assert "entered" not in result.stdout.splitlines()
    assert "unshare(CLONE_NEWNS): Operation not permitted (the worker needs CAP_SYS_ADMIN)" in result.stderr


SRUN_WITH_PLUGSTACK = """
mkdir -p /etc/slurm
printf 'ClusterName=t\\nSlurmctldHost=localhost\\nPlugStackConfig=/etc/slurm/plugstack.conf\\n' > /etc/slurm/slurm.conf
printf 'NodeName=n1 CPUs=1\\nPartitionName=p Nodes=n1\\n' >> /etc/slurm/slurm.conf
echo "required %s jail=/mnt/jail submounts=/x:/y" > /etc/slurm/plugstack.conf
timeout 20 srun -n1 true
"""


@pytest.mark.parametrize(("plugin", "loads"), [("/src/build/spank_jail.so", True), ("/src/build/none.so", False)])
def test_real_srun_loads_the_plugin(spank_build, jail_image, plugin, loads):
    """srun in the jail loads plugstack.conf like slurmstepd does: a wrong plugin_version or a
    missing symbol would stop it with a spank error (the missing .so shows what one looks like)."""
    assert spank_build.returncode == 0, spank_build.output
    result = in_container(jail_image, SRUN_WITH_PLUGSTACK % plugin)
    assert "Unable to contact slurm controller" in result.stderr or "spank" in result.stderr
    assert ("spank:" not in result.stderr) is loads
