"""A real Prometheus (Debian's, images/prometheus) in the test namespace, with the shipped alert
rules, scraping a cluster's exporter and the operator; queried through the API server's
service proxy, as any cluster allows."""

from __future__ import annotations

import io
import json
import os
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Dict, List

import yaml
from kube_helpers import REPO, Cluster, wait_for

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

NAME = "prometheus-test"
PORT = 9090
RULES = REPO / "monitoring" / "prometheus"
# Who may scrape the exporter (spec.exporter.scrapeFrom): this Prometheus only.
SCRAPER = {"podSelector": {"matchLabels": {"app": NAME}}}


def scrape_config(namespace: str, cluster: str, interval: int) -> Dict[str, Any]:
    """Debian builds Prometheus without kubernetes_sd: targets come from the headless Services'
    DNS records (each ready pod), labelled as monitoring/prometheus/scrape.yml labels them."""

    def job(name: str, service: str, port: int, labels: Dict[str, str]) -> Dict[str, Any]:
        return {
            "job_name": name,
            "dns_sd_configs": [{"names": ["%s.%s.svc.cluster.local" % (service, namespace)], "type": "A",
                                "port": port, "refresh_interval": "%ds" % interval}],
            "relabel_configs": [{"target_label": k, "replacement": v} for k, v in sorted(labels.items())],
        }

    return {
        "global": {"scrape_interval": "%ds" % interval, "evaluation_interval": "%ds" % interval},
        "rule_files": ["/etc/prometheus/slurmkube.rules.yml"],
        "scrape_configs": [
            job("slurmkube-exporter", "%s-%s" % (cluster, C.COMPONENT_EXPORTER), 9341,
                {"slurmkube_namespace": namespace, "slurmkube_cluster": cluster, "component": C.COMPONENT_EXPORTER}),
            job("slurmkube-operator", C.OPERATOR_NAME, C.OPERATOR_METRICS_PORT, {"component": C.COMPONENT_OPERATOR}),
        ],
    }


def prometheus_manifests(namespace: str, image: str, cluster: str, interval: int) -> str:
    files = {"prometheus.yml": yaml.safe_dump(scrape_config(namespace, cluster, interval)),
             "slurmkube.rules.yml": (RULES / "slurmkube.rules.yml").read_text(),
             "slurmkube.rules.test.yml": (RULES / "slurmkube.rules.test.yml").read_text()}
    labels = {"app": NAME}
    container = {
        "name": "prometheus", "image": image, "imagePullPolicy": "Never",
        "args": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                 "--web.listen-address=:%d" % PORT],
        "ports": [{"name": "web", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/-/ready", "port": PORT}, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus"},
                         {"name": "data", "mountPath": "/prometheus"}],
    }
    objects: List[Dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME}, "data": files},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"containers": [container],
                                        "volumes": [{"name": "config", "configMap": {"name": NAME}},
                                                    {"name": "data", "emptyDir": {}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME},
         "spec": {"selector": labels, "ports": [{"name": "web", "port": PORT, "targetPort": PORT}]}},
    ]
    return yaml.safe_dump_all(objects)


class Prometheus:
    """The test's Prometheus, asked through `kubectl get --raw` (the API server's service proxy)."""

    def __init__(self, kube: Cluster) -> None:
        self.kube = kube

    def api(self, path: str, **params: str) -> Any:
        raw = "/api/v1/namespaces/%s/services/%s:%d/proxy/api/v1/%s" % (self.kube.namespace, NAME, PORT, path)
        if params:
            raw += "?" + urllib.parse.urlencode(params)
        answer = json.loads(self.kube.kubectl("get", "--raw", raw).stdout)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expression: str) -> List[Dict[str, Any]]:
        """The instant vector (or scalar, as one sample) of an expression."""
        data = self.api("query", query=expression)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def value(self, expression: str) -> float:
        """The one sample's value, or nan when there is none."""
        result = self.query(expression)
        return float(result[0]["value"][1]) if result else float("nan")

    def names(self) -> set:
        """Every metric name with a sample now."""
        return {r["metric"]["__name__"] for r in self.query('group by (__name__) ({__name__=~".+"})')}

    def alerts(self) -> List[Dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def targets_up(self, component: str) -> bool:
        result = self.query('up{component="%s"}' % component)
        return bool(result) and all(r["value"][1] == "1" for r in result)


def deploy_prometheus(kube: Cluster, image: str, cluster: str, interval: int) -> Prometheus:
    kube.apply(prometheus_manifests(kube.namespace, image, cluster, interval))
    kube.kubectl("-n", kube.namespace, "rollout", "status", "deployment/" + NAME, "--timeout=180s", timeout=200)
    prometheus = Prometheus(kube)
    wait_for(lambda: prometheus.api("status/config"), 60, 2)
    return prometheus


# The prometheus-operator's own CRDs, from its Go module on the module proxy (no registry or
# GitHub here): the API server then validates our objects against the real schemas.
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
MONITORING_CRDS = ("servicemonitors", "prometheusrules")


def prometheus_operator_crds() -> List[Path]:
    """The ServiceMonitor and PrometheusRule CRD files, fetched once into the cache."""
    cache = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "prometheus-operator" / \
        PROMETHEUS_OPERATOR_VERSION
    files = [cache / ("monitoring.coreos.com_%s.yaml" % name) for name in MONITORING_CRDS]
    if all(f.exists() for f in files):
        return files
    proxy = os.environ.get("GOPROXY", "https://proxy.golang.org").split(",")[0]
    if proxy in ("direct", "off"):
        proxy = "https://proxy.golang.org"
    url = "%s/%s/@v/%s.zip" % (proxy, PROMETHEUS_OPERATOR, PROMETHEUS_OPERATOR_VERSION)
    with urllib.request.urlopen(url, timeout=300) as response:
        archive = zipfile.ZipFile(io.BytesIO(response.read()))
    cache.mkdir(parents=True, exist_ok=True)
    prefix = "%s@%s/example/prometheus-operator-crd/" % (PROMETHEUS_OPERATOR, PROMETHEUS_OPERATOR_VERSION)
    for target in files:
        target.write_bytes(archive.read(prefix + target.name))
    return files
