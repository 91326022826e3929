"""slurmkube.core.job_progress, run by a real ansible-playbook: it waits for an async task and
prints, while it runs, the progress lines the task's script writes (tools/progress.sh with
SLURMKUBE_PROGRESS_FILE), or how long it has run when it says nothing."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import yaml
from collection_path import REPO
from playbook_runner import run_playbook

# A script as kind.sh and build.sh are: progress.sh sourced, a step run with progress_run.
SCRIPT = """set -euo pipefail
PROGRESS_TAG=test
PROGRESS_SECONDS=1
. {progress}
progress_run "sleeping" {steplog} sleep 4
echo done
"""


def play(tmp_path: Path, argv: list, job_args: dict, environment: dict) -> tuple:
    """(ansible-playbook's output, the wait's registered result or None when it failed)."""
    result_file = tmp_path / "waited.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Start", "ansible.builtin.command": {"argv": argv}, "environment": environment,
         "async": 60, "poll": 0, "register": "job"},
        {"name": "Wait", "slurmkube.core.job_progress": dict(job_args, jid="{{ job.ansible_job_id }}"),
         "register": "waited"},
        {"ansible.builtin.copy": {"content": "{{ waited | combine({'jid': job.ansible_job_id}) | to_json }}",
                                  "dest": str(result_file), "mode": "0600"}},
    ]}]))
    proc = run_playbook(playbook)
    output = proc.stdout + proc.stderr
    return output, json.loads(result_file.read_text()) if proc.returncode == 0 else None


def test_the_scripts_progress_lines_are_printed_while_it_runs_and_its_result_returned(tmp_path: Path):
    script = tmp_path / "build.sh"
    script.write_text(SCRIPT.format(progress=REPO / "tools" / "progress.sh", steplog=tmp_path / "step.log"))
    log = tmp_path / "logs" / "progress.log"
    output, waited = play(tmp_path, ["bash", str(script)], {"what": "images", "log": str(log), "poll": 1},
                          {"SLURMKUBE_PROGRESS_FILE": str(log)})
    assert waited is not None, output[-3000:]
    said = re.findall(r"^images: \[test \d\d:\d\d:\d\d\] sleeping: 0 min 0\d s so far \(log: .*step\.log\)$",
                      output, flags=re.M)
    assert len(said) >= 2, output[-3000:]
    assert waited["rc"] == 0 and waited["stdout"] == "done" and "sleeping: 0 min" in waited["stderr"], waited
    # the job's record is removed, as async_status's cleanup does
    assert waited["jid"] and not (Path.home() / ".ansible_async" / waited["jid"]).exists()


def test_a_silent_task_gets_a_line_saying_how_long_it_has_run(tmp_path: Path):
    output, waited = play(tmp_path, ["sleep", "3"], {"what": "quiet", "interval": 1, "poll": 1}, {})
    assert waited is not None and waited["rc"] == 0, output[-3000:]
    assert re.search(r"^quiet: 0 min 0[1-3] s so far$", output, flags=re.M), output[-3000:]


def test_a_failed_task_fails_the_wait_with_its_status_and_output(tmp_path: Path):
    output, waited = play(tmp_path, ["bash", "-c", "echo broken >&2; exit 3"], {"what": "doomed", "poll": 1}, {})
    assert waited is None
    assert re.search(r'fatal: \[localhost\]: FAILED! => .*"rc": 3', output), output[-3000:]
    assert "broken" in output


def test_a_progress_file_started_afresh_is_read_from_its_beginning(tmp_path: Path):
    """The script truncates its progress file when it starts (tools/progress.sh): a reader that
    had got further in the last run's longer file reads the new one from its first line."""
    action = importlib.import_module("ansible_collections.slurmkube.core.plugins.action.job_progress")
    log = tmp_path / "progress.log"
    log.write_text("an old line of the last run\nanother old one\n")
    lines, offset = action.new_lines(str(log), 0)
    assert lines == ["an old line of the last run", "another old one"]
    log.write_text("new\nhalf a li")
    assert action.new_lines(str(log), offset) == (["new"], 4)
    assert action.new_lines(str(tmp_path / "missing.log"), 12) == ([], 0)
