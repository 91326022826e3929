#!/usr/bin/env bash
# Build every slurmkube image without a registry, in one command:
#
#   images/build.sh                 build what changed, print the tag manifest (JSON) on stdout
#   images/build.sh worker jail     build only these images (and what they are built from)
#   images/build.sh --print-tags    print the manifest the current sources would give; build nothing
#   images/build.sh --prune         after building all, remove this prefix's other tags
#
# The chain: a Debian trixie root made by debootstrap is `docker import`ed as
# slurmkube/rootfs; `base` is built FROM it; controller, worker, login and jail FROM base,
# each with the SPANK plugin copied out of the `spank-build` image (Slurm's clients load
# plugstack.conf too); jail-core is the jail without user software (images/jail/Dockerfile with
# JAIL_PACKAGES="python3 curl"); operator runs kopf with the collection; slurmdbd and mariadb (the
# accounting daemon and its in-cluster database), exporter (Prometheus, with the collection's
# metric families), backup (restic and the MariaDB client, spec.backup) and sssd (SSSD beside the
# containers that look users up, spec.directory) FROM base.
# Every tag is a hash of what the image is made of (its staged build context, the tags of
# the images it is built from, its build arguments), so an unchanged image is never
# rebuilt and a tag names one content. The newest build of each image (default Slurm series)
# is also tagged :latest, what the model's defaults name, and with the collection's version. The
# manifest of the last build is also written to $SLURMKUBE_CACHE/images.json.
#
# Environment:
#   SLURMKUBE_CACHE          cache outside the repository (default /var/cache/slurmkube)
#   SLURMKUBE_IMAGE_PREFIX   image name prefix (default slurmkube)
#   SLURMKUBE_DEBIAN_MIRROR  Debian mirror; default: the Debian entry of /etc/apt/sources.list*
#   SLURMKUBE_DEBIAN_SECURITY_MIRROR  its security archive; default: the mirror's URL + "-security"
#   SLURMKUBE_SPANK_SRC      SPANK plugin sources (default: spank/ of this checkout)
#   SLURMKUBE_SLURM_VERSION  Slurm release series: 26.05, the default and only one (images/slurm-release.sh)
set -euo pipefail

readonly SUITE=trixie
readonly ALL_IMAGES=(base spank-build controller worker login jail jail-core operator slurmdbd mariadb exporter
  prometheus backup sssd directory)
# Python of the images (trixie's): wheels are fetched for it.
readonly IMAGE_PYTHON=3.13

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
prefix="${SLURMKUBE_IMAGE_PREFIX:-slurmkube}"
spank_src="${SLURMKUBE_SPANK_SRC:-$repo/spank}"
dry_run=0
prune=0
staging="" # this run's build contexts, removed at exit
# Docker's classic builder is everywhere (the BuildKit client plugin is not); our Dockerfiles
# need nothing newer.
export DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}"

declare -A REF=()      # image name -> name:tag
declare -A BUILT=()    # image name -> 1 once handled in this run

log() { printf '[build.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# Before progress.sh: its relay (SLURMKUBE_PROGRESS_FILE) tags its own lines with it.
PROGRESS_TAG=build.sh
# shellcheck source=tools/progress.sh
. "$repo/tools/progress.sh"
# shellcheck source=images/slurm-release.sh
. "$here/slurm-release.sh"
die() { log "error: $*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# The folder an image is built from: its own, but jail-core is the jail's Dockerfile with
# JAIL_CORE_PACKAGES instead of the user software: Python (the long checks run in the jail) and
# curl (slurmrestd from jobs and from pods running the jail image).
readonly JAIL_CORE_PACKAGES="python3 curl"
folder_of() {
  case "$1" in
    jail-core) echo jail ;;
    *) echo "$1" ;;
  esac
}

# Parents of each image, in build order.
parents_of() {
  case "$1" in
    base) echo rootfs ;;
    spank-build | operator | slurmdbd | mariadb | exporter | prometheus | backup | sssd | directory) echo base ;;
    # Every image that runs srun/sbatch needs the plugin: the clients load plugstack.conf too.
    controller | worker | login | jail | jail-core) echo "base spank-build" ;;
    *) die "unknown image: $1 (known: ${ALL_IMAGES[*]})" ;;
  esac
}

# The Debian entry of the host's apt sources (deb822 or one-line format), never the
# Node.js/Google ones: its path ends in /debian.
debian_mirror() {
  if [[ -n "${SLURMKUBE_DEBIAN_MIRROR:-}" ]]; then
    echo "${SLURMKUBE_DEBIAN_MIRROR%/}"
    return
  fi
  local f uri
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [[ -f "$f" ]] || continue
    while read -r uri; do
      case "$uri" in
        */debian | */debian/)
          echo "${uri%/}"
          return
          ;;
      esac
    done < <(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }
                  /^deb[ \t]/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }' "$f")
  done
  die "no Debian mirror in /etc/apt/sources.list*; set SLURMKUBE_DEBIAN_MIRROR"
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# The OCI image-spec's labels, on every image. The collection's version is part of each tag (a
# release rebuilds them, so an image never claims a version it is not); the revision is the commit
# the image was first built from (an unchanged image is not rebuilt on the next commit), absent
# outside a git checkout (an installed collection); source only where galaxy.yml names a repository.
COLLECTION_VERSION="$(sed -n 's/^version:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$repo/galaxy.yml")"
COLLECTION_SOURCE="$(sed -n 's/^repository:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$repo/galaxy.yml")"
# Only this checkout's own: an installed collection may sit inside someone else's repository.
COLLECTION_REVISION=""
[[ ! -e $repo/.git ]] || COLLECTION_REVISION="$(git -C "$repo" rev-parse --verify -q HEAD 2>/dev/null || true)"
readonly COLLECTION_VERSION COLLECTION_SOURCE COLLECTION_REVISION
oci_labels() { # NAME
  printf -- '--label\n%s\n' "org.opencontainers.image.title=$prefix/$1" \
    "org.opencontainers.image.version=$COLLECTION_VERSION" \
    "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "org.opencontainers.image.licenses=GPL-3.0-or-later" "org.opencontainers.image.vendor=slurmkube"
  [[ -z $COLLECTION_REVISION ]] || printf -- '--label\n%s\n' "org.opencontainers.image.revision=$COLLECTION_REVISION"
  [[ -z $COLLECTION_SOURCE ]] || printf -- '--label\n%s\n' "org.opencontainers.image.source=$COLLECTION_SOURCE"
}

# Hash of a directory's files: relative path, executable bit and content (or link target).
hash_dir() {
  local dir="$1"
  (
    cd "$dir"
    find . \( -type f -o -type l \) -print0 | LC_ALL=C sort -z |
      while IFS= read -r -d '' p; do
        if [[ -L "$p" ]]; then
          printf 'L %s %s\n' "$p" "$(readlink "$p")"
        else
          printf 'F %s %s %s\n' "$p" "$([[ -x "$p" ]] && echo x || echo -)" "$(sha256sum <"$p" | cut -c1-64)"
        fi
      done
  ) | sha256sum | cut -c1-64
}

# The wheels of an image's requirements.txt, fetched on this host by pip (its ordinary
# client and settings: a docker build cannot reach an index behind a TLS-intercepting proxy)
# and cached by the file's hash, so later builds need no index at all.
fetch_wheels() {
  local req="$1" dest="$2" key dir tmp
  key="$(sha256sum <"$req" | cut -c1-12)"
  dir="$cache/wheels/cp${IMAGE_PYTHON/./}-$(uname -m)-$key"
  if [[ ! -d "$dir" ]]; then
    log "downloading wheels for $req"
    mkdir -p "$cache/wheels"
    tmp="$(mktemp -d "$dir.XXXXXX")"
    PIP_CACHE_DIR="$cache/pip" python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
      --python-version "$IMAGE_PYTHON" --implementation cp --abi "cp${IMAGE_PYTHON/./}" \
      --platform "manylinux_2_28_$(uname -m)" --platform "manylinux_2_17_$(uname -m)" \
      --platform "manylinux2014_$(uname -m)" -d "$tmp" -r "$req" >&2 ||
      die "pip download of $req failed"
    mv "$tmp" "$dir"
  fi
  cp -a "$dir" "$dest"
}

# The debootstrap root, cached as a tarball keyed by suite, mirror and the date of the
# mirror's Release file, imported as $prefix/rootfs:<suite>-<key>.
ensure_rootfs() {
  local mirror release_date key tarball ref tmp
  mirror="$(debian_mirror)"
  release_date="$(curl -fsSL --max-time 30 "$mirror/dists/$SUITE/Release" 2>/dev/null |
    sed -n 's/^Date: //p' | head -n1 || true)"
  if [[ -z "$release_date" ]]; then
    # Offline: the newest cached root of this suite and mirror still builds.
    tarball="$(find "$cache/rootfs" -name "$SUITE-*.tar" -printf '%T@ %p\n' 2>/dev/null |
      sort -rn | head -n1 | cut -d' ' -f2- || true)"
    [[ -n "$tarball" ]] || die "cannot read $mirror/dists/$SUITE/Release and no cached root"
    log "mirror unreachable; using cached root $tarball"
    key="$(basename "$tarball" .tar)"
    key="${key#"$SUITE"-}"
  else
    key="$(printf '%s|%s|%s' "$SUITE" "$mirror" "$release_date" | sha256sum | cut -c1-12)"
    tarball="$cache/rootfs/$SUITE-$key.tar"
  fi
  ref="$prefix/rootfs:$SUITE-$key"
  REF[rootfs]="$ref"
  MIRROR="$mirror"
  ((dry_run)) && return 0
  if [[ ! -f "$tarball" ]]; then
    [[ "$(id -u)" == 0 ]] || die "debootstrap needs root"
    command -v debootstrap >/dev/null || {
      log "installing debootstrap"
      bash "$here/../tools/apt-install.sh" debootstrap
    }
    mkdir -p "$cache/rootfs"
    tmp="$(mktemp -d "$cache/rootfs/debootstrap.XXXXXX")"
    log "debootstrap $SUITE from $mirror (Release of $release_date)"
    progress_run "debootstrap $SUITE" "$tmp.log" nice debootstrap --variant=minbase "$SUITE" "$tmp" "$mirror" ||
      die "debootstrap failed; log: $tmp.log"
    chmod 0755 "$tmp" # mktemp made it 0700; it becomes the image's /
    tar -C "$tmp" --numeric-owner -cf "$tmp.tar" .
    mv "$tmp.tar" "$tarball"
    rm -rf "$tmp" "$tmp.log"
  fi
  if ! image_exists "$ref"; then
    log "docker import $tarball -> $ref"
    docker import "$tarball" "$ref" >/dev/null
  fi
}

# The Debian version of Slurm the images get: the newest slurm-client of the series in the
# suite's package indexes (each read once per date of its Release file). It is pinned exactly
# in the images, named in their labels and part of their tags, so a new Debian patch of the
# series rebuilds them and every image of one build carries the same Slurm.
resolve_slurm_version() {
  local suite security version index
  suite="$(slurm_suite)" || exit 1
  security="${SLURMKUBE_DEBIAN_SECURITY_MIRROR:-$MIRROR-security}"
  version="$(
    for index in "$MIRROR $suite" "$MIRROR $suite-updates" "$security $suite-security"; do
      # shellcheck disable=SC2086 # two words: the archive and the suite
      slurm_versions_in $index
    done | awk -v series="$SLURM_SERIES." 'index($0, series) == 1' | sort -V | tail -n1
  )"
  [[ -n "$version" ]] || die "no Slurm $SLURM_SERIES in Debian $suite at $MIRROR (SLURMKUBE_SLURM_VERSION)"
  SLURM_DEB_VERSION="$version"
  SLURM_SUITE="$suite"
}

# Every version of slurm-client in one suite's index (none when the archive has no such suite,
# e.g. forky-security). Offline, the newest cached answer for that archive and suite.
slurm_versions_in() {
  local archive="$1" suite="$2" date key dir="$cache/slurm-versions" file
  date="$(curl -fsSL --max-time 30 "$archive/dists/$suite/Release" 2>/dev/null | sed -n 's/^Date: //p' | head -n1 || true)"
  if [[ -z "$date" ]]; then
    # SUITE.KEY: "forky.*" must not find forky-security's answers.
    file="$(find "$dir" -name "$suite.*" -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -n1 | cut -d' ' -f2- || true)"
    [[ -z "$file" ]] || cat "$file"
    return 0
  fi
  key="$(printf '%s|%s|%s' "$archive" "$suite" "$date" | sha256sum | cut -c1-12)"
  file="$dir/$suite.$key"
  if [[ ! -f "$file" ]]; then
    mkdir -p "$dir"
    curl -fsSL --max-time 300 "$archive/dists/$suite/main/binary-$(dpkg --print-architecture)/Packages.xz" |
      xz -d | awk '/^Package: / { p = ($2 == "slurm-client") } p && /^Version: / { print $2 }' >"$file.tmp" ||
      die "cannot read the package index of $suite at $archive"
    mv "$file.tmp" "$file"
  fi
  cat "$file"
}

# Shell twin of plugins/module_utils/constants.py (scalars only), so the entrypoints read
# paths, ports and variable names from the same single place as the renderers.
write_constants_sh() {
  python3 - "$repo/plugins/module_utils/constants.py" <<'EOF'
import runpy, shlex, sys
values = runpy.run_path(sys.argv[1])
print("# Generated by images/build.sh from plugins/module_utils/constants.py; do not edit.")
for name in sorted(values):
    value = values[name]
    if name.isupper() and isinstance(value, (str, int)) and not isinstance(value, bool):
        print("%s=%s" % (name, shlex.quote(str(value))))
EOF
}

# Copy a directory's contents (no Python caches), with extra tar options.
copy_tree() {
  local src="$1" dest="$2"
  shift 2
  mkdir -p "$dest"
  tar -C "$src" --exclude=__pycache__ --exclude='*.pyc' "$@" -cf - . | tar -C "$dest" -xf -
}

# The role entrypoints and shell library files (images/common/roles, images/common/lib) an
# image carries: only what its roles run. Its Dockerfile copies common/roles/ and common/lib/
# whole, so this is the one list.
shell_parts_of() {
  case "$1" in
    controller) echo lib/base.sh lib/munge.sh lib/slurm.sh roles/controller roles/preflight roles/rest ;;
    worker) echo lib/base.sh lib/munge.sh lib/slurm.sh lib/cgroups.sh roles/worker ;;
    login) echo lib/base.sh lib/munge.sh lib/slurm.sh roles/login roles/long-checks ;;
    slurmdbd) echo lib/base.sh lib/munge.sh lib/slurm.sh lib/database.sh roles/slurmdbd ;;
    mariadb) echo lib/base.sh lib/database.sh roles/database ;;
    backup) echo lib/base.sh lib/restic.sh roles/backup roles/restore ;;
    sssd) echo lib/base.sh roles/sssd ;;
    exporter) echo lib/base.sh lib/munge.sh roles/exporter ;;
  esac
}

stage_shell_parts() {
  local name="$1" ctx="$2" part
  mkdir -p "$ctx/common/lib" "$ctx/common/roles"
  for part in $(shell_parts_of "$name"); do
    cp -p "$here/common/$part" "$ctx/common/$part"
  done
}

# Copy what one image is built from into this run's staging dir: its folder, plus the
# shared scripts (images/common + constants.sh, the image's roles) or the SPANK sources.
stage_context() {
  local name="$1" ctx="$staging/$1"
  mkdir -p "$ctx"
  copy_tree "$here/$(folder_of "$name")" "$ctx"
  case "$name" in
    controller | worker | login | jail | jail-core)
      copy_tree "$here/common" "$ctx/common" --exclude=./lib --exclude=./roles
      stage_shell_parts "$name" "$ctx"
      write_constants_sh >"$ctx/common/constants.sh"
      # The node checks (standard library only) run on workers and, for long checks, in the jail.
      cp "$here/node/nodecheck.py" "$here/node/nccl_check.py" "$ctx/common/"
      ;;
    slurmdbd | mariadb | exporter | backup | sssd)
      mkdir -p "$ctx/common"
      cp "$here/common/slurmkube-entrypoint" "$ctx/common/"
      [[ "$name" == mariadb || "$name" == backup || "$name" == sssd ]] ||
        cp "$here/common/slurmkube-munge-key" "$ctx/common/"
      stage_shell_parts "$name" "$ctx"
      write_constants_sh >"$ctx/common/constants.sh"
      if [[ "$name" == exporter ]]; then
        mkdir -p "$ctx/collection"
        tar -C "$repo" --exclude=__pycache__ --exclude='*.pyc' -cf - galaxy.yml meta plugins |
          tar -C "$ctx/collection" -xf -
      fi
      ;;
    spank-build)
      mkdir -p "$ctx/src"
      if [[ -f "$spank_src/Makefile" ]]; then
        # What `make` needs: not the plugin's tests or docs (they would change the tags).
        copy_tree "$spank_src" "$ctx/src" --exclude=./build --exclude=./tests --exclude='*.md'
      else
        log "$spank_src/Makefile does not exist: worker and jail get no SPANK plugin"
      fi
      touch "$ctx/src/.staged"
      ;;
    operator)
      # The collection, importable as ansible_collections.slurmkube.core.
      mkdir -p "$ctx/collection"
      tar -C "$repo" --exclude=__pycache__ --exclude='*.pyc' -cf - galaxy.yml meta plugins |
        tar -C "$ctx/collection" -xf -
      fetch_wheels "$here/operator/requirements.txt" "$ctx/wheels"
      ;;
  esac
  echo "$ctx"
}

# The tags an image's newest build of the default Slurm series also gets: :latest (what the
# model's defaults name when spec.images leaves one out) and the collection's version (what
# images/push.sh pushes besides the content hash). Moved by each build; never pruned.
release_tags() { # NAME
  [[ $SLURM_SERIES == "$SLURM_SERIES_DEFAULT" ]] || return 0
  printf '%s\n' "$prefix/$1:latest" "$prefix/$1:$COLLECTION_VERSION"
}

tag_release() { # NAME REF
  local tag
  for tag in $(release_tags "$1"); do
    docker tag "$2" "$tag"
  done
}

build_image() {
  local name="$1" parent ctx tag ref
  [[ -n "${BUILT[$name]:-}" ]] && return 0
  local -a args=()
  for parent in $(parents_of "$name"); do
    if [[ "$parent" == rootfs ]]; then
      [[ -n "${REF[rootfs]:-}" ]] || ensure_rootfs
      [[ -n "${SLURM_DEB_VERSION:-}" ]] || resolve_slurm_version
      args+=(--build-arg "ROOTFS_IMAGE=${REF[rootfs]}" --build-arg "DEBIAN_MIRROR=$MIRROR"
        --build-arg "DEBIAN_SECURITY_MIRROR=${SLURMKUBE_DEBIAN_SECURITY_MIRROR:-$MIRROR-security}"
        --build-arg "SLURM_SUITE=$SLURM_SUITE" --build-arg "SLURM_PACKAGES=$(slurm_suite_packages)"
        --build-arg "SLURM_DEB_VERSION=$SLURM_DEB_VERSION")
    else
      build_image "$parent"
      args+=(--build-arg "$(echo "$parent" | tr 'a-z-' 'A-Z_')_IMAGE=${REF[$parent]}")
    fi
  done
  [[ "$name" == jail-core ]] && args+=(--build-arg "JAIL_PACKAGES=$JAIL_CORE_PACKAGES")
  ctx="$(stage_context "$name")"
  tag="$(printf '%s\n' "$(hash_dir "$ctx")" "${args[@]}" "version=$COLLECTION_VERSION" | sha256sum | cut -c1-12)"
  ref="$prefix/$name:$tag"
  REF[$name]="$ref"
  BUILT[$name]=1
  ((dry_run)) && return 0
  if image_exists "$ref"; then
    log "$ref is up to date"
    tag_release "$name" "$ref"
    return 0
  fi
  [[ "$name" == jail* ]] && args+=(--build-arg "SLURMKUBE_IMAGE_TAG=$tag")
  log "building $ref"
  local start=$SECONDS buildlog="$cache/logs/build-$name-$tag.$$.log"
  mkdir -p "$cache/logs"
  local -a labels
  mapfile -t labels < <(oci_labels "$name")
  if ! progress_run "building $ref" "$buildlog" nice docker build -t "$ref" --label "io.slurmkube.image=$name" \
    --label "io.slurmkube.content-hash=$tag" --label "io.slurmkube.slurm-version=$SLURM_DEB_VERSION" \
    "${labels[@]}" "${args[@]}" "$ctx"; then
    die "docker build of $name failed; full log: $buildlog"
  fi
  rm -f "$buildlog"
  tag_release "$name" "$ref"
  log "built $ref in $((SECONDS - start)) s"
}

manifest_json() {
  local name first=1
  printf '{'
  for name in rootfs "${ALL_IMAGES[@]}"; do
    [[ -n "${REF[$name]:-}" ]] || continue
    ((first)) || printf ','
    first=0
    printf '\n  "%s": "%s"' "$name" "${REF[$name]}"
  done
  printf '\n}\n'
}

main() {
  local -a wanted=()
  while (($#)); do
    case "$1" in
      --print-tags) dry_run=1 ;;
      --prune) prune=1 ;;
      -h | --help)
        usage
        return 0
        ;;
      -*) die "unknown option $1" ;;
      *) wanted+=("$1") ;;
    esac
    shift
  done
  ((${#wanted[@]})) || wanted=("${ALL_IMAGES[@]}")
  mkdir -p "$cache/contexts"
  # Per run, so that concurrent builds (tests, engineers) never share a build context.
  staging="$(mktemp -d "$cache/contexts/run.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  if ((!dry_run)); then
    bash "$here/ensure-docker.sh"
    # One build at a time: two runs filling the same rootfs or wheel cache corrupt it.
    exec 8>"$cache/build.lock"
    flock -w 3600 8 || die "another build.sh held $cache/build.lock for an hour"
  fi
  local name start=$SECONDS
  for name in "${wanted[@]}"; do
    build_image "$name"
  done
  # The manifest file always describes a complete set: written after full builds only.
  if ((!dry_run)) && [[ "${#wanted[@]}" == "${#ALL_IMAGES[@]}" ]]; then
    manifest_json >"$staging/images.json"
    mv "$staging/images.json" "$cache/images.json"
    log "done in $((SECONDS - start)) s; manifest: $cache/images.json"
  fi
  if ((prune && !dry_run)) && [[ "${#wanted[@]}" == "${#ALL_IMAGES[@]}" ]]; then
    prune_old_tags
  fi
  manifest_json
}

# Remove every $prefix/<image>:<tag> that the manifest does not name (layers still used by
# the current images stay).
prune_old_tags() {
  local ref name keep
  docker images --format '{{.Repository}}:{{.Tag}}' | grep "^$prefix/" | while read -r ref; do
    name="${ref#"$prefix"/}"
    name="${name%%:*}"
    keep="${REF[$name]:-}"
    if [[ -n "$keep" && "$ref" != "$keep" ]] && ! release_tags "$name" | grep -qxF "$ref"; then
      log "pruning $ref"
      docker rmi "$ref" >/dev/null || true
    fi
  done
}

main "$@"
