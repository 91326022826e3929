# shellcheck shell=bash
# Build (or fetch) the Kubernetes binaries kind's node image is made of, into $KB_BIN (keyed by
# version). Sourced by build-env.sh; uses its variables (KB_*) and log helpers.

GO="${GO:-/usr/local/go/bin/go}"

# The Kubernetes server components, built from k8s.io/kubernetes sources. kubectl too:
# the host's kubectl may be older than the server.
KB_K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)

# Nice (KUBERNETES_BUILD_NICE, default 10: the CPU is shared with other engineers; tests/run gives 0,
# the build being on its critical path) and a bounded parallelism: -p 2 keeps the peak memory
# of concurrent links under ~4 GiB. Go's module and build caches live in the project cache,
# not in $HOME.
KB_GO_CACHE="$KB_CACHE/go"
kb_go() {
  nice -n "${KUBERNETES_BUILD_NICE:-10}" env GOFLAGS="-mod=mod -p=2" CGO_ENABLED=0 GOTOOLCHAIN=local GOPATH="$KB_GO_CACHE/path" \
    GOMODCACHE="$KB_GO_CACHE/path/pkg/mod" GOCACHE="$KB_GO_CACHE/build" "$GO" "$@"
}

# A wrapper module: `go install k8s.io/kubernetes/...@v` refuses modules with replace
# directives, and k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with
# local directories. We require it and pin every staging module to the matching v0.x.
# kb_write_wrapper_module DIR VERSION COMMAND...
kb_write_wrapper_module() {
  local dir=$1 ver=$2 staging_ver="v0.${2#v1.}"
  shift 2
  mkdir -p "$dir"
  kb_go mod download -json "k8s.io/kubernetes@$ver" >"$dir/download.json" || return 1
  local gomod
  gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$dir/download.json")
  {
    echo "module slurmkube.build"
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
kb_go_build_in() {
  local dir=$1 ldflags=$2
  shift 2
  cd "$dir" && kb_go mod tidy && mkdir -p out && kb_go build -trimpath -ldflags "$ldflags" -o out/ "$@"
}

# Build Kubernetes $KUBERNETES_VERSION commands into DEST, unless all are there.
# kb_build_k8s_commands DEST COMMAND...
kb_build_k8s_commands() {
  local dest=$1 ver=$KUBERNETES_VERSION
  shift
  local work="$KB_CACHE/build/kubernetes-$ver"
  [[ $* == "${KB_K8S_COMMANDS[*]}" ]] || work+="-$(printf '%s-' "$@" | sed 's/-$//')"
  local missing=0 c
  for c in "$@"; do [[ -x $dest/$c ]] || missing=1; done
  ((missing)) || return 0
  kb_log "building Kubernetes $ver ($*); this takes many minutes"
  progress_run "downloading the Kubernetes $ver module" "$KB_CACHE/logs/build-kubernetes.log" \
    kb_write_wrapper_module "$work" "$ver" "$@" || kb_die "cannot fetch Kubernetes $ver"
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
  progress_run "building Kubernetes $ver ($*)" "$KB_CACHE/logs/build-kubernetes.log" \
    kb_go_build_in "$work" "$ldflags" "${pkgs[@]}" || kb_die "the Kubernetes build failed"
  mkdir -p "$dest"
  for c in "$@"; do install -m 0755 "$work/out/$c" "$dest/$c"; done
}

kb_build_kubernetes() {
  kb_build_k8s_commands "$KB_BIN" "${KB_K8S_COMMANDS[@]}"
}

# go install into GOBIN=$1, outside any module (the progress_run subshell changes directory).
kb_go_install_to() {
  local gobin=$1
  shift
  cd / || return 1
  GOBIN="$gobin" kb_go install "$@"
}

# CoreDNS with the plugins of coredns/main.go (not all of CoreDNS's: their libraries were most
# of its build). Built again when that list or the version changes.
kb_build_coredns() {
  local main="$KB_HERE/coredns/main.go" stamp
  stamp="$COREDNS_VERSION $(sha256sum <"$main" | cut -c1-12)"
  [[ -x $KB_BIN/coredns && $(cat "$KB_BIN/coredns.source" 2>/dev/null) == "$stamp" ]] && return 0
  kb_log "building CoreDNS $COREDNS_VERSION"
  local work="$KB_CACHE/build/coredns-$COREDNS_VERSION"
  rm -rf "$work"
  mkdir -p "$work" "$KB_BIN"
  cp "$main" "$work/main.go"
  printf 'module slurmkube.build/coredns\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' \
    "$COREDNS_VERSION" >"$work/go.mod"
  progress_run "building CoreDNS $COREDNS_VERSION" "$KB_CACHE/logs/build-coredns.log" \
    kb_go_build_in "$work" "-s -w" . || kb_die "the CoreDNS build failed"
  install -m 0755 "$work/out/coredns" "$KB_BIN/coredns"
  echo "$stamp" >"$KB_BIN/coredns.source"
}

# kube-router, the kind nodes' network (tools/kind/manifests): routes between nodes and
# NetworkPolicy, so the product's policies (ingress and egress of the Slurm pods) are proven,
# not assumed. kind's own network, kindnetd, is not on the Go module proxy.
kb_build_kube_router() {
  [[ -x $KB_BIN/kube-router ]] && return 0
  kb_log "building kube-router $KUBE_ROUTER_VERSION"
  local gobin="$KB_CACHE/build/kube-router-$KUBE_ROUTER_VERSION"
  mkdir -p "$gobin" "$KB_BIN"
  progress_run "building kube-router $KUBE_ROUTER_VERSION" "$KB_CACHE/logs/build-kube-router.log" \
    kb_go_install_to "$gobin" -trimpath -ldflags "-s -w" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION" ||
    kb_die "the kube-router build failed"
  install -m 0755 "$gobin/kube-router" "$KB_BIN/kube-router"
}

# The Debian mirror's address comes from the host's apt sources (never from the repo).
kb_debian_mirror() {
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
  kb_die "no Debian mirror found in /etc/apt/sources.list*"
}

# Download one package of a Debian suite (main) and unpack it under $dest.
kb_fetch_deb() {
  local suite=$1 pkg=$2 dest=$3 mirror
  local idx="$KB_CACHE/build/Packages-$suite"
  mirror=$(kb_debian_mirror)
  mkdir -p "$KB_CACHE/build" "$dest"
  if [[ ! -s $idx ]]; then
    curl -fsSL "$mirror/dists/$suite/main/binary-amd64/Packages.xz" | xz -d >"$idx.tmp"
    mv "$idx.tmp" "$idx"
  fi
  local path
  path=$(awk -v p="$pkg" '$1=="Package:" {cur=$2} $1=="Filename:" && cur==p {print $2; exit}' "$idx")
  [[ -n $path ]] || kb_die "package $pkg not found in $suite"
  local deb="$KB_CACHE/build/${path##*/}"
  [[ -s $deb ]] || curl -fsSL -o "$deb" "$mirror/$path"
  dpkg-deb -x "$deb" "$dest"
}

kb_fetch_etcd() {
  [[ -x $KB_BIN/etcd ]] && return 0
  kb_log "unpacking etcd from $KUBERNETES_DEB_SUITE"
  local d="$KB_CACHE/build/etcd-server"
  rm -rf "$d"
  kb_fetch_deb "$KUBERNETES_DEB_SUITE" etcd-server "$d"
  install -m 0755 "$d/usr/bin/etcd" "$KB_BIN/etcd"
}

# Write a docker-save archive of a one-layer image made from $rootfs, by hand: no registry
# and no docker engine are needed, and `kind load image-archive` reads it.
kb_write_image_tar() {
  local name=$1 rootfs=$2 config=$3 out=$4
  local d
  d=$(mktemp -d "$KB_CACHE/build/image.XXXXXX")
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

# A toolbox image (static busybox: sh, wget, nslookup, httpd, nc) for smoke tests and
# debugging pods, because nothing can be pulled here.
kb_build_toolbox_image() {
  local out="$KB_BIN/images/toolbox.tar"
  [[ -s $out ]] && return 0
  kb_log "building the toolbox image"
  local d="$KB_CACHE/build/toolbox"
  rm -rf "$d"
  mkdir -p "$d/deb" "$d/rootfs/bin" "$d/rootfs/tmp" "$d/rootfs/etc" "$KB_BIN/images"
  kb_fetch_deb "$KUBERNETES_DEB_SUITE" busybox-static "$d/deb"
  install -m 0755 "$d/deb/usr/bin/busybox" "$d/rootfs/bin/busybox"
  local applet
  for applet in $("$d/rootfs/bin/busybox" --list); do
    [[ $applet == busybox ]] || ln -sf busybox "$d/rootfs/bin/$applet"
  done
  chmod 1777 "$d/rootfs/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$d/rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/rootfs/etc/group"
  kb_write_image_tar "$KB_TOOLBOX_IMAGE" "$d/rootfs" \
    '{"Cmd":["/bin/sh"],"Env":["PATH=/bin"]}' "$out"
}

# Everything kind's node image takes from this build: the control plane, the node's kubelet
# and kubectl, etcd, CoreDNS and kube-router; and the toolbox image the tests' pods run.
kb_build() {
  mkdir -p "$KB_BIN"
  kb_fetch_etcd
  kb_build_toolbox_image
  kb_build_coredns
  kb_build_kube_router
  kb_build_kubernetes
  kb_log "binaries ready in $KB_BIN"
}
