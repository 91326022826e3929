"""The real plugin, run as slurmstepd would run it (through spank/tests/jail_harness), puts a task
into a real mount namespace with the jail as "/": the node's files are gone, node-local paths
are bound where asked, planted symlinks are not followed, and the node's mount table is untouched.

Needs root with CAP_SYS_ADMIN; skipped otherwise. No Slurm daemons are involved."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

CAP_SYS_ADMIN = 21


def has_cap_sys_admin() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not has_cap_sys_admin(), reason="mount namespaces need root with CAP_SYS_ADMIN"
)


@dataclass
class Layout:
    """A jail and the node around it, all below one temporary directory."""

    root: Path

    @property
    def jail(self) -> Path:
        return self.root / "jail"

    @property
    def node(self) -> Path:
        return self.root / "node"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def outside(self) -> Path:
        """Where a symlink planted in the jail points: the node's own files."""
        return self.root / "outside"

    @property
    def host_only(self) -> Path:
        return self.root / "host-only.txt"

    def words(self, *extra: str) -> list[str]:
        """plugstack.conf words; /etc/slurm and /run/munge come from the test's node dirs."""
        submounts = ",".join(
            [
                "%s/etc-slurm:/etc/slurm" % self.node,
                "%s/munge:/run/munge" % self.node,
                "%s/scratch:/local/scratch" % self.node,
            ]
        )
        return [
            "jail=%s" % self.jail,
            "spool=%s" % self.spool,
            "submounts=%s" % submounts,
            "binds=%s/gpu-libs:ro" % self.node,
            *extra,
        ]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def layout(tmp_path) -> Layout:
    lay = Layout(tmp_path)
    write(lay.jail / ".slurmkube-jail", "")
    write(lay.jail / "jail-only.txt", "jail\n")
    (lay.jail / "home" / "alice").mkdir(parents=True)
    write(lay.host_only, "host\n")
    write(lay.node / "etc-slurm" / "slurm.conf", "ClusterName=test\n")
    write(lay.node / "munge" / "munge.socket.2", "")
    write(lay.node / "scratch" / "hello.txt", "hello from nvme\n")
    (lay.node / "scratch" / "work").mkdir()
    write(lay.node / "gpu-libs" / "libcuda.so.1", "ELF\n")
    write(lay.node / "hosts", "10.0.0.1 worker-0\n")
    write(lay.spool / "job00042" / "slurm_script", "#!/bin/sh\necho job 42\n")
    write(lay.spool / "job00043" / "slurm_script", "#!/bin/sh\necho someone else's job\n")
    lay.outside.mkdir()
    write(lay.outside / "hosts", "node's own hosts file\n")
    return lay


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def entered(self) -> bool:
        return "entered" in self.stdout.splitlines()


def mount_table(below: Path) -> list[str]:
    """Mounts on "/" or below `below`: what a leak from the plugin would change. Others come and
    go with the machine's other work (docker, kubelet) and are left out."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line for line in lines if line.split()[4] == "/" or line.split()[4].startswith("%s/" % below)]


@pytest.fixture
def harness(spank_build, tmp_path):
    """Run jail_harness; every run must leave both the harness's and this process's mounts as they were."""
    assert spank_build.returncode == 0, spank_build.output

    def run(words: list[str], *options: str, cwd: Path | None = None) -> Run:
        before = mount_table(tmp_path)
        args = [str(spank_build.harness)]
        if cwd is not None:
            args += ["--cwd", str(cwd)]
        result = subprocess.run([*args, *options, "--", *words], capture_output=True, text=True, check=False)
        print(result.stdout, result.stderr)
        assert result.returncode != 64, "harness usage or setup error:\n" + result.stderr
        assert "host mounts unchanged: yes" in result.stdout
        assert mount_table(tmp_path) == before
        return Run(result.returncode, result.stdout, result.stderr)

    return run


def test_root_is_the_jail(layout, harness):
    run = harness(
        layout.words(),
        "--expect-file",
        "/jail-only.txt=jail",
        "--expect-absent",
        str(layout.host_only),
        "--expect-absent",
        str(Path(__file__).resolve()),
    )
    assert run.entered and run.returncode == 0


def test_proc_sys_and_dev_are_the_nodes(layout, harness):
    run = harness(
        layout.words(),
        "--expect-proc",
        "--expect-file",
        "/proc/self/status=Name:",
        "--expect-file",
        "/dev/null",
        "--expect-file",
        "/sys/kernel",
    )
    assert run.returncode == 0


def test_binds_and_submounts_land_where_asked(layout, harness):
    run = harness(
        layout.words(),
        "--expect-file",
        "/etc/slurm/slurm.conf=ClusterName=test",
        "--expect-file",
        "/run/munge/munge.socket.2",
        "--expect-file",
        "/local/scratch/hello.txt=hello from nvme",
        "--expect-file",
        "%s/gpu-libs/libcuda.so.1=ELF" % layout.node,
    )
    assert run.returncode == 0
    # mount points were made inside the jail, where asked
    assert (layout.jail / "local" / "scratch").is_dir()


def test_node_config_and_ro_binds_are_read_only(layout, harness):
    run = harness(
        layout.words(),
        "--expect-readonly",
        "/etc/slurm",
        "--expect-readonly",
        "%s/gpu-libs" % layout.node,
    )
    assert run.returncode == 0


def test_only_this_jobs_spool_dir_is_visible(layout, harness):
    job42 = layout.spool / "job00042"
    run = harness(
        layout.words(),
        "--argv0",
        str(job42 / "slurm_script"),
        "--expect-file",
        "%s/slurm_script=#!/bin/sh" % job42,
        "--expect-absent",
        str(layout.spool / "job00043"),
    )
    assert run.returncode == 0
    # the job dir's mount point lived on a private tmpfs, not on the shared volume
    assert not (layout.jail / str(job42).lstrip("/")).exists()


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("node/scratch/work", "/local/scratch/work"),  # below a sub-mount's node path
        ("jail/home/alice", "/home/alice"),  # the jail seen from the node
        ("outside", "/"),  # a node dir the jail lacks: never bound, start in /
    ],
)
def test_cwd_is_translated_into_the_jail(layout, harness, where, expected):
    run = harness(layout.words(), "--expect-cwd", expected, cwd=layout.root / where)
    assert run.returncode == 0


@pytest.mark.parametrize("variant", ["directory", "relative", "file"])
def test_symlink_planted_in_the_jail_is_not_followed(layout, harness, variant):
    """Root in the jail plants a link; a bind aimed through it must fail, not land on the node."""
    before = sorted(p.name for p in layout.outside.iterdir())
    if variant == "directory":
        (layout.jail / "evil").symlink_to(layout.outside)
        words = layout.words("submounts=%s/scratch:/evil/target" % layout.node)
    elif variant == "relative":
        (layout.jail / "run").mkdir()
        (layout.jail / "run" / "munge").symlink_to("../../outside")
        words = layout.words()
    else:
        (layout.jail / "etc").mkdir()
        (layout.jail / "etc" / "hosts").symlink_to(layout.outside / "hosts")
        words = layout.words("submounts=%s/hosts:/etc/hosts" % layout.node)
    run = harness(words)
    assert run.returncode == 2 and not run.entered
    assert "symlink, which could lead out of the jail" in run.stderr
    assert sorted(p.name for p in layout.outside.iterdir()) == before
    assert (layout.outside / "hosts").read_text() == "node's own hosts file\n"


def test_missing_marker_fails_the_job_instead_of_running_on_the_node(layout, harness):
    (layout.jail / ".slurmkube-jail").unlink()
    run = harness(layout.words())
    assert run.returncode == 2 and not run.entered
    assert "is not mounted (marker file .slurmkube-jail missing); refusing to run the job" in run.stderr


def test_pivot_root_is_used_when_allowed(layout, harness):
    run = harness(
        layout.words(),
        "--expect-file",
        "/jail-only.txt",
        # the node's root was detached, not left stacked on "/"
        "--expect-one-root",
        # no chroot fallback happened, so the job keeps chroot for its own use
        "--expect-cap",
        "sys_chroot",
    )
    assert run.returncode == 0
    assert "chroot" not in run.stderr


def test_chroot_fallback_when_pivot_root_is_denied(layout, harness):
    """Docker's default seccomp profile answers pivot_root with EPERM."""
    run = harness(
        layout.words(),
        "--deny-pivot-root",
        "--expect-file",
        "/jail-only.txt=jail",
        "--expect-absent",
        str(layout.host_only),
        "--expect-proc",
        "--expect-file",
        "/local/scratch/hello.txt",
        # chroot can be escaped by a second chroot: the job must not keep the capability
        "--expect-no-cap",
        "sys_chroot",
    )
    assert run.returncode == 0
    assert "slurm_info: spank_jail: pivot_root into %s refused" % layout.jail in run.stderr
    assert "falling back to chroot" in run.stderr


def test_no_chroot_fallback_when_disabled(layout, harness):
    run = harness(layout.words("chroot_fallback=no"), "--deny-pivot-root")
    assert run.returncode == 2 and not run.entered
    assert "pivot_root into %s: Operation not permitted" % layout.jail in run.stderr


def test_dangerous_capabilities_are_gone_and_root_keeps_the_rest(layout, harness):
    run = harness(
        layout.words(),
        *("--expect-no-cap", "sys_admin", "--expect-no-cap", "sys_ptrace"),
        *("--expect-no-cap", "dac_read_search", "--expect-no-cap", "mknod"),
        *("--expect-no-cap", "setuid", "--expect-no-cap", "setgid", "--expect-no-cap", "net_raw"),
        *("--expect-cap", "chown", "--expect-cap", "fowner", "--expect-cap", "dac_override"),
    )
    assert run.returncode == 0


@pytest.mark.parametrize(("extra", "expected"), [((), "denied"), (("drop_caps=none",), "readable")])
def test_root_job_cannot_reach_the_node_through_proc(layout, harness, spank_build, extra, expected):
    """/proc is the node's; /proc/<pid>/root of a node process is the node's root. Without the
    capability drop (the drop_caps=none case) the job really does read the node's file."""
    shutil.copy(spank_build.probe, layout.jail / "probe")
    node_process = subprocess.Popen(["sleep", "60"])
    try:
        secret = "/proc/%d/root%s" % (node_process.pid, layout.host_only)
        run = harness(layout.words(*extra), "--exec", "/probe", secret)
    finally:
        node_process.kill()
        node_process.wait()
    assert run.returncode == 0
    assert "%s %s" % (expected, secret) in run.stdout


MUNGE_UID, MUNGE_GID = 100, 101


@pytest.mark.parametrize(
    ("extra", "ids", "flags"),
    [
        ((), "ids 0 0 0 / 0 0 0", "nosuid 1 nodev 1"),
        # The control: with setuid=yes the same file really does make root munged's ids.
        (("setuid=yes",), "ids 0 %d %d / 0 %d %d" % (MUNGE_UID, MUNGE_UID, MUNGE_GID, MUNGE_GID), "nosuid 0 nodev 0"),
    ],
)
def test_a_setuid_file_planted_in_the_jail_gives_a_job_nothing(layout, harness, spank_build, extra, ids, flags):
    """Root in a job chowns a program to munged's uid and gid and makes it 6755: exec needs no
    capability, so only nosuid mounts and no_new_privs keep the next job from becoming munged."""
    planted = layout.jail / "suid-probe"
    shutil.copy(spank_build.probe, planted)
    os.chown(planted, MUNGE_UID, MUNGE_GID)
    planted.chmod(0o6755)
    run = harness(layout.words(*extra), "--exec", "/suid-probe", "ids", "nnp", "mount:/", "mount:/local/scratch")
    assert run.returncode == 0
    lines = run.stdout.splitlines()
    assert ids in lines
    assert ("no_new_privs %d" % (not extra)) in lines
    assert "mount / %s" % flags in lines
    if not extra:  # every mount of the task's tree, sub-mounts too
        assert "mount /local/scratch nosuid 1 nodev 0" in lines


def test_directory_fd_left_open_by_slurmstepd_does_not_reach_the_job(layout, harness, spank_build):
    """An inherited directory descriptor would let the job openat() past the jail's root."""
    shutil.copy(spank_build.probe, layout.jail / "probe")
    run = harness(layout.words(), "--leak-dir", str(layout.root), "--exec", "/probe", "fd9:host-only.txt")
    assert run.returncode == 0
    assert "denied fd9:host-only.txt: Bad file descriptor" in run.stdout


def test_slurmstepd_sees_the_jails_mirrored_dirs_at_their_node_paths(layout, harness):
    """slurmstepd opens --output/--error/--input and the cwd on the node: there they must be the jail's."""
    shared = layout.root / "shared"
    write(layout.jail / str(shared).lstrip("/") / "from-jail.txt", "jail\n")
    write(shared / "from-node.txt", "node\n")
    run = harness(
        layout.words("mirrors=%s" % shared),
        *("--stepd-expect-file", "%s/from-jail.txt=jail" % shared),
        *("--stepd-expect-absent", "%s/from-node.txt" % shared),
        *("--expect-file", "%s/from-jail.txt=jail" % shared),
        # the job's cwd there is the jail's directory too
        *("--expect-cwd", str(shared)),
        cwd=shared,
    )
    assert run.returncode == 0


def test_mirror_through_a_planted_symlink_fails_the_step(layout, harness):
    shared = layout.root / "shared"
    shared.mkdir()
    (layout.jail / str(layout.root).lstrip("/")).mkdir(parents=True)
    (layout.jail / str(shared).lstrip("/")).symlink_to("/etc")
    run = harness(layout.words("mirrors=%s" % shared))
    assert run.returncode == 2 and "stepd failed" in run.stdout
    assert "a symlink in the jail, which could lead out of it" in run.stderr


def test_root_jobs_slurmstepd_cannot_read_node_secrets_or_write_the_node(layout, harness):
    """sbatch -i <munge key> / -o /etc/passwd as root: slurmstepd opens those as root, on the node."""
    secrets = layout.root / "node-secrets"
    write(secrets / "munge.key", "secret\n")
    run = harness(
        layout.words("hide=%s" % secrets),
        *("--uid", "0"),
        *("--stepd-expect-absent", "%s/munge.key" % secrets),
        *("--stepd-expect-readonly", "/"),
        *("--stepd-expect-writable", str(layout.spool)),
        *("--stepd-expect-writable", str(layout.jail)),
        *("--stepd-expect-writable", "/tmp"),
        # the task still gets a writable jail
        *("--expect-file", "/jail-only.txt=jail", "--expect-writable", "/"),
    )
    assert run.returncode == 0
    assert (secrets / "munge.key").read_text() == "secret\n"


def test_root_jobs_slurmstepd_cannot_reach_other_processes_roots_nor_write_the_pods_other_mounts(layout, harness):
    """sbatch -i /proc/1/root/...: slurmstepd lacks setuid, which every other root process holds,
    so the kernel refuses it other processes' /proc/<pid>/root. A file mounted on its own (the
    pod's /etc/hosts) is read-only too, not only "/"."""
    secret = layout.root / "node-secrets" / "munge.key"
    write(secret, "secret\n")
    hosts = layout.root / "pod-hosts"
    write(hosts, "127.0.0.1 localhost\n")
    # outside /tmp, which a root job's slurmstepd keeps writable
    target = Path("/run") / ("slurmkube-test-hosts-%d" % os.getpid())
    target.write_text("")
    node_process = subprocess.Popen(["sleep", "60"])
    try:
        subprocess.run(["mount", "--bind", str(hosts), str(target)], check=True)
        run = harness(
            layout.words(),
            *("--uid", "0"),
            *("--stepd-expect-denied", "/proc/%d/root%s" % (node_process.pid, secret)),
            *("--stepd-expect-denied", "/proc/%d/cwd" % node_process.pid),
            *("--stepd-expect-readonly", str(target)),
            *("--stepd-expect-no-cap", "setuid", "--stepd-expect-no-cap", "net_raw"),
            *("--stepd-expect-cap", "sys_admin"),
            # the tasks still enter the jail, which stays writable
            *("--expect-file", "/jail-only.txt=jail", "--expect-writable", "/"),
        )
    finally:
        subprocess.run(["umount", str(target)], check=False)
        target.unlink()
        node_process.kill()
        node_process.wait()
    assert run.returncode == 0, run.stdout
    assert hosts.read_text() == "127.0.0.1 localhost\n"


def test_other_users_slurmstepd_keeps_the_node_as_it_is(layout, harness):
    secrets = layout.root / "node-secrets"
    write(secrets / "munge.key", "secret\n")
    run = harness(
        layout.words("hide=%s" % secrets),
        *("--uid", "1000"),
        *("--stepd-expect-file", "%s/munge.key" % secrets),
        *("--stepd-expect-writable", "/"),
    )
    assert run.returncode == 0


def test_clients_in_the_jail_are_left_alone(layout, harness):
    """srun/sbatch inside the jail load the same plugstack.conf: nothing happens there."""
    run = harness(layout.words(), "--context", "local", "--expect-file", "%s=host" % layout.host_only)
    assert run.returncode == 0


def test_bad_plugstack_words_fail_the_task(layout, harness):
    run = harness(layout.words("disable=yes"))
    assert run.returncode == 2 and not run.entered
    assert "bad plugstack.conf arguments: unknown option 'disable'" in run.stderr


# Capability numbers (linux/capability.h) the jail's tools must not hold, and one they keep.
CAP_CHOWN, CAP_SETUID, CAP_SYS_CHROOT, CAP_SYS_ADMIN = 0, 7, 18, 21


def test_jail_run_gives_the_jails_own_tools_only_what_a_root_job_has(layout, spank_build):
    """jail_user runs useradd through slurmkube-jail-run: inside the jail, the plugin's capability
    drop, no_new_privs; the node's files and other processes' roots out of reach."""
    shutil.copy(spank_build.probe, layout.jail / "probe")
    node_process = subprocess.Popen(["sleep", "60"])
    before = mount_table(layout.root)
    try:
        secret = "/proc/%d/root%s" % (node_process.pid, layout.host_only)
        probe = ["/probe", "/jail-only.txt", str(layout.host_only), secret, "nnp"]
        probe += ["cap:%d" % cap for cap in (CAP_CHOWN, CAP_SETUID, CAP_SYS_CHROOT, CAP_SYS_ADMIN)]
        run = subprocess.run([str(spank_build.jail_run), *layout.words(), "--", *probe],
                             capture_output=True, text=True, check=False)  # fmt: skip
    finally:
        node_process.kill()
        node_process.wait()
    print(run.stdout, run.stderr)
    assert run.returncode == 0
    lines = run.stdout.splitlines()
    assert "readable /jail-only.txt" in lines
    assert "denied %s: No such file or directory" % layout.host_only in lines
    assert "denied %s: Permission denied" % secret in lines
    assert "no_new_privs 1" in lines
    assert "has cap %d" % CAP_CHOWN in lines
    assert {"lacks cap %d" % c for c in (CAP_SETUID, CAP_SYS_ADMIN)} <= set(lines)
    assert mount_table(layout.root) == before


def test_jail_run_refuses_an_unmounted_jail_and_bad_words(layout, spank_build):
    (layout.jail / ".slurmkube-jail").unlink()
    run = subprocess.run([str(spank_build.jail_run), "jail=%s" % layout.jail, "--", "/probe"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 125 and "is not mounted" in run.stderr
    bad = subprocess.run([str(spank_build.jail_run), "disable", "--", "/probe"], capture_output=True, text=True,
                         check=False)  # fmt: skip
    assert bad.returncode == 64 and "expected key=value" in bad.stderr
