/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A control request's way from its line to its reply: parse it
 * (clockwise/ctl-proto.h), check the caller's rights, run the command's
 * handler (one file per command family, control-internal.h) and emit the
 * reply or the error.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "control-internal.h"

static const cwc_handler_fn handlers[CW_CTL_CMD_COUNT] = {
	[CW_CTL_CMD_STATUS] = cwc_cmd_status,
	[CW_CTL_CMD_DISK_ADD] = cwc_cmd_disk_add,
	[CW_CTL_CMD_DISK_LIST] = cwc_cmd_disk_list,
	[CW_CTL_CMD_DISK_REMOVE] = cwc_cmd_disk_remove,
	[CW_CTL_CMD_DISK_SET] = cwc_cmd_disk_set,
	[CW_CTL_CMD_DISK_CALIBRATE] = cwc_cmd_disk_calibrate,
	[CW_CTL_CMD_PART_CREATE] = cwc_cmd_part_create,
	[CW_CTL_CMD_PART_LIST] = cwc_cmd_part_list,
	[CW_CTL_CMD_PART_SHOW] = cwc_cmd_part_show,
	[CW_CTL_CMD_PART_RESIZE] = cwc_cmd_part_resize,
	[CW_CTL_CMD_PART_DELETE] = cwc_cmd_part_delete,
	[CW_CTL_CMD_RESV_CREATE] = cwc_cmd_resv_create,
	[CW_CTL_CMD_RESV_LIST] = cwc_cmd_resv_list,
	[CW_CTL_CMD_RESV_SHOW] = cwc_cmd_resv_show,
	[CW_CTL_CMD_RESV_RELEASE] = cwc_cmd_resv_release,
	[CW_CTL_CMD_RESV_CLAIM] = cwc_cmd_resv_claim,
	[CW_CTL_CMD_EXPORT_LIST] = cwc_cmd_export_list,
	[CW_CTL_CMD_EXPORT_ADD] = cwc_cmd_export_add,
	[CW_CTL_CMD_EXPORT_REMOVE] = cwc_cmd_export_remove,
	[CW_CTL_CMD_EXPORT_QOS] = cwc_cmd_export_qos,
	[CW_CTL_CMD_STATS] = cwc_cmd_stats,
	[CW_CTL_CMD_DISK_PLAN] = cwc_cmd_disk_plan,
	[CW_CTL_CMD_DISK_HEADROOM] = cwc_cmd_disk_headroom,
	[CW_CTL_CMD_DISK_EVACUATE] = cwc_cmd_disk_evacuate,
	[CW_CTL_CMD_DISK_REPLACE] = cwc_cmd_disk_replace,
	[CW_CTL_CMD_PART_REBUILD] = cwc_cmd_part_rebuild,
	[CW_CTL_CMD_PART_SCRUB] = cwc_cmd_part_scrub,
	[CW_CTL_CMD_PART_MOVE] = cwc_cmd_part_move,
	[CW_CTL_CMD_PART_CACHE] = cwc_cmd_part_cache,
	[CW_CTL_CMD_MOVE_LIST] = cwc_cmd_move_list,
	[CW_CTL_CMD_MOVE_PAUSE] = cwc_cmd_move_pause,
	[CW_CTL_CMD_MOVE_RESUME] = cwc_cmd_move_resume,
	[CW_CTL_CMD_MOVE_CANCEL] = cwc_cmd_move_cancel,
};

void cwc_emit_error(cwc_emit_fn emit, void *data, enum cw_ctl_code code, const char *msg,
		       json_object *details)
{
	_cleanup_free_ char *line = cw_ctl_format_error(code, msg, details);

	if (line)
		emit(line, data);
}

/* Parses and checks the rights for one line: false after emitting the
 * error reply; true with *req to run (release with cw_ctl_request_done). */
bool cwc_request_admit(struct cwc_server *srv, const char *line, size_t len, bool can_read,
			  bool can_change, cwc_emit_fn emit, void *userdata, struct cw_ctl_request *req)
{
	const struct cw_ctl_cmd_spec *spec;
	struct cw_ctl_fail f;

	(void)srv;
	if (cw_ctl_request_parse(line, len, req, &f) < 0) {
		cwc_emit_error(emit, userdata, f.code, f.message, NULL);
		return false;
	}
	spec = cw_ctl_cmd_spec(req->cmd);
	if (!(spec->access == CW_CTL_ACCESS_READ ? can_read : can_change)) {
		cwc_emit_error(emit, userdata, CW_CTL_E_PERMISSION_DENIED,
			   spec->access == CW_CTL_ACCESS_READ
				   ? "permission denied: reading needs root or the clockwise group"
				   : "permission denied: changes need root or the admin group",
			   NULL);
		cw_ctl_request_done(req);
		return false;
	}
	return true;
}

void cwc_request_run(struct cwc_server *srv, const struct cw_ctl_request *req, pid_t pid,
		     cwc_emit_fn emit, void *userdata)
{
	struct ctx c = { .srv = srv, .req = req, .pid = pid, .emit = emit, .emit_data = userdata };
	json_object *result = NULL;
	_cleanup_free_ char *out = NULL;

	cwc_resv_expire(srv);
	if (handlers[req->cmd](&c, &result) < 0) {
		cwc_emit_error(emit, userdata, c.code, c.msg, c.details);
		json_object_put(c.details);
		return;
	}
	out = cw_ctl_format_ok(result);
	json_object_put(result);
	if (out)
		emit(out, userdata);
	else
		cwc_emit_error(emit, userdata, CW_CTL_E_INTERNAL, "out of memory", NULL);
}

void cwc_server_handle_line(struct cwc_server *srv, const char *line, size_t len, bool can_read,
			    bool can_change, cwc_emit_fn emit, void *userdata)
{
	struct cw_ctl_request req;

	if (!cwc_request_admit(srv, line, len, can_read, can_change, emit, userdata, &req))
		return;
	cwc_request_run(srv, &req, 0, emit, userdata);
	cw_ctl_request_done(&req);
}

