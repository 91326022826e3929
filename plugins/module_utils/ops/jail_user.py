# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the jail_user module does: a Linux account in the jail, visible on every node at once.

Login and controller pods resolve accounts through nss-extrausers pointed at the jail's /etc,
and jobs run inside the jail, so the jail's passwd/group/shadow are the only place a user
lives. They are changed with the jail's own tools (useradd, usermod, ...), run in a pod that
mounts the jail, through the exec API, by ``slurmkube-jail-run``: inside the jail with a
root job's capabilities, never as the pod's root, so a tool or /etc/ld.so.preload that root
in the jail replaced gains nothing. Key files are read and written as the user inside the
jail, so a symlink a user planted in their home cannot make root touch the pod's own files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.errors import SlurmkubeError
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.client import Kube
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.pods import pod_ready, ready_pods

Runner = Callable[[Sequence[str]], Tuple[int, str, str]]

# shadow-utils' own rule for names (useradd refuses others with a less helpful message).
ACCOUNT_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,30}[$]?$")
# useradd gives the primary group the user's name and a shell from /etc/default/useradd
# (/bin/sh on Debian); people who ssh in expect bash.
DEFAULT_SHELL = "/bin/bash"
# sshd refuses a user whose shadow password is locked ("!"); "*" means "no password" but unlocked.
NO_PASSWORD = "*"
# Separates the files in the one exec that reads them; no passwd or group line lacks ':'.
FILE_SEPARATOR = "--slurmkube--"
# Pods that mount the jail, in the order they are tried.
JAIL_POD_COMPONENTS = (C.COMPONENT_LOGIN, C.COMPONENT_WORKER)


class JailUserError(SlurmkubeError):
    """The user cannot be ensured as asked; the message names the option or the failing step."""


class PasswdEntry(NamedTuple):
    """One line of the jail's /etc/passwd."""

    name: str
    uid: int
    gid: int
    comment: str
    home: str
    shell: str

    def line(self) -> str:
        """The line as /etc/passwd holds it."""
        return "%s:x:%d:%d:%s:%s:%s" % (self.name, self.uid, self.gid, self.comment, self.home, self.shell)


class GroupEntry(NamedTuple):
    """One line of the jail's /etc/group."""

    name: str
    gid: int
    members: Tuple[str, ...]


class Accounts(NamedTuple):
    """The jail's users and groups by name."""

    users: Dict[str, PasswdEntry]
    groups: Dict[str, GroupEntry]

    def user_with_uid(self, uid: int) -> Optional[PasswdEntry]:
        """The first user holding a uid."""
        return next((u for u in self.users.values() if u.uid == uid), None)

    def group_with_gid(self, gid: int) -> Optional[GroupEntry]:
        """The first group holding a gid."""
        return next((g for g in self.groups.values() if g.gid == gid), None)

    def supplementary_groups(self, user: str) -> List[str]:
        """Groups that list the user as a member, sorted."""
        return sorted(g.name for g in self.groups.values() if user in g.members)


@dataclass(frozen=True)
class WantedUser:
    """The module's options about the account."""

    name: str
    state: str = "present"
    uid: Optional[int] = None
    group: Optional[str] = None
    gid: Optional[int] = None
    groups: Optional[List[str]] = None
    append: bool = False
    shell: Optional[str] = None
    home: Optional[str] = None
    ssh_authorized_keys: Optional[List[str]] = None
    remove_home: bool = False


class Plan(NamedTuple):
    """What to run in the jail (argv lists, each run under chroot) and the key list to write."""

    commands: List[List[str]]
    keys: Optional[List[str]]

    @property
    def empty(self) -> bool:
        """Nothing differs."""
        return not self.commands and self.keys is None


class UserResult(NamedTuple):
    """Outcome: whether anything changed, the user as it is (or would be), and the diff."""

    changed: bool
    user: Dict[str, Any]
    diff: Dict[str, Any]


def parse_passwd(text: str) -> Dict[str, PasswdEntry]:
    """Users of an /etc/passwd text; malformed lines are skipped like NSS does."""
    users: Dict[str, PasswdEntry] = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) != 7 or not fields[2].isdigit() or not fields[3].isdigit():
            continue
        users.setdefault(fields[0], PasswdEntry(fields[0], int(fields[2]), int(fields[3]), fields[4], fields[5],
                                                fields[6]))
    return users


def parse_group(text: str) -> Dict[str, GroupEntry]:
    """Groups of an /etc/group text."""
    groups: Dict[str, GroupEntry] = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) != 4 or not fields[2].isdigit():
            continue
        members = tuple(m for m in fields[3].split(",") if m)
        groups.setdefault(fields[0], GroupEntry(fields[0], int(fields[2]), members))
    return groups


def parse_keys(text: str) -> List[str]:
    """The keys of an authorized_keys text: its non-blank lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def wanted_from_params(params: Mapping[str, Any]) -> WantedUser:
    """The options as a WantedUser, checked; the error names the bad option."""
    want = WantedUser(
        name=params["name"], state=params.get("state") or "present", uid=params.get("uid"),
        group=params.get("group"), gid=params.get("gid"), groups=params.get("groups"),
        append=bool(params.get("append")), shell=params.get("shell"), home=params.get("home"),
        ssh_authorized_keys=params.get("ssh_authorized_keys"), remove_home=bool(params.get("remove_home")))
    check_wanted(want)
    if want.ssh_authorized_keys is not None:
        want = replace(want, ssh_authorized_keys=[k.strip() for k in want.ssh_authorized_keys])
    return want


def check_wanted(want: WantedUser) -> None:
    """Fail on options the jail's tools would refuse or misread."""
    for option, value in (("name", want.name), ("group", want.group)):
        if value is not None and not ACCOUNT_NAME.match(value):
            raise JailUserError("%s: %r is not a valid account name (lower case letters, digits, '_' and '-', "
                                "at most 32 characters, not starting with a digit or '-')" % (option, value))
    for group in want.groups or []:
        if not ACCOUNT_NAME.match(group):
            raise JailUserError("groups: %r is not a valid group name" % group)
    for option, number in (("uid", want.uid), ("gid", want.gid)):
        if number is not None and not 0 <= number < 2 ** 32 - 1:
            raise JailUserError("%s: must be between 0 and 4294967294, got %d" % (option, number))
    for option, path in (("shell", want.shell), ("home", want.home)):
        if path is not None and (not path.startswith("/") or ":" in path or "\n" in path):
            raise JailUserError("%s: must be an absolute path without ':', got %r" % (option, path))
    for index, key in enumerate(want.ssh_authorized_keys or []):
        if not key.strip() or "\n" in key.strip() or "\r" in key:
            raise JailUserError("ssh_authorized_keys[%d]: must be one non-empty line" % index)


def primary_group(want: WantedUser, accounts: Accounts) -> Optional[str]:
    """The primary group to ensure: the one asked for, the existing user's, or a group named like the user."""
    if want.group:
        return want.group
    current = accounts.users.get(want.name)
    if current is not None:
        owner = accounts.group_with_gid(current.gid)
        return owner.name if owner else None
    return want.name


def check_clashes(want: WantedUser, accounts: Accounts, group: Optional[str]) -> None:
    """Fail when the uid, gid or groups asked for belong to someone else or do not exist."""
    if want.uid is not None:
        holder = accounts.user_with_uid(want.uid)
        if holder is not None and holder.name != want.name:
            raise JailUserError("uid: %d is already the uid of user %s in the jail" % (want.uid, holder.name))
    existing = accounts.groups.get(group) if group else None
    if want.gid is not None:
        if existing is not None and existing.gid != want.gid:
            raise JailUserError("gid: group %s already exists in the jail with gid %d, not %d"
                                % (existing.name, existing.gid, want.gid))
        holder_group = accounts.group_with_gid(want.gid)
        if existing is None and holder_group is not None:
            raise JailUserError("gid: %d is already the gid of group %s in the jail" % (want.gid, holder_group.name))
        if group is None:
            raise JailUserError("gid: user %s's primary group has no entry in the jail; name it with group"
                                % want.name)
    missing = [g for g in want.groups or [] if g not in accounts.groups]
    if missing:
        raise JailUserError("groups: no group %s in the jail (create it first)" % ", ".join(missing))


def wanted_groups(want: WantedUser, accounts: Accounts) -> Optional[List[str]]:
    """The supplementary groups the user should end up in, or None when they are not managed."""
    if want.groups is None:
        return None
    current = accounts.supplementary_groups(want.name) if want.name in accounts.users else []
    if want.append:
        return sorted(set(current) | set(want.groups))
    return sorted(set(want.groups))


def plan_present(want: WantedUser, accounts: Accounts, current_keys: List[str]) -> Plan:
    """The commands that make the jail hold the user as wanted; empty when it already does."""
    group = primary_group(want, accounts)
    check_clashes(want, accounts, group)
    commands: List[List[str]] = []
    if group is not None and group not in accounts.groups:
        commands.append(["groupadd"] + (["--gid", str(want.gid)] if want.gid is not None else []) + [group])
    current = accounts.users.get(want.name)
    groups = wanted_groups(want, accounts)
    if current is None:
        commands.append(useradd_command(want, group, groups))
    else:
        usermod = usermod_command(want, current, accounts, group, groups)
        if usermod:
            commands.append(usermod)
    keys = None
    if want.ssh_authorized_keys is not None and want.ssh_authorized_keys != current_keys:
        keys = list(want.ssh_authorized_keys)
    return Plan(commands, keys)


def useradd_command(want: WantedUser, group: Optional[str], groups: Optional[List[str]]) -> List[str]:
    """useradd for a new user: home made from the jail's /etc/skel, no password but not locked."""
    argv = ["useradd", "--create-home", "--password", NO_PASSWORD, "--shell", want.shell or DEFAULT_SHELL,
            "--home-dir", want.home or "/home/%s" % want.name]
    if want.uid is not None:
        argv += ["--uid", str(want.uid)]
    if group is not None:
        argv += ["--gid", group]
    if groups:
        argv += ["--groups", ",".join(groups)]
    return argv + [want.name]


def usermod_command(want: WantedUser, current: PasswdEntry, accounts: Accounts, group: Optional[str],
                    groups: Optional[List[str]]) -> List[str]:
    """usermod for what differs on an existing user; [] when nothing does."""
    argv: List[str] = []
    if want.uid is not None and want.uid != current.uid:
        argv += ["--uid", str(want.uid)]
    group_entry = accounts.groups.get(group) if group else None
    if want.group is not None and (group_entry is None or group_entry.gid != current.gid):
        argv += ["--gid", want.group]
    if groups is not None and groups != accounts.supplementary_groups(want.name):
        argv += ["--groups", ",".join(groups)]
    if want.shell is not None and want.shell != current.shell:
        argv += ["--shell", want.shell]
    if want.home is not None and want.home != current.home:
        argv += ["--home", want.home, "--move-home"]
    return ["usermod"] + argv + [want.name] if argv else []


def plan_absent(want: WantedUser, accounts: Accounts) -> Plan:
    """userdel when the user exists; the home stays unless remove_home."""
    if want.name not in accounts.users:
        return Plan([], None)
    return Plan([["userdel"] + (["--remove"] if want.remove_home else []) + [want.name]], None)


def user_facts(entry: Optional[PasswdEntry], accounts: Accounts, keys: List[str]) -> Dict[str, Any]:
    """What the module returns about the user: {} when it does not exist."""
    if entry is None:
        return {}
    group = accounts.group_with_gid(entry.gid)
    return {"name": entry.name, "uid": entry.uid, "gid": entry.gid, "group": group.name if group else None,
            "groups": accounts.supplementary_groups(entry.name), "home": entry.home, "shell": entry.shell,
            "passwd": entry.line(), "ssh_authorized_keys": keys}


def predicted_facts(want: WantedUser, accounts: Accounts, keys: List[str]) -> Dict[str, Any]:
    """The user as the plan would leave it (check mode); ids not yet chosen by useradd show as None."""
    if want.state == "absent":
        return {}
    current = accounts.users.get(want.name)
    group = primary_group(want, accounts)
    existing_group = accounts.groups.get(group) if group else None
    gid = want.gid if want.gid is not None else (existing_group.gid if existing_group else None)
    if gid is None and current is not None and want.group is None:
        gid = current.gid
    uid = want.uid if want.uid is not None else (current.uid if current else None)
    home = want.home or (current.home if current else "/home/%s" % want.name)
    shell = want.shell or (current.shell if current else DEFAULT_SHELL)
    groups = wanted_groups(want, accounts)
    if groups is None:
        groups = accounts.supplementary_groups(want.name) if current else []
    passwd = "%s:x:%s:%s:%s:%s:%s" % (want.name, "" if uid is None else uid, "" if gid is None else gid,
                                      current.comment if current else "", home, shell)
    return {"name": want.name, "uid": uid, "gid": gid, "group": group, "groups": groups, "home": home,
            "shell": shell, "passwd": passwd,
            "ssh_authorized_keys": keys if want.ssh_authorized_keys is None else list(want.ssh_authorized_keys)}


def diff_view(facts: Mapping[str, Any]) -> Dict[str, Any]:
    """The parts of the user a diff shows."""
    if not facts:
        return {}
    return {"passwd": facts["passwd"], "groups": facts["groups"], "ssh_authorized_keys": facts["ssh_authorized_keys"]}


class JailAccounts:
    """The jail's accounts through a command runner in a pod that mounts the jail at jail_path."""

    def __init__(self, run: Runner, jail_path: str = C.JAIL_MOUNT_PATH) -> None:
        self.run = run
        self.jail = jail_path.rstrip("/") or "/"

    def _call(self, argv: Sequence[str], what: str) -> str:
        code, out, err = self.run(argv)
        if code != 0:
            raise JailUserError("%s failed (exit %d): %s" % (what, code, (err or out).strip()))
        return out

    def in_jail(self, *command: str) -> List[str]:
        """A command run inside the jail as root, with no more power than a root job has."""
        return [C.JAIL_RUN_PROGRAM, "jail=%s" % self.jail, "--", *command]

    def read(self) -> Accounts:
        """passwd and group of the jail, in one exec; fails when the jail is not populated.
        Read from inside the jail: a link planted there resolves in the jail, not in the pod."""
        script = ('[ -e "$1/%s" ] || { echo "$1 is not a populated jail (no %s)" >&2; exit 3; }; '
                  'shift; exec "$@"') % (C.JAIL_MARKER_FILE, C.JAIL_MARKER_FILE)
        reader = 'cat /etc/passwd; echo "%s"; cat /etc/group' % FILE_SEPARATOR
        out = self._call(["sh", "-c", script, "sh", self.jail, *self.in_jail("/bin/sh", "-c", reader)],
                         "reading the jail's accounts")
        passwd, _sep, group = out.partition(FILE_SEPARATOR + "\n")
        return Accounts(parse_passwd(passwd), parse_group(group))

    def as_user(self, entry: PasswdEntry, script: str, *args: str) -> List[str]:
        """A shell script run inside the jail as the user (never as root in the user's files)."""
        return ["chroot", "--userspec=%d:%d" % (entry.uid, entry.gid), "--groups=%d" % entry.gid, self.jail,
                "/bin/sh", "-c", script, "sh", *args]

    def read_keys(self, entry: PasswdEntry) -> List[str]:
        """The user's authorized keys; [] when the file does not exist or cannot be read."""
        script = 'cat "$1/.ssh/authorized_keys" 2>/dev/null || true'
        return parse_keys(self._call(self.as_user(entry, script, entry.home), "reading %s's keys" % entry.name))

    def write_keys(self, entry: PasswdEntry, keys: Sequence[str]) -> None:
        """Replace the user's authorized_keys (0600 in a 0700 .ssh, owned by the user) atomically."""
        script = ('umask 077; d="$1/.ssh"; shift; mkdir -p "$d" && chmod 0700 "$d" && '
                  '{ if [ $# -gt 0 ]; then printf "%s\\n" "$@"; fi; } >"$d/authorized_keys.slurmkube" && '
                  'mv -f "$d/authorized_keys.slurmkube" "$d/authorized_keys"')
        self._call(self.as_user(entry, script, entry.home, *keys), "writing %s's authorized_keys" % entry.name)

    def apply(self, command: Sequence[str]) -> None:
        """Run one of the jail's account tools inside the jail, as root of the jail only."""
        self._call(self.in_jail(*command), command[0])


def ensure_user(jail: JailAccounts, want: WantedUser, check_mode: bool) -> UserResult:
    """Read the jail, change only what differs (nothing in check mode), and report the user."""
    accounts = jail.read()
    current = accounts.users.get(want.name)
    keys_before = jail.read_keys(current) if current is not None else []
    before = user_facts(current, accounts, keys_before)
    plan = plan_absent(want, accounts) if want.state == "absent" else plan_present(want, accounts, keys_before)
    if plan.empty:
        return UserResult(False, before, {"before": diff_view(before), "after": diff_view(before)})
    after = predicted_facts(want, accounts, keys_before) if check_mode else carry_out(jail, want, plan)
    header = "jail user %s" % want.name
    return UserResult(True, after, {"before_header": header, "after_header": header,
                                    "before": diff_view(before), "after": diff_view(after)})


def carry_out(jail: JailAccounts, want: WantedUser, plan: Plan) -> Dict[str, Any]:
    """Run the plan, then read the user back as the jail now has it."""
    for command in plan.commands:
        jail.apply(command)
    accounts = jail.read()
    entry = accounts.users.get(want.name)
    if entry is None:
        return {}
    if plan.keys is not None:
        jail.write_keys(entry, plan.keys)
    return user_facts(entry, accounts, jail.read_keys(entry))


def container_mounting(pod: Mapping[str, Any], path: str) -> Optional[str]:
    """The first container of the pod that mounts a volume at path."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        if any(m.get("mountPath", "").rstrip("/") == path.rstrip("/") for m in container.get("volumeMounts") or []):
            return container["name"]
    return None


def find_jail_pod(kube: Kube, namespace: str, cluster: Optional[str], pod: Optional[str],
                  jail_path: str) -> Tuple[str, str]:
    """(pod, container) to run the account tools in: the named pod, else a ready login or worker pod."""
    if pod:
        obj = kube.get("v1", "Pod", pod, namespace)
        if obj is None or not pod_ready(obj):
            raise JailUserError("pod: %s/%s is not a running, ready pod" % (namespace, pod))
        candidates = [obj]
    else:
        candidates = []
        for component in JAIL_POD_COMPONENTS:
            candidates += ready_pods(kube, namespace, names.selector_labels(cluster or "", component))
        if not candidates:
            raise JailUserError("cluster: no ready login or worker pod of SlurmCluster %s in namespace %s; "
                                "is the cluster up? (or name a pod that mounts the jail with pod)"
                                % (cluster, namespace))
    for candidate in candidates:
        container = container_mounting(candidate, jail_path)
        if container:
            return candidate["metadata"]["name"], container
    raise JailUserError("jail_path: no container of pod %s mounts a volume at %s"
                        % (candidates[0]["metadata"]["name"], jail_path))
