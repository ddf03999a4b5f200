// A small GPT-2 (1 layer, 16 channels, vocab 64, B=2, T=8) trained on a token buffer of the
// device: what the label and export tests train on holder data.
#ifndef GT_TOY_MODEL_H
#define GT_TOY_MODEL_H

#include "testlib.h"

#include <gputravel/train.h>

#define GT_TOY_VOCAB 64

typedef struct {
    gt_gpt2 *m;
    gt_loader *l;
} gt_toy;

// The recipe of every toy step (the one a pinned program records): it clips the gradients at
// norm 1 (the toys of the paging tests had norms of 1.5-4.0, printed by hand, so the clip scales the
// gradients: a wrong sum of squares changes the next losses).
extern const gt_adamw gt_toy_opt;
// The recipe the two schedules are compared on: gt_toy_opt without clipping (the in-backward
// step cannot clip) and with weight decay; a copy with update_in_backward set is the other.
extern const gt_adamw gt_toy_opt_unclipped;

typedef struct {
    int vocab, channels, layers;
} gt_toy_shape;

// The model (seeded init) and a loader over the first ntok tokens of chunk.
void gt_toy_open(gt_device *dev, gt_dbuf chunk, uint64_t ntok, gt_toy *t);
// The same with another vocabulary (tokens still below GT_TOY_VOCAB) and width: a wider
// lm-head than the toy's, for the tests that need one over a memory cap.
void gt_toy_open_shaped(gt_device *dev, gt_dbuf chunk, uint64_t ntok, int vocab, int channels,
                        gt_toy *t);
// The same with a number of layers as well.
void gt_toy_open_as(gt_device *dev, gt_dbuf chunk, uint64_t ntok, const gt_toy_shape *shape,
                    gt_toy *t);
void gt_toy_close(gt_toy *t);
// The bytes of the gradients (one buffer, what sum_of_squares reads) of a toy of that shape.
uint64_t gt_toy_grad_bytes(int vocab, int channels);
// ntok pseudo-random tokens below GT_TOY_VOCAB, the same every call.
void gt_toy_tokens(uint16_t *tokens, uint64_t ntok);
// A chunk on dev holding gt_toy_tokens' ntok tokens (the caller frees it or closes dev).
gt_dbuf gt_toy_chunk(gt_device *dev, uint64_t ntok);
// `steps` losses of a model of that shape on dev, trained on gt_toy_tokens' ntok tokens, which
// it copies into a chunk of its own: what the paging tests compare with and without a cap.
void gt_toy_losses(gt_device *dev, uint64_t ntok, float *loss, int steps, int vocab,
                   int channels);
// The same for a shape and a recipe (gt_toy_step_with's).
void gt_toy_losses_with(gt_device *dev, uint64_t ntok, float *loss, int steps,
                        const gt_toy_shape *shape, const gt_adamw *opt);
// gt_toy_losses on a cpu device of its own without a pager (one thread): the reference losses.
void gt_toy_losses_unpaged(uint64_t ntok, float *loss, int steps, int vocab, int channels);
// One step: next batch, zero grad, forward and backward (loss NULL: none released), update.
GT_MUST_USE gt_err gt_toy_step(gt_toy *t, float *loss);
// One step of opt's schedule: gt_toy_step's with opt, or with opt->update_in_backward the next
// batch and gt_gpt2_step_in_backward.
GT_MUST_USE gt_err gt_toy_step_with(gt_toy *t, const gt_adamw *opt, float *loss);

#endif
