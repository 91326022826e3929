/*
 * Pure-logic tests of the jail plugin: argument parsing, path confinement,
 * the bind list and cwd of a task, and symlink-safe mount point creation
 * (in a temporary directory; no privileges needed).
 *
 * Output is TAP ("ok N - name" / "not ok N - name" plus "# why" lines), read
 * by tests/spank/test_spank_plugin.py; the exit status is 1 if any test fails.
 */
#include "jail_config.h"
#include "jail_path.h"
#include "jail_plan.h"

/* Slurm's step ids; slurm.h declares some callbacks without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <slurm/slurm.h>
#pragma GCC diagnostic pop

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int test_failed;
static int tests_run;
static int tests_failed;

static void check(int ok, const char *what, const char *file, int line)
{
	if (ok)
		return;
	test_failed = 1;
	printf("# %s:%d: check failed: %s\n", file, line, what);
}

#define CHECK(cond) check(!!(cond), #cond, __FILE__, __LINE__)
#define CHECK_STR(got, want) \
	check(strcmp((got), (want)) == 0, #got " == \"" want "\"", __FILE__, __LINE__)

static void run(const char *name, void (*fn)(void))
{
	test_failed = 0;
	fn();
	tests_run++;
	if (test_failed)
		tests_failed++;
	printf("%s %d - %s\n", test_failed ? "not ok" : "ok", tests_run, name);
	fflush(stdout);
}

/* ---- jail_path ---------------------------------------------------------- */

static int normalized(const char *in, char *out)
{
	return jail_path_normalize(in, out, PATH_MAX);
}

static void test_normalize_cleans_slashes_and_dots(void)
{
	char out[PATH_MAX];

	CHECK(normalized("/a//b/./c/", out) == 0);
	CHECK_STR(out, "/a/b/c");
	CHECK(normalized("/", out) == 0);
	CHECK_STR(out, "/");
	CHECK(normalized("///./", out) == 0);
	CHECK_STR(out, "/");
}

static void test_normalize_refuses_relative_and_dotdot(void)
{
	char out[PATH_MAX], small[8];

	errno = 0;
	CHECK(normalized("etc/slurm", out) < 0 && errno == EINVAL);
	CHECK(normalized("", out) < 0);
	CHECK(normalized("/mnt/jail/../../etc", out) < 0 && errno == EINVAL);
	CHECK(normalized("/a/..", out) < 0);
	CHECK(normalized("/a/..b", out) == 0); /* a name, not a parent reference */
	CHECK(jail_path_normalize("/abcdefgh", small, sizeof(small)) < 0 && errno == ENAMETOOLONG);
}

static void test_within_respects_component_boundaries(void)
{
	CHECK(jail_path_within("/mnt/jail", "/mnt/jail"));
	CHECK(jail_path_within("/mnt/jail", "/mnt/jail/home/alice"));
	CHECK(!jail_path_within("/mnt/jail", "/mnt/jailbreak"));
	CHECK(!jail_path_within("/mnt/jail", "/mnt"));
	CHECK(jail_path_within("/", "/anything"));
	CHECK_STR(jail_path_rest("/mnt/jail", "/mnt/jail/home"), "/home");
	CHECK_STR(jail_path_rest("/mnt/jail", "/mnt/jail"), "");
	CHECK_STR(jail_path_rest("/", "/home"), "/home");
}

/* A scratch directory standing in for the jail, plus one standing in for the node. */
struct scratch {
	char root[64];
	char jail[96];
	char outside[96];
	int jail_fd;
};

static void scratch_make(struct scratch *s)
{
	snprintf(s->root, sizeof(s->root), "/tmp/spank-unit.XXXXXX");
	if (!mkdtemp(s->root)) {
		perror("mkdtemp");
		exit(2);
	}
	snprintf(s->jail, sizeof(s->jail), "%s/jail", s->root);
	snprintf(s->outside, sizeof(s->outside), "%s/outside", s->root);
	mkdir(s->jail, 0755);
	mkdir(s->outside, 0755);
	s->jail_fd = open(s->jail, O_PATH | O_DIRECTORY);
}

static void scratch_remove(struct scratch *s)
{
	char cmd[128];

	close(s->jail_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", s->root);
}

static int exists(const char *dir, const char *rel)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return lstat(path, &st) == 0;
}

static void test_mount_point_created_inside_jail(void)
{
	struct scratch s;
	struct stat st;
	int fd;

	scratch_make(&s);
	fd = jail_open_mount_point(s.jail_fd, "/local/scratch", JAIL_NODE_DIR);
	CHECK(fd >= 0);
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK(exists(s.jail, "local/scratch"));
	close(fd);
	fd = jail_open_mount_point(s.jail_fd, "/etc/hosts", JAIL_NODE_FILE);
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	close(fd);
	fd = jail_open_mount_point(s.jail_fd, "/local/scratch", JAIL_NODE_DIR);
	CHECK(fd >= 0); /* existing directories are reused */
	close(fd);
	scratch_remove(&s);
}

static void test_mount_point_refuses_symlinked_directory(void)
{
	struct scratch s;
	char link[128];

	scratch_make(&s);
	/* root in the jail plants /evil -> the node's directory */
	snprintf(link, sizeof(link), "%s/evil", s.jail);
	CHECK(symlink(s.outside, link) == 0);
	errno = 0;
	CHECK(jail_open_mount_point(s.jail_fd, "/evil/target", JAIL_NODE_DIR) < 0);
	CHECK(errno == ELOOP);
	CHECK(!exists(s.outside, "target"));
	scratch_remove(&s);
}

static void test_mount_point_refuses_relative_symlink_escape(void)
{
	struct scratch s;
	char dir[128], link[160];

	scratch_make(&s);
	snprintf(dir, sizeof(dir), "%s/run", s.jail);
	mkdir(dir, 0755);
	snprintf(link, sizeof(link), "%s/run/munge", s.jail);
	CHECK(symlink("../../outside", link) == 0);
	errno = 0;
	CHECK(jail_open_mount_point(s.jail_fd, "/run/munge", JAIL_NODE_DIR) < 0 && errno == ELOOP);
	CHECK(jail_open_mount_point(s.jail_fd, "/run/munge/x", JAIL_NODE_DIR) < 0);
	CHECK(!exists(s.outside, "x"));
	scratch_remove(&s);
}

static void test_mount_point_refuses_symlinked_file(void)
{
	struct scratch s;
	char target[128], link[128];
	int fd;

	scratch_make(&s);
	snprintf(target, sizeof(target), "%s/secret", s.outside);
	fd = open(target, O_CREAT | O_WRONLY, 0600);
	close(fd);
	snprintf(link, sizeof(link), "%s/hosts", s.jail);
	CHECK(symlink(target, link) == 0);
	errno = 0;
	CHECK(jail_open_mount_point(s.jail_fd, "/hosts", JAIL_NODE_FILE) < 0 && errno == ELOOP);
	/* a dangling link must not be "created through" either */
	unlink(target);
	CHECK(jail_open_mount_point(s.jail_fd, "/hosts", JAIL_NODE_FILE) < 0 && errno == ELOOP);
	CHECK(!exists(s.outside, "secret"));
	scratch_remove(&s);
}

static void test_mount_point_kind_mismatch(void)
{
	struct scratch s;
	int fd;

	scratch_make(&s);
	fd = jail_open_mount_point(s.jail_fd, "/etc/resolv.conf", JAIL_NODE_FILE);
	close(fd);
	errno = 0;
	CHECK(jail_open_mount_point(s.jail_fd, "/etc/resolv.conf", JAIL_NODE_DIR) < 0);
	CHECK(errno == ENOTDIR);
	CHECK(jail_open_mount_point(s.jail_fd, "/etc", JAIL_NODE_FILE) < 0 && errno == EISDIR);
	CHECK(jail_open_mount_point(s.jail_fd, "/etc/../x", JAIL_NODE_DIR) < 0 && errno == EINVAL);
	scratch_remove(&s);
}

static void test_open_existing_creates_nothing(void)
{
	struct scratch s;
	char link[128];
	int fd;

	scratch_make(&s);
	errno = 0;
	CHECK(jail_open_existing(s.jail_fd, "/home", JAIL_NODE_DIR) < 0 && errno == ENOENT);
	CHECK(!exists(s.jail, "home"));
	snprintf(link, sizeof(link), "%s/home", s.jail);
	CHECK(symlink(s.outside, link) == 0);
	CHECK(jail_open_existing(s.jail_fd, "/home", JAIL_NODE_DIR) < 0 && errno == ELOOP);
	unlink(link);
	mkdir(link, 0755);
	fd = jail_open_existing(s.jail_fd, "/home", JAIL_NODE_DIR);
	CHECK(fd >= 0);
	close(fd);
	scratch_remove(&s);
}

/* ---- jail_config -------------------------------------------------------- */

static const struct jail_bind *bind_to(const struct jail_config *cfg, const char *dst)
{
	size_t i;

	for (i = 0; i < cfg->nbinds; i++) {
		if (strcmp(cfg->binds[i].dst, dst) == 0)
			return &cfg->binds[i];
	}
	return NULL;
}

static int parse(struct jail_config *cfg, char *err, int argc, char **argv)
{
	jail_config_defaults(cfg);
	err[0] = '\0';
	return jail_config_parse(cfg, argc, argv, err, 512);
}

#define CAP_BIT(c) (UINT64_C(1) << (c))

static void test_defaults_match_constants(void)
{
	static struct jail_config cfg;
	const struct jail_bind *b;

	jail_config_defaults(&cfg);
	CHECK_STR(cfg.jail, "/mnt/jail");
	CHECK_STR(cfg.marker, ".slurmkube-jail");
	CHECK_STR(cfg.spool, "/var/spool/slurmd");
	CHECK(cfg.nbinds == 5);
	CHECK(bind_to(&cfg, "/proc") && bind_to(&cfg, "/sys") && bind_to(&cfg, "/dev"));
	b = bind_to(&cfg, "/etc/slurm");
	CHECK(b && (b->flags & JAIL_BIND_RO));
	b = bind_to(&cfg, "/run/munge");
	CHECK(b && !(b->flags & JAIL_BIND_RO));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_SYS_ADMIN));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_SYS_PTRACE));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_DAC_READ_SEARCH));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_SYS_NICE));
	CHECK(!(cfg.drop_caps & CAP_BIT(CAP_CHOWN)));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_SETUID));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_SETGID));
	CHECK(cfg.drop_caps & CAP_BIT(CAP_NET_RAW));
	CHECK(!(cfg.drop_caps & CAP_BIT(CAP_FOWNER)));
	CHECK(cfg.chroot_fallback);
	CHECK(!cfg.setuid);
	CHECK(cfg.mirrors.n == 2);
	CHECK_STR(cfg.mirrors.paths[0], "/home");
	CHECK_STR(cfg.mirrors.paths[1], "/root");
	CHECK(cfg.hide.n == 3);
	CHECK_STR(cfg.hide.paths[0], "/etc/slurmkube");
	CHECK_STR(cfg.hide.paths[1], "/etc/munge");
	CHECK_STR(cfg.hide.paths[2], "/var/lib/munge");
}

static void test_mirrors_and_hide_replace_their_defaults(void)
{
	static struct jail_config cfg;
	char err[512];
	char *argv[] = { "mirrors=/home,/data//", "hide=none" };

	CHECK(parse(&cfg, err, 2, argv) == 0);
	CHECK(cfg.mirrors.n == 2);
	CHECK_STR(cfg.mirrors.paths[1], "/data");
	CHECK(cfg.hide.n == 0);
}

static void test_parse_full_line(void)
{
	static struct jail_config cfg;
	char err[512];
	char *argv[] = {
		"jail=/srv/jail/", "marker=.m", "spool=/var/spool/slurmd2",
		"binds=/etc/hosts,/etc/resolv.conf:ro,/usr/lib/nvidia:ro:optional",
		"submounts=/scratch:/local/scratch,/dev/shm:/dev/shm:rw",
		"drop_caps=sys_admin,CAP_SYS_PTRACE", "chroot_fallback=no", "setuid=yes",
	};
	const struct jail_bind *b;

	CHECK(parse(&cfg, err, 8, argv) == 0);
	CHECK_STR(cfg.jail, "/srv/jail");
	CHECK_STR(cfg.marker, ".m");
	CHECK_STR(cfg.spool, "/var/spool/slurmd2");
	CHECK(cfg.nbinds == 5 + 3 + 2);
	b = bind_to(&cfg, "/etc/hosts");
	CHECK(b && strcmp(b->src, "/etc/hosts") == 0 && b->flags == 0);
	b = bind_to(&cfg, "/etc/resolv.conf");
	CHECK(b && b->flags == JAIL_BIND_RO);
	b = bind_to(&cfg, "/usr/lib/nvidia");
	CHECK(b && b->flags == (JAIL_BIND_RO | JAIL_BIND_OPTIONAL));
	b = bind_to(&cfg, "/local/scratch");
	CHECK(b && strcmp(b->src, "/scratch") == 0);
	CHECK(cfg.drop_caps == (CAP_BIT(CAP_SYS_ADMIN) | CAP_BIT(CAP_SYS_PTRACE)));
	CHECK(!cfg.chroot_fallback);
	CHECK(cfg.setuid);
	/* order is kept: built-ins first, then binds=, then submounts= */
	CHECK_STR(cfg.binds[0].dst, "/proc");
	CHECK_STR(cfg.binds[9].dst, "/dev/shm");
}

static void test_binds_replace_builtin_with_same_target(void)
{
	static struct jail_config cfg;
	char err[512];
	char *argv[] = { "binds=/etc/slurm:rw:optional", "submounts=/node/munge:/run/munge" };
	char *keep_ro[] = { "binds=/etc/slurm,/etc/hosts" };
	const struct jail_bind *b;

	CHECK(parse(&cfg, err, 2, argv) == 0);
	CHECK(cfg.nbinds == 5);
	b = bind_to(&cfg, "/etc/slurm");
	CHECK(b && b->flags == JAIL_BIND_OPTIONAL);
	b = bind_to(&cfg, "/run/munge");
	CHECK(b && strcmp(b->src, "/node/munge") == 0);
	/* naming a built-in again without ro/rw keeps it read-only */
	CHECK(parse(&cfg, err, 1, keep_ro) == 0);
	b = bind_to(&cfg, "/etc/slurm");
	CHECK(b && b->flags == JAIL_BIND_RO);
	CHECK(cfg.nbinds == 6);
}

static void test_drop_caps_none(void)
{
	static struct jail_config cfg;
	char err[512];
	char *argv[] = { "drop_caps=none" };

	CHECK(parse(&cfg, err, 1, argv) == 0);
	CHECK(cfg.drop_caps == 0);
	CHECK(jail_cap_from_name("cap_sys_admin") == CAP_SYS_ADMIN);
	CHECK(jail_cap_from_name("CHECKPOINT_RESTORE") == CAP_CHECKPOINT_RESTORE);
	CHECK(jail_cap_from_name("cap_nonsense") == -1);
}

/* Each bad word is refused, and the message names what was wrong. */
static void expect_refused(const char *word, const char *needle)
{
	static struct jail_config cfg;
	char err[512];
	char copy[256];
	char *argv[1] = { copy };

	snprintf(copy, sizeof(copy), "%s", word);
	if (parse(&cfg, err, 1, argv) == 0) {
		check(0, word, __FILE__, __LINE__);
		return;
	}
	if (!strstr(err, needle)) {
		printf("# '%s' -> '%s' (wanted '%s')\n", word, err, needle);
		check(0, "error message names the problem", __FILE__, __LINE__);
	}
}

static void test_bad_arguments_are_refused(void)
{
	expect_refused("disable=yes", "unknown option 'disable'");
	expect_refused("jail", "expected key=value");
	expect_refused("jail=mnt/jail", "absolute");
	expect_refused("jail=/", "would not isolate");
	expect_refused("jail=/mnt/../etc", "without '..'");
	expect_refused("marker=../x", "plain file name");
	expect_refused("spool=/", "not slurmd's spool dir");
	expect_refused("binds=/", "whole root");
	expect_refused("binds=/etc/x:rx", "unknown flag 'rx'");
	expect_refused("binds=relative", "absolute");
	expect_refused("submounts=/scratch", "HOST:JAILPATH");
	expect_refused("submounts=/scratch:/", "jail's root");
	expect_refused("submounts=/scratch:../x", "absolute");
	expect_refused("drop_caps=sys_admin,bogus", "unknown capability 'bogus'");
	expect_refused("chroot_fallback=maybe", "yes or no");
	expect_refused("setuid=allow", "setuid 'allow': expected yes or no");
	expect_refused("mirrors=/", "'/' is not allowed");
	expect_refused("hide=etc", "absolute");
}

static void test_too_many_binds_refused(void)
{
	static struct jail_config cfg;
	static char list[8192];
	char err[512];
	char *argv[1] = { list };
	size_t len = 0;
	int i;

	len += (size_t) snprintf(list, sizeof(list), "binds=");
	for (i = 0; i < JAIL_MAX_BINDS; i++)
		len += (size_t) snprintf(list + len, sizeof(list) - len, "/b%d,", i);
	CHECK(parse(&cfg, err, 1, argv) < 0);
	CHECK(strstr(err, "more than") != NULL);
}

/* ---- jail_plan ---------------------------------------------------------- */

static void test_job_spool_dir_only_own_job(void)
{
	char out[PATH_MAX];
	const char *spool = "/var/spool/slurmd";

	CHECK(jail_plan_job_spool_dir(spool, "/var/spool/slurmd/job00042/slurm_script", out,
				      sizeof(out)) == 1);
	CHECK_STR(out, "/var/spool/slurmd/job00042");
	CHECK(jail_plan_job_spool_dir(spool, "/usr/bin/hostname", out, sizeof(out)) == 0);
	CHECK(jail_plan_job_spool_dir(spool, "/var/spool/slurmd/slurm_script", out, sizeof(out)) == 0);
	CHECK(jail_plan_job_spool_dir(spool, "/var/spool/slurmd", out, sizeof(out)) == 0);
	CHECK(jail_plan_job_spool_dir(spool, "/var/spool/slurmdX/job1/s", out, sizeof(out)) == 0);
	CHECK(jail_plan_job_spool_dir(spool, "/var/spool/slurmd/job1/../../../etc/shadow", out,
				      sizeof(out)) == 0);
	CHECK(jail_plan_job_spool_dir(spool, "hostname", out, sizeof(out)) == 0);
	CHECK(jail_plan_job_spool_dir(spool, NULL, out, sizeof(out)) == 0);
}

static void test_cwd_translation(void)
{
	static struct jail_config cfg;
	char err[512], out[PATH_MAX];
	char *argv[] = { "submounts=/nvme:/scratch,/nvme/fast:/fast" };

	CHECK(parse(&cfg, err, 1, argv) == 0);
	jail_plan_cwd(cfg.binds, cfg.nbinds, cfg.jail, "/mnt/jail/home/alice", out, sizeof(out));
	CHECK_STR(out, "/home/alice");
	jail_plan_cwd(cfg.binds, cfg.nbinds, cfg.jail, "/mnt/jail", out, sizeof(out));
	CHECK_STR(out, "/");
	jail_plan_cwd(cfg.binds, cfg.nbinds, cfg.jail, "/nvme/run1", out, sizeof(out));
	CHECK_STR(out, "/scratch/run1");
	jail_plan_cwd(cfg.binds, cfg.nbinds, cfg.jail, "/nvme/fast/x", out, sizeof(out));
	CHECK_STR(out, "/fast/x"); /* the most specific source wins */
	jail_plan_cwd(cfg.binds, cfg.nbinds, cfg.jail, "/home/alice", out, sizeof(out));
	CHECK_STR(out, "/home/alice");
	jail_plan_cwd(cfg.binds, cfg.nbinds, cfg.jail, NULL, out, sizeof(out));
	CHECK_STR(out, "/");
}

static void test_plan_adds_job_dir_and_nothing_for_cwd(void)
{
	static struct jail_config cfg;
	static struct jail_plan plan;
	const struct jail_bind *last;

	jail_config_defaults(&cfg);
	jail_plan_build(&cfg, "/etc/slurmkube/munge", "/var/spool/slurmd/job00007/slurm_script", NULL, 0,
			&plan);
	CHECK(plan.nbinds == cfg.nbinds + 2);
	/* a private tmpfs over the spool dir first, so no mount point lands on the volume */
	CHECK_STR(plan.binds[plan.nbinds - 2].dst, "/var/spool/slurmd");
	CHECK(plan.binds[plan.nbinds - 2].flags == JAIL_BIND_TMPFS);
	last = &plan.binds[plan.nbinds - 1];
	CHECK_STR(last->src, "/var/spool/slurmd/job00007");
	CHECK_STR(last->dst, "/var/spool/slurmd/job00007");
	CHECK(last->flags & JAIL_BIND_SRC_NOFOLLOW);
	/* a node directory that merely is the cwd is looked up in the jail, never bound */
	CHECK_STR(plan.cwd, "/etc/slurmkube/munge");
	jail_plan_build(&cfg, "/", "/usr/bin/srun", NULL, 0, &plan);
	CHECK(plan.nbinds == cfg.nbinds);
}

static void test_plan_binds_the_steps_pmix_dir_when_it_exists(void)
{
	static struct jail_config cfg;
	static struct jail_plan plan;
	char dir[PATH_MAX];
	const char *dirs[2];

	jail_config_defaults(&cfg);
	CHECK(jail_plan_pmix_dir(cfg.spool, 42, 0, dir, sizeof(dir)) == 1);
	CHECK_STR(dir, "/var/spool/slurmd/pmix.42.0");
	/* the batch step's id prints as Slurm prints it: a negative int */
	CHECK(jail_plan_pmix_dir(cfg.spool, 42, 0xfffffffbu, dir, sizeof(dir)) == 1);
	CHECK_STR(dir, "/var/spool/slurmd/pmix.42.-5");

	dirs[0] = "/var/spool/slurmd/pmix.42.0";
	jail_plan_build(&cfg, "/", "/usr/bin/hostname", dirs, 1, &plan);
	CHECK(plan.nbinds == cfg.nbinds + 2);
	CHECK_STR(plan.binds[cfg.nbinds].dst, "/var/spool/slurmd");
	CHECK(plan.binds[cfg.nbinds].flags == JAIL_BIND_TMPFS);
	CHECK_STR(plan.binds[cfg.nbinds + 1].src, "/var/spool/slurmd/pmix.42.0");
	CHECK_STR(plan.binds[cfg.nbinds + 1].dst, "/var/spool/slurmd/pmix.42.0");
	CHECK(plan.binds[cfg.nbinds + 1].flags == (JAIL_BIND_SRC_NOFOLLOW | JAIL_BIND_OPTIONAL));

	/* a batch step: one tmpfs, then its job dir and its (absent) PMIx dir */
	dirs[0] = "/var/spool/slurmd/pmix.42.-5";
	jail_plan_build(&cfg, "/", "/var/spool/slurmd/job00042/slurm_script", dirs, 1, &plan);
	CHECK(plan.nbinds == cfg.nbinds + 3);
	CHECK(plan.binds[cfg.nbinds].flags == JAIL_BIND_TMPFS);
	CHECK_STR(plan.binds[cfg.nbinds + 1].src, "/var/spool/slurmd/job00042");
	CHECK_STR(plan.binds[cfg.nbinds + 2].src, "/var/spool/slurmd/pmix.42.-5");

	/* nothing outside the spool dir, and never the spool dir itself */
	dirs[0] = "/etc/pmix.42.0";
	jail_plan_build(&cfg, "/", "/usr/bin/hostname", dirs, 1, &plan);
	CHECK(plan.nbinds == cfg.nbinds);
	dirs[0] = "/var/spool/slurmd";
	jail_plan_build(&cfg, "/", "/usr/bin/hostname", dirs, 1, &plan);
	CHECK(plan.nbinds == cfg.nbinds);
	dirs[0] = "/var/spool/slurmd/pmix.1.0/../../../etc";
	dirs[1] = "/var/spool/slurmd/oci-job1-0/../../../etc";
	jail_plan_build(&cfg, "/", "/usr/bin/hostname", dirs, 2, &plan);
	CHECK(plan.nbinds == cfg.nbinds);
}

static void test_plan_binds_the_steps_container_dir_as_slurm_names_it(void)
{
	static struct jail_config cfg;
	static struct jail_plan plan;
	char pmix[PATH_MAX], oci[PATH_MAX];
	const char *dirs[2];

	jail_config_defaults(&cfg);
	CHECK(jail_plan_oci_dir(cfg.spool, 42, 3, oci, sizeof(oci)) == 1);
	CHECK_STR(oci, "/var/spool/slurmd/oci-job42-3");
	/* the special steps are named, as slurmstepd's container.c names them */
	CHECK(jail_plan_oci_dir(cfg.spool, 42, SLURM_BATCH_SCRIPT, oci, sizeof(oci)) == 1);
	CHECK_STR(oci, "/var/spool/slurmd/oci-job42-batch");
	CHECK(jail_plan_oci_dir(cfg.spool, 42, SLURM_INTERACTIVE_STEP, oci, sizeof(oci)) == 1);
	CHECK_STR(oci, "/var/spool/slurmd/oci-job42-interactive");
	CHECK(jail_plan_oci_dir(cfg.spool, 42, SLURM_EXTERN_CONT, oci, sizeof(oci)) == 1);
	CHECK_STR(oci, "/var/spool/slurmd/oci-job42-extern");
	CHECK(jail_plan_oci_dir("/", 7, 0, oci, sizeof(oci)) == 1);
	CHECK_STR(oci, "/oci-job7-0");
	CHECK(jail_plan_oci_dir(cfg.spool, 42, 3, oci, 10) == 0);

	/* an srun step: one tmpfs over the spool dir, both step dirs (optional), never the spool dir */
	CHECK(jail_plan_pmix_dir(cfg.spool, 42, 3, pmix, sizeof(pmix)) == 1);
	CHECK(jail_plan_oci_dir(cfg.spool, 42, 3, oci, sizeof(oci)) == 1);
	dirs[0] = pmix;
	dirs[1] = oci;
	jail_plan_build(&cfg, "/", "/usr/bin/cat", dirs, 2, &plan);
	CHECK(plan.nbinds == cfg.nbinds + 3);
	CHECK(plan.binds[cfg.nbinds].flags == JAIL_BIND_TMPFS);
	CHECK_STR(plan.binds[cfg.nbinds + 2].src, "/var/spool/slurmd/oci-job42-3");
	CHECK_STR(plan.binds[cfg.nbinds + 2].dst, "/var/spool/slurmd/oci-job42-3");
	CHECK(plan.binds[cfg.nbinds + 2].flags == (JAIL_BIND_SRC_NOFOLLOW | JAIL_BIND_OPTIONAL));
}

static void test_mountinfo_lines_are_parsed_with_escapes(void)
{
	char mp[PATH_MAX], fs[64];

	CHECK(jail_parse_mountinfo("620 590 0:52 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/x\n",
				   mp, sizeof(mp), fs, sizeof(fs)) == 0);
	CHECK_STR(mp, "/");
	CHECK_STR(fs, "overlay");
	CHECK(jail_parse_mountinfo("631 620 254:1 /pods/x/etc-hosts /etc/hosts rw,relatime - ext4 /dev/vda rw\n",
				   mp, sizeof(mp), fs, sizeof(fs)) == 0);
	CHECK_STR(mp, "/etc/hosts");
	CHECK_STR(fs, "ext4");
	CHECK(jail_parse_mountinfo("7 1 0:3 / /mnt/with\\040blank rw shared:2 master:3 - tmpfs tmpfs rw\n",
				   mp, sizeof(mp), fs, sizeof(fs)) == 0);
	CHECK_STR(mp, "/mnt/with blank");
	CHECK_STR(fs, "tmpfs");
	CHECK(jail_parse_mountinfo("garbage\n", mp, sizeof(mp), fs, sizeof(fs)) < 0);
	CHECK(jail_parse_mountinfo("1 2 0:3 / relative rw - tmpfs t rw\n", mp, sizeof(mp), fs, sizeof(fs)) < 0);
	CHECK(jail_parse_mountinfo("1 2 0:3 / /a rw no-separator\n", mp, sizeof(mp), fs, sizeof(fs)) < 0);
	CHECK(jail_parse_mountinfo("1 2 0:3 / /a-very-long-path rw - tmpfs t rw\n", mp, 4, fs, sizeof(fs)) < 0);
}

static void test_a_root_jobs_stepd_sees_node_mounts_readonly_but_its_writable_places(void)
{
	static struct jail_config cfg;
	char *words[] = { "binds=/etc/hosts:ro,/var/tmp/node", "submounts=/mnt/sub/scratch:/scratch" };
	char err[256];

	jail_config_defaults(&cfg);
	CHECK(jail_config_parse(&cfg, 2, words, err, sizeof(err)) == 0);
	CHECK(jail_plan_stepd_readonly(&cfg, "/", "overlay", false));
	CHECK(jail_plan_stepd_readonly(&cfg, "/etc/hosts", "ext4", true));       /* a ro bind's source */
	CHECK(jail_plan_stepd_readonly(&cfg, "/etc/resolv.conf", "ext4", true)); /* not bound at all */
	CHECK(jail_plan_stepd_readonly(&cfg, "/dev/termination-log", "ext4", true));
	CHECK(jail_plan_stepd_readonly(&cfg, "/etc/slurm", "tmpfs", false));
	CHECK(jail_plan_stepd_readonly(&cfg, "/etc/slurmkube/munge", "tmpfs", false));
	CHECK(jail_plan_stepd_readonly(&cfg, "/run/slurmkube/cgroup", "tmpfs", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/run/slurmkube/cgroup/memory", "cgroup", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/run/slurmkube/cgroup", "cgroup2", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/var/spool/slurmd", "ext4", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/mnt/jail", "nfs4", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/mnt/jail/etc/x", "ext4", true));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/tmp", "tmpfs", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/root", "ext4", false)); /* a mirror of the jail's */
	CHECK(!jail_plan_stepd_readonly(&cfg, "/home", "nfs4", false));
	CHECK(jail_plan_stepd_readonly(&cfg, "/homework", "ext4", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/var/tmp/node", "ext4", false));   /* a writable bind */
	CHECK(!jail_plan_stepd_readonly(&cfg, "/mnt/sub/scratch", "ext4", false)); /* a sub-mount */
	CHECK(!jail_plan_stepd_readonly(&cfg, "/proc/sys", "proc", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/dev/shm", "tmpfs", false));
	CHECK(!jail_plan_stepd_readonly(&cfg, "/sys/fs/cgroup", "cgroup2", false));
	CHECK(jail_plan_stepd_readonly(&cfg, "/device", "ext4", false)); /* not below /dev */
}

int main(void)
{
	run("path: normalize cleans slashes and dots", test_normalize_cleans_slashes_and_dots);
	run("path: normalize refuses relative paths and ..", test_normalize_refuses_relative_and_dotdot);
	run("path: within respects component boundaries", test_within_respects_component_boundaries);
	run("path: mount point created inside the jail", test_mount_point_created_inside_jail);
	run("path: symlinked directory in the jail is not followed",
	    test_mount_point_refuses_symlinked_directory);
	run("path: relative symlink escape is not followed",
	    test_mount_point_refuses_relative_symlink_escape);
	run("path: symlinked file in the jail is not followed", test_mount_point_refuses_symlinked_file);
	run("path: mount point of the wrong kind is refused", test_mount_point_kind_mismatch);
	run("path: open_existing creates nothing and follows no symlink",
	    test_open_existing_creates_nothing);
	run("config: defaults match constants.py", test_defaults_match_constants);
	run("config: mirrors= and hide= replace their defaults",
	    test_mirrors_and_hide_replace_their_defaults);
	run("config: parses a full plugstack line", test_parse_full_line);
	run("config: binds replace a built-in with the same target",
	    test_binds_replace_builtin_with_same_target);
	run("config: drop_caps=none and capability names", test_drop_caps_none);
	run("config: bad arguments are refused with a clear message", test_bad_arguments_are_refused);
	run("config: too many binds are refused", test_too_many_binds_refused);
	run("plan: only the job's own spool dir is bound", test_job_spool_dir_only_own_job);
	run("plan: cwd is translated into the jail", test_cwd_translation);
	run("plan: the step's PMIx dir is bound below the spool tmpfs",
	    test_plan_binds_the_steps_pmix_dir_when_it_exists);
	run("plan: the step's OCI container dir is bound, named as Slurm names it",
	    test_plan_binds_the_steps_container_dir_as_slurm_names_it);
	run("plan: adds the job dir and never binds the cwd", test_plan_adds_job_dir_and_nothing_for_cwd);
	run("plan: mountinfo lines are parsed, escapes decoded", test_mountinfo_lines_are_parsed_with_escapes);
	run("plan: a root job's slurmstepd sees node mounts read-only but its writable places",
	    test_a_root_jobs_stepd_sees_node_mounts_readonly_but_its_writable_places);
	printf("1..%d\n", tests_run);
	printf("# %d passed, %d failed\n", tests_run - tests_failed, tests_failed);
	return tests_failed ? 1 : 0;
}
