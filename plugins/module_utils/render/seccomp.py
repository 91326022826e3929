# Copyright: slurmkube contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workers' seccomp profile.

The runtime's default profile refuses pivot_root, which the jail needs; without a profile of
our own, workers would run Unconfined. This one allows what the jail, slurmd, MPI and debuggers
use: mount, pivot_root, unshare, setns; bpf, with which slurmstepd constrains a job's devices
on cgroup v2; ptrace and process_vm_readv between a user's own processes (debuggers, MPI's
shared-memory transports); perf_event_open (profilers). It refuses what no Slurm node needs and
what reaches past the pod into the node's kernel, each call with its reason. It is written in
the runtime's profile format (Docker's, which containerd and CRI-O read for Localhost
profiles), by an init container of each worker pod, into its node's kubelet seccomp directory.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

from ansible_collections.slurmkube.core.plugins.module_utils.digest import content_hash

# Refused calls, by why. EPERM, as for a missing capability: programs that probe a feature fall
# back as they would on a locked-down host.
DENIED_SYSCALLS: Dict[Tuple[str, ...], str] = {
    ("init_module", "finit_module", "delete_module", "create_module", "query_module", "get_kernel_syms"):
        "the node's kernel modules are not a pod's to change",
    ("kexec_load", "kexec_file_load", "reboot"): "the node boots only by its admin",
    ("add_key", "keyctl", "request_key"):
        "kernel keyrings are not namespaced: a key would be seen by every pod of the node",
    ("userfaultfd",): "stalls kernel code at the caller's will, a usual step of kernel exploits",
    ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        "a large kernel surface with a record of escapes; no Slurm program uses it",
    ("open_by_handle_at", "name_to_handle_at"):
        "opens a file by its handle, past the mounts the jail shows (the 2014 container escape)",
    ("settimeofday", "clock_settime", "stime"): "the node's clock belongs to the node",
    ("swapon", "swapoff", "acct"): "the node's swap and process accounting",
    ("iopl", "ioperm"): "raw I/O ports of the node's hardware",
    ("syslog",): "the node's kernel log holds other pods' traces",
    ("fanotify_init",): "watches file accesses across the node's file systems",
    ("lookup_dcookie", "nfsservctl", "uselib", "ustat", "sysfs", "_sysctl"):
        "obsolete calls kept by kernels, used by no current program",
}
EPERM = 1
# Each native architecture with the older ABIs its kernel also runs: a call refused by name is
# refused under every ABI (a 32-bit `int 0x80` gets no way around the list).
ARCHITECTURES = (
    {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
    {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
)
PROFILE_DIR = "slurmkube"


def worker_seccomp_profile() -> Dict[str, Any]:
    """Everything allowed but the refused calls above."""
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "archMap": [dict(arch) for arch in ARCHITECTURES],
        "syscalls": [{"names": sorted(name for names in DENIED_SYSCALLS for name in names),
                      "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM}],
    }


def worker_seccomp_profile_text() -> str:
    return json.dumps(worker_seccomp_profile(), indent=1, sort_keys=True) + "\n"


def worker_seccomp_profile_file() -> str:
    """The profile's file name in PROFILE_DIR, named by its content: pods of another version of
    the profile never read this one."""
    return "worker-%s.json" % content_hash([worker_seccomp_profile_text()])


def worker_seccomp_profile_name() -> str:
    """The profile's path below the kubelet's seccomp directory (a pod's localhostProfile)."""
    return "%s/%s" % (PROFILE_DIR, worker_seccomp_profile_file())
