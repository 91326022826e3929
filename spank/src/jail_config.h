/*
 * The plugin's configuration: the words after the .so path on the
 * plugstack.conf line, parsed into a plain struct (no I/O, no Slurm), so the
 * parser is unit-tested and the same struct drives the real namespace code.
 * The accepted syntax is documented in spank/README.md.
 */
#ifndef SLURMKUBE_JAIL_CONFIG_H
#define SLURMKUBE_JAIL_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Defaults; they match plugins/module_utils/constants.py. */
#define JAIL_DEFAULT_PATH "/mnt/jail"
#define JAIL_DEFAULT_MARKER ".slurmkube-jail"
#define JAIL_DEFAULT_SPOOL "/var/spool/slurmd"
/* Jail dirs slurmstepd sees at the same node path, for --chdir/--output/--error/--input. */
#define JAIL_DEFAULT_MIRRORS "/home,/root"
/*
 * Node paths hidden from the slurmstepd of a root job: the mounted Secrets (munge key, ssh
 * host keys), the copy of the munge key munged reads (/etc/munge/munge.key, installed by the
 * entrypoint: found readable by `sbatch -i` in the real-daemon tests) and munged's state.
 */
#define JAIL_DEFAULT_HIDE "/etc/slurmkube,/etc/munge,/var/lib/munge"

/* Enough for the built-ins, a generous binds=/submounts= list, and the job's spool dir. */
#define JAIL_MAX_BINDS 48

enum jail_bind_flags {
	JAIL_BIND_RO = 1u << 0,       /* remount the bind read-only */
	JAIL_BIND_OPTIONAL = 1u << 1, /* skip (with a debug log) when the source is missing */
	JAIL_BIND_TMPFS = 1u << 2,    /* mount an empty private tmpfs at dst; src unused */
};

#define JAIL_MAX_PATHS 16

/* A short list of absolute, normalised paths (mirrors=, hide=). */
struct jail_path_list {
	char paths[JAIL_MAX_PATHS][PATH_MAX];
	size_t n;
};

/* One node-local path made visible inside the jail. */
struct jail_bind {
	char src[PATH_MAX]; /* path on the node (outside the jail) */
	char dst[PATH_MAX]; /* absolute path as seen inside the jail */
	unsigned flags;
};

struct jail_config {
	char jail[PATH_MAX];       /* where the shared root is mounted on the node */
	char marker[NAME_MAX + 1]; /* file that proves the jail volume is mounted */
	char spool[PATH_MAX];      /* slurmd's SlurmdSpoolDir; the job's own dir is bound */
	struct jail_bind binds[JAIL_MAX_BINDS];
	size_t nbinds;
	struct jail_path_list mirrors; /* jail dirs bound at the same path for slurmstepd */
	struct jail_path_list hide;    /* node paths covered for a root job's slurmstepd */
	uint64_t drop_caps;   /* bit n set: drop capability n from the bounding set */
	bool chroot_fallback; /* use chroot when pivot_root is refused (EPERM/EINVAL) */
	bool setuid;          /* setuid/setgid bits and file capabilities count in jobs */
};

/* Built-in defaults: jail, marker, spool, default binds and dropped capabilities. */
void jail_config_defaults(struct jail_config *cfg);

/*
 * Apply the plugstack.conf words to `cfg` (which holds defaults). On error
 * returns -1 and writes a message naming the bad word into err.
 */
int jail_config_parse(struct jail_config *cfg, int argc, char **argv, char *err, size_t errlen);

/*
 * Add or replace (same dst) a bind; a replacement that does not say ro or rw
 * keeps the read-only flag of the bind it replaces (binds=/etc/slurm must not
 * quietly make the node's Slurm config writable). Returns 0, or -1 with a message in err
 * when the list is full.
 */
int jail_config_add_bind(struct jail_config *cfg, const char *src, const char *dst,
			 unsigned flags, bool ro_explicit, char *err, size_t errlen);

/* Capability number for a name like "cap_sys_admin" or "sys_admin", or -1. */
int jail_cap_from_name(const char *name);

#endif
