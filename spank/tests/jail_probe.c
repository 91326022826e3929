/*
 * A static program the namespace tests copy into the jail and exec there, as
 * the job would be exec'd: it sees the capabilities a real job gets after
 * exec (bounding set applied), which the harness itself, still pre-exec,
 * does not.
 *
 *   jail_probe PATH...   for each PATH print "readable PATH" or
 *                        "denied PATH: <error>"; exit 0. A PATH written
 *                        "fd9:NAME" is opened relative to descriptor 9.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[64];
	int i;

	for (i = 1; i < argc; i++) {
		const char *path = argv[i];
		int dir_fd = AT_FDCWD;
		int fd;

		if (strncmp(path, "fd9:", 4) == 0) {
			dir_fd = 9;
			path += 4;
		}
		fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0 && read(fd, buf, sizeof(buf)) >= 0)
			printf("readable %s\n", argv[i]);
		else
			printf("denied %s: %s\n", argv[i], strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return 0;
}
