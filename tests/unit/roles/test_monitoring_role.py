"""Role monitoring's Prometheus configuration (templates/prometheus.yml.j2), rendered by a real
ansible-playbook from the targets the role finds: Debian's Prometheus has no Kubernetes discovery,
so each exporter and operator Service is a DNS job labelled as scrape.yml labels its samples."""

from __future__ import annotations

from pathlib import Path

import yaml
from collection_path import REPO
from playbook_runner import run_task

TEMPLATE = REPO / "roles" / "monitoring" / "templates" / "prometheus.yml.j2"


def rendered(tmp_path: Path, targets: list) -> dict:
    task = {"ansible.builtin.set_fact": {"config": "{{ lookup('ansible.builtin.template', '%s') }}" % TEMPLATE},
            "vars": {"monitoring_prometheus_targets": targets, "monitoring_scrape_interval": "20s"}}
    proc, text = run_task(tmp_path, task, "config")
    assert text is not None, proc.stdout[-3000:]
    return yaml.safe_load(text)


def demo(namespace: str) -> dict:
    return {"service": "demo-exporter", "namespace": namespace, "component": "exporter", "cluster": "demo",
            "port": 9341}


def test_two_clusters_named_alike_in_two_namespaces_are_two_jobs_labelled_apart(tmp_path: Path):
    operator = {"service": "slurmkube-operator", "namespace": "slurmkube-system", "component": "operator",
                "cluster": "", "port": 8080}
    config = rendered(tmp_path, [demo("team-a"), demo("team-b"), operator])
    assert config["global"] == {"scrape_interval": "20s", "evaluation_interval": "20s"}
    assert config["rule_files"] == ["/etc/prometheus/slurmkube.rules.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert sorted(jobs) == ["slurmkube-exporter/team-a/demo-exporter", "slurmkube-exporter/team-b/demo-exporter",
                            "slurmkube-operator/slurmkube-system/slurmkube-operator"]

    def labels(job: dict) -> dict:
        return {rule["target_label"]: rule["replacement"] for rule in job["relabel_configs"]}

    for namespace in ("team-a", "team-b"):
        job = jobs["slurmkube-exporter/%s/demo-exporter" % namespace]
        assert job["dns_sd_configs"] == [{"names": ["demo-exporter.%s.svc" % namespace], "type": "A", "port": 9341,
                                          "refresh_interval": "30s"}]
        assert labels(job) == {"component": "exporter", "slurmkube_cluster": "demo", "slurmkube_namespace": namespace}
    # The operator's samples name each cluster themselves: its target gets only its component.
    operator_job = jobs["slurmkube-operator/slurmkube-system/slurmkube-operator"]
    assert labels(operator_job) == {"component": "operator"}
    assert operator_job["dns_sd_configs"][0]["names"] == ["slurmkube-operator.slurmkube-system.svc"]


def test_no_target_yet_is_a_valid_configuration_with_the_rules(tmp_path: Path):
    config = rendered(tmp_path, [])
    assert config["scrape_configs"] == [] and config["rule_files"] == ["/etc/prometheus/slurmkube.rules.yml"]
