/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `cwsim run` and `cwsim sweep`: Bosch & Mullender's section 4
 * experiments.  run simulates one load (as many streams as the scenario
 * asks or admission allows) per placement and policy; sweep redoes the
 * paper's Figure 2 (ΔL against the admitted RT load, per placement and
 * block size) and Figure 3 (BE latency against RT load, per policy, for
 * rotation and random) and writes CSV and plots.  run -o DIR of a
 * scenario with a failure (fail =) writes the run's timeline and its
 * figure there (fail.csv, fail.png, fail.svg).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

struct cli {
	bool json;
	bool quick;
	const char *preset;
	const char *scenario;
	const char *out_dir;
	bool out_set;			/* -o given */
	struct sim_scenario sc;
};

static void usage(const char *cmd)
{
	fprintf(stderr,
		"usage: cwsim %s [--json] [--quick] [--preset NAME] [--set KEY=VALUE]...%s [SCENARIO]\n"
		"  a SCENARIO file or --preset (paper, quick) is needed; see cwsim(1)\n",
		cmd, !strcmp(cmd, "sweep") || !strcmp(cmd, "run") ? " [-o DIR]" : !strcmp(cmd, "setup") ? " [-o TRACE.csv]" : "");
}

/* Parses the command line into cli->sc: defaults, then the preset or the
 * file, then --quick, then each --set in order.  Returns -1 to go on, or
 * the exit status to end with. */
static int parse_cli(const char *cmd, int argc, char **argv, struct cli *c)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "preset", required_argument, NULL, 'p' },
		{ "set", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_free_ char **sets = calloc((size_t)argc + 1, sizeof(*sets));
	size_t n_sets = 0;
	int o;

	if (!sets)
		return EXIT_FAILURE;
	c->out_dir = "cwsim-sweep";
	optind = 1;
	while ((o = getopt_long(argc, argv, "jqp:s:o:h", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			c->json = true;
			break;
		case 'q':
			c->quick = true;
			break;
		case 'p':
			c->preset = optarg;
			break;
		case 's':
			sets[n_sets++] = optarg;
			break;
		case 'o':
			c->out_dir = optarg;
			c->out_set = true;
			break;
		case 'h':
			usage(cmd);
			return EXIT_SUCCESS;
		default:
			usage(cmd);
			return SIM_EXIT_USAGE;
		}
	}
	if (optind < argc)
		c->scenario = argv[optind++];
	if (optind < argc || (!c->scenario && !c->preset) || (c->scenario && c->preset)) {
		usage(cmd);
		return SIM_EXIT_USAGE;
	}
	if (sim_scenario_from_args(c->preset, c->scenario, c->quick, sets, n_sets, &c->sc) < 0)
		return SIM_EXIT_USAGE;
	return -1;
}

static double wall_now(void)
{
	return (double)cw_now_ns() / 1e9;
}

/* The BE trace and the partition size it is folded into. */
static int load_trace(const struct sim_scenario *sc, struct sim_trace *ret)
{
	uint64_t part_bytes;
	int e = sim_be_part_bytes(sc, &part_bytes);

	return e < 0 ? e : sim_trace_load(sc, part_bytes, ret);
}

/* What run and sweep share: the command line, the BE trace, and the
 * simulations done so far, for the speed line. */
struct session {
	struct cli c;
	struct sim_trace trace;
	uint64_t events;
	unsigned runs;
	double t0;
};

/* The command line and the BE trace: -1 to go on, or an exit status.
 * Bad input is found here, before anything is written. */
static int prepare(const char *cmd, int argc, char **argv, struct session *s)
{
	int e;

	*s = (struct session){ .t0 = wall_now() };
	e = parse_cli(cmd, argc, argv, &s->c);
	if (e >= 0)
		return e;
	if (load_trace(&s->c.sc, &s->trace) < 0)
		return SIM_EXIT_USAGE;
	return -1;
}

/* One simulation, counted for the speed line and in JSON mode reported on
 * stdout; a failure is said here. */
static int simulate(struct session *s, const struct sim_setup *setup, size_t streams,
		    unsigned policy, unsigned order, struct sim_result *r)
{
	int e = sim_run_be(setup, streams, &s->trace, policy, order, r);

	if (e < 0) {
		fprintf(stderr, "cwsim: simulation failed: %s\n", strerror(-e));
		return e;
	}
	s->events += r->events;
	s->runs++;
	if (s->c.json)
		sim_report_json(stdout, &s->c.sc, r);
	return 0;
}

static void print_speed(const struct session *s)
{
	double wall = wall_now() - s->t0;

	fprintf(stderr, "cwsim: %u runs, %" PRIu64 " events in %.2f s: %.0f events/s\n", s->runs,
		s->events, wall, wall > 0 ? (double)s->events / wall : 0.0);
}

static int plot(const char *dir, const char *name, const char *plt, const char *size);

/* The failure's figure from DIR/fail.csv (timeline_write's columns):
 * each disk's busy share and the rebuild's part of it, the latest stream
 * request against its deadline, the rebuild's progress; the failure and
 * the rebuild's end marked. */
static int fail_figure(const struct cli *c, const struct sim_result *r)
{
	const struct sim_scenario *sc = &c->sc;
	_cleanup_free_ char *plt = NULL;
	size_t len = 0;
	FILE *p = open_memstream(&plt, &len);
	char marks[256], spare[64];
	bool surv = false, others = false;
	int n;

	for (size_t i = 0; i < r->n_stream_results; i++) {
		surv |= r->stream_res[i].survive;
		others |= !r->stream_res[i].survive;
	}
	if (!surv && !others)
		surv = true;	/* an empty panel, but a panel */

	if (r->fail_spare >= 0)
		snprintf(spare, sizeof(spare), "spare %d rebuilt in slack", r->fail_spare);
	else
		snprintf(spare, sizeof(spare), "no spare replaced it");
	if (!p)
		return -ENOMEM;
	n = snprintf(marks, sizeof(marks), "set arrow 1 from %.3f, graph 0 to %.3f, graph 1 nohead "
		     "dt 2 lc rgb 'red'\n", r->fail_at_s, r->fail_at_s);
	if (r->rebuild_end_s >= 0)
		snprintf(marks + n, sizeof(marks) - (size_t)n, "set arrow 2 from %.3f, graph 0 to "
			 "%.3f, graph 1 nohead dt 2 lc rgb 'dark-green'\n", r->rebuild_end_s,
			 r->rebuild_end_s);
	fprintf(p, "set datafile separator ','\nset key outside right\nset grid\n"
		"set lmargin 12\nset rmargin 30\n"
		"set xrange [0:%.3f]\n"
		"set multiplot layout 3,1 title 'cwsim: disk %d of %u x %s fails at %.0f s, "
		"%s (%zu streams, %s)'\n%s",
		(double)sc->duration_ns / 1e9, sc->fail_disk, sc->disks, sc->model.name,
		r->fail_at_s, spare, r->streams,
		r->survive_misses + r->other_misses ? "misses" : "0 misses", marks);
	fprintf(p, "set title 'disk time: busy (solid), of it the rebuild (dashed)'\n"
		"set ylabel 'share'\nset yrange [0:1.05]\nplot ");
	for (unsigned d = 0; d < sc->disks; d++)
		fprintf(p, "%s'fail.csv' every ::1 using 1:%u with lines lw 2 lc %u title "
			"'disk %u%s', 'fail.csv' every ::1 using 1:%u with lines dt 2 lc %u notitle",
			d ? ", \\\n  " : "", 2 + 2 * d, d + 1, d,
			(int)d == sc->fail_disk ? " (fails)" : (sc->spares >> d & 1) ? " (spare)" : "",
			3 + 2 * d, d + 1);
	fprintf(p, "\nset title 'latest stream request against its deadline (below 0: in time)'\n"
		"set ylabel 'ms after deadline'\nset autoscale y\nset yrange [*:*]\n"
		"plot 0 with lines lc rgb 'black' title 'deadline', ");
	if (surv)
		fprintf(p, "'fail.csv' every ::1 using 1:%u with linespoints pt 7 ps 0.4 title "
			"'admitted to survive'%s", 2 + 2 * sc->disks, others ? ", " : "");
	if (others)
		fprintf(p, "'fail.csv' every ::1 using 1:%u with linespoints pt 6 ps 0.4 title "
			"'not admitted to survive'", 3 + 2 * sc->disks);
	fprintf(p, "\n");
	fprintf(p, "set title 'rebuild: MiB written to the spare'\nset xlabel 'time (s)'\n"
		"set ylabel 'MiB'\nplot 'fail.csv' every ::1 using 1:%u with lines lw 2 "
		"title 'rebuilt'\nunset multiplot\n", 4 + 2 * sc->disks);
	if (fclose(p) != 0)
		return -ENOMEM;
	return plot(c->out_dir, "fail", plt, "1000,1000");
}

int sim_cmd_run(int argc, char **argv)
{
	struct session s;
	struct cli *c = &s.c;
	int e = prepare("run", argc, argv, &s);

	if (e >= 0)
		return e;
	e = 0;
	if (c->out_set && c->sc.fail_disk >= 0) {
		if (__builtin_popcount(c->sc.policies) != 1 ||
		    __builtin_popcount(c->sc.be_orders) != 1) {
			fprintf(stderr, "cwsim: run -o: one policy and one BE order, not several\n");
			return SIM_EXIT_USAGE;
		}
		if (mkdir(c->out_dir, 0777) < 0 && errno != EEXIST) {
			fprintf(stderr, "cwsim: %s: %m\n", c->out_dir);
			return EXIT_FAILURE;
		}
		snprintf(c->sc.timeline_path, sizeof(c->sc.timeline_path), "%s/fail.csv",
			 c->out_dir);
	}
	for (unsigned pl = 0; pl < SIM_N_PLACEMENTS && e == 0; pl++) {
		struct sim_setup setup;

		if (!(c->sc.placements & 1u << pl))
			continue;
		e = sim_setup_build(&c->sc, pl, c->sc.video, c->sc.streams, NULL, NULL, &setup);
		if (e < 0)
			break;
		if (!c->json)
			printf("%s: %zu streams admitted (%.2f MiB/s); next: %s\n",
			       sim_placement_name(pl), setup.n_streams,
			       sim_setup_load_mb_s(&setup, setup.n_streams), setup.refusal);
		for (unsigned p = 0; p < CW_SCHED_N_POLICIES && e == 0; p++)
			for (unsigned o = 0; o < SIM_N_BEQ && e == 0; o++) {
				struct sim_result r;

				if (!(c->sc.policies & 1u << p) || !(c->sc.be_orders & 1u << o))
					continue;
				e = simulate(&s, &setup, setup.n_streams, p, o, &r);
				if (e == 0 && !c->json)
					sim_report_text(stdout, &c->sc, &r);
				if (e == 0 && c->sc.timeline_path[0])
					e = fail_figure(c, &r);
			}
		sim_setup_done(&setup);
	}
	sim_trace_done(&s.trace);
	if (e < 0)
		return EXIT_FAILURE;
	print_speed(&s);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* ---- sweep ------------------------------------------------------------- */

struct curve_out {
	FILE *csv, *dat;
	const char *name;
	double max_load;
	size_t points;
};

static void curve_point(void *ud, size_t streams, double load, int64_t dl)
{
	struct curve_out *o = ud;

	fprintf(o->csv, "%s,%zu,%.4f,%.3f\n", o->name, streams, load, (double)dl / 1e6);
	fprintf(o->dat, "%.4f %.6f\n", load, (double)dl / 1e9);
	o->max_load = load;
	o->points++;
}

static FILE *open_out(const char *dir, const char *name)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f)
		fprintf(stderr, "cwsim: %s: %m\n", path);
	return f;
}

/* Writes DIR/NAME.plt (the plot) and draws it as PNG and SVG of the size
 * given. */
static int plot(const char *dir, const char *name, const char *plt, const char *size)
{
	char file[64], script[512];
	FILE *f;
	int e;

	snprintf(file, sizeof(file), "%s.plt", name);
	f = open_out(dir, file);
	if (!f)
		return -EIO;
	fputs(plt, f);
	if (fclose(f) != 0)
		return -EIO;
	snprintf(script, sizeof(script),
		 "set terminal pngcairo size %s noenhanced\nset output '%s.png'\nload '%s'\n"
		 "set terminal svg size %s noenhanced\nset output '%s.svg'\nload '%s'\n",
		 size, name, file, size, name, file);
	e = sim_plot(dir, name, script);
	if (e == -ENOENT)
		fprintf(stderr, "cwsim: gnuplot not found: %s/%s.gp written, plots skipped\n", dir,
			name);
	else if (e < 0)
		fprintf(stderr, "cwsim: gnuplot failed on %s/%s.gp\n", dir, name);
	return 0;
}

/* Figure 2: admission alone, streams added until refused, per placement
 * and video block size. */
static int sweep_fig2(const struct cli *c, FILE *out)
{
	static const struct {
		enum sim_placement pl;
		enum sim_video video;
		unsigned scale;
		const char *name;
	} curves[] = {
		{ SIM_ROTATION, SIM_VIDEO_817, 1, "rotation, 1 MiB video blocks" },
		{ SIM_ROTATION, SIM_VIDEO_245, 1, "rotation, 256 KiB video blocks" },
		{ SIM_RANDOM, SIM_VIDEO_817, 1, "random, 1 MiB video blocks" },
		{ SIM_RANDOM, SIM_VIDEO_245, 1, "random, 256 KiB video blocks" },
		{ SIM_SINGLE, SIM_VIDEO_817, 1, "single, 1 MiB video blocks" },
		{ SIM_SINGLE, SIM_VIDEO_817, 2, "single (large buffers), 2 MiB video blocks" },
	};
	_cleanup_free_ char *plt = NULL;
	size_t plt_len = 0;
	FILE *csv, *dat, *p;
	int e = 0;

	csv = open_out(c->out_dir, "fig2.csv");
	dat = csv ? open_out(c->out_dir, "fig2.dat") : NULL;
	if (!dat) {
		if (csv)
			fclose(csv);
		return -EIO;
	}
	fprintf(csv, "curve,streams,rt_load_mb_s,delta_l_ms\n");
	p = open_memstream(&plt, &plt_len);
	if (!p) {
		fclose(csv);
		fclose(dat);
		return -ENOMEM;
	}
	fprintf(p, "set title 'Figure 2: aggregate real-time load and delta-L (%u x %s)'\n"
		"set xlabel 'aggregate RT load (MiB/s)'\nset ylabel 'least delta-L over the disks (s)'\n"
		"set key top right\nset grid\nplot ", c->sc.disks, c->sc.model.name);
	for (size_t i = 0; i < CW_ARRAY_SIZE(curves) && e == 0; i++) {
		struct sim_scenario sc = c->sc;
		struct curve_out o = { .csv = csv, .dat = dat, .name = curves[i].name };
		struct sim_setup s;

		sc.buffer_scale *= curves[i].scale;
		fprintf(dat, "# %s\n", curves[i].name);
		e = sim_setup_build(&sc, curves[i].pl, curves[i].video, 0, curve_point, &o, &s);
		if (e < 0)
			break;
		if (!o.points)
			fprintf(dat, "0 0\n");
		fprintf(dat, "\n\n");
		fprintf(p, "%s'fig2.dat' index %zu using 1:2 with linespoints title '%s'",
			i ? ", \\\n  " : "", i, curves[i].name);
		fprintf(out, "admitted: %-44s %3zu streams, %6.2f MiB/s\n", curves[i].name,
			s.n_streams, o.max_load);
		sim_setup_done(&s);
	}
	fprintf(p, "\n");
	fclose(p);
	if (fclose(csv) != 0 || fclose(dat) != 0)
		e = e ? e : -EIO;
	if (e == 0)
		e = plot(c->out_dir, "fig2", plt, "1000,650");
	return e;
}

/* The load points: every stream count if they fit, else loads of them
 * spread evenly from 0 to the most admitted (one point: the most). */
static size_t load_point(size_t max, unsigned loads, unsigned i)
{
	if (max + 1 <= loads)
		return i;
	if (loads < 2)
		return max;
	return (size_t)(((uint64_t)i * max + (loads - 1) / 2) / (loads - 1));
}

static int sweep_fig3(struct session *s)
{
	const struct cli *c = &s->c;
	FILE *csv = open_out(c->out_dir, "fig3.csv"), *f;
	_cleanup_free_ char *plt = NULL;
	size_t plt_len = 0;
	unsigned panel = 0, n_panels = 0;
	int e = 0;

	if (!csv)
		return -EIO;
	sim_report_csv_header(csv);
	f = open_memstream(&plt, &plt_len);
	if (!f) {
		fclose(csv);
		return -ENOMEM;
	}
	for (unsigned pl = 0; pl < SIM_N_PLACEMENTS; pl++)
		n_panels += !!(c->sc.placements & 1u << pl);
	fprintf(f, "set datafile separator ','\nset logscale y\nset grid\nset key top left\n"
		"set xlabel 'aggregate RT load (MiB/s)'\nset ylabel 'mean BE latency (ms)'\n"
		"set multiplot layout %u,1 title 'Figure 3: best-effort latency vs real-time load'\n",
		n_panels);
	for (unsigned pl = 0; pl < SIM_N_PLACEMENTS && e == 0; pl++) {
		struct sim_setup setup;
		unsigned npts;
		bool first = true;

		if (!(c->sc.placements & 1u << pl))
			continue;
		e = sim_setup_build(&c->sc, pl, c->sc.video, 0, NULL, NULL, &setup);
		if (e < 0)
			break;
		npts = setup.n_streams + 1 <= c->sc.loads ? (unsigned)setup.n_streams + 1 :
							     c->sc.loads;
		fprintf(f, "set title '%s'\nplot ", sim_placement_name(pl));
		for (unsigned p = 0; p < CW_SCHED_N_POLICIES && e == 0; p++) {
			if (!(c->sc.policies & 1u << p))
				continue;
			fprintf(f, "%s'fig3.csv' using (strcol(1) eq '%s' && strcol(2) eq '%s' ? $4 : NaN):"
				"($11 > 0 ? $11 : NaN) with linespoints title '%s'",
				first ? "" : ", \\\n  ", sim_placement_name(pl),
				cw_sched_policy_name(p), cw_sched_policy_name(p));
			first = false;
			for (unsigned i = 0; i < npts && e == 0; i++) {
				size_t k = load_point(setup.n_streams, npts, i);
				struct sim_result r;

				if (i && k == load_point(setup.n_streams, npts, i - 1))
					continue;
				e = simulate(s, &setup, k, p, (unsigned)__builtin_ctz(c->sc.be_orders),
					     &r);
				if (e < 0)
					break;
				sim_report_csv(csv, &r, c->sc.disks);
				if (!c->json)
					printf("%-8s %-7s %3zu streams %6.2f MiB/s  delta-L %9.1f ms  "
					       "misses %3" PRIu64 "  BE mean %9.2f p99 %9.2f ms\n",
					       sim_placement_name(pl), cw_sched_policy_name(p), r.streams,
					       r.rt_load_mb_s,
					       r.delta_l_min_ns == CW_ADMIT_NO_LIMIT ? -1.0 :
					       (double)r.delta_l_min_ns / 1e6,
					       r.rt_misses, r.be_mean_ms, r.be_p99_ms);
			}
		}
		fprintf(f, "\n");
		panel++;
		sim_setup_done(&setup);
	}
	fprintf(f, "unset multiplot\n");
	fclose(f);
	if (fclose(csv) != 0)
		e = e ? e : -EIO;
	if (e == 0)
		e = plot(c->out_dir, "fig3", plt, "1000,1200");
	return e;
}

/* With BE clients: each order at each load, how the clients fare (the
 * issue's comparison of fifo, rbfq and sfc), on the first placement. */
static int sweep_beqos(struct session *s)
{
	const struct cli *c = &s->c;
	FILE *csv, *f;
	_cleanup_free_ char *plt = NULL;
	size_t plt_len = 0;
	static const struct { const char *col, *title; bool log; } panels[] = {
		{ "$6", "weighted clients: largest share error against the weights", false },
		{ "$7", "reserved client: share / reservation (1 = met)", true },
		{ "$9", "limited client: share / limit (1 = at the limit)", true },
	};
	struct sim_setup setup;
	unsigned pl = (unsigned)__builtin_ctz(c->sc.placements), npts;
	int e;

	if (!c->sc.n_clients)
		return 0;
	csv = open_out(c->out_dir, "beqos.csv");
	if (!csv)
		return -EIO;
	fprintf(csv, "placement,order,streams,rt_load_mb_s,rt_misses,share_error_max,resv_met,"
		"limit_over,limit_ratio\n");
	e = sim_setup_build(&c->sc, pl, c->sc.video, 0, NULL, NULL, &setup);
	if (e < 0) {
		fclose(csv);
		return e;
	}
	npts = setup.n_streams + 1 <= c->sc.loads ? (unsigned)setup.n_streams + 1 : c->sc.loads;
	for (unsigned o = 0; o < SIM_N_BEQ && e == 0; o++)
		for (unsigned i = 0; i < npts && e == 0 && (c->sc.be_orders & 1u << o); i++) {
			size_t k = load_point(setup.n_streams, npts, i);
			unsigned p = (unsigned)__builtin_ctz(c->sc.policies);
			struct sim_result r;

			if (i && k == load_point(setup.n_streams, npts, i - 1))
				continue;
			e = simulate(s, &setup, k, p, o, &r);
			if (e < 0)
				break;
			fprintf(csv, "%s,%s,%zu,%.4f,%" PRIu64 ",%.6f,%.6f,%.6f,%.6f\n",
				sim_placement_name(pl), sim_be_order_name(o), r.streams, r.rt_load_mb_s,
				r.rt_misses, r.share_error_max, r.resv_met, r.limit_over, r.limit_ratio);
			if (!c->json)
				printf("%-8s %-4s %3zu streams %6.2f MB/s  misses %3" PRIu64
				       "  share error %.4f  resv met %.3f  limit over %.3f\n",
				       sim_placement_name(pl), sim_be_order_name(o), r.streams,
				       r.rt_load_mb_s, r.rt_misses, r.share_error_max, r.resv_met,
				       r.limit_over);
		}
	sim_setup_done(&setup);
	if (fclose(csv) != 0)
		e = e ? e : -EIO;
	if (e < 0)
		return e;
	f = open_memstream(&plt, &plt_len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "set datafile separator ','\nset grid\nset key top left\n"
		"set xlabel 'aggregate RT load (MB/s)'\n"
		"set multiplot layout 3,1 title 'Best effort between clients: %s, per BE order'\n",
		sim_placement_name(pl));
	for (size_t k = 0; k < CW_ARRAY_SIZE(panels); k++) {
		bool first = true;

		fprintf(f, "%s\nset title '%s'\nplot ", panels[k].log ? "set logscale y" :
			"unset logscale y", panels[k].title);
		for (unsigned o = 0; o < SIM_N_BEQ; o++) {
			if (!(c->sc.be_orders & 1u << o))
				continue;
			fprintf(f, "%s'beqos.csv' using (strcol(2) eq '%s' ? $4 : NaN):(%s > 0 ? %s : NaN)"
				" with linespoints title '%s'", first ? "" : ", \\\n  ",
				sim_be_order_name(o), panels[k].col, panels[k].col, sim_be_order_name(o));
			first = false;
		}
		fprintf(f, "\n");
	}
	fprintf(f, "unset multiplot\n");
	fclose(f);
	return plot(c->out_dir, "beqos", plt, "1000,1200");
}

int sim_cmd_sweep(int argc, char **argv)
{
	struct session s;
	const struct cli *c = &s.c;
	int e = prepare("sweep", argc, argv, &s);

	if (e >= 0)
		return e;
	if (c->sc.pool_path[0]) {
		/* its curves lay out other streams, other placements */
		fprintf(stderr, "cwsim sweep: a scenario on a pool is for run, setup and plan\n");
		sim_trace_done(&s.trace);
		return SIM_EXIT_USAGE;
	}
	if (mkdir(c->out_dir, 0777) < 0 && errno != EEXIST) {
		fprintf(stderr, "cwsim: %s: %m\n", c->out_dir);
		sim_trace_done(&s.trace);
		return EXIT_FAILURE;
	}
	/* in JSON mode stdout carries only the objects */
	e = sweep_fig2(c, c->json ? stderr : stdout);
	if (e == 0)
		e = sweep_fig3(&s);
	if (e == 0)
		e = sweep_beqos(&s);
	sim_trace_done(&s.trace);
	if (e < 0) {
		fprintf(stderr, "cwsim: sweep failed: %s\n", strerror(-e));
		return EXIT_FAILURE;
	}
	print_speed(&s);
	if (!c->json)
		printf("wrote %s/fig2.csv, fig3.csv and their plots\n", c->out_dir);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int sim_cmd_model(int argc, char **argv)
{
	char buf[4096];
	struct cw_model m;
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: cwsim model PRESET\npresets:");
		for (const char *const *p = cw_model_preset_names(); *p; p++)
			fprintf(stderr, " %s", *p);
		fprintf(stderr, "\n");
		return SIM_EXIT_USAGE;
	}
	if (cw_model_preset(argv[1], &m) < 0) {
		fprintf(stderr, "cwsim: unknown preset '%s'\n", argv[1]);
		return SIM_EXIT_USAGE;
	}
	n = cw_model_format(&m, buf, sizeof(buf));
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		fprintf(stderr, "cwsim: cannot format the model\n");
		return EXIT_FAILURE;
	}
	printf("%s\n", buf);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* ---- setup: what a live run of the scenario needs ----------------------- */

/* Prints the first placement's admitted streams and the BE partitions as
 * one JSON line, and with -o FILE writes the BE trace there as CSV (the
 * form `be = csv:FILE` reads back): the live-vs-sim experiment plays the
 * same streams and replays the same trace against clockwised. */
int sim_cmd_setup(int argc, char **argv)
{
	struct session s;
	const struct cli *c = &s.c;
	struct sim_setup setup;
	unsigned pl = 0;
	FILE *f = NULL;
	int e = prepare("setup", argc, argv, &s);

	if (e >= 0)
		return e;
	while (!(c->sc.placements & 1u << pl))
		pl++;
	e = sim_setup_build(&c->sc, pl, c->sc.video, c->sc.streams, NULL, NULL, &setup);
	if (e < 0) {
		sim_trace_done(&s.trace);
		return EXIT_FAILURE;
	}
	if (strcmp(c->out_dir, "cwsim-sweep") != 0) {
		f = fopen(c->out_dir, "we");
		if (!f) {
			fprintf(stderr, "cwsim: %s: %m\n", c->out_dir);
			e = -EIO;
		}
	}
	if (f) {
		fprintf(f, "time,disk,offset,size,rw\n");
		for (size_t i = 0; i < s.trace.n; i++) {
			const struct sim_be_rec *r = &s.trace.v[i];

			fprintf(f, "%" PRId64 ".%09" PRId64 ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ",%c\n",
				r->t_ns / CW_NS_PER_S, r->t_ns % CW_NS_PER_S, r->part, r->off,
				r->bytes, r->write ? 'W' : 'R');
		}
		if (fclose(f) != 0)
			e = -EIO;
	}
	printf("{\"placement\": \"%s\", \"disks\": %u, \"be_partitions\": %u, "
	       "\"be_part_bytes\": %" PRIu64 ", \"be_requests\": %zu, \"clip_blocks\": %" PRIu64
	       ", \"streams\": [", sim_placement_name(pl), c->sc.disks, c->sc.be_partitions,
	       setup.be_part_bytes, s.trace.n, setup.clip);
	for (size_t i = 0; i < setup.n_streams; i++)
		printf("%s{\"video\": %s, \"rate\": %" PRIu64 ", \"block\": %" PRIu64 "}",
		       i ? ", " : "", setup.streams[i].video ? "true" : "false",
		       setup.streams[i].bandwidth_bps, setup.streams[i].block_bytes);
	printf("], \"refusal\": \"%s\"", setup.refusal);
	if (setup.next_bps)
		printf(", \"next\": {\"rate\": %" PRIu64 ", \"block\": %" PRIu64 "}",
		       setup.next_bps, setup.next_block);
	printf("}\n");
	sim_setup_done(&setup);
	sim_trace_done(&s.trace);
	if (e < 0)
		return EXIT_FAILURE;
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
