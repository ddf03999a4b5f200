// The toy model of the label and export tests (toy_model.h).
#include "toy_model.h"

#include <stdlib.h>

const gt_adamw gt_toy_opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_clip = 1.0f};
const gt_adamw gt_toy_opt_unclipped = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                       .weight_decay = 0.1f};
static const float toy_lr = 1e-3f;

void gt_toy_open(gt_device *dev, gt_dbuf chunk, uint64_t ntok, gt_toy *t)
{
    gt_toy_open_shaped(dev, chunk, ntok, GT_TOY_VOCAB, 16, t);
}

static gt_gpt2_config toy_config(int vocab, int channels, int layers)
{
    return (gt_gpt2_config){.max_seq_len = 8, .vocab_size = vocab,
                            .padded_vocab_size = gt_gpt2_pad_vocab(vocab), .num_layers = layers,
                            .num_heads = 2, .channels = channels};
}

uint64_t gt_toy_grad_bytes(int vocab, int channels)
{
    gt_gpt2_config c = toy_config(vocab, channels, 1);
    size_t sizes[GT_GPT2_NUM_TENSORS];
    return (uint64_t)gt_gpt2_param_sizes(&c, sizes) * sizeof(float);
}

void gt_toy_open_shaped(gt_device *dev, gt_dbuf chunk, uint64_t ntok, int vocab, int channels,
                        gt_toy *t)
{
    gt_toy_open_as(dev, chunk, ntok, &(gt_toy_shape){vocab, channels, 1}, t);
}

void gt_toy_open_as(gt_device *dev, gt_dbuf chunk, uint64_t ntok, const gt_toy_shape *shape,
                    gt_toy *t)
{
    gt_gpt2_config c = toy_config(shape->vocab, shape->channels, shape->layers);
    GT_ASSERT_OK(gt_gpt2_create(&t->m, dev, &c));
    GT_ASSERT_OK(gt_gpt2_init_random(t->m, 5));
    GT_ASSERT_OK(gt_loader_create(&t->l, dev, &chunk, &ntok, 1, 2, 8, GT_TOY_VOCAB, false, 0));
}

void gt_toy_close(gt_toy *t)
{
    gt_loader_free(t->l);
    gt_gpt2_free(t->m);
}

gt_err gt_toy_step(gt_toy *t, float *loss) { return gt_toy_step_with(t, &gt_toy_opt, loss); }

gt_err gt_toy_step_with(gt_toy *t, const gt_adamw *opt, float *loss)
{
    GT_TRY(gt_loader_next(t->l));
    if (opt->update_in_backward) {
        return gt_gpt2_step_in_backward(t->m, gt_loader_inputs(t->l), gt_loader_targets(t->l), 2,
                                        8, 1.0f, opt, toy_lr, loss);
    }
    GT_TRY(gt_gpt2_zero_grad(t->m));
    GT_TRY(gt_gpt2_forward_backward(t->m, gt_loader_inputs(t->l), gt_loader_targets(t->l), 2, 8,
                                    1.0f, loss));
    return gt_gpt2_update(t->m, opt, toy_lr, NULL);
}

void gt_toy_tokens(uint16_t *tokens, uint64_t ntok)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < ntok; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tokens[i] = (uint16_t)(x % GT_TOY_VOCAB);
    }
}

gt_dbuf gt_toy_chunk(gt_device *dev, uint64_t ntok)
{
    uint16_t *tokens = calloc(ntok, sizeof *tokens);
    assert_non_null(tokens);
    gt_toy_tokens(tokens, ntok);
    gt_dbuf chunk = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, ntok * sizeof *tokens, 0, &chunk));
    GT_ASSERT_OK(gt_device_copy_in(dev, chunk, 0, tokens, ntok * sizeof *tokens));
    free(tokens);
    return chunk;
}

void gt_toy_losses(gt_device *dev, uint64_t ntok, float *loss, int steps, int vocab, int channels)
{
    gt_toy_losses_with(dev, ntok, loss, steps, &(gt_toy_shape){vocab, channels, 1}, &gt_toy_opt);
}

void gt_toy_losses_with(gt_device *dev, uint64_t ntok, float *loss, int steps,
                        const gt_toy_shape *shape, const gt_adamw *opt)
{
    gt_toy t;
    gt_toy_open_as(dev, gt_toy_chunk(dev, ntok), ntok, shape, &t);
    for (int s = 0; s < steps; s++) {
        GT_ASSERT_OK(gt_toy_step_with(&t, opt, &loss[s]));
    }
    gt_toy_close(&t);
}

void gt_toy_losses_unpaged(uint64_t ntok, float *loss, int steps, int vocab, int channels)
{
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 1};
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    gt_toy_losses(dev, ntok, loss, steps, vocab, channels);
    gt_device_close(dev);
}
