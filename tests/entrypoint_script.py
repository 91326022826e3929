"""Functions of the images' entrypoint (images/common/slurmkube-entrypoint), one at a time: the
script runs its main when sourced, so the tests take a function's text and run that."""

from __future__ import annotations

from pathlib import Path

ENTRYPOINT = Path(__file__).resolve().parents[1] / "images/common/slurmkube-entrypoint"


def entrypoint_function(name: str) -> str:
    """The text of the entrypoint's function `name`, from `name() {` to its closing brace."""
    lines = ENTRYPOINT.read_text().splitlines()
    start = lines.index("%s() {" % name)
    end = lines.index("}", start)
    return "\n".join(lines[start:end + 1]) + "\n"
