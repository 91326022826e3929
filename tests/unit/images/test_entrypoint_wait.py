"""The entrypoint's test that slurmctld answers (images/common/lib/slurm.sh,
controller_answers_up), with a stand-in scontrol on PATH, under the script's own
`set -euo pipefail`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from entrypoint_script import entrypoint_function

UP = "Slurmctld(primary) at controller-0 is UP\n"
# More lines after UP (a backup controller's, Slurm's RESTORE banner), written once the reader
# may have quit: with `scontrol ping | grep -q`, grep stops at UP, scontrol dies of SIGPIPE on
# the rest, and pipefail made the test false. Long here so that it cannot all fit the pipe first.
UP_THEN_MORE = UP + "Slurmctld(backup) at controller-1 is DOWN\n" * 20000


def answers_up(tmp_path: Path, output: str, status: int) -> bool:
    """Whether controller_answers_up holds when scontrol ping prints `output` and exits `status`
    (0: the stand-in is cat itself, which dies of SIGPIPE as scontrol would)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "ping.out"
    out.write_text(output)
    scontrol = bin_dir / "scontrol"
    answer = 'exec cat "%s"' % out if status == 0 else 'cat "%s"; exit %d' % (out, status)
    scontrol.write_text('#!/bin/sh\n[ "$1" = ping ] || exit 2\n%s\n' % answer)
    scontrol.chmod(0o755)
    script = entrypoint_function("controller_answers_up") + "controller_answers_up\n"
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"])), check=False)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode == 0


@pytest.mark.parametrize(("output", "status", "expected"), [
    (UP, 0, True),
    (UP_THEN_MORE, 0, True),  # scontrol ping exits 0 when any controller answers
    ("Slurmctld(primary) at controller-0 is DOWN\n", 1, False),
    ("", 1, False),  # no controller reachable: scontrol prints its error on stderr
])  # fmt: skip
def test_controller_answers_up_when_the_primary_says_up(tmp_path: Path, output: str, status: int, expected: bool):
    assert answers_up(tmp_path, output, status) is expected
