/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the model module: model.c (the model, presets, text form) and
 * calib.c (measuring a disk). */
#ifndef CW_MODEL_PRIVATE_H
#define CW_MODEL_PRIVATE_H

#include <clockwise/model.h>

/* Calibration keeps each measured point as samples and takes a high
 * percentile as its worst case: the smallest sample that at least pct% of
 * the n samples do not exceed (sorts samples). */
int64_t model_percentile(int64_t *samples, size_t n, unsigned pct);

/* What a write costs an SSD per 10^6 of a read when its model does not
 * say (cw_model.write_ppm 0): the mechanics' default and the charge's. */
#define MODEL_WRITE_PPM_DEFAULT UINT32_C(2000000)

#endif
