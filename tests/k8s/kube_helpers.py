"""Helpers for the k8s tests on kind clusters (tools/kind/kind.sh): run kind.sh, load images,
call kubectl.

The tests that share one cluster (fixture `kube_cluster`) run on KIND_TEST_CLUSTER, a kind
cluster of SLURMKUBE_TEST_KIND_WORKERS workers (default 2): tests/run gives each of its two
pytest processes a cluster of its own (SLURMKUBE_TEST_KIND_CLUSTER)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

from waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
KIND = REPO / "tools" / "kind" / "kind.sh"
KUBERNETES_BUILD_ENV = REPO / "tools" / "kubernetes" / "build-env.sh"
KIND_TEST_CLUSTER = os.environ.get("SLURMKUBE_TEST_KIND_CLUSTER", "slurmkube-tests")
KIND_TEST_WORKERS = os.environ.get("SLURMKUBE_TEST_KIND_WORKERS", "2")
# The ReadWriteMany class the test cluster gets (kind.sh's): the jail's claim spans pods on every
# Kubernetes node.
SHARED_STORAGE_CLASS = "slurmkube-shared"
# The image of other apps' pods in the tests (static busybox; nothing can be pulled here), by the
# name tools/kubernetes gives it.
TOOLBOX_IMAGE = re.search(r'^KB_TOOLBOX_IMAGE="([^"]+)"$', KUBERNETES_BUILD_ENV.read_text(), re.M).group(1)


def kind(*args: str, check: bool = True, timeout: float = 3600,
         env: Optional[dict] = None) -> subprocess.CompletedProcess:  # fmt: skip
    result = subprocess.run(["bash", str(KIND), *args], text=True, capture_output=True, timeout=timeout, check=False,
                            env=env)  # fmt: skip
    if check and result.returncode != 0:
        raise AssertionError(f"kind.sh {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-6000:]}")
    return result


def toolbox_archive() -> Path:
    """The archive of TOOLBOX_IMAGE, built by tools/kubernetes when missing (its build lock held)."""
    script = f'. "{KUBERNETES_BUILD_ENV}"; kb_build_locked kb_build_toolbox_image; echo "$KB_BIN/images/toolbox.tar"'
    built = subprocess.run(["bash", "-c", script], text=True, capture_output=True, timeout=1800, check=False)
    if built.returncode != 0:
        raise AssertionError(f"the toolbox image failed:\n{built.stderr[-4000:]}")
    return Path(built.stdout.strip())


# What `kind.sh up` said on stderr as up_kind made each cluster, by name (test_kind reads why the
# node image is the one built here).
UP_LOGS: Dict[str, str] = {}


def up_kind(name: str = KIND_TEST_CLUSTER, workers: str = KIND_TEST_WORKERS) -> Tuple[bool, dict]:
    """A kind cluster up (the session's by default), with the toolbox image, and a ReadWriteMany
    default class (the jails of tests that name none span pods on every node). Whether it was
    running before, and the environment that reaches it."""
    was_running = name in kind("kind", "get", "clusters").stdout.split()
    up = kind("up", name, env=dict(os.environ, SLURMKUBE_KIND_WORKERS=workers))
    UP_LOGS[name] = "" if was_running else up.stderr
    kind("kind", "load", "image-archive", str(toolbox_archive()), "--name", name)
    env = exported_env(kind("env", name).stdout)
    default = "storageclass.kubernetes.io/is-default-class"
    for storage_class, is_default in (("standard", "false"), ("slurmkube-shared", "true")):
        subprocess.run(["kubectl", "annotate", "--overwrite", "storageclass", storage_class,
                        f"{default}={is_default}"], env=env, check=True, capture_output=True, timeout=60)
    return was_running, env


def load_images(*refs: str) -> None:
    """Local docker images into the test cluster (nothing is pulled)."""
    kind("load", KIND_TEST_CLUSTER, *refs)


def nodes_hold(ref: str) -> bool:
    """Whether the nodes load_images fills (kind.sh load: the workers, else the control plane) hold
    image REF under that name (crictl on each)."""
    every = kind("kind", "get", "nodes", "--name", KIND_TEST_CLUSTER).stdout.split()
    nodes = [node for node in every if not node.endswith("-control-plane")] or every
    return all(subprocess.run(["docker", "exec", node, "crictl", "inspecti", "docker.io/" + ref], capture_output=True,
                              timeout=60, check=False).returncode == 0 for node in nodes)


def exported_env(exports: str) -> dict:
    """This process's environment with the KUBECONFIG and PATH (kubectl first) that `kind.sh env`
    prints."""
    env = dict(os.environ)
    for line in exports.splitlines():
        key, value = line.removeprefix("export ").split("=", 1)
        if key == "PATH":
            value = shlex.split(value.removesuffix(':"$PATH"'))[0] + os.pathsep + os.environ["PATH"]
        else:
            value = shlex.split(value)[0]
        env[key] = value
    return env


# What containerd says when an exec's process could not be started in the container.
EXEC_NOT_STARTED = "failed to start exec"


def kubectl_failed(args: tuple, result: subprocess.CompletedProcess) -> AssertionError:
    return AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")


@dataclass
class Cluster:
    env: dict
    namespace: str

    def kubectl(
        self, *args: str, input: Optional[str] = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            ["kubectl", *args], env=self.env, input=input, text=True, capture_output=True, timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise kubectl_failed(args, result)
        return result

    def apply(self, manifest: str) -> None:
        self.kubectl("-n", self.namespace, "apply", "-f", "-", input=manifest)

    def get_json(self, *args: str) -> dict:
        return json.loads(self.kubectl("-n", self.namespace, "get", *args, "-o", "json").stdout)

    def find_json(self, *args: str) -> Optional[dict]:
        """As get_json, or None while the object does not exist: a pod just deleted is gone until
        its StatefulSet makes it again (CI saw waits on such a pod fail at once on kind)."""
        result = self.kubectl("-n", self.namespace, "get", *args, "-o", "json", check=False)
        if result.returncode != 0 and "(NotFound)" in result.stderr:
            return None
        if result.returncode != 0:
            raise kubectl_failed(("get", *args), result)
        return json.loads(result.stdout)

    def pod_uid(self, pod: str) -> Optional[str]:
        """The pod's UID, or None while it does not exist."""
        found = self.find_json("pod", pod)
        return found["metadata"]["uid"] if found else None

    def wait_crd_established(self, name: str, timeout: float = 60) -> None:
        """Until the CRD serves its kind. Not `kubectl wait --for=condition=Established`: right after
        an apply the CRD may have no conditions yet, and kubectl then fails at once (".status.conditions
        accessor error: <nil>") instead of waiting (CI saw it)."""
        def established() -> bool:
            crd = json.loads(self.kubectl("get", "crd", name, "-o", "json").stdout)
            return any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in (crd.get("status") or {}).get("conditions") or [])
        wait_for(established, timeout, 1, explain=lambda: self.kubectl("get", "crd", name, "-o", "yaml").stdout)

    def exec(self, pod: str, *command: str, check: bool = True,
             container: Optional[str] = None) -> subprocess.CompletedProcess:
        """COMMAND in the pod (its CONTAINER, else the default one). Asked again, twice at most, when
        the container runtime could not start it ("failed to start exec": the command never ran):
        under load on kind, runc refused single execs ("read init-p: connection reset by peer"; a cold
        CI run saw one fail a test before it had done anything), which says nothing of what the tests
        look at."""
        args = ("-n", self.namespace, "exec", pod, *(("-c", container) if container else ()), "--", *command)
        attempts = 3
        for attempt in range(1, attempts + 1):
            result = self.kubectl(*args, check=False)
            if result.returncode == 0 or EXEC_NOT_STARTED not in result.stderr or attempt == attempts:
                break
            time.sleep(2)
        if check and result.returncode != 0:
            raise kubectl_failed(args, result)
        return result

    def wait_pod_ready(self, pod: str, timeout: int = 120) -> None:
        """Until the pod exists and is Ready. `kubectl wait` fails at once on a pod that does not
        exist, as one just deleted is until its StatefulSet makes it again (CI saw it on kind)."""
        deadline = time.monotonic() + timeout
        wait_for(lambda: self.pod_uid(pod), timeout, 1)
        left = max(1, int(deadline - time.monotonic()))
        self.kubectl("-n", self.namespace, "wait", "--for=condition=Ready", f"pod/{pod}", f"--timeout={left}s",
                     timeout=left + 10)
