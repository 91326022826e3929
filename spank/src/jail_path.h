/*
 * Path helpers for the jail: lexical normalisation, prefix confinement, and
 * creating mount points inside the jail without ever following a symlink.
 *
 * Why lexical: every path here comes from plugstack.conf or from Slurm and is
 * compared against other configured paths; resolving them against a live
 * filesystem would let whoever controls that filesystem (root in the jail)
 * steer the result. Paths containing ".." are refused instead of resolved.
 */
#ifndef SLURMKUBE_JAIL_PATH_H
#define SLURMKUBE_JAIL_PATH_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Copy `in` to `out` as an absolute path with duplicate and trailing slashes
 * and "." components removed. Returns 0, or -1 with errno EINVAL (relative,
 * empty, or has a ".." component) or ENAMETOOLONG.
 */
int jail_path_normalize(const char *in, char *out, size_t outlen);

/* True when normalised `path` is `prefix` itself or lies below it. */
bool jail_path_within(const char *prefix, const char *path);

/*
 * The part of `path` after `prefix` ("" or "/a/b"); only meaningful when
 * jail_path_within(prefix, path).
 */
const char *jail_path_rest(const char *prefix, const char *path);

/* What jail_open_mount_point() must find or create as the last component. */
enum jail_node_kind {
	JAIL_NODE_DIR,
	JAIL_NODE_FILE,
};

/*
 * Open (O_PATH) the mount point `path` (absolute, normalised) below the
 * directory `root_fd`, creating missing directories (0755) and, for
 * JAIL_NODE_FILE, an empty last component (0644). No component is ever
 * followed if it is a symlink: that fails with errno ELOOP, so a link planted
 * in the jail cannot redirect a mount onto the node's own filesystem.
 * A last component of the wrong kind fails with ENOTDIR or EISDIR.
 * Returns the descriptor, or -1 with errno set.
 */
int jail_open_mount_point(int root_fd, const char *path, enum jail_node_kind kind);

/* Like jail_open_mount_point, but nothing is created: a missing component is ENOENT. */
int jail_open_existing(int root_fd, const char *path, enum jail_node_kind kind);

#endif
