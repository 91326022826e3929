# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling a new munge key out to a running cluster, decided from what each pod reports.

munged knows one key at a time and reads it only at start: while two daemons hold
different keys they cannot talk. So nothing switches until every pod has the new key
mounted (the kubelet brings Secret changes within about a minute); then munged restarts
in the pods of the daemons others call (slurmctld, slurmdbd) and right after in every other
pod, while slurmctld, slurmd, slurmdbd, sshd and the jobs keep running. Pure functions; the
reconciler does the exec calls.
"""

from __future__ import annotations

import re
from typing import List, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C

_STATUS = re.compile(r"^running=(\S+) mounted=(\S+)$")
# The daemons the others call: they switch in the first batch.
SERVER_COMPONENTS = (C.COMPONENT_CONTROLLER, C.COMPONENT_SLURMDBD)


class KeyView(NamedTuple):
    """One running pod's munge keys, by fingerprint."""

    pod: str
    component: str
    running: str
    mounted: str


class KeyRollout(NamedTuple):
    """The next step: done, wait for mounts, or restart munged in these pods, batch by batch."""

    done: bool
    waiting: List[str]
    batches: List[List[str]]


def parse_key_status(text: str) -> Optional[Tuple[str, str]]:
    """(running, mounted) from `slurmkube-munge-key status`; None when it printed something else."""
    match = _STATUS.match(text.strip())
    return (match.group(1), match.group(2)) if match else None


def plan_key_rollout(target: str, views: Sequence[KeyView]) -> KeyRollout:
    """What to do so that every pod's munged runs with TARGET."""
    behind = sorted((v for v in views if v.running != target), key=lambda v: v.pod)
    if not behind:
        return KeyRollout(True, [], [])
    waiting = [v.pod for v in behind if v.mounted != target]
    if waiting:
        return KeyRollout(False, waiting, [])
    # slurmctld and slurmdbd first, together (slurmctld sends slurmdbd its records): workers,
    # login nodes and the exporter that switch then talk to servers that have.
    first = [v.pod for v in behind if v.component in SERVER_COMPONENTS]
    rest = [v.pod for v in behind if v.component not in SERVER_COMPONENTS]
    return KeyRollout(False, [], [batch for batch in (first, rest) if batch])
