"""Where a benchmark's CPU went on this host, read from the kernel's accounting (cgroup v1's cpuacct
or v2's cpu.stat): each docker container (a bare Slurm daemon, a kind node), each pod inside a kind
node (found by its uid in the kubelet's cgroup names, either cgroup driver), the kind nodes' own
programs (kubelet, containerd, the control plane: the node's total less its pods), and the rest of
the host (busy time from /proc/stat less every container's)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, Mapping, Optional, Tuple

# cgroupfs names a pod's cgroup pod<uid>, systemd kubepods-<class>-pod<uid with _>.slice.
POD_CGROUP = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
CONTAINERS = [Path("/sys/fs/cgroup/cpuacct/docker"), Path("/sys/fs/cgroup/cpu,cpuacct/docker"),
              Path("/sys/fs/cgroup/system.slice")]
HOST_TOTAL = "host busy"


def cgroup_seconds(path: Path) -> Optional[float]:
    """CPU seconds a cgroup and its descendants used: v1's cpuacct.usage, v2's usage_usec."""
    try:
        return int((path / "cpuacct.usage").read_text()) / 1e9
    except OSError:
        pass
    try:
        stat = dict(line.split() for line in (path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6
    except (OSError, KeyError, ValueError):
        return None


def container_cgroups() -> Iterator[Tuple[str, Path]]:
    """(full container id, cgroup) of each docker container."""
    for root in CONTAINERS:
        if not root.is_dir():
            continue
        for entry in root.iterdir():
            match = re.fullmatch(r"(?:docker-)?([0-9a-f]{64})(?:\.scope)?", entry.name)
            if match and entry.is_dir():
                yield match.group(1), entry


def pod_cgroups(container: Path) -> Iterator[Tuple[str, Path]]:
    """(uid, cgroup) of each pod the kubelet runs inside a container (a kind node)."""
    for dirpath, dirnames, _files in os.walk(container):
        match = POD_CGROUP.search(os.path.basename(dirpath))
        if match:
            dirnames[:] = []  # a pod's containers count in its own cgroup
            yield match.group(1).replace("_", "-"), Path(dirpath)


def host_busy_seconds() -> float:
    """CPU seconds the host was busy since boot (every CPU's time but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def container_names() -> Dict[str, str]:
    out = subprocess.run(["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Names}}"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return dict(line.split(None, 1) for line in out.splitlines() if line.strip())


def pod_names(kubectl_json: Mapping) -> Dict[str, str]:
    """uid -> namespace/name of `kubectl get pods -A -o json`'s pods."""
    return {pod["metadata"]["uid"]: "%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"])
            for pod in kubectl_json.get("items", [])}


def cpu_seconds(pods: Mapping[str, str]) -> Dict[str, float]:
    """CPU seconds so far, by what used them: 'container NAME', 'pod NS/NAME' (PODS: uid -> name;
    pods of other uids are left in their node), 'node NAME itself', and the host's busy total."""
    names = container_names()
    out: Dict[str, float] = {HOST_TOTAL: host_busy_seconds()}
    for cid, path in container_cgroups():
        total = cgroup_seconds(path)
        if total is None or cid not in names:
            continue
        in_pods = 0.0
        for uid, pod_path in pod_cgroups(path):
            used = cgroup_seconds(pod_path)
            if uid in pods and used is not None:
                out["pod " + pods[uid]] = used
                in_pods += used
        out[("node %s itself" if in_pods else "container %s") % names[cid]] = total - in_pods
    return out


def used_between(before: Mapping[str, float], after: Mapping[str, float], least: float = 0.05) -> Dict[str, float]:
    """CPU seconds used between two readings by each (at least LEAST), the rest of the host's
    busy time as 'other programs of the host', the largest first."""
    spent = {key: round(after[key] - before.get(key, 0.0), 2) for key in after}
    host = spent.pop(HOST_TOTAL)
    spent["other programs of the host"] = round(host - sum(spent.values()), 2)
    spent = {key: value for key, value in spent.items() if value >= least}
    return dict(sorted(spent.items(), key=lambda item: -item[1]), **{"total (host busy)": round(host, 2)})


def kube_pod_names(kubectl) -> Dict[str, str]:
    """pod_names of every pod KUBECTL (a Cluster's kubectl) lists."""
    return pod_names(json.loads(kubectl("get", "pods", "-A", "-o", "json").stdout))
