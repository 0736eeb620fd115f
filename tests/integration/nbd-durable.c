/*
 * nbd-durable — an NBD client (libnbd) that writes verifiable records and
 * checks, after a crash, that what the server acknowledged is there.
 *
 *   nbd-durable URI ops OP...
 *       runs each OP in turn on one connection and prints "OP ok" or
 *       "OP error: ..." for each: wOFF+LEN (a write of records), WOFF+LEN
 *       (with FUA), rOFF+LEN (a read that checks those records), f
 *       (FLUSH); sizes in bytes with k or M.
 *   nbd-durable URI write LOG GEN SLOTS SLOT_BYTES FLUSH_EVERY [MAX]
 *       writes SLOT_BYTES records to random slots of the export's first
 *       SLOTS * SLOT_BYTES bytes, generations GEN, GEN + 1, ..., every
 *       fifth with FUA, and a FLUSH after every FLUSH_EVERY others,
 *       until the connection fails (or MAX writes); LOG gets a line
 *       "i SLOT GEN" before each write and "d SLOT GEN" once a FLUSH or
 *       FUA acknowledged it.
 *   nbd-durable URI verify LOG SLOTS SLOT_BYTES
 *       reads the export and checks each 512-byte unit of the slots: it
 *       holds a record of its slot of a generation issued for it and not
 *       older than the last one acknowledged durable, or zeros when none
 *       was (lost otherwise); and nothing else (foreign).  Prints
 *       "checked=N lost=N foreign=N" and exits 1 unless both are 0; exits
 *       2 when the log gives one slot a generation twice (the writes of
 *       every run need generations of their own: GEN must grow).
 *
 * A record: each 512-byte unit holds "CWDURBL1", its offset in the
 * export, its generation, and bytes that follow from those.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#define UNIT 512u

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return x;
}

static void record(uint8_t *buf, uint64_t off, uint64_t len, uint64_t gen)
{
	for (uint64_t u = 0; u < len / UNIT; u++) {
		uint64_t *w = (uint64_t *)(buf + u * UNIT), at = off + u * UNIT;

		memcpy(w, "CWDURBL1", 8);
		w[1] = at;
		w[2] = gen;
		for (unsigned i = 3; i < UNIT / 8; i++)
			w[i] = mix(at * 131 + gen * 7 + i);
	}
}

/* 1: a whole record of offset at; then its generation in *gen.  0: zeros.
 * -1: anything else. */
static int unit_is(const uint8_t *u, uint64_t at, uint64_t *gen)
{
	const uint64_t *w = (const uint64_t *)u;
	unsigned i;

	for (i = 0; i < UNIT / 8 && !w[i]; i++)
		;
	if (i == UNIT / 8)
		return 0;
	if (memcmp(w, "CWDURBL1", 8) || w[1] != at)
		return -1;
	for (i = 3; i < UNIT / 8; i++)
		if (w[i] != mix(at * 131 + w[2] * 7 + i))
			return -1;
	*gen = w[2];
	return 1;
}

static uint64_t size_arg(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	if (*end == 'k')
		v <<= 10;
	else if (*end == 'M')
		v <<= 20;
	return v;
}

static struct nbd_handle *open_uri(const char *uri)
{
	struct nbd_handle *h = nbd_create();

	if (!h || nbd_connect_uri(h, uri) < 0) {
		fprintf(stderr, "nbd-durable: %s: %s\n", uri, nbd_get_error());
		exit(2);
	}
	return h;
}

static int ops(const char *uri, int argc, char **argv)
{
	struct nbd_handle *h = open_uri(uri);

	for (int i = 0; i < argc; i++) {
		const char *op = argv[i];
		int r;

		if (op[0] == 'f') {
			r = nbd_flush(h, 0);
		} else if (op[0] == 'w' || op[0] == 'W') {
			const char *plus = strchr(op, '+');
			uint64_t off = size_arg(op + 1), len = plus ? size_arg(plus + 1) : 0;
			uint8_t *buf = malloc(len ? len : 1);

			if (!buf || !plus || len % UNIT)
				return 2;
			record(buf, off, len, 1);
			r = nbd_pwrite(h, buf, len, off, op[0] == 'W' ? LIBNBD_CMD_FLAG_FUA : 0);
			free(buf);
		} else if (op[0] == 'r') {
			const char *plus = strchr(op, '+');
			uint64_t off = size_arg(op + 1), len = plus ? size_arg(plus + 1) : 0, g = 0;
			uint8_t *buf = malloc(len ? len : 1);

			if (!buf || !plus || len % UNIT)
				return 2;
			r = nbd_pread(h, buf, len, off, 0);
			for (uint64_t u = 0; r == 0 && u < len / UNIT; u++)
				if (unit_is(buf + u * UNIT, off + u * UNIT, &g) != 1 || g != 1) {
					printf("%s error: not the record written at %" PRIu64 "\n", op,
					       off + u * UNIT);
					r = 1;
				}
			free(buf);
			if (r > 0)
				continue;
		} else {
			fprintf(stderr, "nbd-durable: unknown op %s\n", op);
			return 2;
		}
		if (r < 0)
			printf("%s error: %s\n", op, strerror(nbd_get_errno()));
		else
			printf("%s ok\n", op);
	}
	nbd_close(h);
	return 0;
}

static int write_loop(const char *uri, const char *log_path, uint64_t gen, uint64_t slots,
		      uint64_t slot_bytes, unsigned flush_every, uint64_t max)
{
	struct nbd_handle *h = open_uri(uri);
	FILE *log = fopen(log_path, "a");
	uint8_t *buf = malloc(slot_bytes);
	uint64_t *pend_slot = calloc(flush_every, sizeof(*pend_slot));
	uint64_t *pend_gen = calloc(flush_every, sizeof(*pend_gen));
	uint64_t acked = 0, n = 0, rnd = mix(gen);
	unsigned np = 0;

	if (!log || !buf || !pend_slot || !pend_gen)
		return 2;
	setvbuf(log, NULL, _IOLBF, 0);
	for (; n < max; gen++, n++) {
		uint64_t slot = (rnd = mix(rnd + n)) % slots;
		bool fua = n % 5 == 4;

		record(buf, slot * slot_bytes, slot_bytes, gen);
		fprintf(log, "i %" PRIu64 " %" PRIu64 "\n", slot, gen);
		if (nbd_pwrite(h, buf, slot_bytes, slot * slot_bytes,
			       fua ? LIBNBD_CMD_FLAG_FUA : 0) < 0)
			break;
		if (fua) {	/* durable by itself, not the writes before it */
			fprintf(log, "d %" PRIu64 " %" PRIu64 "\n", slot, gen);
			acked++;
		} else {
			pend_slot[np] = slot;
			pend_gen[np++] = gen;
		}
		if (np < flush_every)
			continue;
		if (nbd_flush(h, 0) < 0)
			break;
		for (unsigned i = 0; i < np; i++)
			fprintf(log, "d %" PRIu64 " %" PRIu64 "\n", pend_slot[i], pend_gen[i]);
		acked += np;
		np = 0;
	}
	fprintf(stderr, "nbd-durable: %" PRIu64 " writes, %" PRIu64 " acknowledged durable, "
		"then: %s\n", n, acked, nbd_get_error() ? nbd_get_error() : "?");
	fclose(log);
	nbd_close(h);
	free(pend_gen);
	free(pend_slot);
	free(buf);
	return 0;
}

static int verify(const char *uri, const char *log_path, uint64_t slots, uint64_t slot_bytes)
{
	struct nbd_handle *h = open_uri(uri);
	FILE *log = fopen(log_path, "r");
	uint64_t *durable = calloc(slots, sizeof(*durable));
	uint64_t *issued_n = calloc(slots, sizeof(*issued_n)), **issued = calloc(slots, sizeof(*issued));
	uint8_t *buf = malloc(slot_bytes);
	uint64_t checked = 0, lost = 0, foreign = 0, slot, gen;
	char kind;

	if (!log || !durable || !issued_n || !issued || !buf)
		return 2;
	while (fscanf(log, " %c %" SCNu64 " %" SCNu64, &kind, &slot, &gen) == 3) {
		if (slot >= slots)
			return 2;
		if (kind == 'd') {
			if (gen > durable[slot])
				durable[slot] = gen;
			checked++;
		} else {
			/* A generation written twice makes "older than the last
			 * one acknowledged" meaningless: refuse the log. */
			for (uint64_t i = 0; i < issued_n[slot]; i++)
				if (issued[slot][i] == gen) {
					fprintf(stderr, "nbd-durable: %s: generation %" PRIu64
						" written twice to slot %" PRIu64 ": each write "
						"needs a generation of its own\n", log_path, gen, slot);
					return 2;
				}
			issued[slot] = realloc(issued[slot], (issued_n[slot] + 1) * sizeof(**issued));
			if (!issued[slot])
				return 2;
			issued[slot][issued_n[slot]++] = gen;
		}
	}
	for (slot = 0; slot < slots; slot++) {
		if (nbd_pread(h, buf, slot_bytes, slot * slot_bytes, 0) < 0) {
			fprintf(stderr, "nbd-durable: read: %s\n", nbd_get_error());
			return 2;
		}
		for (uint64_t u = 0; u < slot_bytes / UNIT; u++) {
			uint64_t at = slot * slot_bytes + u * UNIT, g = 0;
			int k = unit_is(buf + u * UNIT, at, &g);
			bool known = false;

			for (uint64_t i = 0; k == 1 && i < issued_n[slot] && !known; i++)
				known = issued[slot][i] == g;
			if (k < 0 || (k == 1 && !known)) {
				if (foreign++ < 5)
					fprintf(stderr, "nbd-durable: foreign bytes at %" PRIu64 "\n", at);
			} else if ((k == 0 && durable[slot]) || (k == 1 && g < durable[slot])) {
				if (lost++ < 5)
					fprintf(stderr, "nbd-durable: lost at %" PRIu64 ": generation %"
						PRIu64 " was acknowledged, found %" PRIu64 "\n", at,
						durable[slot], g);
			}
		}
	}
	printf("checked=%" PRIu64 " lost=%" PRIu64 " foreign=%" PRIu64 "\n", checked, lost, foreign);
	nbd_close(h);
	fclose(log);
	for (slot = 0; slot < slots; slot++)
		free(issued[slot]);
	free(issued);
	free(issued_n);
	free(durable);
	free(buf);
	return lost || foreign ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[2], "ops"))
		return ops(argv[1], argc - 3, argv + 3);
	if ((argc == 8 || argc == 9) && !strcmp(argv[2], "write"))
		return write_loop(argv[1], argv[3], size_arg(argv[4]), size_arg(argv[5]),
				  size_arg(argv[6]), (unsigned)size_arg(argv[7]),
				  argc == 9 ? size_arg(argv[8]) : UINT64_MAX);
	if (argc == 6 && !strcmp(argv[2], "verify"))
		return verify(argv[1], argv[3], size_arg(argv[4]), size_arg(argv[5]));
	fprintf(stderr, "usage: nbd-durable URI ops OP... | write LOG GEN SLOTS SLOT_BYTES "
		"FLUSH_EVERY [MAX] | verify LOG SLOTS SLOT_BYTES\n");
	return 2;
}
