/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwpool — sets a pool up through libclockwise: create it, add disks,
 * create and list partitions.  It serves tests and first steps until
 * cwctl(8) drives the daemon's control socket; stop clockwised before
 * changing its pool with it (a pool is open in one process at a time).
 *
 *   cwpool create DB [BLOCK_SIZE]
 *   cwpool add-disk DB PATH [hdd|ssd|rbd [NAME [EMULATE]]]  (PATH may be rbd:POOL/IMAGE)
 *   cwpool create-part DB NAME SIZE [rotation|random|single [DISK_ID]]
 *   cwpool list DB
 *
 * Sizes take k, M, G, T suffixes (powers of 1024).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/io.h>
#include <clockwise/layout.h>
#include <clockwise/model.h>
#include <clockwise/units.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cwpool create DB [BLOCK_SIZE]\n"
		"       cwpool add-disk DB PATH [hdd|ssd|rbd [NAME [EMULATE]]]\n"
		"       cwpool create-part DB NAME SIZE [rotation|random|single [DISK_ID]]\n"
		"       cwpool list DB\n"
		"       cwpool --help | --version\n");
}

static int usage_error(void)
{
	usage(stderr);
	return 2;
}

/* A disk id: decimal digits only. */
static bool disk_id(const char *s, uint64_t *ret)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*ret = strtoull(s, &end, 10);
	return !errno && !*end;
}

static int fail_pool(struct cw_pool *pool, const char *what, int r)
{
	const struct cw_error *e = cw_pool_last_error(pool);

	fprintf(stderr, "cwpool: %s: %s\n", what, e && e->msg[0] ? e->msg : strerror(-r));
	cw_pool_close(pool);
	return 1;
}

static int open_pool(const char *db, struct cw_pool **ret)
{
	struct cw_error err = { 0 };
	int r = cw_pool_open(db, &err, ret);

	if (r < 0)
		fprintf(stderr, "cwpool: %s: %s\n", db, err.msg[0] ? err.msg : strerror(-r));
	return r;
}

static int cmd_create(int argc, char **argv)
{
	struct cw_error err = { 0 };
	struct cw_pool *pool;
	uint64_t bs = 0;
	int r;

	if (argc > 4 || (argc == 4 && (cw_units_parse_size(argv[3], &bs) < 0 || bs > UINT32_MAX))) {
		fprintf(stderr, "cwpool: %s: expected a block size, " CW_UNITS_SIZE_HELP "\n",
			argv[3]);
		return 2;
	}
	r = cw_pool_create(argv[2], (uint32_t)bs, &err, &pool);
	if (r < 0) {
		fprintf(stderr, "cwpool: %s: %s\n", argv[2], err.msg[0] ? err.msg : strerror(-r));
		return 1;
	}
	cw_pool_close(pool);
	return 0;
}

static int cmd_add_disk(int argc, char **argv)
{
	enum cw_tier tier;
	struct cw_pool *pool;
	struct cw_model em;
	uint32_t id;
	int r;

	if (argc < 4 || argc > 7)
		return usage_error();
	tier = cw_io_path_is_rbd(argv[3]) ? CW_TIER_RBD : CW_TIER_HDD;
	if (argc >= 5 && cw_tier_parse(argv[4], &tier) < 0) {
		fprintf(stderr, "cwpool: %s: expected hdd, ssd or rbd\n", argv[4]);
		return 2;
	}
	if (argc == 7) {
		char why[512];

		if (cw_model_from_string_why(argv[6], &em, why, sizeof(why)) < 0) {
			fprintf(stderr, "cwpool: emulate: %s\n", why);
			return 2;
		}
	}
	if (open_pool(argv[2], &pool) < 0)
		return 1;
	r = cw_disk_add(pool, argv[3], tier, argc >= 6 ? argv[5] : NULL, &id);
	if (r < 0)
		return fail_pool(pool, argv[3], r);
	/* the disk keeps the model's time under clockwised (clockwise/emu.h) */
	if (argc == 7 && (r = cw_disk_emulate_set(pool, id, &em)) < 0) {
		(void)cw_disk_remove(pool, id);
		return fail_pool(pool, argv[3], r);
	}
	printf("%" PRIu32 "\n", id);
	cw_pool_close(pool);
	return 0;
}

static int cmd_create_part(int argc, char **argv)
{
	struct cw_part_opts o = { .placement = CW_PLACE_ROTATION };
	struct cw_pool *pool;
	struct cw_part *part;
	uint64_t size, id = 0;
	int r;

	if (argc < 5 || argc > 7)
		return usage_error();
	if (cw_units_parse_size(argv[4], &size) < 0) {
		fprintf(stderr, "cwpool: %s: expected " CW_UNITS_SIZE_HELP "\n", argv[4]);
		return 2;
	}
	if (argc >= 6 && cw_placement_parse(argv[5], &o.placement) < 0) {
		fprintf(stderr, "cwpool: %s: expected rotation, random or single\n", argv[5]);
		return 2;
	}
	if (argc == 7 && (!disk_id(argv[6], &id) || id > CW_DISKS_MAX)) {
		fprintf(stderr, "cwpool: %s: not a disk id\n", argv[6]);
		return 2;
	}
	o.disk_id = (uint32_t)id;
	if (open_pool(argv[2], &pool) < 0)
		return 1;
	r = cw_part_create(pool, argv[3], size, &o, &part);
	if (r < 0)
		return fail_pool(pool, argv[3], r);
	cw_pool_close(pool);
	return 0;
}

static int cmd_list(int argc, char **argv)
{
	struct cw_disk_info *disks = NULL;
	struct cw_part_info *parts = NULL;
	struct cw_pool *pool;
	size_t nd, np, i;
	int r;

	if (argc != 3)
		return usage_error();
	if (open_pool(argv[2], &pool) < 0)
		return 1;
	r = cw_disk_list(pool, &disks, &nd);
	if (r < 0)
		return fail_pool(pool, "disks", r);
	for (i = 0; i < nd; i++)
		printf("disk %" PRIu32 " %s %s %s %" PRIu64 " blocks %" PRIu64 " free%s\n",
		       disks[i].id, disks[i].name, cw_tier_name(disks[i].tier), disks[i].path,
		       disks[i].data_blocks, disks[i].free_blocks,
		       disks[i].state == CW_DISK_PRESENT ? "" : " (unavailable)");
	free(disks);
	r = cw_part_list(pool, &parts, &np);
	if (r < 0)
		return fail_pool(pool, "partitions", r);
	for (i = 0; i < np; i++)
		printf("part %s %" PRIu64 " bytes %s%s%s\n", parts[i].name, parts[i].size_bytes,
		       cw_placement_name(parts[i].opts.placement),
		       parts[i].copies > 1 ? (parts[i].copies == 2 ? " 2 copies" : " 3 copies") : "",
		       parts[i].available ? "" : " (unavailable)");
	free(parts);
	cw_pool_close(pool);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		printf("\nMakes and inspects a pool without clockwised (see cwpool(8)).\n");
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
		printf("cwpool %s (libclockwise %s)\n", PACKAGE_VERSION, cw_version());
		return 0;
	}
	if (argc < 3)
		return usage_error();
	if (strcmp(argv[1], "create") == 0)
		return cmd_create(argc, argv);
	if (strcmp(argv[1], "add-disk") == 0)
		return cmd_add_disk(argc, argv);
	if (strcmp(argv[1], "create-part") == 0)
		return cmd_create_part(argc, argv);
	if (strcmp(argv[1], "list") == 0)
		return cmd_list(argc, argv);
	return usage_error();
}
