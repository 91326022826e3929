"""spec.slurm.profile: what slurm.conf is tuned for, as settings merged over the product's."""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.slurmkube.core.plugins.module_utils.model.types import SlurmCluster

# Seconds an ended job stays in slurmctld's memory under the highThroughput profile (the guide: "a
# few seconds"); enough for squeue and the exporter to see it end.
HIGH_THROUGHPUT_MIN_JOB_AGE = 10


def profile_settings(cluster: SlurmCluster) -> Dict[str, Any]:
    """What spec.slurm.profile changes in the product's settings (null deletes). highThroughput takes
    from SchedMD's high-throughput guide (doc/html/high_throughput.shtml) what fits every cluster.
    Not its scheduler parameters: defer, sched_min_interval and batch_sched_delay batch the
    scheduling of clusters that start hundreds of jobs a pass; on the throughput bench's four CPUs
    `defer` left them idle between passes three seconds apart (1.3 jobs/s where 42 ran without it).
    Nor a cheaper priority plugin (fair share is what accounting is for). munged runs with ten
    threads under any profile."""
    if cluster.spec.slurm.profile != "highThroughput":
        return {}
    settings: Dict[str, Any] = {
        "JobAcctGatherType": "jobacct_gather/none",
        "JobAcctGatherFrequency": None,
    }
    if not cluster.spec.bridge.namespaces:
        # A bridged pod's job that ended and was forgotten before the bridge looked would leave its
        # pods running: the bridge takes a job Slurm no longer lists for one it cannot judge.
        settings["MinJobAge"] = HIGH_THROUGHPUT_MIN_JOB_AGE
    return settings
