// Internal to train/: what the checkpoint, state and sampling code needs of the model.
#ifndef GT_TRAIN_INTERNAL_H
#define GT_TRAIN_INTERNAL_H

#include <gputravel/crypto.h>
#include <gputravel/kernels.h>
#include <gputravel/train.h>

// The AdamW moment buffers (allocated, zeroed, when alloc is true and they do not exist yet;
// 0 otherwise).
gt_err gt_gpt2_internal_moments(gt_gpt2 *m, gt_dbuf *mbuf, gt_dbuf *vbuf, bool alloc);
void gt_gpt2_internal_set_step(gt_gpt2 *m, uint64_t step);
gt_device *gt_gpt2_internal_device(gt_gpt2 *m);
gt_dbuf gt_gpt2_internal_params(gt_gpt2 *m);
// The weights hash of the file the parameters last came from or went to (false: none yet).
void gt_gpt2_internal_set_file_sha(gt_gpt2 *m, const uint8_t sha[GT_WEIGHTS_SHA_BYTES]);
bool gt_gpt2_internal_file_sha(const gt_gpt2 *m, uint8_t sha[GT_WEIGHTS_SHA_BYTES]);

// Streams len bytes between an open file and a device buffer in bounded pieces, hashing them
// into h on the way when h is not NULL.
gt_err gt_train_file_to_device(FILE *fp, const char *path, gt_device *dev, gt_dbuf buf,
                               uint64_t offset, uint64_t len, gt_hash_ctx *h);
// hash_bf16: h gets the fp32 values rounded to bf16 (and back), what a bf16 checkpoint holds.
gt_err gt_train_device_to_file(gt_atomic_file *f, gt_device *dev, gt_dbuf buf, uint64_t offset,
                               uint64_t len, gt_hash_ctx *h, bool hash_bf16);

#endif
