# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Back end of the slurm_user module: a Slurm user's associations in one cluster (the
accounts it may charge, its default account), its admin level, and the share, QoS and limits
of each of its associations, through sacctmgr in the controller pod.

Together with jail_user (the Linux account in the jail) it gives a person who can log in and
run jobs under an account.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.sacctmgr import (
    ASSOCIATION_FIELDS,
    OWN_ONLY,
    Field,
    Outcome,
    Sacctmgr,
    SacctmgrError,
    carry_out,
    check_known,
    check_name,
    check_settings,
    flattened,
    known_names,
    list_items,
    settings_words,
    shown,
)

USER_FIELDS = (
    Field("default_account", "DefaultAccount", "DefaultAccount", "name"),
    Field("admin_level", "AdminLevel", "Admin", "word"),
)
ASSOCIATION_COLUMNS = ["Account", "User"] + [f.column for f in ASSOCIATION_FIELDS]


def wanted_user(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The module's options by field, its limits and account list among them."""
    return dict(flattened(params, USER_FIELDS + ASSOCIATION_FIELDS), accounts=params.get("accounts"))


class SlurmUser(NamedTuple):
    """A user as sacctmgr shows it: its own record and its associations in the cluster, by account."""

    record: Dict[str, str]
    associations: Dict[str, Dict[str, str]]


def read_user(mgr: Sacctmgr, cluster: str, name: str) -> Optional[SlurmUser]:
    """The user with its associations in the cluster, or None when it has none there."""
    rows = mgr.show("association", ["cluster=%s" % cluster, "user=%s" % name], ASSOCIATION_COLUMNS, OWN_ONLY)
    associations = {r["Account"]: r for r in rows if r["User"] == name}
    if not associations:
        return None
    users = [r for r in mgr.show("user", ["name=%s" % name, "cluster=%s" % cluster],
                                 ["User"] + [f.column for f in USER_FIELDS]) if r["User"] == name]
    return SlurmUser(users[0] if users else {}, associations)


def described(user: Optional[SlurmUser]) -> Dict[str, Any]:
    """What the module returns for a user (empty when it has no association here)."""
    if user is None:
        return {}
    out = shown(USER_FIELDS, user.record)
    out["accounts"] = sorted(user.associations)
    out["associations"] = {account: shown(ASSOCIATION_FIELDS, row)
                           for account, row in sorted(user.associations.items())}
    return out


def wanted_accounts(wanted: Mapping[str, Any], user: Optional[SlurmUser]) -> List[str]:
    """The accounts the user should have: the listed ones (and its default account), or, when
    none are listed, the ones it has (a new user: its default account)."""
    listed = list_items(wanted.get("accounts")) if wanted.get("accounts") is not None else (
        sorted(user.associations) if user else [])
    default = wanted.get("default_account")
    return sorted(set(listed) | ({default} if default else set()))


def plan_user(cluster: str, name: str, wanted: Mapping[str, Any], user: Optional[SlurmUser]) -> List[List[str]]:
    """Requests in a safe order: new associations, then the default account and admin level,
    then the associations' settings, then the associations no longer wanted."""
    accounts = wanted_accounts(wanted, user)
    have = user.associations if user else {}
    requests: List[List[str]] = []
    missing = [a for a in accounts if a not in have]
    if missing:
        settings = settings_words(ASSOCIATION_FIELDS, wanted, {})
        own = settings_words(USER_FIELDS, wanted, {}) if user is None else []
        requests.append(["add", "user", name, "Cluster=%s" % cluster, "Account=%s" % ",".join(missing), *own,
                         *settings])
    if user is not None:
        own = settings_words(USER_FIELDS, wanted, user.record)
        if own:
            requests.append(["modify", "user", "where", "name=%s" % name, "cluster=%s" % cluster, "set", *own])
        for account in sorted(a for a in accounts if a in have):
            words = settings_words(ASSOCIATION_FIELDS, wanted, have[account])
            if words:
                requests.append(["modify", "user", "where", "name=%s" % name, "cluster=%s" % cluster,
                                 "account=%s" % account, "set", *words])
        extra = sorted(set(have) - set(accounts))
        if extra:
            requests.append(["delete", "user", "where", "name=%s" % name, "cluster=%s" % cluster,
                             "account=%s" % ",".join(extra)])
    return requests


def check_request(mgr: Sacctmgr, cluster: str, name: str, wanted: Mapping[str, Any],
                  user: Optional[SlurmUser]) -> None:
    """SacctmgrError naming the option, before anything is written."""
    check_name("name", name)
    check_settings(USER_FIELDS + ASSOCIATION_FIELDS, wanted)
    listed = wanted.get("accounts")
    for account in list_items(listed):
        check_name("accounts", account)
    default = wanted.get("default_account")
    if user is None and not default:
        raise SacctmgrError("default_account: required for a user new to cluster %s" % cluster)
    if default and listed is not None and default not in list_items(listed):
        raise SacctmgrError("default_account: %s is not among accounts (%s)" % (default, ", ".join(list_items(listed))))
    current = (user.record.get("DefaultAccount") or "") if user else ""
    if listed is not None and not default and current and current not in list_items(listed):
        # slurmdbd refuses to remove the default account's association, after the other requests.
        raise SacctmgrError("default_account: accounts drops %s, the user's default account; name the new one"
                            % current)
    accounts = wanted_accounts(wanted, user)
    check_known("accounts", accounts, known_names(mgr, "association", ["cluster=%s" % cluster], "Account"),
                "account in cluster %s" % cluster)
    qos = list_items(wanted.get("qos")) + ([wanted["default_qos"]] if wanted.get("default_qos") else [])
    if qos:
        check_known("qos", qos, known_names(mgr, "qos", [], "Name"), "QoS")


def after_check_mode(fields: Sequence[Field], before: Dict[str, Any], wanted: Mapping[str, Any],
                     accounts: List[str]) -> Dict[str, Any]:
    after = dict(before)
    for field in USER_FIELDS:
        if wanted.get(field.option) is not None:
            after[field.option] = wanted[field.option]
    after["accounts"] = accounts
    old = before.get("associations", {})
    assoc = {}
    for account in accounts:
        row = dict(old.get(account) or {f.option: "" for f in fields})
        row.update({f.option: wanted[f.option] for f in fields if wanted.get(f.option) is not None})
        assoc[account] = row
    after["associations"] = assoc
    return after


def ensure_user(mgr: Sacctmgr, cluster: str, name: str, state: str, wanted: Mapping[str, Any],
                check_mode: bool) -> Outcome:
    user = read_user(mgr, cluster, name)
    before = described(user)
    if state == "absent":
        check_name("name", name)
        requests = [["delete", "user", "where", "name=%s" % name, "cluster=%s" % cluster]] if user else []
        carry_out(mgr, requests, check_mode)
        return Outcome(bool(requests), requests, before, {})
    check_request(mgr, cluster, name, wanted, user)
    requests = plan_user(cluster, name, wanted, user)
    carry_out(mgr, requests, check_mode)
    if not requests:
        after = before
    elif check_mode:
        after = after_check_mode(ASSOCIATION_FIELDS, before, wanted, wanted_accounts(wanted, user))
    else:
        after = described(read_user(mgr, cluster, name))
    return Outcome(bool(requests), requests, before, after)
