/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwctl — drives clockwised through its control socket (cwctl(8)).
 *
 * Every command is one request of the control protocol
 * (clockwise/ctl-proto.h); cwctl turns the suffixed quantities people
 * type into the integers the protocol carries (clockwise/units.h) and the
 * replies into tables, or prints them unchanged with --json.
 *
 * Exit status: 0 success, 1 the server refused or failed the request,
 * 2 bad usage, 3 the server could not be reached or spoke nonsense.
 *
 * This file holds main, the table of commands and the help; the commands
 * are in ctl/, one file per family (ctl/ctl.h).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clockwise/types.h>

#include "ctl/ctl.h"

static const char size_help[] =
	"Sizes are bytes with an optional binary suffix: 4096, 64K, 1.5G, 2T (also KiB, MB).\n";

static const struct command commands[] = {
	{ NULL, "status", "",
	  "The pool, its disks (with the slack delta-L and the utilization admission\n"
	  "has booked on each), partitions, reservations and exports, and the host:\n"
	  "the share of its CPUs given to streams and what they need of it.\n", NULL,
	  CW_CTL_CMD_STATUS, NULL,
	  print_status },
	{ "disk", "add", "PATH [--tier hdd|ssd|rbd] [--name NAME] [--emulate MODEL] [--domain D]",
	  "Adds a block device or file to the pool and labels it.  The tier defaults\n"
	  "to hdd; the name to disk<id>.  A running daemon serves it at once.\n"
	  "PATH rbd:POOL/IMAGE[?conf=FILE&id=NAME] is an image on a Ceph cluster\n"
	  "(tier rbd): its guarantee holds as far as the cluster keeps the latency\n"
	  "calibrated; cwctl stats shows the measured tail against C.\n"
	  "--emulate MODEL (atlas2, hdd7200, ssd or a \"cwmodel1 ...\" string): its I/O\n"
	  "completes when that disk would have completed it.  A preset may be followed\n"
	  "by its mechanics: \"ssd channels=8 stripe=128K write=3 gc=1G/50ms bus=500MB/s\".\n"
	  "--domain D puts it in failure domain D (see disk set).\n",
	  c_disk_add },
	{ "disk", "set", "NAME [--domain DOMAIN] [--spare | --no-spare]",
	  "Sets the disk's failure domain: disks that fail together (a shelf, a host)\n"
	  "share one, and the copies of a block (part create --copies) are kept in\n"
	  "distinct domains.  \"\" gives the disk its own, the default.  An image\n"
	  "(tier rbd) never shares a domain with a local disk.  Refused when a\n"
	  "block would then have two copies in one domain.\n"
	  "--spare makes an empty disk a spare: no partition is placed on it, and\n"
	  "when a disk is taken for gone (or is missing at start) a spare with room\n"
	  "replaces it at once, its copies rebuilt there (see disk replace).\n"
	  "--no-spare makes it a data disk again.\n", c_disk_set },
	{ "disk", "list", "", "Lists the disks of the pool.\n", NULL, CW_CTL_CMD_DISK_LIST, NULL,
	  print_disks },
	{ "disk", "remove", "NAME",
	  "Removes an empty disk from the pool; refused while partitions have blocks\n"
	  "on it or reservations use it.\n", NULL, CW_CTL_CMD_DISK_REMOVE, "name", print_removed },
	{ "disk", "evacuate", "NAME [--watch [--interval SECONDS]]",
	  "Moves every block off the disk onto the others, online and as best effort,\n"
	  "so that it can be removed.  Refused up front, with the numbers, when the\n"
	  "other disks lack the free space.  --watch follows the moves to their end.\n",
	  c_disk_evacuate },
	{ "disk", "replace", "OLD NEW [--watch [--interval SECONDS]]",
	  "Replaces disk OLD by NEW, a disk of the pool (disk add it first): every\n"
	  "block on OLD goes to NEW as best effort in the slack, journalled like a\n"
	  "move; a copy of a mirrored partition that is out of sync on OLD, or on an\n"
	  "OLD that is missing, is rebuilt onto NEW from a copy in sync.  Refused,\n"
	  "naming the partition and blocks, when OLD is missing and holds their only\n"
	  "copy in sync.  --watch follows the moves and then removes OLD.\n",
	  c_disk_replace },
	{ "disk", "calibrate", "NAME [--quick] [--percentile P]",
	  "Measures the disk's service times (seek curve, zone rates, block sizes)\n"
	  "with O_DIRECT reads and stores the model admission uses.  A progress bar\n"
	  "shows on a terminal.  --quick measures few points, for a first look.\n"
	  "On an image on a cluster (tier rbd), C of a block size is the P-th\n"
	  "percentile of its service times (50 to 100 in steps of 0.1; 99.9 unless\n"
	  "told, the median with --quick), kept with the model.\n"
	  "On a disk with streams, the new model is installed only if each stream\n"
	  "still passes admission with it (else the refusal names the one that\n"
	  "would not); the measurement runs beside them, unscheduled.  A warning\n"
	  "says when the numbers are no disk's (tmpfs, a sparse file, a cache).\n",
	  c_disk_calibrate },
	{ "disk", "plan", "[NAME] [--json]",
	  "Each disk's plan (or NAME's), what its dispatcher runs with: the slack\n"
	  "delta-L of the streams it carries, the best-effort budget after the guard,\n"
	  "the idle allowance, the periodic best-effort server, the best-effort piece\n"
	  "and its worst-case time, the reserve admission keeps, and whether best\n"
	  "effort is starved.  --json prints the array `cwsim plan --json` prints.\n",
	  c_disk_plan },
	{ "disk", "headroom", "[NAME] [--block SIZE]",
	  "What admission would still take: for each disk (or NAME), the streams it\n"
	  "carries, its utilization, delta-L and best-effort budget, and the largest\n"
	  "rate of a new stream of SIZE blocks (default: the pool's block) on it\n"
	  "alone; for each partition (on NAME), the largest rate of a stream over all\n"
	  "of it and the disk that limits it.  Rates are rounded down: each one shown\n"
	  "is admitted by resv create as it stands.\n", c_disk_headroom },
	{ "part", "create", "NAME --size SIZE [--policy rotation|random|single] [--tier hdd|ssd|none]\n"
	  "       [--tier-fallback] [--zone outer|inner|any] [--disk DISK] [--copies 1|2|3]",
	  "Creates a dynamic partition.  rotation stripes blocks over the disks,\n"
	  "random scatters them, single keeps them on one disk (--disk, or the one\n"
	  "with the most space).  --zone outer prefers the fast outer zone of HDDs.\n"
	  "--tier ssd keeps to SSDs and is refused, with the free space found there,\n"
	  "when they lack the room; --tier-fallback lets it (and its growth) use the\n"
	  "other disks then.  --copies 2 (or 3) keeps that many copies of each block,\n"
	  "each on its own disk in its own failure domain (disk set --domain): writes\n"
	  "go to every copy, reads to one in sync.  Refused when the disks lack the\n"
	  "domains or the room; the copies are fixed for the partition's life.\n",
	  c_part_create },
	{ "part", "move", "NAME [--policy P] [--tier T] [--zone Z] [--disks A,B]\n"
	  "       [--watch [--interval SECONDS]]",
	  "Re-lays a partition online: its blocks not on a disk the options accept\n"
	  "(of tier T, among disks A,B) move there, copied block by block as best\n"
	  "effort (in the slack of disks with streams) while it is served.  Refused\n"
	  "up front when the targets lack the room.  The move survives restarts;\n"
	  "--watch follows it to its end (a progress bar on a terminal).\n", c_part_move },
	{ "part", "rebuild", "NAME [--watch [--interval SECONDS]]",
	  "Rewrites the copies of a mirrored partition that are out of sync (on disks\n"
	  "present) from a copy in sync, as best effort in the slack, journalled like\n"
	  "a move (move pause, resume, cancel; it resumes after a restart).  Each copy\n"
	  "is marked in sync once its rewrite is durable.  clockwised starts one by\n"
	  "itself for the regions a crash left dirty.\n", c_part_rebuild },
	{ "part", "scrub", "NAME [--repair] [--watch [--interval SECONDS]]",
	  "Reads every copy in sync of every block of a mirrored partition, as best\n"
	  "effort in the slack, and compares it with the block's first copy in sync\n"
	  "(copy 0 when all say they are in sync): the blocks that differ are counted\n"
	  "and listed (move list).  --repair rewrites a copy that differs from that\n"
	  "one.  Journalled like a move (pause, resume, cancel, resumed after a\n"
	  "restart); --watch follows it and exits 1 when copies differed.\n",
	  c_part_scrub },
	{ "part", "list", "", "Lists the partitions.\n", NULL, CW_CTL_CMD_PART_LIST, NULL, print_parts },
	{ "part", "show", "NAME [--all]",
	  "Shows a partition, its blocks per disk and its runs (blocks consecutive on\n"
	  "one disk): the first 16 runs, or with --all every one.  --json has the\n"
	  "first page of runs (next_block says where the rest start), or with --all\n"
	  "every one.\n", c_part_show },
	{ "part", "resize", "NAME --size [+|-]SIZE [--force]",
	  "Grows or shrinks a partition at its end: to SIZE, or by SIZE with + or -.\n"
	  "A shrink that would discard data written in the blocks at the end says\n"
	  "how much and needs --force (blocks never written go without it); only\n"
	  "those blocks are discarded.  It is refused below a reserved range or\n"
	  "while the partition is exported, and a size of 0 is refused (delete the\n"
	  "partition instead).  An export that grows has its new size for new\n"
	  "connections; open ones keep theirs.\n", c_part_resize },
	{ "part", "cache", "NAME --size SIZE|--off [--mode write-through|write-back]",
	  "Gives an HDD partition SIZE of SSD as a cache of its hottest blocks\n"
	  "(--size 0 or --off: none).  Reads of a cached block come from the SSD;\n"
	  "promotions and demotions are best-effort copies in the slack.  Write-\n"
	  "through (the default) writes both copies; write-back writes a cached\n"
	  "block to the SSD only, journalled so a crash loses nothing.  Growing\n"
	  "takes the SSD space at once (refused with the free space when it does not\n"
	  "fit); a smaller size, another mode or --off demote (and write back) the\n"
	  "cached blocks first.  `cwctl stats` shows how it does.\n", c_part_cache },
	{ "part", "delete", "NAME [--force]",
	  "Deletes a partition; refused while it is exported or reserved, and while\n"
	  "it holds data unless --force (the refusal says how much).\n", c_part_delete },
	{ "resv", "create", "PART --rate RATE --block SIZE [--range START:END|START+LENGTH]\n"
	  "       [--start TIME] [--duration TIME] [--due disk|stream] [--survive 0|1]\n"
	  "       [--record] [--dry-run]",
	  "Reserves a stream of SIZE-byte blocks at RATE over bytes START..END of\n"
	  "PART (default: all of it; START: to its end), from TIME from now (default: now) for TIME\n"
	  "(default: until released).  Every disk holding the range must admit its\n"
	  "share (Jeffay's test), or the reservation is refused with the disk and the\n"
	  "condition that failed, in words, and the largest rate that fits.\n"
	  "A block is due its disk's period after it is asked for (--due disk, the\n"
	  "default): on a partition striped over k disks a client asks k blocks\n"
	  "ahead (the reservation's lead).  --due stream makes every block due one\n"
	  "period after it is asked for, for clients that cannot read ahead; the\n"
	  "disks then admit fewer such streams.\n"
	  "On a mirrored partition the stream's reads alternate between the copies'\n"
	  "disks, and --survive 1 (the default there) admits it only if it keeps its\n"
	  "deadlines with any one disk failed too (the survivors carrying all its\n"
	  "reads and the rebuild's reserve); --survive 0 opts out.  --record: a\n"
	  "recording stream, each request booked on every copy's disk (its writes\n"
	  "real-time on every copy; without, a stream's writes there are best effort).\n"
	  "--dry-run tests the reservation and books nothing.\n"
	  "Rates are decimal: 8Mbit, 817KB/s, 1.5MB/s, 4MiB/s, or bytes per second.\n"
	  "Times: 90 (seconds), 1.5s, 250ms, 10m, 2h.\n", c_resv_create },
	{ "resv", "list", "", "Lists the reservations; those given to clockwised -r show as static.\n",
	  NULL, CW_CTL_CMD_RESV_LIST, NULL, print_resvs },
	{ "resv", "show", "ID", "Shows a reservation and its task on each disk.\n", NULL,
	  CW_CTL_CMD_RESV_SHOW, "id", print_resv },
	{ "resv", "release", "ID",
	  "Releases a reservation; refused while an export is bound to it.\n", NULL,
	  CW_CTL_CMD_RESV_RELEASE, "id", print_released },
	{ "resv", "claim", "ID [--pid PID | --drop]",
	  "Only the connections of process PID (default: this one's parent, the\n"
	  "shell or player that runs cwctl) may hold the real-time priority of the\n"
	  "export bound to reservation ID, until that process ends; --drop lifts\n"
	  "the claim.  Without a claim the first client of the export to ask holds\n"
	  "it, and any client that connects before the player takes it first.\n"
	  "Connections on a unix socket only (the kernel names their process).\n"
	  "cwstream claims its reservation itself with --resv.\n", c_resv_claim },
	{ "export", "list", "",
	  "Lists the NBD exports and the clients connected to each (uid and pid on\n"
	  "a unix socket, address on TCP); \"unavailable\": listed, but its partition\n"
	  "has blocks on a missing disk.\n", NULL, CW_CTL_CMD_EXPORT_LIST, NULL, print_exports },
	{ "export", "add", "PART [--name NAME] [--readonly] [--resv ID] [--ublk [--queue-depth N]\n"
	  "  [--max-request BYTES]]",
	  "Exports a partition over NBD as NAME (default: the partition's name).\n"
	  "With --resv, requests inside the reservation's range are real-time.\n"
	  "With --ublk, the export is a local block device, /dev/ublkbN, instead\n"
	  "(the kernel's ublk_drv; root only): N tags in flight (default 64) and\n"
	  "requests up to BYTES (4096 to 1048576, default 524288).\n", c_export_add },
	{ "export", "remove", "NAME [--force]",
	  "Stops exporting NAME (and drops its QoS).  While clients are connected it\n"
	  "is refused (naming them) unless --force, which disconnects them.\n",
	  c_export_remove },
	{ "export", "qos", "NAME [--reserve RATE] [--weight W] [--limit RATE] [--clear] [--dry-run]",
	  "Sets the export's best effort between exports (be_order rbfq): at least\n"
	  "its reservation while it asks, its weight's share of the rest, at most its\n"
	  "limit.  RATE is bytes per second (20MB/s, 8M) or requests (200iops); none\n"
	  "drops it.  Options not given keep their value; without any it shows the\n"
	  "QoS.  A reservation must fit in each disk's best-effort capacity beside\n"
	  "the others', or it is refused with the largest that fits.  Stored in the\n"
	  "pool; running clients get it with their next requests.  NAME may be\n"
	  "EXPORT@CLASS: the NBD clients that open the export by that name share it\n"
	  "as a client of their own.\n", c_export_qos },
	{ "move", "list", "[--watch [--interval SECONDS]]",
	  "Lists the moves with their progress: blocks done, MB/s, time left, blocks\n"
	  "whose source did not read, and why a move paused.  --watch follows the\n"
	  "unfinished ones until none runs (one JSON object per move and interval\n"
	  "with --json).\n", c_move_list },
	{ "move", "pause", "ID", "Pauses a move after the block in flight.\n", NULL,
	  CW_CTL_CMD_MOVE_PAUSE, "id", print_move },
	{ "move", "resume", "ID", "Resumes a paused move.\n", NULL, CW_CTL_CMD_MOVE_RESUME, "id",
	  print_move },
	{ "move", "cancel", "ID",
	  "Stops a move: blocks already moved stay, the others' targets are freed.\n", NULL,
	  CW_CTL_CMD_MOVE_CANCEL, "id", print_move },
	{ NULL, "stats", "[--watch SECONDS [--count N]]",
	  "The data path's counters per disk and per reservation since the daemon\n"
	  "started: real-time requests and deadline misses, best-effort latency\n"
	  "percentiles, slack used; per export, the share of disk time its best\n"
	  "effort received against the share it was due, whether its reservation\n"
	  "was met and its limit held.  --watch shows each interval of SECONDS instead\n"
	  "(N of them, or until interrupted), with its time: IOPS, bytes read and\n"
	  "written per second, deadline misses, best-effort p50/p99 and the share of\n"
	  "the interval best effort ran in the streams' slack; with --json, one JSON\n"
	  "object per line.\n", c_stats },
};

static void group_help(const char *group)
{
	printf("Usage: cwctl [--socket PATH] [--json] %s COMMAND ...\n\nCommands:\n", group);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].group && strcmp(commands[i].group, group) == 0)
			printf("  %s %s %s\n", group, commands[i].name, commands[i].synopsis);
	printf("\n%s 'cwctl %s COMMAND --help' describes one command.\n", size_help, group);
}

static void main_help(void)
{
	printf("Usage: cwctl [--socket PATH] [--json] COMMAND ...\n\n"
	       "Drives clockwised through its control socket.\n\n"
	       "Options:\n"
	       "  -s, --socket PATH  the control socket (default /run/clockwise/control,\n"
	       "                     or $CLOCKWISE_CONTROL)\n"
	       "  -j, --json         print results as JSON\n"
	       "  -h, --help         this help; 'cwctl COMMAND --help' for one command\n"
	       "  -V, --version\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		printf("  %s%s%s\n", commands[i].group ? commands[i].group : "",
		       commands[i].group ? " " : "", commands[i].name);
	printf("\nExit status: 0 success, 1 refused or failed, 2 bad usage, 3 no server.\n");
}

/* --json and --socket may follow the command too ("cwctl part list
 * --json"), as with the other tools people know: taken out of argv[from..]
 * (up to a "--"), which keeps the rest in order.  Returns the new argc. */
static int global_options(int argc, char **argv, int from)
{
	int out = from;

	for (int i = from; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (strcmp(argv[i], "--json") == 0) {
			json_out = true;
		} else if (strncmp(argv[i], "--socket=", 9) == 0) {
			socket_path = argv[i] + 9;
		} else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			socket_path = argv[++i];
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	return out;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }, { 0 }
	};
	static char name[128];
	const char *env = getenv("CLOCKWISE_CONTROL");
	int o, first;

	if (env && *env)
		socket_path = env;
	while ((o = getopt_long(argc, argv, "+s:jhV", lo, NULL)) != -1) {
		switch (o) {
		case 's': socket_path = optarg; break;
		case 'j': json_out = true; break;
		case 'h': main_help(); return 0;
		case 'V': printf("cwctl %s (libclockwise %s)\n", PACKAGE_VERSION, cw_version()); return 0;
		default: fprintf(stderr, "Try 'cwctl --help'.\n"); return EXIT_USAGE;
		}
	}
	argc = global_options(argc, argv, optind);
	if (optind >= argc)
		return usage_error("a command is missing");
	first = optind;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];
		int words = c->group ? 2 : 1;

		if (strcmp(argv[first], c->group ? c->group : c->name) != 0)
			continue;
		if (c->group) {
			if (first + 1 >= argc || strcmp(argv[first + 1], "--help") == 0 ||
			    strcmp(argv[first + 1], "-h") == 0) {
				if (first + 1 >= argc) {
					snprintf(name, sizeof(name), "cwctl %s", c->group);
					cmd_name = name;
					group_help(c->group);
					return EXIT_USAGE;
				}
				group_help(c->group);
				return 0;
			}
			if (strcmp(argv[first + 1], c->name) != 0)
				continue;
		}
		snprintf(name, sizeof(name), "cwctl%s%s %s", c->group ? " " : "",
			 c->group ? c->group : "", c->name);
		cmd_name = name;
		current = c;
		optind = 0;	/* glibc: start over, reading the + again */
		return (c->fn ? c->fn : c_simple)(argc - first - words + 1,
						  argv + first + words - 1);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (commands[i].group && strcmp(argv[first], commands[i].group) == 0) {
			snprintf(name, sizeof(name), "cwctl %s", commands[i].group);
			cmd_name = name;
			return usage_error("unknown command \"%s\"", argv[first + 1]);
		}
	}
	return usage_error("unknown command \"%s\"", argv[first]);
}
