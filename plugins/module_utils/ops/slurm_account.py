# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Back end of the slurm_account module: one Slurm account and its association in one
cluster (parent, fair share, QoS, limits), through sacctmgr in the controller pod.

An account's description and organization belong to the account (every cluster); parent,
share, QoS and limits to its association in this cluster.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.sacctmgr import (
    ASSOCIATION_FIELDS,
    OWN_ONLY,
    Field,
    Outcome,
    Sacctmgr,
    carry_out,
    check_known,
    check_name,
    check_settings,
    flattened,
    known_names,
    list_items,
    merged,
    settings_words,
    shown,
)

ACCOUNT_FIELDS = (
    Field("description", "Description", "Descr", "text"),
    Field("organization", "Organization", "Org", "text"),
)
PARENT = Field("parent", "Parent", "ParentName", "name")
ACCOUNT_ASSOCIATION_FIELDS = (PARENT,) + ASSOCIATION_FIELDS
ALL_FIELDS = ACCOUNT_FIELDS + ACCOUNT_ASSOCIATION_FIELDS


def wanted_account(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The module's options by field, its limits among them."""
    return flattened(params, ALL_FIELDS)


def read_account(mgr: Sacctmgr, cluster: str, name: str) -> Optional[Dict[str, str]]:
    """The account with its association in the cluster, or None when it has none there."""
    columns = ["Account", "User"] + [f.column for f in ACCOUNT_ASSOCIATION_FIELDS]
    assoc = [r for r in mgr.show("association", ["cluster=%s" % cluster, "account=%s" % name], columns, OWN_ONLY)
             if r["Account"] == name and not r["User"]]
    if not assoc:
        return None
    account = [r for r in mgr.show("account", ["name=%s" % name], ["Account"] + [f.column for f in ACCOUNT_FIELDS])
               if r["Account"] == name]
    return dict(assoc[0], **(account[0] if account else {}))


def plan_account(cluster: str, name: str, wanted: Mapping[str, Any],
                 actual: Optional[Mapping[str, str]]) -> List[List[str]]:
    """The requests that make the account as wanted (options left out are not managed)."""
    if actual is None:
        create = dict(wanted, parent=wanted.get("parent") or "root")
        return [["add", "account", name, "Cluster=%s" % cluster, *settings_words(ALL_FIELDS, create, {})]]
    requests = []
    own = settings_words(ACCOUNT_FIELDS, wanted, actual)
    if own:
        requests.append(["modify", "account", "where", "name=%s" % name, "set", *own])
    assoc = settings_words(ACCOUNT_ASSOCIATION_FIELDS, wanted, actual)
    if assoc:
        requests.append(["modify", "account", "where", "name=%s" % name, "cluster=%s" % cluster, "set", *assoc])
    return requests


def check_request(mgr: Sacctmgr, cluster: str, name: str, wanted: Mapping[str, Any]) -> None:
    """SacctmgrError naming the option, before anything is written: bad values, a parent
    account or a QoS that does not exist."""
    check_name("name", name)
    check_settings(ALL_FIELDS, wanted)
    if wanted.get("parent"):
        check_name("parent", wanted["parent"])
        accounts = known_names(mgr, "association", ["cluster=%s" % cluster], "Account")
        check_known("parent", [wanted["parent"]], accounts, "account in cluster %s" % cluster)
    qos = list_items(wanted.get("qos")) + ([wanted["default_qos"]] if wanted.get("default_qos") else [])
    if qos:
        check_known("qos", qos, known_names(mgr, "qos", [], "Name"), "QoS")


def ensure_account(mgr: Sacctmgr, cluster: str, name: str, state: str, wanted: Mapping[str, Any],
                   check_mode: bool) -> Outcome:
    check_request(mgr, cluster, name, wanted if state == "present" else {})
    actual = read_account(mgr, cluster, name)
    before = shown(ALL_FIELDS, actual) if actual else {}
    if state == "absent":
        requests = [["delete", "account", "where", "name=%s" % name, "cluster=%s" % cluster]] if actual else []
        carry_out(mgr, requests, check_mode)
        return Outcome(bool(requests), requests, before, {})
    requests = plan_account(cluster, name, wanted, actual)
    carry_out(mgr, requests, check_mode)
    if not requests:
        after = before
    elif check_mode:
        after = merged(ALL_FIELDS, before, wanted)
    else:
        after = shown(ALL_FIELDS, read_account(mgr, cluster, name) or {})
    return Outcome(bool(requests), requests, before, after)
