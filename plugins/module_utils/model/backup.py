# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What spec.backup is made of beside its own fields (types.py's Backup, which needs Resources and
PodOptions): the restic patterns, the retention, and spec.backup.restore, a restore from the
backups' repository run once per name (its rules: rules.py; the operator's step:
operator/restores.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import DNS1123_LABEL, spec_field

# restic's repository backends the backup pod may use: none that runs a program of its own
# (sftp: ssh, rclone:) or writes to the pod's own disk (a local path: claimName instead).
RESTIC_REPOSITORY = r"^(s3|rest|b2|azure|gs|swift):[^\s]+$"
# Five cron fields, or one of the macros Kubernetes' CronJob takes.
CRON_SCHEDULE = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$"


@dataclass(frozen=True)
class BackupRetention:
    """How many snapshots of each part restic forget keeps after each backup (restic's --keep-last,
    --keep-daily, --keep-weekly, --keep-monthly: the newest of each day, week and month); the others
    are pruned. Snapshots of other hosts (clusters) in the repository are left alone."""

    last: int = spec_field("The newest snapshots kept, whatever their age.", 3, minimum=0, maximum=1000)
    daily: int = spec_field("Days whose newest snapshot is kept.", 7, minimum=0, maximum=1000)
    weekly: int = spec_field("Weeks whose newest snapshot is kept.", 4, minimum=0, maximum=1000)
    monthly: int = spec_field("Months whose newest snapshot is kept.", 6, minimum=0, maximum=1000)


# restic's "latest" or a snapshot's ID (its short form or whole).
RESTIC_SNAPSHOT = r"^(latest|[0-9a-f]{8,64})$"
# A path in the jail as restic's --include reads it: no pattern characters (*, ?, [, \), no
# newline (the restore pod reads them a line each), no '..'.
RESTORE_PATH = r"^/([^*?\[\\\n/]+(/[^*?\[\\\n/]+)*)?$"


@dataclass(frozen=True)
class Restore:
    """A restore from the backups' repository (spec.backup's): the operator runs it once per name.
    Restoring controllerState stops slurmctld (every controller) and restoring accountingDatabase
    stops slurmdbd until the restore Job has ended; they come back on their own. Jail paths are
    restored while the cluster runs. status.restore says where it is; Events say when it starts,
    ends or fails."""

    name: Optional[str] = spec_field(
        "The restore's name: a name the status records as done is not run again; a new name runs a new "
        "restore. Unset: none.", None, pattern=DNS1123_LABEL, max_length=40)
    snapshot: str = spec_field(
        "'latest' (each part's newest snapshot of this cluster) or a snapshot's ID (restic snapshots), of the "
        "one part restored.", "latest", pattern=RESTIC_SNAPSHOT)
    jail: bool = spec_field("Restore jailPaths of the jail.", False)
    jail_paths: List[str] = spec_field(
        "Paths in the jail restored (a file or a directory, with what it holds); '/' is the whole jail.",
        factory=lambda: ["/"], pattern=RESTORE_PATH, max_length=4096, max_items=64, unique=True,
        pattern_doc="an absolute path without '.' or '..' parts, *, ?, [, \\ or a newline")
    exact: bool = spec_field(
        "Files under jailPaths that the snapshot does not hold are deleted (restic restore --delete): the "
        "paths become what the snapshot holds. Unset, such files are left.", False)
    controller_state: bool = spec_field(
        "Restore slurmctld's StateSaveLocation, exactly as the snapshot holds it (the queue and reservations "
        "of that time; jobs running now that it does not hold are ended by slurmctld when their nodes report "
        "them).", False)
    accounting_database: bool = spec_field(
        "Restore the accounting database from its dump (the database is dropped first: records since the "
        "snapshot are lost).", False)
