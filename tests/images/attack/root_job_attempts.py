"""Run as root inside a job, in the jail: every way out this project knows of, tried once each.

    python3 root_job_attempts.py MUNGED_PID SLURMD_PID MUNGE_UID SECRET HEALTHCHECK MUNGE_GID

prints one line per attempt, "NAME: SUCCEEDED" or "NAME: <errno name>". The test reads them;
each attempt must fail, and for the reason it names (tests/images/test_images.py).
"""

import ctypes
import errno
import os
import shutil
import socket
import subprocess
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
MS_REMOUNT, MS_BIND, MS_RDONLY = 32, 4096, 1
MNT_DETACH = 2
PTRACE_ATTACH = 16
SYS_FINIT_MODULE = 313  # x86_64
SYS_SETNS = 308
SYS_ADD_KEY = 248
SYS_USERFAULTFD = 323
SYS_IO_URING_SETUP = 425
KEY_SPEC_PROCESS_KEYRING = -2
UFFD_USER_MODE_ONLY = 1  # what any user may ask of userfaultfd since Linux 5.11
# struct vfs_cap_data, revision 2 with the effective flag: permitted = cap_sys_admin (bit 21).
CAP_XATTR = b"\x01\x00\x00\x02" + b"\x00\x00\x20\x00" + b"\x00" * 12
# Capabilities with which root leaves the jail or reaches the node: sys_admin (mount, setns),
# sys_ptrace, dac_read_search (open_by_handle_at), sys_module, sys_rawio, mknod, setuid, setgid,
# setfcap, net_raw, net_admin, bpf.
ESCAPE_CAPS = (21, 19, 2, 16, 17, 27, 7, 6, 31, 13, 12, 39)


def checked(result: int) -> None:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def read(path: str) -> None:
    with open(path, "rb") as f:
        f.read(16)


def append(path: str) -> None:
    with open(path, "ab") as f:
        f.write(b"pwned\n")


def setns_into(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    checked(LIBC.syscall(SYS_SETNS, fd, 0))


def plant_file_capability() -> None:
    path = "/tmp/cap-probe"
    open(path, "w").close()
    os.setxattr(path, "security.capability", CAP_XATTR)


def add_a_kernel_key() -> None:
    checked(LIBC.syscall(SYS_ADD_KEY, b"user", b"slurmkube-probe", b"x", 1, KEY_SPEC_PROCESS_KEYRING))


def open_a_userfaultfd() -> None:
    fd = LIBC.syscall(SYS_USERFAULTFD, os.O_CLOEXEC | UFFD_USER_MODE_ONLY)
    checked(fd)
    os.close(fd)


def set_up_an_io_uring() -> None:
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = LIBC.syscall(SYS_IO_URING_SETUP, 1, params)
    checked(fd)
    os.close(fd)


def hold_an_escape_capability() -> None:
    """Succeeds when any escape capability is in the effective, permitted or bounding set."""
    with open("/proc/self/status") as f:
        sets = {k: int(v, 16) for k, v in (line.split(":") for line in f) if k in ("CapEff", "CapPrm", "CapBnd")}
    held = [cap for cap in ESCAPE_CAPS if any(bits >> cap & 1 for bits in sets.values())]
    if not held:
        raise OSError(errno.EPERM, "none held")


# Where the set-id copies of python are planted: the shared jail, where any later job finds them.
PLANTED = "/opt/slurmkube-planted-%s"


def run_a_planted_set_id_copy(name: str, uid: int, gid: int, mode: int) -> None:
    """Plant a copy of python owned by uid:gid with mode (root may chown and chmod in the jail),
    run it: succeeds when it ran with other ids than ours. Exec'ing a set-id file needs no
    capability; only nosuid mounts or no_new_privs make the kernel ignore the bits (EPERM here
    says it did)."""
    path = PLANTED % name
    shutil.copy(os.path.realpath(sys.executable), path)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    ids = subprocess.run([path, "-c", "import os; print(*os.getresuid(), *os.getresgid())"],
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    if ids == [str(i) for i in (*os.getresuid(), *os.getresgid())]:
        raise OSError(errno.EPERM, "the kernel ignored the set-id bits")


def attempts(munged: int, slurmd: int, munge_uid: int, munge_gid: int, secret: str) -> dict:
    return {
        "munge key through pid 1's root": lambda: read("/proc/1/root" + secret),
        "munge key through slurmd's root": lambda: read("/proc/%d/root%s" % (slurmd, secret)),
        "munged's root": lambda: os.listdir("/proc/%d/root/etc" % munged),
        "munged's memory": lambda: read("/proc/%d/mem" % munged),
        "munged's environment": lambda: read("/proc/%d/environ" % munged),
        "munged's maps": lambda: read("/proc/%d/maps" % munged),
        "becoming munged's uid": lambda: os.setuid(munge_uid),
        "becoming munged's gid": lambda: os.setgid(munge_gid),
        "a setuid file of munged's uid": lambda: run_a_planted_set_id_copy("setuid", munge_uid, 0, 0o4755),
        "a setgid file of munged's gid": lambda: run_a_planted_set_id_copy("setgid", 0, munge_gid, 0o2755),
        "writing the worker's /etc": lambda: append("/proc/1/root/etc/slurmkube-pwned"),
        "writing the worker's health check": lambda: append("/proc/1/root" + sys.argv[5]),
        "writing the pod's /etc/hosts": lambda: append("/etc/hosts"),
        "writing the pod's /etc/resolv.conf": lambda: append("/etc/resolv.conf"),
        "writing slurm.conf": lambda: append("/etc/slurm/slurm.conf"),
        "remounting / read-write": lambda: checked(LIBC.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None)),
        "remounting slurm.conf read-write": lambda: checked(
            LIBC.mount(None, b"/etc/slurm", None, MS_REMOUNT | MS_BIND, None)),
        "mounting sysfs": lambda: checked(LIBC.mount(b"sysfs", b"/mnt", b"sysfs", 0, None)),
        "mounting cgroup2": lambda: checked(LIBC.mount(b"none", b"/mnt", b"cgroup2", 0, None)),
        "mounting a new proc": lambda: checked(LIBC.mount(b"proc", b"/mnt", b"proc", 0, None)),
        "unmounting slurm.conf": lambda: checked(LIBC.umount2(b"/etc/slurm", MNT_DETACH)),
        "loading a kernel module": lambda: checked(LIBC.syscall(SYS_FINIT_MODULE, -1, b"", 0)),
        "raw IP socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
        "packet socket": lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW),
        "ptrace of slurmd": lambda: checked(LIBC.ptrace(PTRACE_ATTACH, slurmd, None, None)),
        "chroot into pid 1's root": lambda: os.chroot("/proc/1/root"),
        "joining pid 1's mount namespace": lambda: setns_into("/proc/1/ns/mnt"),
        "making a disk device node": lambda: os.mknod("/tmp/disk", 0o60600, os.makedev(8, 0)),
        "planting a file capability": plant_file_capability,
        "holding a capability that leaves the jail": hold_an_escape_capability,
        # Open to any user on a bare host; the workers' seccomp profile refuses them.
        "a key in the node's kernel keyring": add_a_kernel_key,
        "a userfaultfd": open_a_userfaultfd,
        "an io_uring": set_up_an_io_uring,
    }


def main() -> None:
    munged, slurmd, munge_uid = (int(v) for v in sys.argv[1:4])
    munge_gid = int(sys.argv[6])
    for name, attempt in attempts(munged, slurmd, munge_uid, munge_gid, sys.argv[4]).items():
        try:
            attempt()
            outcome = "SUCCEEDED"
        except OSError as err:
            outcome = errno.errorcode.get(err.errno, str(err.errno))
        print("%s: %s" % (name, outcome), flush=True)


if __name__ == "__main__":
    main()
