"""The workers' seccomp profile refuses what reaches the node's kernel, and nothing a Slurm node uses."""

from __future__ import annotations

from ansible_collections.slurmkube.core.plugins.module_utils.render.seccomp import (
    DENIED_SYSCALLS,
    worker_seccomp_profile,
    worker_seccomp_profile_name,
)

# The jail (mount namespaces, pivot_root, recursive read-only binds, capabilities), slurmstepd
# (bpf: cgroup v2's device controller), MPI's shared-memory transports (cross-memory attach),
# debuggers and profilers.
NEEDED = ("bpf", "mount", "umount2", "pivot_root", "unshare", "setns", "mount_setattr", "open_tree", "move_mount",
          "chroot", "capset", "prctl", "clone", "clone3", "ptrace", "process_vm_readv", "process_vm_writev",
          "kcmp", "perf_event_open", "sched_setaffinity", "setrlimit", "prlimit64")


def refused() -> set:
    rules = worker_seccomp_profile()["syscalls"]
    return {name for rule in rules if rule["action"] != "SCMP_ACT_ALLOW" for name in rule["names"]}


def test_everything_a_slurm_node_uses_is_allowed():
    profile = worker_seccomp_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert not refused() & set(NEEDED)


def test_what_reaches_the_nodes_kernel_is_refused_with_eperm():
    assert {"finit_module", "kexec_load", "keyctl", "add_key", "userfaultfd", "io_uring_setup",
            "open_by_handle_at", "clock_settime"} <= refused()
    assert all(rule["errnoRet"] == 1 for rule in worker_seccomp_profile()["syscalls"])


def test_each_refused_call_is_listed_once_with_its_reason():
    names = [name for group in DENIED_SYSCALLS for name in group]
    assert len(names) == len(set(names)) == len(refused())
    assert all(reason.strip() for reason in DENIED_SYSCALLS.values())


def test_every_abi_of_the_native_architecture_is_filtered():
    arches = {a["architecture"]: a["subArchitectures"] for a in worker_seccomp_profile()["archMap"]}
    assert arches == {"SCMP_ARCH_X86_64": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"], "SCMP_ARCH_AARCH64": ["SCMP_ARCH_ARM"]}


def test_the_profile_is_named_by_its_content():
    name = worker_seccomp_profile_name()
    assert name.startswith("slurmkube/worker-") and name.endswith(".json")
    assert name == worker_seccomp_profile_name()
