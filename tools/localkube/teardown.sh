# shellcheck shell=bash
# `down`: stop exactly what `up` started and remove what it made. Every step finds its
# targets by something only we own: recorded PIDs, our cache path in a command line, our
# cgroup root, mounts under our state dir, our bridge, rules with our comment or subnet.

# PIDs of processes that run one of our binaries with our state dir on the command line:
# containerd's shims (`containerd-shim-runc-v2 -address $LK_RUN/containerd/...`) are
# re-parented to init, so no PID file of ours holds them.
lk_stray_pids() {
  local f pid exe
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
    [[ $exe == "$LK_CACHE"/* ]] || continue
    [[ $(tr '\0' ' ' <"$f" 2>/dev/null) == *"$LK_RUN/"* ]] && echo "$pid"
  done
  return 0
}

# PIDs of every process in our pods' cgroups (cgroup v1: any one hierarchy holds them all).
lk_pod_pids() {
  local h
  for h in /sys/fs/cgroup/pids /sys/fs/cgroup/memory /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [[ -d $h$LK_CGROUP_ROOT ]]; then
      find "$h$LK_CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
      return 0
    fi
  done
}

lk_kill_pods() {
  local pids _
  for _ in 1 2 3 4 5; do
    pids=$(lk_pod_pids)
    [[ -z $pids ]] && return 0
    # shellcheck disable=SC2086 # one PID per word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.5
  done
}

# containerd 1.7 puts each shim's socket at /run/containerd/s/sha256(<address>/<ns>/<id>)
# (a fixed dir, shared with other containerds). Deleting the tasks lets the shims remove
# their sockets; the rest are removed by name, the IDs read from our task state dir (it is
# there even when containerd died). A task being made or deleted right then shows as a
# ".<id>" dir that may vanish while find reads it: not a task, and no error.
lk_task_ids() {
  local d="$LK_RUN/containerd/state/io.containerd.runtime.v2.task/k8s.io"
  [[ -d $d ]] || return 0
  find "$d" -ignore_readdir_race -mindepth 1 -maxdepth 1 -type d ! -name '.*' -printf '%f\n'
}

# Every container containerd knows: after our processes were killed (a machine's processes
# stopped without `down`) and `up` ran again, the old containers' task dirs are gone while
# their dead shims' sockets are still there.
lk_container_ids() {
  timeout 10 "$LK_BIN/ctr" --address "$LK_RUN/containerd/containerd.sock" --namespace k8s.io \
    containers ls -q 2>/dev/null || true
}

lk_delete_tasks() {
  local id
  for id in $(lk_task_ids); do
    timeout 10 "$LK_BIN/ctr" --address "$LK_RUN/containerd/containerd.sock" --namespace k8s.io \
      tasks delete --force "$id" >/dev/null 2>&1 || true
  done
}

lk_remove_shim_sockets() {
  local id hash
  for id in "$@"; do
    hash=$(printf '%s' "$LK_RUN/containerd/containerd.sock/k8s.io/$id" | sha256sum | cut -d' ' -f1)
    rm -f "/run/containerd/s/$hash"
  done
}

# The kubelet's device-plugin socket lives at a fixed path, and so do the seccomp profiles
# (lk_link_seccomp_dir); remove them (and the dirs, when empty) if /var/lib/kubelet did not
# exist before our first up.
lk_remove_kubelet_host_dirs() {
  [[ -e $LK_RUN/created-var-lib-kubelet ]] || return 0
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  rm -rf /var/lib/kubelet/seccomp/slurmkube
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet/seccomp /var/lib/kubelet 2>/dev/null || true
}

lk_kill_shims() {
  local pids
  pids=$(lk_stray_pids)
  [[ -z $pids ]] && return 0
  # shellcheck disable=SC2086 # one PID per word
  kill -KILL $pids 2>/dev/null || true
}

lk_unmount_ours() {
  local _ mp
  for _ in 1 2 3; do
    # Deepest first; mountinfo escapes spaces as \040.
    mapfile -t mps < <(awk -v run="$LK_RUN/" 'index($5, run) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    ((${#mps[@]} == 0)) && return 0
    for mp in "${mps[@]}"; do
      umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
    done
  done
}

# The kubelet links every container log from /var/log/containers (a fixed path) into its
# pod logs dir, which is under our state dir: remove exactly those links.
lk_remove_log_links() {
  local link
  for link in /var/log/containers/*.log; do
    [[ -L $link ]] || continue
    [[ $(readlink "$link") == "$LK_RUN"/* ]] && rm -f "$link"
  done
  return 0
}

lk_remove_cgroups() {
  local h
  for h in /sys/fs/cgroup/*; do
    [[ -d $h$LK_CGROUP_ROOT ]] || continue
    find "$h$LK_CGROUP_ROOT" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# Delete iptables rules that are ours: our comment, our bridge, our pod subnet, or the CNI
# network name; then every CNI-* chain left empty and unreferenced.
lk_iptables_cleanup() {
  local table line chain changed rules
  local subnet_prefix=${LK_POD_CIDR%.*}.
  for table in filter nat mangle; do
    local pattern
    pattern="--comment \"?$LK_IPT_COMMENT\"? |[-]i $LK_BRIDGE |[-]o $LK_BRIDGE |name: \\\\\"localkube\\\\\"|${subnet_prefix//./\\.}"
    iptables-save -t "$table" 2>/dev/null | { grep '^-A ' | grep -E -- "$pattern" || true; } |
      while IFS= read -r line; do
        eval "iptables -w -t $table -D ${line#-A }" 2>/dev/null || true
      done
    changed=1
    while ((changed)); do
      changed=0
      while IFS= read -r chain; do
        # Empty, and no rule jumps to it.
        rules=$(iptables-save -t "$table" 2>/dev/null)
        if ! grep -E "^-A $chain( |$)" <<<"$rules" >/dev/null &&
          ! grep -E -- "-j $chain( |$)" <<<"$rules" >/dev/null; then
          iptables -w -t "$table" -X "$chain" 2>/dev/null && changed=1
        fi
      done < <(iptables-save -t "$table" 2>/dev/null | sed -n 's/^:\(CNI-[^ ]*\) .*/\1/p')
    done
    # The firewall plugin's CNI-FORWARD keeps only its jump to CNI-ADMIN once our pods'
    # rules are gone; when CNI-ADMIN is empty too, the pair is ours alone: remove it.
    if iptables-save -t "$table" 2>/dev/null | grep '^:CNI-FORWARD ' >/dev/null &&
      [[ $(iptables-save -t "$table" 2>/dev/null | grep -c '^-A CNI-FORWARD ') -le 1 ]] &&
      [[ $(iptables-save -t "$table" 2>/dev/null | grep -c '^-A CNI-ADMIN ') -eq 0 ]]; then
      iptables -w -t "$table" -D FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD 2>/dev/null || true
      iptables -w -t "$table" -F CNI-FORWARD 2>/dev/null || true
      iptables -w -t "$table" -X CNI-FORWARD 2>/dev/null || true
      iptables -w -t "$table" -X CNI-ADMIN 2>/dev/null || true
    fi
  done
}

# After `kube-proxy --cleanup`, the KUBE-* chains left on the host are the kubelet's
# (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT): only a host kubelet or
# kube-proxy makes them, and on this host those are ours. IPv4 and IPv6.
lk_kube_chains_cleanup() {
  local ipt table chain rule
  for ipt in iptables ip6tables; do
    command -v "$ipt-save" >/dev/null || continue
    for table in filter nat mangle; do
      "$ipt-save" -t "$table" 2>/dev/null | { grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' || true; } |
        while IFS= read -r rule; do
          eval "$ipt -w -t $table -D ${rule#-A }" 2>/dev/null || true
        done
      while IFS= read -r chain; do
        "$ipt" -w -t "$table" -F "$chain" 2>/dev/null || true
      done < <("$ipt-save" -t "$table" 2>/dev/null | sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p')
      while IFS= read -r chain; do
        "$ipt" -w -t "$table" -X "$chain" 2>/dev/null || true
      done < <("$ipt-save" -t "$table" 2>/dev/null | sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p')
    done
  done
}

# kube-router's ipsets (its chains go with the KUBE-* ones): destroyed once nothing uses them.
lk_kube_router_ipsets_cleanup() {
  command -v ipset >/dev/null || return 0
  local set
  for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-|kube-router-)' || true); do
    ipset destroy "$set" 2>/dev/null || true
  done
}

lk_down() {
  lk_stop provisioner kube-router kubelet kube-proxy kube-scheduler kube-controller-manager
  lk_kill_pods
  local task_ids
  task_ids=$(lk_task_ids)
  if lk_running containerd; then
    task_ids=$( (lk_task_ids; lk_container_ids) | sort -u)
    lk_delete_tasks
  fi
  lk_stop containerd
  lk_kill_shims
  # shellcheck disable=SC2086 # one ID per word
  lk_remove_shim_sockets $task_ids
  lk_stop kube-apiserver
  lk_stop etcd
  lk_unmount_ours
  lk_remove_cgroups
  lk_remove_log_links
  lk_remove_kubelet_host_dirs
  if [[ -x $LK_BIN/kube-proxy ]]; then
    "$LK_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  lk_kube_chains_cleanup
  lk_kube_router_ipsets_cleanup
  lk_iptables_cleanup
  if ip link show "$LK_BRIDGE" >/dev/null 2>&1; then
    ip link delete "$LK_BRIDGE"
  fi
  if [[ -d $LK_RUN ]]; then
    rm -rf --one-file-system "$LK_RUN" || lk_log "could not remove all of $LK_RUN"
  fi
  rm -f "$LK_KUBECONFIG"
  lk_log "down: nothing of localkube is left running"
}
