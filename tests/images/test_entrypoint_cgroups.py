"""The worker entrypoint's cgroup steps on real cgroup file systems.

On cgroup v2 a cgroup may hand controllers to its children only while it holds no process, so
the entrypoint moves the container's processes from its namespace's root cgroup into
slurm-jobs.mount/init.scope before slurmd starts (images/common/lib/cgroups.sh,
leave_cgroup_root). This host is cgroup v1, but it mounts the unified (v2) hierarchy beside it: the
function runs there, in a cgroup of its own that stands for the pod's, with processes it must move.

On cgroup v1 each controller's writable mount is rooted at a child of the pod's cgroup named
*.mount (root_jobs_cgroup), which the kubelet's cAdvisor does not track: a job placed below it
must land there, and a cpuset child must have CPUs to take a process at all.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from entrypoint_script import entrypoint_constant, entrypoint_function

pytestmark = pytest.mark.slurm

UNIFIED = Path("/sys/fs/cgroup/unified")
CPUSET = Path("/sys/fs/cgroup/cpuset")
JOBS_CGROUP = entrypoint_constant("JOBS_CGROUP")


def cgroup2_mounted(path: Path) -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[1:3] == [str(path), "cgroup2"] for line in mounts)


@pytest.mark.skipif(os.geteuid() != 0 or not cgroup2_mounted(UNIFIED), reason="needs root and a cgroup2 mount")
def test_every_process_leaves_the_root_cgroup_for_init_scope_below_the_jobs_cgroup(tmp_path):
    name = JOBS_CGROUP
    pod = UNIFIED / ("slurmkube-test-" + uuid.uuid4().hex[:8])
    pod.mkdir()
    script = tmp_path / "probe.sh"
    script.write_text("JOBS_CGROUP=%s\n" % name + entrypoint_function("leave_cgroup_root") + (
        'echo $$ > "$1/cgroup.procs"\n'        # this shell: the "container", in the pod's cgroup
        "sleep 300 & sleep 301 & sleep 302 &\n"  # its daemons (tini, munged, ...)
        'leave_cgroup_root "$1"; echo "rc=$?"\n'
        'echo "left=$(wc -l <"$1/cgroup.procs") moved=$(wc -l <"$1/$JOBS_CGROUP/init.scope/cgroup.procs")"\n'
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
        for cgroup in (pod / name / "init.scope", pod / name, pod):
            if cgroup.exists():
                for pid in (cgroup / "cgroup.procs").read_text().split():
                    (UNIFIED / "cgroup.procs").write_text(pid)
                cgroup.rmdir()


@pytest.mark.skipif(os.geteuid() != 0 or not (CPUSET / "cpuset.cpus").exists(), reason="needs root and cgroup v1")
def test_a_v1_controller_mount_is_rooted_at_a_mount_named_child_that_takes_jobs(tmp_path):
    name = JOBS_CGROUP
    assert name.endswith(".mount")  # the suffix cAdvisor's watcher skips
    pod = CPUSET / ("slurmkube-test-" + uuid.uuid4().hex[:8])
    pod.mkdir()
    (pod / "cpuset.cpus").write_text("0")
    (pod / "cpuset.mems").write_text((CPUSET / "cpuset.mems").read_text())
    mount = tmp_path / "cpuset"
    mount.mkdir()
    script = tmp_path / "probe.sh"
    script.write_text("JOBS_CGROUP=%s\n" % name + entrypoint_function("root_jobs_cgroup") + (
        'mount --bind "$1" "$2"\n'            # the pod's cpuset, as mount_cgroups_writable binds it
        'root_jobs_cgroup "$2"; echo "rc=$?"\n'
        'echo "cpus=$(cat "$2/cpuset.cpus")"\n'
        # slurmd gives each cgroup it makes its parent's CPUs and memory nodes: the root's own must not be empty
        'mkdir "$2/job_1" && for f in cpus mems; do cat "$2/cpuset.$f" > "$2/job_1/cpuset.$f"; done\n'
        'echo $$ > "$2/job_1/tasks" && echo "joined=$(grep :cpuset: /proc/self/cgroup)"\n'
        'echo $$ > %s/tasks\n' % CPUSET
    ))
    try:
        out = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", str(script), str(pod),
                              str(mount)], capture_output=True, text=True, timeout=60, check=False)
        words = dict(w.split("=", 1) for w in out.stdout.split())
        assert words.get("rc") == "0" and words.get("cpus") == "0", (out.stdout, out.stderr)
        assert words.get("joined", "").endswith("/%s/%s/job_1" % (pod.name, name)), (out.stdout, out.stderr)
    finally:
        for cgroup in (pod / name / "job_1", pod / name, pod):
            if cgroup.exists():
                cgroup.rmdir()
