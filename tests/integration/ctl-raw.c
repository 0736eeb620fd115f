/*
 * Description: a raw control-socket client for tests: sends its standard
 * input to the socket as it is (malformed JSON, huge lines, floods), then
 * closes its sending side and copies every reply line to standard output.
 *
 *   ctl-raw SOCKET < requests > replies
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int copy(int from, int to)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf)), off = 0;

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (off < n) {
			ssize_t w = write(to, buf + off, (size_t)(n - off));

			if (w < 0)
				return -1;
			off += w;
		}
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (argc != 2 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: ctl-raw SOCKET < requests\n");
		return 2;
	}
	strcpy(sa.sun_path, argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror(argv[1]);
		return 1;
	}
	if (copy(STDIN_FILENO, fd) < 0 || shutdown(fd, SHUT_WR) < 0) {
		perror("sending");
		return 1;
	}
	if (copy(fd, STDOUT_FILENO) < 0) {
		perror("receiving");
		return 1;
	}
	return 0;
}
