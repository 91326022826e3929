"""The bridge's Slurm half on real daemons (the docker tier's slurmctld and slurmd): external jobs
made by the operator's own code (slurm/external.py) hold CPUs on an ordinary node beside native
jobs, core by core, a request that does not fit waits until one of them ends, one larger than
any node waits with Slurm's reason (PartitionConfig), and a job ends COMPLETED or FAILED with the
exit code its pods ended with."""

from __future__ import annotations

from typing import List

import pytest
from docker_cluster import CONTROLLER_POD, WIDE_MODEL, WIDE_NODE, WORKERS, Cluster, remove_worker, wait_for

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmControl, SlurmError
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import ExternalJobRequest, ExternalJobs

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def wide(cluster):
    """The 2-CPU node, the only one with room: the 1-CPU nodes are drained meanwhile."""
    cluster.start_worker(WIDE_NODE, nodeset=WIDE_MODEL)
    wait_for(WIDE_NODE + " idle", lambda: WIDE_NODE in cluster.idle_nodes(), timeout=60)
    others = ",".join(WORKERS)
    cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + others, "state=drain", "reason=bridge test")
    try:
        yield WIDE_NODE
    finally:
        cluster.exec(CONTROLLER_POD, "scontrol", "update", "nodename=" + others, "state=resume")
        remove_worker(cluster, WIDE_NODE)


def external_jobs(cluster: Cluster) -> ExternalJobs:
    """The operator's calls, sent to the controller container instead of the controller pod."""
    def run(argv):
        done = cluster.exec(CONTROLLER_POD, *argv, check=False)
        return done.returncode, done.stdout, done.stderr
    return ExternalJobs(SlurmControl(run))


def submitted(jobs: ExternalJobs, *requests: ExternalJobRequest) -> List[int]:
    """The jobs' ids, submitted by one call as the bridge's cycle does; fails on any refusal."""
    ids = jobs.submit(requests)
    assert all(isinstance(i, int) for i in ids), ids
    return ids


def state(cluster: Cluster, job: int) -> str:
    """The job's state as squeue's %T says it: the words queue_and_nodes prints."""
    return cluster.exec(CONTROLLER_POD, "squeue", "-h", "--states=all", "--jobs=%d" % job, "-o", "%T").stdout.strip()


def queue_and_nodes(cluster: Cluster) -> str:
    """What a wait that timed out says: the queue with reasons, the nodes, the daemons' last lines."""
    queue = cluster.exec(CONTROLLER_POD, "squeue", "-a", "-o", "%i %T %r %N %C %m", check=False).stdout
    nodes = cluster.exec(CONTROLLER_POD, "sinfo", "-N", "-o", "%N %t %C %e %E", check=False).stdout
    return "queue:\n%s\nnodes:\n%s\n%s" % (queue, nodes, cluster.logs())


def test_a_pod_and_a_native_job_share_a_two_cpu_node_and_a_third_request_waits(cluster, wide):
    jobs = external_jobs(cluster)
    native = cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "-o", "/dev/null", "-c1", "-w", wide,
                          "--wrap", "sleep 600").stdout.strip()
    asked = [ExternalJobRequest(gang=g, name="ml/" + g, tasks=1, cpus_per_task=1, mem_per_cpu_mib=64)
             for g in ("pod-a", "pod-b")]
    # The native job runs first: slurmctld may put a batch job's scheduling off (batch_sched_delay)
    # while it starts an external job at once, and under CI's load two external jobs submitted
    # meanwhile would take both CPUs.
    wait_for("the native job runs", lambda: state(cluster, int(native)) == "RUNNING", timeout=120,
             explain=lambda: queue_and_nodes(cluster))
    requests = dict(zip(submitted(jobs, *asked), ("pod-a", "pod-b")))
    # The bridge's call runs its sbatch commands side by side (SlurmControl.each): which request
    # was given the lower job id, and so the free CPU, is not the order they were asked in.
    try:
        wait_for("the native job and one pod's job run", lambda: state(cluster, int(native)) == "RUNNING"
                 and [state(cluster, j) for j in requests].count("RUNNING") == 1, timeout=120,
                 explain=lambda: queue_and_nodes(cluster))
        pod, third = sorted(requests, key=lambda j: state(cluster, j) != "RUNNING")
        listed = {j.job_id: j for j in jobs.listed()}
        assert listed[pod].nodes == (wide,) and listed[pod].allocation == ()  # a line per job
        assert [(j.job_id, j.allocation) for j in jobs.detailed([pod])] == [(pod, ((wide, 1),))]
        assert listed[third].state == "PENDING" and listed[third].nodes == ()
        # Its reason is None until a scheduling pass has looked at it (one was late under CI's load).
        wait_for("the third request waits for Resources", lambda: {j.job_id: j.reason for j in jobs.listed()}
                 .get(third) == "Resources", timeout=60)
        assert int(native) not in listed  # a native job is never the bridge's
        # The update a cycle that ended a job makes (slurmctld then schedules at once): taken, and
        # the job still the bridge's, with its gang.
        jobs.nudge(listed[third])
        assert {j.job_id: j.gang for j in jobs.listed()}[third] == requests[third]
        # Larger than any node: Slurm takes it (EnforcePartLimits is not set: a partition of node sets
        # may grow) and says why it waits, which the pod's Event repeats.
        (too_large,) = submitted(jobs, ExternalJobRequest(gang="pod-c", name="ml/pod-c", tasks=1, cpus_per_task=64))
        wait_for("Slurm's reason for the large request", lambda: {j.job_id: j.reason for j in jobs.listed()}
                 .get(too_large) == "PartitionConfig", timeout=30)
        jobs.cancel([too_large])
        jobs.cancel([pod])  # the pod is gone: what it held goes to the waiting one
        wait_for("the third request runs", lambda: state(cluster, third) == "RUNNING", timeout=60)
        assert state(cluster, int(native)) == "RUNNING"
        assert {j.job_id: j.state for j in jobs.listed()}[pod] == "CANCELLED"
    finally:
        cluster.exec(CONTROLLER_POD, "scancel", native, *(str(j) for j in requests), check=False)


def test_an_external_job_ends_as_its_pods_did_completed_or_failed_with_their_exit_code(cluster, wide):
    """slurmkube-complete-job (the controller image's): what sacct and squeue then say of a bridge
    job is how its pods ended, not that someone cancelled it."""
    jobs = external_jobs(cluster)
    asked = [ExternalJobRequest(gang=g, name="ml/" + g, tasks=1, cpus_per_task=1, mem_per_cpu_mib=64)
             for g in ("done", "broken")]
    done, broken = submitted(jobs, *asked)
    try:
        wait_for("both jobs run", lambda: {state(cluster, done), state(cluster, broken)} == {"RUNNING"}, timeout=60)
        assert jobs.complete([(done, 0), (broken, 3)]) == [None, None]  # one call for both
        wait_for("the jobs end as their pods did", lambda: (state(cluster, done), state(cluster, broken))
                 == ("COMPLETED", "FAILED"), timeout=30)  # fmt: skip
        shown = cluster.exec(CONTROLLER_POD, "scontrol", "show", "job", str(broken)).stdout
        assert "ExitCode=3:0" in shown, shown
        (again,) = jobs.complete([(done, 0)])
        assert isinstance(again, SlurmError) and "already" in str(again), again
        usage = cluster.exec(CONTROLLER_POD, C.COMPLETE_JOB_PROGRAM, str(done), "256", check=False)
        assert usage.returncode == 2 and "EXITCODE 0-255" in usage.stderr, usage.stderr
    finally:
        cluster.exec(CONTROLLER_POD, "scancel", str(done), str(broken), check=False)


def test_a_higher_priority_pods_job_takes_the_first_cpu_that_frees_before_older_jobs(cluster, wide):
    """The bridge gives a job its gang's pod priority as a negative nice (plan_bridge.gang_nice):
    Slurm adds it to the job's priority, and of three jobs waiting for the node, the last submitted
    but most important gets the one CPU that frees."""
    jobs = external_jobs(cluster)
    # Small (the partition's default memory per CPU is a 1-CPU node's: one such job would fill the node).
    natives = [cluster.exec(CONTROLLER_POD, "sbatch", "--parsable", "-o", "/dev/null", "-c1", "--mem=64", "-w", wide,
                            "--wrap", "sleep 600").stdout.strip() for _cpu in range(2)]
    asked = (("old-a", 0), ("old-b", 0), ("urgent", -1000))
    waiting: List[int] = []
    try:
        # Both run before the others come: a native job still waiting would rank below the urgent one.
        wait_for("both native jobs run", lambda: {state(cluster, int(n)) for n in natives} == {"RUNNING"}, timeout=60)
        waiting = submitted(jobs, *[ExternalJobRequest(gang=g, name="ml/" + g, tasks=1, cpus_per_task=1,
                                                       mem_per_cpu_mib=64, nice=nice) for g, nice in asked])
        shown = cluster.exec(CONTROLLER_POD, "squeue", "-h", "-t", "PD", "-o", "%i %Q %y").stdout.split("\n")
        priority = {int(i): (int(p), int(y)) for i, p, y in (line.split() for line in shown if line.strip())}
        (old_a, old_b, urgent) = (priority[j] for j in waiting)
        assert urgent[1] == -1000 and old_a[1] == old_b[1] == 0, shown
        assert urgent[0] >= max(old_a[0], old_b[0]) + 1000 - 10, shown  # 10: their age meanwhile
        cluster.exec(CONTROLLER_POD, "scancel", natives[0])
        wait_for("the urgent job runs", lambda: state(cluster, waiting[2]) == "RUNNING", timeout=60)
        assert [state(cluster, j) for j in waiting[:2]] == ["PENDING", "PENDING"]
    finally:
        cluster.exec(CONTROLLER_POD, "scancel", *natives, *(str(j) for j in waiting), check=False)
