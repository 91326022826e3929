"""`bash quickstart.sh` twice on the embedded cluster: the second run changes nothing and its
--diff prints nothing, as a user re-running the main job expects.

It runs right after test_localkube.py (conftest orders it): its operator watches every
namespace, as quickstart's does, and is removed again (teardown.yml) before the session's own
operator starts clusters of its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from localkube_helpers import REPO, Cluster, wait_for

sys.path.insert(0, str(REPO / "tests"))
from playbook_runner import run_playbook

pytestmark = pytest.mark.k8s


def play(*argv: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def recap(output: str) -> dict:
    """PLAY RECAP counts of localhost, summed over the plays."""
    totals: dict = {}
    for line in re.findall(r"^localhost\s+:\s+(.*)$", output, flags=re.M):
        for key, value in re.findall(r"(\w+)=(\d+)", line):
            totals[key] = totals.get(key, 0) + int(value)
    return totals


def demo_charges_its_account(kube: Cluster) -> None:
    """jail_user and slurm_user together: the demo user, in the jail and in slurmdbd with its
    account, runs a job (the example cluster enforces associations) recorded under it."""
    def controller(*argv: str) -> str:
        return kube.kubectl("-n", "slurm", "exec", "demo-controller-0", "-c", "slurmctld", "--", *argv).stdout

    assoc = controller("sacctmgr", "-i", "-n", "-P", "show", "association", "where", "user=demo", "format=Account")
    assert assoc.split() == ["demo"], assoc
    job = controller("runuser", "-u", "demo", "--", "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true")
    record = wait_for(lambda: controller("sacct", "-X", "-n", "-P", "-o", "State,Account,User", "-j",
                                         job.split()[0]).strip() == "COMPLETED|demo|demo", 120, 2)
    assert record


def test_quickstart_twice_changes_nothing_the_second_time(localkube_cluster: Cluster, tmp_path):
    try:
        first = play("bash", "quickstart.sh")
        (tmp_path / "first.log").write_text(first.stdout + first.stderr)
        assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-3000:]
        # the level Slurm's pods need, said on their namespace (Pod Security admission)
        labels = json.loads(localkube_cluster.kubectl("get", "namespace", "slurm", "-o", "json").stdout)["metadata"]
        assert labels["labels"].get("pod-security.kubernetes.io/enforce") == "privileged", labels
        demo_charges_its_account(localkube_cluster)
        second = play("bash", "quickstart.sh", "--diff")
        output = second.stdout + second.stderr
        (tmp_path / "second.log").write_text(output)
        assert second.returncode == 0, output[-6000:]
        counts = recap(second.stdout)
        assert counts.get("ok", 0) > 0 and counts.get("changed") == 0 and counts.get("failed") == 0, counts
        # Ansible prints a diff as "--- before" / "+++ after" lines: none for unchanged objects.
        assert "--- before" not in output and "+++ after" not in output, output[-6000:]
        assert "ssh -i" in second.stdout
    finally:
        teardown = run_playbook(REPO / "playbooks" / "teardown.yml", "-e", "slurmkube_purge=true",
                                "-e", "slurmkube_remove_operator=true")
        assert teardown.returncode == 0, teardown.stdout[-4000:]
