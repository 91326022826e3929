# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the model's fields are declared and read: the value markers, the patterns, the Slurm keys
slurmkube owns, and ``spec_field``, whose metadata carries each field's documentation and
constraints. The parser (parse.py) enforces them and the CRD schema (schema.py) writes them, so a
rule is written once.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import field
from typing import Any, Dict, NewType, Optional, Sequence

# Markers for values whose schema is not a plain Python type.
Quantity = NewType("Quantity", str)
"""A Kubernetes quantity ("4", "500m", "16Gi"); accepted as text or integer."""
FreeForm = NewType("FreeForm", dict)
"""A Kubernetes object passed through untouched (a toleration, say)."""
SlurmValue = NewType("SlurmValue", object)
"""A Slurm setting value: text, integer, boolean (YES/NO), list (comma-joined) or null (delete)."""

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# Most object names (Secrets, PriorityClasses): dot-separated DNS labels.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
SLURM_KEY = r"^[A-Za-z][A-Za-z0-9]*$"
# Paths the jail plugin takes in plugstack.conf: absolute, no blanks, commas or colons.
JAIL_PATH = r"^/[^\s,:]*$"


def normalized_path_pattern(character: str = "[^/]") -> str:
    """An absolute path below / of parts made of `character`, none empty, '.' or '..' (a
    trailing '/' aside): the path a reader sees is the one the kernel opens. A regular
    expression both Python and the API server (RE2) evaluate, without lookahead."""
    first, rest = character.replace("[^", "[^."), character
    part = "(%s%s*|\\.%s%s*|\\.\\.%s+)" % (first, rest, first, rest, rest)
    return "^(/%s)+/?$" % part


NORMALIZED_PATH = normalized_path_pattern()
NORMALIZED_JAIL_PATH = normalized_path_pattern("[^/\\s,:]")
NORMALIZED_PATH_DOC = "a normalized path below / (not / itself; no empty, '.' or '..' part)"
# An image reference as the container runtimes parse it: [host[:port]/]path[:tag][@digest].
IMAGE_REF = (r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
             r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$")
# A DNS name or an IPv4/IPv6 address: what slurm.conf and a volume's server field take.
HOST = (r"^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
        r"|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$")
# A Slurm hostlist expression (node[0-3,7],other).
HOSTLIST = r"^[A-Za-z0-9_.-]+(\[[0-9,-]+\][A-Za-z0-9_.-]*)*(,[A-Za-z0-9_.-]+(\[[0-9,-]+\][A-Za-z0-9_.-]*)*)*$"
# A program path that also lands in a job script: no character a shell would read.
PROGRAM_PATH = r"^/[A-Za-z0-9._/+-]+$"
# Kubernetes extended resource names (nvidia.com/gpu).
RESOURCE_NAME = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$"
# A Kubernetes label key: an optional DNS-subdomain prefix, then a name of up to 63 characters.
LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
# What ends a value in Slurm's config files (slurm.conf, cgroup.conf, topology.conf): a blank
# starts the next Key=Value, '#' a comment, a newline the next line; quotes change the parse.
SLURM_VALUE_FORBIDDEN = re.compile(r'[\s#"\\\x00-\x1f\x7f]')
NODE_PORT_RANGE = (30000, 32767)
# A worker pod's memory also feeds slurmd and munged: Slurm holds it back from jobs as
# the node's MemSpecLimit (RealMemory is the pod's whole memory).
WORKER_DAEMON_RESERVE_MIB = 256
WORKER_MEMORY_MIN_MIB = 512

# slurm.conf keys the product sets itself; overriding them would break the cluster.
MANAGED_SLURM_KEYS = frozenset(
    key.lower()
    for key in (
        "ClusterName",
        "SlurmctldHost",
        "SlurmctldAddr",
        "ControlMachine",
        "ControlAddr",
        "BackupController",
        "BackupAddr",
        "SlurmctldPort",
        "SlurmdPort",
        "AuthType",
        "AuthAltTypes",
        "AuthAltParameters",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "PlugStackConfig",
        "NodeName",
        "NodeSet",
        "PartitionName",
        "MaxNodeCount",
        "GresTypes",
        "HealthCheckProgram",
    )
)
# slurm.conf keys that make a daemon run a program, load code or write a file as root on the
# nodes or the controller: whoever sets them is root there. They go in their own field,
# spec.slurm.privilegedConfig, so an admission policy can forbid exactly that.
PRIVILEGED_SLURM_KEYS = frozenset(
    key.lower()
    for key in (
        "Prolog",
        "Epilog",
        "PrologSlurmctld",
        "EpilogSlurmctld",
        "TaskProlog",
        "TaskEpilog",
        "ResumeProgram",
        "ResumeFailProgram",
        "SuspendProgram",
        "RebootProgram",
        "MailProg",
        "UnkillableStepProgram",
        "SlurmctldPrimaryOnProg",
        "SlurmctldPrimaryOffProg",
        "JobCompLoc",
        "PluginDir",
        "Include",
        "SlurmUser",
        "SlurmdUser",
        "SlurmctldLogFile",
        "SlurmdLogFile",
        "SlurmSchedLogFile",
        "SlurmctldPidFile",
        "SlurmdPidFile",
    )
)
# cgroup.conf keys the product sets itself (the worker makes the writable cgroup copy there).
MANAGED_CGROUP_KEYS = frozenset(("cgroupmountpoint",))
# slurmdbd.conf keys spec.accounting.config may not set, and why: what the product sets (where
# slurmdbd listens and who it runs as, its database and its authentication), and what would run a
# program or write a file in slurmdbd's pod, which holds the munge key and the database password.
REFUSED_SLURMDBD_KEYS = {
    **{key.lower(): "is set by slurmkube and cannot be overridden" for key in (
        "AuthType", "AuthAltTypes", "AuthAltParameters", "AuthInfo", "DbdHost", "DbdAddr", "DbdBackupHost",
        "DbdPort", "SlurmUser", "StorageType", "StorageHost", "StorageBackupHost", "StoragePort", "StorageLoc",
        "StorageUser", "StoragePass")},
    **{key.lower(): "runs a program or writes a file in slurmdbd's pod, which holds the munge key and the "
                    "database password" for key in (
        "ArchiveScript", "StoragePassScript", "PluginDir", "Include", "LogFile", "PidFile")},
    "archivedir": "would be a directory in slurmdbd's pod, lost with it: purge with the Purge*After keys, or "
                  "archive with sacctmgr's archive dump where the archive is kept",
}
# Characters no text field may hold: each would end a line or a word in some file it reaches.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def is_object_name(text: str) -> bool:
    """A name most Kubernetes objects (a Secret, say) may have: a DNS subdomain of at most 253 characters."""
    return len(text) <= 253 and re.match(DNS1123_SUBDOMAIN, text) is not None


def is_normalized_path(path: str) -> bool:
    """Absolute, with no empty, '.' or '..' component (a trailing '/' aside): the path a
    reader sees is the one the kernel opens."""
    return path.startswith("/") and all(part not in ("", ".", "..") for part in path.rstrip("/").split("/")[1:])


def spec_field(
    doc: str,
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    minimum: Optional[int] = None,
    maximum: Optional[int] = None,
    enum: Optional[Sequence[str]] = None,
    pattern: Optional[str] = None,
    pattern_doc: Optional[str] = None,
    max_length: Optional[int] = None,
    max_items: Optional[int] = None,
    unique_by: Optional[str] = None,
    unique: bool = False,
) -> Any:
    """A dataclass field that also carries its documentation and constraints.

    Each constraint is enforced by the parser and written into the CRD (schema.py), so the API
    server refuses what the operator would: pattern (pattern_doc says it in words in the
    parser's message), max_items, unique_by (no two objects of a list with one value of that
    field), unique (no repeated item). The last two are CEL rules in the CRD, not list-maps or
    sets: those would merge a list item by item on server-side apply, and an item someone
    else added would then survive the module's and the operator's applies.
    """
    metadata = {
        "doc": doc,
        "minimum": minimum,
        "maximum": maximum,
        "enum": tuple(enum) if enum else None,
        "pattern": pattern,
        "pattern_doc": pattern_doc,
        "max_length": max_length,
        "max_items": max_items,
        "unique_by": unique_by,
        "unique": unique,
    }
    # pylint: disable=invalid-field-call  # this is the dataclass field factory of the model
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def camel(name: str) -> str:
    """The CRD key of a snake_case attribute (node_selector → nodeSelector)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def optional_inner(hint: Any) -> Optional[Any]:
    """X for Optional[X], else None."""
    args = getattr(hint, "__args__", ())
    if getattr(hint, "__origin__", None) is not None and type(None) in args and len(args) == 2:
        return args[0] if args[1] is type(None) else args[1]
    return None


_HINTS_CACHE: Dict[Any, Dict[str, Any]] = {}


def model_hints(cls: Any) -> Dict[str, Any]:
    """Resolved field types of a model dataclass (its annotations are strings, read in its module)."""
    if cls not in _HINTS_CACHE:
        _HINTS_CACHE[cls] = typing.get_type_hints(cls)
    return _HINTS_CACHE[cls]
