"""`molecule test -s local` on the embedded cluster: converge, idempotence, verify, destroy.

The scenario's converge is the collection's site.yml; verify logs in over ssh through the
login Service, runs a job that writes into the jail on one node and one that reads it on
another, and checks that a check-mode converge changes nothing. The embedded cluster is up
already (session fixture), so the scenario's destroy removes its namespace and leaves the
cluster running.

Molecule runs on a snapshot of the checkout, laid out as an installed collection: an edit
landing between converge and idempotence would otherwise count as a change.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from localkube_helpers import REPO, Cluster, localkube

pytestmark = pytest.mark.k8s


def steps(output: str) -> list:
    """The Molecule steps that ran, in order, from its log lines."""
    # "[local > converge] Executing" without colour, "local ➜ converge: Executing" with it.
    return re.findall(r"\blocal\W+(\w+)\W+Executing\b", output)


def snapshot(root: Path) -> Path:
    """The files git would commit, copied to ROOT/ansible_collections/slurmkube/core."""
    tree = root / "ansible_collections" / "slurmkube" / "core"
    tree.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout
    packed = subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], cwd=REPO, input=files, capture_output=True,
                            check=True).stdout
    subprocess.run(["tar", "-C", str(tree), "-xf", "-"], input=packed, check=True)
    return tree


def test_molecule_local_scenario(localkube_cluster: Cluster, tmp_path: Path):
    tree = snapshot(tmp_path / "collections")
    venv_bin = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ["PATH"], ANSIBLE_NOCOLOR="1", NO_COLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"), ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([os.path.join(venv_bin, "molecule"), "test", "-s", "local"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=3000, check=False)
    output = proc.stdout + proc.stderr
    (tmp_path / "molecule.log").write_text(output)
    assert proc.returncode == 0, output[-8000:]
    ran = steps(output)
    assert ran[ran.index("converge"):] == ["converge", "idempotence", "verify", "destroy"], ran
    # Molecule's idempotence step converges again and fails on any changed task.
    assert re.search(r"\blocal\W+idempotence\W+Executed: Successful", output), output[-8000:]
    assert "Idempotence test failed" not in output
    # verify.yml's own check-mode converge asserted changed=0; its task ran.
    assert "The check-mode converge reports no changes" in output
    # destroy left the embedded cluster it did not start running.
    assert localkube("status", check=False).returncode == 0


def test_molecule_default_scenario_syntax(tmp_path: Path):
    """The kind scenario needs a registry for kind's node image, which CI lacks: only its syntax is checked here."""
    tree = snapshot(tmp_path / "collections")
    venv_bin = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ["PATH"], NO_COLOR="1", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"))
    for playbook in ("create.yml", "destroy.yml", "../shared/converge.yml", "../shared/verify.yml"):
        proc = subprocess.run([os.path.join(venv_bin, "ansible-playbook"), "--syntax-check", "-i", "localhost,",
                               str(tree / "molecule" / "default" / playbook)], env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert proc.returncode == 0, (playbook, proc.stdout[-3000:], proc.stderr[-3000:])
    proc = subprocess.run([os.path.join(venv_bin, "molecule"), "syntax", "-s", "default"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\bdefault\W+syntax\W+Executed: Successful", proc.stdout + proc.stderr)
