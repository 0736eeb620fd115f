/*
 * Description: the corpus replay shared by the fuzz targets' plain builds
 * (see replay.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay.h"

/* The first max bytes of path, in a buffer of exactly that many bytes (at
 * least one), so that AddressSanitizer sees any read past the input. */
static int read_input(const char *path, size_t max, uint8_t **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL, *nb;
	size_t len = 0, cap = 0, n = 0;
	int e = 0;

	if (!f)
		return -errno;
	errno = 0;
	do {
		if (len == cap) {
			if (cap >= max)
				break;
			cap = cap ? cap * 2 : 4096;
			if (cap > max)
				cap = max;
			nb = realloc(buf, cap);
			if (!nb) {
				e = -ENOMEM;
				break;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	if (ferror(f) && e == 0)
		e = errno ? -errno : -EIO;
	fclose(f);
	if (e == 0 && (nb = realloc(buf, len ? len : 1)))
		buf = nb;
	if (e < 0) {
		free(buf);
		return e;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* Replays one directory; -1 when it cannot be opened. */
static int replay_dir(const char *target, const char *dir, size_t max_bytes, unsigned *files,
		      unsigned *failed)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);

	if (n < 0) {
		fprintf(stderr, "fuzz-%s: cannot open corpus %s: %m\n", target, dir);
		return -1;
	}
	for (int k = 0; k < n; k++) {
		char path[8192];
		uint8_t *buf = NULL;
		size_t len = 0;
		int e;

		if (ents[k]->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, ents[k]->d_name);
			e = read_input(path, max_bytes, &buf, &len);
			if (e < 0) {
				errno = -e;
				fprintf(stderr, "fuzz-%s: cannot read %s: %m\n", target, path);
				(*failed)++;
			} else {
				LLVMFuzzerTestOneInput(buf, len);
				free(buf);
				(*files)++;
			}
		}
		free(ents[k]);
	}
	free(ents);
	return 0;
}

int cw_fuzz_replay(int argc, char **argv, const char *target, size_t max_bytes)
{
	const char *top = getenv("top_srcdir");
	char defdir[4096];
	unsigned files = 0, failed = 0;

	snprintf(defdir, sizeof(defdir), "%s/tests/fuzz/corpus/%s", top ? top : ".", target);
	for (int i = argc > 1 ? 1 : 0; i < (argc > 1 ? argc : 1); i++)
		if (replay_dir(target, argc > 1 ? argv[i] : defdir, max_bytes, &files, &failed) < 0)
			return 99;
	printf("fuzz-%s: replayed %u inputs\n", target, files);
	printf("cw-counts: passed=%u failed=%u\n", files, failed + (files == 0));
	return failed || files == 0 ? 1 : 0;
}
