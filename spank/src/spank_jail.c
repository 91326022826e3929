/*
 * slurmkube's jail SPANK plugin: every task of every job runs with the shared
 * jail as "/". The glue to Slurm only: the work is in jail_config (arguments),
 * jail_plan (what to bind, where to start) and jail_enter (system calls).
 *
 * Callback choice: slurm_spank_task_init_privileged runs in the forked task,
 * still root, before slurmstepd drops privileges and execs the job. Entering
 * the jail there affects only the task; slurmstepd itself stays on the node
 * with its spool dir, sockets and cgroups. There is deliberately no user
 * option to skip the jail.
 *
 * Failures return -1, not an ESPANK_* code: Slurm stops only on a negative
 * return, and only for a plugin marked "required" in plugstack.conf.
 */
#include "jail_config.h"
#include "jail_enter.h"
#include "jail_plan.h"

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

/* Only the symbols Slurm looks up are exported; the rest is -fvisibility=hidden. */
#pragma GCC visibility push(default)

SPANK_PLUGIN(slurmkube_jail, 1);

/*
 * Parsed afresh by each callback from the words it is given. Static and
 * shared: the PATH_MAX-sized tables do not belong on slurmstepd's stack, and
 * the callbacks never run concurrently in one process.
 */
static struct jail_config config;
static struct jail_plan plan;

/* Defaults plus the plugstack.conf words into `config`; -1 (logged) if they are bad. */
static int load_config(int ac, char **av)
{
	char err[512];

	jail_config_defaults(&config);
	if (jail_config_parse(&config, ac, av, err, sizeof(err)) < 0) {
		slurm_error("spank_jail: bad plugstack.conf arguments: %s", err);
		return -1;
	}
	return 0;
}

/*
 * Validate the arguments where a mistake should stop the daemon early (slurmd
 * start) or the step (slurmstepd); clients (srun, sbatch in the jail) load
 * the same plugstack.conf and are left alone.
 */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();

	(void) sp;
	if (ctx != S_CTX_REMOTE && ctx != S_CTX_SLURMD)
		return ESPANK_SUCCESS;
	return load_config(ac, av) < 0 ? -1 : ESPANK_SUCCESS;
}

/*
 * In slurmstepd, before it opens the job's stdio files and forks the tasks:
 * its own namespace with the jail's mirrors, and for root jobs a read-only
 * node root with the secrets hidden (see jail_confine_stepd). Only the tasks
 * enter the jail: slurmstepd, still holding every capability, must not load
 * nsswitch modules or plugins that root in the jail could have planted.
 */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	uid_t uid = 0; /* unknown counts as root: the stricter confinement */
	char err[1024];

	if (!spank_remote(sp))
		return ESPANK_SUCCESS;
	if (load_config(ac, av) < 0)
		return -1;
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		uid = 0;
	if (jail_confine_stepd(&config, uid == 0, err, sizeof(err)) < 0) {
		slurm_error("spank_jail: cannot prepare slurmstepd: %s", err);
		return -1;
	}
	return ESPANK_SUCCESS;
}

/* argv[0] of the task: for a batch step, the script in the slurmd spool dir. */
static const char *task_argv0(spank_t sp)
{
	char **argv = NULL;
	int argc = 0;

	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv)
		return NULL;
	return argv[0];
}

/*
 * This step's own directories in the spool dir, whether or not the step uses
 * them: mpi/pmix's and the OCI container's (srun --container). Returns how
 * many; none if the step is unknown.
 */
static size_t step_dirs(spank_t sp, char out[JAIL_PLAN_MAX_STEP_DIRS][PATH_MAX])
{
	uint32_t job_id = 0, step_id = 0;
	size_t n = 0;

	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS)
		return 0;
	n += (size_t) jail_plan_pmix_dir(config.spool, job_id, step_id, out[n], PATH_MAX);
	n += (size_t) jail_plan_oci_dir(config.spool, job_id, step_id, out[n], PATH_MAX);
	return n;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	char cwd[PATH_MAX], dirs[JAIL_PLAN_MAX_STEP_DIRS][PATH_MAX];
	const char *step[JAIL_PLAN_MAX_STEP_DIRS];
	char err[1024];
	size_t i, n;

	if (!spank_remote(sp))
		return ESPANK_SUCCESS;
	if (load_config(ac, av) < 0)
		return -1;
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	n = step_dirs(sp, dirs);
	for (i = 0; i < n; i++)
		step[i] = dirs[i];
	jail_plan_build(&config, cwd, task_argv0(sp), step, n, &plan);
	if (jail_enter(&config, &plan, err, sizeof(err)) < 0) {
		slurm_error("spank_jail: cannot enter the jail: %s", err);
		return -1;
	}
	slurm_debug("spank_jail: task runs in jail %s", config.jail);
	return ESPANK_SUCCESS;
}

#pragma GCC visibility pop
