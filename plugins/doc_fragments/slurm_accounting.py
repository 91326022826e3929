# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The target and behaviour the accounting modules (slurm_account, slurm_user, slurm_qos)
    share; twin of module_utils.ops.common.ACCOUNTING_ARGS."""

    DOCUMENTATION = r"""
options:
  cluster:
    description:
      - Name of the SlurmCluster; its controller pod runs C(sacctmgr), and associations are
        made in the Slurm cluster of that name.
      - The cluster needs C(spec.accounting.enabled=true).
    type: str
    required: true
  namespace:
    description: Namespace of the cluster.
    type: str
    default: default
seealso:
  - name: sacctmgr
    link: https://slurm.schedmd.com/sacctmgr.html
    description: Slurm's own tool for the accounting database, which the module runs.
notes:
  - Talks to slurmdbd with C(sacctmgr) in a ready controller pod, through the Kubernetes exec
    API, reading its parsable output. Only settings that differ are changed; an option left
    out is not managed.
  - Numbers and wall times take V(-1) to clear a limit. TRES limits are complete when given
    (a TRES left out of the value is cleared, V(-1) clears them all); memory compares in MiB
    (V(mem=10G) equals V(mem=10240)).
  - Names (accounts, users, QoS) are lowercase words, as sacctmgr stores them; it also
    lowercases descriptions, so they compare without case.
  - Settings are read as the association holds them itself, not as it inherits them from its
    parent account.
"""

    LIMITS = r"""
options:
  limits:
    description:
      - The association's limits; each one left out is not managed, V(-1) clears it.
    type: dict
    suboptions:
      grp_tres:
        description:
          - TRES the association's running jobs (with its children's) may hold together,
            e.g. V(cpu=256,gres/gpu=16).
        type: str
      grp_jobs:
        description: Running jobs of the association and its children together.
        type: int
      grp_submit_jobs:
        description: Running and pending jobs of the association and its children together.
        type: int
      max_jobs:
        description: Running jobs of the association at once.
        type: int
      max_submit_jobs:
        description: Running and pending jobs of the association at once.
        type: int
      max_tres_per_job:
        description: TRES one job may hold (C(MaxTRES)).
        type: str
      max_wall:
        description: Longest wall time of a job, in minutes or V([days-]hours:minutes:seconds).
        type: str
  fairshare:
    description:
      - The association's share of the cluster among its siblings (a whole number >= 0), or
        V(parent) to count as its parent account.
    type: str
  qos:
    description: The QoS the association's jobs may use (the complete list).
    type: list
    elements: str
  default_qos:
    description: The QoS of jobs that name none; one of O(qos). V(-1) clears it.
    type: str
"""
