"""tests/collection_path.py: the checkout linked into a collections tree, by processes started at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from collection_path import REPO

# Each process waits for the same instant (argv[1]) once started, then links: they race as
# closely as the machine lets them.
LINK = ("import sys, time; sys.path.insert(0, %r); import collection_path\n"
        "while time.time() < float(sys.argv[1]): pass\n"
        "collection_path.ensure_importable()" % str(REPO / "tests"))


def test_processes_started_at_once_all_find_the_checkout_linked(tmp_path):
    """tests/run starts two pytest processes at once on a fresh clone: none may fail making the link."""
    for attempt in range(3):
        env = dict(os.environ, SLURMKUBE_CACHE=str(tmp_path / str(attempt)))
        at = str(time.time() + 1)
        procs = [subprocess.Popen([sys.executable, "-c", LINK, at], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _start in range(6)]
        for proc in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err[-2000:]
        (link,) = (tmp_path / str(attempt)).glob("collections/*/ansible_collections/slurmkube/*")
        assert link.name == "core" and link.resolve() == REPO
