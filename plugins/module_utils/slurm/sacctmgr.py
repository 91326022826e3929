# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's accounting records (accounts, users, QoS) through sacctmgr, read as parsable
output (`-n -P`, one `|`-separated row per record), compared field by field, changed with
`sacctmgr -i add|modify|delete`.

Each managed setting is a Field: the module option, the key sacctmgr sets it with, the
column sacctmgr shows it in, and how its text compares (sacctmgr prints `1-00:00:00` for a
wall limit given as `1440`, `mem=10G` for `mem=10240`). A setting left out is not managed.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from ansible_collections.slurmkube.core.plugins.module_utils.slurm.control import Runner, SlurmError

# Names sacctmgr takes as one word: no blanks, separators or quotes, and lowercase: sacctmgr
# lowercases account, QoS and user names, so a capital would name a record never found again.
NAME = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
# Free text (descriptions): one line, none of sacctmgr's own separators.
TEXT_FORBIDDEN = re.compile(r"[|'\"\x00-\x1f\x7f]")
TRES_ITEM = re.compile(r"^([a-z]+(?:/[A-Za-z0-9_:.-]+)?)=(-1|[0-9]+)([KMGTP]?)$")
# TRES counted in bytes, which sacctmgr prints with a unit: memory and burst buffers.
SIZED_TRES = re.compile(r"^(mem|bb/.+)$")
# PreemptMode words sacctmgr prints as another (measured by review in 24.11's sacctmgr).
PREEMPT_MODE_SHOWN = {"off": "cluster", "on": "suspend"}
MEM_UNITS = {"K": 1.0 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}
# Wall times as Slurm reads them: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
WALL = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


class Field(NamedTuple):
    """One managed setting."""

    option: str
    key: str  # what `sacctmgr ... set KEY=value` takes
    column: str  # what `format=COLUMN` shows
    # text (free text; sacctmgr lowercases it), name (one record's name, -1 or "" for none),
    # word (a keyword), words (a list of flags), list (of names), int, tres, wall, share (a
    # fair-share number or 'parent')
    kind: str


# An association's limits (accounts and users), by module option.
ASSOCIATION_LIMITS = (
    Field("grp_tres", "GrpTRES", "GrpTRES", "tres"),
    Field("grp_jobs", "GrpJobs", "GrpJobs", "int"),
    Field("grp_submit_jobs", "GrpSubmitJobs", "GrpSubmit", "int"),
    Field("max_jobs", "MaxJobs", "MaxJobs", "int"),
    Field("max_submit_jobs", "MaxSubmitJobs", "MaxSubmit", "int"),
    Field("max_tres_per_job", "MaxTRES", "MaxTRES", "tres"),
    Field("max_wall", "MaxWall", "MaxWall", "wall"),
)


# `show association` fills in a parent's limits, QoS and default QoS where the association has
# none of its own; WOPLimits shows its own only, so "not set" reads as not set.
OWN_ONLY = ("WOPLimits",)
# What every association (an account's or a user's, in one cluster) holds besides its limits.
ASSOCIATION_FIELDS = (
    Field("fairshare", "Fairshare", "Fairshare", "share"),
    Field("qos", "QOS", "QOS", "list"),
    Field("default_qos", "DefaultQOS", "DefaultQOS", "name"),
) + ASSOCIATION_LIMITS


class SacctmgrError(SlurmError):
    """A request sacctmgr refused, or an input it would misread."""


def wall_minutes(text: str) -> int:
    """A wall time in minutes; -1 (or empty) means no limit."""
    text = str(text).strip()
    if text in ("", "-1", "UNLIMITED", "INFINITE"):
        return -1
    match = WALL.match(text)
    if not match:
        raise SacctmgrError("a wall time must be minutes or [days-]hours:minutes[:seconds], got %r" % text)
    days, first, second, third = match.groups()
    if days is None and third is None:
        # M or M:S (seconds round up, as Slurm does)
        minutes = int(first) + (1 if second and int(second) else 0)
        return minutes
    hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
    return int(days or 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def tres_counts(text: str) -> Dict[str, int]:
    """TRES limits by name (sizes in MiB); an empty text or -1 is no limit."""
    counts: Dict[str, int] = {}
    text = str(text).replace(" ", "")
    if text == "-1":
        return counts
    for item in filter(None, text.split(",")):
        match = TRES_ITEM.match(item)
        if not match:
            raise SacctmgrError("a TRES limit is name=count (cpu=4,mem=10G,gres/gpu=2), got %r" % item)
        name, count, unit = match.groups()
        value = int(count)
        if SIZED_TRES.match(name) and value >= 0:
            value = int(value * MEM_UNITS[unit or "M"])
        elif unit:
            raise SacctmgrError("only mem and bb/ TRES take a unit, got %r" % item)
        counts[name] = value
    return counts


def normal_form(kind: str, value: Any) -> Any:
    """What two spellings of one setting compare as; None for 'not set'."""
    if value is None:
        return None
    if kind == "int":
        text = str(value).strip()
        return None if text in ("", "-1") else int(text)
    if kind == "wall":
        minutes = wall_minutes(value)
        return None if minutes < 0 else minutes
    if kind == "tres":
        counts = {k: v for k, v in tres_counts(value).items() if v >= 0}
        return counts or None
    if kind in ("list", "words"):
        return sorted(i.lower() for i in list_items(value)) or None
    if kind == "share":
        text = str(value).strip().lower()
        return text or None
    if kind in ("name", "word"):
        # Names and words sacctmgr lowercases; a name of "" or -1 is none.
        text = str(value).strip().lower()
        return None if text in ("", "-1") else PREEMPT_MODE_SHOWN.get(text, text)
    text = str(value)
    return text.lower() if text else None


def set_value(field: Field, desired: Any, actual: Any) -> str:
    """The KEY=value that makes `actual` `desired` (-1 clears a number or a wall time)."""
    if field.kind == "tres":
        wanted = tres_counts(desired or "")
        dropped = [name for name in tres_counts(actual or "") if name not in wanted]
        items = ["%s=%d" % (k, v) for k, v in wanted.items() if v >= 0] + ["%s=-1" % name for name in dropped]
        return "%s=%s" % (field.key, ",".join(items) or "-1")
    if field.kind in ("int", "wall", "name") and normal_form(field.kind, desired) is None:
        return "%s=-1" % field.key
    if field.kind == "words":
        # An empty list of flags: sacctmgr clears them with -1 (measured).
        return "%s=%s" % (field.key, ",".join(list_items(desired)) or "-1")
    if field.kind == "list":
        # An empty list of names: nothing clears it (measured with Preempt).
        return "%s=%s" % (field.key, ",".join(list_items(desired)))
    return "%s=%s" % (field.key, desired)


def list_items(value: Any) -> List[str]:
    """A list setting's items, given as a list or as comma-separated text."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").split(",")
    return [str(i).strip() for i in items if str(i).strip()]


def check_name(what: str, name: Any) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise SacctmgrError("%s: a name is one lowercase word of letters, digits, '_', '.' or '-' (sacctmgr "
                            "lowercases names), got %r" % (what, name))


def check_settings(fields: Sequence[Field], wanted: Mapping[str, Any], where: str = "") -> None:
    """SacctmgrError naming the first option whose value sacctmgr would misread."""
    for field in fields:
        value = wanted.get(field.option)
        if value is None:
            continue
        option = where + field.option
        if field.kind == "text" and TEXT_FORBIDDEN.search(str(value)):
            raise SacctmgrError("%s: one line without quotes or '|', got %r" % (option, value))
        if field.kind == "int" and (not isinstance(value, int) or value < -1):
            raise SacctmgrError("%s: a whole number >= 0 (-1 for none), got %r" % (option, value))
        if field.kind == "share" and not re.match(r"^([0-9]+|parent)$", str(value)):
            raise SacctmgrError("%s: a whole number >= 0 or 'parent', got %r" % (option, value))
        if field.kind == "list":
            for item in list_items(value):
                check_name(option, item)
        if field.kind == "name" and normal_form("name", value) is not None:
            check_name(option, value)
        if field.kind == "word" and not re.match(r"^[A-Za-z][A-Za-z,]*$", str(value)):
            raise SacctmgrError("%s: one word (or words joined by ','), got %r" % (option, value))
        if field.kind == "words":
            for item in list_items(value):
                if not re.match(r"^[A-Za-z]+$", item):
                    raise SacctmgrError("%s: flags are words of letters, got %r" % (option, item))
        try:
            normal_form(field.kind, value)
        except SacctmgrError as err:
            raise SacctmgrError("%s: %s" % (option, err)) from None


def differences(fields: Sequence[Field], wanted: Mapping[str, Any], actual: Mapping[str, str]) -> List[Field]:
    """The fields whose wanted value (set ones only) differs from sacctmgr's."""
    return [f for f in fields if wanted.get(f.option) is not None
            and normal_form(f.kind, wanted[f.option]) != normal_form(f.kind, actual.get(f.column, ""))]


def shown(fields: Sequence[Field], row: Mapping[str, str]) -> Dict[str, Any]:
    """A record as the module returns it: options with sacctmgr's text, lists as lists."""
    out: Dict[str, Any] = {}
    for field in fields:
        text = row.get(field.column, "")
        out[field.option] = [i for i in text.split(",") if i] if field.kind in ("list", "words") else text
    return out


class Sacctmgr:
    """sacctmgr where the runner sends it (the controller pod)."""

    def __init__(self, run: Runner) -> None:
        self.run = run

    def call(self, *argv: str) -> str:
        rc, out, err = self.run(["sacctmgr", *argv])
        if rc != 0:
            raise SacctmgrError("sacctmgr %s: %s" % (" ".join(argv), (err or out).strip()))
        return out

    def show(self, entity: str, where: Sequence[str], columns: Sequence[str],
             options: Sequence[str] = ()) -> List[Dict[str, str]]:
        """Rows of `sacctmgr show ENTITY [OPTIONS] where ... format=...` as dicts by column."""
        condition = [*options, "where", *where] if where else list(options)
        # -i here too: a query sacctmgr has doubts about asks "continue? (N/y)" and, with no
        # terminal to answer, asks again for ever (measured with `show account where cluster=`).
        out = self.call("-i", "-n", "-P", "show", entity, *condition, "format=" + ",".join(columns))
        rows = []
        for line in out.splitlines():
            cells = line.split("|")
            if len(cells) >= len(columns):
                rows.append(dict(zip(columns, cells)))
        return rows

    def change(self, verb: str, entity: str, *words: str) -> None:
        """add, modify or delete, without sacctmgr's question (-i commits at once)."""
        self.call("-i", verb, entity, *words)


def one(rows: Sequence[Dict[str, str]]) -> Optional[Dict[str, str]]:
    return rows[0] if rows else None


def flattened(params: Mapping[str, Any], fields: Sequence[Field]) -> Dict[str, Any]:
    """The module's options by field, its `limits` sub-options among them."""
    limits = params.get("limits") or {}
    return {f.option: limits.get(f.option) if f in ASSOCIATION_LIMITS else params.get(f.option) for f in fields}


def known_names(mgr: Sacctmgr, entity: str, where: Sequence[str], column: str) -> List[str]:
    return [r[column] for r in mgr.show(entity, where, [column])]


def check_known(option: str, names: Sequence[str], known: Sequence[str], what: str) -> None:
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SacctmgrError("%s: no %s named %s" % (option, what, ", ".join(unknown)))


class Outcome(NamedTuple):
    """What ensuring one record did (or, in check mode, would do)."""

    changed: bool
    requests: List[List[str]]  # sacctmgr's words after `-i`, one request each
    before: Dict[str, Any]
    after: Dict[str, Any]


def carry_out(mgr: Sacctmgr, requests: Sequence[Sequence[str]], check_mode: bool) -> None:
    """Each request in order; none in check mode. The first refusal stops the rest."""
    if check_mode:
        return
    for words in requests:
        mgr.change(*words)


def settings_words(fields: Sequence[Field], wanted: Mapping[str, Any], actual: Mapping[str, str]) -> List[str]:
    """KEY=value words for the fields that differ."""
    return [set_value(f, wanted[f.option], actual.get(f.column, "")) for f in differences(fields, wanted, actual)]


def merged(fields: Sequence[Field], before: Mapping[str, Any], wanted: Mapping[str, Any]) -> Dict[str, Any]:
    """The record as it will read once the wanted settings are made (check mode's 'after')."""
    after = dict(before)
    for field in fields:
        if wanted.get(field.option) is not None:
            after[field.option] = wanted[field.option]
    return after
