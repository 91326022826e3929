/*
 * A static program the namespace tests copy into the jail and exec there, as
 * the job would be exec'd: it sees the capabilities a real job gets after
 * exec (bounding set applied), which the harness itself, still pre-exec,
 * does not.
 *
 *   jail_probe PATH...   for each PATH print "readable PATH" or
 *                        "denied PATH: <error>"; exit 0. A PATH written
 *                        "fd9:NAME" is opened relative to descriptor 9;
 *                        "cap:N" prints "has cap N" or "lacks cap N"
 *                        (bounding set, capability number N); "nnp" prints
 *                        "no_new_privs N".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[64];
	int i;

	for (i = 1; i < argc; i++) {
		const char *path = argv[i];
		int dir_fd = AT_FDCWD;
		int fd;

		if (strncmp(path, "cap:", 4) == 0) {
			int cap = atoi(path + 4);

			printf("%s cap %d\n", prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 ? "has" : "lacks", cap);
			continue;
		}
		if (strcmp(path, "nnp") == 0) {
			printf("no_new_privs %d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
			continue;
		}
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
