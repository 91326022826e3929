/* What the test harness sets to play slurmstepd towards the plugin. */
#ifndef SLURMKUBE_SLURM_STUBS_H
#define SLURMKUBE_SLURM_STUBS_H

#include <sys/types.h>

#include <slurm/spank.h>

extern spank_context_t stub_context; /* returned by spank_context() */
extern int stub_argc;                /* S_JOB_ARGV */
extern char **stub_argv;
extern uid_t stub_uid;               /* S_JOB_UID */

#endif
