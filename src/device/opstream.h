// The op stream a pager learns (device/opstream.c, docs/paging.md "Prefetch"): the pages each
// launch touched, in order, and where in that history the current launch stands. A training
// step repeats its launches, so what followed the last occurrence of this launch is the
// prediction of what comes next. Internal to the device layer; one per pager, used under its lock.
#ifndef GT_DEVICE_OPSTREAM_H
#define GT_DEVICE_OPSTREAM_H

#include <gputravel/device.h>

typedef struct {
    uint32_t lo, hi;  // arena pages [lo, hi)
} gt_page_span;

typedef struct gt_opstream gt_opstream;

// A history of the last `launches` launches (a power of two, at least 64).
GT_MUST_USE gt_err gt_opstream_new(gt_opstream **os, uint32_t launches);
void gt_opstream_free(gt_opstream *os);
void gt_opstream_reset(gt_opstream *os);  // forget everything (a new session)
// Records a launch touching spans[0..n) (n <= GT_OP_MAX_REFS). Returns whether it was the launch
// the stream predicted (false also when nothing was predicted); afterwards the stream predicts
// from this launch's last earlier occurrence, or not at all if it never ran before.
bool gt_opstream_launch(gt_opstream *os, const gt_page_span *spans, int n);
// The spans of the k-th launch predicted after the current one (k >= 1): their count, or -1
// when nothing that far is known (no prediction, or beyond the recorded history).
int gt_opstream_ahead(const gt_opstream *os, uint32_t k, const gt_page_span **spans);
uint64_t gt_opstream_mispredicts(const gt_opstream *os);  // a launch other than the predicted

#endif
