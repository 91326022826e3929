"""slurm_restore: the request written into spec.backup.restore once (a name run or asked for is not
written again), checked with the cluster's spec first (refused naming the field, nothing written),
nothing written in check mode; the wait ends on the restore's Succeeded, fails on its Failed, and
says where it is at the deadline. The module's options and defaults are the model's."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from memory_kube import MemoryKube

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils.k8s.wait import Timer
from ansible_collections.slurmkube.core.plugins.module_utils.model.fields import camel
from ansible_collections.slurmkube.core.plugins.module_utils.model.types import Restore
from ansible_collections.slurmkube.core.plugins.module_utils.ops.slurm_restore import (
    RestoreError,
    ask,
    request_spec,
    wait_ended,
)
from ansible_collections.slurmkube.core.plugins.modules.slurm_restore import DOCUMENTATION

REPOSITORY = {"claimName": "backups", "passwordSecret": "backup-password"}
PARAMS = {"name": "r1", "snapshot": "latest", "jail": True, "jail_paths": ["/home/alice"], "exact": False,
          "controller_state": False, "accounting_database": False}


def world(backup=None, status=None):
    kube = MemoryKube()
    kube.apply({"apiVersion": C.GROUP_VERSION, "kind": C.KIND_CLUSTER, "metadata": {"name": "demo", "namespace": "hpc"},
                "spec": {"backup": backup or dict(REPOSITORY)}, "status": status or {}})
    kube.writes = 0
    return kube


def spec_restore(kube):
    return kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, "demo", "hpc")["spec"]["backup"].get("restore")


def test_the_request_is_written_once_with_every_field():
    kube = world()
    asked = ask(kube, "demo", "hpc", request_spec(PARAMS), False)
    assert asked.changed and asked.before == {}
    assert spec_restore(kube) == {"name": "r1", "snapshot": "latest", "jail": True, "jailPaths": ["/home/alice"],
                                  "exact": False, "controllerState": False, "accountingDatabase": False}
    # A merge: the rest of spec.backup stays.
    assert kube.get(C.GROUP_VERSION, C.KIND_CLUSTER, "demo", "hpc")["spec"]["backup"]["claimName"] == "backups"
    writes = kube.writes
    again = ask(kube, "demo", "hpc", request_spec(PARAMS), False)
    assert not again.changed and kube.writes == writes


def test_a_name_the_operator_ran_is_not_asked_for_again():
    kube = world(status={"restore": {"name": "r1", "phase": "Succeeded"}})
    assert not ask(kube, "demo", "hpc", request_spec(PARAMS), False).changed and kube.writes == 0


def test_check_mode_writes_nothing():
    kube = world()
    assert ask(kube, "demo", "hpc", request_spec(PARAMS), True).changed and kube.writes == 0


@pytest.mark.parametrize("params,words", [
    (dict(PARAMS, jail_paths=["/home/../etc"]), "spec.backup.restore.jailPaths[0]"),
    (dict(PARAMS, accounting_database=True), "spec.backup.restore.accountingDatabase"),
    (dict(PARAMS, name="Not A Name"), "spec.backup.restore.name"),
])
def test_a_request_the_cluster_would_refuse_fails_naming_the_field_before_any_write(params, words):
    kube = world()
    with pytest.raises(RestoreError, match="refuses this restore: .*" + re.escape(words)):
        ask(kube, "demo", "hpc", request_spec(params), False)
    assert kube.writes == 0


def test_no_cluster_is_named_as_such():
    with pytest.raises(RestoreError, match="cluster: no SlurmCluster demo in namespace other"):
        ask(MemoryKube(), "demo", "other", request_spec(PARAMS), False)


def fast():
    clock = [0.0]

    def sleep(seconds):
        clock[0] += seconds

    return Timer(sleep, lambda: clock[0], 5.0)


def test_the_wait_ends_on_success_and_fails_on_failure_or_the_deadline():
    done = {"name": "r1", "phase": "Succeeded", "message": "restored jail"}
    assert wait_ended(world(status={"restore": done}), "demo", "hpc", "r1", 60, fast()) == done
    failed = {"name": "r1", "phase": "Failed",
              "message": "Job demo-restore-r1 failed (kubectl logs job/demo-restore-r1)"}
    with pytest.raises(RestoreError, match="restore r1 failed: Job demo-restore-r1 failed"):
        wait_ended(world(status={"restore": failed}), "demo", "hpc", "r1", 60, fast())
    stopping = {"name": "r1", "phase": "Stopping", "message": "waits for demo-controller-0 to stop"}
    with pytest.raises(RestoreError, match=r"has not ended after 60s: Stopping \(waits for demo-controller-0"):
        wait_ended(world(status={"restore": stopping}), "demo", "hpc", "r1", 60, fast())
    with pytest.raises(RestoreError, match="the operator has not started it"):
        wait_ended(world(status={"restore": dict(done, name="r0")}), "demo", "hpc", "r1", 60, fast())


def test_the_modules_request_options_are_the_models_fields_with_its_defaults():
    options = yaml.safe_load(DOCUMENTATION)["options"]
    for field in dataclasses.fields(Restore):
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        if field.name == "name":
            assert options["name"]["required"]
            continue
        assert options[field.name].get("default") == default, (field.name, camel(field.name))
