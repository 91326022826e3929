#include "jail_config.h"

#include "jail_error.h"
#include "jail_path.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Indexed by capability number, as in <linux/capability.h>. */
static const char *const cap_names[] = {
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill",
	"setgid", "setuid", "setpcap", "linux_immutable", "net_bind_service",
	"net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
	"sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
	"sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time",
	"sys_tty_config", "mknod", "lease", "audit_write", "audit_control",
	"setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm",
	"block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
};

/*
 * Root in the jail is root of the worker container. These capabilities would
 * let it leave the jail or reach the node: mount/umount/setns (sys_admin),
 * /proc/<pid>/root of the node's daemons (sys_ptrace; also, without
 * sys_admin the job's capabilities are no longer a superset of slurmd's,
 * which the kernel requires for that access), open_by_handle_at
 * (dac_read_search), raw devices and kernel state (mknod, sys_rawio,
 * sys_module, bpf, ...), or starve the node's daemons and other jobs
 * (sys_nice: real-time scheduling, CPUs outside the job's; slurmstepd holds it
 * to bind tasks to their CPUs). setuid/setgid: becoming munged's or sshd's uid
 * passes the kernel's same-uid test for /proc/<pid>/root and ptrace of those
 * daemons. setfcap: a file capability planted in the shared jail would raise
 * whoever runs it elsewhere. net_raw: forged packets (ARP, spoofed sources) on
 * the pod network. What a root user needs to administer the jail's files
 * (chown, dac_override, fowner, fsetid, kill) stays.
 */
static const int default_drop_caps[] = {
	CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH, CAP_SYS_MODULE,
	CAP_SYS_RAWIO, CAP_MKNOD, CAP_SYS_BOOT, CAP_SYS_TIME, CAP_NET_ADMIN,
	CAP_SYSLOG, CAP_MAC_ADMIN, CAP_MAC_OVERRIDE, CAP_BPF, CAP_PERFMON,
	CAP_CHECKPOINT_RESTORE, CAP_SYS_PACCT, CAP_AUDIT_CONTROL, CAP_SYS_NICE,
	CAP_SETUID, CAP_SETGID, CAP_SETFCAP, CAP_NET_RAW,
};

/* Node-local paths every job needs; binds= entries with the same dst replace them. */
static const struct {
	const char *path;
	unsigned flags;
} default_binds[] = {
	{ "/proc", 0 },
	{ "/sys", 0 },
	{ "/dev", 0 },
	/* Read-only: a root job must not rewrite the node's slurm.conf or plugstack.conf. */
	{ "/etc/slurm", JAIL_BIND_RO },
	{ "/run/munge", 0 },
};


int jail_cap_from_name(const char *name)
{
	size_t i;

	if (strncasecmp(name, "cap_", 4) == 0)
		name += 4;
	for (i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++) {
		if (strcasecmp(name, cap_names[i]) == 0)
			return (int) i;
	}
	return -1;
}

int jail_config_add_bind(struct jail_config *cfg, const char *src, const char *dst,
			 unsigned flags, bool ro_explicit, char *err, size_t errlen)
{
	struct jail_bind *b = NULL;
	size_t i;

	for (i = 0; i < cfg->nbinds; i++) {
		if (strcmp(cfg->binds[i].dst, dst) == 0)
			b = &cfg->binds[i];
	}
	if (b && !ro_explicit)
		flags |= b->flags & JAIL_BIND_RO;
	if (!b) {
		if (cfg->nbinds >= JAIL_MAX_BINDS)
			return jail_fail(err, errlen, "more than %d binds", JAIL_MAX_BINDS);
		b = &cfg->binds[cfg->nbinds++];
	}
	snprintf(b->src, sizeof(b->src), "%s", src);
	snprintf(b->dst, sizeof(b->dst), "%s", dst);
	b->flags = flags;
	return 0;
}

/* Normalise a configured path; `what` names it in the error message. */
static int parse_path(const char *in, char *out, size_t outlen, const char *what,
		      char *err, size_t errlen)
{
	if (jail_path_normalize(in, out, outlen) < 0)
		return jail_fail(err, errlen, "%s '%s': must be an absolute path without '..'", what, in);
	return 0;
}

/* The ":ro", ":rw" and ":optional" suffixes of one binds=/submounts= entry. */
static int parse_bind_flags(char *flags_text, const char *entry, unsigned *flags,
			    bool *ro_explicit, char *err, size_t errlen)
{
	char *save = NULL;
	char *flag;

	for (flag = strtok_r(flags_text, ":", &save); flag; flag = strtok_r(NULL, ":", &save)) {
		if (strcmp(flag, "ro") == 0) {
			*flags |= JAIL_BIND_RO;
			*ro_explicit = true;
		} else if (strcmp(flag, "rw") == 0) {
			*flags &= ~(unsigned) JAIL_BIND_RO;
			*ro_explicit = true;
		} else if (strcmp(flag, "optional") == 0) {
			*flags |= JAIL_BIND_OPTIONAL;
		} else {
			return jail_fail(err, errlen, "'%s': unknown flag '%s' (ro, rw, optional)", entry, flag);
		}
	}
	return 0;
}

/*
 * One entry: "SRC[:FLAGS]" for binds= (same path inside the jail) or
 * "SRC:DST[:FLAGS]" for submounts=.
 */
static int parse_bind_entry(struct jail_config *cfg, const char *entry, bool has_dst,
			    char *err, size_t errlen)
{
	char copy[2 * PATH_MAX + 64];
	char src[PATH_MAX], dst[PATH_MAX];
	char *rest, *dst_text;
	unsigned flags = 0;
	bool ro_explicit = false;

	if (snprintf(copy, sizeof(copy), "%s", entry) >= (int) sizeof(copy))
		return jail_fail(err, errlen, "'%s': too long", entry);
	rest = strchr(copy, ':');
	if (rest)
		*rest++ = '\0';
	if (parse_path(copy, src, sizeof(src), "bind source", err, errlen) < 0)
		return -1;
	if (strcmp(src, "/") == 0)
		return jail_fail(err, errlen, "'%s': the node's whole root cannot be bound", entry);
	snprintf(dst, sizeof(dst), "%s", src);
	if (has_dst) {
		dst_text = rest;
		if (!dst_text || !*dst_text)
			return jail_fail(err, errlen, "submount '%s': expected HOST:JAILPATH", entry);
		rest = strchr(dst_text, ':');
		if (rest)
			*rest++ = '\0';
		if (parse_path(dst_text, dst, sizeof(dst), "submount target", err, errlen) < 0)
			return -1;
	}
	if (strcmp(dst, "/") == 0)
		return jail_fail(err, errlen, "'%s': cannot mount over the jail's root", entry);
	if (rest && parse_bind_flags(rest, entry, &flags, &ro_explicit, err, errlen) < 0)
		return -1;
	return jail_config_add_bind(cfg, src, dst, flags, ro_explicit, err, errlen);
}

static int parse_bind_list(struct jail_config *cfg, const char *list, bool has_dst,
			   char *err, size_t errlen)
{
	char copy[8192];
	char *save = NULL;
	char *entry;

	if (snprintf(copy, sizeof(copy), "%s", list) >= (int) sizeof(copy))
		return jail_fail(err, errlen, "bind list too long");
	for (entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
		if (parse_bind_entry(cfg, entry, has_dst, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* "none" or a comma list of paths (not "/"); replaces the list. */
static int parse_path_list(struct jail_path_list *list, const char *value, const char *key,
			   char *err, size_t errlen)
{
	char copy[4096];
	char *save = NULL;
	char *item;

	list->n = 0;
	if (strcmp(value, "none") == 0)
		return 0;
	if (snprintf(copy, sizeof(copy), "%s", value) >= (int) sizeof(copy))
		return jail_fail(err, errlen, "%s list too long", key);
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (list->n >= JAIL_MAX_PATHS)
			return jail_fail(err, errlen, "%s: more than %d paths", key, JAIL_MAX_PATHS);
		if (parse_path(item, list->paths[list->n], PATH_MAX, key, err, errlen) < 0)
			return -1;
		if (strcmp(list->paths[list->n], "/") == 0)
			return jail_fail(err, errlen, "%s: '/' is not allowed", key);
		list->n++;
	}
	return 0;
}

/* "none" or a comma list of capability names; replaces the default set. */
static int parse_drop_caps(struct jail_config *cfg, const char *list, char *err, size_t errlen)
{
	char copy[1024];
	char *save = NULL;
	char *name;

	cfg->drop_caps = 0;
	if (strcmp(list, "none") == 0)
		return 0;
	if (snprintf(copy, sizeof(copy), "%s", list) >= (int) sizeof(copy))
		return jail_fail(err, errlen, "drop_caps list too long");
	for (name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		int cap = jail_cap_from_name(name);

		if (cap < 0)
			return jail_fail(err, errlen, "drop_caps: unknown capability '%s'", name);
		cfg->drop_caps |= UINT64_C(1) << cap;
	}
	return 0;
}

static int parse_bool(const char *value, bool *out)
{
	if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
		*out = true;
	else if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
		*out = false;
	else
		return -1;
	return 0;
}

static int parse_marker(struct jail_config *cfg, const char *value, char *err, size_t errlen)
{
	if (!*value || strchr(value, '/') || strcmp(value, ".") == 0 || strcmp(value, "..") == 0
	    || strlen(value) >= sizeof(cfg->marker))
		return jail_fail(err, errlen, "marker '%s': must be a plain file name", value);
	snprintf(cfg->marker, sizeof(cfg->marker), "%s", value);
	return 0;
}

static int parse_word(struct jail_config *cfg, const char *word, char *err, size_t errlen)
{
	const char *eq = strchr(word, '=');
	const char *value = eq ? eq + 1 : "";
	size_t klen = eq ? (size_t) (eq - word) : strlen(word);

#define KEY_IS(k) (klen == sizeof(k) - 1 && strncmp(word, k, klen) == 0)
	if (!eq)
		return jail_fail(err, errlen, "'%s': expected key=value", word);
	if (KEY_IS("jail")) {
		if (parse_path(value, cfg->jail, sizeof(cfg->jail), "jail", err, errlen) < 0)
			return -1;
		if (strcmp(cfg->jail, "/") == 0)
			return jail_fail(err, errlen, "jail=/ would not isolate anything");
		return 0;
	}
	if (KEY_IS("marker"))
		return parse_marker(cfg, value, err, errlen);
	if (KEY_IS("spool")) {
		if (parse_path(value, cfg->spool, sizeof(cfg->spool), "spool", err, errlen) < 0)
			return -1;
		if (strcmp(cfg->spool, "/") == 0)
			return jail_fail(err, errlen, "spool=/ is not slurmd's spool dir");
		return 0;
	}
	if (KEY_IS("binds"))
		return parse_bind_list(cfg, value, false, err, errlen);
	if (KEY_IS("submounts"))
		return parse_bind_list(cfg, value, true, err, errlen);
	if (KEY_IS("mirrors"))
		return parse_path_list(&cfg->mirrors, value, "mirrors", err, errlen);
	if (KEY_IS("hide"))
		return parse_path_list(&cfg->hide, value, "hide", err, errlen);
	if (KEY_IS("drop_caps"))
		return parse_drop_caps(cfg, value, err, errlen);
	if (KEY_IS("chroot_fallback")) {
		if (parse_bool(value, &cfg->chroot_fallback) < 0)
			return jail_fail(err, errlen, "chroot_fallback '%s': expected yes or no", value);
		return 0;
	}
	if (KEY_IS("setuid")) {
		if (parse_bool(value, &cfg->setuid) < 0)
			return jail_fail(err, errlen, "setuid '%s': expected yes or no", value);
		return 0;
	}
#undef KEY_IS
	return jail_fail(err, errlen, "unknown option '%.*s'", (int) klen, word);
}

void jail_config_defaults(struct jail_config *cfg)
{
	char ignored[8];
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->jail, sizeof(cfg->jail), "%s", JAIL_DEFAULT_PATH);
	snprintf(cfg->marker, sizeof(cfg->marker), "%s", JAIL_DEFAULT_MARKER);
	snprintf(cfg->spool, sizeof(cfg->spool), "%s", JAIL_DEFAULT_SPOOL);
	for (i = 0; i < sizeof(default_binds) / sizeof(default_binds[0]); i++)
		jail_config_add_bind(cfg, default_binds[i].path, default_binds[i].path,
				     default_binds[i].flags, true, ignored, sizeof(ignored));
	parse_path_list(&cfg->mirrors, JAIL_DEFAULT_MIRRORS, "mirrors", ignored, sizeof(ignored));
	parse_path_list(&cfg->hide, JAIL_DEFAULT_HIDE, "hide", ignored, sizeof(ignored));
	for (i = 0; i < sizeof(default_drop_caps) / sizeof(default_drop_caps[0]); i++)
		cfg->drop_caps |= UINT64_C(1) << default_drop_caps[i];
	cfg->chroot_fallback = true;
	cfg->setuid = false;
}

int jail_config_parse(struct jail_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (parse_word(cfg, argv[i], err, errlen) < 0)
			return -1;
	}
	return 0;
}
