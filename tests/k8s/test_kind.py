"""kind on this machine (tools/kind): a 3-node cluster made offline, as users know kind.

The node image is built here (tools/kind/node-image.sh) unless the upstream one can be pulled;
kind.sh makes the cluster (1 control plane + 2 workers) and takes it down. Every pod uses the
toolbox image (static busybox), loaded with `kind load image-archive` as users load images.
What a single-node cluster cannot show is shown here: pods on two nodes talk (each sees the
other's own address), NetworkPolicy is enforced between nodes, one host directory is shared
by every node, a shared claim holds no more than its size, and the teardown leaves nothing on the
host (the volumes' filesystem unmounted and removed too).

The 3-node cluster is the session's (kube_cluster; tests/run's second pytest makes it with two
workers, SLURMKUBE_TEST_KIND_WORKERS=2), in a namespace of this module's: a cluster made and
deleted here for these checks alone was two minutes of CI's second lane. What `kind.sh down`
leaves is checked on the one-node cluster the pinned-image test makes and deletes.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from kube_helpers import (
    KIND_TEST_CLUSTER,
    REPO,
    TOOLBOX_IMAGE,
    UP_LOGS,
    Cluster,
    exported_env,
    kind,
    toolbox_archive,
    wait_for,
)
from registry_helpers import free_port, registry_program

pytestmark = [pytest.mark.k8s, pytest.mark.second_lane]

NAMESPACE = "kt"


def docker(*args: str, timeout: float = 120) -> str:
    return subprocess.run(["docker", *args], text=True, capture_output=True, check=True, timeout=timeout).stdout


@pytest.fixture(scope="module")
def cluster_name() -> str:
    return KIND_TEST_CLUSTER


@pytest.fixture(scope="module")
def lib_modules_existed() -> bool:
    return Path("/lib/modules").exists()


def cluster_volumes(cluster_name: str) -> set:
    """The docker volumes the cluster's node containers mount (each node's /var)."""
    nodes = docker("ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=" + cluster_name).split()
    mounts = docker("inspect", "-f", '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}', *nodes)
    return set(mounts.split())


@pytest.fixture(scope="module")
def up_log(kube_cluster: Cluster) -> str:
    """What `kind.sh up` wrote on stderr as the session made its cluster ("" when it was there)."""
    return UP_LOGS.get(KIND_TEST_CLUSTER, "")


@pytest.fixture(scope="module")
def kind_cluster(kube_cluster: Cluster, lib_modules_existed: bool) -> Iterator[Cluster]:
    """The session's cluster, in this module's namespace (gone with the module)."""
    cluster = Cluster(env=kube_cluster.env, namespace=NAMESPACE)
    if len(workers(cluster)) != 2:
        pytest.skip("needs a kind cluster with two workers (SLURMKUBE_TEST_KIND_WORKERS=2)")
    cluster.kubectl("create", "namespace", NAMESPACE)
    yield cluster
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def node_names(kube: Cluster) -> dict:
    """Node name -> whether it runs the control plane."""
    nodes = json.loads(kube.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {n["metadata"]["name"]: "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"] for n in nodes}


def workers(kube: Cluster) -> list:
    return sorted(name for name, control in node_names(kube).items() if not control)


def pod_on(name: str, node: str, command: str, labels: str = "{}", extra: str = "") -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, labels: {labels}}}
        spec:
          nodeSelector: {{kubernetes.io/hostname: {node}}}
          terminationGracePeriodSeconds: 0
          containers:
            - name: main
              image: {TOOLBOX_IMAGE}
              imagePullPolicy: Never
              command: [sh, -c, '{command}']
        """) + extra


@pytest.fixture(scope="module")
def web(kind_cluster: Cluster) -> Cluster:
    """An HTTP server on the first worker behind a Service, a client on the second."""
    first, second = workers(kind_cluster)[:2]
    server = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -vv -p 8080 -h /www"
    kind_cluster.apply(pod_on("web", first, server, labels="{app: web}")
                       + textwrap.dedent("""\
                           ---
                           apiVersion: v1
                           kind: Service
                           metadata: {name: web}
                           spec:
                             selector: {app: web}
                             ports: [{port: 80, targetPort: 8080}]
                           """))
    kind_cluster.apply(pod_on("client", second, "exec sleep 3600", labels="{app: client}"))
    kind_cluster.wait_pod_ready("web")
    kind_cluster.wait_pod_ready("client")
    return kind_cluster


def pod_ip(kube: Cluster, pod: str) -> str:
    return kube.get_json("pod", pod)["status"]["podIP"]


def fetch(kube: Cluster, url: str) -> subprocess.CompletedProcess:
    return kube.exec("client", "wget", "-q", "-T", "3", "-O", "-", url, check=False)


def test_one_control_plane_and_two_workers_are_ready_and_workloads_stay_off_the_control_plane(kind_cluster: Cluster):
    nodes = json.loads(kind_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert sorted(node_names(kind_cluster).values()) == [False, False, True]
    for node in nodes:
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["metadata"]["name"]
        taints = {t["key"] for t in node["spec"].get("taints") or []}
        control = "node-role.kubernetes.io/control-plane" in node["metadata"]["labels"]
        assert ("node-role.kubernetes.io/control-plane" in taints) == control, node["metadata"]["name"]


def test_the_nodes_run_the_pinned_upstream_image_or_when_it_cannot_be_pulled_the_one_built_here(
        kind_cluster: Cluster, cluster_name: str, up_log: str):
    pinned = subprocess.run(["bash", "-c", f'. "{REPO}/tools/kind/versions.env"; echo "$KIND_UPSTREAM_NODE_IMAGE"'],
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert pinned.startswith("kindest/node:v1.35.") and "@sha256:" in pinned, pinned
    image = docker("inspect", "-f", "{{.Config.Image}}", f"{cluster_name}-control-plane").strip()
    if image != pinned:
        assert image.startswith("slurmkube/kind-node:"), image
        assert subprocess.run(["docker", "image", "inspect", pinned], capture_output=True, check=False).returncode
        # Said as the cluster was made (when this session made it).
        assert not up_log or f"cannot pull {pinned}: the node image is built here" in up_log, up_log


def test_kind_sh_env_gives_the_kubectl_of_the_nodes_own_kubernetes(kind_cluster: Cluster, cluster_name: str):
    """kind.sh env puts the control plane's own kubectl first on PATH: client and server are one build."""
    kubectl = Path(exported_env(kind("env", cluster_name).stdout)["PATH"].split(os.pathsep)[0]) / "kubectl"
    assert kubectl.parent == Path(kind("kubeconfig", cluster_name).stdout.strip()).parent / "bin"
    versions = json.loads(kind_cluster.kubectl("version", "-o", "json").stdout)
    assert versions["clientVersion"]["gitVersion"] == versions["serverVersion"]["gitVersion"], versions
    in_node = docker("exec", f"{cluster_name}-control-plane", "sha256sum", "/usr/bin/kubectl").split()[0]
    assert subprocess.run(["sha256sum", str(kubectl)], capture_output=True, text=True,
                          check=True).stdout.split()[0] == in_node  # fmt: skip


def test_pods_on_two_nodes_talk_and_each_sees_the_others_own_address(web: Cluster):
    first, second = workers(web)[:2]
    assert web.get_json("pod", "web")["spec"]["nodeName"] == first
    assert fetch(web, "http://%s:8080/" % pod_ip(web, "web")).stdout.strip() == "web"
    client_ip = pod_ip(web, "client")
    # busybox httpd -vv logs each request's peer: the client pod's own address, not a node's.
    wait_for(lambda: client_ip in web.kubectl("-n", NAMESPACE, "logs", "web").stderr + web.kubectl(
        "-n", NAMESPACE, "logs", "web").stdout, 10, 1)
    assert web.get_json("pod", "client")["spec"]["nodeName"] == second


def test_a_service_name_resolves_and_answers_from_another_node(web: Cluster):
    # kube-proxy on the client's node programs a new Service a moment after it is made.
    url = "http://web.%s.svc.cluster.local/" % NAMESPACE
    wait_for(lambda: fetch(web, url).stdout.strip() == "web", 30, 1,
             explain=lambda: "%s\n%s" % (fetch(web, url), web.kubectl("-n", NAMESPACE, "get", "endpointslices").stdout))


def test_network_policy_is_enforced_between_nodes(web: Cluster):
    url = "http://%s:8080/" % pod_ip(web, "web")
    policy = textwrap.dedent("""\
        apiVersion: networking.k8s.io/v1
        kind: NetworkPolicy
        metadata: {name: web-only-from-%s}
        spec:
          podSelector: {matchLabels: {app: web}}
          policyTypes: [Ingress]
          ingress: [{from: [{podSelector: {matchLabels: {app: %s}}}]}]
        """)
    web.apply(policy % ("nobody", "nobody"))
    try:
        wait_for(lambda: fetch(web, url).returncode != 0, 60, 2)
        web.apply(policy % ("client", "client"))
        wait_for(lambda: fetch(web, url).stdout.strip() == "web", 60, 2)
    finally:
        web.kubectl("-n", NAMESPACE, "delete", "networkpolicy", "--all")


def test_every_node_shares_one_host_directory(kind_cluster: Cluster, cluster_name: str):
    shared = kind("shared", cluster_name).stdout.strip()
    first, second = workers(kind_cluster)[:2]
    volume = ("      volumeMounts: [{name: shared, mountPath: /shared}]\n"
              "  volumes: [{name: shared, hostPath: {path: %s}}]\n" % shared)
    marker = uuid.uuid4().hex
    kind_cluster.apply(pod_on("writer", first, f"echo {marker} > /shared/from-writer && exec sleep 3600", extra=volume))
    kind_cluster.wait_pod_ready("writer")
    kind_cluster.apply(pod_on("reader", second, "exec sleep 3600", extra=volume))
    kind_cluster.wait_pod_ready("reader")
    assert kind_cluster.exec("reader", "cat", "/shared/from-writer").stdout.strip() == marker
    assert (Path(shared) / "from-writer").read_text().strip() == marker


def test_the_default_storage_class_binds_a_claim(kind_cluster: Cluster):
    node = workers(kind_cluster)[0]
    kind_cluster.apply(textwrap.dedent("""\
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {name: data}
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 10Mi}}
        """) + "---\n" + pod_on("user", node, "echo kept > /data/file && exec sleep 3600", extra=(
        "      volumeMounts: [{name: data, mountPath: /data}]\n"
        "  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]\n")))
    kind_cluster.wait_pod_ready("user", timeout=180)
    assert kind_cluster.get_json("pvc", "data")["status"]["phase"] == "Bound"
    assert kind_cluster.exec("user", "cat", "/data/file").stdout.strip() == "kept"


def test_a_shared_claim_is_read_and_written_by_pods_on_two_nodes(kind_cluster: Cluster, cluster_name: str):
    """slurmkube-shared: ReadWriteMany volumes in the host directory every node mounts."""
    first, second = workers(kind_cluster)[:2]
    claim = "      volumeMounts: [{name: jail, mountPath: /jail}]\n" \
            "  volumes: [{name: jail, persistentVolumeClaim: {claimName: jail}}]\n"
    kind_cluster.apply(textwrap.dedent("""\
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {name: jail}
        spec:
          storageClassName: slurmkube-shared
          accessModes: [ReadWriteMany]
          resources: {requests: {storage: 10Mi}}
        """))
    wait_for(lambda: kind_cluster.get_json("pvc", "jail")["status"].get("phase") == "Bound", 60, 2)
    kind_cluster.apply(pod_on("jail-a", first, "echo from-a > /jail/a && exec sleep 3600", extra=claim))
    kind_cluster.apply(pod_on("jail-b", second, "echo from-b > /jail/b && exec sleep 3600", extra=claim))
    kind_cluster.wait_pod_ready("jail-a")
    kind_cluster.wait_pod_ready("jail-b")
    assert kind_cluster.exec("jail-a", "cat", "/jail/b").stdout.strip() == "from-b"
    assert kind_cluster.exec("jail-b", "cat", "/jail/a").stdout.strip() == "from-a"
    volume = kind_cluster.get_json("pvc", "jail")["spec"]["volumeName"]
    directory = Path(kind_cluster.get_json("pv", volume)["spec"]["hostPath"]["path"])
    assert directory.parent == Path(kind("shared", cluster_name).stdout.strip()) / "volumes"
    # A released volume's directory goes with it.
    kind_cluster.kubectl("-n", NAMESPACE, "delete", "pod", "jail-a", "jail-b", "--wait=true", timeout=120)
    kind_cluster.kubectl("-n", NAMESPACE, "delete", "pvc", "jail", "--wait=true", timeout=120)
    wait_for(lambda: not directory.exists(), 60, 2)


def test_a_shared_claim_holds_no_more_than_its_size_and_the_class_no_more_than_half_the_free_disk(
        kind_cluster: Cluster, cluster_name: str):
    """kind.sh puts the class's volumes on a sparse btrfs image with quotas (this host's kernel has
    none for ext4 or XFS): each volume a subvolume limited to its claim's size, so a write past it
    fails with "Disk quota exceeded" and takes no more of the host's disk; removed, it may be
    written again. All volumes together are bound by the image, half the host's free space."""
    node = workers(kind_cluster)[0]
    volumes = Path(kind("shared", cluster_name).stdout.strip()) / "volumes"
    assert subprocess.run(["stat", "-f", "-c", "%T", str(volumes)], capture_output=True, text=True,
                          check=True).stdout.strip() == "btrfs"
    image = volumes.parent.parent / "volumes.btrfs"
    host = os.statvfs(image)
    assert image.stat().st_size <= host.f_bavail * host.f_frsize + image.stat().st_blocks * 512
    kind_cluster.apply(textwrap.dedent("""\
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {name: small}
        spec:
          storageClassName: slurmkube-shared
          accessModes: [ReadWriteMany]
          resources: {requests: {storage: 32Mi}}
        """) + "---\n" + pod_on("filler", node, "exec sleep 3600", extra=(
        "      volumeMounts: [{name: small, mountPath: /small}]\n"
        "  volumes: [{name: small, persistentVolumeClaim: {claimName: small}}]\n")))
    kind_cluster.wait_pod_ready("filler", timeout=180)
    fill = kind_cluster.exec("filler", "dd", "if=/dev/zero", "of=/small/fill", "bs=1M", "count=64", check=False)
    assert fill.returncode != 0 and "Disk quota exceeded" in fill.stderr, fill.stderr
    written = int(kind_cluster.exec("filler", "stat", "-c", "%s", "/small/fill").stdout)
    assert 0 < written <= 32 * 2**20, written
    kind_cluster.exec("filler", "rm", "/small/fill")
    kind_cluster.exec("filler", "dd", "if=/dev/zero", "of=/small/again", "bs=1M", "count=16")
    kind_cluster.kubectl("-n", NAMESPACE, "delete", "pod", "filler", "--wait=true", timeout=120)
    kind_cluster.kubectl("-n", NAMESPACE, "delete", "pvc", "small", "--wait=true", timeout=120)


# ------------------------------------------------------------- images loaded as users load them

def test_kind_load_skips_an_image_every_node_holds(kind_cluster: Cluster, cluster_name: str):
    """`kind load docker-image` asks each node (crictl) what it holds: an image every node has (the
    toolbox, loaded from its archive) is not sent again. Slurm on this shape of cluster is
    tests/k8s/test_multinode_slurm.py's, on the session's cluster of two workers."""
    docker("load", "-i", str(toolbox_archive()))
    again = kind("load", cluster_name, TOOLBOX_IMAGE).stderr
    assert again.count("found to be already present on all nodes") == 1, again


# ------------------------------------------------------------- the pinned image, when it can be pulled

def answers(url: str) -> bool:
    return subprocess.run(["curl", "-fsS", url], capture_output=True, timeout=10, check=False).returncode == 0


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[str]:
    """A registry on this machine (registry_helpers.registry_program), serving as Docker Hub or a
    mirror serves a pinned image: its host:port. Docker takes 127.0.0.1 over HTTP."""
    base = tmp_path_factory.mktemp("registry")
    program = registry_program(base)
    address = f"127.0.0.1:{free_port()}"
    (base / "config.yml").write_text(textwrap.dedent(f"""\
        version: 0.1
        storage: {{filesystem: {{rootdirectory: {base / "data"}}}}}
        http: {{addr: "{address}"}}
        """))
    with open(base / "registry.log", "w") as log:
        server = subprocess.Popen([str(program), "serve", str(base / "config.yml")],
                                  stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        wait_for(lambda: answers(f"http://{address}/v2/"), 30, 0.5, explain=(base / "registry.log").read_text)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_pinned_image_docker_can_pull_is_pulled_and_run_as_it_is_and_down_leaves_nothing(
        registry: str, cluster_name: str, lib_modules_existed: bool):
    """The upstream image is used when it can be pulled. The pinned kindest/node is out of reach here,
    so the pin names our node image pushed to a registry on this machine, by digest, as a mirror would
    serve it (a copy pulled on another machine is known by its label, not its name). One node: it must
    come up from that image unchanged, with the kubectl and the shared class of its own nodes. Then
    `kind.sh down` leaves nothing of it behind."""
    built = subprocess.run(["bash", str(REPO / "tools/kind/node-image.sh")], capture_output=True, text=True,
                           check=True, timeout=3600).stdout.strip()  # fmt: skip
    repository = f"{registry}/kindest/node"
    docker("tag", built, f"{repository}:pinned")
    # Its layers gzipped on the way: 1.26 GB took over 120 s beside a cold CI run's other lane.
    docker("push", f"{repository}:pinned", timeout=900)
    digests = json.loads(docker("image", "inspect", built))[0]["RepoDigests"]
    pinned = next(d for d in digests if d.startswith(repository + "@sha256:"))
    # Untagged, the image is known to docker by its digest no more: kind.sh has to pull it.
    docker("rmi", f"{repository}:pinned")
    assert subprocess.run(["docker", "image", "inspect", pinned], capture_output=True, check=False).returncode != 0
    name = cluster_name + "-pin"
    env = dict(os.environ, SLURMKUBE_KIND_UPSTREAM_NODE_IMAGE=pinned, SLURMKUBE_KIND_WORKERS="0")
    try:
        up = kind("up", name, env=env)
        assert "cannot pull" not in up.stderr and "building" not in up.stderr, up.stderr
        assert docker("inspect", "-f", "{{.Config.Image}}", f"{name}-control-plane").strip() == pinned
        kube = Cluster(env=exported_env(kind("env", name).stdout), namespace="default")
        kube.kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=120s", timeout=150)
        assert kube.kubectl("get", "storageclass", "slurmkube-shared", "-o", "name").stdout.strip() == \
            "storageclass.storage.k8s.io/slurmkube-shared"
        versions = json.loads(kube.kubectl("version", "-o", "json").stdout)
        assert versions["clientVersion"]["gitVersion"] == versions["serverVersion"]["gitVersion"], versions
        down_leaves_nothing_behind(name, lib_modules_existed, env)
    finally:
        kind("down", name, env=env, check=False)
        subprocess.run(["docker", "rmi", pinned], capture_output=True, check=False)


def test_up_again_reuses_the_cluster(kind_cluster: Cluster, cluster_name: str):
    before = docker("ps", "-q", "--no-trunc", "--filter", "label=io.x-k8s.kind.cluster=" + cluster_name).split()
    again = kind("up", cluster_name)
    assert "exists" in again.stderr
    after = docker("ps", "-q", "--no-trunc", "--filter", "label=io.x-k8s.kind.cluster=" + cluster_name).split()
    assert sorted(after) == sorted(before) and len(after) == 3


def down_leaves_nothing_behind(name: str, lib_modules_existed: bool, env: dict) -> None:
    """`kind.sh down NAME`: its nodes and their volumes are gone (compared by name: another lane's
    cluster may make volumes meanwhile), its shared directory and the volumes' filesystem too."""
    shared = Path(kind("shared", name, env=env).stdout.strip())
    volumes = cluster_volumes(name)
    assert volumes, "kind gives each node a /var volume"
    kind("down", name, env=env)
    assert docker("ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=" + name).split() == []
    assert not volumes & set(docker("volume", "ls", "-q").split())
    if not docker("ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster").split():
        assert "kind" not in docker("network", "ls", "--format", "{{.Name}}").split()
        assert Path("/lib/modules").exists() == lib_modules_existed
    assert not shared.exists()
    # The volumes' filesystem unmounted, its loop device freed.
    assert str(shared) not in Path("/proc/mounts").read_text()
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True, check=False).stdout
    assert str(shared.parent) not in loops, loops
    assert name not in kind("kind", "get", "clusters").stdout.split()
