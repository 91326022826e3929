#!/usr/bin/env bash
# PID 1 of the cgroup v2 guest (tests/images/test_cgroup_v2.py): a Linux VM whose root is the
# worker image, with the controller image at /ctl. The kernel mounts cgroup v2 alone, as on
# most Kubernetes nodes. Two "pods" are made the way a container runtime makes them: a cgroup
# below /kubepods with the pod's cpu.max and memory.max; namespaces for mounts, UTS, IPC, PIDs
# and cgroups (the pod's cgroup is the root it sees); cgroup2 mounted read-only at
# /sys/fs/cgroup; tini and the image's entrypoint as PID 1, with the rendered pod's
# environment. The network is the guest's (one loopback: the pods reach each other through
# /etc/hosts). Then the probes in /vm/probes run, one by one, in the pod each names, like
# `kubectl exec`, and print their output on the console, base64, for the test to read.
#
#   (no argument)  in the initramfs: copy the root to a tmpfs (pivot_root, which the jail
#                  plugin uses, refuses the initramfs) and switch_root to it
#   node           on that root: the node's mounts and cgroups, the pods, the probes, power off
#   pod NAME ROOT  inside a pod's new namespaces: its mounts, then exec its entrypoint
set -euo pipefail

# shellcheck source=/dev/null
. /usr/local/lib/slurmkube/constants.sh

VM=/vm                       # what the test put in: config, munge Secret, pods' env and mounts, probes
POD_CGROUPS=/sys/fs/cgroup/kubepods
CONTROLLERS="+cpu +cpuset +memory +pids"
READY_TIMEOUT=180

say() { echo "SLURMKUBE-GUEST $*" >/dev/console; }

leave_initramfs() {
  mount -t proc proc /proc
  mount -t devtmpfs devtmpfs /dev
  mkdir -p /newroot
  mount -t tmpfs -o mode=0755,size=90% root /newroot
  local entry
  for entry in /*; do
    case "$entry" in
      /newroot | /proc | /dev | /sys) ;;
      *) cp -a "$entry" /newroot/ ;;
    esac
  done
  mkdir -p /newroot/proc /newroot/dev /newroot/sys
  exec switch_root /newroot /init node
}

# ------------------------------------------------------------------------------- node

node_mounts() {
  mount -t sysfs sysfs /sys
  mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
  mount -t tmpfs -o mode=0755 tmpfs /run
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mkdir -p /dev/pts /dev/shm
  mount -t devpts -o ptmxmode=0666,mode=0620 devpts /dev/pts
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  # What a runtime adds to a container's /dev (bash's <(...) needs /dev/fd).
  ln -s /proc/self/fd /dev/fd
  ln -s /proc/self/fd/0 /dev/stdin
  ln -s /proc/self/fd/1 /dev/stdout
  ln -s /proc/self/fd/2 /dev/stderr
  ip link set lo up
  # The pods' address. getaddrinfo(AI_ADDRCONFIG), which Slurm uses, answers only on a host
  # with an IPv4 address other than 127.0.0.1, and the kernel has no network driver built in.
  ip addr add "$(cat "$VM/address")/32" dev lo
  hostname vm
}

# The kubelet's share of the tree: controllers handed down to every pod cgroup.
node_cgroups() {
  echo "$CONTROLLERS" >/sys/fs/cgroup/cgroup.subtree_control
  mkdir "$POD_CGROUPS"
  echo "$CONTROLLERS" >"$POD_CGROUPS/cgroup.subtree_control"
}

# start_pod NAME ROOT: NAME's limits come from $VM/pods/NAME/{cpu.max,memory.max}. Prints the
# node's PID of the pod's PID 1.
start_pod() {
  local name="$1" root="$2" cgroup="$POD_CGROUPS/$1" unshare_pid children
  mkdir "$cgroup"
  cp "$VM/pods/$name/cpu.max" "$cgroup/cpu.max"
  cp "$VM/pods/$name/memory.max" "$cgroup/memory.max"
  mkdir -p /var/log/pods
  (
    echo "$BASHPID" >"$cgroup/cgroup.procs"
    exec unshare --mount --uts --ipc --pid --cgroup --fork /init pod "$name" "$root"
  ) >"/var/log/pods/$name.log" 2>&1 </dev/null &
  unshare_pid=$!
  # Up to 30 s: the guest is emulated (no KVM here), and on a loaded host its first fork and exec
  # of unshare took over the 5 s this once allowed (CI, 2026-11-28).
  for _ in $(seq 300); do
    children="$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null || true)"
    if [[ -n "$children" ]]; then
      # Only the pod's processes stay in its cgroup: runc's parent is not in it either.
      echo "$unshare_pid" >/sys/fs/cgroup/cgroup.procs
      echo "${children%% *}"
      return 0
    fi
    sleep 0.1
  done
  say "error: pod $name did not start"
  return 1
}

# in_pod PID CMD...: run CMD in the pod whose PID 1 is PID, in its root and namespaces.
in_pod() {
  local pid="$1"
  shift
  nsenter -t "$pid" -m -u -i -p -C -r -w env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root "$@"
}

# A file as one word: base64, or "-" when it is empty.
b64() { if [[ -s "$1" ]]; then base64 -w0 "$1"; else echo -; fi; }

run_probes() {
  local probe file name pod pid rc
  for file in "$VM"/probes/*.sh; do
    probe="$(basename "$file" .sh)"      # NN-name.pod
    name="${probe%.*}"
    pod="${probe##*.}"
    pid="${POD_PIDS[$pod]}"
    set +e
    in_pod "$pid" bash -s <"$file" >/tmp/probe.out 2>/tmp/probe.err
    rc=$?
    set -e
    say "probe $name $rc $(b64 /tmp/probe.out) $(b64 /tmp/probe.err)"
  done
}

node_ready() {
  local pid="$1" node="$2" state
  for _ in $(seq "$READY_TIMEOUT"); do
    state="$(in_pod "$pid" sinfo -h -N -n "$node" -o %t 2>/dev/null || true)"
    if [[ "$state" == idle ]]; then
      return 0
    fi
    sleep 1
  done
  return 1
}

run_node() {
  node_mounts
  node_cgroups
  cp "$VM/hosts" /etc/hosts
  # What jail-populate leaves in a jail: the worker's jail is this root (a non-recursive bind).
  echo "guest" >"/$JAIL_MARKER_FILE"
  declare -gA POD_PIDS
  POD_PIDS[controller]="$(start_pod controller /ctl)"
  POD_PIDS[worker]="$(start_pod worker /)"
  if node_ready "${POD_PIDS[controller]}" "$(cat "$VM/pods/worker/name")"; then
    say "ready"
    run_probes
  else
    say "not-ready"
  fi
  local pod line
  for pod in controller worker; do
    tail -n 2000 "/var/log/pods/$pod.log" >"/tmp/$pod.tail" 2>&1 || true
    while IFS= read -r line; do say "log $pod $line"; done <"/tmp/$pod.tail"
  done
  say "done"
  echo o >/proc/sysrq-trigger
  sleep 60
}

# -------------------------------------------------------------------------------- pod

# Inside the pod's namespaces (PID 1 of its PID namespace), still on the node's root.
enter_pod() {
  local name="$1" root="${2%/}" spec="$VM/pods/$1" source target options
  hostname "$(cat "$spec/name")"
  mount --make-rprivate /
  # The node's root, as the worker's jail; made before the pod's own mounts, which it leaves out.
  while read -r source target options; do
    mkdir -p "$root$target"
    case "$source" in
      tmpfs) mount -t tmpfs -o "$options" tmpfs "$root$target" ;;
      *)
        mount --bind "$source" "$root$target"
        [[ "$options" != ro ]] || mount -o remount,bind,ro "$root$target"
        ;;
    esac
  done <"$spec/mounts"
  if [[ -n "$root" ]]; then
    mount --rbind /dev "$root/dev"
  fi
  mount -t proc proc "$root/proc"
  mount -t sysfs -o ro sysfs "$root/sys"
  # The runtime's view of cgroups: this pod's cgroup as the root, read-only.
  mount -t cgroup2 -o ro,nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"
  mount -t tmpfs -o mode=0755 tmpfs "$root/run"
  mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
  mkdir -p "$root$SLURM_CONFIG_DIR" "$root$MUNGE_KEY_MOUNT_DIR"
  mount --bind -o ro "$VM/slurm" "$root$SLURM_CONFIG_DIR"
  mount --bind -o ro "$VM/munge" "$root$MUNGE_KEY_MOUNT_DIR"
  [[ -z "$root" ]] || cp /etc/hosts "$root/etc/hosts"
  local env
  mapfile -t env <"$spec/env"
  exec chroot "${root:-/}" env -i "${env[@]}" /usr/bin/tini -- "$ENTRYPOINT_PROGRAM"
}

case "${1:-}" in
  "") leave_initramfs ;;
  node) run_node ;;
  pod) enter_pod "$2" "$3" ;;
  *) echo "usage: $0 [node | pod NAME ROOT]" >&2; exit 2 ;;
esac
