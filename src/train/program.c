// The program of one training step (train.h gt_gpt2_program): recorded, not written out by
// hand, so it is exactly what gpt2.c launches and cannot drift from it.
#include <gputravel/train.h>

#include <stdlib.h>
#include <string.h>

typedef struct {
    gt_writer w;
    gt_err err;
} recorder;

static void record(void *ctx, const gt_op *op)
{
    recorder *r = ctx;
    if (gt_is_ok(r->err) && gt_op_in_programs(op->kind)) {
        r->err = gt_op_program_append(&r->w, op);
    }
}

// The step opt names (train.h gt_adamw.update_in_backward); lr and loss scale are no part of
// a program (floats stay free).
static gt_err record_step(gt_gpt2 *m, gt_loader *l, int B, int T, const gt_adamw *opt,
                          float *loss)
{
    const float lr = 1e-4f;
    if (opt->update_in_backward) {
        return gt_gpt2_step_in_backward(m, gt_loader_inputs(l), gt_loader_targets(l), B, T, 1.0f,
                                        opt, lr, loss);
    }
    GT_TRY(gt_gpt2_zero_grad(m));
    GT_TRY(gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l), B, T, 1.0f,
                                    loss));
    return gt_gpt2_update(m, opt, lr, NULL);
}

gt_err gt_gpt2_program(const gt_gpt2_config *cfg, int B, int T, const gt_adamw *opt,
                       gt_buf *program)
{
    memset(program, 0, sizeof *program);
    GT_TRY(gt_gpt2_config_check(cfg));
    GT_ENSURE(B >= 1 && T >= 1 && T <= cfg->max_seq_len, GT_E_ARG, "program: B %d, T %d", B, T);
    gt_device *dev = NULL;
    GT_TRY(gt_device_open(&dev, &(gt_device_config){.kind = GT_DEVICE_CPU}));
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    gt_dbuf data = 0;
    uint64_t ntok = (uint64_t)B * (uint64_t)T + 1;
    recorder r = {.w = gt_writer_init_dynamic(), .err = GT_OK};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_gpt2_create(&m, dev, cfg), out);
    GT_TRY_GOTO(err, gt_device_alloc(dev, ntok * 2, 0, &data), out);  // zero tokens: valid
    GT_TRY_GOTO(err, gt_loader_create(&l, dev, &data, &ntok, 1, B, T, cfg->vocab_size, false, 0),
                out);
    float loss = 0.0f;
    gt_device_observe(dev, record, &r);
    GT_TRY_GOTO(err, gt_loader_next(l), out);
    GT_TRY_GOTO(err, record_step(m, l, B, T, opt, &loss), out);
    gt_device_observe(dev, NULL, NULL);
    GT_TRY_GOTO(err, r.err, out);
    GT_TRY_GOTO(err, gt_buf_append(program, r.w.data, r.w.len), out);
out:
    gt_writer_free(&r.w);
    gt_loader_free(l);
    gt_gpt2_free(m);
    gt_device_close(dev);
    return gt_err_wrap(err, "recording the training program");
}
