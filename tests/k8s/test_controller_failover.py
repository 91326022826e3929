"""A backup slurmctld on a real multi-node Kubernetes (kind, two workers): the Kubernetes node of
the serving controller stopped (`docker stop` of the kind node) while submissions go on, the
backup serves, and the primary, back, takes control without ever serving beside it; one
controller becoming two and two becoming one on a live cluster, nothing lost.

The cluster's Slurm nodes and its login pod run on worker B; the primary (ordinal 0) on worker A,
the backup on B (the controllers' anti-affinity). Stopping A takes the primary and nothing the
jobs or the submissions need. The one-controller case is measured first, on the same cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from kube_helpers import Cluster, wait_for
from node_loss import docker, kubernetes_node_ready, workers
from slurm_helpers import (
    QUICK_REQUEUE,
    SMALL,
    Operator,
    SlurmView,
    cluster_status,
    controller_log,
    handover_story,
    log_followed,
    logs_followed,
    manifests,
    nodeset_manifest,
    running_cluster,
    wait_ready,
)

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names

pytestmark = [pytest.mark.k8s, pytest.mark.second_lane]

CLUSTER = "ha"
NODESET = "cpu"
LOGIN = names.pod(names.login(CLUSTER), 0)
PRIMARY, BACKUP = names.controller_pod(CLUSTER, 0), names.controller_pod(CLUSTER, 1)
# How long the Kubernetes node's own shutdown may take before docker kills what is left (docker's
# default: 10 s). The node stops as a machine shuts down: its systemd stops the kubelet and
# containerd, then signals what runs, slurmctld too, which saves its state and exits. Under a
# CI-like load 10 s did not always reach that last step: slurmctld was killed, and the jobs it had
# accepted in the seconds since its last save (it saves at most every few seconds) were not in the
# state the backup took over: a power cut, not the node stop these tests are about.
NODE_STOP_S = 60
SUBMISSIONS = 100
# The longest a submission may wait through a failover before the test calls it lost.
TARGET_FAILOVER_S = 30
# How long the one-controller case waits for a controller before it is recorded as "none".
SINGLE_WAIT_S = 35
BENCH = {"test": "tests/k8s/test_controller_failover.py", "machine": "2 CPUs, kind: 1 control plane + 2 workers"}


def node_of(kube: Cluster, pod: str) -> str:
    return kube.get_json("pod", pod)["spec"].get("nodeName") or ""


class LoginSlurm(SlurmView):
    """Slurm's commands from the login pod, which stays up whichever controller's node stops;
    host_a: the Kubernetes node of the primary, host_b: of the login pod, the Slurm nodes and the
    backup."""

    host_a = host_b = ""

    def run(self, *argv: str) -> str:
        return self.kube.exec(LOGIN, *argv).stdout


# Made in the login pod to end submit_while's loop before its COUNT.
STOP_SUBMITTING = "/tmp/slurmkube-test-stop-submitting"


def submit_while(kube: Cluster, count: int, every: float, held: bool = False) -> subprocess.Popen:
    """COUNT `sbatch --wrap true` from the login pod (HELD: with --hold), EVERY seconds, or until
    stop_submitting; one refused is sent again (a client retry counts as not lost), five times at
    most. Each line: start end tries result (sbatch's words on one line; the job id last, when one
    was given)."""
    loop = ("rm -f %s; for i in $(seq 1 %d); do [[ -e %s ]] && break; t0=$(date +%%s.%%N); for try in 1 2 3 4 5; do"
            " r=$(sbatch --parsable -o /dev/null%s --wrap true 2>&1) && break; r=\"FAILED $r\"; done;"
            " echo \"$t0 $(date +%%s.%%N) $try ${r//$'\\n'/ }\"; sleep %s; done"
            ) % (STOP_SUBMITTING, count, STOP_SUBMITTING, " --hold" if held else "", every)  # fmt: skip
    return subprocess.Popen(["kubectl", "-n", kube.namespace, "exec", LOGIN, "--", "bash", "-c", loop],
                            env=kube.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop_submitting(kube: Cluster, proc: subprocess.Popen) -> List[Tuple[float, float, int, str]]:
    kube.exec(LOGIN, "touch", STOP_SUBMITTING)
    return submissions(proc)


def submissions(proc: subprocess.Popen) -> List[Tuple[float, float, int, str]]:
    out, err = proc.communicate(timeout=900)
    rows = [line.split(None, 3) for line in out.splitlines() if line.strip()]
    assert rows, err
    return [(float(start), float(end), int(tries), result) for start, end, tries, result in rows]


def job_id(row: Tuple[float, float, int, str]) -> str:
    """The id an accepted submission was given (sbatch may have said it retried first)."""
    return row[3].split()[-1]


def first_accepted_after(rows: List[Tuple[float, float, int, str]], moment: float) -> Optional[float]:
    """Seconds from MOMENT to the first submission accepted after it."""
    ends = [end for _start, end, _tries, result in rows if end > moment and not result.startswith("FAILED")]
    return min(ends) - moment if ends else None


def readyz_samples(kube: Cluster, seconds: int) -> subprocess.Popen:
    """Every 0.3 s from the login pod, for SECONDS at most or until the primary served in 20
    samples in a row: each controller's GET /readyz status (2xx: it serves; 5xx: it stands by;
    none: no answer). Each line: time primary backup."""
    hosts = [names.controller_host_address(CLUSTER, kube.namespace, i) for i in (0, 1)]
    probe = ("probe() { local c; c=$(timeout 2 bash -c 'exec 3<>/dev/tcp/'$1'/%d || exit; printf \"GET /readyz"
             " HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n\" >&3; read -r -t 1 _v code _r <&3;"
             " echo $code' 2>/dev/null); echo \"${c:-none}\"; }") % C.SLURMCTLD_PORT  # fmt: skip
    loop = ("%s; end=$((SECONDS + %d)); n=0; while ((SECONDS < end && n < 20)); do p=$(probe %s);"
            " echo \"$(date +%%s.%%N) $p $(probe %s)\"; if [[ $p == 2* ]]; then n=$((n + 1)); else n=0; fi;"
            " sleep 0.3; done") % (probe, seconds, *hosts)  # fmt: skip
    return subprocess.Popen(["kubectl", "-n", kube.namespace, "exec", LOGIN, "--", "bash", "-c", loop],
                            env=kube.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def patch_cluster(kube: Cluster, spec: dict) -> None:
    kube.kubectl("-n", kube.namespace, "patch", "slurmcluster", CLUSTER, "--type=merge",
                 "-p", json.dumps({"spec": spec}))


def controllers_status(kube: Cluster) -> Dict:
    return cluster_status(kube, CLUSTER).get("controller") or {}


def settled(kube: Cluster, serving: str, standby: List[str]) -> None:
    """Until the status says SERVING serves, STANDBY stand by, and ControllerReady (no controller
    left to replace for a new template), and slurmctld answers the login pod: a pod whose node
    was stopped for less than the node controller's grace period (40 s) keeps its Ready condition
    while its containers start again, so the status alone may be ahead of slurmctld."""
    def now() -> bool:
        status = cluster_status(kube, CLUSTER)
        ready = any(c["type"] == "ControllerReady" and c["status"] == "True" for c in status.get("conditions") or [])
        found = status.get("controller") or {}
        return ready and found.get("serving") == serving and found.get("standby") == standby
    wait_for(now, 300, 3, explain=lambda: json.dumps(cluster_status(kube, CLUSTER)))
    wait_for(lambda: kube.exec(LOGIN, "scontrol", "ping", check=False).returncode == 0, 180, 3,
             explain=lambda: kube.exec(LOGIN, "scontrol", "ping", check=False).stdout)


def known_jobs(slurm: SlurmView) -> Dict[str, str]:
    out = slurm.run("squeue", "-h", "-t", "all", "-o", "%i %T")
    return dict(line.split() for line in out.splitlines() if line.strip())


def record(name: str, figures: Dict) -> None:
    out = Path(os.environ.get("SLURMKUBE_CACHE", "/var/cache/slurmkube")) / "bench" / "controller_failover.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    found = json.loads(out.read_text()) if out.exists() else dict(BENCH)
    found[name] = figures
    out.write_text(json.dumps(found, indent=2) + "\n")
    print("%s: %s" % (name, json.dumps(figures)))


@pytest.fixture(scope="module")
def ha(kube_cluster: Cluster, slurm_images, operator: Operator) -> LoginSlurm:
    """The cluster, one controller at first; the Slurm nodes and login on the worker the
    controller is not on."""
    kube = kube_cluster
    if len(workers(kube)) != 2:
        pytest.skip("needs a kind cluster with two workers (SLURMKUBE_TEST_KIND_WORKERS=2)")
    spec = {"controller": {"replicas": 1, "resources": SMALL, "stateVolume": {"size": "1Gi"}},
            "login": {"replicas": 0, "resources": SMALL}, "slurm": {"config": dict(QUICK_REQUEUE)}}
    with running_cluster(kube, operator, CLUSTER, slurm_images, spec):
        host_a = node_of(kube, PRIMARY)
        (host_b,) = [w for w in workers(kube) if w != host_a]
        on_b = {"nodeSelector": {C.HOSTNAME_LABEL: host_b}}
        patch_cluster(kube, {"login": {"replicas": 1, "placement": on_b}})
        kube.apply(manifests(nodeset_manifest(kube.namespace, CLUSTER, NODESET, 2, {"placement": on_b})))
        wait_ready(kube, CLUSTER, operator)
        slurm = LoginSlurm(kube, CLUSTER)
        slurm.host_a, slurm.host_b = host_a, host_b
        try:
            yield slurm
        finally:
            for host in (host_a, host_b):  # a failed test may leave one stopped
                subprocess.run(["docker", "start", host], capture_output=True, timeout=120, check=False)


def test_with_one_controller_a_stopped_node_leaves_the_cluster_without_one(ha: LoginSlurm):
    """The case a backup is for: nothing serves until the Kubernetes node comes back.

    The submissions are held: what is asked is whether one is accepted, and a job that runs ends
    in the outage's shadow. One whose end slurmctld had not heard of from every node when its
    Kubernetes node stopped stays COMPLETING after it returns, its nodes with it, until slurmctld
    sends the termination again for jobs older than MinJobAge (300 s): twice, under a CI-like
    load, the next test's job found no free node within 90 s."""
    kube, host_a = ha.kube, ha.host_a
    submitting = submit_while(kube, 200, 0.3, held=True)
    time.sleep(5)
    docker("stop", "-t", str(NODE_STOP_S), host_a)
    stopped = time.time()
    time.sleep(SINGLE_WAIT_S)
    docker("start", host_a)
    submitting.kill()
    rows = submissions(submitting)
    # The loop runs on in the login pod without its kubectl: end it, or it floods the next tests.
    kube.exec(LOGIN, "touch", STOP_SUBMITTING)
    assert first_accepted_after(rows, stopped) is None, rows[-5:]
    wait_for(lambda: kubernetes_node_ready(kube, host_a), 180, 3)
    settled(kube, PRIMARY, [])
    accepted = [job_id(row) for row in rows if not row[3].startswith("FAILED")]
    assert accepted and set(accepted) <= set(known_jobs(ha)), "a job accepted before the stop is gone"
    ha.run("scancel", *accepted)
    record("one controller", {"first_accepted_after_stop_s": None, "waited_s": SINGLE_WAIT_S,
                              "note": "none accepted: no controller until the Kubernetes node returns (its pod "
                                      "is not made elsewhere while that node may still run it)"})


def test_a_backup_is_added_to_a_live_cluster_and_loses_no_job(ha: LoginSlurm):
    """The backup starts; then the primary, whose slurm.conf named no backup, is replaced: its stop
    hook hands control to the backup (`scontrol takeover`), and the new primary takes it back.
    Submissions go on all along."""
    kube = ha.kube
    running = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 120").strip()
    held = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--hold", "--wrap", "true").strip()
    ha.wait_running(running)
    workers_before = {p: kube.pod_uid(p) for p in (names.pod(names.nodeset(CLUSTER, NODESET), i) for i in (0, 1))}
    primary_before = kube.pod_uid(PRIMARY)
    with log_followed(kube, PRIMARY) as old_primary, logs_followed(kube, BACKUP) as backup:
        submitting = submit_while(kube, 1000, 0.5)
        patch_cluster(kube, {"controller": {"replicas": 2}})
        settled(kube, PRIMARY, [BACKUP])
        rows = stop_submitting(kube, submitting)
        old_primary_log = old_primary()
        # Every container the backup ran: the one that took control was stopped by the new primary.
        backup_log = backup()
    assert kube.pod_uid(PRIMARY) != primary_before
    assert node_of(kube, BACKUP) == ha.host_b
    failed = [row for row in rows if row[3].startswith("FAILED")]
    assert rows and not failed, failed
    # The old primary's stop hook asked the backup to take control, not left it to notice the silence.
    jobs = known_jobs(ha)

    def story() -> str:
        logs = {"old primary": old_primary_log, "backup": backup_log, "new primary": controller_log(kube, PRIMARY)}
        return "jobs %s\n%s" % (sorted(jobs.items(), key=lambda j: int(j[0])), handover_story(logs, (running, held)))

    assert "REQUEST_TAKEOVER" in backup_log, story()
    assert jobs.get(running) == "RUNNING" and jobs.get(held) == "PENDING", story()
    assert {job_id(row) for row in rows} <= set(jobs), "a submission the old primary accepted is gone: " + story()
    # slurmd reaches the controllers at SlurmctldAddr, which did not change: no worker restarted.
    assert {p: kube.pod_uid(p) for p in workers_before} == workers_before
    ha.run("scontrol", "release", held)
    record("primary replaced beside a backup", {
        "submissions": len(rows),
        "submissions_failed": len(failed),
        "submissions_retried": sum(1 for row in rows if row[2] > 1),
        "longest_submission_s": round(max(end - start for start, end, _t, _r in rows), 1),
    })


def test_the_backup_serves_within_seconds_when_the_primary_node_stops(ha: LoginSlurm):
    kube, host_a = ha.kube, ha.host_a
    settled(kube, PRIMARY, [BACKUP])
    assert node_of(kube, PRIMARY) == host_a
    long_job = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 60").strip()
    ha.wait_running(long_job)
    submitting = submit_while(kube, SUBMISSIONS, 0.3)
    time.sleep(8)
    docker("stop", "-t", str(NODE_STOP_S), host_a)
    stopped = time.time()
    rows = submissions(submitting)
    failed = [row for row in rows if row[3].startswith("FAILED")]
    assert len(rows) == SUBMISSIONS and not failed, "%d of %d submissions ended, refused: %s" % (
        len(rows), SUBMISSIONS, failed)
    waited = first_accepted_after(rows, stopped)
    assert waited is not None and waited <= TARGET_FAILOVER_S, "first accepted %s s after the stop; around it: %s" % (
        waited, [row for row in rows if stopped - 5 < row[1] < stopped + 60])
    jobs = [job_id(row) for row in rows]
    assert len(set(jobs)) == SUBMISSIONS, "a job id was given twice"
    # Every submission the old primary accepted is in the state the backup took over.
    wait_for(lambda: set(jobs) <= set(known_jobs(ha)), 120, 3, explain=lambda: str(known_jobs(ha)))
    wait_for(lambda: known_jobs(ha).get(long_job) == "COMPLETED", 120, 3, explain=ha.explain)
    wait_for(lambda: all(known_jobs(ha).get(j) == "COMPLETED" for j in jobs), 300, 3, explain=ha.explain)
    wait_for(lambda: controllers_status(kube).get("serving") == BACKUP, 180, 3,
             explain=lambda: json.dumps(cluster_status(kube, CLUSTER)))
    events = kube.get_json("events", "--field-selector", "reason=ControllerFailover")["items"]
    assert any(BACKUP in e["message"] for e in events), events
    record("two controllers", {
        "first_accepted_after_stop_s": round(waited, 1),
        "target_s": TARGET_FAILOVER_S,
        "submissions": SUBMISSIONS,
        "submissions_failed": len(failed),
        "submissions_retried": sum(1 for row in rows if row[2] > 1),
        "longest_submission_s": round(max(end - start for start, end, _t, _r in rows), 1),
    })


def test_the_primary_back_takes_control_and_never_serves_beside_the_backup(ha: LoginSlurm):
    """The primary back takes control from the backup, which saved its state first: a job only
    the backup knew is known to the primary."""
    kube, host_a = ha.kube, ha.host_a
    assert controllers_status(kube).get("serving") == BACKUP
    held = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--hold", "--wrap", "true").strip()
    sampling = readyz_samples(kube, 150)
    time.sleep(2)
    docker("start", host_a)
    wait_for(lambda: kubernetes_node_ready(kube, host_a), 180, 3)
    out, err = sampling.communicate(timeout=400)
    samples = [line.split() for line in out.splitlines() if len(line.split()) == 3]
    assert samples, err
    both = [s for s in samples if s[1].startswith("2") and s[2].startswith("2")]
    assert not both, "both controllers served at %s" % both
    assert any(s[1].startswith("2") for s in samples), "the primary never served again: %s" % samples[-5:]
    last_backup = max(float(s[0]) for s in samples if s[2].startswith("2"))
    first_primary = min(float(s[0]) for s in samples if s[1].startswith("2"))
    assert last_backup < first_primary, "the backup served after the primary took control"
    settled(kube, PRIMARY, [BACKUP])
    assert known_jobs(ha).get(held) == "PENDING", handover_story(
        {"backup": controller_log(kube, BACKUP), "primary": controller_log(kube, PRIMARY)}, (held,))
    ha.run("scancel", held)
    job = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip()
    wait_for(lambda: known_jobs(ha).get(job) == "COMPLETED", 120, 2, explain=ha.explain)
    record("primary back", {"handover_gap_s": round(first_primary - last_backup, 1)})


def test_going_back_to_one_controller_loses_nothing(ha: LoginSlurm):
    kube = ha.kube
    running = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 90").strip()
    held = ha.run("sbatch", "--parsable", "-o", "/dev/null", "--hold", "--wrap", "true").strip()
    ha.wait_running(running)
    patch_cluster(kube, {"controller": {"replicas": 1}})
    settled(kube, PRIMARY, [])
    wait_for(lambda: kube.pod_uid(BACKUP) is None, 120, 2)
    jobs = known_jobs(ha)
    assert jobs.get(running) in ("RUNNING", "COMPLETED") and jobs.get(held) == "PENDING", jobs
    ha.run("scontrol", "release", held)
    wait_for(lambda: known_jobs(ha).get(held) == "COMPLETED", 120, 2, explain=ha.explain)
    wait_for(lambda: known_jobs(ha).get(running) == "COMPLETED", 180, 3, explain=ha.explain)
