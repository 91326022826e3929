/*
 * slurmkube-complete-job: end a job whose work ran outside Slurm (the bridge's external jobs,
 * which hold Kubernetes pods' resources) with the exit code that work ended with, as salloc ends
 * its allocation: COMPLETED for 0, FAILED otherwise, and the code in sacct's ExitCode. No Slurm
 * command does this (scancel leaves CANCELLED, which says nothing of how the pods ended).
 *
 *   slurmkube-complete-job JOBID EXITCODE
 *
 * Only the job's owner or root may (slurmctld checks). Exit 0 when slurmctld took it, 1 with
 * Slurm's message when it refused (the job unknown, or already ended), 2 on bad arguments.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#define EXIT_REFUSED 1
#define EXIT_USAGE 2

/* A decimal number in [MIN, MAX], the whole word; else -1. */
static long long parse_number(const char *word, long long min, long long max)
{
	char *end = NULL;
	long long value;

	errno = 0;
	value = strtoll(word, &end, 10);
	if (errno || end == word || *end || value < min || value > max)
		return -1;
	return value;
}

/* A wait(2) status of a program that exited with CODE: what slurmctld records as the exit code. */
static uint32_t exit_status(long long code)
{
	return (uint32_t)code << 8;
}

static int complete_job(uint32_t job_id, uint32_t status)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
	slurm_step_id_t step = { .job_id = job_id, .step_het_comp = NO_VAL, .step_id = NO_VAL };

	return slurm_complete_job(&step, status);
#else
	return slurm_complete_job(job_id, status);
#endif
}

int main(int argc, char **argv)
{
	long long job_id, code;

	if (argc != 3) {
		fprintf(stderr, "usage: slurmkube-complete-job JOBID EXITCODE\n");
		return EXIT_USAGE;
	}
	job_id = parse_number(argv[1], 1, UINT32_MAX - 1);
	code = parse_number(argv[2], 0, 255);
	if (job_id < 0 || code < 0) {
		fprintf(stderr, "slurmkube-complete-job: JOBID must be a job id and EXITCODE 0-255, not '%s' '%s'\n",
			argv[1], argv[2]);
		return EXIT_USAGE;
	}
	slurm_init(NULL);
	if (complete_job((uint32_t)job_id, exit_status(code)) != SLURM_SUCCESS) {
		fprintf(stderr, "slurmkube-complete-job: job %lld: %s\n", job_id, slurm_strerror(errno));
		slurm_fini();
		return EXIT_REFUSED;
	}
	slurm_fini();
	return 0;
}
