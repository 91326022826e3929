/*
 * Runs the real jail plugin the way slurmstepd does, without Slurm: a forked
 * "slurmstepd" calls slurm_spank_init and slurm_spank_init_post_opt, checks
 * its own view (--stepd-expect-*), then forks a "task" that calls
 * slurm_spank_task_init_privileged and checks from inside what a job would
 * see (--expect-*). Needs root (CAP_SYS_ADMIN); driven by
 * tests/spank/test_spank_namespace.py.
 *
 *   jail_harness [options] -- PLUGIN-WORDS...
 *     --cwd DIR              the task's cwd on the node before the plugin runs
 *     --argv0 PATH           the task's argv[0] (a batch script in the spool dir)
 *     --context remote|local spank context to play (local: srun in the jail)
 *     --uid N                the job's uid (S_JOB_UID; default 1000, 0: a root job)
 *     --deny-pivot-root      seccomp-deny pivot_root with EPERM, as Docker does
 *     --leak-dir DIR         open DIR as fd 9 without close-on-exec before the
 *                            plugin runs, as a careless slurmstepd might
 *     --no-test-namespace    skip the harness's own shared namespace (for runs
 *                            without CAP_SYS_ADMIN, where the plugin must fail)
 *     --expect-file PATH[=TEXT]  PATH exists (and starts with TEXT)
 *     --expect-absent PATH   PATH does not exist
 *     --expect-denied PATH   opening PATH fails with EACCES or EPERM
 *     --expect-cwd PATH      getcwd() is PATH
 *     --expect-proc          /proc belongs to this process's pid namespace
 *     --expect-readonly DIR / --expect-writable DIR   DIR's mount is read-only / not
 *     --expect-cap NAME / --expect-no-cap NAME   bounding set has / lacks NAME
 *     --expect-one-root      /proc/self/mountinfo has exactly one mount on "/"
 *                            (the node's root was detached, not stacked on the jail)
 *     --stepd-expect-...     any --expect-* check, made in "slurmstepd" instead
 *     --exec PATH ARG...     after the checks pass, exec PATH (inside the jail)
 *                            with the ARGs up to "--", as slurmstepd execs the job
 *
 * Before forking, the harness moves itself into a mount namespace whose "/"
 * is shared, like a systemd host's; if the plugin forgot to make its
 * namespace private, its mounts would show up here: the mount points it could
 * touch are compared before and after.
 * Prints "stepd ready" (or "stepd failed"), "entered" (or "enter failed"),
 * one line per check, and "host mounts unchanged: yes|no". Exit: 0 all good,
 * 1 a check failed, 2 the plugin refused, 3 the harness's mount table
 * changed, 64 usage.
 */
#include "jail_config.h"
#include "slurm_stubs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHECKS 64

enum check_kind { EXPECT_FILE, EXPECT_ABSENT, EXPECT_DENIED, EXPECT_CWD, EXPECT_PROC, EXPECT_READONLY,
		  EXPECT_WRITABLE, EXPECT_CAP, EXPECT_NO_CAP, EXPECT_ONE_ROOT };

struct check {
	enum check_kind kind;
	const char *arg;
	bool stepd; /* made in "slurmstepd", not in the task */
};

struct options {
	const char *cwd;
	const char *argv0;
	bool local_context;
	bool deny_pivot_root;
	bool no_test_namespace;
	const char *leak_dir;
	struct check checks[MAX_CHECKS];
	int nchecks;
	int plugin_argc;
	char **plugin_argv;
	char **exec_argv; /* NULL-terminated in place of the "--" that ends it */
};

static void usage(void)
{
	fprintf(stderr, "usage: jail_harness [options] -- PLUGIN-WORDS... (see the source)\n");
	exit(64);
}

static void add_check(struct options *o, enum check_kind kind, const char *arg, bool stepd)
{
	if (o->nchecks >= MAX_CHECKS)
		usage();
	o->checks[o->nchecks].kind = kind;
	o->checks[o->nchecks].arg = arg;
	o->checks[o->nchecks].stepd = stepd;
	o->nchecks++;
}

static const struct {
	const char *flag;
	enum check_kind kind;
} check_flags[] = {
	{ "--expect-file", EXPECT_FILE },     { "--expect-absent", EXPECT_ABSENT },
	{ "--expect-denied", EXPECT_DENIED },
	{ "--expect-cwd", EXPECT_CWD },       { "--expect-readonly", EXPECT_READONLY },
	{ "--expect-writable", EXPECT_WRITABLE },
	{ "--expect-cap", EXPECT_CAP },       { "--expect-no-cap", EXPECT_NO_CAP },
};

/* Options that take a value; returns 1 when argv[*i] was one of them. */
static int parse_valued(struct options *o, int argc, char **argv, int *i)
{
	const char *flag = argv[*i];
	bool stepd = strncmp(flag, "--stepd-", 8) == 0;
	size_t k;

	for (k = 0; k < sizeof(check_flags) / sizeof(check_flags[0]); k++) {
		/* "--stepd-expect-x" names the same check as "--expect-x" */
		if (strcmp(stepd ? flag + 8 : flag + 2, check_flags[k].flag + 2) == 0) {
			if (++*i >= argc)
				usage();
			add_check(o, check_flags[k].kind, argv[*i], stepd);
			return 1;
		}
	}
	if (strcmp(flag, "--cwd") && strcmp(flag, "--argv0") && strcmp(flag, "--context")
	    && strcmp(flag, "--leak-dir") && strcmp(flag, "--uid"))
		return 0;
	if (++*i >= argc)
		usage();
	if (strcmp(flag, "--uid") == 0)
		stub_uid = (uid_t) strtoul(argv[*i], NULL, 10);
	else if (strcmp(flag, "--leak-dir") == 0)
		o->leak_dir = argv[*i];
	else if (strcmp(flag, "--cwd") == 0)
		o->cwd = argv[*i];
	else if (strcmp(flag, "--argv0") == 0)
		o->argv0 = argv[*i];
	else
		o->local_context = strcmp(argv[*i], "local") == 0;
	return 1;
}

static void parse_options(struct options *o, int argc, char **argv)
{
	int i;

	memset(o, 0, sizeof(*o));
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			o->plugin_argc = argc - i - 1;
			o->plugin_argv = argv + i + 1;
			return;
		}
		if (strcmp(argv[i], "--exec") == 0) {
			o->exec_argv = argv + i + 1;
			while (i + 1 < argc && strcmp(argv[i + 1], "--") != 0)
				i++;
			if (i + 1 >= argc || o->exec_argv == argv + i + 1)
				usage();
			argv[i + 1] = NULL; /* the "--" ends exec_argv ... */
			o->plugin_argc = argc - i - 2;
			o->plugin_argv = argv + i + 2; /* ... and starts the plugin words */
			return;
		}
		if (strcmp(argv[i], "--deny-pivot-root") == 0)
			o->deny_pivot_root = true;
		else if (strcmp(argv[i], "--no-test-namespace") == 0)
			o->no_test_namespace = true;
		else if (strcmp(argv[i], "--expect-proc") == 0)
			add_check(o, EXPECT_PROC, NULL, false);
		else if (strcmp(argv[i], "--expect-one-root") == 0)
			add_check(o, EXPECT_ONE_ROOT, NULL, false);
		else if (!parse_valued(o, argc, argv, &i))
			usage();
	}
	usage();
}

/*
 * Docker's default seccomp profile answers pivot_root with EPERM; reproduce
 * exactly that for the chroot fallback test. (No arch check: the harness only
 * runs native binaries.)
 */
static void deny_pivot_root(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pivot_root, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("seccomp");
		exit(64);
	}
}

static int report(bool ok, const char *what, const char *arg)
{
	printf("check %s: %s %s\n", ok ? "ok" : "FAILED", what, arg ? arg : "");
	return ok ? 0 : 1;
}

static int check_file(const char *spec)
{
	char path[4096], buf[256];
	const char *eq = strchr(spec, '=');
	size_t plen = eq ? (size_t) (eq - spec) : strlen(spec);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%.*s", (int) plen, spec);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !eq) {
		if (fd >= 0)
			close(fd);
		return report(fd >= 0 || (errno == EISDIR), "file exists", path);
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return report(strncmp(buf, eq + 1, strlen(eq + 1)) == 0, "file content", spec);
}

static int check_denied(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int why = errno;

	if (fd >= 0)
		close(fd);
	printf("open %s: %s\n", path, fd >= 0 ? "opened" : strerror(why));
	return report(fd < 0 && (why == EACCES || why == EPERM), "denied", path);
}

static int check_proc(void)
{
	char link[64], want[32];
	ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);

	link[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "%d", (int) getpid());
	return report(strcmp(link, want) == 0, "/proc/self is our pid", want);
}

/* Asked of the mount, so the check writes nothing (DIR may be the node's own root). */
static int check_readonly(const char *dir, bool want)
{
	struct statvfs sv;
	int ro = statvfs(dir, &sv) == 0 ? !!(sv.f_flag & ST_RDONLY) : -1;

	return report(ro == (want ? 1 : 0), want ? "read-only" : "writable", dir);
}

static int check_cap(const char *name, bool want)
{
	int cap = jail_cap_from_name(name);
	int has = cap >= 0 ? prctl(PR_CAPBSET_READ, cap, 0, 0, 0) : -1;

	return report(has == (want ? 1 : 0), want ? "bounding set has" : "bounding set lacks", name);
}

/* Mount entries whose mount point (field 5 of mountinfo) is "/". */
static int check_one_root(void)
{
	char line[4096], point[4096];
	int roots = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 && strcmp(point, "/") == 0)
			roots++;
	}
	if (f)
		fclose(f);
	printf("mounts on /: %d\n", roots);
	return report(roots == 1, "one mount on /", NULL);
}

static int run_check(const struct check *c)
{
	char cwd[4096];
	struct stat st;

	switch (c->kind) {
	case EXPECT_FILE:
		return check_file(c->arg);
	case EXPECT_ABSENT:
		return report(lstat(c->arg, &st) < 0 && errno == ENOENT, "absent", c->arg);
	case EXPECT_DENIED:
		return check_denied(c->arg);
	case EXPECT_CWD:
		if (!getcwd(cwd, sizeof(cwd)))
			snprintf(cwd, sizeof(cwd), "(getcwd: %s)", strerror(errno));
		printf("cwd: %s\n", cwd);
		return report(strcmp(cwd, c->arg) == 0, "cwd is", c->arg);
	case EXPECT_PROC:
		return check_proc();
	case EXPECT_READONLY:
		return check_readonly(c->arg, true);
	case EXPECT_WRITABLE:
		return check_readonly(c->arg, false);
	case EXPECT_CAP:
		return check_cap(c->arg, true);
	case EXPECT_NO_CAP:
		return check_cap(c->arg, false);
	case EXPECT_ONE_ROOT:
		return check_one_root();
	}
	return 1;
}

/* A node directory on fd 9, inheritable across exec. */
static int leak_directory(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	if (fd < 0 || dup2(fd, 9) < 0) {
		perror(path);
		return -1;
	}
	if (fd != 9)
		close(fd);
	return 0;
}

static int run_checks(const struct options *o, bool stepd)
{
	int failed = 0, i;

	for (i = 0; i < o->nchecks; i++) {
		if (o->checks[i].stepd == stepd)
			failed |= run_check(&o->checks[i]);
	}
	return failed;
}

/* The forked task: what slurmstepd's child does, then the checks. */
static int run_task(const struct options *o)
{
	int failed;

	if (o->leak_dir && leak_directory(o->leak_dir) < 0)
		return 64;
	if (slurm_spank_task_init_privileged(NULL, o->plugin_argc, o->plugin_argv) < 0) {
		printf("enter failed\n");
		return 2;
	}
	printf("entered\n");
	failed = run_checks(o, false);
	if (failed || !o->exec_argv)
		return failed;
	fflush(stdout);
	execv(o->exec_argv[0], o->exec_argv);
	printf("exec %s: %s\n", o->exec_argv[0], strerror(errno));
	return 1;
}

/* "slurmstepd": init and init_post_opt, its own checks, then one task. */
static int run_stepd(const struct options *o)
{
	static char *argv0[] = { "/bin/true", NULL };
	int failed, status;
	pid_t pid;

	stub_context = o->local_context ? S_CTX_LOCAL : S_CTX_REMOTE;
	if (o->argv0)
		argv0[0] = (char *) o->argv0;
	stub_argv = argv0;
	stub_argc = 1;
	if (o->deny_pivot_root)
		deny_pivot_root();
	if (slurm_spank_init(NULL, o->plugin_argc, o->plugin_argv) < 0
	    || slurm_spank_init_post_opt(NULL, o->plugin_argc, o->plugin_argv) < 0) {
		printf("stepd failed\n");
		return 2;
	}
	printf("stepd ready\n");
	/* slurmstepd chdirs to the job's cwd after spank_init, before forking the tasks */
	if (o->cwd && chdir(o->cwd) < 0) {
		perror(o->cwd);
		return 64;
	}
	failed = run_checks(o, true);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int rc = run_task(o);

		fflush(stdout);
		_exit(rc);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return 64;
	return WEXITSTATUS(status) ? WEXITSTATUS(status) : failed;
}

/* Is `path` `dir` itself or below it? */
static bool is_within(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	return strncmp(dir, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * The mount points the plugin could change if it leaked: "/", the jail, the
 * spool dir, /tmp, the mirrors and hidden paths. Mounts elsewhere come and go
 * with the machine's other work (docker, kubelet) and are not compared.
 */
static bool plugin_could_touch(const struct jail_config *cfg, const char *point)
{
	const char *fixed[] = { cfg->jail, cfg->spool, "/tmp" };
	size_t i;

	if (strcmp(point, "/") == 0)
		return true;
	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (is_within(fixed[i], point))
			return true;
	}
	for (i = 0; i < cfg->mirrors.n; i++) {
		if (is_within(cfg->mirrors.paths[i], point))
			return true;
	}
	for (i = 0; i < cfg->hide.n; i++) {
		if (is_within(cfg->hide.paths[i], point))
			return true;
	}
	return false;
}

/* The lines of /proc/self/mountinfo whose mount point (field 5) the plugin could touch. */
static char *read_mountinfo(const struct jail_config *cfg)
{
	static char line[8192];
	char point[4096];
	size_t len = 0, cap = 1 << 16;
	char *out = malloc(cap);
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f || !out)
		return NULL;
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);

		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1
		    || !plugin_could_touch(cfg, point))
			continue;
		if (len + n + 1 > cap && !(out = realloc(out, cap *= 2)))
			break;
		memcpy(out + len, line, n + 1);
		len += n;
	}
	fclose(f);
	return out;
}

/* Does `text` hold the line line[0..len) (newline included)? */
static bool has_line(const char *text, const char *line, size_t len)
{
	while (*text) {
		const char *end = strchr(text, '\n');
		size_t n = end ? (size_t) (end - text + 1) : strlen(text);

		if (n == len && memcmp(text, line, len) == 0)
			return true;
		text += n;
	}
	return false;
}

/* Each line of `a` missing from `b`, prefixed with "mount <mark> ". */
static void print_missing_lines(const char *a, const char *b, char mark)
{
	while (*a) {
		const char *end = strchr(a, '\n');
		size_t len = end ? (size_t) (end - a + 1) : strlen(a);

		if (!has_line(b, a, len))
			printf("mount %c %.*s", mark, (int) len, a);
		a += len;
	}
}

/*
 * A throwaway namespace with "/" shared, so propagation leaks from the plugin
 * become visible here. Made private first: new peer groups of its own, so
 * mounts others make on the machine meanwhile (docker, kubelet) stay out.
 */
static void enter_shared_test_namespace(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
	    || mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL) < 0) {
		perror("harness namespace (needs root with CAP_SYS_ADMIN)");
		exit(64);
	}
}

static void print_changed_lines(const char *before, const char *after)
{
	if (!before || !after)
		return;
	print_missing_lines(before, after, '-');
	print_missing_lines(after, before, '+');
}

int main(int argc, char **argv)
{
	static struct options o;
	static struct jail_config cfg;
	char *before, *after;
	char err[512];
	int status, rc;
	pid_t pid;

	parse_options(&o, argc, argv);
	jail_config_defaults(&cfg);
	if (jail_config_parse(&cfg, o.plugin_argc, o.plugin_argv, err, sizeof(err)) < 0)
		jail_config_defaults(&cfg); /* the plugin refuses these words; compare the defaults */
	if (!o.no_test_namespace)
		enter_shared_test_namespace();
	before = read_mountinfo(&cfg);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 64;
	}
	if (pid == 0) {
		rc = run_stepd(&o);
		fflush(stdout);
		_exit(rc);
	}
	if (waitpid(pid, &status, 0) < 0) {
		perror("waitpid");
		return 64;
	}
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 64;
	after = read_mountinfo(&cfg);
	if (!before || !after || strcmp(before, after) != 0) {
		print_changed_lines(before, after);
		printf("host mounts unchanged: no\n");
		return rc ? rc : 3;
	}
	printf("host mounts unchanged: yes\n");
	return rc;
}
