# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm drain reasons: which are ours, who set them, and what they say.

Three writers share one prefix (constants.DRAIN_REASON_PREFIX), so admins' drains are told
apart: the operator's planned drains ("<prefix> <purpose> since <time>"), the long checks
("<prefix> long check: <why>") and the fast health check ("<prefix> <why>[; <why>...]"). The
bash checks read the same prefix and pattern from constants.sh (generated from constants.py).
"""

from __future__ import annotations

import datetime
import re
from typing import Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import SlurmNode

PURPOSE_SCALE_DOWN = "scale-down"
PURPOSE_UPDATE = "update"
PURPOSE_REPLACE = "replace"
# The Kubernetes node under the pod is being emptied (cordoned by kubectl drain, marked for
# removal by an autoscaler): no new job there; running ones finish or are requeued.
PURPOSE_EVICTION = "kubernetes eviction"
_PLANNED = re.compile(C.DRAIN_REASON_PLANNED_RE)
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# What the health checks (nodecheck.py, slurmkube-long-check) say after 'slurmkube: ' when the
# machine is at fault: GPUs, disk, CPU, memory bandwidth, clock, network. munged, slurmd, the
# jail and memory pressure are software or load: a new pod on the same machine changes nothing
# there, or the node's own check resumes it.
_HARDWARE_WHY = re.compile(r"^(gpu |\d+ of \d+ GPUs|nvidia-smi |all-reduce|memory bandwidth |compute |scratch |"
                           r"clock |latency to |\d+ CPUs did not hash|cannot (write|allocate|create)|data read back)")


def drain_reason(purpose: str, since: datetime.datetime) -> str:
    """The operator's planned drain: prefixed, with the purpose and when it started (UTC)."""
    return "%s %s since %s" % (C.DRAIN_REASON_PREFIX, purpose, since.astimezone(datetime.timezone.utc)
                               .strftime(_TIME_FORMAT))


def node_lost_reason(host: str) -> str:
    """Why the operator set a worker DOWN: the Kubernetes node under its pod stopped reporting."""
    return "%s %s %s lost" % (C.DRAIN_REASON_PREFIX, C.REASON_NODE_LOST, host)


def parse_drain_reason(reason: str) -> Optional[Tuple[str, datetime.datetime]]:
    """(purpose, start) of a planned drain the operator wrote, None for any other reason."""
    match = _PLANNED.match(reason or "")
    if not match:
        return None
    since = datetime.datetime.strptime(match.group(2), _TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
    return match.group(1), since


def health_reason(problems: Sequence[str]) -> str:
    """The reason the fast health check drains with: its problems, '; '-joined."""
    return "%s %s" % (C.DRAIN_REASON_PREFIX, "; ".join(problems))


def set_by_fast_check(reason: str) -> bool:
    """A reason the fast health check wrote: ours, neither a long check's (a node that failed
    minutes of testing waits for a person or a replacement) nor a planned drain. The bash
    check's drained_by_this_check is the same rule."""
    return (reason.startswith(C.DRAIN_REASON_PREFIX)
            and not reason.startswith("%s %s" % (C.DRAIN_REASON_PREFIX, C.DRAIN_REASON_LONG_CHECK))
            and parse_drain_reason(reason) is None)


def fast_check_may_drain(node: SlurmNode) -> bool:
    """The fast check's drain may be (re)written: the node is not drained, or drained by it.
    Anyone else's drain (an admin's, a long check's, the operator's) stays as it is."""
    return not node.draining or set_by_fast_check(node.reason)


def is_hardware_drain(reason: str) -> bool:
    """A drain the health checks set because of the machine (any of its '; '-joined problems)."""
    prefix = C.DRAIN_REASON_PREFIX + " "
    if not reason.startswith(prefix):
        return False
    why = reason[len(prefix):]
    if why.startswith(C.DRAIN_REASON_LONG_CHECK):
        why = why[len(C.DRAIN_REASON_LONG_CHECK):].lstrip()
    return any(_HARDWARE_WHY.match(part) for part in why.split("; "))
