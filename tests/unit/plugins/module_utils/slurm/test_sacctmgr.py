"""sacctmgr's text compared as Slurm means it, and the requests the accounting modules plan."""

from __future__ import annotations

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_account import plan_account
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_qos import QOS_FIELDS, plan_qos
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_user import SlurmUser, check_request, plan_user
from ansible_collections.slurmkube.core.plugins.module_utils.slurm.sacctmgr import (
    ASSOCIATION_FIELDS,
    ASSOCIATION_LIMITS,
    SacctmgrError,
    check_settings,
    normal_form,
    set_value,
    tres_counts,
    wall_minutes,
)


@pytest.mark.parametrize(("text", "minutes"), [
    ("90", 90), ("1-00:00:00", 1440), ("24:00:00", 1440), ("02:30:00", 150), ("2-12", 3600),
    ("1:30", 2), ("-1", -1), ("", -1), ("UNLIMITED", -1), ("0-00:00:30", 1),
])
def test_wall_times_compare_in_minutes_as_slurm_reads_them(text, minutes):
    assert wall_minutes(text) == minutes


def test_tres_memory_compares_in_mib_and_order_does_not_matter():
    assert tres_counts("mem=10G,cpu=4") == tres_counts("cpu=4,mem=10240") == {"cpu": 4, "mem": 10240}
    assert normal_form("tres", "gres/gpu=2,cpu=8") == normal_form("tres", "cpu=8,gres/gpu=2")
    assert normal_form("tres", "") is None


@pytest.mark.parametrize("bad", ["cpu", "cpu=x", "cpu=4G", "mem=-2"])
def test_malformed_tres_is_refused(bad):
    with pytest.raises(SacctmgrError):
        tres_counts(bad)


def test_a_tres_left_out_of_the_value_is_cleared():
    field = next(f for f in ASSOCIATION_LIMITS if f.option == "grp_tres")
    assert set_value(field, "cpu=8", "cpu=4,mem=10G") == "GrpTRES=cpu=8,mem=-1"
    assert set_value(field, "", "cpu=4") == "GrpTRES=cpu=-1"


def test_minus_one_clears_numbers_and_wall_times():
    max_jobs = next(f for f in ASSOCIATION_LIMITS if f.option == "max_jobs")
    assert normal_form("int", -1) is None and normal_form("int", "") is None
    assert set_value(max_jobs, -1, "3") == "MaxJobs=-1"


def test_empty_lists_clear_flags_with_minus_one_and_others_with_nothing():
    flags = next(f for f in QOS_FIELDS if f.option == "flags")
    preempt = next(f for f in QOS_FIELDS if f.option == "preempt")
    assert set_value(flags, [], "DenyOnLimit") == "Flags=-1"
    assert set_value(preempt, [], "normal") == "Preempt="


@pytest.mark.parametrize(("wanted", "option"), [
    ({"description": "two\nlines"}, "description"),
    ({"description": "a|b"}, "description"),
    ({"max_jobs_per_user": -2}, "max_jobs_per_user"),
    ({"max_wall": "soon"}, "max_wall"),
    ({"preempt": ["has space"]}, "preempt"),
])
def test_bad_values_are_refused_naming_the_option(wanted, option):
    with pytest.raises(SacctmgrError, match="^%s: " % option):
        check_settings(QOS_FIELDS, wanted)


def test_a_qos_is_added_whole_then_changed_only_where_it_differs():
    wanted = {"priority": 10, "max_wall": "24:00:00", "flags": ["DenyOnLimit"]}
    assert plan_qos("debug", wanted, None) == [
        ["add", "qos", "debug", "Priority=10", "Flags=DenyOnLimit", "MaxWall=24:00:00"]]
    actual = {"Priority": "10", "MaxWall": "1-00:00:00", "Flags": "DenyOnLimit", "MaxJobsPU": "2"}
    assert plan_qos("debug", wanted, actual) == []
    assert plan_qos("debug", dict(wanted, priority=20), actual) == [
        ["modify", "qos", "where", "name=debug", "set", "Priority=20"]]


def test_an_accounts_own_settings_and_its_association_change_apart():
    actual = {"Descr": "physics", "Org": "", "ParentName": "root", "Fairshare": "1", "QOS": "normal"}
    wanted = {"organization": "science", "fairshare": "9", "parent": None}
    assert plan_account("demo", "physics", wanted, actual) == [
        ["modify", "account", "where", "name=physics", "set", "Organization=science"],
        ["modify", "account", "where", "name=physics", "cluster=demo", "set", "Fairshare=9"]]
    assert plan_account("demo", "physics", {"fairshare": "1"}, actual) == []
    assert plan_account("demo", "new", {}, None) == [["add", "account", "new", "Cluster=demo", "Parent=root"]]


def test_a_user_gains_accounts_before_its_default_moves_and_loses_others_last():
    user = SlurmUser({"DefaultAccount": "old", "Admin": "None"},
                     {"old": {"Account": "old", "Fairshare": "1"}, "keep": {"Account": "keep", "Fairshare": "1"}})
    wanted = {"default_account": "new", "accounts": ["new", "keep"]}
    assert plan_user("demo", "alice", wanted, user) == [
        ["add", "user", "alice", "Cluster=demo", "Account=new"],
        ["modify", "user", "where", "name=alice", "cluster=demo", "set", "DefaultAccount=new"],
        ["delete", "user", "where", "name=alice", "cluster=demo", "account=old"]]
    same = {"default_account": "old", "accounts": ["old", "keep"], "fairshare": "1"}
    assert plan_user("demo", "alice", same, user) == []


def test_names_must_be_lowercase_as_sacctmgr_stores_them():
    with pytest.raises(SacctmgrError, match=r"^preempt: a name is one lowercase word"):
        check_settings(QOS_FIELDS, {"preempt": ["Normal"]})


def test_minus_one_clears_a_tres_value_and_sizes_compare_in_mib():
    assert tres_counts("-1") == {}
    assert tres_counts("bb/datawarp=2G") == {"bb/datawarp": 2048}


def test_default_qos_clears_with_minus_one_and_empty_means_unset():
    default_qos = next(f for f in ASSOCIATION_FIELDS if f.option == "default_qos")
    assert normal_form("name", "") is None and normal_form("name", "-1") is None
    assert set_value(default_qos, "", "normal") == "DefaultQOS=-1"


def test_preempt_mode_off_reads_back_as_cluster():
    assert normal_form("word", "off") == normal_form("word", "cluster")
    assert normal_form("word", "SUSPEND,GANG") == "suspend,gang"


def test_descriptions_compare_as_sacctmgr_lowercases_them():
    assert normal_form("text", "Chemistry Dept") == normal_form("text", "chemistry dept")


def test_dropping_the_default_account_without_naming_a_new_one_is_refused_before_any_write():
    user = SlurmUser({"DefaultAccount": "old"}, {"old": {"Account": "old"}, "keep": {"Account": "keep"}})
    with pytest.raises(SacctmgrError, match=r"^default_account: accounts drops old"):
        check_request(None, "demo", "alice", {"accounts": ["keep"]}, user)


def test_flags_are_words_of_any_case_and_names_are_not():
    check_settings(QOS_FIELDS, {"flags": ["DenyOnLimit", "NoReserve"]})
    with pytest.raises(SacctmgrError, match=r"^flags: flags are words"):
        check_settings(QOS_FIELDS, {"flags": ["Deny-On-Limit"]})
