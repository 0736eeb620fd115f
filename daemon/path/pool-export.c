/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The exports of the data path (struct pbx): an export's disks, its
 * clients of the disks' best-effort orders (the export, and the classes
 * of connections that opened "EXPORT@CLASS") with the QoS the admission
 * state gives them, and its binding to a reservation.  The NBD server's
 * descriptor of an export and its operations are pool-backend.c's.
 */
#include "config.h"

#include "common/atomic.h"
#include "daemon/path/pool-internal.h"

/* Adds the disks of blocks [from, to) of x's partition (of every copy) to x->disks; each
 * before the count that covers it, so FLUSH on another thread sees whole
 * entries.  A block on a disk not open: counted in x->missing, its disk
 * marked in missing[] (by id), when exports.activation_mode is
 * "partial"; otherwise -ENODEV, logged. */
static int export_take_disks(struct pb *pb, struct pbx *x, const char *part, uint64_t from,
			     uint64_t to, size_t *ret_align, bool *ret_rotational, bool *missing)
{
	uint32_t nc = cw_part_copies(x->part);
	_cleanup_free_ uint32_t *ids = calloc(to > from ? (to - from) * nc : 1, sizeof(*ids));
	uint64_t b;
	int r;

	if (!ids)
		return -ENOMEM;
	r = to > from ? cw_part_block_disks(x->part, from, to - from, ids) : 0;
	/* The other copies' disks after copy 0's: a FLUSH syncs them all.
	 * A copy out of sync is not written (0: no disk needed), so a
	 * mirrored partition is served while a disk with copies is away
	 * (pb_mirror_missing marked them). */
	for (b = 0; nc > 1 && r == 0 && b < to - from; b++) {
		struct cw_copy cs[CW_COPIES_MAX];

		r = cw_part_block_copies(x->part, from + b, cs);
		for (uint32_t c = 0; r == 0 && c < nc; c++)
			ids[c * (to - from) + b] = cs[c].in_sync ? cs[c].disk_id : 0;
	}
	if (r < 0)
		return r;
	for (b = 0; b < (to - from) * nc; b++) {
		int di = pb_disk_index(pb, ids[b]);

		if (nc > 1 && ids[b] == 0)
			continue;

		if (di < 0 && pb->cfg->exports.partial && missing) {
			x->missing++;
			missing[ids[b]] = true;
			continue;
		}
		if (di < 0) {
			struct cw_disk_info info;

			cwd_log(LOG_WARNING, "partition %s is not exported: its disk %s is missing",
				part, cw_disk_info(pb->pool, ids[b], &info) == 0 ? info.name :
				"(unknown)");
			return -ENODEV;
		}
		*ret_align = CW_MAX(*ret_align, pb->disks[di].align);
		*ret_rotational |= pb->disks[di].tier == CW_TIER_HDD;
		pb_export_take_disk(pb, x, (uint32_t)di);
	}
	return 0;
}

/* The names of the disks marked in missing[], "b" or "b, c", into buf. */
static const char *missing_names(struct pb *pb, const bool *missing, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t id = 1; id <= CW_DISKS_MAX && at < len; id++) {
		struct cw_disk_info info;

		if (missing[id] && cw_disk_info(pb->pool, id, &info) == 0)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", info.name);
	}
	return buf;
}

/* Gives client x the QoS be (NULL: none) on each disk, for the lanes to
 * pick up; the one it replaces stays until the export goes, since a
 * dispatcher may be reading it.  Control thread. */
static void client_be_set(struct pb *pb, struct pbx_client *x, const struct cw_admit_be *be)
{
	struct pbx_be *nb;

	if (!be && !atomic_load_explicit(&x->be, memory_order_relaxed))
		return;	/* weight 1 and nothing else, as every order starts */
	nb = calloc(1, sizeof(*nb));
	if (!nb) {
		cwd_log(LOG_ERR, "export %s: out of memory for its best-effort QoS", x->name);
		return;
	}
	nb->gen = atomic_fetch_add(&pb->be_gen, 1) + 1;
	for (size_t i = 0; be && i < be->n_parts; i++) {
		int di = pb_disk_index(pb, be->parts[i].disk_id);

		if (di < 0)
			continue;
		nb->has[di] = true;
		nb->client[di] = be->parts[i].order;
		nb->due[di] = be->parts[i].client;
	}
	nb->older = atomic_load_explicit(&x->be, memory_order_relaxed);
	atomic_store_explicit(&x->be, nb, memory_order_release);
}

_Static_assert(CW_NBD_CLASS_MAX == CW_CLASS_MAX, "one length for a class's name");

void pb_client_init(struct pb *pb, struct pbx *x, struct pbx_client *c, const char *cls)
{
	c->x = x;
	snprintf(c->name, sizeof(c->name), "%s%s%s", x->name, cls ? "@" : "", cls ? cls : "");
	c->client = atomic_fetch_add(&pb->next_client, 1) + 1;
	c->since_ns = cw_now_ns();
}

/* The class of x named cls; NULL if it has none (make: a new one, or NULL
 * out of memory).  Lookups are lock-free; making is the control
 * thread's. */
static struct pbx_client *class_get(struct pb *pb, struct pbx *x, const char *cls, bool make)
{
	struct pbx_client *c = &x->main, *n;

	while ((n = atomic_load_explicit(&c->next, memory_order_acquire))) {
		c = n;
		if (!strcmp(c->name + strlen(x->name) + 1, cls))
			return c;
	}
	if (!make || !(n = calloc(1, sizeof(*n))))
		return NULL;
	pb_client_init(pb, x, n, cls);
	atomic_store_explicit(&c->next, n, memory_order_release);
	return n;
}

struct pbx_client *pb_client_of(struct pbx *x, struct nbdsrv_io *nio)
{
	struct pbx_client *c;

	if (!nio || !nio->client_class || !nio->conn_data)
		return &x->main;
	c = cw_pr_load_acquire(nio->conn_data);
	if (c)
		return c;
	/* a class without a QoS of its own, now, is the export's for this
	 * connection's life */
	c = class_get(x->pb, x, nio->client_class, false);
	if (!c)
		c = &x->main;
	cw_pr_store_release(nio->conn_data, c);
	return c;
}

/* The client of x that the QoS of name ("EXPORT" or "EXPORT@CLASS") is
 * for, made if new; NULL if name is not x's. */
static struct pbx_client *client_named(struct pb *pb, struct pbx *x, const char *name, bool make)
{
	size_t n = strlen(x->name);

	if (strncmp(name, x->name, n))
		return NULL;
	if (!name[n])
		return &x->main;
	return name[n] == '@' ? class_get(pb, x, name + n + 1, make) : NULL;
}

static void client_free(struct pbx_client *c)
{
	for (struct pbx_be *b = atomic_load(&c->be), *o; b; b = o) {
		o = b->older;
		free(b);
	}
}

void pb_export_free(struct pbx *x)
{
	struct pbx_client *c, *n;

	if (!x)
		return;
	for (c = atomic_load(&x->main.next); c; c = n) {
		n = atomic_load(&c->next);
		client_free(c);
		free(c);
	}
	client_free(&x->main);
	free(x);
}

int pb_export_new(struct pb *pb, struct cw_part *part, uint64_t *ret_size, bool *ret_rotational,
		  struct pbx **ret_x)
{
	struct cw_part_info info;
	struct pbx *x;
	size_t align = 512;
	bool rotational = false, missing[CW_DISKS_MAX + 1] = { false };
	char names[256];
	unsigned nd;
	int r;

	r = cw_part_info(part, &info);
	if (r < 0)
		return r;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->pb = pb;
	x->part = part;
	atomic_init(&x->ndisks, 0);
	atomic_init(&x->can_punch, true);
	r = export_take_disks(pb, x, info.name, 0, cw_part_nblocks(part), &align, &rotational,
			      missing);
	if (r == 0 && align > 65536)
		r = -EINVAL;
	if (r < 0) {
		free(x);
		return r;
	}
	pb_export_take_pending(pb, x);
	nd = atomic_load_explicit(&x->ndisks, memory_order_relaxed);
	x->align = align;
	snprintf(x->name, sizeof(x->name), "%s", info.name);
	pb_client_init(pb, x, &x->main, NULL);
	/* its QoS, and its classes' */
	for (size_t i = 0; pb->adm; i++) {
		const struct cw_admit_be *be = cw_admit_state_be_at(pb->adm, i);
		struct pbx_client *c;

		if (!be)
			break;
		if ((c = client_named(pb, x, be->export_name, true)))
			client_be_set(pb, c, be);
	}
	snprintf(x->description, sizeof(x->description), "clockwise partition %s on %u disk%s%s",
		 info.name, nd, nd == 1 ? "" : "s",
		 x->missing ? ", partial: blocks on a missing disk fail" : "");
	if (x->missing)
		cwd_log(LOG_WARNING, "partition %s is served partially (activation_mode \"partial\"): "
			"%" PRIu64 " of its %" PRIu64 " blocks are on missing disk%s %s and fail with "
			"EIO", info.name, x->missing, info.nblocks,
			strchr(missing_names(pb, missing, names, sizeof(names)), ',') ? "s" : "",
			names);
	pthread_mutex_lock(&pb->exports_lock);
	x->next = pb->exports;
	pb->exports = x;
	pthread_mutex_unlock(&pb->exports_lock);
	*ret_size = info.size_bytes - info.size_bytes % align;
	*ret_rotational = rotational;
	*ret_x = x;
	return 0;
}

int pb_export_grow(struct pb *pb, struct pbx *x, uint64_t *ret_size, char *err, size_t errlen)
{
	uint64_t nblocks = cw_part_nblocks(x->part), size = cw_part_size_bytes(x->part);
	size_t align = x->align;
	bool rotational = false;
	int r;

	/* Blocks already served keep their disks: only look at them all,
	 * since the list is short and a grow is rare. */
	r = export_take_disks(pb, x, x->name, 0, nblocks, &align, &rotational, NULL);
	if (r < 0) {
		snprintf(err, errlen, "export %s: a disk of its new blocks is not open", x->name);
		return r;
	}
	if (align > x->align) {
		/* Its clients were told min_block = x->align, and requests
		 * that small would fail on the new disk. */
		snprintf(err, errlen, "export %s: its new blocks are on a disk that needs %zu-byte "
			 "I/O, its clients were told %zu; remove and add the export again",
			 x->name, align, x->align);
		return -EINVAL;
	}
	*ret_size = size - size % x->align;
	return 0;
}

/* The best-effort QoS be set (set) or cleared for the name it is for: the
 * client of that name in every export takes it (a class is made if new
 * when set).  Control thread. */
void pb_export_be_event(struct pb *pb, const struct cw_admit_be *be, bool set)
{
	for (struct pbx *x = pb->exports; x; x = x->next) {
		struct pbx_client *c = client_named(pb, x, be->export_name, set);

		if (c)
			client_be_set(pb, c, set ? be : NULL);
	}
}

int pb_export_bind(struct pb *pb, struct pbx *x, uint64_t resv_id)
{
	int r = -ENOENT;

	pthread_mutex_lock(&pb->resv_lock);
	for (size_t i = 0; i < pb->nresvs; i++) {
		const struct resv *rv = pb->resvs[i];

		if (rv && (resv_id ? rv->a->persistent && rv->a->id == resv_id :
			   !rv->a->persistent && strcmp(rv->a->export_name, x->name) == 0)) {
			x->resv = pb->resvs[i];
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&pb->resv_lock);
	return r;
}
