# shellcheck shell=bash
# A worker's cgroups made writable for slurmd (sourced after base.sh).

# The kubelet's cAdvisor makes a container of every cgroup it finds below the pods' (an
# inotify watch, a housekeeping loop each): with slurmd's job and step cgroups below the pod's
# that was most of the kubelet's CPU under a stream of short jobs (tests/bench/throughput.md).
# It neither watches nor descends into a cgroup named *.mount (systemd's mount units), so the
# jobs' tree goes below one (v1: each controller's; v2: with the container's processes, since
# slurmd roots its tree at the parent of init's cgroup). Limits still hold: it is a child of
# the container's cgroup.
readonly JOBS_CGROUP=slurm-jobs.mount

# slurmd holds each job in a cgroup of its own below this pod's (cgroup.conf's
# CgroupMountpoint is CGROUP_MOUNT_DIR). The runtime mounts the pod's cgroups read-only at
# /sys/fs/cgroup; they are mounted again here, writable (CAP_SYS_ADMIN, which the jail needs
# anyway). slurmd's tree is below this pod's own cgroup (JOBS_CGROUP, a child of it), so slurmd
# can reach nothing of the node's, and /sys/fs/cgroup stays read-only: it is what jobs see
# through the jail's /sys.
mount_cgroups_writable() {
  local dir="$CGROUP_MOUNT_DIR" sub root
  install -d "$dir"
  if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
    mount --bind /sys/fs/cgroup "$dir" && mount -o remount,bind,rw "$dir" || return 1
    root="$dir$(sed -n 's/^0:://p' /proc/self/cgroup)" # the pod's cgroup ("/" in its namespace)
    root="${root%/}"
    leave_cgroup_root "$root" || return 1
    delegate_cgroup_controllers "$root" || return 1
    log "cgroup v2: this pod's tree is writable at $root, slurmd's below $JOBS_CGROUP (controllers: $(cat "$root/cgroup.subtree_control"))"
    return 0
  fi
  # v1: a tmpfs with one mount per controller (cpu,cpuacct may be one, with symlinks). Each
  # controller's mount is rooted at this container's JOBS_CGROUP, where slurmd makes its tree.
  mount --rbind /sys/fs/cgroup "$dir" || return 1
  for sub in "$dir"/*; do
    if [[ -d "$sub" && ! -L "$sub" ]] && mountpoint -q "$sub"; then
      mount -o remount,bind,rw "$sub" || return 1
      root_jobs_cgroup "$sub" || return 1
    fi
  done
  log "cgroup v1: this pod's controllers are writable under $dir, rooted at $JOBS_CGROUP"
}

# v1: make CONTROLLER_MOUNT/JOBS_CGROUP and mount it over CONTROLLER_MOUNT. A child cpuset
# starts with no CPUs or memory nodes: it gets its parent's, as slurmd's own cgroups do.
root_jobs_cgroup() {
  local mount="$1" file
  install -d "$mount/$JOBS_CGROUP"
  for file in cpuset.cpus cpuset.mems; do
    if [[ -e "$mount/$file" ]]; then
      cat "$mount/$file" >"$mount/$JOBS_CGROUP/$file" || return 1
    fi
  done
  mount --bind "$mount/$JOBS_CGROUP" "$mount"
}

# cgroup v2 lets a cgroup hand controllers to its children only while it holds no process
# itself. The container starts in its pod's cgroup (ROOT): move its processes (tini, this
# script, munged) to ROOT/JOBS_CGROUP/init.scope, as systemd would to init.scope, and slurmd,
# started after, with them. slurmd makes its tree beside init's cgroup (cgroup/v2: the parent
# of PID 1's), so below JOBS_CGROUP.
leave_cgroup_root() {
  local root="$1" init="$1/$JOBS_CGROUP/init.scope" pid pids
  [[ -e "$root/cgroup.procs" ]] || return 0 # (cgroupfs files have size 0: -s would always fail)
  install -d "$init"
  # The list is read whole before moving anyone: it changes under a reader as processes leave.
  for _ in 1 2 3; do
    mapfile -t pids <"$root/cgroup.procs"
    ((${#pids[@]})) || return 0
    for pid in "${pids[@]}"; do
      echo "$pid" >"$init/cgroup.procs" 2>/dev/null || true
    done
  done
  [[ -z "$(cat "$root/cgroup.procs")" ]] || return 1
}

# Then hand every controller the pod has down to ROOT/JOBS_CGROUP/system.slice's children, as
# systemd does for a unit with Delegate=yes: slurmd makes the scope for job cgroups there
# (cgroup.conf: IgnoreSystemd). slurmd would do it itself (EnableControllers), but before
# system.slice exists, and it logs errors for each controller (measured on a v2 node).
delegate_cgroup_controllers() {
  local dir controller controllers
  for dir in "$1" "$1/$JOBS_CGROUP" "$1/$JOBS_CGROUP/system.slice"; do
    install -d "$dir"
    read -ra controllers <"$dir/cgroup.controllers"
    for controller in "${controllers[@]}"; do
      echo "+$controller" >"$dir/cgroup.subtree_control" || return 1
    done
  done
}
