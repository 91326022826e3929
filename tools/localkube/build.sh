# shellcheck shell=bash
# Build (or fetch) every binary localkube runs, into $LK_BIN (keyed by version).
# Sourced by localkube.sh; uses its variables (LK_*) and log helpers.

GO="${GO:-/usr/local/go/bin/go}"

# The Kubernetes server components, built from k8s.io/kubernetes sources. kubectl too:
# the host's kubectl may be older than the server.
LK_K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)

# Nice (LOCALKUBE_NICE, default 10: the CPU is shared with other engineers; tests/run gives 0,
# the build being on its critical path) and a bounded parallelism: -p 2 keeps the peak memory
# of concurrent links under ~4 GiB. Go's module and build caches live in the project cache,
# not in $HOME.
LK_GO_CACHE="$LK_CACHE/go"
lk_go() {
  nice -n "${LOCALKUBE_NICE:-10}" env GOFLAGS="-mod=mod -p=2" CGO_ENABLED=0 GOTOOLCHAIN=local GOPATH="$LK_GO_CACHE/path" \
    GOMODCACHE="$LK_GO_CACHE/path/pkg/mod" GOCACHE="$LK_GO_CACHE/build" "$GO" "$@"
}

# A wrapper module: `go install k8s.io/kubernetes/...@v` refuses modules with replace
# directives, and k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with
# local directories. We require it and pin every staging module to the matching v0.x.
# lk_write_wrapper_module DIR VERSION COMMAND...
lk_write_wrapper_module() {
  local dir=$1 ver=$2 staging_ver="v0.${2#v1.}"
  shift 2
  mkdir -p "$dir"
  lk_go mod download -json "k8s.io/kubernetes@$ver" >"$dir/download.json" || return 1
  local gomod
  gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$dir/download.json")
  {
    echo "module localkube.build"
    echo
    echo "go 1.25.0"
    echo
    echo "require k8s.io/kubernetes $ver"
    echo
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging_ver"'#p' "$gomod"
  } >"$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "// Package tools pins the commands we build so that go mod tidy keeps their deps."
    echo "package tools"
    echo
    echo "import ("
    local c
    for c in "$@"; do
      echo "	_ \"k8s.io/kubernetes/cmd/$c\""
    done
    echo ")"
  } >"$dir/tools.go"
}

# One go build for all commands, in DIR's module: their shared packages compile once.
lk_go_build_in() {
  local dir=$1 ldflags=$2
  shift 2
  cd "$dir" && lk_go mod tidy && mkdir -p out && lk_go build -trimpath -ldflags "$ldflags" -o out/ "$@"
}

# Build Kubernetes $LK_K8S_VERSION commands into DEST, unless all are there.
# lk_build_k8s_commands DEST COMMAND...
lk_build_k8s_commands() {
  local dest=$1 ver=$LK_K8S_VERSION
  shift
  local work="$LK_CACHE/build/kubernetes-$ver"
  [[ $* == "${LK_K8S_COMMANDS[*]}" ]] || work+="-$(printf '%s-' "$@" | sed 's/-$//')"
  local missing=0 c
  for c in "$@"; do [[ -x $dest/$c ]] || missing=1; done
  ((missing)) || return 0
  lk_log "building Kubernetes $ver ($*); this takes many minutes"
  progress_run "downloading the Kubernetes $ver module" "$LK_CACHE/logs/build-kubernetes.log" \
    lk_write_wrapper_module "$work" "$ver" "$@" || lk_die "cannot fetch Kubernetes $ver"
  local minor=${ver#v1.}
  minor=${minor%%.*}
  local x=(
    "k8s.io/component-base/version.gitVersion=$ver"
    "k8s.io/component-base/version.gitMajor=1"
    "k8s.io/component-base/version.gitMinor=$minor"
    "k8s.io/component-base/version.gitTreeState=clean"
    "k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
    "k8s.io/client-go/pkg/version.gitVersion=$ver"
    "k8s.io/client-go/pkg/version.gitMajor=1"
    "k8s.io/client-go/pkg/version.gitMinor=$minor"
  )
  local ldflags="-s -w" v
  for v in "${x[@]}"; do ldflags+=" -X $v"; done
  local pkgs=()
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  progress_run "building Kubernetes $ver ($*)" "$LK_CACHE/logs/build-kubernetes.log" \
    lk_go_build_in "$work" "$ldflags" "${pkgs[@]}" || lk_die "the Kubernetes build failed"
  mkdir -p "$dest"
  for c in "$@"; do install -m 0755 "$work/out/$c" "$dest/$c"; done
}

lk_build_kubernetes() {
  lk_build_k8s_commands "$LK_BIN" "${LK_K8S_COMMANDS[@]}"
}

# go install into GOBIN=$1, outside any module (the progress_run subshell changes directory).
lk_go_install_to() {
  local gobin=$1
  shift
  cd / || return 1
  GOBIN="$gobin" lk_go install "$@"
}

# CoreDNS with the plugins of coredns/main.go (not all of CoreDNS's: their libraries were most
# of its build). Built again when that list or the version changes, and its image with it.
lk_build_coredns() {
  local main="$LK_HERE/coredns/main.go" stamp
  stamp="$LK_COREDNS_VERSION $(sha256sum <"$main" | cut -c1-12)"
  [[ -x $LK_BIN/coredns && $(cat "$LK_BIN/coredns.source" 2>/dev/null) == "$stamp" ]] && return 0
  lk_log "building CoreDNS $LK_COREDNS_VERSION"
  local work="$LK_CACHE/build/coredns-$LK_COREDNS_VERSION"
  rm -rf "$work"
  mkdir -p "$work" "$LK_BIN"
  cp "$main" "$work/main.go"
  printf 'module localkube.build/coredns\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' \
    "$LK_COREDNS_VERSION" >"$work/go.mod"
  progress_run "building CoreDNS $LK_COREDNS_VERSION" "$LK_CACHE/logs/build-coredns.log" \
    lk_go_build_in "$work" "-s -w" . || lk_die "the CoreDNS build failed"
  install -m 0755 "$work/out/coredns" "$LK_BIN/coredns"
  rm -f "$LK_BIN/images/coredns.tar"
  echo "$stamp" >"$LK_BIN/coredns.source"
}

# kube-router's network policy controller: the bridge CNI enforces no NetworkPolicy, and the
# product's policies (ingress and egress of the Slurm pods) must be proven, not assumed.
lk_build_kube_router() {
  [[ -x $LK_BIN/kube-router ]] && return 0
  lk_log "building kube-router $LK_KUBE_ROUTER_VERSION"
  local gobin="$LK_CACHE/build/kube-router-$LK_KUBE_ROUTER_VERSION"
  mkdir -p "$gobin" "$LK_BIN"
  progress_run "building kube-router $LK_KUBE_ROUTER_VERSION" "$LK_CACHE/logs/build-kube-router.log" \
    lk_go_install_to "$gobin" -trimpath -ldflags "-s -w" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$LK_KUBE_ROUTER_VERSION" ||
    lk_die "the kube-router build failed"
  install -m 0755 "$gobin/kube-router" "$LK_BIN/kube-router"
}

# The Debian mirror's address comes from the host's apt sources (never from the repo).
lk_debian_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    grep -qi 'debian-archive-keyring\|Suites:.*bookworm' "$f" || continue
    uri=$(awk '/^URIs:/ {print $2; exit}' "$f")
    if [[ $uri == */debian ]]; then echo "$uri"; return 0; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    uri=$(awk '$1 == "deb" && $2 ~ /\/debian$/ {print $2; exit}' "$f")
    if [[ -n $uri ]]; then echo "$uri"; return 0; fi
  done
  lk_die "no Debian mirror found in /etc/apt/sources.list*"
}

# Download one package of a Debian suite (main) and unpack it under $dest.
lk_fetch_deb() {
  local suite=$1 pkg=$2 dest=$3 mirror
  local idx="$LK_CACHE/build/Packages-$suite"
  mirror=$(lk_debian_mirror)
  mkdir -p "$LK_CACHE/build" "$dest"
  if [[ ! -s $idx ]]; then
    curl -fsSL "$mirror/dists/$suite/main/binary-amd64/Packages.xz" | xz -d >"$idx.tmp"
    mv "$idx.tmp" "$idx"
  fi
  local path
  path=$(awk -v p="$pkg" '$1=="Package:" {cur=$2} $1=="Filename:" && cur==p {print $2; exit}' "$idx")
  [[ -n $path ]] || lk_die "package $pkg not found in $suite"
  local deb="$LK_CACHE/build/${path##*/}"
  [[ -s $deb ]] || curl -fsSL -o "$deb" "$mirror/$path"
  dpkg-deb -x "$deb" "$dest"
}

lk_fetch_etcd_containerd() {
  if [[ ! -x $LK_BIN/etcd ]]; then
    lk_log "unpacking etcd from $LK_DEB_SUITE"
    local d="$LK_CACHE/build/etcd-server"
    rm -rf "$d"
    lk_fetch_deb "$LK_DEB_SUITE" etcd-server "$d"
    install -m 0755 "$d/usr/bin/etcd" "$LK_BIN/etcd"
  fi
  if [[ ! -x $LK_BIN/containerd ]]; then
    lk_log "unpacking containerd from $LK_DEB_SUITE"
    local d="$LK_CACHE/build/containerd"
    rm -rf "$d"
    lk_fetch_deb "$LK_DEB_SUITE" containerd "$d"
    local b
    for b in containerd containerd-shim-runc-v2 ctr; do
      install -m 0755 "$d/usr/bin/$b" "$LK_BIN/$b"
    done
  fi
}

# Write a docker-save archive of a one-layer image made from $rootfs, by hand: no registry
# and no docker engine are needed, and `ctr images import` reads it.
lk_write_image_tar() {
  local name=$1 rootfs=$2 config=$3 out=$4
  local d
  d=$(mktemp -d "$LK_CACHE/build/image.XXXXXX")
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$d/layer.tar" .
  local layer_sha cfg cfg_sha
  layer_sha=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
  cfg=$(printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$config" "$layer_sha")
  cfg_sha=$(printf '%s' "$cfg" | sha256sum | cut -d' ' -f1)
  mkdir -p "$d/image/$layer_sha"
  printf '%s' "$cfg" >"$d/image/$cfg_sha.json"
  mv "$d/layer.tar" "$d/image/$layer_sha/layer.tar"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' \
    "$cfg_sha" "$name" "$layer_sha" >"$d/image/manifest.json"
  tar -C "$d/image" -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$d"
}

# The sandbox ("pause") image: a static C program alone in its image.
lk_build_pause_image() {
  local out="$LK_BIN/images/pause.tar"
  [[ -s $out ]] && return 0
  lk_log "building the pause image"
  local d="$LK_CACHE/build/pause"
  rm -rf "$d"
  mkdir -p "$d/rootfs" "$LK_BIN/images"
  gcc -Os -static -o "$d/rootfs/pause" "$LK_HERE/pause.c"
  strip "$d/rootfs/pause"
  lk_write_image_tar "$LK_PAUSE_IMAGE" "$d/rootfs" '{"Entrypoint":["/pause"]}' "$out"
}

# CoreDNS alone in its image.
lk_build_coredns_image() {
  local out="$LK_BIN/images/coredns.tar"
  [[ -s $out ]] && return 0
  local d="$LK_CACHE/build/coredns-image"
  rm -rf "$d"
  mkdir -p "$d/rootfs" "$LK_BIN/images"
  install -m 0755 "$LK_BIN/coredns" "$d/rootfs/coredns"
  lk_write_image_tar "$LK_COREDNS_IMAGE" "$d/rootfs" '{"Entrypoint":["/coredns"]}' "$out"
}

# A toolbox image (static busybox: sh, wget, nslookup, httpd, nc) for smoke tests and
# debugging pods, because nothing can be pulled here.
lk_build_toolbox_image() {
  local out="$LK_BIN/images/toolbox.tar"
  [[ -s $out ]] && return 0
  lk_log "building the toolbox image"
  local d="$LK_CACHE/build/toolbox"
  rm -rf "$d"
  mkdir -p "$d/deb" "$d/rootfs/bin" "$d/rootfs/tmp" "$d/rootfs/etc" "$LK_BIN/images"
  lk_fetch_deb "$LK_DEB_SUITE" busybox-static "$d/deb"
  install -m 0755 "$d/deb/usr/bin/busybox" "$d/rootfs/bin/busybox"
  local applet
  for applet in $("$d/rootfs/bin/busybox" --list); do
    [[ $applet == busybox ]] || ln -sf busybox "$d/rootfs/bin/$applet"
  done
  chmod 1777 "$d/rootfs/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$d/rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/rootfs/etc/group"
  lk_write_image_tar "$LK_TOOLBOX_IMAGE" "$d/rootfs" \
    '{"Cmd":["/bin/sh"],"Env":["PATH=/bin"]}' "$out"
}

# CNI plugins from Debian (the host's suite: they are dynamically linked).
lk_fetch_cni_plugins() {
  [[ -x $LK_BIN/cni/bridge ]] && return 0
  lk_log "unpacking containernetworking-plugins from $LK_HOST_SUITE"
  local d="$LK_CACHE/build/cni"
  rm -rf "$d"
  lk_fetch_deb "$LK_HOST_SUITE" containernetworking-plugins "$d"
  mkdir -p "$LK_BIN/cni"
  local p
  for p in bridge host-local portmap firewall loopback; do
    install -m 0755 "$d/usr/lib/cni/$p" "$LK_BIN/cni/$p"
  done
}

lk_build() {
  mkdir -p "$LK_BIN"
  lk_fetch_etcd_containerd
  lk_fetch_cni_plugins
  lk_build_pause_image
  lk_build_toolbox_image
  lk_build_coredns
  lk_build_coredns_image
  lk_build_kube_router
  lk_build_kubernetes
  lk_log "binaries ready in $LK_BIN"
}
