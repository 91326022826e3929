/*
 * Stand-ins for the part of Slurm's plugin API the jail plugin calls, so the
 * real plugin code runs in a test harness instead of slurmstepd. Logs go to
 * stderr prefixed with the Slurm function's name, for the tests to read.
 */
#include "slurm_stubs.h"

#include <stdarg.h>
#include <stdio.h>

spank_context_t stub_context = S_CTX_REMOTE;
int stub_argc;
char **stub_argv;
uid_t stub_uid = 1000;

int spank_remote(spank_t sp)
{
	(void) sp;
	return stub_context == S_CTX_REMOTE;
}

spank_context_t spank_context(void)
{
	return stub_context;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	int *argc;
	char ***argv;

	(void) sp;
	if (stub_context != S_CTX_REMOTE || (item != S_JOB_ARGV && item != S_JOB_UID))
		return ESPANK_NOT_AVAIL;
	va_start(ap, item);
	if (item == S_JOB_UID) {
		*va_arg(ap, uid_t *) = stub_uid;
	} else {
		argc = va_arg(ap, int *);
		argv = va_arg(ap, char ***);
		*argc = stub_argc;
		*argv = stub_argv;
	}
	va_end(ap);
	return ESPANK_SUCCESS;
}

static void stub_log(const char *level, const char *format, va_list ap)
{
	fprintf(stderr, "%s: ", level);
	vfprintf(stderr, format, ap);
	fputc('\n', stderr);
}

#define STUB_LOGGER(name)                      \
	void name(const char *format, ...)     \
	{                                      \
		va_list ap;                    \
		va_start(ap, format);          \
		stub_log(#name, format, ap);   \
		va_end(ap);                    \
	}

STUB_LOGGER(slurm_info)
STUB_LOGGER(slurm_error)
STUB_LOGGER(slurm_verbose)
STUB_LOGGER(slurm_debug)
STUB_LOGGER(slurm_debug2)
STUB_LOGGER(slurm_debug3)
