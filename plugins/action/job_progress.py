# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a background (async) task and say, while it runs, what it is doing: the new lines of
the log it writes its progress to, or at least every `interval` seconds how long it has run."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

ARGUMENT_SPEC = {
    "jid": {"type": "str", "required": True},
    "what": {"type": "str", "required": True},
    "log": {"type": "path"},
    "interval": {"type": "int", "default": 60},
    "timeout": {"type": "int", "default": 7200},
    "poll": {"type": "int", "default": 2},
}


def new_lines(path: Optional[str], offset: int) -> Tuple[List[str], int]:
    """The whole lines written to PATH since OFFSET, and the offset after them (a line still
    being written waits for its end). A file shorter than OFFSET was started afresh (the script
    truncates it when it starts): it is read from its beginning."""
    if not path or not os.path.isfile(path):
        return [], 0
    with open(path, "rb") as log:
        if os.fstat(log.fileno()).st_size < offset:
            offset = 0
        log.seek(offset)
        text = log.read()
    complete = text[:text.rfind(b"\n") + 1]
    lines = [line for line in complete.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines, offset + len(complete)


def elapsed(seconds: float) -> str:
    return "%d min %02d s" % (seconds // 60, seconds % 60)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def job_status(self, jid: str, task_vars: Dict[str, Any], mode: str = "status") -> Dict[str, Any]:
        """async_status's answer, as its own action plugin asks it (the job's directory from the
        shell's async_dir)."""
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": mode, "_async_dir": async_dir})

    def run(self, tmp: Any = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        start = last_said = time.monotonic()
        # From the start: the caller removes the last run's file before it starts the task.
        offset = 0
        while True:
            status = self.job_status(args["jid"], task_vars or {})
            lines, offset = new_lines(args["log"], offset)
            now = time.monotonic()
            for line in lines:
                display.display("%s: %s" % (args["what"], line))
                last_said = now
            if status.get("finished") or status.get("failed"):
                break
            if now - start >= args["timeout"]:
                result.update(failed=True, msg="%s: not done after %d s (log: %s)"
                              % (args["what"], args["timeout"], args["log"] or "none"))
                return result
            if now - last_said >= args["interval"]:
                display.display("%s: %s so far%s" % (args["what"], elapsed(now - start),
                                                     " (log: %s)" % args["log"] if args["log"] else ""))
                last_said = now
            time.sleep(args["poll"])
        self.job_status(args["jid"], task_vars or {}, mode="cleanup")
        for key in ("rc", "stdout", "stderr", "stdout_lines", "stderr_lines", "cmd", "msg"):
            if key in status:
                result[key] = status[key]
        result["elapsed"] = round(time.monotonic() - start, 1)
        result["changed"] = bool(status.get("changed"))
        if status.get("failed") or status.get("rc", 0) != 0:
            result["failed"] = True
            result.setdefault("msg", "%s failed" % args["what"])
        return result
