// Internal to train/: what the checkpoint, state and sampling code needs of the model.
#ifndef GT_TRAIN_INTERNAL_H
#define GT_TRAIN_INTERNAL_H

#include <gputravel/kernels.h>
#include <gputravel/train.h>

// The AdamW moment buffers (allocated, zeroed, when alloc is true and they do not exist yet;
// 0 otherwise).
gt_err gt_gpt2_internal_moments(gt_gpt2 *m, gt_dbuf *mbuf, gt_dbuf *vbuf, bool alloc);
void gt_gpt2_internal_set_step(gt_gpt2 *m, uint64_t step);
gt_device *gt_gpt2_internal_device(gt_gpt2 *m);
gt_dbuf gt_gpt2_internal_params(gt_gpt2 *m);

// Streams len bytes between an open file and a device buffer in bounded pieces.
gt_err gt_train_file_to_device(FILE *fp, const char *path, gt_device *dev, gt_dbuf buf,
                               uint64_t offset, uint64_t len);
gt_err gt_train_device_to_file(gt_atomic_file *f, gt_device *dev, gt_dbuf buf, uint64_t offset,
                               uint64_t len);

#endif
