#!/usr/bin/env bash
# localkube: a real single-node Kubernetes on this machine, built from upstream sources.
#
#   localkube.sh build            build/unpack every binary into the cache (idempotent)
#   localkube.sh up               build if needed, then start the cluster (idempotent)
#   localkube.sh status           component health; exit 0 only when all are healthy
#   localkube.sh down             stop what we started; remove mounts, chains, bridge, state
#   localkube.sh import-image IMG...   docker save IMG | ctr import (nothing is pulled);
#                                 IMG may also be an image archive file
#   localkube.sh images           list the image references containerd holds
#   localkube.sh kubeconfig       print the kubeconfig path
#   localkube.sh env              print shell exports (KUBECONFIG, PATH with our kubectl)
#
# Environment: SLURMKUBE_CACHE (default /var/cache/slurmkube), LOCALKUBE_NICE (the build's
# niceness, default 10). Binaries live in
# $SLURMKUBE_CACHE/localkube/<k8s version>/bin, the cluster's state and logs in
# $SLURMKUBE_CACHE/localkube/run, the kubeconfig at $SLURMKUBE_CACHE/localkube/kubeconfig.
set -euo pipefail

# shellcheck source=tools/localkube/build-env.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build-env.sh"

# The network: the node's IP is the bridge's, so pods reach the apiserver through it.
LK_NODE_NAME=localkube
LK_BRIDGE=lkbr0
LK_POD_CIDR=10.244.0.0/24
LK_NODE_IP=10.244.0.1
LK_SERVICE_CIDR=10.96.0.0/16
LK_KUBERNETES_SVC_IP=10.96.0.1
LK_DNS_IP=10.96.0.10
LK_CLUSTER_DOMAIN=cluster.local
LK_APISERVER_PORT=6443
LK_ETCD_CLIENT_PORT=12379
LK_ETCD_PEER_PORT=12380
# Cgroup parent of every pod: ours alone, so down can find and remove it.
LK_CGROUP_ROOT=/localkube
LK_STORAGE_CLASS=localkube-rwx
# iptables rules we add carry this comment, so down removes exactly those.
LK_IPT_COMMENT=localkube

LK_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy kube-router
  provisioner)
LK_KUBE_ROUTER_HEALTH_PORT=20244

# shellcheck source=tools/localkube/pki.sh
. "$LK_HERE/pki.sh"
# shellcheck source=tools/localkube/config.sh
. "$LK_HERE/config.sh"
# shellcheck source=tools/localkube/teardown.sh
. "$LK_HERE/teardown.sh"

lk_kubectl() { "$LK_BIN/kubectl" --kubeconfig "$LK_KUBECONFIG" "$@"; }
lk_ctr() { "$LK_BIN/ctr" --address "$LK_RUN/containerd/containerd.sock" --namespace k8s.io "$@"; }

# --- processes: started by us, recorded by PID, stopped by PID -------------------------

lk_pidfile() { echo "$LK_RUN/pids/$1.pid"; }

# A recorded PID counts only while that process still runs one of our binaries (a PID can
# be reused by an unrelated process after ours died).
lk_pid_of() {
  local pid
  pid=$(cat "$(lk_pidfile "$1")" 2>/dev/null) || return 1
  [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *"$LK_CACHE"* ]] || return 1
  echo "$pid"
}

lk_running() { lk_pid_of "$1" >/dev/null; }

lk_start() {
  local name=$1
  shift
  if lk_running "$name"; then return 0; fi
  mkdir -p "$LK_RUN/pids" "$LK_RUN/logs"
  lk_log "starting $name"
  # setsid: our own session, so a signal to the caller's process group does not reach it.
  setsid "$@" >>"$LK_RUN/logs/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$(lk_pidfile "$name")"
}

# Stop components by recorded PID: TERM to all of them at once, KILL after 10 s.
lk_stop() {
  local name pid pids=()
  for name in "$@"; do
    if pid=$(lk_pid_of "$name"); then
      lk_log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  local _
  for _ in $(seq 1 50); do
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && break
      pids=("${pids[@]:1}")
    done
    ((${#pids[@]} == 0)) && break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for name in "$@"; do rm -f "$(lk_pidfile "$name")"; done
}

# Wait until "$@" succeeds, for at most $1 seconds; on timeout show the component's log.
lk_wait() {
  local seconds=$1 what=$2 log=$3
  shift 3
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      lk_log "$what not ready after ${seconds}s; last lines of $log:"
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

lk_curl_admin() {
  curl -fsS --max-time 5 --cacert "$LK_RUN/pki/ca.crt" \
    --cert "$LK_RUN/pki/admin.crt" --key "$LK_RUN/pki/admin.key" "$@"
}

# --- health -----------------------------------------------------------------------------

lk_health() {
  case $1 in
  etcd) curl -fsS --max-time 3 "http://127.0.0.1:$LK_ETCD_CLIENT_PORT/health" | grep '"health":"true"' >/dev/null ;;
  kube-apiserver) lk_curl_admin "https://$LK_NODE_IP:$LK_APISERVER_PORT/readyz" | grep ok >/dev/null ;;
  kube-controller-manager) curl -fsSk --max-time 3 https://127.0.0.1:10257/healthz | grep ok >/dev/null ;;
  kube-scheduler) curl -fsSk --max-time 3 https://127.0.0.1:10259/healthz | grep ok >/dev/null ;;
  containerd) lk_ctr version ;;
  kubelet) curl -fsS --max-time 3 http://127.0.0.1:10248/healthz | grep ok >/dev/null ;;
  kube-proxy) curl -fsS --max-time 3 http://127.0.0.1:10256/healthz ;;
  kube-router) curl -fsS --max-time 3 "http://127.0.0.1:$LK_KUBE_ROUTER_HEALTH_PORT/healthz" ;;
  provisioner) lk_running provisioner ;;
  *) return 1 ;;
  esac
}

lk_status() {
  local c bad=0 state
  for c in "${LK_COMPONENTS[@]}"; do
    if ! lk_running "$c"; then
      state="not running"
      bad=1
    elif lk_health "$c" >/dev/null 2>&1; then
      state="healthy (pid $(lk_pid_of "$c"))"
    else
      state="UNHEALTHY (pid $(lk_pid_of "$c"))"
      bad=1
    fi
    printf '%-24s %s\n' "$c" "$state"
  done
  if ((bad == 0)); then
    lk_kubectl get nodes -o wide 2>&1 || bad=1
    lk_kubectl -n kube-system get deploy coredns 2>&1 || bad=1
  fi
  echo "kubeconfig: $LK_KUBECONFIG"
  return "$bad"
}

# --- up -----------------------------------------------------------------------------------

lk_prepare_host() {
  local m
  for m in br_netfilter overlay; do modprobe "$m" 2>/dev/null || true; done
  # Shared host settings (docker needs them too): set, never reset by down.
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  lk_ensure_commands runc iptables ipset
}

# Install the Debian packages (named like the commands) of the commands this host lacks: a
# fresh machine has neither runc nor iptables until something (docker.io, say) brings them.
lk_ensure_commands() {
  local cmd missing=()
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null || missing+=("$cmd")
  done
  ((${#missing[@]})) || return 0
  lk_log "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
    lk_die "cannot install ${missing[*]}"
  for cmd in "${missing[@]}"; do
    command -v "$cmd" >/dev/null || lk_die "$cmd is still missing after installing it"
  done
}

lk_ipt_ensure() {
  local table=$1
  shift
  iptables -w -t "$table" -C "$@" -m comment --comment "$LK_IPT_COMMENT" 2>/dev/null ||
    iptables -w -t "$table" -I "$@" -m comment --comment "$LK_IPT_COMMENT"
}

lk_network_up() {
  if ! ip link show "$LK_BRIDGE" >/dev/null 2>&1; then
    ip link add "$LK_BRIDGE" type bridge
  fi
  [[ $(ip -o addr show dev "$LK_BRIDGE") == *" $LK_NODE_IP/"* ]] ||
    ip addr add "$LK_NODE_IP/${LK_POD_CIDR#*/}" dev "$LK_BRIDGE"
  ip link set "$LK_BRIDGE" up
  # Docker sets the FORWARD policy to DROP; let our bridge's traffic through.
  lk_ipt_ensure filter FORWARD -i "$LK_BRIDGE" -j ACCEPT
  lk_ipt_ensure filter FORWARD -o "$LK_BRIDGE" -j ACCEPT
  # A Service address that kube-proxy did not translate (no endpoint at that moment, say while
  # a controller pod is replaced) goes nowhere, as in kube-proxy's nftables mode, instead of
  # leaving by the default route. On this kind of machine that route's gateway answers any TCP
  # connection (an HTTP proxy): Slurm clients read its reply as "Insane message length" and
  # give up, where a connection that fails is retried for MessageTimeout (measured). Pods' packets
  # are dropped in mangle FORWARD: it comes before filter FORWARD, whose CNI chain accepts
  # everything from a pod (a REJECT there was passed by in CI).
  lk_ipt_ensure mangle FORWARD -d "$LK_SERVICE_CIDR" -j DROP
  lk_ipt_ensure filter OUTPUT -d "$LK_SERVICE_CIDR" -j REJECT
}

lk_start_etcd() {
  mkdir -p "$LK_RUN/etcd"
  chmod 0700 "$LK_RUN/etcd"
  lk_start etcd "$LK_BIN/etcd" --name localkube --data-dir "$LK_RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$LK_ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$LK_ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$LK_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$LK_ETCD_PEER_PORT" \
    --initial-cluster "localkube=http://127.0.0.1:$LK_ETCD_PEER_PORT" \
    --listen-metrics-urls "" --unsafe-no-fsync --log-level warn
  lk_wait 60 etcd "$LK_RUN/logs/etcd.log" lk_health etcd
}

lk_start_apiserver() {
  local p="$LK_RUN/pki"
  lk_start kube-apiserver "$LK_BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$LK_ETCD_CLIENT_PORT" \
    --advertise-address "$LK_NODE_IP" --bind-address "$LK_NODE_IP" \
    --secure-port "$LK_APISERVER_PORT" \
    --service-cluster-ip-range "$LK_SERVICE_CIDR" \
    --client-ca-file "$p/ca.crt" \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --kubelet-client-certificate "$p/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$p/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --service-account-issuer "https://kubernetes.default.svc.$LK_CLUSTER_DOMAIN" \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --service-node-port-range 30000-32767 \
    --endpoint-reconciler-type lease --profiling=false
  lk_wait 120 kube-apiserver "$LK_RUN/logs/kube-apiserver.log" lk_health kube-apiserver
}

lk_start_controllers() {
  local p="$LK_RUN/pki" k="$LK_RUN/kubeconfigs"
  lk_start kube-controller-manager "$LK_BIN/kube-controller-manager" \
    --kubeconfig "$k/controller-manager.conf" \
    --authentication-kubeconfig "$k/controller-manager.conf" \
    --authorization-kubeconfig "$k/controller-manager.conf" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
    --root-ca-file "$p/ca.crt" --service-account-private-key-file "$p/sa.key" \
    --use-service-account-credentials=true --allocate-node-cidrs=false \
    --service-cluster-ip-range "$LK_SERVICE_CIDR" --profiling=false
  lk_start kube-scheduler "$LK_BIN/kube-scheduler" \
    --kubeconfig "$k/scheduler.conf" \
    --authentication-kubeconfig "$k/scheduler.conf" \
    --authorization-kubeconfig "$k/scheduler.conf" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false
}

lk_start_containerd() {
  mkdir -p "$LK_RUN/containerd"
  lk_restart_if_changed containerd "$LK_RUN/containerd/config.toml"
  # The shim is found through PATH; runc is the host's (bookworm) one.
  lk_start containerd env PATH="$LK_BIN:$PATH" \
    "$LK_BIN/containerd" --config "$LK_RUN/containerd/config.toml"
  lk_wait 60 containerd "$LK_RUN/logs/containerd.log" lk_health containerd
}

lk_import_builtin_images() {
  local img
  for img in pause coredns toolbox; do
    lk_ctr images import --no-unpack=false "$LK_BIN/images/$img.tar" >/dev/null
  done
}

# The kubelet refuses a cgroup root that does not exist: make ours in every hierarchy.
lk_make_cgroup_root() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ -e ${h}cgroup.procs ]] || continue
    mkdir -p "${h%/}$LK_CGROUP_ROOT"
  done
  # A new cpuset cgroup is empty: give it the root's CPUs and memory nodes.
  local c=/sys/fs/cgroup/cpuset
  if [[ -e $c/cpuset.cpus && -d $c$LK_CGROUP_ROOT ]]; then
    [[ -n $(cat "$c$LK_CGROUP_ROOT/cpuset.cpus") ]] || cat "$c/cpuset.cpus" >"$c$LK_CGROUP_ROOT/cpuset.cpus"
    [[ -n $(cat "$c$LK_CGROUP_ROOT/cpuset.mems") ]] || cat "$c/cpuset.mems" >"$c$LK_CGROUP_ROOT/cpuset.mems"
  fi
}

# Pods find Localhost seccomp profiles where a kubeadm, kind or cloud node keeps them: the
# kubelet reads <root-dir>/seccomp, and ours points at /var/lib/kubelet/seccomp.
lk_link_seccomp_dir() {
  mkdir -p /var/lib/kubelet/seccomp "$LK_RUN/kubelet/root"
  [[ -L $LK_RUN/kubelet/root/seccomp ]] || ln -s /var/lib/kubelet/seccomp "$LK_RUN/kubelet/root/seccomp"
}

lk_start_node() {
  lk_make_cgroup_root
  # The kubelet makes /var/lib/kubelet/device-plugins whatever its root dir: remember
  # whether we made it, so down removes it only then.
  [[ -e /var/lib/kubelet || -e $LK_RUN/pids/kubelet.pid ]] || touch "$LK_RUN/created-var-lib-kubelet"
  lk_link_seccomp_dir
  lk_restart_if_changed kubelet "$LK_RUN/kubelet/config.yaml"
  lk_restart_if_changed kube-proxy "$LK_RUN/kube-proxy.yaml"
  lk_start kubelet "$LK_BIN/kubelet" --config "$LK_RUN/kubelet/config.yaml" \
    --kubeconfig "$LK_RUN/kubeconfigs/kubelet.conf" \
    --root-dir "$LK_RUN/kubelet/root" --cert-dir "$LK_RUN/kubelet/pki" \
    --hostname-override "$LK_NODE_NAME" --node-ip "$LK_NODE_IP"
  lk_start kube-proxy "$LK_BIN/kube-proxy" --config "$LK_RUN/kube-proxy.yaml"
  lk_start provisioner "$LK_HERE/provisioner.sh" "$LK_BIN/kubectl" \
    "$LK_RUN/kubeconfigs/provisioner.conf" "$LK_RUN/volumes" "$LK_STORAGE_CLASS"
  lk_wait 60 kubelet "$LK_RUN/logs/kubelet.log" lk_health kubelet
  lk_wait 60 kube-proxy "$LK_RUN/logs/kube-proxy.log" lk_health kube-proxy
  lk_start_kube_router
}

# NetworkPolicy, enforced as on a real cluster: kube-router's firewall alone, over our bridge
# (pods' traffic crosses iptables through br_netfilter). Pods without a policy are untouched.
lk_start_kube_router() {
  lk_start kube-router "$LK_BIN/kube-router" --kubeconfig "$LK_KUBECONFIG" \
    --hostname-override "$LK_NODE_NAME" --run-firewall=true --run-router=false \
    --run-service-proxy=false --enable-cni=false --enable-ipv6=false \
    --health-port "$LK_KUBE_ROUTER_HEALTH_PORT" --metrics-port 0
  lk_wait 60 kube-router "$LK_RUN/logs/kube-router.log" lk_health kube-router
}

lk_node_ready() {
  lk_kubectl get node "$LK_NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -x True >/dev/null
}

# A DNS answer through the kube-dns Service, asked from this host. After a restart from old
# state the Deployment reads Available from its old pod's status before the new pod serves.
lk_dns_answers() {
  python3 - "$LK_DNS_IP" "kubernetes.default.svc.$LK_CLUSTER_DOMAIN" <<'PY'
import random
import socket
import struct
import sys

server, name = sys.argv[1], sys.argv[2]
ident = random.randrange(65536)
labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
query = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(">HH", 1, 1)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    sock.settimeout(2)
    sock.sendto(query, (server, 53))
    reply = sock.recv(512)
reply_id, flags, _, answers = struct.unpack(">HHHH", reply[:8])
sys.exit(0 if reply_id == ident and flags & 0xF == 0 and answers > 0 else 1)
PY
}

lk_apply_addons() {
  lk_render_addons | lk_kubectl apply --server-side --force-conflicts -f - >/dev/null
}

lk_up() {
  lk_build_locked lk_build
  lk_prepare_host
  mkdir -p "$LK_RUN"/{pids,logs,volumes}
  lk_network_up
  lk_pki
  lk_write_configs
  lk_start_etcd
  lk_start_apiserver
  lk_start_controllers
  lk_start_containerd
  lk_import_builtin_images
  lk_start_node
  lk_wait 120 "node $LK_NODE_NAME" "$LK_RUN/logs/kubelet.log" lk_node_ready
  lk_apply_addons
  lk_wait 120 "CoreDNS" "$LK_RUN/logs/kubelet.log" \
    lk_kubectl -n kube-system wait --for=condition=Available deploy/coredns --timeout=5s
  lk_wait 120 "DNS through the kube-dns Service" "$LK_RUN/logs/kubelet.log" lk_dns_answers
  lk_log "cluster is up; kubeconfig: $LK_KUBECONFIG"
  echo "$LK_KUBECONFIG"
}

# --- images -------------------------------------------------------------------------------

lk_import_image() {
  (($# > 0)) || lk_die "usage: localkube.sh import-image IMAGE..."
  lk_health containerd || lk_die "containerd is not running: localkube.sh up first"
  local img
  for img in "$@"; do
    lk_log "importing $img"
    if [[ -f $img ]]; then
      lk_ctr images import "$img" # a docker-save or OCI archive
    else
      docker save "$img" | lk_ctr images import -
    fi
  done
}

# One up/down/import-image at a time on this machine: several test sessions may call us, a down
# racing an up leaves orphans, and containerd refuses a second import of content another import
# is writing. The lock fd is closed in every component we start. Builds have their own lock
# (lk_build_locked).
lk_lock() {
  mkdir -p "$LK_CACHE"
  exec 9>"$LK_CACHE/lock"
  flock -w 3600 9 || lk_die "another localkube up, down or import held the lock for an hour"
}

main() {
  local cmd=${1:-}
  shift || true
  case $cmd in up | down | import-image) lk_lock ;; esac
  case $cmd in
  build) lk_build_locked lk_build ;;
  up) lk_up ;;
  down) lk_down ;;
  status) lk_status ;;
  import-image) lk_import_image "$@" ;;
  images) lk_ctr images ls -q ;;
  kubeconfig) echo "$LK_KUBECONFIG" ;;
  env)
    # shellcheck disable=SC2016 # $PATH is for the caller's shell to expand
    printf 'export KUBECONFIG=%q\nexport PATH=%q:"$PATH"\n' "$LK_KUBECONFIG" "$LK_BIN"
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
  esac
}

# Sourcing (for tests and debugging) defines the functions without running anything.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
