"""Run one of the collection's modules through a real ansible-playbook and read its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import yaml
from collection_path import ensure_importable

CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"


def run_module(workdir: Path, module: str, args: Dict[str, Any], *flags: str,
               env: Optional[Dict[str, str]] = None) -> Tuple[subprocess.CompletedProcess, Optional[dict]]:
    """(the ansible-playbook process, the registered result or None when the task failed)."""
    return run_task(workdir, {"slurmkube.core." + module: args, "register": "out"}, "out", *flags, env=env)


def run_role(workdir: Path, role: str, role_vars: Dict[str, Any], result: str, *flags: str,
             env: Optional[Dict[str, str]] = None) -> Tuple[subprocess.CompletedProcess, Optional[dict]]:
    """One of the collection's roles; RESULT names the variable it registers."""
    task = {"ansible.builtin.include_role": {"name": "slurmkube.core." + role}, "vars": role_vars}
    return run_task(workdir, task, result, *flags, env=env)


def run_task(workdir: Path, task: Dict[str, Any], result: str, *flags: str,
             env: Optional[Dict[str, str]] = None) -> Tuple[subprocess.CompletedProcess, Optional[dict]]:
    """Run TASK in a play on localhost; the variable RESULT as it stood after it (None when the play failed).

    A task that registers RESULT has it written by the callback registered_result; otherwise (a
    role's set_fact, a default) a copy task after it writes the variable."""
    playbook = workdir / "play.yml"
    result_file = workdir / "result.json"
    tasks = [task]
    if task.get("register") != result:
        tasks.append({"ansible.builtin.copy": {"content": "{{ %s | to_json }}" % result, "dest": str(result_file),
                                               "mode": "0600"},
                      "check_mode": False, "diff": False})
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    result_file.unlink(missing_ok=True)
    proc = run_playbook(playbook, *flags, env=dict(env or os.environ, SLURMKUBE_TEST_RESULT_NAME=result,
                                                   SLURMKUBE_TEST_RESULT_FILE=str(result_file)))
    loaded = json.loads(result_file.read_text()) if proc.returncode == 0 else None
    result_file.unlink(missing_ok=True)
    return proc, loaded


def run_playbook(playbook: Path, *flags: str, env: Optional[Dict[str, str]] = None,
                 collections: Optional[Path] = None) -> subprocess.CompletedProcess:
    """ansible-playbook on localhost with this checkout as slurmkube.core, or the one under
    COLLECTIONS (a directory holding ansible_collections/)."""
    full_env = dict(env or os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections or ensure_importable().parents[2]),
                    ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
                    ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="registered_result")
    return subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook), *flags],
        # Ansible refuses a non-blocking stdin, which another program of the session may have left.
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=full_env, check=False)
