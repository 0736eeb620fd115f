/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Description: a ublk device node's owner, group and mode from an
 * export's access rules (daemon/ublk/ublk-access.c): the export's own
 * entry before the default one; no rules leave the kernel's root 0600; a
 * user read-write owns it rw, a group read-only reads it, anyone
 * read-write opens it to the others; a second user or group is counted
 * as left out.
 */
#include "config.h"

#include "daemon/ublk/ublk.h"
#include "cwtest.h"

static const struct nbdsrv_principal alice = { NBDSRV_USER, 1000 };
static const struct nbdsrv_principal bob = { NBDSRV_USER, 1001 };
static const struct nbdsrv_principal video = { NBDSRV_GROUP, 44 };
static const struct nbdsrv_principal anyone = { NBDSRV_ANYONE, 0 };

static void test_no_rules(void)
{
	struct ublk_config c = { .mode = 0777 };

	CU_ASSERT_EQUAL(ublk_node_access(NULL, 0, "media", &c), 0);
	CU_ASSERT_EQUAL(c.mode, 0);
	CU_ASSERT_EQUAL(c.owner, 0);
}

static void test_own_entry_first(void)
{
	struct nbdsrv_principal rw[] = { alice }, ro[] = { video }, all[] = { anyone };
	struct nbdsrv_access list[] = {
		{ .export = NULL, .read_write = all, .n_read_write = 1 },
		{ .export = "media", .read_write = rw, .n_read_write = 1, .read_only = ro,
		  .n_read_only = 1 },
	};
	struct ublk_config c = { 0 };

	CU_ASSERT_EQUAL(ublk_node_access(list, 2, "media", &c), 0);
	CU_ASSERT_EQUAL(c.owner, 1000);
	CU_ASSERT_EQUAL(c.group, 44);
	CU_ASSERT_EQUAL(c.mode, 0640);
	CU_ASSERT_EQUAL(ublk_node_access(list, 2, "other", &c), 0);
	CU_ASSERT_EQUAL(c.owner, 0);
	CU_ASSERT_EQUAL(c.mode, 0666);
}

static void test_read_only_anyone_and_left_out(void)
{
	struct nbdsrv_principal rw[] = { video, alice, bob }, ro[] = { anyone, alice };
	struct nbdsrv_access list[] = {
		{ .export = "media", .read_write = rw, .n_read_write = 3, .read_only = ro,
		  .n_read_only = 2 },
	};
	struct ublk_config c = { 0 };

	/* bob has no place: alice owns it */
	CU_ASSERT_EQUAL(ublk_node_access(list, 1, "media", &c), 1);
	CU_ASSERT_EQUAL(c.owner, 1000);
	CU_ASSERT_EQUAL(c.group, 44);
	CU_ASSERT_EQUAL(c.mode, 0664);
}

int main(void)
{
	CU_pSuite s = cwtest_suite("ublk node access", NULL, NULL);

	cwtest_add(s, "no rules: the kernel's", test_no_rules);
	cwtest_add(s, "the export's own entry before the default", test_own_entry_first);
	cwtest_add(s, "read-only anyone, a user left out", test_read_only_anyone_and_left_out);
	return cwtest_run();
}
