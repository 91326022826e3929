"""`bash quickstart.sh` twice, as a new user runs it on a machine of their own: with no
kubeconfig it makes a kind cluster (1 control plane + 2 workers, tools/kind), the second run
changes nothing and its --diff prints nothing; the demo user's jobs on the two Kubernetes
workers share one jail; the Prometheus it prints has every target up and the rules loaded, and a
headless Chromium shows the nodes by state on its graph page; site.yml given an image no node can
pull fails within two minutes naming it; Molecule's scenario converges its own cluster on the same
kind cluster, beside the demo's operator and Prometheus; teardown.yml with slurmkube_purge deletes
the kind cluster and leaves nothing of it on the host.

Molecule runs here, on the quickstart's kind cluster, rather than on one of its own: making a
1+2 cluster and loading every image into its three nodes was about half of its CI time (the
module took 490-594 s, its steps here about 240 s), on a two-core machine where every lane is
CPU-bound. Its create finds the cluster by name (SLURMKUBE_MOLECULE_KIND_NAME), as it finds the
one it made itself when it exists.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

import pytest
import yaml
from kube_helpers import REPO, Cluster, exported_env, wait_for

sys.path.insert(0, str(REPO / "tests"))
from container_demo import IN_CONTAINER, PRETTY_NAME, export_demo_container, tasks_of
from playbook_runner import run_playbook
from slurm_output import seconds, size_kib
from slurm_release import images_slurm_series_text

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

pytestmark = [pytest.mark.k8s, pytest.mark.kind]

KIND = REPO / "tools" / "kind" / "kind.sh"
# site.yml's kind cluster is named after the example cluster (demo).
KIND_NAME = "slurmkube-demo"


def play(*argv: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def recap(output: str) -> dict:
    """PLAY RECAP counts of localhost, summed over the plays."""
    totals: dict = {}
    for line in re.findall(r"^localhost\s+:\s+(.*)$", output, flags=re.M):
        for key, value in re.findall(r"(\w+)=(\d+)", line):
            totals[key] = totals.get(key, 0) + int(value)
    return totals


def failed(output: str) -> str:
    """A failed play's output for an assertion: its tail, then the task that failed and Ansible's
    message (CI shows the end of a long message; a tail alone may hold only the recap)."""
    task, where, fatal = "", "no fatal line", ""
    for line in re.findall(r"^TASK \[.*?\]|^fatal: .*$", output, flags=re.M):
        if line.startswith("TASK"):
            task = line
        else:
            where, fatal = task, line
    return output[-3000:] + "\n--- failed: " + where + "\n" + fatal[:3000]


def kind(*args: str) -> str:
    result = subprocess.run(["bash", str(KIND), *args], capture_output=True, text=True, timeout=600, check=True)
    return result.stdout


def in_controller(kube: Cluster, *argv: str) -> str:
    return kube.kubectl("-n", "slurm", "exec", "demo-controller-0", "-c", "slurmctld", "--", *argv).stdout


def demo_charges_its_account(kube: Cluster) -> None:
    """jail_user and slurm_user together: the demo user, in the jail and in slurmdbd with its
    account, runs a job (the example cluster enforces associations) recorded under it."""
    assoc = in_controller(kube, "sacctmgr", "-i", "-n", "-P", "show", "association", "where", "user=demo",
                          "format=Account")
    assert assoc.split() == ["demo"], assoc
    job = in_controller(kube, "runuser", "-u", "demo", "--", "sbatch", "--parsable", "-o", "/dev/null", "--wrap",
                        "true")
    record = wait_for(lambda: in_controller(kube, "sacct", "-X", "-n", "-P", "-o", "State,Account,User", "-j",
                                            job.split()[0]).strip() == "COMPLETED|demo|demo", 120, 2)
    assert record


def demo_jobs_on_two_kubernetes_workers_share_the_jail(kube: Cluster) -> None:
    """The example's cpu node set spreads over both workers, off the control plane, and what a job
    writes on one Kubernetes node a job on the other reads: the jail is on kind's shared class."""
    nodes = json.loads(kube.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    workers = {n["metadata"]["name"] for n in nodes
               if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"]}
    assert len(nodes) == 3 and len(workers) == 2, [n["metadata"]["name"] for n in nodes]
    pods = kube.get_json("pods")["items"]
    assert {p["spec"].get("nodeName") for p in pods} <= workers, "a Slurm pod on the control plane"
    hosts = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    first, second = "demo-cpu-0", "demo-cpu-1"
    assert {hosts[first], hosts[second]} == workers, hosts
    claim = kube.get_json("pvc", "demo-jail-data")["spec"]
    assert claim["storageClassName"] == "slurmkube-shared", claim
    # slurmctld's state too: a backup controller mounts it from another node.
    state = kube.get_json("pvc", "state-demo-controller-0")["spec"]
    assert (state["storageClassName"], state["accessModes"]) == ("slurmkube-shared", ["ReadWriteMany"]), state

    def as_demo(node: str, script: str) -> None:
        in_controller(kube, "runuser", "-u", "demo", "--", "sbatch", "--wait", "-w", node, "-o", "/dev/null",
                      "--wrap", script)
    as_demo(first, "echo $SLURMD_NODENAME > ~/quickstart-written")
    as_demo(second, "cat ~/quickstart-written > ~/quickstart-read && echo $SLURMD_NODENAME >> ~/quickstart-read")
    read = in_controller(kube, "cat", C.JAIL_MOUNT_PATH + "/home/demo/quickstart-read")
    assert read.split() == [first, second], read


# site.yml's settings for the quickstart's cluster reached as a cluster of your own.
OWN_CLUSTER = "own-cluster.json"


def without_kubeconfig(workdir: Path) -> dict:
    """This environment with no K8S_AUTH_* variable and KUBECONFIG naming a missing file: a
    kubeconfig read anyway would fail the run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_")}
    env.update(KUBECONFIG=str(workdir / "no-kubeconfig"), ANSIBLE_NOCOLOR="1")
    return env


def token_auth(kube: Cluster, workdir: Path) -> dict:
    """kubernetes.core's connection options for the kind cluster without its kubeconfig: its API
    server's address, a cluster-admin ServiceAccount's token and the cluster's CA in a file."""
    kube.kubectl("-n", "kube-system", "create", "serviceaccount", "quickstart-admin")
    kube.kubectl("create", "clusterrolebinding", "quickstart-admin", "--clusterrole=cluster-admin",
                 "--serviceaccount=kube-system:quickstart-admin")
    token = kube.kubectl("-n", "kube-system", "create", "token", "quickstart-admin", "--duration=1h").stdout.strip()
    config = json.loads(kube.kubectl("config", "view", "--minify", "--raw", "-o", "json").stdout)
    server = config["clusters"][0]["cluster"]
    ca_cert = workdir / "ca.pem"
    ca_cert.write_bytes(base64.b64decode(server["certificate-authority-data"]))
    return {"host": server["server"], "api_key": token, "ca_cert": str(ca_cert)}


def site_with_a_token_alone_changes_nothing(kube: Cluster, workdir: Path) -> float:
    """The quickstart's cluster reached as a cluster of your own with host, api_key and ca_cert
    (slurmkube_kubernetes_auth, the plays' module_defaults) and KUBECONFIG naming no file: site.yml
    converges with nothing to change, and the token is not printed. What the kind cluster made
    here implied is said instead: its shared class, images already on its nodes, the Prometheus's
    node port. Returns how long the run took."""
    auth = token_auth(kube, workdir)
    example = yaml.safe_load((REPO / "playbooks" / "vars" / "example-cluster.yml").read_text())
    example["slurmkube_cluster"]["spec"].setdefault("jail", {})["storageClassName"] = "slurmkube-shared"
    settings = workdir / OWN_CLUSTER
    settings.write_text(json.dumps(dict(example, slurmkube_kubernetes_auth=auth, slurmkube_pull_policy="Never",
                                        slurmkube_prometheus_service_type="NodePort")))
    started = time.monotonic()
    result = subprocess.run(["bash", "quickstart.sh", "-e", "@" + str(settings)], cwd=REPO, capture_output=True,
                            text=True, timeout=1800, check=False, env=without_kubeconfig(workdir))
    took = time.monotonic() - started
    output = result.stdout + result.stderr
    (workdir / "token.log").write_text(output)
    assert result.returncode == 0, failed(output)
    counts = recap(result.stdout)
    assert counts.get("ok", 0) > 0 and counts.get("changed") == 0 and counts.get("failed") == 0, counts
    assert re.search(r"TASK \[Make the kind cluster\] \**\s+skipping", output), output[-3000:]
    assert auth["api_key"] not in output
    return took


# What site.yml deploys for the quickstart's cluster (its example, monitoring and Prometheus on).
SITE_IMAGES = ("controller", "worker", "login", "jail", "operator", "slurmdbd", "mariadb", "exporter", "prometheus")


def site_fails_fast_naming_an_image_it_cannot_pull(settings: Path, converged_seconds: float) -> None:
    """site.yml (connection options alone, as above) naming an exporter image no node holds, as a
    tag mistyped on this kind cluster would (its pods never pull, as the quickstart's): the play
    fails naming the image and its pod, at most two minutes after the time the converged run above
    took (the cluster step fails once the kubelet refuses the pod, not after its 900 s wait). A
    registry that refuses the pull fails the same wait (test_operator); the pull policy stays, so
    nothing else of the cluster is replaced before the teardown. A new jail image in the same run is
    not filled into the running cluster's jail by the play (no populate Job of its own): that is the
    operator's, after slurmctld and a first worker, in Slurm's upgrade order."""
    built = json.loads(subprocess.run(["bash", str(REPO / "images" / "build.sh"), "--print-tags"],
                                      capture_output=True, text=True, timeout=300, check=True).stdout)
    missing = "slurmkube/exporter:absent"
    images = dict({name: built[name] for name in SITE_IMAGES}, exporter=missing, jail="slurmkube/jail:next-release")
    # The node sets as scale.yml left them (big at 0): only the exporter's pod is new.
    node_sets = json.loads(settings.read_text())["slurmkube_node_sets"]
    for node_set in node_sets:
        if node_set["metadata"]["name"] == "big":
            node_set["spec"]["replicas"] = 0
    started = time.monotonic()
    result = subprocess.run(["bash", "quickstart.sh", "-e", "@" + str(settings), "-e",
                             json.dumps({"slurmkube_images": images, "slurmkube_node_sets": node_sets})],
                            cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
                            env=without_kubeconfig(settings.parent))  # fmt: skip
    took = time.monotonic() - started
    output = result.stdout + result.stderr
    (settings.parent / "unpullable.log").write_text(output)
    assert result.returncode != 0 and recap(result.stdout).get("failed") == 1, output[-4000:]
    assert re.search(r"image %s \(pod demo-exporter-[-a-z0-9]+\): ErrImageNeverPull" % re.escape(missing), output), \
        output[-4000:]
    assert took <= converged_seconds + 120, (took, converged_seconds)
    jail_task = r"TASK \[(slurmkube\.core\.jail : )?Ensure the jail volume, filled from the jail image\] \**\s+"
    assert re.search(jail_task + "ok:", output), output[-4000:]


def scale_with_a_token_alone(kube: Cluster, settings: Path) -> None:
    """scale.yml with the same connection options alone: the node set shrinks."""
    scale = run_playbook(REPO / "playbooks" / "scale.yml", "-e", "@" + str(settings), "-e", "slurmkube_node_set=big",
                         "-e", "slurmkube_replicas=0", env=without_kubeconfig(settings.parent))
    assert scale.returncode == 0, failed(scale.stdout + scale.stderr)
    assert kube.get_json("nodesets.slurmkube.io", "big")["spec"]["replicas"] == 0


def teardown_with_a_token_alone(kube: Cluster, settings: Path) -> None:
    """teardown.yml (purge, on a cluster not made here: its objects one by one) with the same
    connection options alone: the cluster, its pods, its claims and its jail go."""
    env = without_kubeconfig(settings.parent)
    teardown = run_playbook(REPO / "playbooks" / "teardown.yml", "-e", "@" + str(settings), "-e",
                            "slurmkube_purge=true", env=env)
    assert teardown.returncode == 0, failed(teardown.stdout + teardown.stderr)
    left = kube.kubectl("-n", "slurm", "get", "slurmclusters.slurmkube.io,pods,persistentvolumeclaims", "-o",
                        "name").stdout.split()
    assert left == [], left


# Holds 150 MiB and burns about two CPU seconds, then ends once ~/stats-release exists.
HOLD_MEMORY_AND_CPU = ("python3 -c 'import os, time; b = b\"x\" * (150 << 20); t = time.process_time() + 2\n"
                       "while time.process_time() < t: pass\n"
                       "while not os.path.exists(os.path.expanduser(\"~/stats-release\")): time.sleep(1)'")


def demo_sees_its_jobs_memory_and_cpu_in_sstat_and_sacct(kube: Cluster) -> None:
    """Job accounting on kind (a cgroup v1 host, the systemd driver), for a plain user: MaxRSS
    of a job holding 150 MiB in sstat while it runs and in sacct once it ended; AveCPU no more
    than elapsed time x CPUs, TotalCPU at least what it burnt."""
    def as_demo(*argv: str, check: bool = True) -> str:
        return kube.kubectl("-n", "slurm", "exec", "demo-controller-0", "-c", "slurmctld", "--", "runuser", "-u",
                            "demo", "--", *argv, check=check).stdout  # fmt: skip

    job = as_demo("sbatch", "--parsable", "-o", "/dev/null", "--wrap", HOLD_MEMORY_AND_CPU).split()[0]

    def sstat_batch() -> list:
        # sstat fails while the job is pending
        row = as_demo("sstat", "-n", "-P", "-o", "MaxRSS,AveCPU", "-j", job + ".batch", check=False).strip().split("|")
        return row if len(row) == 2 and row[0] and size_kib(row[0]) >= 100 << 10 else []

    running = wait_for(sstat_batch, 120, 2)
    as_demo("sbatch", "--wait", "-o", "/dev/null", "--wrap", "touch ~/stats-release")

    def sacct_batch() -> dict:
        out = as_demo("sacct", "-n", "-P", "-o", "JobID,State,MaxRSS,AveCPU,TotalCPU,ElapsedRaw,AllocCPUS", "-j", job)
        rows = {r.split("|")[0]: r.split("|")[1:] for r in out.splitlines() if r.count("|") == 6}
        batch = rows.get(job + ".batch", [])
        return dict(zip(("state", "max_rss", "ave_cpu", "total_cpu", "elapsed", "cpus"), batch)) \
            if batch and batch[0] == "COMPLETED" else {}  # fmt: skip

    ended = wait_for(sacct_batch, 120, 2)
    assert size_kib(ended["max_rss"]) >= 100 << 10, (running, ended)
    assert seconds(ended["total_cpu"]) >= 1.5, ended
    assert seconds(running[1]) <= seconds(ended["ave_cpu"]) <= int(ended["elapsed"]) * int(ended["cpus"]), ended


def printed_ssh(output: str) -> list:
    """The ssh command the play prints (the login Service's NodePort on a kind node's address),
    as argv, without a remote command yet."""
    printed = re.search(r"ssh -i (\S+) -p (\d+) demo@([0-9.]+)", output)
    assert printed, output[-3000:]
    key, port, host = printed.groups()
    return ["ssh", "-i", key, "-p", port, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "demo@" + host]  # fmt: skip


def demo_logs_in_with_the_printed_command(ssh: list) -> None:
    """The ssh command the play prints reaches the login node from this machine, and Slurm
    answers there."""
    login = subprocess.run([*ssh, "srun", "-N1", "hostname"], capture_output=True, text=True, timeout=120, check=False)
    assert login.returncode == 0 and login.stdout.strip().startswith("demo-"), login.stdout + login.stderr


def demo_runs_a_container_on_both_workers(ssh: list, tmp_path: Path) -> None:
    """A user brings an image as a tarball over ssh, converts it with ch-convert and runs it with
    srun --container on both Kubernetes workers (their pods under slurmkube's seccomp profile):
    each task prints the container's os-release, as demo, in the job."""
    tags = subprocess.run(["bash", str(REPO / "images" / "build.sh"), "--print-tags"], capture_output=True,
                          text=True, timeout=300, check=True).stdout  # fmt: skip
    tarball = export_demo_container(json.loads(tags)["base"], tmp_path / "demo.tar")
    with tarball.open("rb") as stdin:
        upload = subprocess.run([*ssh, "cat > demo.tar && ch-convert -o dir demo.tar demo && rm demo.tar"], stdin=stdin,
                                capture_output=True, timeout=300, check=False)  # fmt: skip
    assert upload.returncode == 0, upload.stdout[-2000:] + upload.stderr[-2000:]
    step = subprocess.run([*ssh, "srun -N2 -w demo-cpu-0,demo-cpu-1 --container=$HOME/demo sh -c "
                           + shlex.quote(IN_CONTAINER)], capture_output=True, text=True, timeout=300, check=False)
    assert step.returncode == 0 and step.stdout.count(PRETTY_NAME) == 2, step.stdout + step.stderr
    # One task on each node, as demo, ranks 0 and 1 (Slurm orders the nodes, not -w).
    tasks = tasks_of(step.stdout)
    assert [(t["host"], t["user"]) for t in tasks] == [("demo-cpu-0", "demo"), ("demo-cpu-1", "demo")], tasks
    assert sorted(t["rank"] for t in tasks) == ["0", "1"] and len({t["job"] for t in tasks}) == 1, tasks


def kind_progress_is_printed_at_least_once_a_minute(output: str) -> None:
    """While the kind cluster is made, the play prints kind.sh's own lines as they come
    (slurmkube.core.job_progress): what it does and, each minute, for how long and where its log is."""
    stamps = re.findall(r"^kind cluster %s: \[kind (\d\d):(\d\d):(\d\d)\] (.*)$" % KIND_NAME, output, flags=re.M)
    said = [stamp[3] for stamp in stamps]
    assert any(line.startswith("creating cluster %s" % KIND_NAME) for line in said), output[-3000:]
    seconds = [int(stamp[0]) * 3600 + int(stamp[1]) * 60 + int(stamp[2]) for stamp in stamps]
    gaps = [(b - a) % 86400 for a, b in zip(seconds, seconds[1:])]
    assert gaps and max(gaps) <= 65, list(zip(said, [0, *gaps]))


def quickstart_environment_has_no_developer_tools() -> None:
    """quickstart.sh's Python environment (hack/requirements-run.txt) holds Ansible and the
    Kubernetes client, not the tests' and gates' tools."""
    venv = Path(subprocess.run(["bash", "hack/ensure-venv.sh", "run"], cwd=REPO, capture_output=True, text=True,
                               check=True, timeout=600).stdout.strip())
    assert (venv / "bin" / "ansible-playbook").exists(), venv
    assert [t for t in ("ansible-lint", "molecule", "pytest", "ruff") if (venv / "bin" / t).exists()] == [], venv


PROMETHEUS_PRINTED = re.compile(r"Prometheus \(the cluster's metrics and alerts\): (http://[0-9.]+:\d+)")
RULES = REPO / "monitoring" / "prometheus" / "slurmkube.rules.yml"
# The cluster's nodes by state, as the node dashboard's panel asks.
NODE_STATES = "sum by (slurmkube_namespace, slurmkube_cluster, state) (slurm_nodes)"


def printed_prometheus(output: str) -> str:
    printed = PROMETHEUS_PRINTED.search(output)
    assert printed, output[-3000:]
    return printed.group(1)


def prometheus_api(url: str, path: str, **params: str) -> dict:
    query = ("?" + urllib.parse.urlencode(params)) if params else ""
    with urllib.request.urlopen("%s/api/v1/%s%s" % (url, path, query), timeout=30) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return body["data"]


def quickstart_prometheus_scrapes_every_target_with_the_rules_loaded(kube: Cluster, url: str) -> None:
    """The Prometheus the play printed, from this machine: the exporter's and the operator's
    targets up (every active target), every alert of the collection's rule file loaded, and the
    cluster's nodes by state with its namespace and name."""
    seen: list = []

    def every_target_up() -> list:
        try:
            targets = prometheus_api(url, "targets")["activeTargets"]
        except OSError as unanswered:  # URLError included
            seen[:] = [str(unanswered)]
            return []
        seen[:] = targets
        components = {t["labels"].get("component") for t in targets}
        healthy = components >= {"exporter", "operator"} and all(t["health"] == "up" for t in targets)
        return targets if healthy else []

    def explain() -> str:
        where = kube.kubectl("-n", "slurmkube-system", "get", "pods,services,endpointslices", "-o", "wide",
                             check=False)  # fmt: skip
        return "targets or error: %s\n%s%s" % (json.dumps(seen)[:3000], where.stdout, where.stderr)

    wait_for(every_target_up, 180, 5, explain=explain, what="every target of the quickstart's Prometheus up")
    loaded = {rule["name"] for group in prometheus_api(url, "rules")["groups"] for rule in group["rules"]}
    shipped = {rule.get("alert") or rule["record"] for group in yaml.safe_load(RULES.read_text())["groups"]
               for rule in group["rules"]}  # fmt: skip
    assert shipped and loaded == shipped, (sorted(shipped - loaded), sorted(loaded - shipped))
    states = wait_for(lambda: prometheus_api(url, "query", query=NODE_STATES)["result"], 120, 5, what=NODE_STATES)
    assert {(s["metric"]["slurmkube_namespace"], s["metric"]["slurmkube_cluster"]) for s in states} == {
        ("slurm", "demo")}, states  # fmt: skip


def chromium() -> str:
    """Debian's Chromium (and a font for its text), installed when missing."""
    if not shutil.which("chromium"):
        subprocess.run(["bash", str(REPO / "tools" / "apt-install.sh"), "--no-install-recommends", "chromium",
                        "fonts-dejavu-core"], check=True, capture_output=True, timeout=1200)  # fmt: skip
    return shutil.which("chromium") or "chromium"


def graph_page_shows_the_node_states(url: str) -> Path:
    """A headless Chromium opens the Prometheus's graph page of the nodes by state: the page it
    rendered (its scripts run) lists the cluster's series, and its screenshot is kept in the log
    directory ($SLURMKUBE_CACHE/logs, beside the operators' logs)."""
    # Debian's Prometheus serves the classic UI (its package lacks the React one).
    graph = {"g0.expr": NODE_STATES, "g0.tab": "0", "g0.range_input": "15m"}
    page = url + "/classic/graph?" + urllib.parse.urlencode(graph)
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--window-size=1280,900", "--virtual-time-budget=20000"]  # fmt: skip
    logs = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    screenshot = logs / "quickstart-prometheus-graph.png"
    screenshot.unlink(missing_ok=True)
    shot = subprocess.run([*browser, "--screenshot=%s" % screenshot, page], capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip
    assert shot.returncode == 0 and screenshot.stat().st_size > 10_000, shot.stderr[-3000:]
    dom = subprocess.run([*browser, "--dump-dom", page], capture_output=True, text=True, timeout=180, check=True).stdout
    for label in ('slurmkube_cluster="demo"', 'slurmkube_namespace="slurm"', 'state="idle"'):
        assert label in dom, (label, dom[-4000:])
    print("the quickstart's Prometheus graph page: %s (screenshot %s)" % (page, screenshot))
    return screenshot


# ------------------------------------------------------------------ Molecule's scenario, beside the demo

def snapshot(root: Path) -> Path:
    """The files git would commit, copied to ROOT/ansible_collections/slurmkube/core: Molecule runs
    on a snapshot, laid out as an installed collection (an edit landing between converge and
    idempotence would otherwise count as a change)."""
    tree = root / "ansible_collections" / "slurmkube" / "core"
    tree.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout
    packed = subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], cwd=REPO, input=files, capture_output=True,
                            check=True).stdout
    subprocess.run(["tar", "-C", str(tree), "-xf", "-"], input=packed, check=True)
    return tree


def molecule_runner(workdir: Path) -> Callable[[str], str]:
    """What runs one step of Molecule's scenario `default` on a snapshot of the checkout, on this
    kind cluster, and returns its output once it passed. Step by step rather than `molecule test`,
    whose first step is a destroy: that would delete the quickstart's cluster."""
    tree = snapshot(workdir / "collections")
    venv_bin = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ["PATH"], ANSIBLE_NOCOLOR="1", NO_COLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(workdir / "collections"), ANSIBLE_FORCE_COLOR="0",
               SLURMKUBE_MOLECULE_KIND_NAME=KIND_NAME, MOLECULE_EPHEMERAL_DIRECTORY=str(workdir / "molecule-state"))

    def step(name: str) -> str:
        proc = subprocess.run([os.path.join(venv_bin, "molecule"), name, "-s", "default"], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=1500, check=False)
        output = proc.stdout + proc.stderr
        (workdir / ("molecule-%s.log" % name)).write_text(output)
        assert proc.returncode == 0, "molecule %s:\n%s" % (name, output[-8000:])
        return output

    return step


def molecule_converges_beside_the_demo(kube: Cluster, molecule: Callable[[str], str]) -> None:
    """create (finds this kind cluster and loads the images its nodes lack), converge (site.yml:
    the scenario's own cluster, operator and namespace), idempotence (a second converge that fails
    on any changed task), verify (ssh through the login Service, a job on one node writes into the
    jail and one on another reads it back, then a check-mode converge changes nothing)."""
    molecule("syntax")
    nodes = kind_containers()
    molecule("create")
    assert sorted(kind_containers()) == sorted(nodes), "Molecule's create made another cluster"
    molecule("converge")
    idempotence = molecule("idempotence")
    assert "Idempotence test failed" not in idempotence, idempotence[-6000:]
    verified = molecule("verify")
    assert "The check-mode converge reports no changes" in verified, verified[-6000:]
    assert "The node set spreads over the Kubernetes nodes pods may use" in verified, verified[-6000:]
    # Beside the demo's operator, on the same Kubernetes nodes.
    pods = kube.kubectl("-n", "slurmkube-molecule", "get", "pods", "-o", "name").stdout.split()
    assert any("mol-controller" in pod for pod in pods), pods


def kind_containers() -> list:
    return subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=" + KIND_NAME],
                          capture_output=True, text=True, check=True).stdout.split()


def test_quickstart_twice_on_kind_changes_nothing_then_molecule_converges_beside_it_and_teardown_leaves_nothing(
        tmp_path):
    if os.geteuid() != 0:
        pytest.skip("kind here needs root (docker)")
    molecule = molecule_runner(tmp_path)
    try:
        first = play("bash", "quickstart.sh")
        (tmp_path / "first.log").write_text(first.stdout + first.stderr)
        assert first.returncode == 0, failed(first.stdout + first.stderr)
        kind_progress_is_printed_at_least_once_a_minute(first.stdout)
        prometheus = printed_prometheus(first.stdout)
        quickstart_environment_has_no_developer_tools()
        kube = Cluster(env=exported_env(kind("env", KIND_NAME)), namespace="slurm")
        # the level Slurm's pods need, said on their namespace (Pod Security admission)
        labels = json.loads(kube.kubectl("get", "namespace", "slurm", "-o", "json").stdout)["metadata"]
        assert labels["labels"].get("pod-security.kubernetes.io/enforce") == "privileged", labels
        # the Slurm the images carry, as slurmctld and the clients report it ("slurm-wlm 26.05.5")
        for command in (("scontrol", "version"), ("sinfo", "--version")):
            assert " %s." % images_slurm_series_text() in in_controller(kube, *command), command
        quickstart_prometheus_scrapes_every_target_with_the_rules_loaded(kube, prometheus)
        graph_page_shows_the_node_states(prometheus)
        demo_charges_its_account(kube)
        demo_jobs_on_two_kubernetes_workers_share_the_jail(kube)
        demo_sees_its_jobs_memory_and_cpu_in_sstat_and_sacct(kube)
        second = play("bash", "quickstart.sh", "--diff")
        output = second.stdout + second.stderr
        (tmp_path / "second.log").write_text(output)
        assert second.returncode == 0, failed(output)
        counts = recap(second.stdout)
        assert counts.get("ok", 0) > 0 and counts.get("changed") == 0 and counts.get("failed") == 0, counts
        # Ansible prints a diff as "--- before" / "+++ after" lines: none for unchanged objects.
        assert "--- before" not in output and "+++ after" not in output, output[-6000:]
        ssh = printed_ssh(second.stdout)
        demo_logs_in_with_the_printed_command(ssh)
        demo_runs_a_container_on_both_workers(ssh, tmp_path)
        converged = site_with_a_token_alone_changes_nothing(kube, tmp_path)
        scale_with_a_token_alone(kube, tmp_path / OWN_CLUSTER)
        site_fails_fast_naming_an_image_it_cannot_pull(tmp_path / OWN_CLUSTER, converged)
        teardown_with_a_token_alone(kube, tmp_path / OWN_CLUSTER)
        molecule_converges_beside_the_demo(kube, molecule)
    finally:
        shared = Path(kind("shared", KIND_NAME).strip()) if kind_containers() else None
        teardown = run_playbook(REPO / "playbooks" / "teardown.yml", "-e", "slurmkube_purge=true")
        assert teardown.returncode == 0, failed(teardown.stdout + teardown.stderr)
    assert kind_containers() == []
    assert shared is not None and not shared.exists()
    again = run_playbook(REPO / "playbooks" / "teardown.yml", "-e", "slurmkube_purge=true")
    assert again.returncode == 0 and recap(again.stdout).get("changed") == 0, again.stdout[-4000:]
    # Molecule's destroy deletes the kind cluster with the same role as teardown.yml's purge
    # (kubernetes, state absent); here, as at the start of `molecule test`, it finds none.
    molecule("destroy")
    assert kind_containers() == []
