/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * meta — the sqlite3 store, the one source of truth for pool metadata.
 * Private to the library.
 *
 * The database runs in WAL mode with foreign keys on and synchronous=FULL,
 * so a committed change survives a crash and a change that did not commit
 * leaves no trace.  Every metadata change of the library is one
 * transaction (meta_begin .. meta_commit, or meta_rollback).  The schema
 * carries its version in PRAGMA user_version; meta_open() brings an older
 * database forward through the migrations in meta.c, one transaction each.
 */
#ifndef CW_META_H
#define CW_META_H

#include <stdarg.h>
#include <sqlite3.h>

#include <clockwise/layout.h>

/* Schema version this library writes. */
#define META_SCHEMA_VERSION 17

struct meta {
	sqlite3 *db;
	int lock_fd;		/* flock()ed: one process per pool */
	/* Prepared statements, keyed by the address of their SQL literal. */
	struct {
		const char *sql;
		sqlite3_stmt *stmt;
	} cache[96];
	unsigned ncache;
};

/* Records code and a printf-style reason in err (NULL-safe); returns code. */
int meta_err(struct cw_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int meta_verr(struct cw_error *err, int code, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* An sqlite result code as a negative errno. */
int meta_errno(int rc);

/* Creates a new database at path (which must not exist) with the current
 * schema, or opens an existing one: locks it against other processes,
 * checks its integrity and version and migrates it.  A file that is not a
 * Clockwise pool database, or a damaged one, is refused with -EUCLEAN and
 * left untouched. */
int meta_create(const char *path, struct cw_error *err, struct meta **ret);
int meta_open(const char *path, struct cw_error *err, struct meta **ret);
void meta_close(struct meta *m);	/* NULL-safe */

/* A cached prepared statement for the SQL literal sql, reset and with its
 * bindings cleared. */
int meta_stmt(struct meta *m, const char *sql, sqlite3_stmt **ret);

/* Runs a statement that returns no rows, binding int64 args. */
int meta_exec(struct meta *m, const char *sql, int nargs, ...);

/* Steps a statement that returns no rows and resets it. */
int meta_step(sqlite3_stmt *s);

int meta_begin(struct meta *m);		/* BEGIN IMMEDIATE */
int meta_commit(struct meta *m);
void meta_rollback(struct meta *m);
/* Ends the transaction: commits when r is 0, else rolls back; returns
 * the outcome (r, or the commit's error). */
int meta_end(struct meta *m, int r);

/* The bytes the database occupies on disk: the file plus its WAL. */
uint64_t meta_size_bytes(const char *path);

#endif
