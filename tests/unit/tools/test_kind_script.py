"""tools/kind/kind.sh finds an existing cluster among several, and loads images where pods run.

`kind.sh up` of a cluster that exists only writes its kubeconfig again; `down` deletes it. Both
decide from `kind get clusters`. Here the kind CLI in kind.sh's cache is a stand-in that lists
two clusters the way the real one can reach a pipe, the second name a moment after the first:
a reader that stops at the first match must not make the cluster look absent (CI, issue 18: a
second quickstart run tried to create its kind cluster again while the tests' own was up).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Dict

import pytest
from collection_path import REPO

KIND = REPO / "tools/kind/kind.sh"

FAKE_KIND = """#!/usr/bin/env bash
case "$1 $2" in
  "get clusters") echo slurmkube-demo; sleep 0.3; echo slurmkube-tests ;;
  "export kubeconfig") echo "export kubeconfig $*" >>"$CALLS" ;;
  *) echo "unexpected kind $*" >>"$CALLS"; exit 3 ;;
esac
"""


def kind_bin_of(cache: Path) -> Path:
    """Where kind.sh keeps the kind CLI, for this cache."""
    out = subprocess.run(["bash", "-c", f'. "{REPO}/tools/kind/lib.sh"; echo "$KIND_BIN"'],
                         env=dict(os.environ, SLURMKUBE_CACHE=str(cache)), capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    return Path(out.stdout.strip())


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def kind_sh(env: dict, *args: str) -> subprocess.CompletedProcess:
    """kind.sh in a session of its own: a kind.sh that wrongly went on to create the cluster
    (node image and Kubernetes builds) is stopped whole after 20 s (it takes well under 1 s)."""
    with subprocess.Popen(["bash", str(KIND), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += "\n(killed after 20 s)"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def proc_sys(root: Path, instances: int, watches: int) -> Dict[str, str]:
    """A stand-in for /proc/sys holding the two inotify limits kind.sh raises; its variable."""
    inotify = root / "fs" / "inotify"
    inotify.mkdir(parents=True)
    (inotify / "max_user_instances").write_text("%d\n" % instances)
    (inotify / "max_user_watches").write_text("%d\n" % watches)
    return {"SLURMKUBE_KIND_PROC_SYS": str(root)}


def test_up_of_the_first_of_two_listed_clusters_reuses_it(tmp_path: Path):
    executable(kind_bin_of(tmp_path / "cache") / "kind", FAKE_KIND)
    # The kubectl kind.sh copied out of the cluster's control plane when it made the cluster.
    executable(tmp_path / "cache/kind/clusters/slurmkube-demo/bin/kubectl", "#!/bin/sh\nexit 0\n")
    calls = tmp_path / "calls"
    env = dict(os.environ, SLURMKUBE_CACHE=str(tmp_path / "cache"), CALLS=str(calls),
               **proc_sys(tmp_path / "sys", 512, 524288))
    for run in range(3):
        up = kind_sh(env, "up", "slurmkube-demo")
        assert up.returncode == 0, (run, up.stderr)
        assert "cluster slurmkube-demo exists" in up.stderr and "creating cluster" not in up.stderr, up.stderr
    kubeconfig = tmp_path / "cache/kind/clusters/slurmkube-demo/kubeconfig"
    export = f"export kubeconfig export kubeconfig --name slurmkube-demo --kubeconfig {kubeconfig}"
    assert calls.read_text().splitlines() == [export] * 3


def test_up_raises_the_inotify_limits_kind_needs_and_keeps_higher_ones(tmp_path: Path):
    executable(kind_bin_of(tmp_path / "cache") / "kind", FAKE_KIND)
    executable(tmp_path / "cache/kind/clusters/slurmkube-demo/bin/kubectl", "#!/bin/sh\nexit 0\n")
    env = dict(os.environ, SLURMKUBE_CACHE=str(tmp_path / "cache"), CALLS=str(tmp_path / "calls"),
               **proc_sys(tmp_path / "sys", 128, 1048576))
    up = kind_sh(env, "up", "slurmkube-demo")
    assert up.returncode == 0, up.stderr
    limits = tmp_path / "sys" / "fs" / "inotify"
    assert (limits / "max_user_instances").read_text().strip() == "512"
    assert (limits / "max_user_watches").read_text().strip() == "1048576"
    assert "raised fs.inotify.max_user_instances from 128 to 512" in up.stderr, up.stderr
    assert "max_user_watches" not in up.stderr


def test_up_without_the_right_to_raise_a_limit_stops_saying_which_and_how():
    """As a user who cannot write the limit (nobody, over files root owns), before anything is made."""
    base = Path(tempfile.mkdtemp(prefix="kind-limits-"))  # pytest's tmp_path is root's alone
    try:
        executable(kind_bin_of(base / "cache") / "kind", FAKE_KIND)
        env = dict(os.environ, SLURMKUBE_CACHE=str(base / "cache"), CALLS=str(base / "calls"),
                   **proc_sys(base / "sys", 128, 524288))
        for path in [base, *base.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o555)
        for path in [base / "cache", *(base / "cache").rglob("*")]:  # lib.sh keeps locks there; limits stay root's
            path.chmod(path.stat().st_mode | 0o777 if path.is_dir() else path.stat().st_mode)
        up = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "bash", str(KIND),
                             "up", "slurmkube-demo"], env=env, capture_output=True, text=True, timeout=60,
                            check=False)  # fmt: skip
        assert up.returncode != 0
        assert ("fs.inotify.max_user_instances is 128; kind clusters side by side need 512 (kind's known issues): "
                "as root, sysctl -w fs.inotify.max_user_instances=512") in up.stderr, up.stderr
        assert not (base / "calls").exists()
        assert (base / "sys/fs/inotify/max_user_instances").read_text().strip() == "128"
    finally:
        shutil.rmtree(base)


FAKE_KIND_NODES = """#!/usr/bin/env bash
case "$1 $2" in
  "get clusters") echo slurmkube-tests ;;
  "get nodes") printf '%s\\n' $NODES ;;
  "load docker-image") echo "load $*" >>"$CALLS" ;;
  *) echo "unexpected kind $*" >>"$CALLS"; exit 3 ;;
esac
"""


def test_load_goes_to_the_workers_or_to_the_control_plane_of_a_one_node_cluster(tmp_path: Path):
    executable(kind_bin_of(tmp_path / "cache") / "kind", FAKE_KIND_NODES)
    calls = tmp_path / "calls"
    env = dict(os.environ, SLURMKUBE_CACHE=str(tmp_path / "cache"), CALLS=str(calls))
    cluster = "slurmkube-tests"
    three = f"{cluster}-control-plane {cluster}-worker {cluster}-worker2"
    for nodes in (three, f"{cluster}-control-plane"):
        load = kind_sh(dict(env, NODES=nodes), "load", cluster, "slurmkube/worker:1")
        assert load.returncode == 0, (nodes, load.stderr)
    assert calls.read_text().splitlines() == [
        f"load load docker-image --name {cluster} --nodes {cluster}-worker,{cluster}-worker2 slurmkube/worker:1",
        f"load load docker-image --name {cluster} --nodes {cluster}-control-plane slurmkube/worker:1",
    ]


def volumes_filesystem(cluster_dir: Path, **env: str) -> subprocess.CompletedProcess:
    """kind.sh's mount_volumes_filesystem on CLUSTER_DIR/shared/volumes, as `up` calls it."""
    script = f'. "{KIND}"; mount_volumes_filesystem "$1" "$1/shared/volumes"'
    return subprocess.run(["bash", "-c", script, "kind.sh", str(cluster_dir)], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None, reason="mounts: root and btrfs-progs")
def test_the_shared_volumes_are_a_btrfs_image_with_quotas_of_the_size_asked_and_never_hide_volumes_there(
        tmp_path: Path):
    volumes = tmp_path / "made" / "shared" / "volumes"
    volumes.mkdir(parents=True)
    made = volumes_filesystem(tmp_path / "made", SLURMKUBE_KIND_SHARED_SIZE="300M")
    try:
        assert made.returncode == 0 and "btrfs with quotas, 300M at most" in made.stderr, made.stderr
        assert subprocess.run(["stat", "-f", "-c", "%T", str(volumes)], capture_output=True, text=True,
                              check=True).stdout.strip() == "btrfs"
        # Sparse: the image takes what is written, not its size.
        image = tmp_path / "made" / "volumes.btrfs"
        assert image.stat().st_size == 300 * 2**20 and image.stat().st_blocks * 512 < 50 * 2**20
        quotas = subprocess.run(["btrfs", "qgroup", "show", str(volumes)], capture_output=True, text=True, check=False)
        assert quotas.returncode == 0, quotas.stderr
        # Asked again (an `up` that failed half-way, run again): the same filesystem, not a second on top.
        again = volumes_filesystem(tmp_path / "made")
        assert again.returncode == 0 and Path("/proc/mounts").read_text().count(str(volumes)) == 1
    finally:
        subprocess.run(["umount", str(volumes)], capture_output=True, check=False)
    kept = tmp_path / "kept" / "shared" / "volumes"
    (kept / "pvc-1").mkdir(parents=True)
    plain = volumes_filesystem(tmp_path / "kept", SLURMKUBE_KIND_SHARED_SIZE="300M")
    assert plain.returncode == 0 and "holds volumes already" in plain.stderr, plain.stderr
    assert str(kept) not in Path("/proc/mounts").read_text() and (kept / "pvc-1").is_dir()
    assert not (tmp_path / "kept" / "volumes.btrfs").exists()
