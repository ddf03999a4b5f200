// The toy model of the label and export tests (toy_model.h).
#include "toy_model.h"

const gt_adamw gt_toy_opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_clip = 1.0f};

void gt_toy_open(gt_device *dev, gt_dbuf chunk, uint64_t ntok, gt_toy *t)
{
    gt_toy_open_shaped(dev, chunk, ntok, GT_TOY_VOCAB, 16, t);
}

void gt_toy_open_shaped(gt_device *dev, gt_dbuf chunk, uint64_t ntok, int vocab, int channels,
                        gt_toy *t)
{
    gt_gpt2_config c = {.max_seq_len = 8, .vocab_size = vocab,
                        .padded_vocab_size = gt_gpt2_pad_vocab(vocab), .num_layers = 1,
                        .num_heads = 2, .channels = channels};
    GT_ASSERT_OK(gt_gpt2_create(&t->m, dev, &c));
    GT_ASSERT_OK(gt_gpt2_init_random(t->m, 5));
    GT_ASSERT_OK(gt_loader_create(&t->l, dev, &chunk, &ntok, 1, 2, 8, GT_TOY_VOCAB, false, 0));
}

void gt_toy_close(gt_toy *t)
{
    gt_loader_free(t->l);
    gt_gpt2_free(t->m);
}

gt_err gt_toy_step(gt_toy *t, float *loss)
{
    GT_TRY(gt_loader_next(t->l));
    GT_TRY(gt_gpt2_zero_grad(t->m));
    GT_TRY(gt_gpt2_forward_backward(t->m, gt_loader_inputs(t->l), gt_loader_targets(t->l), 2, 8,
                                    1.0f, loss));
    return gt_gpt2_update(t->m, &gt_toy_opt, 1e-3f, NULL);
}
