/*
 * What one task needs mounted and where it should start: the configured
 * binds plus this job's and this step's own spool directories, and the job's working directory
 * translated to its path inside the jail. Pure (no I/O), so unit-tested.
 */
#ifndef SLURMKUBE_JAIL_PLAN_H
#define SLURMKUBE_JAIL_PLAN_H

#include "jail_config.h"

/* Internal flag: the source is Slurm's, not the admin's; never follow a link in it. */
#define JAIL_BIND_SRC_NOFOLLOW (1u << 8)

/* The step's own directories below the spool dir: mpi/pmix's and the OCI container's. */
#define JAIL_PLAN_MAX_STEP_DIRS 2

struct jail_plan {
	/* the configured binds, the spool dir's tmpfs, the job dir, the step dirs */
	struct jail_bind binds[JAIL_MAX_BINDS + 2 + JAIL_PLAN_MAX_STEP_DIRS];
	size_t nbinds;
	char cwd[PATH_MAX]; /* where the task starts inside the jail */
};

/*
 * The directory of this job below the spool dir (e.g. /var/spool/slurmd/job00042)
 * when argv0 (the batch script slurmstepd will exec) lies in one; that
 * directory, not the whole spool dir, is bound, because the spool dir also
 * holds slurmstepd's sockets, which trust uid 0. Returns 1 and fills out,
 * or 0 when argv0 is not a script in the spool dir.
 *
 * jail_plan_build puts a private tmpfs over the spool dir inside the jail
 * first: the job dir's mount point is then made there, not on the shared
 * volume (which would collect one empty directory per job, forever).
 */
int jail_plan_job_spool_dir(const char *spool, const char *argv0, char *out, size_t outlen);

/*
 * The directory mpi/pmix's server keeps for this step below the spool dir
 * (<spool>/pmix.<job>.<step>, printed as Slurm prints it, ids as signed ints).
 * It holds what the step's MPI ranks open (the PMIx server's tmpdir: its
 * rendezvous and shared-memory data store), so the ranks, inside the jail,
 * must see it at the same path. Returns 1 and fills out, 0 if it does not fit.
 */
int jail_plan_pmix_dir(const char *spool, unsigned job_id, unsigned step_id, char *out, size_t outlen);

/*
 * The directory slurmstepd makes for a step run in an OCI container (srun
 * --container, oci.conf without ContainerPath), named as Slurm names it:
 * <spool>/oci-job<job>-<step>, with "batch", "interactive" or "extern" for
 * those steps. slurmstepd makes it on the node before the tasks start; each
 * task, inside the jail, makes its own directory in it and writes there the
 * environment file the container runtime reads. Returns 1, or 0 if it does
 * not fit.
 */
int jail_plan_oci_dir(const char *spool, unsigned job_id, unsigned step_id, char *out, size_t outlen);

/*
 * The task's working directory inside the jail for node path host_cwd: below
 * the jail mount it is the path relative to the jail; below a bind source it
 * is the same place under the bind's target (longest source wins); otherwise
 * the same path, which is then looked up in the jail (the shared root is what
 * the user saw when submitting). A node directory is never bound just because
 * it is the cwd: that would let a root job chdir the node's secrets into view.
 */
void jail_plan_cwd(const struct jail_bind *binds, size_t nbinds, const char *jail,
		   const char *host_cwd, char *out, size_t outlen);

/*
 * Build the plan for one task (argv0 and host_cwd may be NULL). The step's
 * own directories (step_dirs, at most JAIL_PLAN_MAX_STEP_DIRS: PMIx's, the
 * OCI container's) are bound when they exist (optional: only MPI steps and
 * container steps have them), below the same private tmpfs as the job's
 * spool dir; one that is not strictly below the spool dir is ignored.
 */
void jail_plan_build(const struct jail_config *cfg, const char *host_cwd, const char *argv0,
		     const char *const *step_dirs, size_t nstep_dirs, struct jail_plan *plan);

/*
 * One line of /proc/self/mountinfo: the mount point (octal escapes such as
 * \040 decoded) and the file system type. Returns 0, or -1 for a line that
 * does not parse or does not fit.
 */
int jail_parse_mountinfo(const char *line, char *mount_point, size_t mplen, char *fstype, size_t fslen);

/*
 * Whether a root job's slurmstepd must see this mount of the node read-only.
 * Every mount is, except: the writable places of the step (the spool dir, the
 * jail, /tmp, the jail's directories mirrored over the node's), the kernel's own trees (/proc, /sys, /dev: what is read-only
 * there already stays so), cgroup file systems (slurmstepd makes the job's
 * cgroups there) and the source of every bind the job gets writable. A mount
 * on a file (the pod's /etc/hosts, /dev/termination-log) is read-only unless it
 * lies in the step's writable places or is itself a writable bind's source.
 */
bool jail_plan_stepd_readonly(const struct jail_config *cfg, const char *mount_point, const char *fstype,
			      bool is_file);

#endif
