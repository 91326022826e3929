"""Containers in jobs (issue 34, item 4): a plain user brings an image as a tarball into their
home, converts it with Charliecloud's ch-convert and runs steps in it with Slurm's own
`--container` (oci.conf: ch-run, unprivileged, inside the jail), on two workers, from an ssh
session and from a batch job. Real sshd, slurmctld, slurmd and the jail plugin."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
from docker_cluster import JAIL_UID, JAIL_USER, WORKERS, jail_home, needs_plugin, ssh_to_login

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from container_demo import IN_CONTAINER, PRETTY_NAME, export_demo_container, tasks_of

pytestmark = pytest.mark.slurm

IMAGE_DIR = "demo"  # in the user's home


@pytest.fixture(scope="module")
def demo_image(cluster, images) -> str:
    """The demo image's tarball copied into the user's home (as scp would) and converted there by
    the user; its path in the jail."""
    tarball = export_demo_container(images["base"], jail_home(cluster) / "demo.tar")
    os.chown(tarball, JAIL_UID, JAIL_UID)
    converted = ssh_to_login(cluster, "cd ~ && ch-convert -o dir demo.tar %s && rm demo.tar" % IMAGE_DIR, check=False)
    assert converted.returncode == 0, converted.stdout + converted.stderr
    return "$HOME/" + IMAGE_DIR


@needs_plugin
def test_srun_runs_a_users_container_on_two_nodes(cluster, demo_image):
    """Each task prints the container's os-release (BusyBox's image, not the jail's Debian), as
    the user, with the job's environment, on its own node."""
    nodes = ",".join(WORKERS[:2])
    step = ssh_to_login(cluster, "cd ~ && srun -N2 -w %s --container=%s sh -c %s"
                        % (nodes, demo_image, shlex.quote(IN_CONTAINER)), check=False)  # fmt: skip
    assert step.returncode == 0, step.stdout + step.stderr
    assert step.stdout.count(PRETTY_NAME) == 2, step.stdout
    assert "debian" not in step.stdout.lower(), step.stdout
    tasks = tasks_of(step.stdout)
    assert [t["host"] for t in tasks] == sorted(WORKERS[:2]), tasks
    assert {t["user"] for t in tasks} == {JAIL_USER}, tasks
    assert len({t["job"] for t in tasks}) == 1 and tasks[0]["job"].isdigit(), tasks
    assert sorted(t["rank"] for t in tasks) == ["0", "1"], tasks


@needs_plugin
def test_a_batch_job_runs_its_steps_in_the_users_container(cluster, demo_image):
    """The batch script runs in the jail; its srun steps in the container, output in the job's file."""
    script = "srun --container=%s sh -c %s" % (demo_image, shlex.quote(IN_CONTAINER))
    job = ssh_to_login(cluster, "cd ~ && sbatch --parsable --wait -w %s -o container-%%j.out --wrap %s"
                       % (WORKERS[0], shlex.quote(script)), check=False)  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    out = (jail_home(cluster) / ("container-%s.out" % job.stdout.split()[0])).read_text()
    assert PRETTY_NAME in out, out
    assert tasks_of(out) == [{"host": WORKERS[0], "user": JAIL_USER, "job": job.stdout.split()[0], "rank": "0"}], out
