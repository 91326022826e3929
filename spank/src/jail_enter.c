#include "jail_enter.h"

#include "jail_error.h"
#include "jail_path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <slurm/spank.h>


/* The path through which mount(2) reaches an already-opened file. */
static void fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/*
 * The marker lives only on the shared volume; an empty /mnt/jail (volume not
 * mounted) lacks it, and running the job there would run it on the node.
 */
static int check_jail_marker(const struct jail_config *cfg, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(cfg->jail, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return jail_fail(err, errlen, "jail %s is not a directory: %s; refusing to run the job "
			    "outside the jail", cfg->jail, strerror(errno));
	if (fstatat(fd, cfg->marker, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return jail_fail(err, errlen, "jail %s is not mounted (marker file %s missing); refusing "
			    "to run the job outside the jail", cfg->jail, cfg->marker);
	}
	close(fd);
	return 0;
}

/* A mount namespace of our own whose mounts never propagate back to the node. */
static int make_private_namespace(char *err, size_t errlen)
{
	if (unshare(CLONE_NEWNS) < 0)
		return jail_fail(err, errlen, "unshare(CLONE_NEWNS): %s (the worker needs CAP_SYS_ADMIN)",
			    strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return jail_fail(err, errlen, "making / private: %s", strerror(errno));
	return 0;
}

/*
 * pivot_root needs the new root to be a mount point; the jail may be a plain
 * directory on the node's disk. Returns a descriptor of the bind (opened after
 * mounting, so later mounts land in the bind and not beneath it).
 */
static int bind_jail_onto_itself(const struct jail_config *cfg, char *err, size_t errlen)
{
	int fd;

	if (mount(cfg->jail, cfg->jail, NULL, MS_BIND | MS_REC, NULL) < 0)
		return jail_fail(err, errlen, "binding jail %s onto itself: %s", cfg->jail,
			    strerror(errno));
	fd = open(cfg->jail, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return jail_fail(err, errlen, "opening jail %s: %s", cfg->jail, strerror(errno));
	return fd;
}

/*
 * Mount flags a bind remount must keep: those the kernel refuses to drop, and
 * read-only (a remount that only adds a flag must not make a mount writable).
 */
static unsigned long locked_flags(int fd)
{
	struct statvfs sv;
	unsigned long flags = 0;

	if (fstatvfs(fd, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_RDONLY)
		flags |= MS_RDONLY;
	if (sv.f_flag & ST_NOSUID)
		flags |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		flags |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		flags |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		flags |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		flags |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		flags |= MS_RELATIME;
	return flags;
}

/*
 * Make the mount at fd and every mount below it read-only in one step
 * (mount_setattr, Linux 5.12). A bind of /usr/lib/nvidia with mounts inside
 * would otherwise be read-only at its top only. Where the kernel lacks it, or
 * a seccomp profile refuses it (ENOSYS or EPERM), only the top mount is
 * remounted (logged); that remount fails too if the privilege is missing.
 */
static int make_readonly_recursively(int fd, const char *what, char *err, size_t errlen)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	char path[64];

	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) == 0)
		return 0;
	if (errno != ENOSYS && errno != EPERM)
		return jail_fail(err, errlen, "making %s read-only: %s", what, strerror(errno));
	slurm_debug("spank_jail: mount_setattr refused (%s): only the top mount of %s is read-only",
		    strerror(errno), what);
	fd_path(fd, path, sizeof(path));
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | locked_flags(fd), NULL) < 0)
		return jail_fail(err, errlen, "remounting %s read-only: %s", what, strerror(errno));
	return 0;
}

/*
 * Remount a finished bind read-only, with the mounts below it. The mount
 * point is opened again by walking the jail: a descriptor taken before the
 * mount names the directory beneath the bind, not the bind.
 */
static int remount_readonly(int jail_fd, const struct jail_bind *b, enum jail_node_kind kind,
			    char *err, size_t errlen)
{
	int fd = jail_open_mount_point(jail_fd, b->dst, kind);
	int rc;

	if (fd < 0)
		return jail_fail(err, errlen, "reopening %s in the jail: %s", b->dst, strerror(errno));
	rc = make_readonly_recursively(fd, b->dst, err, errlen);
	close(fd);
	return rc;
}

/* Open a bind's source on the node; 1 means "optional and absent, skip it". */
static int open_bind_source(const struct jail_bind *b, int *fd, char *err, size_t errlen)
{
	int flags = O_PATH | O_CLOEXEC;

	if (b->flags & JAIL_BIND_SRC_NOFOLLOW)
		flags |= O_NOFOLLOW;
	*fd = open(b->src, flags);
	if (*fd >= 0)
		return 0;
	if (errno == ENOENT && (b->flags & JAIL_BIND_OPTIONAL)) {
		slurm_debug("spank_jail: optional bind source %s is absent, skipped", b->src);
		return 1;
	}
	return jail_fail(err, errlen, "bind source %s: %s", b->src, strerror(errno));
}

/* An empty tmpfs private to this task, e.g. over the spool dir, so nothing lands on the volume. */
static int mount_tmpfs_in_jail(int jail_fd, const struct jail_bind *b, char *err, size_t errlen)
{
	char dst_path[64];
	int dst_fd = jail_open_mount_point(jail_fd, b->dst, JAIL_NODE_DIR);
	int rc;

	if (dst_fd < 0)
		return jail_fail(err, errlen, "mount point %s in the jail: %s", b->dst,
			    errno == ELOOP ? "a symlink, which could lead out of the jail"
					   : strerror(errno));
	fd_path(dst_fd, dst_path, sizeof(dst_path));
	rc = mount("tmpfs", dst_path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k");
	close(dst_fd);
	if (rc < 0)
		return jail_fail(err, errlen, "tmpfs on %s in the jail: %s", b->dst, strerror(errno));
	return 0;
}

/*
 * Bind one node path into the jail. The target is created and opened without
 * following symlinks and the mount goes through the descriptors, so nothing
 * root in the jail plants can redirect it onto the node's own filesystem.
 */
static int bind_into_jail(int jail_fd, const struct jail_bind *b, char *err, size_t errlen)
{
	char src_path[64], dst_path[64];
	enum jail_node_kind kind;
	struct stat st;
	int src_fd, dst_fd, rc;

	rc = open_bind_source(b, &src_fd, err, errlen);
	if (rc != 0)
		return rc > 0 ? 0 : -1;
	if (fstat(src_fd, &st) < 0) {
		close(src_fd);
		return jail_fail(err, errlen, "bind source %s: %s", b->src, strerror(errno));
	}
	kind = S_ISDIR(st.st_mode) ? JAIL_NODE_DIR : JAIL_NODE_FILE;
	dst_fd = jail_open_mount_point(jail_fd, b->dst, kind);
	if (dst_fd < 0) {
		rc = errno;
		close(src_fd);
		if (rc == ELOOP)
			return jail_fail(err, errlen, "refusing to bind %s: %s in the jail goes through a "
				    "symlink, which could lead out of the jail", b->src, b->dst);
		return jail_fail(err, errlen, "mount point %s in the jail: %s", b->dst, strerror(rc));
	}
	fd_path(src_fd, src_path, sizeof(src_path));
	fd_path(dst_fd, dst_path, sizeof(dst_path));
	rc = mount(src_path, dst_path, NULL, MS_BIND | MS_REC, NULL);
	if (rc < 0)
		rc = jail_fail(err, errlen, "binding %s to %s in the jail: %s", b->src, b->dst,
			  strerror(errno));
	close(src_fd);
	close(dst_fd);
	if (rc == 0 && (b->flags & JAIL_BIND_RO))
		rc = remount_readonly(jail_fd, b, kind, err, errlen);
	if (rc == 0)
		slurm_debug("spank_jail: bound %s to %s%s", b->src, b->dst,
			    (b->flags & JAIL_BIND_RO) ? " (read-only)" : "");
	return rc;
}

/*
 * Nothing run in the jail may gain privileges by exec: a root job could
 * otherwise chown a copy of python to munged's uid and gid, chmod it 6755 and
 * become munged (exec'ing a setuid file needs no capability), or plant a
 * setuid-root file that raises a plain user's later jobs. Every mount of the
 * task's tree becomes nosuid (which also voids file capabilities), the jail's
 * own mount nodev. Where mount_setattr is missing or refused, only the jail's
 * mount is changed; no_new_privs, set after the capability drop, holds
 * everywhere regardless.
 */
static int forbid_privilege_gain_by_mounts(int jail_fd, const struct jail_config *cfg, char *err,
					   size_t errlen)
{
	struct mount_attr nosuid = { .attr_set = MOUNT_ATTR_NOSUID };
	struct mount_attr nodev = { .attr_set = MOUNT_ATTR_NODEV };
	char path[64];

	if (syscall(SYS_mount_setattr, jail_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &nosuid,
		    sizeof(nosuid)) == 0
	    && syscall(SYS_mount_setattr, jail_fd, "", AT_EMPTY_PATH, &nodev, sizeof(nodev)) == 0)
		return 0;
	if (errno != ENOSYS && errno != EPERM)
		return jail_fail(err, errlen, "making jail %s nosuid,nodev: %s", cfg->jail,
			    strerror(errno));
	slurm_debug("spank_jail: mount_setattr refused (%s): only the jail's own mount is nosuid,nodev",
		    strerror(errno));
	fd_path(jail_fd, path, sizeof(path));
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | locked_flags(jail_fd),
		  NULL) < 0)
		return jail_fail(err, errlen, "remounting jail %s nosuid,nodev: %s", cfg->jail,
			    strerror(errno));
	return 0;
}

/*
 * Make the jail "/". pivot_root is preferred: the node's root is then not in
 * this namespace at all. Docker's default seccomp profile denies pivot_root
 * (EPERM), and it fails with EINVAL when our root is not a mount point (slurmd
 * itself chrooted); only then chroot is used, which leaves the node's root
 * reachable for a process holding CAP_SYS_CHROOT -- the caller drops it.
 */
static int switch_root(const struct jail_config *cfg, bool *used_chroot, char *err, size_t errlen)
{
	*used_chroot = false;
	if (chdir(cfg->jail) < 0)
		return jail_fail(err, errlen, "chdir(%s): %s", cfg->jail, strerror(errno));
	if (syscall(SYS_pivot_root, ".", ".") == 0) {
		if (umount2(".", MNT_DETACH) < 0)
			return jail_fail(err, errlen, "detaching the node's root: %s", strerror(errno));
		if (chdir("/") < 0)
			return jail_fail(err, errlen, "chdir(/) in the jail: %s", strerror(errno));
		return 0;
	}
	if ((errno != EPERM && errno != EINVAL) || !cfg->chroot_fallback)
		return jail_fail(err, errlen, "pivot_root into %s: %s%s", cfg->jail, strerror(errno),
			    cfg->chroot_fallback ? "" : " (chroot_fallback=no)");
	slurm_info("spank_jail: pivot_root into %s refused (%s), falling back to chroot; allow "
		   "pivot_root in the worker's seccomp profile for full isolation",
		   cfg->jail, strerror(errno));
	if (chroot(".") < 0)
		return jail_fail(err, errlen, "chroot(%s): %s", cfg->jail, strerror(errno));
	if (chdir("/") < 0)
		return jail_fail(err, errlen, "chdir(/) in the jail: %s", strerror(errno));
	*used_chroot = true;
	return 0;
}

/* Clear caps from the inheritable set, through which a root exec would regain them. */
static int clear_inheritable(uint64_t caps, char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return jail_fail(err, errlen, "capget: %s", strerror(errno));
	data[0].inheritable &= ~(uint32_t) caps;
	data[1].inheritable &= ~(uint32_t) (caps >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return jail_fail(err, errlen, "capset: %s", strerror(errno));
	return 0;
}

/*
 * Drop caps from the bounding set: the effective set is left alone (slurmstepd
 * still needs it until it execs the task), but the exec'd job -- root
 * included -- can never hold them again.
 */
static int drop_capabilities(uint64_t caps, char *err, size_t errlen)
{
	int cap;

	for (cap = 0; cap < 64; cap++) {
		if (!(caps & (UINT64_C(1) << cap)))
			continue;
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			continue; /* the running kernel does not know this capability */
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return jail_fail(err, errlen, "dropping capability %d: %s", cap, strerror(errno));
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return jail_fail(err, errlen, "clearing ambient capabilities: %s", strerror(errno));
	return clear_inheritable(caps, err, errlen);
}

/*
 * A directory descriptor that slurmstepd left open without close-on-exec would
 * survive into the job and lead back to the node's filesystem (openat or
 * fchdir from it ignores the jail's root). The job needs none, so all are
 * marked close-on-exec; pipes, sockets and files are left alone.
 */
static int seal_directory_fds(char *err, size_t errlen)
{
	DIR *fds = opendir("/proc/self/fd");
	struct dirent *entry;

	if (!fds)
		return jail_fail(err, errlen, "listing /proc/self/fd: %s", strerror(errno));
	while ((entry = readdir(fds)) != NULL) {
		char *end;
		long fd = strtol(entry->d_name, &end, 10);
		struct stat st;
		int flags;

		if (*end != '\0' || end == entry->d_name || fd == dirfd(fds))
			continue;
		if (fstat((int) fd, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		flags = fcntl((int) fd, F_GETFD);
		if (flags < 0 || fcntl((int) fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
			closedir(fds);
			return jail_fail(err, errlen, "closing directory fd %ld on exec: %s", fd,
				    strerror(errno));
		}
	}
	closedir(fds);
	return 0;
}

/* Start where the job asked to; slurmstepd chdirs there again after us (Slurm >= 23.02). */
static void chdir_job_cwd(const struct jail_plan *plan)
{
	if (chdir(plan->cwd) == 0)
		return;
	slurm_debug("spank_jail: job cwd %s not in the jail (%s), starting in /", plan->cwd,
		    strerror(errno));
	if (chdir("/") < 0)
		slurm_debug("spank_jail: chdir(/): %s", strerror(errno));
}

static int bind_all(int jail_fd, const struct jail_plan *plan, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < plan->nbinds; i++) {
		const struct jail_bind *b = &plan->binds[i];
		int rc = (b->flags & JAIL_BIND_TMPFS) ? mount_tmpfs_in_jail(jail_fd, b, err, errlen)
						      : bind_into_jail(jail_fd, b, err, errlen);
		if (rc < 0)
			return -1;
	}
	return 0;
}

int jail_enter(const struct jail_config *cfg, const struct jail_plan *plan, char *err,
	       size_t errlen)
{
	uint64_t drop = cfg->drop_caps;
	bool used_chroot;
	int jail_fd, rc;

	if (check_jail_marker(cfg, err, errlen) < 0 || make_private_namespace(err, errlen) < 0)
		return -1;
	jail_fd = bind_jail_onto_itself(cfg, err, errlen);
	if (jail_fd < 0)
		return -1;
	rc = bind_all(jail_fd, plan, err, errlen);
	if (rc == 0 && !cfg->setuid)
		rc = forbid_privilege_gain_by_mounts(jail_fd, cfg, err, errlen);
	close(jail_fd);
	if (rc < 0 || seal_directory_fds(err, errlen) < 0
	    || switch_root(cfg, &used_chroot, err, errlen) < 0)
		return -1;
	if (access(cfg->marker, F_OK) < 0)
		return jail_fail(err, errlen, "marker %s not visible after entering the jail", cfg->marker);
	if (used_chroot)
		drop |= UINT64_C(1) << CAP_SYS_CHROOT; /* chroot again would escape */
	if (drop_capabilities(drop, err, errlen) < 0)
		return -1;
	/* Inherited by every process of the task, across fork and exec; no way back. */
	if (!cfg->setuid && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return jail_fail(err, errlen, "setting no_new_privs: %s", strerror(errno));
	chdir_job_cwd(plan);
	return 0;
}

/*
 * Bind the jail's directory `path` over the node's directory of the same name,
 * in slurmstepd's own namespace. The jail side is walked without following
 * links (root in the jail could point /home at the node's /etc); a path the
 * jail or the node lacks is skipped.
 */
static int mirror_jail_dir(int jail_fd, const char *path, char *err, size_t errlen)
{
	char src_path[64], dst_path[64];
	int src_fd, dst_fd, rc;

	src_fd = jail_open_existing(jail_fd, path, JAIL_NODE_DIR);
	if (src_fd < 0 && errno == ELOOP)
		return jail_fail(err, errlen, "mirror %s: a symlink in the jail, which could lead out of it",
			    path);
	dst_fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (src_fd < 0 || dst_fd < 0) {
		slurm_debug("spank_jail: mirror %s skipped: missing in the %s", path,
			    src_fd < 0 ? "jail" : "node");
		if (src_fd >= 0)
			close(src_fd);
		if (dst_fd >= 0)
			close(dst_fd);
		return 0;
	}
	fd_path(src_fd, src_path, sizeof(src_path));
	fd_path(dst_fd, dst_path, sizeof(dst_path));
	rc = mount(src_path, dst_path, NULL, MS_BIND | MS_REC, NULL);
	close(src_fd);
	close(dst_fd);
	if (rc < 0)
		return jail_fail(err, errlen, "mirroring %s of the jail: %s", path, strerror(errno));
	return 0;
}

/* Make `path` a mount of its own, so it keeps its write access when "/" turns read-only. */
static int keep_writable(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return jail_fail(err, errlen, "keeping %s writable: %s", path, strerror(errno));
	return 0;
}

/* An empty read-only tmpfs over a directory, /dev/null over a file. */
static int cover(const char *path, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	if (lstat(path, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		rc = mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			   "size=4k,mode=0755");
	else
		rc = mount("/dev/null", path, NULL, MS_BIND, NULL);
	if (rc < 0)
		return jail_fail(err, errlen, "hiding %s: %s", path, strerror(errno));
	return 0;
}

/* Remount the mount at `path` read-only (this mount only; its flags that are locked kept). */
static int remount_path_readonly(const char *path, char *err, size_t errlen)
{
	unsigned long flags = 0;
	int fd = open(path, O_PATH | O_CLOEXEC);

	if (fd >= 0) {
		flags = locked_flags(fd);
		close(fd);
	}
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, NULL) < 0)
		return jail_fail(err, errlen, "making the node's %s read-only: %s", path, strerror(errno));
	return 0;
}

/* Whether the mount point is a file (a bind of the pod's /etc/hosts, say). */
static bool is_file_mount(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/*
 * Every mount of the node read-only in this namespace but what
 * jail_plan_stepd_readonly keeps: "/" alone would leave the pod's /etc/hosts,
 * /etc/resolv.conf and volumes writable, each a mount of its own.
 */
static int make_node_mounts_readonly(const struct jail_config *cfg, char *err, size_t errlen)
{
	char line[3 * PATH_MAX], mount_point[PATH_MAX], fstype[64];
	FILE *mounts = fopen("/proc/self/mountinfo", "re");
	int rc = 0;

	if (!mounts)
		return jail_fail(err, errlen, "reading /proc/self/mountinfo: %s", strerror(errno));
	while (rc == 0 && fgets(line, sizeof(line), mounts)) {
		if (jail_parse_mountinfo(line, mount_point, sizeof(mount_point), fstype, sizeof(fstype)) < 0)
			continue;
		if (jail_plan_stepd_readonly(cfg, mount_point, fstype, is_file_mount(mount_point)))
			rc = remount_path_readonly(mount_point, err, errlen);
	}
	fclose(mounts);
	return rc;
}

/*
 * A root job's slurmstepd keeps only what the rest of the step needs: the
 * tasks enter the jail (sys_admin, sys_chroot, setpcap to drop capabilities),
 * bind to their CPUs (sys_nice), and slurmstepd manages their files, cgroups
 * and signals. Everything else leaves its effective, permitted, inheritable
 * and bounding sets for good -- setuid above all: every other root process of
 * the pod holds it, so slurmstepd's capabilities are no longer a superset of
 * theirs, and the kernel refuses it /proc/<pid>/root, cwd and fd of every
 * other process (ptrace access rules; sys_ptrace, which the worker pod has for
 * job accounting, is among what goes). That is the path
 * `sbatch -i /proc/1/root/...` took, and any process of the pod could be used
 * instead of pid 1.
 */
static const int stepd_keep_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETPCAP,
	CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_SYS_NICE, CAP_SYS_RESOURCE, CAP_IPC_LOCK,
};

static int shed_stepd_capabilities(char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	uint64_t keep = 0;
	size_t i;

	for (i = 0; i < sizeof(stepd_keep_caps) / sizeof(stepd_keep_caps[0]); i++)
		keep |= UINT64_C(1) << stepd_keep_caps[i];
	if (drop_capabilities(~keep, err, errlen) < 0)
		return -1;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return jail_fail(err, errlen, "capget: %s", strerror(errno));
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
		uint32_t mask = (uint32_t) (keep >> (32 * i));

		data[i].effective &= mask;
		data[i].permitted &= mask;
		data[i].inheritable &= mask;
	}
	if (syscall(SYS_capset, &hdr, data) < 0)
		return jail_fail(err, errlen, "capset: %s", strerror(errno));
	return 0;
}

/* A root job's slurmstepd opens its stdio files as root: no node file may be among them. */
static int protect_node_from_root_job(const struct jail_config *cfg, char *err, size_t errlen)
{
	const char *writable[] = { cfg->spool, cfg->jail, "/tmp" };
	size_t i;

	for (i = 0; i < sizeof(writable) / sizeof(writable[0]); i++) {
		if (keep_writable(writable[i], err, errlen) < 0)
			return -1;
	}
	if (make_node_mounts_readonly(cfg, err, errlen) < 0)
		return -1;
	for (i = 0; i < cfg->hide.n; i++) {
		if (cover(cfg->hide.paths[i], err, errlen) < 0)
			return -1;
	}
	return shed_stepd_capabilities(err, errlen);
}

int jail_confine_stepd(const struct jail_config *cfg, bool root_job, char *err, size_t errlen)
{
	size_t i;
	int jail_fd, rc = 0;

	if (check_jail_marker(cfg, err, errlen) < 0 || make_private_namespace(err, errlen) < 0)
		return -1;
	jail_fd = open(cfg->jail, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (jail_fd < 0)
		return jail_fail(err, errlen, "opening jail %s: %s", cfg->jail, strerror(errno));
	for (i = 0; i < cfg->mirrors.n && rc == 0; i++)
		rc = mirror_jail_dir(jail_fd, cfg->mirrors.paths[i], err, errlen);
	close(jail_fd);
	if (rc == 0 && root_job)
		rc = protect_node_from_root_job(cfg, err, errlen);
	return rc;
}
