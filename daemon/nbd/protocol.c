/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The transmission phase, on a connection's reader: read a request
 * header, judge it (cw_nbd_check_request), pay for it from the CPU
 * budget (priority.c), take a slot (slots.c), read a write's payload
 * into it and hand it to the back end; requests not aligned to the
 * export's blocks go to protocol-unaligned.c.  The replies leave through
 * protocol-reply.c.
 */
#include "config.h"

#include <errno.h>
#include <syslog.h>

#include "common/util.h"
#include "daemon/nbd/nbd-internal.h"

static const enum nbdsrv_io_op cmd_op[] = {
	[CW_NBD_CMD_READ] = NBDSRV_IO_READ,
	[CW_NBD_CMD_WRITE] = NBDSRV_IO_WRITE,
	[CW_NBD_CMD_FLUSH] = NBDSRV_IO_FLUSH,
	[CW_NBD_CMD_TRIM] = NBDSRV_IO_TRIM,
	[CW_NBD_CMD_WRITE_ZEROES] = NBDSRV_IO_ZERO,
	[CW_NBD_CMD_CACHE] = NBDSRV_IO_CACHE,
	[CW_NBD_CMD_BLOCK_STATUS] = NBDSRV_IO_BLOCK_STATUS,
};

static bool modifies(enum nbdsrv_io_op op)
{
	return op == NBDSRV_IO_WRITE || op == NBDSRV_IO_ZERO || op == NBDSRV_IO_TRIM;
}

/* Reads and dispatches requests until the client leaves or errs. */
int transmission(struct conn *c)
{
	uint8_t h[CW_NBD_REQUEST_BYTES];
	int r;

	for (;;) {
		struct cw_nbd_request req;
		struct cw_nbd_verdict v;
		struct slot *s;
		uint32_t bytes;
		int64_t at, at_rd;

		r = conn_read(c, h, sizeof(h));
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
		at = c->rbuf_at_ns;
		at_rd = c->rbuf_rd_ns;
		r = cw_nbd_decode_request(h, &req);
		if (r < 0) {
			client_log(c->srv, LOG_WARNING, "export %s: bad request magic, closing",
				   c->exp->e.name);
			return r;
		}
		v = cw_nbd_check_request(&c->lim, &req);
		if (v.action == CW_NBD_DISCONNECT) {
			if (req.type != CW_NBD_CMD_DISC)
				client_log(c->srv, LOG_WARNING, "export %s: %s, closing",
					   c->exp->e.name, v.why);
			return req.type == CW_NBD_CMD_DISC ? 0 : -EPROTO;
		}
		bytes = (req.type == CW_NBD_CMD_READ || req.type == CW_NBD_CMD_WRITE) &&
			v.action == CW_NBD_EXEC ? req.length : 0;
		r = cpu_spend(c, &req, bytes);
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
		s = take_slot(c, bytes);
		if (!s)
			return -EPIPE;
		s->cookie = req.cookie;
		s->err = 0;
		s->wire_error = 0;
		s->why = NULL;
		s->io.op = req.type < CW_ARRAY_SIZE(cmd_op) ? cmd_op[req.type] : NBDSRV_IO_FLUSH;
		s->io.offset = req.offset;
		s->io.length = v.action == CW_NBD_EXEC ? req.length : 0;
		s->io.fua = req.flags & CW_NBD_CMD_FLAG_FUA;
		s->io.may_trim = !(req.flags & CW_NBD_CMD_FLAG_NO_HOLE);
		s->io.fast_zero = req.flags & CW_NBD_CMD_FLAG_FAST_ZERO;
		s->io.req_one = req.flags & CW_NBD_CMD_FLAG_REQ_ONE;
		s->io.n_extents = 0;
		s->io.backend_data = NULL;
		s->io.deadline_ns = 0;
		s->io.arrived_ns = at;
		s->io.parked_ns = c->park_ns;
		s->io.parked_memory = c->park_ns && c->park_memory;
		s->io.reader_rd_fd = at ? c->rd_fd : -1;
		s->io.arrived_rd_ns = at_rd;
		s->io.client_class = conn_class(c);
		s->io.conn_data = &c->backend_conn;

		if (v.action == CW_NBD_REPLY_ERROR) {
			r = conn_skip(c, v.payload);
			if (r < 0) {
				s->io.op = NBDSRV_IO_FLUSH;	/* no bytes to account */
				s->io.length = 0;
				recycle(c, s);
				return r;
			}
			s->wire_error = v.error;
			s->why = v.why;
			s->io.op = NBDSRV_IO_FLUSH;
			s->io.length = 0;
			nbdsrv_io_complete(&s->io, 0);
			continue;
		}
		if (bytes) {
			r = ensure_buf(s, bytes);
			if (r == 0 && req.type == CW_NBD_CMD_WRITE)
				r = conn_read(c, s->io.buf, bytes);
			else if (r < 0 && req.type == CW_NBD_CMD_WRITE)
				r = conn_skip(c, bytes) < 0 ? -ECONNRESET : r;
			if (r == -ECONNRESET || (r < 0 && r != -ENOMEM)) {
				recycle(c, s);
				return r;
			}
			if (r < 0) {
				nbdsrv_io_complete(&s->io, r);
				continue;
			}
		}
		if (s->io.op == NBDSRV_IO_BLOCK_STATUS) {
			r = ensure_buf(s, NBD_EXTENTS_MAX * sizeof(struct cw_nbd_extent));
			if (r < 0) {
				nbdsrv_io_complete(&s->io, r);
				continue;
			}
		}
		if (unaligned(c, &req)) {
			nbdsrv_io_complete(&s->io, serve_unaligned(c, s));
			continue;
		}
		if (modifies(s->io.op))
			write_enter(c, s);
		/* After submit() the slot is the back end's: not a byte of
		 * it may be touched here. */
		r = submit(c, s);
		if (r < 0)
			nbdsrv_io_complete(&s->io, r);
	}
}
