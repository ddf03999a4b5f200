// Kernels launched on the sim device run inside devd on its memory and give bit-identical results
// to the cpu backend: an op sequence, and a few GPT-2 training steps (the trainer, unchanged).
#include "testlib.h"

#include <gputravel/device.h>
#include <gputravel/train.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gputravel/kernels.h>

typedef gt_test_devd fixture;

static int setup(void **state)
{
    static const char *const args[] = {"--mem-limit", "64MiB", "--threads", "2", NULL};
    return gt_test_devd_setup(state, args);
}

static void open_both(fixture *f, gt_device **cpu, gt_device **sim)
{
    gt_device_config cc = {.kind = GT_DEVICE_CPU, .threads = 2};
    gt_device_config sc = {.kind = GT_DEVICE_SIM, .threads = 2, .socket_path = f->sock};
    GT_ASSERT_OK(gt_device_open(cpu, &cc));
    GT_ASSERT_OK(gt_device_open(sim, &sc));
}

static void randf(float *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 747796405u + 2891336453u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 2.0f;
    }
}

// Runs matmul -> gelu -> residual -> layernorm -> softmax/xent on dev; returns the outputs.
static void op_sequence(gt_device *dev, float *ln_out, float *losses, float *logits_grad)
{
    enum { N = 24, C = 32, OC = 32, V = 40, Vp = 64, B = 2, T = 12 };
    float x[N * C], w[OC * C], bias[OC], lw[C], lb[C], wv[Vp * C];
    int32_t tgt[N];
    randf(x, N * C, 1);
    randf(w, OC * C, 2);
    randf(bias, OC, 3);
    randf(lw, C, 4);
    randf(lb, C, 5);
    randf(wv, Vp * C, 6);
    for (int i = 0; i < N; i++) {
        tgt[i] = (i * 7) % V;
    }
    gt_dbuf xb, wb, bb, h, g, r, lo, mean, rstd, lwb, lbb, wvb, logits, tb, lossb;
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof x, GT_DBUF_NO_READBACK, &xb));  // holder data
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof w, 0, &wb));
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof bias, 0, &bb));
    GT_ASSERT_OK(gt_device_alloc(dev, N * OC * 4, 0, &h));
    GT_ASSERT_OK(gt_device_alloc(dev, N * OC * 4, 0, &g));
    GT_ASSERT_OK(gt_device_alloc(dev, N * OC * 4, 0, &r));
    GT_ASSERT_OK(gt_device_alloc(dev, N * C * 4, 0, &lo));
    GT_ASSERT_OK(gt_device_alloc(dev, N * 4, 0, &mean));
    GT_ASSERT_OK(gt_device_alloc(dev, N * 4, 0, &rstd));
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof lw, 0, &lwb));
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof lb, 0, &lbb));
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof wv, 0, &wvb));
    GT_ASSERT_OK(gt_device_alloc(dev, N * Vp * 4, 0, &logits));
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof tgt, 0, &tb));
    GT_ASSERT_OK(gt_device_alloc(dev, N * 4, 0, &lossb));
    GT_ASSERT_OK(gt_device_copy_in(dev, xb, 0, x, sizeof x));
    GT_ASSERT_OK(gt_device_copy_in(dev, wb, 0, w, sizeof w));
    GT_ASSERT_OK(gt_device_copy_in(dev, bb, 0, bias, sizeof bias));
    GT_ASSERT_OK(gt_device_copy_in(dev, lwb, 0, lw, sizeof lw));
    GT_ASSERT_OK(gt_device_copy_in(dev, lbb, 0, lb, sizeof lb));
    GT_ASSERT_OK(gt_device_copy_in(dev, wvb, 0, wv, sizeof wv));
    GT_ASSERT_OK(gt_device_copy_in(dev, tb, 0, tgt, sizeof tgt));

    gt_op mm = {.kind = GT_OP_MATMUL_FWD, .refs = {{h, 0}, {xb, 0}, {wb, 0}, {bb, 0}},
                .ints = {N, C, OC}};
    gt_op ge = {.kind = GT_OP_GELU_FWD, .refs = {{g, 0}, {h, 0}}, .ints = {N * OC}};
    gt_op re = {.kind = GT_OP_RESIDUAL_FWD, .refs = {{r, 0}, {g, 0}, {xb, 0}}, .ints = {N * C}};
    gt_op ln = {.kind = GT_OP_LAYERNORM_FWD,
                .refs = {{lo, 0}, {mean, 0}, {rstd, 0}, {r, 0}, {lwb, 0}, {lbb, 0}},
                .ints = {N, C}};
    gt_op head = {.kind = GT_OP_MATMUL_FWD, .refs = {{logits, 0}, {lo, 0}, {wvb, 0}, {0, 0}},
                  .ints = {N, C, Vp}};
    gt_op xe = {.kind = GT_OP_SOFTMAX_XENT, .refs = {{lossb, 0}, {logits, 0}, {tb, 0}},
                .ints = {B, T, V, Vp, 1}, .floats = {1.0f / N}};
    GT_ASSERT_OK(gt_device_launch(dev, &mm));
    GT_ASSERT_OK(gt_device_launch(dev, &ge));
    GT_ASSERT_OK(gt_device_launch(dev, &re));
    GT_ASSERT_OK(gt_device_launch(dev, &ln));
    GT_ASSERT_OK(gt_device_launch(dev, &head));
    GT_ASSERT_OK(gt_device_launch(dev, &xe));
    GT_ASSERT_OK(gt_device_sync(dev));
    GT_ASSERT_OK(gt_device_copy_out(dev, ln_out, lo, 0, N * C * 4));
    GT_ASSERT_OK(gt_device_copy_out(dev, losses, lossb, 0, N * 4));
    GT_ASSERT_OK(gt_device_copy_out(dev, logits_grad, logits, 0, N * Vp * 4));
    // a bad launch is refused with the op's error and leaves the session usable
    gt_op bad = mm;
    bad.ints[0] = N + 1;
    assert_false(gt_is_ok(gt_device_launch(dev, &bad)));
    bad = mm;
    bad.refs[1].buf = 987654321;
    assert_false(gt_is_ok(gt_device_launch(dev, &bad)));
    bad.kind = 4242;
    assert_false(gt_is_ok(gt_device_launch(dev, &bad)));
    GT_ASSERT_OK(gt_device_launch(dev, &mm));
}

static void test_op_sequence_matches_cpu(void **state)
{
    fixture *f = *state;
    gt_device *cpu = NULL, *sim = NULL;
    open_both(f, &cpu, &sim);
    enum { N = 24, C = 32, Vp = 64 };
    static float a1[N * C], a2[N], a3[N * Vp], b1[N * C], b2[N], b3[N * Vp];
    op_sequence(cpu, a1, a2, a3);
    op_sequence(sim, b1, b2, b3);
    assert_memory_equal(a1, b1, sizeof a1);
    assert_memory_equal(a2, b2, sizeof a2);
    assert_memory_equal(a3, b3, sizeof a3);
    for (int i = 0; i < N; i++) {
        assert_true(isfinite(a2[i]) && a2[i] > 0.0f);
    }
    gt_device_close(cpu);
    gt_device_close(sim);
}

static void train_steps(gt_device *dev, float *losses, int steps, float *params, size_t *np)
{
    gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 50, .padded_vocab_size = 64,
                          .num_layers = 2, .num_heads = 2, .channels = 32};
    enum { B = 2, T = 8 };
    gt_gpt2 *m = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 1234));
    gt_dbuf in = 0, tg = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, B * T * 4, GT_DBUF_NO_READBACK, &in));
    GT_ASSERT_OK(gt_device_alloc(dev, B * T * 4, GT_DBUF_NO_READBACK, &tg));
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                    .grad_clip = 1.0f};
    for (int s = 0; s < steps; s++) {
        int32_t x[B * T], y[B * T];
        for (int i = 0; i < B * T; i++) {
            x[i] = (i * 3 + s * 5) % 50;
            y[i] = (i * 3 + s * 5 + 1) % 50;
        }
        GT_ASSERT_OK(gt_device_copy_in(dev, in, 0, x, sizeof x));
        GT_ASSERT_OK(gt_device_copy_in(dev, tg, 0, y, sizeof y));
        GT_ASSERT_OK(gt_gpt2_zero_grad(m));
        GT_ASSERT_OK(gt_gpt2_forward_backward(m, in, tg, B, T, 1.0f, &losses[s]));
        GT_ASSERT_OK(gt_gpt2_update(m, &opt, 1e-3f, NULL));
    }
    *np = gt_gpt2_num_params(m);
    GT_ASSERT_OK(gt_gpt2_params_read(m, params, *np));
    gt_gpt2_free(m);
}

static void test_training_matches_cpu(void **state)
{
    fixture *f = *state;
    gt_device *cpu = NULL, *sim = NULL;
    open_both(f, &cpu, &sim);
    enum { STEPS = 4 };
    float lc[STEPS], ls[STEPS];
    size_t nc = 0, ns = 0;
    float *pc = malloc(200000 * sizeof(float)), *ps = malloc(200000 * sizeof(float));
    train_steps(cpu, lc, STEPS, pc, &nc);
    train_steps(sim, ls, STEPS, ps, &ns);
    assert_true(nc <= 200000);
    assert_int_equal(nc, ns);
    for (int s = 0; s < STEPS; s++) {
        if (memcmp(&lc[s], &ls[s], sizeof(float)) != 0) {
            fail_msg("step %d: loss %.9g on cpu, %.9g on sim", s, lc[s], ls[s]);
        }
    }
    assert_true(ls[STEPS - 1] < ls[0]);  // it learns
    assert_memory_equal(pc, ps, nc * sizeof(float));
    free(pc);
    free(ps);
    gt_device_close(cpu);
    gt_device_close(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_sequence_matches_cpu),
        cmocka_unit_test(test_training_matches_cpu),
    };
    return cmocka_run_group_tests(tests, setup, gt_test_devd_teardown);
}
