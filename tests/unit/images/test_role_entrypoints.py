"""One short entrypoint per image role on a small shell library (images/common/roles, lib), with
every constant from the generated constants.sh, and each image carrying what its roles source."""

from __future__ import annotations

import re
import runpy
from typing import Dict, List, Set

import pytest
from collection_path import REPO

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

COMMON = REPO / "images" / "common"
ROLES = sorted((COMMON / "roles").iterdir())
LIBRARY = sorted((COMMON / "lib").glob("*.sh"))
CONSTANTS = {name for name, value in runpy.run_path(str(REPO / "plugins/module_utils/constants.py")).items()
             if name.isupper() and isinstance(value, (str, int))}
SOURCED = re.compile(r'^\. "\$SHELL_LIBRARY_DIR/([a-z]+\.sh)"$', re.M)


def shell_parts() -> Dict[str, List[str]]:
    """images/build.sh's shell_parts_of, by image."""
    text = (REPO / "images" / "build.sh").read_text()
    block = text[text.index("shell_parts_of() {"):]
    block = block[:block.index("\n}\n")]
    return {image: parts.split() for image, parts in re.findall(r"^\s+([a-z]+)\) echo ([^;]+) ;;$", block, re.M)}


@pytest.mark.parametrize("path", ROLES + LIBRARY, ids=lambda p: str(p.relative_to(COMMON)))
def test_each_entrypoint_and_library_file_reads_in_one_sitting(path):
    assert len(path.read_text().splitlines()) <= 200


def test_every_role_has_its_entrypoint():
    roles = {value for name, value in runpy.run_path(str(REPO / "plugins/module_utils/constants.py")).items()
             if name.startswith("ROLE_") and name != "ROLE_ENTRYPOINTS_DIR"}
    # jail-populate is its own program (slurmkube-jail-populate), run by the dispatcher.
    assert {p.name for p in ROLES} == roles - {"jail-populate"}


@pytest.mark.parametrize("path", sorted(p for p in COMMON.rglob("*") if p.is_file()), ids=lambda p: p.name)
def test_no_script_declares_a_constant_again(path):
    assigned: Set[str] = set(re.findall(r"^\s*(?:readonly |local )?([A-Z][A-Z0-9_]*)=", path.read_text(), re.M))
    assert assigned & CONSTANTS == set()


@pytest.mark.parametrize("image,parts", sorted(shell_parts().items()))
def test_an_image_carries_the_library_its_roles_source(image, parts):
    for part in parts:
        assert (COMMON / part).is_file(), part
    for role in (p for p in parts if p.startswith("roles/")):
        needed = {"lib/" + lib for lib in SOURCED.findall((COMMON / role).read_text())}
        assert needed <= set(parts), (role, needed - set(parts))


def test_the_database_image_carries_no_munge_and_no_slurm():
    assert [p for p in shell_parts()["mariadb"] if "munge" in p or "slurm" in p] == []


def test_every_role_entrypoint_is_in_some_image():
    carried = {part for parts in shell_parts().values() for part in parts}
    assert {"roles/" + p.name for p in ROLES} <= carried
    assert {"lib/" + p.name for p in LIBRARY} <= carried


def test_the_dockerfiles_put_roles_and_library_where_the_entrypoints_look():
    for image in sorted(shell_parts()):
        text = (REPO / "images" / image / "Dockerfile").read_text()
        assert "COPY common/roles/ %s/\n" % C.ROLE_ENTRYPOINTS_DIR in text
        assert "COPY common/lib/ %s/\n" % C.SHELL_LIBRARY_DIR in text
