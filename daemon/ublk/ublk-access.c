/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A ublk device node's owner, group and mode from the export's access
 * rules (the same rules NBD clients are judged by, nbdsrv_access_for):
 * a block device has one owner, one group and the others, so the rules
 * map onto them as far as they can, and what they cannot say is counted
 * for the caller to log.
 */
#include "config.h"

#include <string.h>

#include "daemon/ublk/ublk.h"

/* The entry that rules export name: its own, else the default one. */
static const struct nbdsrv_access *rule_for(const struct nbdsrv_access *list, size_t n,
					    const char *name)
{
	const struct nbdsrv_access *dflt = NULL;

	for (size_t i = 0; i < n; i++) {
		if (!list[i].export)
			dflt = &list[i];
		else if (strcmp(list[i].export, name) == 0)
			return &list[i];
	}
	return dflt;
}

/* Whether a principal takes the place of its kind (the owner's, the
 * group's): when it is free; not when it holds it already (same), nor
 * when another does, counted in left_out. */
static bool take(bool *have, bool same, unsigned *left_out)
{
	if (!*have) {
		*have = true;
		return true;
	}
	if (!same)
		(*left_out)++;
	return false;
}

/* Gives each principal of v[n] its place (bits: 6 read and write, 4 read
 * only) unless a place of its kind is taken; counts those left out. */
static void place(const struct nbdsrv_principal *v, size_t n, mode_t bits, struct ublk_config *c,
		  bool *have_user, bool *have_group, unsigned *left_out)
{
	for (size_t i = 0; i < n; i++) {
		switch (v[i].kind) {
		case NBDSRV_ANYONE:	/* the group's members too */
			c->mode |= bits | (bits << 3);
			break;
		case NBDSRV_USER:
			if (take(have_user, c->owner == v[i].id, left_out)) {
				c->owner = v[i].id;
				c->mode = (c->mode & ~0700u) | (bits << 6);
			}
			break;
		case NBDSRV_GROUP:
			if (take(have_group, c->group == v[i].id, left_out)) {
				c->group = v[i].id;
				c->mode |= bits << 3;
			}
			break;
		}
	}
}

unsigned ublk_node_access(const struct nbdsrv_access *list, size_t n, const char *name,
			  struct ublk_config *c)
{
	const struct nbdsrv_access *a = rule_for(list, n, name);
	bool have_user = false, have_group = false;
	unsigned left_out = 0;

	c->owner = 0;
	c->group = 0;
	c->mode = 0;
	if (!a)
		return 0;	/* no rules: the kernel's root 0600 */
	/* Read-write first: a principal named in both lists gets both. */
	c->mode = 0600;
	place(a->read_write, a->n_read_write, 06, c, &have_user, &have_group, &left_out);
	place(a->read_only, a->n_read_only, 04, c, &have_user, &have_group, &left_out);
	return left_out;
}
