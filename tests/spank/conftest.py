"""The jail plugin is built once per session, against the Slurm headers it will run with."""

from __future__ import annotations

import pytest
from spank_support import Build, build_spank


@pytest.fixture(scope="session")
def spank_build() -> Build:
    return build_spank()
