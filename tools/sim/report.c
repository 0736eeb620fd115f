/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a simulation run reports: text for people, JSON lines and CSV for
 * machines, and gnuplot for the paper's figures.  Everything here goes to
 * the given stream; wall-clock figures (events per second) are printed by
 * the commands on stderr, so that stdout depends on the seed alone.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "sim.h"

static void ms_or_null(FILE *f, int64_t ns)
{
	if (ns == CW_ADMIT_NO_LIMIT || ns == INT64_MAX)
		fprintf(f, "null");
	else
		fprintf(f, "%.3f", (double)ns / 1e6);
}

/* Best effort's latency by arrival, against the move (sim_result). */
static const char *const phase[3] = { "before", "during", "after" };

/* The failure (fail =): the disk, the spare, the rebuild, the degraded
 * interval, and each stream timed against its deadlines. */
static void fail_text(FILE *f, const struct sim_scenario *sc, const struct sim_result *r)
{
	fprintf(f, "  disk %d failed at %.1f s: ", sc->fail_disk, r->fail_at_s);
	if (r->fail_spare < 0 && !r->fail_why[0])
		fprintf(f, "it held nothing, no spare took it over\n");
	else if (r->fail_spare < 0)
		fprintf(f, "no spare replaces it (%s); degraded to the end\n", r->fail_why);
	else if (r->rebuild_end_s >= 0)
		fprintf(f, "spare %d rebuilt %" PRIu64 " of %" PRIu64 " blocks from %.1f s to "
			"%.1f s (%.1f s, %.2f MiB/s); degraded %.1f s\n", r->fail_spare,
			r->rebuild_done, r->rebuild_blocks, r->rebuild_start_s, r->rebuild_end_s,
			r->rebuild_end_s - r->rebuild_start_s,
			r->rebuild_end_s > r->rebuild_start_s ?
			(double)r->rebuild_done * (double)sc->be_pblock_bytes / SIM_MIB /
			(r->rebuild_end_s - r->rebuild_start_s) : 0,
			r->degraded_end_s - r->fail_at_s);
	else
		fprintf(f, "spare %d rebuilt %" PRIu64 " of %" PRIu64 " blocks from %.1f s, "
			"unfinished at the end of the run\n", r->fail_spare, r->rebuild_done,
			r->rebuild_blocks, r->rebuild_start_s);
	if (r->fail_spare >= 0 && r->fail_refused)
		fprintf(f, "  not by the spares that would not carry the streams: %s\n",
			r->fail_why);
	fprintf(f, "  copies out of sync at the end: %" PRIu64 "; best-effort pieces failed on "
		"the disk: %" PRIu64 "\n", r->stale_at_end, r->be_failed);
	fprintf(f, "  streams against their deadlines: %" PRIu64 " late of those admitted to "
		"survive, %" PRIu64 " of the others\n", r->survive_misses, r->other_misses);
	for (size_t i = 0; i < r->n_stream_results; i++)
		fprintf(f, "    s%zu%s: %" PRIu64 " requests, %" PRIu64 " late, latest %+.1f ms, %"
			PRIu64 " as best effort\n", i, r->stream_res[i].survive ? " (survive)" : "",
			r->stream_res[i].requests, r->stream_res[i].misses, r->stream_res[i].worst_ms,
			r->stream_res[i].be);
}

static void num_or_null(FILE *f, double x)
{
	if (x >= 0)
		fprintf(f, "%.3f", x);
	else
		fprintf(f, "null");
}

static void fail_json(FILE *f, const struct sim_result *r)
{
	fprintf(f, ", \"fail\": {\"at_s\": %.3f, \"spare\": ", r->fail_at_s);
	if (r->fail_spare >= 0)
		fprintf(f, "%d", r->fail_spare);
	else
		fprintf(f, "null");
	fprintf(f, ", \"spares_refused\": %u, \"why\": ", r->fail_refused);
	if (r->fail_why[0])
		sim_json_string(f, r->fail_why);
	else
		fprintf(f, "null");
	fprintf(f, ", \"rebuild_blocks\": %" PRIu64 ", \"rebuild_done\": %" PRIu64
		", \"rebuild_start_s\": ", r->rebuild_blocks, r->rebuild_done);
	num_or_null(f, r->rebuild_start_s);
	fprintf(f, ", \"rebuild_end_s\": ");
	num_or_null(f, r->rebuild_end_s);
	fprintf(f, ", \"rebuild_s\": ");
	num_or_null(f, r->rebuild_end_s >= 0 ? r->rebuild_end_s - r->rebuild_start_s : -1);
	fprintf(f, ", \"degraded_s\": ");
	num_or_null(f, r->degraded_end_s >= 0 ? r->degraded_end_s - r->fail_at_s : -1);
	fprintf(f, ", \"stale_at_end\": %" PRIu64 ", \"be_failed\": %" PRIu64
		", \"survive_misses\": %" PRIu64 ", \"other_misses\": %" PRIu64 ", \"streams\": [",
		r->stale_at_end, r->be_failed, r->survive_misses, r->other_misses);
	for (size_t i = 0; i < r->n_stream_results; i++)
		fprintf(f, "%s{\"requests\": %" PRIu64 ", \"misses\": %" PRIu64
			", \"worst_ms\": %.3f, \"be\": %" PRIu64 ", \"survive\": %s}", i ? ", " : "",
			r->stream_res[i].requests, r->stream_res[i].misses, r->stream_res[i].worst_ms,
			r->stream_res[i].be, r->stream_res[i].survive ? "true" : "false");
	fprintf(f, "]}");
}

void sim_report_text(FILE *f, const struct sim_scenario *sc, const struct sim_result *r)
{
	fprintf(f, "%s %s: %zu streams, RT load %.2f MiB/s\n", sim_placement_name(r->placement),
		cw_sched_policy_name(r->policy), r->streams, r->rt_load_mb_s);
	fprintf(f, "  delta-L per disk (ms):");
	for (unsigned d = 0; d < sc->disks; d++) {
		fputc(' ', f);
		ms_or_null(f, r->delta_l_ns[d]);
	}
	fprintf(f, "  min ");
	ms_or_null(f, r->delta_l_min_ns);
	/* Under the paper's plan the budget is ΔL and there is no automatic
	 * server: nothing more to say, and the paper's figures read the same. */
	if (sc->plan != SIM_PLAN_PAPER) {
		fprintf(f, "\n  BE budget per disk (ms, plan %s):", sim_plan_name(sc->plan));
		for (unsigned d = 0; d < sc->disks; d++) {
			fputc(' ', f);
			ms_or_null(f, r->be_budget_ns[d]);
		}
		fprintf(f, "  min ");
		ms_or_null(f, r->be_budget_min_ns);
		fprintf(f, "; server slice (ms):");
		for (unsigned d = 0; d < sc->disks; d++)
			fprintf(f, " %.3f", (double)r->server_slice_ns[d] / 1e6);
	}
	fprintf(f, "\n  RT: %" PRIu64 " requests, %" PRIu64 " deadline misses, %" PRIu64
		" over C, least slack ", r->rt_done, r->rt_misses, r->rt_overruns);
	ms_or_null(f, r->rt_min_slack_ns);
	fprintf(f, " ms\n  BE: %" PRIu64 " requests, %" PRIu64 " done, %" PRIu64
		" refused, %" PRIu64 " over expected; latency mean %.2f ms, p50 %.2f, p99 %.2f, max %.2f;"
		" partition 0 mean %.2f ms\n",
		r->be_requests, r->be_done, r->be_rejected, r->be_overruns, r->be_mean_ms,
		r->be_p50_ms, r->be_p99_ms, r->be_max_ms, r->be_part0_mean_ms);
	if (sc->cache_pct)
		fprintf(f, "  cache (%u%% of the BE blocks): hit ratio %.3f, %" PRIu64 " hits, %" PRIu64
			" misses, %" PRIu64 " promotions, %" PRIu64 " demotions\n", sc->cache_pct,
			r->cache_hits + r->cache_misses ?
			(double)r->cache_hits / (double)(r->cache_hits + r->cache_misses) : 0,
			r->cache_hits, r->cache_misses, r->cache_promotions, r->cache_demotions);
	if (sc->move_at_ns >= 0) {
		fprintf(f, "  move from %.1f s: %" PRIu64 " of %" PRIu64 " blocks moved, %" PRIu64
			" failed, %" PRIu64 " copies, ", r->move_start_s, r->move_done,
			r->move_blocks, r->move_failed, r->move_copies);
		if (r->move_end_s >= 0)
			fprintf(f, "done at %.1f s (%.1f s, %.2f MiB/s)\n", r->move_end_s,
				r->move_end_s - r->move_start_s,
				r->move_end_s > r->move_start_s ?
				(double)r->move_done * (double)sc->be_pblock_bytes / SIM_MIB /
				(r->move_end_s - r->move_start_s) : 0);
		else
			fprintf(f, "unfinished at the end of the run\n");
		fprintf(f, "  BE blocks per disk at the end:");
		for (unsigned d = 0; d < sc->disks; d++)
			fprintf(f, " %" PRIu64, r->be_blocks_on[d]);
		fprintf(f, "\n  BE latency by arrival:");
		for (unsigned ph = 0; ph < 3; ph++)
			fprintf(f, "%s %s the move %" PRIu64 " requests, mean %.2f ms, p99 %.2f",
				ph ? ";" : "", phase[ph], r->be_phase_n[ph], r->be_phase_mean_ms[ph],
				r->be_phase_p99_ms[ph]);
		fprintf(f, "\n");
	}
	if (sc->fail_disk >= 0)
		fail_text(f, sc, r);
	fprintf(f, "  BE dispatched in slack %" PRIu64 ", on idle disks %" PRIu64
		", by the server %" PRIu64 "\n", r->be_slack, r->be_idle, r->be_server);
	if (r->rt_overruns || r->be_overruns)
		fprintf(f, "  model error: requests took longer than the model says (a slow bus?)\n");
	if (r->margin_raises || r->slack_stopped)
		fprintf(f, "  overrun watch: margin raised %" PRIu64 " times, to %u%% at most; "
			"%" PRIu64 " disk(s) gave best effort no more slack\n", r->margin_raises,
			r->margin_max_ppm / 10000, r->slack_stopped);
	fprintf(f, "  utilisation:");
	for (unsigned d = 0; d < sc->disks; d++)
		fprintf(f, " %.3f", r->util[d]);
	fprintf(f, "\n");
	if (!r->n_clients)
		return;
	fprintf(f, "  BE order %s; best effort has %.1f%% of the least free disk; shares of the "
		"disks' time:\n", sim_be_order_name(r->be_order), r->be_capacity * 100);
	for (size_t i = 0; i < r->n_clients; i++) {
		const struct sim_client *c = &sc->clients[i];
		const struct sim_client_result *x = &r->clients[i];

		fprintf(f, "    %-10s w %-3u share %6.2f%% (%.2f MB/s, mean %.1f ms, p99 %.1f ms)",
			c->name, c->weight, x->share * 100, x->mb_s, x->mean_ms, x->p99_ms);
		if (x->resv_share > 0)
			fprintf(f, "  resv %.2f%%: %.3f met", x->resv_share * 100,
				x->share / x->resv_share);
		if (x->limit_share > 0)
			fprintf(f, "  limit %.2f%%: %.3f of it, throttled %.1f s", x->limit_share * 100,
				x->share / x->limit_share, x->throttled_s);
		fprintf(f, "\n");
	}
	fprintf(f, "  share_error_max=%.4f resv_met=%.3f limit_over=%.3f (-1: no such client)\n",
		r->share_error_max, r->resv_met, r->limit_over);
}

void sim_report_json(FILE *f, const struct sim_scenario *sc, const struct sim_result *r)
{
	fprintf(f, "{\"policy\": \"%s\", \"placement\": \"%s\", \"rt_load_mb_s\": %.4f, "
		"\"streams\": %zu, \"delta_l_ms\": ", cw_sched_policy_name(r->policy),
		sim_placement_name(r->placement), r->rt_load_mb_s, r->streams);
	ms_or_null(f, r->delta_l_min_ns);
	fprintf(f, ", \"delta_l_ms_per_disk\": [");
	for (unsigned d = 0; d < sc->disks; d++) {
		fprintf(f, d ? ", " : "");
		ms_or_null(f, r->delta_l_ns[d]);
	}
	fprintf(f, "], \"rt_requests\": %" PRIu64 ", \"rt_misses\": %" PRIu64
		", \"rt_overruns\": %" PRIu64 ", \"rt_min_slack_ms\": ", r->rt_done, r->rt_misses,
		r->rt_overruns);
	ms_or_null(f, r->rt_min_slack_ns);
	fprintf(f, ", \"be_requests\": %" PRIu64 ", \"be_done\": %" PRIu64
		", \"be_refused\": %" PRIu64 ", \"be_overruns\": %" PRIu64
		", \"margin_raises\": %" PRIu64 ", \"margin_max_pct\": %u"
		", \"slack_stopped\": %" PRIu64
		", \"be_mean_ms\": %.4f, \"be_p50_ms\": %.4f, \"be_p99_ms\": %.4f"
		", \"be_max_ms\": %.4f, \"be_part0_mean_ms\": %.4f, \"cache_hits\": %" PRIu64
		", \"cache_misses\": %" PRIu64 ", \"cache_promotions\": %" PRIu64
		", \"cache_demotions\": %" PRIu64 ", \"utilisation\": [",
		r->be_requests, r->be_done, r->be_rejected, r->be_overruns, r->margin_raises,
		r->margin_max_ppm / 10000, r->slack_stopped, r->be_mean_ms,
		r->be_p50_ms, r->be_p99_ms, r->be_max_ms, r->be_part0_mean_ms, r->cache_hits,
		r->cache_misses, r->cache_promotions, r->cache_demotions);
	for (unsigned d = 0; d < sc->disks; d++)
		fprintf(f, "%s%.4f", d ? ", " : "", r->util[d]);
	fprintf(f, "], \"be_all_mean_ms\": %.4f, \"be_all_p99_ms\": %.4f", r->be_all_mean_ms,
		r->be_all_p99_ms);
	if (sc->move_at_ns >= 0) {
		fprintf(f, ", \"move\": {\"blocks\": %" PRIu64 ", \"done\": %" PRIu64
			", \"failed\": %" PRIu64 ", \"copies\": %" PRIu64 ", \"start_s\": %.3f"
			", \"end_s\": ", r->move_blocks, r->move_done, r->move_failed,
			r->move_copies, r->move_start_s);
		if (r->move_end_s >= 0)
			fprintf(f, "%.3f", r->move_end_s);
		else
			fprintf(f, "null");
		fprintf(f, ", \"be_blocks_per_disk\": [");
		for (unsigned d = 0; d < sc->disks; d++)
			fprintf(f, "%s%" PRIu64, d ? ", " : "", r->be_blocks_on[d]);
		fprintf(f, "]");
		for (unsigned ph = 0; ph < 3; ph++) {
			fprintf(f, ", \"be_%s\": {\"requests\": %" PRIu64 ", \"mean_ms\": %.4f"
				", \"p99_ms\": %.4f}", phase[ph], r->be_phase_n[ph],
				r->be_phase_mean_ms[ph], r->be_phase_p99_ms[ph]);
		}
		fprintf(f, "}");
	}
	if (sc->fail_disk >= 0)
		fail_json(f, r);
	fprintf(f, ", \"be_order\": \"%s\", \"be_capacity\": %.6f, \"clients\": [",
		sim_be_order_name(r->be_order), r->be_capacity);
	for (size_t i = 0; i < r->n_clients; i++) {
		const struct sim_client_result *x = &r->clients[i];

		fprintf(f, "%s{\"name\": \"%s\", \"weight\": %u, \"requests\": %" PRIu64
			", \"mb_s\": %.4f, \"share\": %.6f, \"resv_share\": %.6f"
			", \"resv_part\": %.6f, \"limit_share\": %.6f, \"throttled_s\": %.3f"
			", \"mean_ms\": %.3f, \"p99_ms\": %.3f}", i ? ", " : "", sc->clients[i].name,
			sc->clients[i].weight, x->requests, x->mb_s, x->share, x->resv_share,
			x->resv_part, x->limit_share, x->throttled_s, x->mean_ms, x->p99_ms);
	}
	fprintf(f, "], \"share_error_max\": %.6f, \"resv_met\": %.6f, \"limit_over\": %.6f",
		r->share_error_max, r->resv_met, r->limit_over);
	if (sc->plan != SIM_PLAN_PAPER) {
		fprintf(f, ", \"plan\": \"%s\", \"be_budget_ms\": ", sim_plan_name(sc->plan));
		ms_or_null(f, r->be_budget_min_ns);
		fprintf(f, ", \"be_budget_ms_per_disk\": [");
		for (unsigned d = 0; d < sc->disks; d++) {
			fprintf(f, d ? ", " : "");
			ms_or_null(f, r->be_budget_ns[d]);
		}
		fprintf(f, "], \"server_slice_ms_per_disk\": [");
		for (unsigned d = 0; d < sc->disks; d++)
			fprintf(f, "%s%.3f", d ? ", " : "", (double)r->server_slice_ns[d] / 1e6);
		fprintf(f, "]");
	}
	fprintf(f, ", \"events\": %" PRIu64 "}\n", r->events);
}

void sim_report_csv_header(FILE *f)
{
	fprintf(f, "placement,policy,streams,rt_load_mb_s,delta_l_ms,rt_requests,rt_misses,"
		"rt_overruns,be_done,be_refused,be_mean_ms,be_p50_ms,be_p99_ms,be_max_ms,"
		"util_mean,be_part0_mean_ms\n");
}

void sim_report_csv(FILE *f, const struct sim_result *r, unsigned disks)
{
	double u = 0;

	for (unsigned d = 0; d < disks; d++)
		u += r->util[d];
	fprintf(f, "%s,%s,%zu,%.4f,", sim_placement_name(r->placement),
		cw_sched_policy_name(r->policy), r->streams, r->rt_load_mb_s);
	if (r->delta_l_min_ns != CW_ADMIT_NO_LIMIT)
		fprintf(f, "%.3f", (double)r->delta_l_min_ns / 1e6);
	fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		",%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", r->rt_done, r->rt_misses, r->rt_overruns,
		r->be_done, r->be_rejected, r->be_mean_ms, r->be_p50_ms, r->be_p99_ms,
		r->be_max_ms, u / disks, r->be_part0_mean_ms);
}

int sim_plot(const char *dir, const char *name, const char *script)
{
	char path[PATH_MAX], gp[64];
	FILE *f;
	pid_t pid;
	int status;

	snprintf(gp, sizeof(gp), "%s.gp", name);
	if (snprintf(path, sizeof(path), "%s/%s", dir, gp) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fputs(script, f);
	if (fclose(f) != 0)
		return -EIO;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* the script names its files relative to the output directory */
		if (chdir(dir) < 0)
			_exit(126);
		execlp("gnuplot", "gnuplot", gp, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}
