"""The modules' wait options: kubernetes.core's names, our defaults for now, a deprecation warning
where a default about to change decides, and bad values refused before anything is written."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.slurmkube.core.plugins.module_utils.ops.common import (
    WAIT_ARGS,
    ClusterError,
    wait_options,
    waits,
)


class Module:
    """What the two functions read of an AnsibleModule, with the deprecations it was told."""

    def __init__(self, check_mode: bool = False, **params: Any) -> None:
        self.params: Dict[str, Any] = {name: spec.get("default") for name, spec in WAIT_ARGS.items()}
        self.params.update(params)
        self.check_mode = check_mode
        self.deprecations: List[Dict[str, Any]] = []

    def deprecate(self, msg: str, version: str, collection_name: str) -> None:
        self.deprecations.append({"msg": msg, "version": version, "collection_name": collection_name})


def test_left_out_the_module_waits_600_s_looking_every_5_s_and_says_the_defaults_will_change():
    module = Module()
    waiting = wait_options(module)
    assert (waiting.wait, waiting.timeout, waiting.timer.interval) == (True, 600, 5.0)
    assert waits(module, waiting) is True
    [warned] = module.deprecations
    assert warned["version"] == "1.0.0" and warned["collection_name"] == "slurmkube.core"
    assert "default to false and 120 s, as kubernetes.core's modules" in warned["msg"]


def test_wait_given_with_its_timeout_or_turned_off_warns_nothing():
    for params in ({"wait": True, "wait_timeout": 900}, {"wait": False}):
        module = Module(**params)
        assert waits(module, wait_options(module)) is params["wait"]
        assert module.deprecations == [], params


def test_wait_true_without_a_timeout_warns_as_the_timeouts_default_will_change():
    module = Module(wait=True)
    assert waits(module, wait_options(module)) is True and len(module.deprecations) == 1


def test_check_mode_never_waits_nor_warns():
    module = Module(check_mode=True)
    assert waits(module, wait_options(module)) is False and module.deprecations == []


def test_wait_sleep_sets_the_interval_and_bad_values_name_their_option():
    assert wait_options(Module(wait_sleep=2)).timer.interval == 2.0
    with pytest.raises(ClusterError, match=r"^wait_sleep: 0; at least 1 second between looks$"):
        wait_options(Module(wait_sleep=0))
    with pytest.raises(ClusterError, match=r"^wait_timeout: -1; 0 or more seconds$"):
        wait_options(Module(wait_timeout=-1))
