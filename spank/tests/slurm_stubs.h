/* What the test harness sets to play slurmstepd towards the plugin. */
#ifndef SLURMKUBE_SLURM_STUBS_H
#define SLURMKUBE_SLURM_STUBS_H

#include <slurm/spank.h>

extern spank_context_t stub_context; /* returned by spank_context() */
extern int stub_argc;                /* S_JOB_ARGV */
extern char **stub_argv;

#endif
