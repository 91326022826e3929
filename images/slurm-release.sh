# shellcheck shell=bash disable=SC2034  # read by the scripts that source this
# The Slurm the images carry: one setting, SLURMKUBE_SLURM_VERSION, a release series.
# Sourced by images/build.sh and spank/scripts/fetch-slurm-headers.sh (the SPANK plugin is
# built against the headers of the Slurm that loads it); the tests read SLURM_SERIES_DEFAULT.
#
#   26.05  the default. Debian ships it in forky and sid only; trixie has no backport, and the
#          source packages are not reachable from the machines that build here, so the images
#          stay trixie and take forky's binary packages of Slurm plus the libraries those need
#          newer than trixie's: hwloc 2.15 and llhttp 9.4, and for hwloc's plugins (Open MPI in
#          the jail loads them) level-zero 1.32 and libxml2-16. apt takes nothing else from forky.
#          Debian 26.05.5 builds no mpi/pmix plugin (Debian bug #1149781): MPI jobs start with
#          `srun --mpi=pmi2` (MPICH) or `mpirun` inside an allocation (Open MPI).
# 24.11 (trixie's own packages, out of SchedMD's support since 26.05) is no longer built: a cluster
# that runs it was made by release 0.3.0, whose own images tests/k8s/test_upgrade_from_release.py
# builds and upgrades from.

SLURM_SERIES_DEFAULT=26.05
SLURM_SERIES="${SLURMKUBE_SLURM_VERSION:-$SLURM_SERIES_DEFAULT}"

# The Debian suite that ships the series.
slurm_suite() {
  case "$SLURM_SERIES" in
    26.05) echo forky ;;
    *)
      echo "SLURMKUBE_SLURM_VERSION: unsupported Slurm series '$SLURM_SERIES' (supported: 26.05)" >&2
      return 1
      ;;
  esac
}

# What else comes from that suite, as apt preferences' Package patterns (src:NAME: every
# binary of a source package); everything else is trixie's.
slurm_suite_packages() {
  case "$SLURM_SERIES" in
    26.05) echo src:hwloc src:llhttp src:level-zero libxml2-16 ;;
    *) echo ;;
  esac
}
