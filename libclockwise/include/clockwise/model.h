/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * clockwise/model.h — per-disk service-time model and its calibration.
 *
 * Bosch & Mullender, section 3.1: the worst-case service time C of a
 * real-time request is the worst-case seek, plus the transfer of b bytes at
 * the slowest rate of the zones it may touch, plus one extra rotation.  A
 * model holds what that needs: a seek curve (time by distance), the
 * rotation period, the transfer rate of each zone, optional measured worst
 * cases per block size, and a safety margin.  A model is plain data (no
 * pointers): copy it, compare it, store it with cw_model_format().
 *
 * A model comes from a preset (cw_model_preset: the paper's Quantum
 * Atlas-II, a modern 7200 rpm disk, an SSD), from a stored string
 * (cw_model_parse), or from measuring a disk (cw_model_calibrate).
 */
#ifndef CLOCKWISE_MODEL_H
#define CLOCKWISE_MODEL_H

#include <clockwise/types.h>
#include <clockwise/io.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_MODEL_MAX_SEEK 32	/* points of the seek curve */
#define CW_MODEL_MAX_ZONES 32	/* transfer zones */
#define CW_MODEL_MAX_BSIZES 16	/* measured block sizes */
#define CW_MODEL_NAME_MAX 32

/* Seek time for a head movement of distance_bytes; between points the
 * curve is interpolated linearly, beyond the last it stays flat. */
struct cw_model_seek {
	uint64_t distance_bytes;
	int64_t time_ns;
};

/* A zone [start_bytes, end_bytes) read at rate_bps bytes per second. */
struct cw_model_zone {
	uint64_t start_bytes;
	uint64_t end_bytes;
	uint64_t rate_bps;
};

/* A measured worst case for a whole request of bytes at a random place
 * (seek + rotation + transfer as the disk really does it). */
struct cw_model_bsize {
	uint64_t bytes;
	int64_t worst_ns;
};

struct cw_model {
	char name[CW_MODEL_NAME_MAX];	/* preset or disk name, [A-Za-z0-9._-] */
	enum cw_tier tier;
	uint64_t capacity_bytes;
	int64_t rotation_ns;		/* one revolution; 0 for an SSD */
	int64_t overhead_ns;		/* fixed cost per request (command, bus) */
	uint32_t margin_ppm;		/* C is scaled by 1 + margin_ppm / 10^6 ... */
	int64_t margin_ns;		/* ... and then margin_ns is added */
	unsigned n_seek;		/* >= 1; distances strictly ascending, times non-decreasing */
	struct cw_model_seek seek[CW_MODEL_MAX_SEEK];
	unsigned n_zones;		/* >= 1; contiguous, cover [0, capacity) */
	struct cw_model_zone zone[CW_MODEL_MAX_ZONES];
	unsigned n_bsizes;		/* measured block sizes, may be 0 */
	struct cw_model_bsize bsize[CW_MODEL_MAX_BSIZES];
	/* The tail percentile, in permille, the measured block sizes are of
	 * (an image's calibration: 999, the 99.9th percentile, unless told
	 * otherwise); 0 when the model says none.  500..1000 otherwise. */
	unsigned tail_permille;
	/* The mechanics an emulated or simulated disk runs
	 * (cw_model_disk_opts_of; 0: cw_model_disk_opts_init's default).
	 * Admission reads only write_ppm (C covers a write). */
	unsigned channels;		/* SSD: parallel channels, 1..CW_MODEL_MAX_CHANNELS */
	uint64_t stripe_bytes;		/* SSD: channel interleave */
	uint32_t write_ppm;		/* SSD: a write's cost per 10^6 of a read's */
	uint64_t gc_every_bytes;	/* SSD: a collection after this many bytes written ... */
	int64_t gc_pause_ns;		/* ... holding the device this long (both or neither) */
	uint64_t bus_bps;		/* the host bus: no faster than this */
};

/* Checks the invariants above: 0 or -EINVAL. */
int cw_model_validate(const struct cw_model *m);

/* Presets: "atlas2" (Quantum Atlas-II, the paper's disk: 1 MB in the outer
 * zone takes about 120 ms worst case), "hdd7200" (a modern 4 TB 7200 rpm
 * disk), "ssd" (a SATA SSD).  -ENOENT for an unknown name. */
int cw_model_preset(const char *name, struct cw_model *ret_model);
/* NULL-terminated list of the preset names. */
const char *const *cw_model_preset_names(void);
/* A preset by name, or a stored model string ("cwmodel1 ..."): what
 * configuration and commands accept where a model is named.  A preset's
 * name may be followed by settings of its mechanics, which a model string
 * may carry too (space-separated):
 *   channels=N        SSD: parallel channels (1..CW_MODEL_MAX_CHANNELS)
 *   stripe=SIZE       SSD: channel interleave ("128K")
 *   write=X           SSD: a write costs X reads (a decimal, 0.001..1000)
 *   gc=SIZE/DURATION  SSD: after every SIZE written the device pauses
 *                     DURATION ("1G/50ms"; at most 100 s)
 *   bus=RATE          the host bus's rate ("300MB/s"); any tier
 * (sizes, rates and durations as clockwise/units.h reads them).
 * -ENOENT for an unknown preset, -EINVAL for a string that does not
 * parse.  cw_model_from_string_why also says why, in one line, in why
 * (len bytes, may be 0). */
int cw_model_from_string(const char *s, struct cw_model *ret_model);
int cw_model_from_string_why(const char *s, struct cw_model *ret_model, char *why, size_t len);

/* Seek time for a distance (curve interpolation, no margin). */
int64_t cw_model_seek_ns(const struct cw_model *m, uint64_t distance_bytes);

/* Worst-case service time C, margin included, for one request of bytes
 * that lies anywhere in [lo_bytes, hi_bytes) of the disk while the head may
 * be anywhere on it: overhead + the seek from the farthest point of the
 * disk + one rotation + bytes at the slowest rate among the zones the range
 * touches; on an SSD the whole of that times what a write costs
 * (write_ppm, 2 reads when the model does not say), since the request may
 * be a write; never less than a measured worst case for that block size.
 * hi_bytes == 0 means the whole disk.  -EINVAL for an empty request or a
 * range outside the disk; -ERANGE on overflow. */
int cw_model_service_ns(const struct cw_model *m, uint64_t lo_bytes, uint64_t hi_bytes,
			uint64_t bytes, int64_t *ret_ns);

/* The time one access takes, for a simulator or a BE estimate: overhead +
 * the seek from head_bytes to off_bytes + rot_ppm millionths of a
 * revolution (the rotational wait, 0..1000000) + bytes at the slowest rate
 * of the zones [off, off + bytes) touches; no margin, no measured table.
 * Never more than cw_model_service_ns for a range holding the request.
 * -EINVAL for an empty request, one past the end of the disk, or rot_ppm
 * above 1000000. */
int cw_model_access_ns(const struct cw_model *m, uint64_t head_bytes, uint64_t off_bytes,
		       uint64_t bytes, uint32_t rot_ppm, int64_t *ret_ns);

/* ---- disk mechanics ----------------------------------------------------
 *
 * What serving a request on a disk described by a model really takes,
 * given where the head is and when the request starts (Bosch & Mullender,
 * section 4: "The simulated disks simulates heads, tracks, sectors,
 * rotational speed and head positions.").  The simulator (cwsim) and the
 * emulating I/O engine (clockwise/emu.h) both drive a disk through these
 * functions: what is simulated is what is emulated.
 *
 * HDD: byte offsets stand for cylinders (the seek distance is the
 * difference of offsets, from where the last transfer ended); a track of
 * zone z holds rate_z x rotation_ns bytes, so a sector's angle is its
 * offset within the zone modulo that, and the platter turns with the
 * clock (phase_ns is its angle at time 0).  The arithmetic of one access
 * is cw_model_access_ns's.  One request is in service at a time.
 *
 * SSD: requests go whole to one of `channels` channels, chosen by offset
 * (stripe_bytes interleave); a channel serves one request at a time in
 * overhead + seek[0] + bytes at the zone's rate (a write costs write_ppm
 * millionths of that), so one request alone takes what the model says and
 * requests on different channels overlap.  After every gc_every_bytes
 * written, the whole device pauses gc_pause_ns (garbage collection).  A
 * bus carries one request's bytes at a time at bus_bps: a request alone
 * takes the longer of its channel's time and its transfer on the bus,
 * and requests together no more than the bus carries.
 */
#define CW_MODEL_MAX_CHANNELS 64

struct cw_model_disk_opts {
	size_t size;			/* sizeof(struct cw_model_disk_opts) */
	uint64_t bus_bps;		/* a bus slower than this adds time; 0: none */
	int64_t phase_ns;		/* HDD: platter angle at time 0, 0..rotation_ns */
	unsigned channels;		/* SSD: 1..CW_MODEL_MAX_CHANNELS */
	uint64_t stripe_bytes;		/* SSD: channel interleave, > 0 */
	uint32_t write_ppm;		/* SSD: a write's cost per 10^6 of a read's, >= 1 */
	uint64_t gc_every_bytes;	/* SSD: a pause after this many bytes written; 0: never */
	int64_t gc_pause_ns;
};

struct cw_model_disk {
	const struct cw_model *m;	/* not copied: it must outlive the disk */
	struct cw_model_disk_opts o;
	uint64_t head_bytes;		/* HDD: where the last transfer ended */
	uint64_t written_bytes;		/* SSD: since the last collection */
	int64_t free_ns[CW_MODEL_MAX_CHANNELS];	/* SSD: each channel busy until */
	int64_t bus_free_ns;		/* SSD: the bus busy until */
};

/* Defaults: no bus, phase 0, 4 channels of 128 KiB stripes, writes at
 * twice a read's cost, no garbage collection. */
void cw_model_disk_opts_init(struct cw_model_disk_opts *opts);
/* The defaults with what the model sets of its mechanics (channels,
 * stripe, write cost, collection, bus): what the emulator and cwsim run
 * a disk of model m with. */
void cw_model_disk_opts_of(const struct cw_model *m, struct cw_model_disk_opts *opts);

/* Sets up a disk with its head at 0 and every channel idle; opts NULL:
 * the defaults.  -EINVAL for an invalid model or options. */
int cw_model_disk_init(struct cw_model_disk *d, const struct cw_model *m,
		       const struct cw_model_disk_opts *opts);

/* HDD: the time serving bytes at off takes when its service starts at
 * start_ns (overhead, seek from the head, the platter's turn to the first
 * sector, transfer at the zone's rate or the bus's if slower), without
 * moving the head: for choosing among queued requests. */
int64_t cw_model_disk_peek(const struct cw_model_disk *d, int64_t start_ns, uint64_t off,
			   uint64_t bytes);
/* The same, and the head moves to off + bytes. */
int64_t cw_model_disk_serve(struct cw_model_disk *d, int64_t start_ns, uint64_t off,
			    uint64_t bytes);

/* SSD: the time a request arriving at arrival_ns finishes, its channel
 * (and after a collection threshold, the device) busy until then. */
int64_t cw_model_disk_ssd_finish(struct cw_model_disk *d, int64_t arrival_ns, uint64_t off,
				 uint64_t bytes, bool write);
/* What a request of bytes costs on average where it may lie anywhere and
 * the head anywhere: overhead + the seek over a third of the disk (the
 * mean distance between two random points) + half a revolution + bytes at
 * the disk's slowest rate; no margin.  A function of bytes alone, so that
 * a rate in bytes per second is one share of the disk's time: the cost of
 * a best-effort request for its client's share (clockwise/sched-beq.h).
 * -EINVAL for 0 bytes or more than the disk, -ERANGE on overflow. */
int cw_model_mean_ns(const struct cw_model *m, uint64_t bytes, int64_t *ret_ns);

/* Serialization: a one-line text form, "cwmodel1 name=... cap=... ...",
 * stable across versions (unknown keys are refused, so a newer string is
 * never half read).  cw_model_format returns the length it needs (like
 * snprintf) or -EINVAL; cw_model_parse returns 0 or -EINVAL and leaves
 * ret_model untouched on error. */
int cw_model_format(const struct cw_model *m, char *buf, size_t len);
int cw_model_parse(const char *text, struct cw_model *ret_model);

/* Calibration (section 3.1's pre-measurement) of a block device or file.
 * It reads with O_DIRECT through the I/O engine, never writes, and takes
 * seconds to minutes depending on the options.
 *
 * An emulated disk (opts->emulate) whose same sector, read twice in a
 * row, takes a revolution of a millisecond or more is measured as a model
 * of its parts: the rotation period, the seek curve without rotational
 * waits, the per-request overhead and each zone's media rate.  Any other
 * disk (a real drive's cache and read-ahead would answer those reads)
 * keeps rotation and overhead at 0 with the rotational wait inside a high
 * percentile of its seek times.
 *
 * An image on a cluster (path rbd:..., tier rbd) has no seek curve and no
 * rotation: each block size, and 4 KiB, is read whole at random places one
 * at a time, and its worst case is a tail percentile of those times
 * (tail_permille, the 99.9th by default); the overhead and the one zone's
 * rate are a line on or above every measured tail.  The image must have
 * been written: reads of never-written regions do not reach the OSDs. */
struct cw_calib_opts {
	size_t size;			/* sizeof(struct cw_calib_opts) */
	enum cw_io_kind engine;
	uint64_t span_bytes;		/* measured span from offset 0; 0: whole device */
	unsigned seek_distances;	/* points of the seek curve to measure (2..CW_MODEL_MAX_SEEK) */
	unsigned zones;			/* zones to measure (1..CW_MODEL_MAX_ZONES) */
	uint64_t zone_read_bytes;	/* sequential bytes read per zone */
	const uint64_t *block_sizes;	/* block sizes of interest (may be NULL) */
	unsigned n_block_sizes;		/* <= CW_MODEL_MAX_BSIZES */
	unsigned repeats;		/* samples per measured point */
	unsigned percentile;		/* worst case = this percentile of samples (50..100) */
	uint32_t margin_ppm;		/* copied into the model */
	int64_t margin_ns;
	enum cw_tier tier;
	const char *name;		/* model name; NULL: "calibrated" */
	/* Measure the disk this model emulates on the file (clockwise/emu.h,
	 * stacked on engine); NULL: the file as it is. */
	const struct cw_model *emulate;
	/* Tier rbd: the worst case of a block size is this permille of its
	 * samples (500..1000; 999: the 99.9th percentile), taken from
	 * max(repeats, 2000 / (1000 - tail_permille)) samples. */
	unsigned tail_permille;
};

/* Fills opts with defaults: io_uring, whole device, 16 seek distances,
 * 8 zones of 8 MiB, block sizes 64 KiB, 256 KiB and 1 MiB, 20 repeats,
 * the 99th percentile, no margin; on an image the 99.9th. */
void cw_calib_opts_init(struct cw_calib_opts *opts);

/* A tail percentile as an operator writes it ("99.9", "99", "100") into
 * permille (999, 990, 1000): 50 to 100 in steps of 0.1.  -EINVAL when s
 * is no such number, -ERANGE when it is out of range or finer. */
int cw_calib_parse_percentile(const char *s, unsigned *ret_permille);

/* Progress: phase is "seek", "zone" or "bsize"; done of total steps. A
 * non-zero return stops the calibration, which then returns -ECANCELED. */
typedef int (*cw_calib_progress_fn)(const char *phase, unsigned done, unsigned total,
				    void *userdata);

int cw_model_calibrate(const char *path, const struct cw_calib_opts *opts,
		       cw_calib_progress_fn progress, void *userdata,
		       struct cw_model *ret_model);

/* Whether model m, measured on path, can describe a disk: 1 with the
 * reasons it cannot in ret_warning (sentences joined by "; "), 0 when
 * nothing is amiss, -errno when path cannot be looked at.  Said: a file
 * on tmpfs or ramfs (memory, whatever the numbers), a sparse file (its
 * holes read without the device), a rate beyond any disk of m's tier (a
 * cache answered).  m may be NULL: the backing alone. */
int cw_calib_check(const char *path, const struct cw_model *m, char *ret_warning, size_t len);

#ifdef __cplusplus
}
#endif
#endif
