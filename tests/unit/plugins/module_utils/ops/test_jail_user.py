"""jail_user's pure parts: reading the jail's account files, deciding the commands, refusing clashes."""

from __future__ import annotations

from typing import List, Sequence

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils.ops.jail_user import (
    FILE_SEPARATOR,
    Accounts,
    JailAccounts,
    JailUserError,
    WantedUser,
    container_mounting,
    ensure_user,
    parse_group,
    parse_keys,
    parse_passwd,
    plan_absent,
    plan_present,
    predicted_facts,
    wanted_from_params,
)

PASSWD = """root:x:0:0:root:/root:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
bob:x:2002:2002::/home/bob:/bin/bash
broken line
alice:x:2001:2001:Alice:/home/alice:/bin/bash
"""
GROUP = """root:x:0:
users:x:100:alice
bob:x:2002:
alice:x:2001:
video:x:44:
"""
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG5vdGFrZXk alice@laptop"


def accounts() -> Accounts:
    return Accounts(parse_passwd(PASSWD), parse_group(GROUP))


def test_passwd_and_group_are_read_and_bad_lines_skipped():
    users = parse_passwd(PASSWD)
    assert set(users) == {"root", "nobody", "bob", "alice"}
    assert users["alice"].line() == "alice:x:2001:2001:Alice:/home/alice:/bin/bash"
    groups = parse_group(GROUP)
    assert groups["users"].members == ("alice",) and groups["video"].gid == 44
    assert accounts().supplementary_groups("alice") == ["users"]


def test_keys_are_the_non_blank_lines():
    assert parse_keys("\n  %s  \n\nssh-rsa AAAA b\n" % KEY) == [KEY, "ssh-rsa AAAA b"]


def test_new_user_gets_a_private_group_a_home_and_an_unlocked_account():
    plan = plan_present(WantedUser("carol", uid=2003, gid=2003, ssh_authorized_keys=[KEY]), accounts(), [])
    assert plan.commands == [
        ["groupadd", "--gid", "2003", "carol"],
        ["useradd", "--create-home", "--password", "*", "--shell", "/bin/bash", "--home-dir", "/home/carol",
         "--uid", "2003", "--gid", "carol", "carol"],
    ]
    assert plan.keys == [KEY]


def test_existing_user_as_wanted_needs_nothing():
    want = WantedUser("alice", uid=2001, gid=2001, groups=["users"], shell="/bin/bash", ssh_authorized_keys=[KEY])
    assert plan_present(want, accounts(), [KEY]).empty


def test_only_what_differs_is_changed():
    want = WantedUser("alice", shell="/bin/zsh", groups=["video"], append=True, ssh_authorized_keys=[])
    plan = plan_present(want, accounts(), [KEY])
    assert plan.commands == [["usermod", "--groups", "users,video", "--shell", "/bin/zsh", "alice"]]
    assert plan.keys == []


def test_groups_without_append_is_the_complete_list():
    plan = plan_present(WantedUser("alice", groups=[]), accounts(), [])
    assert plan.commands == [["usermod", "--groups", "", "alice"]]


def test_a_moved_home_is_moved_and_a_new_primary_group_created():
    plan = plan_present(WantedUser("alice", home="/data/alice", group="hpc"), accounts(), [])
    assert plan.commands == [["groupadd", "hpc"], ["usermod", "--gid", "hpc", "--home", "/data/alice",
                                                   "--move-home", "alice"]]


@pytest.mark.parametrize(("want", "message"), [
    (WantedUser("carol", uid=2002), "uid: 2002 is already the uid of user bob"),
    (WantedUser("carol", gid=2002, group="carol"), "gid: 2002 is already the gid of group bob"),
    (WantedUser("alice", gid=3000), "gid: group alice already exists in the jail with gid 2001, not 3000"),
    (WantedUser("carol", groups=["users", "gpu"]), "groups: no group gpu in the jail"),
])
def test_clashes_are_refused_naming_the_option(want, message):
    with pytest.raises(JailUserError, match=message):
        plan_present(want, accounts(), [])


@pytest.mark.parametrize(("params", "message"), [
    ({"name": "Alice"}, "name: 'Alice' is not a valid account name"),
    ({"name": "ok", "group": "1abc"}, "group: '1abc' is not a valid account name"),
    ({"name": "ok", "uid": -1}, "uid: must be between"),
    ({"name": "ok", "shell": "bash"}, "shell: must be an absolute path"),
    ({"name": "ok", "ssh_authorized_keys": [KEY + "\nssh-rsa x"]}, r"ssh_authorized_keys\[0\]: must be one"),
])
def test_bad_options_are_refused_before_anything_runs(params, message):
    with pytest.raises(JailUserError, match=message):
        wanted_from_params(params)


def test_absent_keeps_the_home_unless_asked():
    assert plan_absent(WantedUser("alice", state="absent"), accounts()).commands == [["userdel", "alice"]]
    assert plan_absent(WantedUser("alice", state="absent", remove_home=True), accounts()).commands == [
        ["userdel", "--remove", "alice"]]
    assert plan_absent(WantedUser("ghost", state="absent"), accounts()).empty


def test_check_mode_prediction_shows_the_new_passwd_line():
    facts = predicted_facts(WantedUser("carol", uid=2003, gid=2003, ssh_authorized_keys=[KEY]), accounts(), [])
    assert facts["passwd"] == "carol:x:2003:2003::/home/carol:/bin/bash"
    assert facts["ssh_authorized_keys"] == [KEY] and facts["group"] == "carol"


class ScriptedJail:
    """A runner that answers the reads with fixed files and records every other command."""

    def __init__(self) -> None:
        self.calls: List[Sequence[str]] = []

    def __call__(self, argv: Sequence[str]):
        self.calls.append(list(argv))
        if argv[0] == "sh":
            return 0, PASSWD + FILE_SEPARATOR + "\n" + GROUP, ""
        if argv[0] == "chroot" and argv[1].startswith("--userspec") and "cat" in argv[5]:
            return 0, KEY + "\n", ""
        return 0, "", ""


def test_ensure_user_in_check_mode_only_reads():
    runner = ScriptedJail()
    result = ensure_user(JailAccounts(runner), WantedUser("alice", shell="/bin/zsh"), check_mode=True)
    assert result.changed and result.user["shell"] == "/bin/zsh"
    assert result.diff["before"]["passwd"] == "alice:x:2001:2001:Alice:/home/alice:/bin/bash"
    assert result.diff["after"]["passwd"] == "alice:x:2001:2001:Alice:/home/alice:/bin/zsh"
    assert all("usermod" not in call for call in runner.calls)


def test_keys_are_read_and_written_as_the_user_inside_the_jail():
    runner = ScriptedJail()
    result = ensure_user(JailAccounts(runner, "/mnt/jail"), WantedUser("alice", ssh_authorized_keys=["k1", "k2"]),
                         check_mode=False)
    assert result.changed
    writes = [c for c in runner.calls if c[-2:] == ["k1", "k2"]]
    assert writes and writes[0][:4] == ["chroot", "--userspec=2001:2001", "--groups=2001", "/mnt/jail"]
    assert writes[0][-3] == "/home/alice"


def test_the_container_that_mounts_the_jail_is_chosen():
    pod = {"spec": {"containers": [{"name": "side", "volumeMounts": []},
                                   {"name": "sshd", "volumeMounts": [{"mountPath": "/mnt/jail/"}]}]}}
    assert container_mounting(pod, "/mnt/jail") == "sshd"
    assert container_mounting(pod, "/srv/jail") is None
