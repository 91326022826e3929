"""One module_defaults for kubernetes.core's modules and ours (issue 39): group/slurmkube.core.kube
extends kubernetes.core.k8s, so the connection set there reaches a kubernetes.core task too."""

from __future__ import annotations

import json
import textwrap

from collection_path import REPO
from playbook_runner import run_playbook

PLAY = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      module_defaults:
        group/slurmkube.core.kube:
          kubeconfig: /nonexistent/kubeconfig-from-defaults
      tasks:
        - name: Read pods
          kubernetes.core.k8s_info:
            kind: Pod
          ignore_errors: true
        - name: Read the cluster
          slurmkube.core.slurm_cluster_info:
            name: demo
            namespace: hpc
    """)


def test_the_groups_defaults_reach_kubernetes_core_and_slurmkube_tasks_alike(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY)
    proc = run_playbook(playbook)
    output = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    read_pods, read_cluster = output.split("TASK [Read the cluster]")
    assert "Could not find or access '/nonexistent/kubeconfig-from-defaults'" in read_pods, output[-3000:]
    assert "kubeconfig: ******** does not exist" in read_cluster, output[-3000:]  # the value is no_log


def test_the_playbooks_connection_setting_reaches_their_kubernetes_tasks(tmp_path):
    """slurmkube_kubernetes_auth is the plays' module_defaults: scale.yml's first Kubernetes task
    goes to the host given there (nothing listens on port 1), and the token is not printed."""
    auth = {"host": "https://127.0.0.1:1", "api_key": "secret-token-not-to-print", "validate_certs": False}
    proc = run_playbook(REPO / "playbooks" / "scale.yml", "-e", json.dumps({
        "slurmkube_kubernetes_auth": auth, "slurmkube_node_set": "cpu", "slurmkube_replicas": 1}))
    output = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "TASK [Read the cluster and its node sets]" in output, output[-3000:]
    failed = output.split("TASK [Read the cluster and its node sets]")[1]
    assert "host='127.0.0.1', port=1" in failed, failed[:3000]
    assert "secret-token-not-to-print" not in proc.stdout + proc.stderr
