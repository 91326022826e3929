"""Images from a site's registry: playbooks/images.yml pushes the images built here to a registry
on this machine (TLS from a private CA, a login), and a cluster whose controller, worker and login
images name that registry runs, its pods pulling them with the Secret spec.pods names; an
operator installed by slurm_operator from that registry pulls its image with image_pull_secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from kube_helpers import KIND_TEST_CLUSTER, REPO, Cluster, kind
from playbook_runner import run_module, run_playbook
from registry_helpers import Registry, serving
from slurm_helpers import OPERATOR_LABEL, TINY, Operator, running_cluster, tiny_cluster_spec

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

# Last on whichever lane's kind cluster is free first, after the other either_lane modules (the
# smallest `seconds` comes last), on purpose: once the kubelet has pulled an image with a Secret it
# keeps a record of the image's id (Kubernetes 1.35's "ensure secret pulled images", beta and on by
# default, /var/lib/kubelet/image_manager/pulled), and a pod of another namespace that names the
# same image without that Secret must prove it may pull it. The registry holds the very images
# kind.sh loaded (the same ids), so after this module the lane's pods with pullPolicy Never get
# ErrImageNeverPull although the node holds the image (seen 2026-12-01: a module after this one,
# its controller image "gone"; the records deleted and the kubelet restarted, its pods started).
pytestmark = [pytest.mark.k8s, pytest.mark.either_lane(seconds=120)]

CLUSTER = "pulled"
PULLED = ("controller", "worker", "login", "operator")
SECRET = "site-registry"


@pytest.fixture(scope="module")
def registry(kube_cluster: Cluster, tmp_path_factory) -> Iterator[Registry]:
    """The registry, its CA trusted by docker and by the kind cluster's nodes (kind.sh registry-ca)."""
    with serving(tmp_path_factory.mktemp("registry")) as found:
        kind("registry-ca", KIND_TEST_CLUSTER, found.address, str(found.ca))
        yield found


def test_pushed_images_run_a_cluster_whose_pods_pull_them_with_the_secret_spec_pods_names(
        kube_cluster: Cluster, slurm_images: dict, operator: Operator, registry: Registry):
    kube = kube_cluster
    settings = {"slurmkube_registry": registry.address, "slurmkube_registry_username": registry.user,
                "slurmkube_registry_password": registry.password, "slurmkube_image_names": list(PULLED)}
    proc = run_playbook(REPO / "playbooks" / "images.yml", "-e", json.dumps(settings), "-v")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert registry.password not in proc.stdout + proc.stderr
    pushed = {name: "%s/%s" % (registry.address, slurm_images[name]) for name in PULLED}
    for name, ref in pushed.items():
        assert ref in proc.stdout, proc.stdout[-3000:]
        repository, tag = ref[len(registry.address) + 1:].rsplit(":", 1)
        assert {tag, galaxy_version()} <= set(registry.tags(repository)), name
    # Without the login the registry answers nothing: a pod that pulls, pulls with the Secret.
    assert registry.get("slurmkube/controller/tags/list", login=False)[0] == 401
    pull_secret(kube, kube.namespace, registry)
    images = {name: pushed[name] for name in ("controller", "worker", "login")}
    spec = dict(tiny_cluster_spec(), login={"replicas": 1, "resources": TINY}, pods={"imagePullSecrets": [SECRET]},
                images=dict({name: slurm_images[name] for name in ("jail",)}, **images, pullPolicy="IfNotPresent"))
    with running_cluster(kube, operator, CLUSTER, slurm_images, spec, [("cpu", 1)]) as view:
        pods = kube.get_json("pods", "-l", "%s=%s" % (C.LABEL_CLUSTER, CLUSTER))["items"]
        pulled = {}
        for pod in pods:
            for status in pod["status"].get("containerStatuses") or []:
                if status["image"] in images.values():
                    pulled[pod["metadata"]["labels"][C.LABEL_COMPONENT]] = status["imageID"]
        assert set(pulled) == {C.COMPONENT_CONTROLLER, C.COMPONENT_WORKER, C.COMPONENT_LOGIN}, pulled
        # The digest the kubelet ran is the registry's (a pulled image's id names where it came from).
        assert all(image_id.startswith(registry.address + "/slurmkube/") for image_id in pulled.values()), pulled
        assert "%s-cpu-0" % CLUSTER in view.run("sinfo", "-h", "-N", "-o", "%N")


def test_an_operator_from_the_registry_pulls_its_image_with_the_secret_slurm_operator_names(
        kube_cluster: Cluster, slurm_images: dict, registry: Registry, tmp_path: Path):
    """slurm_operator with image_pull_secrets, the operator's image on the registry (pushed by the
    test above): its pod runs the registry's image, which only a login can pull."""
    kube = kube_cluster
    # A second operator, in a namespace of its own that it alone watches: the session's is not touched.
    namespace = kube.namespace + "-operator"
    ref = "%s/%s" % (registry.address, slurm_images["operator"])
    assert ref.rsplit(":", 1)[1] in registry.tags("slurmkube/operator"), "the test above pushes the operator"
    kube.kubectl("create", "namespace", namespace)
    args = {"namespace": namespace, "image": ref, "image_pull_policy": "IfNotPresent",
            "image_pull_secrets": [SECRET], "wait": True, "wait_timeout": 300, "kubeconfig": kube.env["KUBECONFIG"]}
    try:
        pull_secret(kube, namespace, registry)
        proc, result = run_module(tmp_path, "slurm_operator", args, env=kube.env)
        assert result is not None and result["changed"], proc.stdout[-4000:]
        (pod,) = kube.kubectl("-n", namespace, "get", "pods", "-l", OPERATOR_LABEL, "-o",
                              "jsonpath={.items[*].metadata.name}").stdout.split()
        found = json.loads(kube.kubectl("-n", namespace, "get", "pod", pod, "-o", "json").stdout)
        assert found["spec"]["imagePullSecrets"] == [{"name": SECRET}], found["spec"]
        (status,) = found["status"]["containerStatuses"]
        assert status["ready"] and status["imageID"].startswith(registry.address + "/slurmkube/operator@"), status
    finally:
        run_module(tmp_path, "slurm_operator", {"namespace": namespace, "state": "absent",
                                                "kubeconfig": kube.env["KUBECONFIG"]}, env=kube.env)
        kube.kubectl("delete", "namespace", namespace, "--wait=true", check=False, timeout=300)


def pull_secret(kube: Cluster, namespace: str, registry: Registry) -> None:
    """The docker-registry Secret SECRET in NAMESPACE: the registry's login."""
    secret = kube.kubectl("-n", namespace, "create", "secret", "docker-registry", SECRET,
                          "--docker-server=" + registry.address, "--docker-username=" + registry.user,
                          "--docker-password=" + registry.password, "--dry-run=client", "-o", "yaml").stdout
    kube.kubectl("apply", "-f", "-", input=secret)


def galaxy_version() -> str:
    return next(line.split(":", 1)[1].strip() for line in (REPO / "galaxy.yml").read_text().splitlines()
                if line.startswith("version:"))
