"""Where the jail plugin lives and how it is built: shared by the spank tests."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from slurm_release import images_slurm_series, images_slurm_series_text

REPO = Path(__file__).resolve().parents[2]
SPANK = REPO / "spank"
BUILD = SPANK / "build"
FETCH_HEADERS = SPANK / "scripts" / "fetch-slurm-headers.sh"


def slurm_version_of(include_dir: Path) -> tuple[int, int] | None:
    """(major, minor) from slurm/slurm_version.h under include_dir, if there is one."""
    header = include_dir / "slurm" / "slurm_version.h"
    if not header.is_file():
        return None
    match = re.search(r"#define\s+SLURM_VERSION_NUMBER\s+0x([0-9a-fA-F]+)", header.read_text())
    if not match:
        return None
    number = int(match.group(1), 16)
    return number >> 16, (number >> 8) & 0xFF


def find_slurm_include() -> Path:
    """SLURM_INCLUDE from the environment, the system's headers of the images' Slurm, or Debian's (fetch script)."""
    if os.environ.get("SLURM_INCLUDE"):
        return Path(os.environ["SLURM_INCLUDE"])
    if slurm_version_of(Path("/usr/include")) == images_slurm_series():
        return Path("/usr/include")
    fetched = subprocess.run([str(FETCH_HEADERS)], capture_output=True, text=True, check=False)
    if fetched.returncode != 0:
        pytest.fail("cannot get the headers of Slurm %s:\n%s" % (images_slurm_series_text(), fetched.stderr))
    return Path(fetched.stdout.strip())


@dataclass
class Build:
    include: Path
    returncode: int
    output: str
    seconds: float

    @property
    def plugin(self) -> Path:
        return BUILD / "spank_jail.so"

    @property
    def harness(self) -> Path:
        return BUILD / "tests" / "jail_harness"

    @property
    def probe(self) -> Path:
        return BUILD / "tests" / "jail_probe"

    @property
    def jail_run(self) -> Path:
        return BUILD / "slurmkube-jail-run"


def make(target: str, include: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-C", str(SPANK), target, "SLURM_INCLUDE=%s" % include],
        capture_output=True,
        text=True,
        check=False,
    )


def build_spank() -> Build:
    """A clean `make -C spank all harness`: the plugin, the harness and the probe, not yet run."""
    include = find_slurm_include()
    subprocess.run(["make", "-C", str(SPANK), "clean"], capture_output=True, check=True)
    started = time.monotonic()
    result = make("all", include)
    if result.returncode == 0:
        result = make("harness", include)
    return Build(include, result.returncode, result.stdout + result.stderr, time.monotonic() - started)
