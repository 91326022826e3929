#!/bin/sh
# Writes apt's sources and pins for the images' Slurm:
#   slurm-apt-sources.sh MIRROR SUITE VERSION [PACKAGE-PATTERN...]
# Slurm's source package is pinned to VERSION. When SUITE is not trixie (26.05: forky), the
# packages matching the patterns (libraries Slurm needs newer than trixie's) come from SUITE
# too and nothing else does (priority -1), so apt never drifts the images onto testing.
set -eu
mirror="$1" suite="$2" version="$3"
shift 3
prefs=/etc/apt/preferences.d/slurmkube-slurm
printf 'Package: src:slurm-wlm\nPin: version %s\nPin-Priority: 1001\n' "$version" >"$prefs"
[ "$suite" = trixie ] && exit 0
# Check-Valid-Until: no because images are also built from mirrors that are snapshots (a
# testing suite's Release is valid for a week); the archive's signature is still checked.
printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nCheck-Valid-Until: no\nSigned-By: %s\n' \
  "$mirror" "$suite" /usr/share/keyrings/debian-archive-keyring.gpg >"/etc/apt/sources.list.d/$suite.sources"
printf '\nPackage: *\nPin: release n=%s\nPin-Priority: -1\n' "$suite" >>"$prefs"
[ "$#" -eq 0 ] || printf '\nPackage: %s\nPin: release n=%s\nPin-Priority: 990\n' "$*" "$suite" >>"$prefs"
