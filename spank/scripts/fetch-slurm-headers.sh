#!/usr/bin/env bash
# Fetch Slurm's public headers (slurm/spank.h and friends) from Debian's
# libslurm-dev of the Slurm the images carry (images/slurm-release.sh: the
# series and the suite that ships it) into a cache outside the repository,
# and print the include directory to pass as SLURM_INCLUDE:
#
#   make -C spank SLURM_INCLUDE="$(spank/scripts/fetch-slurm-headers.sh)"
#
# Why: a SPANK plugin records the Slurm version it was built against
# (plugin_version) and slurmstepd refuses a plugin from another major.minor
# release, so the plugin must be built against the headers of the Slurm that
# runs it, whatever Debian release the build machine runs.
#
# apt does the download in a private state directory, so the suite's Release
# file is verified against the machine's Debian archive keyring and the
# machine's own apt state is never touched. The mirror is the one the machine
# already uses (read from its apt sources), never a hard-coded host.
#
# Environment:
#   SLURMKUBE_CACHE          cache root (default /var/cache/slurmkube)
#   SLURMKUBE_SLURM_VERSION  Slurm series (default: images/slurm-release.sh's)
#   DEBIAN_MIRROR            override the mirror URL read from the apt sources
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=images/slurm-release.sh
. "$here/../../images/slurm-release.sh"
suite="$(slurm_suite)"
cache="${SLURMKUBE_CACHE:-/var/cache/slurmkube}"
keyring="/usr/share/keyrings/debian-archive-keyring.gpg"
dest="${cache}/slurm-headers/${SLURM_SERIES}"

log() { printf 'fetch-slurm-headers: %s\n' "$*" >&2; }

# The first Debian archive URL (path ending in /debian) in the apt sources,
# deb822 (*.sources) or one-line (*.list) format.
debian_mirror() {
    local files=() f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] && files+=("$f")
    done
    [[ ${#files[@]} -gt 0 ]] || return 1
    {
        sed -n 's/^[[:space:]]*URIs:[[:space:]]*//p' "${files[@]}" | tr ' ' '\n'
        sed -n 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' "${files[@]}"
    } | grep -E '^https?://[^[:space:]]+/debian/?$' | head -n 1 | sed 's:/*$::'
}

if [[ -f "${dest}/usr/include/slurm/spank.h" ]]; then
    printf '%s\n' "${dest}/usr/include"
    exit 0
fi

mirror="${DEBIAN_MIRROR:-$(debian_mirror || true)}"
if [[ -z "${mirror}" ]]; then
    log "no Debian mirror found in /etc/apt/sources*; set DEBIAN_MIRROR"
    exit 1
fi
[[ -f "${keyring}" ]] || { log "missing ${keyring} (apt-get install debian-archive-keyring)"; exit 1; }

mkdir -p "${cache}/slurm-headers"
work="$(mktemp -d "${cache}/slurm-headers/.work.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${work}/lists/partial" "${work}/archives/partial" "${work}/parts" "${work}/deb"
printf 'deb [signed-by=%s] %s %s main\n' "${keyring}" "${mirror}" "${suite}" >"${work}/sources.list"

apt_opts=(
    -o "Dir::Etc::SourceList=${work}/sources.list"
    -o "Dir::Etc::SourceParts=${work}/parts"
    -o "Dir::State::Lists=${work}/lists"
    -o "Dir::Cache=${work}"
    -o "Dir::Cache::archives=${work}/archives"
    -o "APT::Sandbox::User=root"
    -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
    -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
    -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
    -o "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false"
    -o "Acquire::Languages=none"
    # As in the images: a testing suite's Release from a snapshot mirror is past its Valid-Until.
    -o "Acquire::Check-Valid-Until=false"
)
log "downloading libslurm-dev from ${mirror} ${suite}"
apt-get "${apt_opts[@]}" -qq update >&2
(cd "${work}/deb" && apt-get "${apt_opts[@]}" -qq download libslurm-dev >&2)

shopt -s nullglob
debs=("${work}"/deb/libslurm-dev_*.deb)
[[ ${#debs[@]} -eq 1 ]] || { log "expected one libslurm-dev .deb, got ${#debs[@]}"; exit 1; }
[[ "$(basename "${debs[0]}")" == libslurm-dev_"${SLURM_SERIES}".* ]] ||
    { log "${suite} has $(basename "${debs[0]}"), not Slurm ${SLURM_SERIES}"; exit 1; }
dpkg-deb -x "${debs[0]}" "${work}/root"
[[ -f "${work}/root/usr/include/slurm/spank.h" ]] || { log "spank.h not in ${debs[0]}"; exit 1; }

# Publish atomically so a concurrent run never sees a half-extracted tree.
mkdir -p "${work}/publish/usr"
mv "${work}/root/usr/include" "${work}/publish/usr/include"
printf '%s\n' "$(basename "${debs[0]}")" >"${work}/publish/SOURCE"
rm -rf "${dest}"
mv "${work}/publish" "${dest}"
log "headers of $(cat "${dest}/SOURCE") in ${dest}/usr/include"
printf '%s\n' "${dest}/usr/include"
