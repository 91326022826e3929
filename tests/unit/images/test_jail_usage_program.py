"""The jail-usage program over a directory standing for the jail: it counts what `du` counts (a
hard link once, a symbolic link's own size, never its target), in all and per home, and leaves
its report whole for the exporter. (Run as root here, as in its container: every file is read.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess

from collection_path import REPO

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

PROGRAM = REPO / "images" / "exporter" / "slurmkube_jail_usage.py"
SPEC = importlib.util.spec_from_file_location("slurmkube_jail_usage", PROGRAM)
U = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(U)


def du_bytes(path) -> int:
    """GNU du's count, in bytes of allocated blocks."""
    return int(subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def test_the_count_is_dus_in_all_and_per_home_and_a_link_out_of_a_home_is_not_followed(tmp_path):
    jail = tmp_path / "jail"
    (jail / "home" / "ann" / "data").mkdir(parents=True)
    (jail / "home" / "bo").mkdir(parents=True)
    (jail / "opt").mkdir()
    (jail / "opt" / "software").write_bytes(os.urandom(300_000))
    (jail / "home" / "ann" / "data" / "big").write_bytes(os.urandom(1_000_000))
    os.link(jail / "home" / "ann" / "data" / "big", jail / "home" / "bo" / "same-big")  # one file, two names
    (jail / "home" / "bo" / "software").symlink_to(jail / "opt" / "software")
    (jail / "home" / "bo" / "notes").write_bytes(os.urandom(20_000))
    (jail / "home" / "stray-file").write_bytes(b"x")  # not a home

    report = U.measure(str(jail))
    assert report["used_bytes"] == du_bytes(jail)
    assert set(report["homes"]) == {"ann", "bo"}
    assert report["homes"]["ann"] + report["homes"]["bo"] == du_bytes(jail / "home") - du_bytes(
        jail / "home" / "stray-file") - du_bytes_dir_only(jail / "home")
    # The hard link is counted in one home only (the first the walk meets); the symbolic link is
    # not its target.
    assert (report["homes"]["ann"] >= 1_000_000) != (report["homes"]["bo"] >= 1_000_000), report
    assert min(report["homes"].values()) < 300_000, report


def du_bytes_dir_only(path) -> int:
    return os.lstat(path).st_blocks * 512


def test_the_report_is_replaced_whole(tmp_path):
    U.write_report({"time": 1.0, "used_bytes": 5, "homes": {"ann": 5}}, str(tmp_path))
    assert json.loads((tmp_path / C.JAIL_USAGE_FILE).read_text())["homes"] == {"ann": 5}
    assert sorted(p.name for p in tmp_path.iterdir()) == [C.JAIL_USAGE_FILE]
