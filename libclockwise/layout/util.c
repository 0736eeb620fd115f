/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What every file of the layout module uses and nothing of it calls back:
 * the pool's last error, its placement randomness, the rule for names.
 */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "layout/layout-internal.h"

int lay_set_error(struct cw_pool *pool, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	meta_verr(&pool->err, code, fmt, ap);
	va_end(ap);
	return code;
}

/* xorshift64*: placement randomness, not security. */
uint64_t lay_random(struct cw_pool *pool)
{
	uint64_t x = pool->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	pool->rng = x;
	return x * UINT64_C(2685821657736338717);
}

bool cw_name_valid(const char *name)
{
	size_t n;

	if (!name || !name[0] || name[0] == '.' || name[0] == '-')
		return false;
	n = strlen(name);
	if (n > CW_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

bool cw_client_name_valid(const char *name)
{
	const char *at = name ? strchr(name, '@') : NULL;
	char head[CW_NAME_MAX + 1];

	if (!at)
		return cw_name_valid(name);
	if ((size_t)(at - name) > CW_NAME_MAX || strlen(at + 1) > CW_CLASS_MAX)
		return false;
	memcpy(head, name, (size_t)(at - name));
	head[at - name] = '\0';
	return cw_name_valid(head) && cw_name_valid(at + 1);
}
