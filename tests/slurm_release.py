"""The Slurm the images carry (images/slurm-release.sh), for tests that check versions."""

from __future__ import annotations

import os
import re
from pathlib import Path

SLURM_RELEASE = Path(__file__).resolve().parents[1] / "images" / "slurm-release.sh"


def images_slurm_series() -> tuple[int, int]:
    """(major, minor): SLURMKUBE_SLURM_VERSION, or images/slurm-release.sh's default."""
    default = re.search(r"^SLURM_SERIES_DEFAULT=(\S+)$", SLURM_RELEASE.read_text(), re.M).group(1)
    major, minor = os.environ.get("SLURMKUBE_SLURM_VERSION", default).split(".")
    return int(major), int(minor)


def images_slurm_series_text() -> str:
    """The series as Slurm prints it: '26.05'."""
    return "%d.%02d" % images_slurm_series()
