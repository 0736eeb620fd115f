/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwised's log: one line per event on stderr with the syslog priority
 * as a "<N>" prefix (the journal and systemd read it), or to syslog(3)
 * once the daemon has detached.  Messages above the configured level are
 * dropped.  Safe from any thread: each line is one write().
 */
#ifndef CWD_LOG_H
#define CWD_LOG_H

#include <stdbool.h>
#include <syslog.h>

void cwd_log_set_level(int level);
int cwd_log_level(void);
/* Send further lines to syslog(3) instead of stderr. */
void cwd_log_to_syslog(bool on);

void cwd_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
