#!/usr/bin/python
# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_progress
short_description: Wait for a background task, printing its progress while it runs
version_added: "0.4.0"
description:
  - Waits for a task started with C(async) and C(poll=0), as M(ansible.builtin.async_status)
    with C(until) does, but says what is going on while it waits (each new line of O(log), the
    progress lines the task writes there, as it appears; and when none came for O(interval)
    seconds, how long the task has run). A build of minutes is never silent.
  - Returns the task's result (C(rc), C(stdout), C(stderr)) once it ends, fails when it failed,
    and removes the job's record.
  - The playbooks use it for the image builds and the kind cluster made on a first run.
author:
  - slurmkube maintainers (@slurmkube)
options:
  jid:
    description: The job id the async task registered (C(ansible_job_id)).
    type: str
    required: true
  what:
    description: What the task does, at the start of every line printed.
    type: str
    required: true
  log:
    description:
      - A file on the controller the task writes its progress lines to, read from its beginning;
        remove the last run's file before starting the task. A file the task truncates when it
        starts is read again from its beginning.
    type: path
  interval:
    description: Seconds without a new line after which a line says how long the task has run.
    type: int
    default: 60
  timeout:
    description: Seconds to wait before failing.
    type: int
    default: 7200
  poll:
    description: Seconds between two looks at the job.
    type: int
    default: 2
seealso:
  - module: ansible.builtin.async_status
attributes:
  action:
    support: full
    description: Runs on the controller, which also reads O(log).
  check_mode:
    support: none
    description: An async task does not run in check mode; skip this one there too.
  diff_mode:
    support: none
    description: Nothing is changed.
  platform:
    platforms: posix
    support: full
    description: Any POSIX host.
"""

EXAMPLES = r"""
- name: Build in the background
  ansible.builtin.command:
    argv: [bash, build.sh]
  environment:
    SLURMKUBE_PROGRESS_FILE: /var/log/build-progress.log
  async: 7200
  poll: 0
  register: build_job

- name: Wait for the build, saying what it does
  slurmkube.core.job_progress:
    jid: "{{ build_job.ansible_job_id }}"
    what: images
    log: /var/log/build-progress.log
"""

RETURN = r"""
rc:
  description: The task's exit status.
  returned: when the task ran a command
  type: int
stdout:
  description: The task's standard output.
  returned: when the task ran a command
  type: str
stderr:
  description: The task's standard error.
  returned: when the task ran a command
  type: str
elapsed:
  description: Seconds waited.
  returned: always
  type: float
"""
