"""`molecule test` of the scenario: converge, idempotence, verify, destroy.

Its converge is the collection's site.yml; verify logs in over ssh through the login Service,
runs a job that writes into the jail on one node and one that reads it on another, and checks
that a check-mode converge changes nothing. It runs on kind as site.yml makes it by default:
its create makes the cluster (1 control plane, 2 workers), the two nodes' jobs run on two
Kubernetes nodes, and its destroy deletes the cluster.

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
from kube_helpers import REPO

pytestmark = pytest.mark.k8s


def steps(scenario: str, output: str) -> list:
    """The Molecule steps that ran, in order, from its log lines."""
    # "[local > converge] Executing" without colour, "local ➜ converge: Executing" with it.
    return re.findall(r"\b%s\W+(\w+)\W+Executing\b" % scenario, output)


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


def molecule_test(scenario: str, tmp_path: Path) -> str:
    """`molecule test -s SCENARIO` on a snapshot; its output, once every step passed: converge,
    Molecule's idempotence (a second converge that fails on any changed task), verify with its
    own check-mode converge, destroy."""
    tree = snapshot(tmp_path / "collections")
    venv_bin = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ["PATH"], ANSIBLE_NOCOLOR="1", NO_COLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"), ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([os.path.join(venv_bin, "molecule"), "test", "-s", scenario], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=3000, check=False)
    output = proc.stdout + proc.stderr
    (tmp_path / "molecule.log").write_text(output)
    assert proc.returncode == 0, output[-8000:]
    ran = steps(scenario, output)
    assert ran[ran.index("converge"):] == ["converge", "idempotence", "verify", "destroy"], ran
    assert re.search(r"\b%s\W+idempotence\W+Executed: Successful" % scenario, output), output[-8000:]
    assert "Idempotence test failed" not in output
    assert "The check-mode converge reports no changes" in output
    return output


@pytest.mark.kind
def test_molecule_default_scenario_on_kind(tmp_path: Path):
    """site.yml's default: a kind cluster made here (1 control plane, 2 workers), the node set spread
    over both workers, so verify's two jobs share the jail across Kubernetes nodes."""
    if os.geteuid() != 0:
        pytest.skip("kind here needs root (docker)")
    output = molecule_test("default", tmp_path)
    assert "The node set spreads over the Kubernetes nodes pods may use" in output
    # destroy deleted the kind cluster whole.
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=slurmkube-molecule"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert left == []
