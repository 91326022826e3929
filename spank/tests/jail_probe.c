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
 *                        "no_new_privs N"; "ids" prints "ids R E S / R E S"
 *                        (real, effective, saved uid, then gid); "mount:PATH"
 *                        prints "mount PATH nosuid N nodev N".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
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
		if (strcmp(path, "ids") == 0) {
			uid_t ru, eu, su;
			gid_t rg, eg, sg;

			if (getresuid(&ru, &eu, &su) == 0 && getresgid(&rg, &eg, &sg) == 0)
				printf("ids %u %u %u / %u %u %u\n", ru, eu, su, rg, eg, sg);
			continue;
		}
		if (strncmp(path, "mount:", 6) == 0) {
			struct statvfs sv;

			if (statvfs(path + 6, &sv) == 0)
				printf("mount %s nosuid %d nodev %d\n", path + 6, !!(sv.f_flag & ST_NOSUID),
				       !!(sv.f_flag & ST_NODEV));
			else
				printf("denied %s: %s\n", path, strerror(errno));
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
