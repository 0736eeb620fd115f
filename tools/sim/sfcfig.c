/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `cwsim irregularity`: the SFC paper's Figure 8 (Aref et al., section
 * 5.1) with the library's SFC order: mean irregularity and the standard
 * deviation of the waiting time against the window w, for SR+ER, SRP+ER,
 * SS+ER and SR+AE, each as a ratio to FCFS on the same arrivals.
 *
 * Requests arrive as a Poisson process (mean 25 ms apart, as in the
 * paper) and each takes 20 ms (a disk 80% busy); a request's point is its
 * priority (16 levels, uniform) and its deadline (uniform up to 1 s
 * ahead, 16 levels).  Irregularity is counted where the scheduler had a
 * choice: when a request is dispatched, every request still waiting that
 * lies below it in a dimension is one irregularity in that dimension
 * (section 4.1's pairs, restricted to requests queued together; over a
 * whole run almost every pair of requests is far apart in time and would
 * count for every order alike).  The paper uses four dimensions and a
 * simulated HP 97560; the SFC order here has priority, deadline and
 * position, and this experiment uses the first two.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "sim.h"

#define MEAN_GAP_NS (25 * CW_NS_PER_MS)
#define SERVICE_NS (20 * CW_NS_PER_MS)
#define HORIZON_NS CW_NS_PER_S
#define LEVELS 16

struct ireq {
	struct cw_sched_req r;
	int64_t arrival;
	size_t slot;		/* in the waiting list */
};

struct variant {
	const char *name;
	enum cw_sfc_policy policy;
	bool ae;
};

static const struct variant variants[] = {
	{ "SR+ER", CW_SFC_SR, false },
	{ "SRP+ER", CW_SFC_SRP, false },
	{ "SS+ER", CW_SFC_SS, false },
	{ "SR+AE", CW_SFC_SR, true },
};

/* One run over the requests: the irregularities and the waiting times'
 * standard deviation.  conf NULL: FCFS. */
static int one_run(struct ireq *q, size_t n, const struct cw_sched_sfc_conf *conf,
		   double *ret_irr, double *ret_sd)
{
	struct cw_sched_opts o;
	struct cw_sched *s = NULL;
	_cleanup_free_ struct ireq **wait = calloc(n ? n : 1, sizeof(*wait));
	struct ireq *cur = NULL;
	size_t next = 0, done = 0, n_wait = 0;
	int64_t now = 0, end = 0;
	double irr = 0, sum = 0, sum2 = 0;
	int e;

	if (!wait)
		return -ENOMEM;
	cw_sched_opts_init(&o);
	o.policy = CW_SCHED_EDF;
	o.beq = conf ? cw_sched_beq_sfc() : cw_sched_beq_fifo();
	o.beq_conf = conf;
	e = cw_sched_new(&o, &s);
	if (e < 0)
		return e;
	for (uint32_t p = 0; conf && p < LEVELS; p++) {
		struct cw_sched_client c = { .weight = 1, .prio = p };

		if ((e = cw_sched_set_client(s, p, &c)) < 0)
			goto out;
	}
	while (done < n) {
		struct cw_sched_decision d;
		int64_t t_arr = next < n ? q[next].arrival : INT64_MAX;

		if (!cur || t_arr <= end) {
			struct ireq *x = &q[next++];

			now = t_arr;
			x->r.priv_state_ = 0;
			x->slot = n_wait;
			wait[n_wait++] = x;
			if ((e = cw_sched_enqueue(s, &x->r, now)) < 0)
				goto out;
		} else {
			now = end;
			if ((e = cw_sched_complete(s, &cur->r, now, SERVICE_NS)) < 0)
				goto out;
			cur = NULL;
			done++;
		}
		if (cur)
			continue;
		if ((e = cw_sched_next(s, now, &d)) < 0)
			goto out;
		if (d.verdict != CW_SCHED_DISPATCH)
			continue;
		cur = (struct ireq *)d.req;
		end = now + SERVICE_NS;
		wait[cur->slot] = wait[--n_wait];
		wait[cur->slot]->slot = cur->slot;
		/* the waiting requests it goes before although they are lower */
		for (size_t k = 0; k < n_wait; k++)
			irr += (wait[k]->r.client < cur->r.client) +
			       (wait[k]->r.be_deadline_ns < cur->r.be_deadline_ns);
		sum += (double)(now - cur->arrival) / 1e6;
		sum2 += (double)(now - cur->arrival) / 1e6 * (double)(now - cur->arrival) / 1e6;
	}
	*ret_irr = irr;
	*ret_sd = sqrt(CW_MAX(0, sum2 / (double)n - (sum / (double)n) * (sum / (double)n)));
out:
	cw_sched_free(s);
	return e;
}

int sim_cmd_irregularity(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seconds", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out_dir = NULL;
	double seconds = 600;
	uint64_t seed = 1;
	_cleanup_free_ struct ireq *q = NULL;
	FILE *csv = NULL, *plt = NULL;
	struct sim_rng rng;
	double fcfs_irr, fcfs_sd;
	size_t n;
	int o, e;

	optind = 1;
	while ((o = getopt_long(argc, argv, "t:s:o:h", opts, NULL)) != -1) {
		char *end;

		switch (o) {
		case 't':
			seconds = strtod(optarg, &end);
			if (*end || !(seconds >= 1 && seconds <= 86400)) {
				fprintf(stderr, "cwsim: --seconds: expected 1..86400\n");
				return SIM_EXIT_USAGE;
			}
			break;
		case 's':
			seed = strtoull(optarg, &end, 10);
			if (*end || !*optarg) {
				fprintf(stderr, "cwsim: --seed: expected an unsigned integer\n");
				return SIM_EXIT_USAGE;
			}
			break;
		case 'o':
			out_dir = optarg;
			break;
		case 'h':
		default:
			fprintf(o == 'h' ? stdout : stderr,
				"usage: cwsim irregularity [--seconds N] [--seed N] [-o DIR]\n");
			return o == 'h' ? EXIT_SUCCESS : SIM_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: cwsim irregularity [--seconds N] [--seed N] [-o DIR]\n");
		return SIM_EXIT_USAGE;
	}
	n = (size_t)(seconds * 1e9 / MEAN_GAP_NS);
	q = calloc(n, sizeof(*q));
	if (!q)
		return EXIT_FAILURE;
	sim_rng_seed(&rng, seed, 7);
	for (size_t i = 0, t = 0; i < n; i++) {
		t += (size_t)(-log(1 - sim_rng_unit(&rng)) * MEAN_GAP_NS);
		q[i].arrival = (int64_t)t;
		q[i].r = (struct cw_sched_req){
			.cls = CW_SCHED_BE, .service_ns = SERVICE_NS,
			.client = sim_rng_below(&rng, LEVELS),
			.be_deadline_ns = (int64_t)t + 1 + (int64_t)sim_rng_below(&rng, HORIZON_NS),
		};
	}
	e = one_run(q, n, NULL, &fcfs_irr, &fcfs_sd);
	if (e < 0 || fcfs_irr <= 0) {
		fprintf(stderr, "cwsim: the FCFS run failed\n");
		return EXIT_FAILURE;
	}
	if (out_dir) {
		char path[PATH_MAX];

		if (mkdir(out_dir, 0777) < 0 && errno != EEXIST) {
			fprintf(stderr, "cwsim: %s: %m\n", out_dir);
			return EXIT_FAILURE;
		}
		snprintf(path, sizeof(path), "%s/fig8.csv", out_dir);
		csv = fopen(path, "we");
		if (!csv) {
			fprintf(stderr, "cwsim: %s: %m\n", path);
			return EXIT_FAILURE;
		}
		fprintf(csv, "curve,policy,window_pct,irregularity_vs_fcfs,wait_sd_vs_fcfs\n");
	}
	printf("mean irregularity (and waiting-time SD) as a ratio to FCFS, %zu requests\n", n);
	for (unsigned c = 0; c < CW_SFC_N_CURVES && e == 0; c++) {
		printf("%-8s  w%%", cw_sfc_curve_name(c));
		for (size_t v = 0; v < CW_ARRAY_SIZE(variants); v++)
			printf("  %15s", variants[v].name);
		printf("\n");
		for (unsigned w = 0; w <= 100 && e == 0; w += 10) {
			printf("          %3u", w);
			for (size_t v = 0; v < CW_ARRAY_SIZE(variants); v++) {
				struct cw_sched_sfc_conf conf;
				double irr, sd;

				cw_sched_sfc_conf_init(&conf);
				conf.curve = c;
				conf.dims = CW_SFC_DIM_PRIO | CW_SFC_DIM_DEADLINE;
				conf.bits = 4;
				conf.window_ppm = w * 10000;
				conf.policy = variants[v].policy;
				conf.always_expand = variants[v].ae;
				conf.horizon_ns = HORIZON_NS;
				e = one_run(q, n, &conf, &irr, &sd);
				if (e < 0)
					break;
				printf("  %6.3f (%6.3f)", irr / fcfs_irr, sd / fcfs_sd);
				if (csv)
					fprintf(csv, "%s,%s,%u,%.5f,%.5f\n", cw_sfc_curve_name(c),
						variants[v].name, w, irr / fcfs_irr, sd / fcfs_sd);
			}
			printf("\n");
		}
	}
	if (csv && fclose(csv) != 0)
		e = e ? e : -EIO;
	if (e == 0 && out_dir) {
		char *text = NULL;
		size_t len = 0;

		plt = open_memstream(&text, &len);
		if (!plt)
			return EXIT_FAILURE;
		fprintf(plt, "set terminal pngcairo size 1000,1400 noenhanced\nset output 'fig8.png'\n"
			"set datafile separator ','\nset grid\nset key top left\n"
			"set xlabel 'window w (%% of the curve)'\nset ylabel 'mean irregularity / FCFS'\n"
			"set multiplot layout %d,1 title 'Figure 8: irregularity against w'\n",
			CW_SFC_N_CURVES);
		for (unsigned c = 0; c < CW_SFC_N_CURVES; c++) {
			fprintf(plt, "set title '%s'\nplot ", cw_sfc_curve_name(c));
			for (size_t v = 0; v < CW_ARRAY_SIZE(variants); v++)
				fprintf(plt, "%s'fig8.csv' using (strcol(1) eq '%s' && strcol(2) eq '%s' ? "
					"$3 : NaN):4 with linespoints title '%s'", v ? ", \\\n  " : "",
					cw_sfc_curve_name(c), variants[v].name, variants[v].name);
			fprintf(plt, "\n");
		}
		fprintf(plt, "unset multiplot\n");
		fclose(plt);
		e = sim_plot(out_dir, "fig8", text);
		free(text);
		if (e == -ENOENT)
			fprintf(stderr, "cwsim: gnuplot not found: %s/fig8.gp written\n", out_dir);
		e = 0;
	}
	if (e < 0) {
		fprintf(stderr, "cwsim: %s\n", strerror(-e));
		return EXIT_FAILURE;
	}
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
