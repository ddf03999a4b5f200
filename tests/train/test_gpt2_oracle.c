// train/: the C GPT-2 against the PyTorch oracle (tests/oracle/make_gpt2_fixture.py): logits,
// loss, every parameter gradient, and the losses of 10 AdamW steps.
//
// Tolerances. The oracle computes in float64 from the same float32 weights, so the differences
// are the C side's float32 rounding: about 2^-24 relative per operation, growing with the length
// of each reduction (C = 64 .. 4C = 256 terms; 64 rows for weight gradients) to a few 1e-6
// relative. We allow |c - ref| <= atol + rtol * |ref| with
//   logits:  atol 1e-5, rtol 1e-4 (|logit| < 1; observed max error ~1e-6)
//   loss:    1e-5 absolute (observed ~1e-7)
//   grads:   atol 1e-5 * max|ref grad of the tensor|, rtol 1e-3 (observed <= ~1e-6 relative;
//            gradients of size ~1e-9 carry only cancellation noise, hence the per-tensor atol)
//   10 step losses: 1e-4 absolute. AdamW divides by sqrt(v): a gradient near 0 moves its
//            parameter by up to lr whatever its sign, so float32/float64 sign flips of noise-sized
//            gradients perturb the trajectory at the 1e-6 level per step (observed ~1e-6).
#include "testlib.h"

#include <gputravel/device.h>
#include <gputravel/kernels.h>
#include <gputravel/train.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The device the oracle runs on: cpu here; test_cuda_gpt2_oracle.c includes this file with
// GT_ORACLE_DEVICE set to GT_DEVICE_CUDA and its own main (which skips without a GPU).
#ifndef GT_ORACLE_DEVICE
#define GT_ORACLE_DEVICE GT_DEVICE_CPU
#endif

typedef struct {
    int B, T, nparams, steps, Vp, V;
    float lr, beta1, beta2, eps, wd;
    int32_t *x, *y;
    float *logits, loss, *grads, *losses;
    gt_buf raw;
} fixture;

static float f32_of(int32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void read_f32(gt_reader *r, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = 0;
        GT_ASSERT_OK(gt_reader_u32le(r, &u));
        memcpy(&out[i], &u, 4);
    }
}

static void load_fixture(fixture *f)
{
    memset(f, 0, sizeof *f);
    GT_ASSERT_OK(gt_file_read_all(GT_SOURCE_DIR "/tests/oracle/gpt2_tiny_fixture.bin", 8u << 20,
                                  &f->raw));
    gt_reader r = gt_reader_init(f->raw.data, f->raw.len);
    int32_t h[256];
    for (int i = 0; i < 256; i++) {
        GT_ASSERT_OK(gt_reader_i32le(&r, &h[i]));
    }
    assert_int_equal(h[0], 0x524F5447);
    assert_int_equal(h[1], 1);
    f->B = h[2];
    f->T = h[3];
    f->nparams = h[4];
    f->steps = h[5];
    f->Vp = h[6];
    f->V = h[7];
    f->lr = f32_of(h[8]);
    f->beta1 = f32_of(h[9]);
    f->beta2 = f32_of(h[10]);
    f->eps = f32_of(h[11]);
    f->wd = f32_of(h[12]);
    size_t bt = (size_t)f->B * f->T;
    f->x = calloc(bt, 4);
    f->y = calloc(bt, 4);
    f->logits = calloc(bt * f->Vp, 4);
    f->grads = calloc(f->nparams, 4);
    f->losses = calloc(f->steps, 4);
    for (size_t i = 0; i < bt; i++) {
        GT_ASSERT_OK(gt_reader_i32le(&r, &f->x[i]));
    }
    for (size_t i = 0; i < bt; i++) {
        GT_ASSERT_OK(gt_reader_i32le(&r, &f->y[i]));
    }
    read_f32(&r, f->logits, bt * f->Vp);
    read_f32(&r, &f->loss, 1);
    read_f32(&r, f->grads, f->nparams);
    read_f32(&r, f->losses, f->steps);
    GT_ASSERT_OK(gt_reader_expect_end(&r, "fixture"));
}

static void free_fixture(fixture *f)
{
    free(f->x);
    free(f->y);
    free(f->logits);
    free(f->grads);
    free(f->losses);
    gt_buf_free(&f->raw);
}

typedef struct {
    gt_device *dev;
    gt_gpt2 *model;
    gt_dbuf x, y;
} rig;

static void rig_open(rig *g, const fixture *f)
{
    gt_device_config cfg = {.kind = GT_ORACLE_DEVICE, .threads = 2};
    GT_ASSERT_OK(gt_device_open(&g->dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_load(&g->model, g->dev, GT_SOURCE_DIR "/tests/oracle/gpt2_tiny_model.bin"));
    assert_int_equal(gt_gpt2_num_params(g->model), f->nparams);
    assert_int_equal(gt_gpt2_get_config(g->model)->padded_vocab_size, f->Vp);
    assert_int_equal(gt_gpt2_get_config(g->model)->vocab_size, f->V);
    size_t bt = (size_t)f->B * f->T;
    GT_ASSERT_OK(gt_device_alloc(g->dev, bt * 4, 0, &g->x));
    GT_ASSERT_OK(gt_device_alloc(g->dev, bt * 4, 0, &g->y));
    GT_ASSERT_OK(gt_device_copy_in(g->dev, g->x, 0, f->x, bt * 4));
    GT_ASSERT_OK(gt_device_copy_in(g->dev, g->y, 0, f->y, bt * 4));
}

static void rig_close(rig *g)
{
    gt_gpt2_free(g->model);
    gt_device_close(g->dev);
}

static void logits_and_loss(void **state)
{
    (void)state;
    fixture f;
    load_fixture(&f);
    rig g;
    rig_open(&g, &f);
    float loss = 0.0f;
    GT_ASSERT_OK(gt_gpt2_forward(g.model, g.x, g.y, f.B, f.T, &loss));
    print_message("loss: C %.7f torch %.7f\n", loss, f.loss);
    assert_true(fabsf(loss - f.loss) <= 1e-5f);
    float *row = calloc(f.Vp, 4);
    double maxerr = 0.0;
    for (int b = 0; b < f.B; b++) {
        for (int t = 0; t < f.T; t++) {
            GT_ASSERT_OK(gt_gpt2_logits_read(g.model, b, t, row, f.Vp));
            const float *ref = f.logits + ((size_t)b * f.T + t) * f.Vp;
            for (int i = 0; i < f.Vp; i++) {
                double err = fabs((double)row[i] - ref[i]);
                maxerr = err > maxerr ? err : maxerr;
                if (err > 1e-5 + 1e-4 * fabs(ref[i])) {
                    fail_msg("logit (%d,%d,%d): C %.8g torch %.8g", b, t, i, row[i], ref[i]);
                }
            }
        }
    }
    print_message("logits: max abs error %.3g\n", maxerr);
    free(row);
    rig_close(&g);
    free_fixture(&f);
}

static const char *const tensor_names[GT_GPT2_NUM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw",
    "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

static void gradients(void **state)
{
    (void)state;
    fixture f;
    load_fixture(&f);
    rig g;
    rig_open(&g, &f);
    float loss = 0.0f;
    GT_ASSERT_OK(gt_gpt2_zero_grad(g.model));
    GT_ASSERT_OK(gt_gpt2_forward_backward(g.model, g.x, g.y, f.B, f.T, 1.0f, &loss));
    assert_true(fabsf(loss - f.loss) <= 1e-5f);
    float *grads = calloc(f.nparams, 4);
    GT_ASSERT_OK(gt_gpt2_grads_read(g.model, grads, f.nparams));
    size_t sizes[GT_GPT2_NUM_TENSORS];
    gt_gpt2_param_sizes(gt_gpt2_get_config(g.model), sizes);
    size_t at = 0;
    for (int t = 0; t < GT_GPT2_NUM_TENSORS; t++) {
        double refmax = 0.0, maxerr = 0.0;
        for (size_t i = 0; i < sizes[t]; i++) {
            refmax = fmax(refmax, fabs(f.grads[at + i]));
        }
        assert_true(refmax > 0.0);  // every tensor gets a gradient
        for (size_t i = 0; i < sizes[t]; i++) {
            double ref = f.grads[at + i], c = grads[at + i], err = fabs(c - ref);
            maxerr = fmax(maxerr, err);
            if (err > 1e-5 * refmax + 1e-3 * fabs(ref)) {
                fail_msg("grad %s[%zu]: C %.8g torch %.8g (max |grad| %.3g)", tensor_names[t], i,
                         c, ref, refmax);
            }
        }
        print_message("grad %-8s max|ref| %.3e max abs error %.3e (%.2e relative to max)\n",
                      tensor_names[t], refmax, maxerr, maxerr / refmax);
        at += sizes[t];
    }
    // Padded vocabulary rows of wte never reach the loss: exactly zero gradient.
    int C = gt_gpt2_get_config(g.model)->channels;
    for (size_t i = (size_t)f.V * C; i < (size_t)f.Vp * C; i++) {
        assert_true(grads[i] == 0.0f);
    }
    free(grads);
    rig_close(&g);
    free_fixture(&f);
}

static void adamw_steps(void **state)
{
    (void)state;
    fixture f;
    load_fixture(&f);
    rig g;
    rig_open(&g, &f);
    gt_adamw opt = {.beta1 = f.beta1, .beta2 = f.beta2, .eps = f.eps, .weight_decay = f.wd};
    for (int s = 0; s < f.steps; s++) {
        float loss = 0.0f;
        GT_ASSERT_OK(gt_gpt2_zero_grad(g.model));
        GT_ASSERT_OK(gt_gpt2_forward_backward(g.model, g.x, g.y, f.B, f.T, 1.0f, &loss));
        GT_ASSERT_OK(gt_gpt2_update(g.model, &opt, f.lr, NULL));
        print_message("step %d: C %.7f torch %.7f diff %.2e\n", s, loss, f.losses[s],
                      fabs(loss - f.losses[s]));
        assert_true(fabsf(loss - f.losses[s]) <= 1e-4f);
    }
    assert_int_equal(gt_gpt2_step(g.model), f.steps);
    rig_close(&g);
    free_fixture(&f);
}

#ifndef GT_ORACLE_OWN_MAIN
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(logits_and_loss),
        cmocka_unit_test(gradients),
        cmocka_unit_test(adamw_steps),
    };
    // The same fixture on every path of the cpu kernels this CPU has (avx512, avx2, scalar).
    int failed = 0;
    for (int isa = GT_CPU_ISA_COUNT_ - 1; isa >= 0; isa--) {
        if (!gt_cpu_isa_supported((gt_cpu_isa)isa)) {
            print_message("path %s: not on this cpu, skipped\n", gt_cpu_isa_name((gt_cpu_isa)isa));
            continue;
        }
        GT_ASSERT_OK(gt_ops_cpu_set_isa((gt_cpu_isa)isa));
        failed += cmocka_run_group_tests_name(gt_cpu_isa_name((gt_cpu_isa)isa), tests, NULL, NULL);
    }
    return failed;
}
#endif
