/*
 * Moving the calling process into the jail: a private mount namespace, the
 * node-local binds, pivot_root (or, when the container's seccomp profile
 * refuses it, chroot), fewer capabilities, and the job's cwd.
 *
 * This code needs no Slurm runtime: it only logs through slurm_info() and
 * slurm_debug(), which slurmstepd provides to plugins and the test harness
 * stubs, so the real system calls are tested outside Slurm.
 */
#ifndef SLURMKUBE_JAIL_ENTER_H
#define SLURMKUBE_JAIL_ENTER_H

#include "jail_config.h"
#include "jail_plan.h"

/*
 * Enter the jail described by cfg with the binds and cwd of plan. Only the
 * calling process (and its future children) is affected; the node's mount
 * table is untouched. Returns 0, or -1 with a message in err; after a failure
 * the process may be half-way in and must not run the job.
 */
int jail_enter(const struct jail_config *cfg, const struct jail_plan *plan, char *err,
	       size_t errlen);

/*
 * Give the calling slurmstepd a private mount namespace (its tasks inherit it)
 * in which the jail's `mirrors` are bound at the same node paths, so the
 * job's cwd and the --input/--output/--error files slurmstepd opens on the
 * node are the jail's. For a root job (root_job), the node's root is also
 * read-only there (the spool dir, the jail and /tmp stay writable) and the
 * `hide` paths are covered, so `sbatch -i /etc/slurmkube/munge/munge.key`
 * reads nothing. Returns 0, or -1 with a message in err.
 */
int jail_confine_stepd(const struct jail_config *cfg, bool root_job, char *err, size_t errlen);

#endif
