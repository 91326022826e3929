"""Role kubernetes, run by a real ansible-playbook: which Kubernetes a play may ask to make here.

Only the refusals run here (they come before anything is made); making a kind cluster is the
k8s tier's (tests/k8s/test_quickstart.py, which runs Molecule's scenario too)."""

from __future__ import annotations

import re
from pathlib import Path

from playbook_runner import run_role

CLUSTER = {"metadata": {"name": "demo"}}


def test_the_removed_localkube_is_refused_naming_what_to_use_instead(tmp_path: Path):
    proc = run_role(tmp_path, "kubernetes", {"slurmkube_kubernetes": "localkube", "slurmkube_cluster": CLUSTER},
                    "kubernetes_made_here")[0]
    assert proc.returncode != 0
    output = " ".join((proc.stdout + proc.stderr).split())
    assert ("slurmkube_kubernetes=localkube (the embedded single-node Kubernetes) was removed in "
            "slurmkube.core 0.4.0") in output
    assert "use the default, kind" in output and "slurmkube_kubeconfig" in output
    assert "Make the kind cluster" not in output


def test_an_unknown_kubernetes_is_refused_naming_the_setting(tmp_path: Path):
    proc = run_role(tmp_path, "kubernetes", {"slurmkube_kubernetes": "minikube", "slurmkube_cluster": CLUSTER},
                    "kubernetes_made_here")[0]
    assert proc.returncode != 0
    assert "slurmkube_kubernetes is kind, not minikube" in proc.stdout + proc.stderr


def test_a_given_kubeconfig_makes_nothing_here(tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    proc, made_here = run_role(tmp_path, "kubernetes", {"slurmkube_kubeconfig": str(kubeconfig),
                                                        "slurmkube_cluster": CLUSTER}, "kubernetes_made_here")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert made_here == ""


def test_connection_options_alone_make_nothing_here(tmp_path: Path):
    """A cluster of your own reached with host and api_key (slurmkube_kubernetes_auth): no kind."""
    auth = {"host": "https://127.0.0.1:6443", "api_key": "token"}
    proc, made_here = run_role(tmp_path, "kubernetes", {"slurmkube_kubernetes_auth": auth,
                                                        "slurmkube_cluster": CLUSTER}, "kubernetes_made_here")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert made_here == ""
    assert re.search(r"TASK \[Make the kind cluster\] \**\s+skipping:", proc.stdout), proc.stdout[-3000:]
