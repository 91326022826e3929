"""Jobs are held to what they were given on a cgroup v2 node, as on this cgroup v1 host.

Most Kubernetes nodes today run cgroup v2 alone; this machine is v1, and a kernel can give
its controllers to one hierarchy only. So the test boots Debian's kernel in a VM (qemu),
mounts cgroup v2 alone there, and runs the controller and a worker of the wide node set as
pods: the images' own roots, the rendered slurm.conf and cgroup.conf, the rendered pods'
environment (the worker reads its CPUs and memory from its cgroup, as with limits only), a
cgroup per pod with its limits, namespaces for mounts, PIDs and cgroups, cgroup2 read-only at
/sys/fs/cgroup (tests/images/guest/init.sh says how). The probes below run in the pods as
`kubectl exec` would; each test reads one probe's output. What the VM leaves out: a container
runtime (init.sh makes the pods as runc does), the pod network (one address on loopback),
the jail image (the worker's jail is the node's root, bound as a volume is).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Dict, NamedTuple

import pytest
from docker_cluster import (
    CLUSTER_MODEL_WITHOUT_REST,
    REPO,
    WIDE_MODEL,
    docker,
    env_args,
    write_secret,
    write_slurm_config,
)
from entrypoint_script import entrypoint_constant
from slurm_output import key_values, size_kib

from ansible_collections.slurmkube.core.plugins.module_utils import constants as C
from ansible_collections.slurmkube.core.plugins.module_utils import names
from ansible_collections.slurmkube.core.plugins.module_utils.model.derived import (
    slurm_cpus,
    slurm_job_memory_mib,
    slurm_node_names,
    slurm_real_memory_mib,
)
from ansible_collections.slurmkube.core.plugins.module_utils.render import common as render_common
from ansible_collections.slurmkube.core.plugins.module_utils.render.worker import _worker_env

# In tests/run's first pytest: its VM boots while that one waits for its cluster (first_lane).
pytestmark = [pytest.mark.slurm, pytest.mark.first_lane]

# The cgroup slurmd's tree is below, in the pod's (images/common/lib/cgroups.sh).
JOBS_CGROUP = entrypoint_constant("JOBS_CGROUP")

NODE = slurm_node_names(WIDE_MODEL)[0]
# The guest's slurmctld mounts no REST key set.
MODEL = CLUSTER_MODEL_WITHOUT_REST
CONTROLLER_POD = "%s-controller-0" % MODEL.name
GUEST_INIT = Path(__file__).with_name("guest") / "init.sh"
# The job's cgroup, from its task's: slurmd names the scope <node>_slurmstepd.scope when built for
# several slurmd per host (Debian's is), and since 26.05 the job's directory by its SLUID (job_<id>
# before, or with CgroupJobIdPaths=yes).
JOB_CGROUP = r'/sys/fs/cgroup$(sed -n "s|^0::\(.*\)/step_.*|\1|p" /proc/self/cgroup)'
JOB_CGROUP_NAME = r"(job_\d+|s[0-9A-Z]{13})"
BOOT_TIMEOUT = 600
POD_ADDRESS = "10.244.0.2"  # both pods': they share the guest's one network

# name -> (pod, script). They run in this order, each once the previous has ended.
PROBES = {
    "node": ("controller", "scontrol show node -o %s" % NODE),
    "oom": ("controller", """
        job=$(sbatch --parsable --wait -w %s -o /tmp/oom-%%j.out --mem=100M \\
              --wrap "python3 -c 'b = b\\"x\\" * (600 << 20)'")
        # sbatch --wait may return while the job is still COMPLETING (seen once in CI).
        while scontrol show job -o "$job" | grep -q JobState=COMPLETING; do sleep 1; done
        scontrol show job -o "$job"
        """ % NODE),
    "cpuset": ("controller", """
        srun -w %s -n1 -c1 sh -c 'nproc; grep Cpus_allowed_list /proc/self/status;
                                   cat %s/cpuset.cpus.effective; cat /proc/self/cgroup'
        """ % (NODE, JOB_CGROUP)),
    "raise": ("controller", """
        srun -w %s --mem=64M sh -c 'f=$(echo %s/memory.max); cat $f; echo max > $f && echo RAISED; cat $f;
                                     ls %s || echo HIDDEN'
        """ % (NODE, JOB_CGROUP, C.CGROUP_MOUNT_DIR)),
    "share": ("controller", """
        jobs="$(sbatch --parsable -w %s -c1 -o /tmp/share-%%j.out --wrap 'sleep 60') \
              $(sbatch --parsable -w %s -c1 -o /tmp/share-%%j.out --wrap 'sleep 60')"
        for i in $(seq 30); do
          states=$(for j in $jobs; do squeue -h -j $j -o %%T; done | sort -u | tr '\\n' ' ')
          [ "$states" = "RUNNING " ] && break
          sleep 1
        done
        echo "$states"
        scancel $jobs
        """ % (NODE, NODE)),
    "sstat": ("controller", """
        job=$(sbatch --parsable -w %s -o /tmp/sstat-%%j.out \
              --wrap "python3 -c 'import time; b = b\\"x\\" * (64 << 20); time.sleep(90)'")
        for i in $(seq 60); do
          rss=$(sstat -a -n -P -o MaxRSS -j $job 2>/dev/null)
          echo "$rss" | awk '/K$/ {v = $1 + 0} /M$/ {v = $1 * 1024} /G$/ {v = $1 * 1048576}
                             v >= 65536 {big = 1} END {exit !big}' && break
          sleep 1
        done
        echo "$rss"
        scancel $job
        """ % NODE),
    "leftover-job": ("controller", """
        sbatch --parsable --wait -w %s -o /tmp/left-%%j.out --wrap '(setsid sleep 3141 &); sleep 1; echo started'
        """ % NODE),
    "leftover-gone": ("worker", """
        for i in $(seq 30); do
          pgrep -f 'sleep 3141' >/dev/null || { echo gone; exit 0; }
          sleep 1
        done
        echo alive
        """),
}


class Probe(NamedTuple):
    rc: int
    out: str
    err: str


class Guest(NamedTuple):
    probes: Dict[str, Probe]
    console: str


def export_root(image: str, dest: Path) -> None:
    """An image's file system, as a container of it would start with."""
    container = docker("create", image).stdout.strip()
    try:
        dest.mkdir(parents=True)
        subprocess.run("docker export %s | tar -C %s -xf -" % (container, dest), shell=True, check=True, timeout=600)
    finally:
        docker("rm", container)


def image_env(image: str) -> list:
    """The image's own ENV (PATH, SLURMKUBE_ROLE), which the runtime gives every container of it."""
    out = docker("image", "inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", image).stdout
    return [line for line in out.splitlines() if line]


def pod_dir(root: Path, pod: str, name: str, env: list, cpus: int, memory_mib: int, mounts: list) -> None:
    """What the guest's init makes the pod from: its name, env, limits and mounts."""
    spec = root / "vm" / "pods" / pod
    spec.mkdir(parents=True)
    (spec / "name").write_text(name + "\n")
    (spec / "env").write_text("\n".join(env) + "\n")
    (spec / "cpu.max").write_text("%d 100000\n" % (cpus * 100000))
    (spec / "memory.max").write_text("%d\n" % (memory_mib << 20))
    (spec / "mounts").write_text("".join("%s %s %s\n" % m for m in mounts))


def guest_root(built: dict, root: Path) -> None:
    """The worker image's root, the controller's at /ctl, and /vm: what the pods are made from."""
    export_root(built["worker"], root)
    export_root(built["controller"], root / "ctl")
    vm = root / "vm"
    (vm / "slurm").mkdir(parents=True)
    write_slurm_config(vm / "slurm", MODEL, (WIDE_MODEL,))
    write_secret(vm / "munge", {C.MUNGE_KEY_SECRET_KEY: os.urandom(1024)})
    (vm / "address").write_text(POD_ADDRESS + "\n")
    # What the cluster's DNS answers, the names as slurm.conf writes them (SlurmctldAddr fully
    # qualified: glibc's hosts file matches a name with its trailing dot only as written).
    service = names.controller_address(MODEL.name, MODEL.namespace)
    (vm / "hosts").write_text("127.0.0.1 localhost\n%s %s %s %s %s %s\n" % (
        POD_ADDRESS, service, names.fully_qualified(service),
        names.controller_host_address(MODEL.name, MODEL.namespace, 0), CONTROLLER_POD, NODE))
    controller_env = env_args(render_common.env(MODEL, C.ROLE_CONTROLLER), CONTROLLER_POD)[1::2]
    pod_dir(root, "controller", CONTROLLER_POD, image_env(built["controller"]) + controller_env, 1, 1024, [
        ("tmpfs", C.SLURMCTLD_STATE_DIR, "mode=0755"),
        ("/", C.JAIL_MOUNT_PATH, "ro"),
    ])
    # CPUs and memory left out, as in a pod with limits only: the entrypoint reads the cgroup.
    worker_env = [v for v in _worker_env(MODEL, WIDE_MODEL) if v["name"] not in (C.ENV_CPUS, C.ENV_MEMORY_MB)]
    worker_mounts = [
        ("/", C.JAIL_MOUNT_PATH, "rw"),  # first: a bind of the node's root without the pod's mounts
        ("tmpfs", C.SLURMD_SPOOL_DIR, "mode=0777"),  # the emptyDirs
        ("tmpfs", C.NODE_TMP_DIR, "mode=0777"),
    ]
    pod_dir(root, "worker", NODE, image_env(built["worker"]) + env_args(worker_env, NODE)[1::2],
            slurm_cpus(WIDE_MODEL), slurm_real_memory_mib(WIDE_MODEL), worker_mounts)  # fmt: skip
    probes = vm / "probes"
    probes.mkdir()
    for number, (name, (pod, script)) in enumerate(PROBES.items()):
        # From /tmp, like a user in a writable directory: the job's files go to its working directory.
        text = "cd /tmp\n" + textwrap.dedent(script).strip() + "\n"
        (probes / ("%02d-%s.%s.sh" % (number, name, pod))).write_text(text)
    shutil.copy(GUEST_INIT, root / "init")
    (root / "init").chmod(0o755)


def unwrap(word: str) -> str:
    """A file the guest printed as one word (guest/init.sh, b64)."""
    return "" if word == "-" else base64.b64decode(word).decode(errors="replace")


def boot(kernel: str, initramfs: Path) -> str:
    """Everything the guest printed on its console, once it has powered off."""
    # Emulated CPUs (TCG), not KVM: on this machine (itself a VM) a KVM guest hangs in early boot
    # or fails to start (measured, with -cpu host, max and qemu64).
    out = subprocess.run(
        ["qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "2", "-m", "3072",
         "-nographic", "-no-reboot", "-kernel", kernel, "-initrd", str(initramfs),
         "-append", "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3"],
        # A /dev/null of its own: -nographic makes stdin non-blocking, and a qemu killed on the
        # timeout leaves it so; shared with pytest, every later ansible-playbook refused to start.
        stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", timeout=BOOT_TIMEOUT, check=False,
    )  # fmt: skip
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def guest(images, tmp_path_factory) -> Guest:
    kernel = subprocess.run(["bash", str(REPO / "hack" / "ensure-vm.sh")], capture_output=True, text=True,
                            check=True, timeout=900).stdout.strip()  # fmt: skip
    work = tmp_path_factory.mktemp("cgroup-v2-guest")
    root, initramfs = work / "root", work / "initramfs.cpio"
    try:
        guest_root(images, root)
        subprocess.run("find . -mindepth 1 | cpio --quiet -o -H newc > %s" % initramfs, shell=True, cwd=root,
                       check=True, timeout=600)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    try:
        console = boot(kernel, initramfs)
    finally:
        initramfs.unlink()
    probes = {}
    for line in console.splitlines():
        words = line.strip().split(" ")
        if words[:2] == ["SLURMKUBE-GUEST", "probe"] and len(words) == 6:
            name, rc, out, err = words[2:]
            probes[name.split("-", 1)[1]] = Probe(int(rc), unwrap(out), unwrap(err))
    assert "SLURMKUBE-GUEST ready" in console, console[-6000:]
    return Guest(probes, console)


def probe(guest: Guest, name: str) -> Probe:
    assert name in guest.probes, guest.console[-6000:]
    return guest.probes[name]


def test_the_guest_runs_cgroup_v2_alone_and_jobs_get_cgroups_of_their_own(guest):
    """Below JOBS_CGROUP, which the kubelet's cAdvisor does not track."""
    lines = probe(guest, "cpuset").out.splitlines()
    job = r"0::/%s/system\.slice/([\w-]+_)?slurmstepd\.scope/%s/step_0/user/task_0" % (re.escape(JOBS_CGROUP),
                                                                                       JOB_CGROUP_NAME)  # fmt: skip
    assert re.fullmatch(job, lines[-1]), lines


def test_the_node_offers_the_pods_cgroup_limits_less_the_daemons_share(guest):
    node = key_values(probe(guest, "node").out)
    assert int(node["CPUTot"]) == slurm_cpus(WIDE_MODEL)
    assert int(node["RealMemory"]) == slurm_real_memory_mib(WIDE_MODEL)
    assert int(node["RealMemory"]) - int(node["MemSpecLimit"]) == slurm_job_memory_mib(WIDE_MODEL)


def test_a_job_over_its_memory_ends_out_of_memory(guest):
    assert key_values(probe(guest, "oom").out)["JobState"] == "OUT_OF_MEMORY"


def test_a_one_cpu_job_sees_one_cpu_and_its_cpuset_is_one_core(guest):
    nproc, allowed, cpus = probe(guest, "cpuset").out.splitlines()[:3]
    assert nproc == "1"
    assert re.fullmatch(r"Cpus_allowed_list:\s*\d+", allowed), allowed
    assert re.fullmatch(r"\d+", cpus), cpus


def test_a_root_job_cannot_raise_its_own_memory_limit(guest):
    result = probe(guest, "raise")
    assert result.out.split() == [str(64 << 20), str(64 << 20), "HIDDEN"], result
    assert "Read-only file system" in result.err


def test_two_one_cpu_jobs_share_a_two_cpu_node(guest):
    assert probe(guest, "share").out.split() == ["RUNNING"]


def test_sstat_reports_a_running_jobs_memory(guest):
    assert max(size_kib(v) for v in probe(guest, "sstat").out.split()) >= 64 << 10


def test_a_jobs_leftover_background_process_is_killed_when_it_ends(guest):
    assert probe(guest, "leftover-job").rc == 0
    assert probe(guest, "leftover-gone").out.strip() == "gone"


def test_slurmd_starts_on_cgroup_v2_and_logs_no_cgroup_error(guest):
    """The entrypoint hands the controllers down before slurmd starts; slurmd finds nothing to fix."""
    log = [line for line in guest.console.splitlines() if line.startswith("SLURMKUBE-GUEST log worker ")]
    assert any("cgroup v2: this pod's tree is writable" in line for line in log), log
    assert any("slurmd started" in line for line in log), log
    assert [line for line in log if "error:" in line and re.search("cgroup|subtree", line, re.I)] == []
