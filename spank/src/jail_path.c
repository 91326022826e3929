#include "jail_path.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int jail_path_normalize(const char *in, char *out, size_t outlen)
{
	size_t len = 0;
	const char *p = in;

	if (!in || in[0] != '/' || outlen < 2) {
		errno = EINVAL;
		return -1;
	}
	while (*p) {
		const char *start;
		size_t n;

		while (*p == '/')
			p++;
		start = p;
		while (*p && *p != '/')
			p++;
		n = (size_t) (p - start);
		if (n == 0 || (n == 1 && start[0] == '.'))
			continue;
		if (n == 2 && start[0] == '.' && start[1] == '.') {
			errno = EINVAL;
			return -1;
		}
		if (len + 1 + n + 1 > outlen) {
			errno = ENAMETOOLONG;
			return -1;
		}
		out[len++] = '/';
		memcpy(out + len, start, n);
		len += n;
	}
	if (len == 0)
		out[len++] = '/';
	out[len] = '\0';
	return 0;
}

bool jail_path_within(const char *prefix, const char *path)
{
	size_t n = strlen(prefix);

	if (strcmp(prefix, "/") == 0)
		return path[0] == '/';
	return strncmp(prefix, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

const char *jail_path_rest(const char *prefix, const char *path)
{
	if (strcmp(prefix, "/") == 0)
		return strcmp(path, "/") == 0 ? "" : path;
	return path + strlen(prefix);
}

/*
 * Open one component below dir_fd without following it. fstatat first so a
 * symlink is reported as ELOOP (the attack we care about); the O_NOFOLLOW on
 * the open closes the race where the entry is swapped for a link in between.
 */
static int open_component(int dir_fd, const char *name, enum jail_node_kind kind)
{
	struct stat st;
	int flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
	int fd;

	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (S_ISLNK(st.st_mode)) {
		errno = ELOOP;
		return -1;
	}
	if (kind == JAIL_NODE_DIR && !S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	if (kind == JAIL_NODE_FILE && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return -1;
	}
	if (kind == JAIL_NODE_DIR)
		flags |= O_DIRECTORY;
	fd = openat(dir_fd, name, flags);
	if (fd < 0 && errno == ENOTDIR && kind == JAIL_NODE_DIR)
		errno = ELOOP; /* replaced by a link after the fstatat */
	return fd;
}

/* Create a missing component; losing a race to a concurrent creator is fine. */
static int create_component(int dir_fd, const char *name, enum jail_node_kind kind)
{
	int fd;

	if (kind == JAIL_NODE_DIR) {
		if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
			return -1;
		return 0;
	}
	fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	close(fd);
	return 0;
}

static int open_or_create_component(int dir_fd, const char *name, enum jail_node_kind kind,
				    bool create)
{
	int fd = open_component(dir_fd, name, kind);

	if (fd >= 0 || errno != ENOENT || !create)
		return fd;
	if (create_component(dir_fd, name, kind) < 0)
		return -1;
	return open_component(dir_fd, name, kind);
}

static int walk(int root_fd, const char *path, enum jail_node_kind kind, bool create)
{
	char name[256];
	const char *p = path;
	int cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);

	if (cur < 0)
		return -1;
	while (*p == '/')
		p++;
	while (*p) {
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t) (end - p) : strlen(p);
		bool last = (end == NULL) || end[strspn(end, "/")] == '\0';
		int next;

		if (n >= sizeof(name)) {
			close(cur);
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0) {
			close(cur);
			errno = EINVAL;
			return -1;
		}
		next = open_or_create_component(cur, name, last ? kind : JAIL_NODE_DIR, create);
		close(cur);
		if (next < 0)
			return -1;
		cur = next;
		p += n;
		while (*p == '/')
			p++;
	}
	return cur;
}

int jail_open_mount_point(int root_fd, const char *path, enum jail_node_kind kind)
{
	return walk(root_fd, path, kind, true);
}

int jail_open_existing(int root_fd, const char *path, enum jail_node_kind kind)
{
	return walk(root_fd, path, kind, false);
}
