# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Back end of the slurm_qos module: one Quality of Service in slurmdbd, made, changed where
it differs, or deleted, through sacctmgr in the controller pod."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.sacctmgr import (
    Field,
    Outcome,
    Sacctmgr,
    SacctmgrError,
    carry_out,
    check_name,
    check_settings,
    merged,
    one,
    settings_words,
    shown,
)

QOS_FIELDS = (
    Field("description", "Description", "Descr", "text"),
    Field("priority", "Priority", "Priority", "int"),
    Field("preempt", "Preempt", "Preempt", "list"),
    Field("preempt_mode", "PreemptMode", "PreemptMode", "word"),
    Field("flags", "Flags", "Flags", "words"),
    Field("max_jobs_per_user", "MaxJobsPerUser", "MaxJobsPU", "int"),
    Field("max_submit_jobs_per_user", "MaxSubmitJobsPerUser", "MaxSubmitPU", "int"),
    Field("max_tres_per_user", "MaxTRESPerUser", "MaxTRESPU", "tres"),
    Field("max_tres_per_job", "MaxTRESPerJob", "MaxTRES", "tres"),
    Field("max_wall", "MaxWall", "MaxWall", "wall"),
    Field("grp_tres", "GrpTRES", "GrpTRES", "tres"),
    Field("grp_jobs", "GrpJobs", "GrpJobs", "int"),
)
COLUMNS = ["Name"] + [f.column for f in QOS_FIELDS]


def wanted_qos(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The module's options by field."""
    return {f.option: params.get(f.option) for f in QOS_FIELDS}


def read_qos(mgr: Sacctmgr, name: str) -> Optional[Dict[str, str]]:
    return one([r for r in mgr.show("qos", ["name=%s" % name], COLUMNS) if r["Name"] == name])


def known_qos(mgr: Sacctmgr) -> List[str]:
    return [r["Name"] for r in mgr.show("qos", [], ["Name"])]


def plan_qos(name: str, wanted: Mapping[str, Any], actual: Optional[Mapping[str, str]]) -> List[List[str]]:
    """The requests that make the QoS as wanted (settings left out are not managed)."""
    if actual is None:
        return [["add", "qos", name, *settings_words(QOS_FIELDS, wanted, {})]]
    words = settings_words(QOS_FIELDS, wanted, actual)
    return [["modify", "qos", "where", "name=%s" % name, "set", *words]] if words else []


def check_request(mgr: Sacctmgr, name: str, wanted: Mapping[str, Any]) -> None:
    """SacctmgrError naming the option, before anything is written."""
    check_name("name", name)
    check_settings(QOS_FIELDS, wanted)
    preempt = wanted.get("preempt") or []
    if preempt:
        unknown = sorted(set(preempt) - set(known_qos(mgr)) - {name})
        if unknown:
            raise SacctmgrError("preempt: no QoS named %s" % ", ".join(unknown))


def ensure_qos(mgr: Sacctmgr, name: str, state: str, wanted: Mapping[str, Any], check_mode: bool) -> Outcome:
    check_request(mgr, name, wanted if state == "present" else {})
    actual = read_qos(mgr, name)
    before = shown(QOS_FIELDS, actual) if actual else {}
    if state == "absent":
        requests = [["delete", "qos", "where", "name=%s" % name]] if actual else []
        carry_out(mgr, requests, check_mode)
        return Outcome(bool(requests), requests, before, {})
    requests = plan_qos(name, wanted, actual)
    carry_out(mgr, requests, check_mode)
    after = before if not requests else (merged(QOS_FIELDS, before, wanted) if check_mode
                                         else shown(QOS_FIELDS, read_qos(mgr, name) or {}))
    return Outcome(bool(requests), requests, before, after)
