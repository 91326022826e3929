"""The worker entrypoint's cgroup v2 step on a real cgroup2 file system.

On cgroup v2 a cgroup may hand controllers to its children only while it holds no process, so
the entrypoint moves the container's processes from its namespace's root cgroup into init.scope
before slurmd starts (images/common/lib/cgroups.sh, leave_cgroup_root). This host is cgroup
v1, but it mounts the unified (v2) hierarchy beside it: the function runs there, in a cgroup of
its own that stands for the pod's, with processes it must move.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from entrypoint_script import entrypoint_function

pytestmark = pytest.mark.slurm

UNIFIED = Path("/sys/fs/cgroup/unified")


def cgroup2_mounted(path: Path) -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[1:3] == [str(path), "cgroup2"] for line in mounts)


@pytest.mark.skipif(os.geteuid() != 0 or not cgroup2_mounted(UNIFIED), reason="needs root and a cgroup2 mount")
def test_every_process_leaves_the_root_cgroup_for_init_scope(tmp_path):
    pod = UNIFIED / ("slurmkube-test-" + uuid.uuid4().hex[:8])
    pod.mkdir()
    script = tmp_path / "probe.sh"
    script.write_text(entrypoint_function("leave_cgroup_root") + (
        'echo $$ > "$1/cgroup.procs"\n'        # this shell: the "container", in the pod's cgroup
        "sleep 300 & sleep 301 & sleep 302 &\n"  # its daemons (tini, munged, ...)
        'leave_cgroup_root "$1"; echo "rc=$?"\n'
        'echo "left=$(wc -l <"$1/cgroup.procs") moved=$(wc -l <"$1/init.scope/cgroup.procs")"\n'
        # Reaped before the script ends: a killed process still counts in its cgroup until then,
        # and the cgroup cannot be removed (a cold CI run failed its cleanup on EBUSY).
        "kill %1 %2 %3; wait\n"
    ))
    try:
        out = subprocess.run(["bash", str(script), str(pod), str(UNIFIED)], capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
        assert out.returncode == 0, out.stderr
        words = dict(w.split("=") for w in out.stdout.split())
        assert words["rc"] == "0" and words["left"] == "0", out.stdout
        assert int(words["moved"]) >= 4, out.stdout  # the shell and its three sleeps, at least
    finally:
        for cgroup in (pod / "init.scope", pod):
            if cgroup.exists():
                for pid in (cgroup / "cgroup.procs").read_text().split():
                    (UNIFIED / "cgroup.procs").write_text(pid)
                cgroup.rmdir()
