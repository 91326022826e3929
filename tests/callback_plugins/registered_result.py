"""The tests' plays (tests/playbook_runner.py) read a task's registered result from this callback: it
writes the result of the task that registers SLURMKUBE_TEST_RESULT_NAME, as Ansible registers it (no
internal keys, no invocation), to the file SLURMKUBE_TEST_RESULT_FILE. A task after it that wrote
the variable to a file cost ~1.2 CPU-s per run (copy's action runs two modules: stat and copy),
a quarter of a module test's play (tests/bench/ci_cold.md)."""

from __future__ import annotations

import json
import os

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase
from ansible.vars.clean import strip_internal_keys

DOCUMENTATION = """
name: registered_result
type: aggregate
short_description: write one registered result to a file
description: For the collection's tests only.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "registered_result"
    CALLBACK_NEEDS_ENABLED = True

    def v2_runner_on_ok(self, result) -> None:
        name, path = os.environ.get("SLURMKUBE_TEST_RESULT_NAME"), os.environ.get("SLURMKUBE_TEST_RESULT_FILE")
        if not name or not path or result.task.register != name:
            return
        registered = strip_internal_keys(dict(result.result))
        registered.pop("invocation", None)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(registered, out, cls=AnsibleJSONEncoder)
