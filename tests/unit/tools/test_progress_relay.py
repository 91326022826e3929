"""tools/progress.sh's relay (SLURMKUBE_PROGRESS_FILE): the copy of a script's stderr that
slurmkube.core.job_progress prints while a playbook waits. In CI, kind.sh said nothing for 70 s:
kind create (40 s, under progress_run's one-minute ticks) then the pod network's wait (30 s,
quiet) — each step under a minute, the two together over. The relay speaks when the script has
been quiet for PROGRESS_SECONDS + 2, whatever the steps.

The script is a real one sourcing progress.sh, as kind.sh does; its quiet steps are sleeps."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from collection_path import REPO

# Three quiet steps of 2.5 s each (7.5 s): with PROGRESS_SECONDS=2 the relay speaks after 4 s.
SCRIPT = """set -euo pipefail
PROGRESS_TAG=kind
. {progress}
printf '[kind %(%H:%M:%S)T] creating cluster demo\\n' -1 >&2
sleep 2.5; sleep 2.5; sleep 2.5
printf 'half a line, ' >&2; sleep 1.5; printf 'the rest\\n' >&2
printf '[kind %(%H:%M:%S)T] cluster demo is up\\n' -1 >&2
printf 'a last line without its newline' >&2
"""


def run_script(tmp_path: Path) -> tuple:
    """(the script's stderr, the progress file), once the relay has copied everything."""
    script = tmp_path / "up.sh"
    script.write_text(SCRIPT.format(progress=REPO / "tools" / "progress.sh"))
    progress = tmp_path / "logs" / "progress.log"
    env = dict(os.environ, PROGRESS_SECONDS="2", SLURMKUBE_PROGRESS_FILE=str(progress))
    # The relay holds the stderr pipe: run() returns once it has written its last line and quit.
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stderr, progress.read_text()


def seconds(stamp: str) -> int:
    hours, minutes, secs = (int(part) for part in stamp.split(":"))
    return hours * 3600 + minutes * 60 + secs


def test_quiet_steps_in_a_row_get_a_line_from_the_relay_and_every_line_is_copied_whole(tmp_path: Path):
    stderr, copy = run_script(tmp_path)
    assert copy == stderr, (copy, stderr)  # as tee: the same lines, in the same order
    lines = copy.splitlines()
    assert lines[0].endswith("] creating cluster demo") and "half a line, the rest" in lines, lines
    assert lines[-2].endswith("] cluster demo is up") and lines[-1] == "a last line without its newline", lines
    relayed = [line for line in lines if re.match(r"^\[kind \d\d:\d\d:\d\d\] still working, 0 min 0\d s since: "
                                                  r"creating cluster demo$", line)]  # fmt: skip
    assert relayed, lines  # the quiet steps are 7.5 s; without the relay, one gap of 7.5 s
    stamps = [seconds(found) for found in re.findall(r"^\[kind (\d\d:\d\d:\d\d)\]", copy, flags=re.M)]
    gaps = [(later - earlier) % 86400 for earlier, later in zip(stamps, stamps[1:])]
    assert gaps and max(gaps) <= 5, (gaps, lines)  # PROGRESS_SECONDS + 2, and a second's rounding


def test_without_a_progress_file_stderr_is_the_scripts_own(tmp_path: Path):
    script = tmp_path / "plain.sh"
    script.write_text(". %s\nprintf 'said\\n' >&2\n" % (REPO / "tools" / "progress.sh"))
    done = subprocess.run(["bash", str(script)], env={k: v for k, v in os.environ.items()
                                                      if k != "SLURMKUBE_PROGRESS_FILE"},
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "said\n", done.stderr
