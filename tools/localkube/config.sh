# shellcheck shell=bash
# Configuration files of containerd, CNI, kubelet and kube-proxy, and the addon objects.
# Written on every `up`, but only when the content changed: kube-proxy exits when its
# config file is touched.

# Files whose content changed during this run: their component is restarted.
LK_CHANGED_FILES=()

# lk_write_if_changed FILE < content
lk_write_if_changed() {
  local file=$1 tmp
  tmp=$(mktemp "$file.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$file"; then
    rm -f "$tmp"
  else
    [[ -e $file ]] && LK_CHANGED_FILES+=("$file")
    mv "$tmp" "$file"
  fi
}

# Stop a running component whose config file changed, so that up restarts it.
lk_restart_if_changed() {
  local name=$1 file=$2 f
  for f in "${LK_CHANGED_FILES[@]}"; do
    if [[ $f == "$file" ]] && lk_running "$name"; then
      lk_log "$name: $file changed, restarting"
      lk_stop "$name"
    fi
  done
  return 0
}

lk_write_containerd_config() {
  local c="$LK_RUN/containerd"
  mkdir -p "$c"
  lk_write_if_changed "$c/config.toml" <<EOF
# containerd of localkube: own root, state and socket (docker's containerd has no CRI).
version = 2
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$c/containerd.sock"

[ttrpc]
  address = "$c/containerd.sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$LK_PAUSE_IMAGE"
  # This machine lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Network namespaces under our state dir, not /var/run/netns: down removes them.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        # runc's state under ours (the default is /run/containerd/runc).
        Root = "$c/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$LK_BIN/cni"
    conf_dir = "$LK_RUN/cni/net.d"
    max_conf_num = 1
EOF
}

lk_write_cni_config() {
  mkdir -p "$LK_RUN/cni/net.d" "$LK_RUN/cni/ipam"
  lk_write_if_changed "$LK_RUN/cni/net.d/10-localkube.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "localkube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$LK_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$LK_RUN/cni/ipam",
        "ranges": [[{"subnet": "$LK_POD_CIDR", "gateway": "$LK_NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall"}
  ]
}
EOF
}

lk_write_kubelet_config() {
  local k="$LK_RUN/kubelet" p="$LK_RUN/pki"
  mkdir -p "$k/root" "$k/pki" "$k/volume-plugins" "$k/pod-logs"
  lk_write_if_changed "$k/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$LK_RUN/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $p/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $p/kubelet.crt
tlsPrivateKeyFile: $p/kubelet.key
address: $LK_NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDNS: [$LK_DNS_IP]
clusterDomain: $LK_CLUSTER_DOMAIN
resolvConf: /etc/resolv.conf
# No systemd, and this machine is cgroup v1 (kubelet >= 1.35 refuses v1 unless told).
cgroupDriver: cgroupfs
cgroupRoot: $LK_CGROUP_ROOT
failCgroupV1: false
failSwapOn: false
# Lowering an OOM score needs CAP_SYS_RESOURCE, which this machine lacks.
oomScoreAdj: 0
# A shared dev machine: evict only when really out of room; never GC imported images.
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 200
registerNode: true
# Keep the kubelet's files under our state dir (down removes it), not /usr/libexec, /var/log.
volumePluginDir: $k/volume-plugins
podLogsDir: $k/pod-logs
EOF
}

lk_write_kube_proxy_config() {
  lk_write_if_changed "$LK_RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $LK_RUN/kubeconfigs/kube-proxy.conf
mode: iptables
clusterCIDR: $LK_POD_CIDR
hostnameOverride: $LK_NODE_NAME
bindAddress: $LK_NODE_IP
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Raising the OOM score limit and conntrack sysctls need capabilities we lack.
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

lk_write_configs() {
  lk_write_containerd_config
  lk_write_cni_config
  lk_write_kubelet_config
  lk_write_kube_proxy_config
}

# The addons (CoreDNS, the RWX StorageClass), with this cluster's values filled in.
lk_render_addons() {
  sed -e "s|@DNS_IP@|$LK_DNS_IP|g" \
    -e "s|@CLUSTER_DOMAIN@|$LK_CLUSTER_DOMAIN|g" \
    -e "s|@COREDNS_IMAGE@|$LK_COREDNS_IMAGE|g" \
    -e "s|@STORAGE_CLASS@|$LK_STORAGE_CLASS|g" \
    "$LK_HERE/addons/coredns.yaml.in" "$LK_HERE/addons/storageclass.yaml.in"
}
