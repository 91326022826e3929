"""The container the tests of containers in jobs run (tests/container-demo): BusyBox and an
os-release of its own, built by docker and exported to a tarball, the way a user brings an image
to the cluster (`docker export`, or `podman export`, copied to their home, then `ch-convert`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

CONTEXT = Path(__file__).resolve().parent / "container-demo"
IMAGE = "slurmkube-test/container-demo"
PRETTY_NAME = 'PRETTY_NAME="slurmkube container demo"'
# What each task of a step in the demo container prints: where it ran, as whom, in which job
# (the job's environment reaches the container), and the container's os-release.
IN_CONTAINER = 'echo "host=$(hostname) user=$(id -un) job=$SLURM_JOB_ID rank=$SLURM_PROCID"; cat /etc/os-release'


def docker(*args: str, timeout: float = 600) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, "docker %s: %s" % (" ".join(args), done.stderr[-2000:])
    return done.stdout


def export_demo_container(base_image: str, tarball: Path) -> Path:
    """Build the demo image FROM scratch (BusyBox from base_image's Debian) and write its file
    system to tarball."""
    docker("build", "-q", "-t", IMAGE, "--build-arg", "BASE_IMAGE=" + base_image, str(CONTEXT))
    container = docker("create", IMAGE, "/bin/true").strip()
    try:
        docker("export", "-o", str(tarball), container)
    finally:
        docker("rm", container)
    return tarball


def tasks_of(out: str) -> list:
    """host, user, job and rank of each task that ran IN_CONTAINER, by host."""
    lines = (line for line in out.splitlines() if line.startswith("host="))
    return sorted((dict(word.split("=", 1) for word in line.split()) for line in lines), key=lambda t: t["host"])
