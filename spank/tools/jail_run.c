/*
 * slurmkube-jail-run: run a program inside the jail exactly as a root job's
 * task runs -- its own mount namespace, pivot_root into the jail (chroot only
 * where seccomp refuses pivot_root), the jail plugin's capability drop, no new
 * privileges -- so root's tools of the jail (useradd, usermod, a shell reading
 * /etc/passwd) never run as the container's root. Whatever root in the jail
 * planted there (a trojaned useradd, /etc/ld.so.preload) then runs with no
 * more power than a root job has. The same code as the plugin enters the jail.
 *
 *   slurmkube-jail-run [PLUGSTACK-WORD...] -- PROGRAM [ARG...]
 *
 * Words are the plugin's (jail=/mnt/jail, drop_caps=..., ...); PROGRAM is
 * looked up in the jail's PATH. Exit 125 when the jail cannot be entered,
 * 127 when PROGRAM cannot be run, else PROGRAM's status.
 */
#include "jail_config.h"
#include "jail_enter.h"
#include "jail_plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define EXIT_CANNOT_ENTER 125
#define EXIT_CANNOT_RUN 127

/* What slurmstepd gives the plugin; here, errors and notices on stderr, debug dropped. */
static void say(const char *format, va_list ap)
{
	fputs("slurmkube-jail-run: ", stderr);
	vfprintf(stderr, format, ap);
	fputc('\n', stderr);
}

void slurm_info(const char *format, ...);
void slurm_error(const char *format, ...);
void slurm_debug(const char *format, ...);

void slurm_info(const char *format, ...)
{
	va_list ap;

	va_start(ap, format);
	say(format, ap);
	va_end(ap);
}

void slurm_error(const char *format, ...)
{
	va_list ap;

	va_start(ap, format);
	say(format, ap);
	va_end(ap);
}

void slurm_debug(const char *format, ...)
{
	(void) format;
}

static struct jail_config config;
static struct jail_plan plan;

int main(int argc, char **argv)
{
	char err[1024];
	int words = 1;

	while (words < argc && strcmp(argv[words], "--") != 0)
		words++;
	if (words + 1 >= argc) {
		fprintf(stderr, "usage: %s [PLUGSTACK-WORD...] -- PROGRAM [ARG...]\n", argv[0]);
		return 64;
	}
	jail_config_defaults(&config);
	if (jail_config_parse(&config, words - 1, argv + 1, err, sizeof(err)) < 0) {
		fprintf(stderr, "slurmkube-jail-run: %s\n", err);
		return 64;
	}
	jail_plan_build(&config, "/", NULL, NULL, 0, &plan);
	if (jail_enter(&config, &plan, err, sizeof(err)) < 0) {
		fprintf(stderr, "slurmkube-jail-run: cannot enter the jail: %s\n", err);
		return EXIT_CANNOT_ENTER;
	}
	/* Whatever setuid= says: the jail's admin tools never gain privileges by exec. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		fprintf(stderr, "slurmkube-jail-run: no_new_privs: %s\n", strerror(errno));
		return EXIT_CANNOT_ENTER;
	}
	execvp(argv[words + 1], argv + words + 1);
	fprintf(stderr, "slurmkube-jail-run: %s in the jail: %s\n", argv[words + 1], strerror(errno));
	return EXIT_CANNOT_RUN;
}
