#include "jail_plan.h"

#include "jail_path.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Slurm's step ids; slurm.h declares some callbacks without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <slurm/slurm.h>
#pragma GCC diagnostic pop

int jail_plan_job_spool_dir(const char *spool, const char *argv0, char *out, size_t outlen)
{
	char script[PATH_MAX];
	const char *rest, *slash;
	int n;

	if (!argv0 || jail_path_normalize(argv0, script, sizeof(script)) < 0)
		return 0;
	if (!jail_path_within(spool, script))
		return 0;
	rest = jail_path_rest(spool, script);
	if (rest[0] != '/')
		return 0; /* argv0 is the spool dir itself */
	slash = strchr(rest + 1, '/');
	if (!slash)
		return 0; /* a file directly in the spool dir: no per-job dir to bind */
	n = snprintf(out, outlen, "%s%.*s", strcmp(spool, "/") == 0 ? "" : spool,
		     (int) (slash - rest), rest);
	return n > 0 && (size_t) n < outlen;
}

int jail_plan_pmix_dir(const char *spool, unsigned job_id, unsigned step_id, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s/pmix.%d.%d", strcmp(spool, "/") == 0 ? "" : spool, (int) job_id,
			 (int) step_id);

	return n > 0 && (size_t) n < outlen;
}

int jail_plan_oci_dir(const char *spool, unsigned job_id, unsigned step_id, char *out, size_t outlen)
{
	const char *root = strcmp(spool, "/") == 0 ? "" : spool;
	int n;

	if (step_id == SLURM_BATCH_SCRIPT)
		n = snprintf(out, outlen, "%s/oci-job%u-batch", root, job_id);
	else if (step_id == SLURM_INTERACTIVE_STEP)
		n = snprintf(out, outlen, "%s/oci-job%u-interactive", root, job_id);
	else if (step_id == SLURM_EXTERN_CONT)
		n = snprintf(out, outlen, "%s/oci-job%u-extern", root, job_id);
	else
		n = snprintf(out, outlen, "%s/oci-job%u-%u", root, job_id, step_id);
	return n > 0 && (size_t) n < outlen;
}

/* The bind whose source holds `path` most specifically, or NULL. */
static const struct jail_bind *innermost_source(const struct jail_bind *binds, size_t nbinds,
						const char *path)
{
	const struct jail_bind *best = NULL;
	size_t i;

	for (i = 0; i < nbinds; i++) {
		if ((binds[i].flags & JAIL_BIND_TMPFS) || !jail_path_within(binds[i].src, path))
			continue;
		if (!best || strlen(binds[i].src) > strlen(best->src))
			best = &binds[i];
	}
	return best;
}

void jail_plan_cwd(const struct jail_bind *binds, size_t nbinds, const char *jail,
		   const char *host_cwd, char *out, size_t outlen)
{
	char cwd[PATH_MAX];
	const struct jail_bind *b;
	const char *rest;

	if (!host_cwd || jail_path_normalize(host_cwd, cwd, sizeof(cwd)) < 0) {
		snprintf(out, outlen, "/");
		return;
	}
	if (jail_path_within(jail, cwd)) {
		rest = jail_path_rest(jail, cwd);
		snprintf(out, outlen, "%s", rest[0] ? rest : "/");
		return;
	}
	b = innermost_source(binds, nbinds, cwd);
	if (b) {
		rest = jail_path_rest(b->src, cwd);
		if (snprintf(out, outlen, "%s%s", b->dst, rest) >= (int) outlen)
			snprintf(out, outlen, "/");
		return;
	}
	snprintf(out, outlen, "%s", cwd);
}

/* A directory of Slurm's below the spool dir, bound at its own path; a link in it is never followed. */
static void add_spool_bind(struct jail_plan *plan, const char *dir, unsigned flags)
{
	struct jail_bind *b = &plan->binds[plan->nbinds++];

	snprintf(b->src, sizeof(b->src), "%s", dir);
	snprintf(b->dst, sizeof(b->dst), "%s", dir);
	b->flags = JAIL_BIND_SRC_NOFOLLOW | flags;
}

/* Whether dir (normalized into out) lies strictly below the spool dir. */
static bool below_spool(const struct jail_config *cfg, const char *dir, char *out, size_t outlen)
{
	return dir && jail_path_normalize(dir, out, outlen) == 0 && jail_path_within(cfg->spool, out) &&
	       strcmp(jail_path_rest(cfg->spool, out), "") != 0;
}

void jail_plan_build(const struct jail_config *cfg, const char *host_cwd, const char *argv0,
		     const char *const *step_dirs, size_t nstep_dirs, struct jail_plan *plan)
{
	char job_dir[PATH_MAX], dir[PATH_MAX];
	size_t i, nsteps = 0;
	bool has_job_dir;

	memset(plan, 0, sizeof(*plan));
	memcpy(plan->binds, cfg->binds, cfg->nbinds * sizeof(cfg->binds[0]));
	plan->nbinds = cfg->nbinds;

	if (nstep_dirs > JAIL_PLAN_MAX_STEP_DIRS)
		nstep_dirs = JAIL_PLAN_MAX_STEP_DIRS;
	has_job_dir = jail_plan_job_spool_dir(cfg->spool, argv0, job_dir, sizeof(job_dir));
	for (i = 0; i < nstep_dirs; i++)
		nsteps += below_spool(cfg, step_dirs[i], dir, sizeof(dir));
	if (has_job_dir || nsteps) {
		struct jail_bind *spool_tmpfs = &plan->binds[plan->nbinds++];

		snprintf(spool_tmpfs->dst, sizeof(spool_tmpfs->dst), "%s", cfg->spool);
		spool_tmpfs->flags = JAIL_BIND_TMPFS;
	}
	if (has_job_dir)
		add_spool_bind(plan, job_dir, 0);
	for (i = 0; i < nstep_dirs; i++)
		if (below_spool(cfg, step_dirs[i], dir, sizeof(dir)))
			add_spool_bind(plan, dir, JAIL_BIND_OPTIONAL);
	jail_plan_cwd(plan->binds, plan->nbinds, cfg->jail, host_cwd, plan->cwd, sizeof(plan->cwd));
}

/* Copy one blank-separated mountinfo field, decoding \ooo escapes; NULL if it does not fit. */
static const char *mountinfo_field(const char *p, char *out, size_t outlen)
{
	size_t n = 0;

	while (*p && *p != ' ') {
		char c = *p++;

		if (c == '\\' && p[0] >= '0' && p[0] <= '3' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' &&
		    p[2] <= '7') {
			c = (char) ((p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0'));
			p += 3;
		}
		if (n + 1 >= outlen)
			return NULL;
		out[n++] = c;
	}
	out[n] = '\0';
	return *p == ' ' ? p + 1 : p;
}

int jail_parse_mountinfo(const char *line, char *mount_point, size_t mplen, char *fstype, size_t fslen)
{
	char skip[PATH_MAX];
	const char *p = line, *dash;
	int i;

	/* id parent major:minor root mount-point options [optional...] - fstype source super-options */
	for (i = 0; i < 4 && p; i++)
		p = mountinfo_field(p, skip, sizeof(skip));
	if (!p || !(p = mountinfo_field(p, mount_point, mplen)) || mount_point[0] != '/')
		return -1;
	dash = strstr(p, " - ");
	if (!dash || !mountinfo_field(dash + 3, fstype, fslen) || !fstype[0])
		return -1;
	return 0;
}

/* Whether path is (exactly, or below when `below`) the source of a bind the job gets writable. */
static bool writable_bind_source(const struct jail_config *cfg, const char *path, bool below)
{
	size_t i;

	for (i = 0; i < cfg->nbinds; i++) {
		const struct jail_bind *b = &cfg->binds[i];

		if (b->flags & (JAIL_BIND_RO | JAIL_BIND_TMPFS))
			continue;
		if (below ? jail_path_within(b->src, path) : strcmp(b->src, path) == 0)
			return true;
	}
	return false;
}

bool jail_plan_stepd_readonly(const struct jail_config *cfg, const char *mount_point, const char *fstype,
			      bool is_file)
{
	const char *writable[] = { cfg->spool, cfg->jail, "/tmp", "/proc", "/sys", "/dev" };
	size_t i, n = sizeof(writable) / sizeof(writable[0]);

	if (strcmp(mount_point, "/") == 0)
		return true;
	if (is_file)
		n = 3; /* a file bound over the kernel's trees (/dev/termination-log) is the pod's, not the kernel's */
	for (i = 0; i < n; i++) {
		if (jail_path_within(writable[i], mount_point))
			return false;
	}
	for (i = 0; i < cfg->mirrors.n; i++) {
		if (jail_path_within(cfg->mirrors.paths[i], mount_point))
			return false; /* the jail's own directories, where output files go */
	}
	if (is_file)
		return !writable_bind_source(cfg, mount_point, false);
	if (strcmp(fstype, "cgroup") == 0 || strcmp(fstype, "cgroup2") == 0)
		return false;
	return !writable_bind_source(cfg, mount_point, true);
}
