"""localkube is a real Kubernetes: what the product needs from a cluster works on it.

Every pod uses images made on this machine (nothing can be pulled): the toolbox image
(static busybox) that localkube imports, and one built here with docker and imported.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import textwrap
import urllib.request
import uuid
from pathlib import Path

import pytest
from localkube_helpers import ON_KIND, Cluster, localkube, wait_for

pytestmark = [pytest.mark.k8s,
              pytest.mark.skipif(ON_KIND, reason="localkube itself (SLURMKUBE_TEST_KUBERNETES=kind)")]

TOOLBOX = "localkube.local/toolbox:1"
NODE_IP = "10.244.0.1"
CACHE = Path(__import__("os").environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "localkube"
RUN = CACHE / "run"


def sleeper_pod(name: str, volumes: str = "", mounts: str = "") -> str:
    return (
        textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          terminationGracePeriodSeconds: 0
          containers:
            - name: main
              image: {TOOLBOX}
              imagePullPolicy: Never
              command: [sleep, "3600"]
        """)
        + mounts
        + volumes
    )


@pytest.fixture(scope="module")
def web(localkube_cluster: Cluster) -> Cluster:
    """A StatefulSet of two HTTP servers behind a headless, a ClusterIP and a NodePort Service."""
    c = localkube_cluster
    c.apply(
        textwrap.dedent(f"""\
        apiVersion: v1
        kind: Service
        metadata: {{name: web}}
        spec:
          clusterIP: None
          selector: {{app: web}}
          ports: [{{name: http, port: 8080}}]
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: web-svc}}
        spec:
          selector: {{app: web}}
          ports: [{{name: http, port: 80, targetPort: 8080}}]
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: web-nodeport}}
        spec:
          type: NodePort
          selector: {{app: web}}
          ports: [{{name: http, port: 80, targetPort: 8080}}]
        ---
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {{name: web}}
        spec:
          serviceName: web
          replicas: 2
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec:
              terminationGracePeriodSeconds: 0
              containers:
                - name: httpd
                  image: {TOOLBOX}
                  imagePullPolicy: Never
                  command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www']
                  readinessProbe:
                    tcpSocket: {{port: 8080}}
                    periodSeconds: 1
        """)
    )
    c.apply(sleeper_pod("client"))
    c.kubectl("-n", c.namespace, "rollout", "status", "statefulset/web", "--timeout=180s", timeout=190)
    c.wait_pod_ready("client")
    return c


def test_up_again_is_idempotent(localkube_cluster: Cluster):
    result = localkube("up")
    assert "starting" not in result.stderr, result.stderr
    assert localkube("status").returncode == 0


def test_custom_resource_definition_and_custom_resource(localkube_cluster: Cluster):
    c = localkube_cluster
    group = f"t{uuid.uuid4().hex[:6]}.localkube.test"
    c.kubectl(
        "apply",
        "-f",
        "-",
        input=textwrap.dedent(f"""\
        apiVersion: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        metadata: {{name: widgets.{group}}}
        spec:
          group: {group}
          scope: Namespaced
          names: {{plural: widgets, singular: widget, kind: Widget}}
          versions:
            - name: v1
              served: true
              storage: true
              schema:
                openAPIV3Schema:
                  type: object
                  properties:
                    spec:
                      type: object
                      properties:
                        size: {{type: integer}}
        """),
    )
    try:
        c.wait_crd_established(f"widgets.{group}")
        c.apply(f"apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: w1}}\nspec: {{size: 3}}\n")
        widget = c.get_json(f"widgets.{group}", "w1")
        assert widget["spec"] == {"size": 3}
    finally:
        c.kubectl("delete", "crd", f"widgets.{group}", "--wait=false", check=False)


def test_statefulset_pods_run(web: Cluster):
    for pod in ("web-0", "web-1"):
        assert web.get_json("pod", pod)["status"]["phase"] == "Running"


def resolve(web: Cluster, name: str, expected_ip: str) -> str:
    """nslookup from the client pod until the answer has the IP: a new pod's record reaches
    CoreDNS through its EndpointSlice watch a moment after the pod is Ready."""

    def lookup() -> str:
        result = web.exec("client", "nslookup", name, check=False)
        return result.stdout if expected_ip in result.stdout else ""

    return wait_for(lookup, timeout=30)


def test_pod_resolves_headless_pod_name_and_service_name(web: Cluster):
    ns = web.namespace
    pod_ip = web.get_json("pod", "web-1")["status"]["podIP"]
    assert resolve(web, f"web-1.web.{ns}.svc.cluster.local", pod_ip)
    cluster_ip = web.get_json("service", "web-svc")["spec"]["clusterIP"]
    assert resolve(web, f"web-svc.{ns}.svc.cluster.local", cluster_ip)


def test_clusterip_service_answers(web: Cluster):
    # The short name goes through the pod's DNS search path too.
    body = web.exec("client", "wget", "-q", "-T", "5", "-O-", "http://web-svc/").stdout
    assert re.fullmatch(r"web-[01]\n", body), body


def test_nodeport_answers_from_host(web: Cluster):
    port = web.get_json("service", "web-nodeport")["spec"]["ports"][0]["nodePort"]

    def fetch() -> str:
        try:
            with urllib.request.urlopen(f"http://{NODE_IP}:{port}/", timeout=5) as response:
                return response.read().decode()
        except OSError:
            return ""

    assert re.fullmatch(r"web-[01]\n", wait_for(fetch, timeout=30))


def test_two_pods_share_a_file_through_one_rwx_claim(localkube_cluster: Cluster):
    c = localkube_cluster
    c.apply(
        textwrap.dedent("""\
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {name: shared}
        spec:
          accessModes: [ReadWriteMany]
          resources: {requests: {storage: 1Gi}}
        """)
    )
    volumes = "  volumes:\n    - name: shared\n      persistentVolumeClaim: {claimName: shared}\n"
    mounts = "      volumeMounts:\n        - {name: shared, mountPath: /shared}\n"
    for name in ("writer", "reader"):
        c.apply(sleeper_pod(name, volumes=volumes, mounts=mounts))
    for name in ("writer", "reader"):
        c.wait_pod_ready(name)
    claim = c.get_json("pvc", "shared")
    assert claim["status"]["phase"] == "Bound"
    assert "ReadWriteMany" in claim["status"]["accessModes"]
    c.exec("writer", "sh", "-c", "echo written-by-writer > /shared/note")
    assert c.exec("reader", "cat", "/shared/note").stdout == "written-by-writer\n"


def test_kubectl_exec_and_logs(localkube_cluster: Cluster):
    c = localkube_cluster
    c.apply(
        textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: talker}}
        spec:
          terminationGracePeriodSeconds: 0
          containers:
            - name: main
              image: {TOOLBOX}
              imagePullPolicy: Never
              command: [sh, -c, 'echo hello-from-logs; exec sleep 3600']
        """)
    )
    c.wait_pod_ready("talker")
    assert c.exec("talker", "sh", "-c", "echo $((6 * 7))").stdout == "42\n"
    logs = wait_for(lambda: c.kubectl("-n", c.namespace, "logs", "talker").stdout, timeout=30)
    assert "hello-from-logs" in logs


def test_pod_runs_an_imported_local_image(localkube_cluster: Cluster, tmp_path: Path):
    c = localkube_cluster
    repo = Path(__file__).resolve().parents[2]
    if subprocess.run(["bash", str(repo / "images" / "ensure-docker.sh")], check=False).returncode != 0:
        pytest.fail("no docker engine to build the image with")
    marker = f"built-here-{uuid.uuid4().hex[:8]}"
    (tmp_path / "hello.c").write_text(
        "#include <stdio.h>\n#include <unistd.h>\n"
        f'int main(void) {{ puts("{marker}"); fflush(stdout); for (;;) pause(); }}\n'
    )
    subprocess.run(["gcc", "-static", "-Os", "-o", str(tmp_path / "hello"), str(tmp_path / "hello.c")], check=True)
    (tmp_path / "Dockerfile").write_text('FROM scratch\nCOPY hello /hello\nENTRYPOINT ["/hello"]\n')
    image = f"slurmkube-test/hello:{marker}"
    subprocess.run(["docker", "build", "-q", "-t", image, str(tmp_path)], check=True, capture_output=True)
    try:
        localkube("import-image", image)
    finally:
        subprocess.run(["docker", "rmi", image], capture_output=True, check=False)
    c.apply(
        textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: local-image}}
        spec:
          terminationGracePeriodSeconds: 0
          containers:
            - {{name: main, image: "{image}", imagePullPolicy: Never}}
        """)
    )
    c.wait_pod_ready("local-image")
    assert marker in wait_for(lambda: c.kubectl("-n", c.namespace, "logs", "local-image").stdout, timeout=30)


def leftovers() -> list[str]:
    """Everything of localkube that `down` must remove, as readable strings."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            exe = str((proc / "exe").readlink())
        except OSError:
            continue
        if exe.startswith(str(CACHE)):
            found.append(f"process {proc.name} {exe}")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4]
        if mount_point.startswith(str(RUN)):
            found.append(f"mount {mount_point}")
    if subprocess.run(["ip", "link", "show", "lkbr0"], capture_output=True, check=False).returncode == 0:
        found.append("bridge lkbr0")
    for save in ("iptables-save", "ip6tables-save"):
        for table in ("filter", "nat", "mangle"):
            rules = subprocess.run([save, "-t", table], capture_output=True, text=True, check=False).stdout
            for line in rules.splitlines():
                if re.search(r"KUBE-|CNI-|lkbr0|localkube|10\.244\.0\.", line):
                    found.append(f"{save} {table}: {line}")
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob("*/localkube")]
    found += [f"host path {p}" for p in (Path("/var/lib/kubelet"), Path("/run/containerd/runc/k8s.io")) if p.exists()]
    if RUN.exists():
        found.append(f"state dir {RUN}")
    return found


def shim_sockets() -> list[Path]:
    """containerd 1.7 names each shim's socket sha256(<containerd address>/<namespace>/<id>)."""
    address = RUN / "containerd" / "containerd.sock"
    ids = subprocess.run(
        [str(next(CACHE.glob("v*/bin/ctr"))), "--address", str(address), "-n", "k8s.io", "containers", "ls", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [Path("/run/containerd/s") / hashlib.sha256(f"{address}/k8s.io/{i}".encode()).hexdigest() for i in ids]


def test_down_removes_everything_and_up_works_again(localkube_cluster: Cluster):
    """Last on purpose: the cluster is rebuilt from empty state afterwards."""
    sockets = shim_sockets()
    assert sockets, "no containers: nothing to check the shim sockets with"
    try:
        localkube("down")
        assert leftovers() == []
        assert [s for s in sockets if s.exists()] == []
    finally:
        # Later test modules share the cluster: a failure here must not leave it down.
        localkube("up")
    status = localkube("status", check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    # A fresh cluster: the namespace of this session is gone; make it again for teardown.
    nodes = json.loads(localkube_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert [n["metadata"]["name"] for n in nodes] == ["localkube"]
    localkube_cluster.kubectl("create", "namespace", localkube_cluster.namespace)
