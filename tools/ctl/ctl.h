/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private to cwctl (tools/cwctl.c: main, the table of commands, the help):
 * one file per command family, as the control server has one per family
 * of the requests it answers (daemon/control/control-*.c), and util.c for what
 * every command uses.  Calls run one way: cwctl.c calls the families
 * through its table, status.c prints with the tables of disk.c, part.c,
 * resv.c, export.c and cache.c, and every file calls util.c, which calls
 * none of them.
 */
#ifndef CWCTL_CTL_H
#define CWCTL_CTL_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctl-client.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3

typedef void (*print_fn)(json_object *result);

/* Each command: its words, its synopsis and description, its function. */
struct command {
	const char *group;	/* NULL: top level */
	const char *name;
	const char *synopsis;
	const char *help;
	int (*fn)(int argc, char **argv);	/* NULL: c_simple() */
	/* For c_simple: the request, its one positional argument ("name",
	 * "id" or NULL for none) and how to print the result. */
	enum cw_ctl_cmd cmd;
	const char *arg;
	print_fn print;
};

#define HELP_OPT { "help", no_argument, NULL, 'h' }

/* ---- util.c: what every command uses ---- */

extern const char *socket_path;
extern bool json_out;
extern const char *cmd_name;		/* "cwctl part create" in messages */
extern const struct command *current;	/* the command running */
extern volatile sig_atomic_t interrupted;	/* on_signal() was called */

int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

json_object *get(json_object *o, const char *k);
const char *gs(json_object *o, const char *k);
int64_t gi(json_object *o, const char *k);
char *fsize(json_object *o, const char *k, char *buf);
char *frate(json_object *o, const char *k, char *buf);
char *fdur(json_object *o, const char *k, char *buf);
char *frate_floor(json_object *o, const char *k, char *buf);
void pct(char *buf, size_t len, json_object *o, const char *k);

int fetch(enum cw_ctl_cmd cmd, json_object *args, struct cw_ctl_reply *rep);
void print_result(struct cw_ctl_reply *rep, print_fn print);
int call(enum cw_ctl_cmd cmd, json_object *args, print_fn print);

json_object *args_new(void);
void put_str(json_object *a, const char *k, const char *v);
void put_u64(json_object *a, const char *k, uint64_t v);
bool size_arg(const char *what, const char *s, uint64_t *ret);
bool id_arg(const char *s, uint64_t *ret);
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts);
int positional(int argc, char **argv, int n, char ***ret);
int c_simple(int argc, char **argv);
int name_force(int argc, char **argv, enum cw_ctl_cmd cmd, const char *what);
void print_removed(json_object *r);
void on_signal(int sig);

/* ---- disk.c ---- */

void print_disks(json_object *a);
int c_disk_add(int argc, char **argv);
int c_disk_set(int argc, char **argv);
int c_disk_calibrate(int argc, char **argv);
int c_disk_plan(int argc, char **argv);

/* ---- headroom.c ---- */

int c_disk_headroom(int argc, char **argv);

/* ---- part.c ---- */

void print_parts(json_object *a);
int c_part_create(int argc, char **argv);
int c_part_show(int argc, char **argv);
int c_part_resize(int argc, char **argv);
int c_part_delete(int argc, char **argv);

/* ---- cache.c ---- */

void print_caches(json_object *a);
int c_part_cache(int argc, char **argv);

/* ---- resv.c ---- */

void print_resvs(json_object *a);
void print_resv(json_object *r);
void print_released(json_object *r);
int c_resv_create(int argc, char **argv);
int c_resv_claim(int argc, char **argv);

/* ---- export.c ---- */

void print_exports(json_object *a);
int c_export_add(int argc, char **argv);
int c_export_remove(int argc, char **argv);

/* ---- qos.c ---- */

int c_export_qos(int argc, char **argv);

/* ---- move.c ---- */

void print_move(json_object *m);
void print_moves(json_object *a);
int c_disk_evacuate(int argc, char **argv);
int c_part_move(int argc, char **argv);
int c_disk_replace(int argc, char **argv);
int c_part_rebuild(int argc, char **argv);
int c_part_scrub(int argc, char **argv);
int c_move_list(int argc, char **argv);

/* ---- status.c ---- */

void print_status(json_object *s);
int c_stats(int argc, char **argv);

#endif
