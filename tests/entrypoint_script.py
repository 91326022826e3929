"""Functions of the images' entrypoints (the shell library images/common/lib/*.sh and the role
entrypoints images/common/roles/*), one at a time: a role's script runs when sourced, so the
tests take a function's text and run that."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

COMMON = Path(__file__).resolve().parents[1] / "images" / "common"


def entrypoint_files() -> Iterator[Path]:
    yield from sorted((COMMON / "lib").glob("*.sh"))
    yield from sorted((COMMON / "roles").iterdir())


def entrypoint_function(name: str) -> str:
    """The text of the function `name`, from `name() {` to its closing brace, wherever it is."""
    for path in entrypoint_files():
        lines = path.read_text().splitlines()
        if "%s() {" % name in lines:
            start = lines.index("%s() {" % name)
            end = lines.index("}", start)
            return "\n".join(lines[start:end + 1]) + "\n"
    raise KeyError("no function %s in %s" % (name, COMMON))


def entrypoint_constant(name: str) -> str:
    """The value of `readonly NAME=value` in the images' shell library, wherever it is."""
    for path in entrypoint_files():
        found = re.search(r"^readonly %s=(\S+)$" % re.escape(name), path.read_text(), flags=re.M)
        if found:
            return found.group(1)
    raise KeyError("no readonly %s in %s" % (name, COMMON))
