"""The bridge's jobs read from real `squeue --json` output and from the cycle's one-line listing
(Slurm 26.05.5, the docker tier's cluster: a native job and external jobs sharing a 2-CPU node, one
external job over two nodes, one waiting, one cancelled, a native job carrying a bridge comment;
the listing also has one larger than any node, which Slurm took and holds for PartitionConfig)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import EACH_END, SlurmControl
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.external import (
    ExternalJob,
    ExternalJobRequest,
    ExternalJobs,
    expand_hostlist,
    parse_external_jobs,
    parse_job_id,
    parse_listed,
    sbatch_argv,
)

SAMPLE = Path(__file__).resolve().parents[3] / "fixtures" / "slurm" / "squeue-external-26.05.json"
LISTING = SAMPLE.with_suffix(".txt")


def test_only_roots_external_jobs_with_the_bridge_comment_are_the_bridges():
    jobs = {j.job_id: j for j in parse_external_jobs(SAMPLE.read_text())}
    assert sorted(jobs) == [2, 3, 4, 5]  # 1: no comment; 6: the comment, but a batch job
    assert (jobs[2].gang, jobs[2].state, jobs[2].allocation) == ("aaaa", "RUNNING",
                                                                 (("demo-cpu-0", 1), ("demo-cpu-1", 1)))
    assert (jobs[3].state, jobs[3].allocation) == ("RUNNING", (("demo-wide-0", 1),))
    assert (jobs[4].state, jobs[4].reason, jobs[4].allocation) == ("PENDING", "Resources", ())
    assert jobs[5].ended and not jobs[5].running and jobs[5].state == "CANCELLED"


def test_the_sbatch_command_gives_each_option_one_argument_and_no_script():
    request = ExternalJobRequest(gang="abc", name="ml/train", tasks=2, cpus_per_task=4, mem_per_cpu_mib=512,
                                 gpus_per_task=1, partition="gpu", account="physics", qos="high",
                                 time_limit="2:00:00", exclusive=True, nice=-1000)
    assert sbatch_argv(request) == [
        "sbatch", "--external", "--parsable", "--job-name=ml/train", "--comment=slurmkube-bridge:abc", "--ntasks=2",
        "--cpus-per-task=4", "--mem-per-cpu=512", "--gpus-per-task=1", "--partition=gpu", "--account=physics",
        "--qos=high", "--time=2:00:00", "--exclusive", "--nice=-1000"]
    plain = sbatch_argv(ExternalJobRequest(gang="g", name="ml/p", tasks=1, cpus_per_task=1))
    assert not [a for a in plain if a.startswith(("--mem", "--gpus", "--partition", "--account", "--qos", "--time",
                                                  "--exclusive", "--nice"))]
    assert parse_job_id("42\n") == 42 and parse_job_id("43;demo\n") == 43


def test_a_nudge_sets_a_waiting_jobs_comment_to_what_it_is():
    calls = []
    jobs = ExternalJobs(SlurmControl(lambda argv: calls.append(list(argv)) or (0, "", "")))
    jobs.nudge(ExternalJob(job_id=8, gang="abc", state="PENDING", reason="Resources"))
    assert calls == [["scontrol", "update", "JobId=8", "Comment=slurmkube-bridge:abc"]]


def test_many_submissions_and_completions_are_one_call_each_with_an_outcome_per_job():
    calls = []

    def answered(output):
        def run(argv):
            calls.append(list(argv))
            return 0, output, ""
        return ExternalJobs(SlurmControl(run))

    requests = [ExternalJobRequest(gang=g, name="ml/" + g, tasks=1, cpus_per_task=1) for g in ("a", "b")]
    submitted = answered("0\t42\tsbatch: warning: a word\n1\t\tsbatch: error: Invalid account or account/partition "
                         "combination\n").submit(requests)
    assert submitted[0] == 42 and "Invalid account" in str(submitted[1])
    assert calls[-1][:2] == ["bash", "-c"] and calls[-1].count("--comment=slurmkube-bridge:b") == 1
    ended = answered("0\t\t\n1\t\tslurmkube-complete-job: Job/step already completing or completed\n").complete(
        [(42, 0), (43, 2)])
    assert ended[0] is None and "already completing" in str(ended[1])
    assert calls[-1][-8:] == [C.COMPLETE_JOB_PROGRAM, "42", "0", EACH_END, C.COMPLETE_JOB_PROGRAM, "43", "2", EACH_END]
    assert len(calls) == 2


def test_a_hostlist_expands_to_its_nodes_keeping_zero_padding():
    assert expand_hostlist("demo-cpu-[0-2,7],demo-wide-0") == ["demo-cpu-0", "demo-cpu-1", "demo-cpu-2",
                                                               "demo-cpu-7", "demo-wide-0"]
    assert expand_hostlist("r[1-2]n[08-09]") == ["r1n08", "r1n09", "r2n08", "r2n09"]
    assert expand_hostlist("") == [] and expand_hostlist("(null)") == []


def test_the_listing_gives_roots_external_jobs_with_the_comment_their_nodes_and_no_cpus():
    jobs = {j.job_id: j for j in parse_listed(LISTING.read_text())}
    assert sorted(jobs) == [2, 3, 4, 5, 7]  # 1: no comment; 6: the comment, but a batch job
    assert (jobs[2].gang, jobs[2].state, jobs[2].nodes, jobs[2].allocation) == (
        "aaaa", "RUNNING", ("demo-cpu-0", "demo-cpu-1"), ())
    assert (jobs[3].nodes, jobs[3].reason) == (("demo-wide-0",), "")
    assert (jobs[4].state, jobs[4].reason, jobs[4].nodes) == ("PENDING", "Resources", ())
    assert jobs[5].ended and jobs[7].reason == "PartitionConfig"
