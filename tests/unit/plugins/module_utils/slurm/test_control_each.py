"""SlurmControl.each: many commands in one call (one exec into the controller pod), run by a real
bash here as in the controller image, each command's words passed to it untouched."""

from __future__ import annotations

import subprocess
from typing import Sequence, Tuple

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import EACH_END, SlurmControl, SlurmError


def local(argv: Sequence[str]) -> Tuple[int, str, str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def test_each_command_reports_its_exit_status_and_output_in_order_and_no_word_is_read_by_a_shell():
    calls = []

    def counted(argv):
        calls.append(argv)
        return local(argv)

    results = SlurmControl(counted).each([
        ["printf", "%s|", "two words", "$HOME;`id`", "'quoted'"],
        ["sh", "-c", "echo out; echo more; echo err >&2; exit 3"],
        ["sh", "-c", "echo 42; echo 'a warning' >&2"],  # sbatch --parsable: the id alone on stdout
        ["printf", "a\tb"],
    ])
    assert results == [(0, "two words|$HOME;`id`|'quoted'|", ""), (3, "out more", "err"), (0, "42", "a warning"),
                       (0, "a b", "")]
    assert len(calls) == 1


def test_the_commands_run_side_by_side_and_report_in_their_order(tmp_path):
    """The first command waits (10 s at most) for a file the fourth makes: one after the other, it
    would time out (124) before the fourth began; a fifth waits for a free place."""
    met = tmp_path / "met"
    waits = ["timeout", "10", "sh", "-c", 'until [ -e "$0" ]; do sleep 0.05; done; echo met', str(met)]
    results = SlurmControl(local).each([waits, ["echo", "b"], ["echo", "c"], ["touch", str(met)], ["echo", "e"]])
    assert results == [(0, "met", ""), (0, "b", ""), (0, "c", ""), (0, "", ""), (0, "e", "")]


def test_no_command_is_no_call_and_a_word_that_is_the_separator_is_refused():
    def never(argv):
        raise AssertionError("called")

    assert SlurmControl(never).each([]) == []
    with pytest.raises(ValueError, match=EACH_END):
        SlurmControl(never).each([["echo", EACH_END]])


def test_a_call_that_fails_or_reports_fewer_commands_is_an_error():
    with pytest.raises(SlurmError):
        SlurmControl(lambda argv: (126, "", "cannot exec")).each([["true"]])
    with pytest.raises(SlurmError, match="1 of 2"):
        SlurmControl(lambda argv: (0, "0\t\t\n", "")).each([["true"], ["true"]])
