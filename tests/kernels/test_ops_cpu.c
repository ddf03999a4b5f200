// kernels/ (through the cpu device): the cpu backend (buffer table, policy, ranges) and every kernel's backward against
// central finite differences of a scalar objective, plus the op size checks.
#include "testlib.h"

#include <gputravel/device.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gputravel/kernels.h>

static gt_device *open_cpu(void)
{
    gt_device *dev = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 2};
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    return dev;
}

static gt_dbuf upload(gt_device *dev, const void *p, size_t bytes)
{
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, bytes, 0, &b));
    GT_ASSERT_OK(gt_device_copy_in(dev, b, 0, p, bytes));
    return b;
}

static void download(gt_device *dev, void *p, gt_dbuf b, size_t bytes)
{
    GT_ASSERT_OK(gt_device_copy_out(dev, p, b, 0, bytes));
}

static uint64_t rng_state = 42;
static float frand(void)  // [-1, 1)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545F4914F6CDD1Dull) >> 40) / 8388608.0f - 1.0f;
}

static float *randv(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i] = scale * frand();
    }
    return v;
}

// ---- backend ----------------------------------------------------------------------------------

static void buffers_and_policy(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    assert_int_equal(gt_device_get_kind(dev), GT_DEVICE_CPU);
    gt_dbuf a = 0, secret = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 100, 0, &a));
    assert_true(a != 0);
    uint64_t sz = 0;
    GT_ASSERT_OK(gt_device_buf_size(dev, a, &sz));
    assert_int_equal(sz, 100);
    uint8_t in[100], out[100];
    for (int i = 0; i < 100; i++) {
        in[i] = (uint8_t)i;
    }
    GT_ASSERT_OK(gt_device_copy_in(dev, a, 0, in, 100));
    GT_ASSERT_OK(gt_device_copy_out(dev, out, a, 10, 90));
    assert_memory_equal(out, in + 10, 90);
    // ranges: never past the end, never wrapping
    GT_ASSERT_CODE(gt_device_copy_in(dev, a, 1, in, 100), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(dev, out, a, UINT64_MAX, 2), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, a, 50, 0, 51), GT_E_ARG);
    GT_ASSERT_OK(gt_device_memset(dev, a, 50, 7, 50));
    GT_ASSERT_OK(gt_device_copy_out(dev, out, a, 0, 100));
    assert_int_equal(out[49], 49);
    assert_int_equal(out[50], 7);
    // NO_READBACK: written and used by ops, never copied out
    GT_ASSERT_OK(gt_device_alloc(dev, 16, GT_DBUF_NO_READBACK, &secret));
    GT_ASSERT_OK(gt_device_copy_in(dev, secret, 0, in, 16));
    memset(out, 0xAA, sizeof out);
    GT_ASSERT_CODE(gt_device_copy_out(dev, out, secret, 0, 16), GT_E_POLICY);
    assert_int_equal(out[0], 0xAA);  // nothing leaked into the destination
    // freed handles never resolve again, even when the slot is reused
    GT_ASSERT_OK(gt_device_free(dev, a));
    GT_ASSERT_CODE(gt_device_free(dev, a), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_copy_out(dev, out, a, 0, 1), GT_E_NOTFOUND);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 8, 0, &b));
    assert_true(b != a);
    GT_ASSERT_CODE(gt_device_buf_size(dev, a, &sz), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_buf_size(dev, 0, &sz), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_alloc(dev, 0, 0, &b), GT_E_ARG);
    gt_device_close(dev);  // frees secret and b

    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .mem_limit = 1000};
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    GT_ASSERT_OK(gt_device_alloc(dev, 600, 0, &a));
    GT_ASSERT_CODE(gt_device_alloc(dev, 600, 0, &b), GT_E_LIMIT);
    GT_ASSERT_OK(gt_device_free(dev, a));
    GT_ASSERT_OK(gt_device_alloc(dev, 600, 0, &b));
    gt_device_close(dev);

    gt_device_kind k;
    GT_ASSERT_CODE(gt_device_kind_parse("tpu", &k), GT_E_ARG);
}

// ---- op checks ----------------------------------------------------------------------------------

static void op_size_checks(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    int N = 4, C = 8;
    float *x = randv((size_t)N * C, 1.0f), *w = randv(C, 1.0f);
    gt_dbuf out = upload(dev, x, (size_t)N * C * 4), inp = upload(dev, x, (size_t)N * C * 4);
    gt_dbuf mean = upload(dev, x, (size_t)N * 4), rstd = upload(dev, x, (size_t)N * 4);
    gt_dbuf wb = upload(dev, w, (size_t)C * 4);
    gt_op op = {.kind = GT_OP_LAYERNORM_FWD,
                .refs = {{out, 0}, {mean, 0}, {rstd, 0}, {inp, 0}, {wb, 0}, {wb, 0}},
                .ints = {N, C}};
    GT_ASSERT_OK(gt_device_launch(dev, &op));
    op.refs[3].offset = 4;  // one float short of (N,C)
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.refs[3].offset = 0;
    op.ints[0] = N + 1;  // shapes larger than the buffers
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.ints[0] = 0;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.ints[0] = -4;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.ints[0] = (int64_t)1 << 40;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.ints[0] = N;
    op.refs[4].buf = 0;  // a required ref left empty
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.refs[4].buf = wb;
    op.refs[1].buf = 12345;  // not a handle
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_NOTFOUND);
    op.kind = 999;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.kind = 0;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);

    // encoder: tokens must be < V, T <= maxT
    int B = 1, T = 2, V = 5, Vp = 8, maxT = 2;
    int32_t tok[2] = {1, 4};
    float *wte = randv((size_t)Vp * C, 1.0f), *wpe = randv((size_t)maxT * C, 1.0f);
    gt_dbuf tb = upload(dev, tok, sizeof tok), wteb = upload(dev, wte, (size_t)Vp * C * 4);
    gt_dbuf wpeb = upload(dev, wpe, (size_t)maxT * C * 4);
    gt_op enc = {.kind = GT_OP_ENCODER_FWD, .refs = {{out, 0}, {tb, 0}, {wteb, 0}, {wpeb, 0}},
                 .ints = {B, T, C, V, Vp, maxT}};
    GT_ASSERT_OK(gt_device_launch(dev, &enc));
    float o[16];
    download(dev, o, out, sizeof o);
    assert_float_equal(o[C + 3], wte[4 * C + 3] + wpe[C + 3], 1e-6);
    tok[1] = 5;  // == V: a padded row, never a real token
    GT_ASSERT_OK(gt_device_copy_in(dev, tb, 0, tok, sizeof tok));
    GT_ASSERT_CODE(gt_device_launch(dev, &enc), GT_E_FORMAT);
    tok[1] = -1;
    GT_ASSERT_OK(gt_device_copy_in(dev, tb, 0, tok, sizeof tok));
    GT_ASSERT_CODE(gt_device_launch(dev, &enc), GT_E_FORMAT);
    tok[1] = 0;
    GT_ASSERT_OK(gt_device_copy_in(dev, tb, 0, tok, sizeof tok));
    enc.ints[5] = 1;  // T > maxT
    GT_ASSERT_CODE(gt_device_launch(dev, &enc), GT_E_ARG);
    enc.ints[5] = maxT;
    enc.ints[3] = Vp + 1;  // V > Vp
    GT_ASSERT_CODE(gt_device_launch(dev, &enc), GT_E_ARG);

    // xent: targets must be < V
    float logits[2 * 8];
    for (int i = 0; i < 16; i++) {
        logits[i] = frand();
    }
    gt_dbuf lb = upload(dev, logits, sizeof logits), lossb = upload(dev, logits, 8);
    gt_op xe = {.kind = GT_OP_SOFTMAX_XENT, .refs = {{lossb, 0}, {lb, 0}, {tb, 0}},
                .ints = {1, 2, V, Vp, 0}};
    GT_ASSERT_OK(gt_device_launch(dev, &xe));
    tok[0] = 7;  // < Vp but >= V
    GT_ASSERT_OK(gt_device_copy_in(dev, tb, 0, tok, sizeof tok));
    GT_ASSERT_CODE(gt_device_launch(dev, &xe), GT_E_FORMAT);

    // token data: gather and check refuse tokens >= V; gather stays inside the buffer
    uint16_t data[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    int32_t four[4] = {0};
    gt_dbuf db = upload(dev, data, sizeof data), ib = upload(dev, four, 16), gb = upload(dev, four, 16);
    gt_op ga = {.kind = GT_OP_TOKENS_GATHER, .refs = {{ib, 0}, {gb, 0}, {db, 0}},
                .ints = {4, 4, 9}};
    GT_ASSERT_OK(gt_device_launch(dev, &ga));
    int32_t got[4];
    download(dev, got, gb, sizeof got);
    assert_int_equal(got[0], 5);
    assert_int_equal(got[3], 8);
    ga.ints[1] = 5;  // would read data[9]
    GT_ASSERT_CODE(gt_device_launch(dev, &ga), GT_E_ARG);
    ga.ints[1] = 4;
    ga.ints[2] = 8;  // token 8 is not below vocab 8
    GT_ASSERT_CODE(gt_device_launch(dev, &ga), GT_E_FORMAT);
    gt_op ck = {.kind = GT_OP_TOKENS_CHECK, .refs = {{db, 0}}, .ints = {9, 9}};
    GT_ASSERT_OK(gt_device_launch(dev, &ck));
    ck.ints[1] = 8;
    GT_ASSERT_CODE(gt_device_launch(dev, &ck), GT_E_FORMAT);
    ck.ints[0] = 10;
    GT_ASSERT_CODE(gt_device_launch(dev, &ck), GT_E_ARG);

    free(x);
    free(w);
    free(wte);
    free(wpe);
    gt_device_close(dev);
}

// ---- finite differences -------------------------------------------------------------------------
// Objective J = sum(out * R) for a fixed random R; dJ/dx from the backward op with dout = R is
// compared with (J(x+h) - J(x-h)) / 2h in float32 with h = 1e-2 for every element of every input.
// Central differences carry O(h^2 f''') truncation plus float32 rounding of J (|J| ~ 10, eps 6e-8,
// divided by 2h gives ~3e-5); we accept |analytic - numeric| <= 2e-4 + 2e-3 |numeric|.

typedef struct {
    gt_device *dev;
    gt_op fwd;        // forward op over device buffers
    int out_ref;      // which ref of fwd is the output
    size_t out_n;     // its float count
    const float *R;   // dout
} fd_ctx;

static double objective(fd_ctx *c)
{
    GT_ASSERT_OK(gt_device_launch(c->dev, &c->fwd));
    float *o = malloc(c->out_n * 4);
    GT_ASSERT_OK(gt_device_copy_out(c->dev, o, c->fwd.refs[c->out_ref].buf,
                                    c->fwd.refs[c->out_ref].offset, c->out_n * 4));
    double j = 0.0;
    for (size_t i = 0; i < c->out_n; i++) {
        j += (double)o[i] * c->R[i];
    }
    free(o);
    return j;
}

// Perturbs every element of host array x (n floats, uploaded in buf) and checks grad.
static void fd_check(fd_ctx *c, const char *what, float *x, size_t n, gt_dbuf buf,
                     const float *grad)
{
    const float h = 1e-2f;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + h;
        GT_ASSERT_OK(gt_device_copy_in(c->dev, buf, 0, x, n * 4));
        double jp = objective(c);
        x[i] = keep - h;
        GT_ASSERT_OK(gt_device_copy_in(c->dev, buf, 0, x, n * 4));
        double jm = objective(c);
        x[i] = keep;
        double num = (jp - jm) / (2.0 * h), err = fabs(grad[i] - num);
        worst = fmax(worst, err / (2e-4 + 2e-3 * fabs(num)));
        if (err > 2e-4 + 2e-3 * fabs(num)) {
            fail_msg("%s[%zu]: analytic %.6g numeric %.6g", what, i, grad[i], num);
        }
    }
    GT_ASSERT_OK(gt_device_copy_in(c->dev, buf, 0, x, n * 4));
    print_message("%-22s %4zu elements, worst error %.1e of tolerance\n", what, n, worst);
}

static void fd_layernorm(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    int N = 3, C = 8;
    size_t nc = (size_t)N * C;
    float *x = randv(nc, 1.0f), *w = randv(C, 1.0f), *b = randv(C, 0.5f), *R = randv(nc, 1.0f);
    gt_dbuf xb = upload(dev, x, nc * 4), wb = upload(dev, w, C * 4), bb = upload(dev, b, C * 4);
    gt_dbuf ob = upload(dev, x, nc * 4), mb = upload(dev, x, N * 4), rb = upload(dev, x, N * 4);
    gt_dbuf Rb = upload(dev, R, nc * 4);
    float *zero = calloc(nc, 4);
    gt_dbuf dx = upload(dev, zero, nc * 4), dw = upload(dev, zero, C * 4), db = upload(dev, zero, C * 4);
    fd_ctx c = {dev, {.kind = GT_OP_LAYERNORM_FWD,
                      .refs = {{ob, 0}, {mb, 0}, {rb, 0}, {xb, 0}, {wb, 0}, {bb, 0}},
                      .ints = {N, C}}, 0, nc, R};
    objective(&c);
    gt_op bwd = {.kind = GT_OP_LAYERNORM_BWD,
                 .refs = {{dx, 0}, {dw, 0}, {db, 0}, {Rb, 0}, {xb, 0}, {wb, 0}, {mb, 0}, {rb, 0}},
                 .ints = {N, C}};
    GT_ASSERT_OK(gt_device_launch(dev, &bwd));
    float *gx = malloc(nc * 4), *gw = malloc(C * 4), *gb = malloc(C * 4);
    download(dev, gx, dx, nc * 4);
    download(dev, gw, dw, C * 4);
    download(dev, gb, db, C * 4);
    fd_check(&c, "layernorm dinp", x, nc, xb, gx);
    fd_check(&c, "layernorm dweight", w, C, wb, gw);
    fd_check(&c, "layernorm dbias", b, C, bb, gb);
    // backward accumulates: a second launch doubles every gradient
    GT_ASSERT_OK(gt_device_launch(dev, &bwd));
    float *gw2 = malloc(C * 4);
    download(dev, gw2, dw, C * 4);
    for (int i = 0; i < C; i++) {
        assert_float_equal(gw2[i], 2.0f * gw[i], 1e-5);
    }
    free(x); free(w); free(b); free(R); free(zero); free(gx); free(gw); free(gb); free(gw2);
    gt_device_close(dev);
}

static void fd_matmul(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    int N = 5, C = 7, OC = 20;  // slices of 16 split OC unevenly across two threads
    float *x = randv((size_t)N * C, 1.0f), *w = randv((size_t)OC * C, 0.5f), *b = randv(OC, 0.5f);
    float *R = randv((size_t)N * OC, 1.0f), *zero = calloc((size_t)OC * C + N * C, 4);
    gt_dbuf xb = upload(dev, x, N * C * 4), wb = upload(dev, w, OC * C * 4), bb = upload(dev, b, OC * 4);
    gt_dbuf ob = upload(dev, R, N * OC * 4), Rb = upload(dev, R, N * OC * 4);
    gt_dbuf dx = upload(dev, x, N * C * 4), dw = upload(dev, zero, OC * C * 4), db = upload(dev, zero, OC * 4);
    fd_ctx c = {dev, {.kind = GT_OP_MATMUL_FWD, .refs = {{ob, 0}, {xb, 0}, {wb, 0}, {bb, 0}},
                      .ints = {N, C, OC}}, 0, (size_t)N * OC, R};
    // dinp overwrite mode: the garbage in dx (a copy of x) must not survive
    gt_op bwd = {.kind = GT_OP_MATMUL_BWD,
                 .refs = {{dx, 0}, {dw, 0}, {db, 0}, {Rb, 0}, {xb, 0}, {wb, 0}},
                 .ints = {N, C, OC, 0}};
    GT_ASSERT_OK(gt_device_launch(dev, &bwd));
    float *gx = malloc(N * C * 4), *gw = malloc(OC * C * 4), *gb = malloc(OC * 4);
    download(dev, gx, dx, N * C * 4);
    download(dev, gw, dw, OC * C * 4);
    download(dev, gb, db, OC * 4);
    fd_check(&c, "matmul dinp", x, (size_t)N * C, xb, gx);
    fd_check(&c, "matmul dweight", w, (size_t)OC * C, wb, gw);
    fd_check(&c, "matmul dbias", b, OC, bb, gb);
    // accumulate mode adds; no-bias forms skip the bias
    bwd.ints[3] = 1;
    bwd.refs[2].buf = 0;
    GT_ASSERT_OK(gt_device_launch(dev, &bwd));
    float *gx2 = malloc(N * C * 4);
    download(dev, gx2, dx, N * C * 4);
    for (int i = 0; i < N * C; i++) {
        assert_float_equal(gx2[i], 2.0f * gx[i], 1e-4);
    }
    c.fwd.refs[3].buf = 0;
    objective(&c);
    free(x); free(w); free(b); free(R); free(zero); free(gx); free(gw); free(gb); free(gx2);
    gt_device_close(dev);
}

static void fd_attention(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    int B = 2, T = 4, C = 8, NH = 2;
    size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *x = randv(n3, 1.0f), *R = randv(n, 1.0f), *junk = randv(n3, 1.0f);
    gt_dbuf xb = upload(dev, x, n3 * 4), ob = upload(dev, R, n * 4), ab = upload(dev, junk, na * 4);
    gt_dbuf Rb = upload(dev, R, n * 4), dx = upload(dev, junk, n3 * 4);
    fd_ctx c = {dev, {.kind = GT_OP_ATTENTION_FWD, .refs = {{ob, 0}, {ab, 0}, {xb, 0}},
                      .ints = {B, T, C, NH}}, 0, n, R};
    objective(&c);
    float *att = malloc(na * 4);
    download(dev, att, ab, na * 4);
    for (int bh = 0; bh < B * NH; bh++) {  // causal rows that sum to 1
        for (int t = 0; t < T; t++) {
            double s = 0.0;
            for (int t2 = 0; t2 < T; t2++) {
                float a = att[((size_t)bh * T + t) * T + t2];
                if (t2 > t) {
                    assert_true(a == 0.0f);
                }
                s += a;
            }
            assert_float_equal(s, 1.0, 1e-5);
        }
    }
    gt_op bwd = {.kind = GT_OP_ATTENTION_BWD, .refs = {{dx, 0}, {Rb, 0}, {xb, 0}, {ab, 0}},
                 .ints = {B, T, C, NH}};
    GT_ASSERT_OK(gt_device_launch(dev, &bwd));
    float *gx = malloc(n3 * 4);
    download(dev, gx, dx, n3 * 4);
    fd_check(&c, "attention dinp (q,k,v)", x, n3, xb, gx);
    free(x); free(R); free(junk); free(att); free(gx);
    gt_device_close(dev);
}

static void fd_gelu_residual_encoder(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    size_t N = 40;
    float *x = randv(N, 3.0f), *y = randv(N, 1.0f), *R = randv(N, 1.0f), *zero = calloc(N, 4);
    gt_dbuf xb = upload(dev, x, N * 4), yb = upload(dev, y, N * 4), ob = upload(dev, x, N * 4);
    gt_dbuf Rb = upload(dev, R, N * 4), dx = upload(dev, R, N * 4);  // in place: dinp = dout
    fd_ctx c = {dev, {.kind = GT_OP_GELU_FWD, .refs = {{ob, 0}, {xb, 0}}, .ints = {(int64_t)N}},
                0, N, R};
    gt_op bwd = {.kind = GT_OP_GELU_BWD, .refs = {{dx, 0}, {xb, 0}, {dx, 0}}, .ints = {(int64_t)N}};
    GT_ASSERT_OK(gt_device_launch(dev, &bwd));
    float *g = malloc(N * 4), *g2 = malloc(N * 4);
    download(dev, g, dx, N * 4);
    fd_check(&c, "gelu dinp", x, N, xb, g);
    float o[3];
    download(dev, o, ob, 12);
    double ref = 0.5 * x[0] * (1.0 + tanh(sqrt(2.0 / M_PI) * (x[0] + 0.044715 * pow(x[0], 3))));
    assert_float_equal(o[0], ref, 1e-6);

    gt_dbuf d1 = upload(dev, zero, N * 4), d2 = upload(dev, zero, N * 4);
    c.fwd = (gt_op){.kind = GT_OP_RESIDUAL_FWD, .refs = {{ob, 0}, {xb, 0}, {yb, 0}},
                    .ints = {(int64_t)N}};
    gt_op rb = {.kind = GT_OP_RESIDUAL_BWD, .refs = {{d1, 0}, {d2, 0}, {Rb, 0}}, .ints = {(int64_t)N}};
    GT_ASSERT_OK(gt_device_launch(dev, &rb));
    download(dev, g, d1, N * 4);
    download(dev, g2, d2, N * 4);
    fd_check(&c, "residual dinp1", x, N, xb, g);
    fd_check(&c, "residual dinp2", y, N, yb, g2);

    // encoder: repeated tokens accumulate into the same wte row
    int B = 2, T = 3, C = 4, V = 5, Vp = 8, maxT = 4;
    int32_t tok[6] = {1, 3, 1, 4, 1, 0};
    float *wte = randv((size_t)Vp * C, 1.0f), *wpe = randv((size_t)maxT * C, 1.0f);
    float *Re = randv((size_t)B * T * C, 1.0f), *z2 = calloc((size_t)Vp * C, 4);
    gt_dbuf tb = upload(dev, tok, sizeof tok), wteb = upload(dev, wte, Vp * C * 4);
    gt_dbuf wpeb = upload(dev, wpe, maxT * C * 4), eo = upload(dev, Re, B * T * C * 4);
    gt_dbuf Reb = upload(dev, Re, B * T * C * 4);
    gt_dbuf dwte = upload(dev, z2, Vp * C * 4), dwpe = upload(dev, z2, maxT * C * 4);
    fd_ctx e = {dev, {.kind = GT_OP_ENCODER_FWD, .refs = {{eo, 0}, {tb, 0}, {wteb, 0}, {wpeb, 0}},
                      .ints = {B, T, C, V, Vp, maxT}}, 0, (size_t)B * T * C, Re};
    gt_op eb = {.kind = GT_OP_ENCODER_BWD, .refs = {{dwte, 0}, {dwpe, 0}, {Reb, 0}, {tb, 0}},
                .ints = {B, T, C, V, Vp, maxT}};
    GT_ASSERT_OK(gt_device_launch(dev, &eb));
    float *gwte = malloc(Vp * C * 4), *gwpe = malloc(maxT * C * 4);
    download(dev, gwte, dwte, Vp * C * 4);
    download(dev, gwpe, dwpe, maxT * C * 4);
    fd_check(&e, "encoder dwte", wte, (size_t)Vp * C, wteb, gwte);
    fd_check(&e, "encoder dwpe", wpe, (size_t)maxT * C, wpeb, gwpe);
    free(x); free(y); free(R); free(zero); free(g); free(g2); free(wte); free(wpe); free(Re);
    free(z2); free(gwte); free(gwpe);
    gt_device_close(dev);
}

static void fd_softmax_crossentropy(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    int B = 2, T = 3, V = 10, Vp = 16, BT = B * T;
    size_t nl = (size_t)BT * Vp;
    float *l = randv(nl, 3.0f);
    int32_t tgt[6] = {0, 9, 3, 3, 5, 1};
    float ones[6] = {1, 1, 1, 1, 1, 1};
    gt_dbuf lb = upload(dev, l, nl * 4), tb = upload(dev, tgt, sizeof tgt);
    gt_dbuf lossb = upload(dev, ones, sizeof ones), work = upload(dev, l, nl * 4);
    // J = sum of losses (R = 1): d J / d logits = softmax - onehot, i.e. dloss = 1
    fd_ctx c = {dev, {.kind = GT_OP_SOFTMAX_XENT, .refs = {{lossb, 0}, {lb, 0}, {tb, 0}},
                      .ints = {B, T, V, Vp, 0}}, 0, (size_t)BT, ones};
    float losses[6];
    objective(&c);
    download(dev, losses, lossb, sizeof losses);
    for (int n = 0; n < BT; n++) {  // -log softmax(target), in double over the first V columns
        const float *row = l + (size_t)n * Vp;
        double mx = row[0], s = 0.0;
        for (int i = 1; i < V; i++) {
            mx = fmax(mx, row[i]);
        }
        for (int i = 0; i < V; i++) {
            s += exp(row[i] - mx);
        }
        assert_float_equal(losses[n], log(s) + mx - row[tgt[n]], 1e-5);
    }
    gt_op g = {.kind = GT_OP_SOFTMAX_XENT, .refs = {{lossb, 0}, {work, 0}, {tb, 0}},
               .ints = {B, T, V, Vp, 1}, .floats = {1.0f}};
    GT_ASSERT_OK(gt_device_launch(dev, &g));
    float *dl = malloc(nl * 4), l2[6];
    download(dev, dl, work, nl * 4);
    download(dev, l2, lossb, sizeof l2);
    assert_memory_equal(l2, losses, sizeof l2);  // same losses with and without grad
    for (int n = 0; n < BT; n++) {
        for (int i = V; i < Vp; i++) {
            assert_true(dl[(size_t)n * Vp + i] == 0.0f);  // padded columns carry no gradient
        }
    }
    fd_check(&c, "softmax_xent dlogits", l, nl, lb, dl);
    free(l); free(dl);
    gt_device_close(dev);
}

static void adamw_and_sumsq(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    size_t N = 40000;  // several sum-of-squares blocks
    float *p = randv(N, 1.0f), *g = randv(N, 0.1f), *m = randv(N, 0.01f), *v = randv(N, 0.01f);
    for (size_t i = 0; i < N; i++) {
        v[i] = fabsf(v[i]);
    }
    gt_dbuf pb = upload(dev, p, N * 4), gb = upload(dev, g, N * 4), mb = upload(dev, m, N * 4);
    gt_dbuf vb = upload(dev, v, N * 4), sb = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 8, 0, &sb));
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sb, 0}, {gb, 0}}, .ints = {(int64_t)N}};
    GT_ASSERT_OK(gt_device_launch(dev, &ss));
    double sum = 0.0, ref = 0.0;
    download(dev, &sum, sb, 8);
    for (size_t i = 0; i < N; i++) {
        ref += (double)g[i] * g[i];
    }
    assert_float_equal(sum, ref, 1e-9 * ref);
    float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
    float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
    gt_op op = {.kind = GT_OP_ADAMW, .refs = {{pb, 0}, {mb, 0}, {vb, 0}, {gb, 0}},
                .ints = {(int64_t)N}, .floats = {lr, b1, b2, eps, wd, bc1, bc2, scale}};
    GT_ASSERT_OK(gt_device_launch(dev, &op));
    float *p2 = malloc(N * 4), *m2 = malloc(N * 4), *v2 = malloc(N * 4);
    download(dev, p2, pb, N * 4);
    download(dev, m2, mb, N * 4);
    download(dev, v2, vb, N * 4);
    for (size_t i = 0; i < N; i++) {  // llm.c's update in double
        double gg = (double)g[i] * scale;
        double mm = b1 * (double)m[i] + (1 - b1) * gg, vv = b2 * (double)v[i] + (1 - b2) * gg * gg;
        double pp = p[i] - lr * ((mm / bc1) / (sqrt(vv / bc2) + eps) + wd * p[i]);
        // float32 rounding of each term (the sums may cancel): tolerance from term sizes
        double mt = fabs(b1 * (double)m[i]) + fabs((1 - b1) * gg);
        double vt = fabs(b2 * (double)v[i]) + fabs((1 - b2) * gg * gg);
        assert_float_equal(m2[i], mm, 1e-6 * mt + 1e-15);
        assert_float_equal(v2[i], vv, 1e-6 * vt + 1e-15);
        assert_float_equal(p2[i], pp, 1e-6 * fabs(p[i]) + 1e-5 * lr);
    }
    free(p); free(g); free(m); free(v); free(p2); free(m2); free(v2);
    gt_device_close(dev);
}

// ZeRO-1's update: the adamw op on a sub-range (params and grads referenced at an offset, m and v
// buffers of the shard only) gives bit for bit what the full-range op gives on those floats, for
// shards at odd offsets and of odd lengths (the vector body and the scalar tail split elsewhere),
// with 2 threads. And sum_f64 adds the partials in index order.
static void adamw_shards_equal_full_range(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    size_t N = 70001;  // above the op's thread threshold; shards cut it at odd points
    float *p = randv(N, 1.0f), *g = randv(N, 0.1f), *m = randv(N, 0.01f), *v = randv(N, 0.01f);
    for (size_t i = 0; i < N; i++) {
        v[i] = fabsf(v[i]);
    }
    float hp[8] = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f - powf(0.9f, 4.0f),
                   1.0f - powf(0.95f, 4.0f), 1.0f};
    gt_dbuf pf = upload(dev, p, N * 4), gf = upload(dev, g, N * 4), mf = upload(dev, m, N * 4);
    gt_dbuf vf = upload(dev, v, N * 4);
    gt_op full = {.kind = GT_OP_ADAMW, .refs = {{pf, 0}, {mf, 0}, {vf, 0}, {gf, 0}},
                  .ints = {(int64_t)N}};
    memcpy(full.floats, hp, sizeof hp);
    GT_ASSERT_OK(gt_device_launch(dev, &full));
    float *pw = malloc(N * 4), *mw = malloc(N * 4), *vw = malloc(N * 4);
    download(dev, pw, pf, N * 4);
    download(dev, mw, mf, N * 4);
    download(dev, vw, vf, N * 4);
    const size_t cuts[] = {0, 1, 17, 23335, 46669, 69999, N};  // 6 shards, lengths 1..23334
    gt_dbuf ps = upload(dev, p, N * 4), gs = upload(dev, g, N * 4);
    float *got = malloc(N * 4);
    for (size_t s = 0; s + 1 < sizeof cuts / sizeof cuts[0]; s++) {
        size_t off = cuts[s], len = cuts[s + 1] - cuts[s];
        gt_dbuf ms = upload(dev, m + off, len * 4), vs = upload(dev, v + off, len * 4);
        gt_op part = {.kind = GT_OP_ADAMW,
                      .refs = {{ps, off * 4}, {ms, 0}, {vs, 0}, {gs, off * 4}},
                      .ints = {(int64_t)len}};
        memcpy(part.floats, hp, sizeof hp);
        GT_ASSERT_OK(gt_device_launch(dev, &part));
        download(dev, got, ms, len * 4);
        assert_memory_equal(got, mw + off, len * 4);
        download(dev, got, vs, len * 4);
        assert_memory_equal(got, vw + off, len * 4);
        GT_ASSERT_OK(gt_device_free(dev, ms));
        GT_ASSERT_OK(gt_device_free(dev, vs));
    }
    download(dev, got, ps, N * 4);
    assert_memory_equal(got, pw, N * 4);
    double parts[3] = {0.1, 1e20, -1e20}, sum = 1.0;
    gt_dbuf xb = upload(dev, parts, sizeof parts), sb = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 8, 0, &sb));
    GT_ASSERT_OK(gt_device_launch(dev, &(gt_op){.kind = GT_OP_SUM_F64, .refs = {{sb, 0}, {xb, 0}},
                                                .ints = {3}}));
    download(dev, &sum, sb, 8);
    assert_true(sum == (0.1 + 1e20) + -1e20);  // index order: 0, not 0.1
    free(p); free(g); free(m); free(v); free(pw); free(mw); free(vw); free(got);
    gt_device_close(dev);
}

// The per-op profile (bench_train's breakdown) counts exactly the ops run while it is on, under
// their own kind, and a take starts the counts again at zero.
static void profile_counts_ops_by_kind(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    size_t N = 1000;
    float *g = randv(N, 0.1f);
    gt_dbuf gb = upload(dev, g, N * 4), sb = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 8, 0, &sb));
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sb, 0}, {gb, 0}}, .ints = {(int64_t)N}};
    GT_ASSERT_OK(gt_device_launch(dev, &ss));  // before the enable: not counted
    gt_ops_cpu_profile_enable(true);
    for (int i = 0; i < 3; i++) {
        GT_ASSERT_OK(gt_device_launch(dev, &ss));
    }
    gt_ops_cpu_profile prof;
    gt_ops_cpu_profile_take(&prof);
    assert_int_equal(prof.calls[GT_OP_SUMSQ], 3);
    assert_true(prof.nanoseconds[GT_OP_SUMSQ] > 0);
    for (int k = 0; k < GT_OP_COUNT_; k++) {
        if (k != GT_OP_SUMSQ) {
            assert_int_equal(prof.calls[k], 0);
        }
    }
    gt_ops_cpu_profile_take(&prof);
    assert_int_equal(prof.calls[GT_OP_SUMSQ], 0);
    gt_ops_cpu_profile_enable(false);
    GT_ASSERT_OK(gt_device_launch(dev, &ss));
    gt_ops_cpu_profile_take(&prof);
    assert_int_equal(prof.calls[GT_OP_SUMSQ], 0);
    free(g);
    gt_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buffers_and_policy),
        cmocka_unit_test(op_size_checks),
        cmocka_unit_test(fd_layernorm),
        cmocka_unit_test(fd_matmul),
        cmocka_unit_test(fd_attention),
        cmocka_unit_test(fd_gelu_residual_encoder),
        cmocka_unit_test(fd_softmax_crossentropy),
        cmocka_unit_test(adamw_and_sumsq),
        cmocka_unit_test(adamw_shards_equal_full_range),
        cmocka_unit_test(profile_counts_ops_by_kind),
    };
    // Every check on every path this CPU has (avx512, avx2, scalar), best first.
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
