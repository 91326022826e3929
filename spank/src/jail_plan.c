#include "jail_plan.h"

#include "jail_path.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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

void jail_plan_build(const struct jail_config *cfg, const char *host_cwd, const char *argv0,
		     const char *pmix_dir, struct jail_plan *plan)
{
	char job_dir[PATH_MAX], pmix[PATH_MAX];
	bool has_job_dir, has_pmix;

	memset(plan, 0, sizeof(*plan));
	memcpy(plan->binds, cfg->binds, cfg->nbinds * sizeof(cfg->binds[0]));
	plan->nbinds = cfg->nbinds;

	has_job_dir = jail_plan_job_spool_dir(cfg->spool, argv0, job_dir, sizeof(job_dir));
	has_pmix = pmix_dir && jail_path_normalize(pmix_dir, pmix, sizeof(pmix)) == 0 &&
		   jail_path_within(cfg->spool, pmix) && strcmp(jail_path_rest(cfg->spool, pmix), "") != 0;
	if (has_job_dir || has_pmix) {
		struct jail_bind *spool_tmpfs = &plan->binds[plan->nbinds++];

		snprintf(spool_tmpfs->dst, sizeof(spool_tmpfs->dst), "%s", cfg->spool);
		spool_tmpfs->flags = JAIL_BIND_TMPFS;
	}
	if (has_job_dir)
		add_spool_bind(plan, job_dir, 0);
	if (has_pmix)
		add_spool_bind(plan, pmix, JAIL_BIND_OPTIONAL);
	jail_plan_cwd(plan->binds, plan->nbinds, cfg->jail, host_cwd, plan->cwd, sizeof(plan->cwd));
}
