// kernels/ (through the cuda device): the cuda kernels against the cpu kernels, op by op, on
// random inputs of odd shapes, plus the cuda backend's buffer policy and its token checks. Every
// case is skipped (and the program exits 77, which CTest reports as skipped) where no usable GPU
// is present.
//
// Tolerance: both backends compute in fp32 with different summation orders, so each output
// element may differ by a few ulps times the length of its reduction (<= 128 terms here). We
// allow |cuda - cpu| <= 1e-5 * max|cpu over the ref| + 1e-4 * |cpu| per element; every ref is
// compared, the inputs too (an input a kernel wrote by mistake fails the test).
#include "testlib.h"

#include <gputravel/device.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gputravel/device_cuda.h>
#include <gputravel/kernels.h>

static bool have_gpu;
static char gpu_why[256];

#define NEED_GPU()                                                                   \
    do {                                                                             \
        if (!have_gpu) {                                                             \
            print_message("SKIPPED: %s\n", gpu_why);                                 \
            skip();                                                                  \
        }                                                                            \
    } while (0)

typedef enum { R_F32, R_F32_POS, R_I32_TOK, R_U16_TOK, R_F64 } ref_kind;

typedef struct {
    gt_device *cpu, *gpu;
    uint64_t rng;
} pair;

static void pair_open(pair *p)
{
    gt_device_config c = {.kind = GT_DEVICE_CPU, .threads = 2};
    gt_device_config g = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&p->cpu, &c));
    GT_ASSERT_OK(gt_device_open(&p->gpu, &g));
    p->rng = 0x1234567u;
}

static void pair_close(pair *p)
{
    gt_device_close(p->cpu);
    gt_device_close(p->gpu);
}

static uint32_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

static float rndf(uint64_t *s) { return (float)(rnd(s) >> 8) / 16777216.0f * 2.0f - 1.0f; }

// Runs op (its refs' bufs/offsets are filled here) on both devices with the same random inputs
// and compares every ref afterwards. kinds[i] says what ref i holds; V bounds the tokens. `alias`
// (>= 0) makes ref `alias` share ref alias_of's buffer and offset.
static void run_both(pair *p, gt_op op, const ref_kind *kinds, int64_t V, uint64_t pad_offset,
                     int alias, int alias_of)
{
    uint64_t bytes[GT_OP_MAX_REFS] = {0};
    int nrefs = 0;
    GT_ASSERT_OK(gt_op_ref_sizes(&op, bytes, &nrefs));
    gt_dbuf bc[GT_OP_MAX_REFS] = {0}, bg[GT_OP_MAX_REFS] = {0};
    uint8_t *host[GT_OP_MAX_REFS] = {0};
    gt_op oc = op, og = op;
    for (int i = 0; i < nrefs; i++) {
        if (bytes[i] == 0 || (gt_op_ref_optional(op.kind, i) && op.refs[i].buf == 0)) {
            oc.refs[i] = og.refs[i] = (gt_dref){0, 0};
            continue;
        }
        if (i == alias) {
            continue;  // set below, once ref alias_of has its buffer
        }
        uint64_t off = kinds[i] == R_F64 ? 0 : pad_offset;  // a double needs 8-byte alignment
        uint64_t n = bytes[i] + off;
        host[i] = malloc(n);
        assert_non_null(host[i]);
        for (uint64_t j = 0; j < n; j++) {
            host[i][j] = 0;
        }
        uint8_t *d = host[i] + off;
        for (uint64_t j = 0; j < bytes[i] / 4 && kinds[i] != R_U16_TOK && kinds[i] != R_F64; j++) {
            float f = rndf(&p->rng);
            if (kinds[i] == R_F32_POS) {
                f = fabsf(f) + 0.01f;
            }
            if (kinds[i] == R_I32_TOK) {
                int32_t t = (int32_t)(rnd(&p->rng) % (uint32_t)V);
                memcpy(d + 4 * j, &t, 4);
            } else {
                memcpy(d + 4 * j, &f, 4);
            }
        }
        if (kinds[i] == R_U16_TOK) {
            for (uint64_t j = 0; j < bytes[i] / 2; j++) {
                uint16_t t = (uint16_t)(rnd(&p->rng) % (uint32_t)V);
                memcpy(d + 2 * j, &t, 2);
            }
        }
        GT_ASSERT_OK(gt_device_alloc(p->cpu, n, 0, &bc[i]));
        GT_ASSERT_OK(gt_device_alloc(p->gpu, n, 0, &bg[i]));
        GT_ASSERT_OK(gt_device_copy_in(p->cpu, bc[i], 0, host[i], n));
        GT_ASSERT_OK(gt_device_copy_in(p->gpu, bg[i], 0, host[i], n));
        oc.refs[i] = (gt_dref){bc[i], off};
        og.refs[i] = (gt_dref){bg[i], off};
    }
    if (alias >= 0) {
        oc.refs[alias] = oc.refs[alias_of];
        og.refs[alias] = og.refs[alias_of];
    }
    GT_ASSERT_OK(gt_device_launch(p->cpu, &oc));
    GT_ASSERT_OK(gt_device_launch(p->gpu, &og));
    GT_ASSERT_OK(gt_device_sync(p->gpu));
    for (int i = 0; i < nrefs; i++) {
        if (bc[i] == 0) {
            continue;
        }
        uint64_t n = bytes[i];
        uint8_t *a = malloc(n), *b = malloc(n);
        GT_ASSERT_OK(gt_device_copy_out(p->cpu, a, bc[i], oc.refs[i].offset, n));
        GT_ASSERT_OK(gt_device_copy_out(p->gpu, b, bg[i], og.refs[i].offset, n));
        if (kinds[i] == R_I32_TOK || kinds[i] == R_U16_TOK) {
            if (memcmp(a, b, n) != 0) {
                fail_msg("%s ref %d: integers differ", gt_op_name(op.kind), i);
            }
        } else if (kinds[i] == R_F64) {
            double x = 0, y = 0;
            memcpy(&x, a, 8);
            memcpy(&y, b, 8);
            if (fabs(x - y) > 1e-9 * fabs(x)) {
                fail_msg("%s ref %d: cpu %.17g cuda %.17g", gt_op_name(op.kind), i, x, y);
            }
        } else {
            double maxref = 0, maxerr = 0;
            for (uint64_t j = 0; j < n / 4; j++) {
                float x = 0;
                memcpy(&x, a + 4 * j, 4);
                maxref = fmax(maxref, fabs(x));
            }
            for (uint64_t j = 0; j < n / 4; j++) {
                float x = 0, y = 0;
                memcpy(&x, a + 4 * j, 4);
                memcpy(&y, b + 4 * j, 4);
                double err = fabs((double)x - y);
                maxerr = fmax(maxerr, err);
                if (!(err <= 1e-5 * maxref + 1e-4 * fabs(x))) {
                    fail_msg("%s ref %d [%llu]: cpu %.9g cuda %.9g (max |cpu| %.3g)",
                             gt_op_name(op.kind), i, (unsigned long long)j, x, y, maxref);
                }
            }
            print_message("%-22s ref %d: max abs diff %.3g (max |ref| %.3g)\n",
                          gt_op_name(op.kind), i, maxerr, maxref);
        }
        free(a);
        free(b);
    }
    for (int i = 0; i < nrefs; i++) {
        if (bc[i] != 0) {
            GT_ASSERT_OK(gt_device_free(p->cpu, bc[i]));
            GT_ASSERT_OK(gt_device_free(p->gpu, bg[i]));
        }
        free(host[i]);
    }
}

static const gt_dref SET = {1, 0};  // "this ref is present" (run_both fills it in)
static const gt_dref NONE = {0, 0};

typedef struct {
    int B, T, C, NH, OC, V, Vp, maxT;
} shapes;

static const shapes configs[] = {
    {2, 5, 48, 3, 40, 100, 128, 8},
    {1, 70, 64, 4, 130, 300, 384, 70},
};

static void every_op(void **state)
{
    (void)state;
    NEED_GPU();
    pair p;
    pair_open(&p);
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        shapes s = configs[ci];
        int64_t N = (int64_t)s.B * s.T;
        for (uint64_t pad = 0; pad <= 4; pad += 4) {  // 4: unaligned refs (cuBLAS, not Lt)
            {
                gt_op op = {.kind = GT_OP_ENCODER_FWD, .refs = {SET, SET, SET, SET},
                            .ints = {s.B, s.T, s.C, s.V, s.Vp, s.maxT}};
                ref_kind k[] = {R_F32, R_I32_TOK, R_F32, R_F32};
                run_both(&p, op, k, s.V, pad, -1, -1);
                op.kind = GT_OP_ENCODER_BWD;
                ref_kind kb[] = {R_F32, R_F32, R_F32, R_I32_TOK};
                run_both(&p, op, kb, s.V, pad, -1, -1);
            }
            {
                gt_op op = {.kind = GT_OP_LAYERNORM_FWD, .refs = {SET, SET, SET, SET, SET, SET},
                            .ints = {N, s.C}};
                ref_kind k[] = {R_F32, R_F32, R_F32, R_F32, R_F32, R_F32};
                run_both(&p, op, k, 0, pad, -1, -1);
                gt_op ob = {.kind = GT_OP_LAYERNORM_BWD,
                            .refs = {SET, SET, SET, SET, SET, SET, SET, SET}, .ints = {N, s.C}};
                ref_kind kb[] = {R_F32, R_F32, R_F32, R_F32, R_F32, R_F32, R_F32, R_F32_POS};
                run_both(&p, ob, kb, 0, pad, -1, -1);
            }
            for (int bias = 0; bias <= 1; bias++) {
                gt_op op = {.kind = GT_OP_MATMUL_FWD, .refs = {SET, SET, SET, bias ? SET : NONE},
                            .ints = {N, s.C, s.OC}};
                ref_kind k[] = {R_F32, R_F32, R_F32, R_F32};
                run_both(&p, op, k, 0, pad, -1, -1);
                for (int acc = 0; acc <= 1; acc++) {
                    gt_op ob = {.kind = GT_OP_MATMUL_BWD,
                                .refs = {SET, SET, bias ? SET : NONE, SET, SET, SET},
                                .ints = {N, s.C, s.OC, acc}};
                    ref_kind kb[] = {R_F32, R_F32, R_F32, R_F32, R_F32, R_F32};
                    run_both(&p, ob, kb, 0, pad, -1, -1);
                }
            }
            {
                gt_op op = {.kind = GT_OP_ATTENTION_FWD, .refs = {SET, SET, SET},
                            .ints = {s.B, s.T, s.C, s.NH}};
                ref_kind k[] = {R_F32, R_F32, R_F32};
                run_both(&p, op, k, 0, pad, -1, -1);
                // att is random here, above the diagonal too: the result must not depend on it
                gt_op ob = {.kind = GT_OP_ATTENTION_BWD, .refs = {SET, SET, SET, SET},
                            .ints = {s.B, s.T, s.C, s.NH}};
                ref_kind kb[] = {R_F32, R_F32, R_F32, R_F32_POS};
                run_both(&p, ob, kb, 0, pad, -1, -1);
            }
            int64_t n4 = N * 4 * s.C;
            {
                gt_op op = {.kind = GT_OP_GELU_FWD, .refs = {SET, SET}, .ints = {n4}};
                ref_kind k[] = {R_F32, R_F32};
                run_both(&p, op, k, 0, pad, -1, -1);
                gt_op ob = {.kind = GT_OP_GELU_BWD, .refs = {SET, SET, SET}, .ints = {n4}};
                ref_kind kb[] = {R_F32, R_F32, R_F32};
                run_both(&p, ob, kb, 0, pad, -1, -1);
                run_both(&p, ob, kb, 0, pad, 0, 2);  // dinp is dout, as the trainer calls it
                gt_op rf = {.kind = GT_OP_RESIDUAL_FWD, .refs = {SET, SET, SET}, .ints = {n4}};
                run_both(&p, rf, kb, 0, pad, -1, -1);
                gt_op rb = {.kind = GT_OP_RESIDUAL_BWD, .refs = {SET, SET, SET}, .ints = {n4}};
                run_both(&p, rb, kb, 0, pad, -1, -1);
            }
            for (int grad = 0; grad <= 1; grad++) {
                gt_op op = {.kind = GT_OP_SOFTMAX_XENT, .refs = {SET, SET, SET},
                            .ints = {s.B, s.T, s.V, s.Vp, grad}, .floats = {1.0f / (float)N}};
                ref_kind k[] = {R_F32, R_F32, R_I32_TOK};
                run_both(&p, op, k, s.V, pad, -1, -1);
            }
            {
                gt_op op = {.kind = GT_OP_SUMSQ, .refs = {SET, SET}, .ints = {40000 + 7}};
                ref_kind k[] = {R_F64, R_F32};
                run_both(&p, op, k, 0, pad, -1, -1);
                gt_op oa = {.kind = GT_OP_ADAMW, .refs = {SET, SET, SET, SET}, .ints = {n4},
                            .floats = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f}};
                ref_kind ka[] = {R_F32, R_F32, R_F32_POS, R_F32};
                run_both(&p, oa, ka, 0, pad, -1, -1);
            }
            {
                gt_op op = {.kind = GT_OP_TOKENS_GATHER, .refs = {SET, SET, SET},
                            .ints = {N, 3, s.V}};
                ref_kind k[] = {R_I32_TOK, R_I32_TOK, R_U16_TOK};
                run_both(&p, op, k, s.V, pad, -1, -1);
                gt_op oc = {.kind = GT_OP_TOKENS_CHECK, .refs = {SET}, .ints = {N, s.V}};
                ref_kind kc[] = {R_U16_TOK};
                run_both(&p, oc, kc, s.V, pad, -1, -1);
            }
        }
    }
    pair_close(&p);
}

// A token >= V is refused before any kernel runs: the op fails with GT_E_FORMAT and its output
// is untouched.
static void bad_tokens_refused(void **state)
{
    (void)state;
    NEED_GPU();
    gt_device *d = NULL;
    gt_device_config g = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&d, &g));
    int B = 1, T = 4, C = 8, V = 10, Vp = 16;
    gt_dbuf out = 0, inp = 0, wte = 0, wpe = 0, data = 0;
    GT_ASSERT_OK(gt_device_alloc(d, (uint64_t)B * T * C * 4, 0, &out));
    GT_ASSERT_OK(gt_device_alloc(d, (uint64_t)B * T * 4, 0, &inp));
    GT_ASSERT_OK(gt_device_alloc(d, (uint64_t)Vp * C * 4, 0, &wte));
    GT_ASSERT_OK(gt_device_alloc(d, (uint64_t)T * C * 4, 0, &wpe));
    GT_ASSERT_OK(gt_device_memset(d, out, 0, 0x5a, (uint64_t)B * T * C * 4));
    int32_t toks[4] = {1, 2, 10, 3};  // 10 == V
    GT_ASSERT_OK(gt_device_copy_in(d, inp, 0, toks, sizeof toks));
    gt_op op = {.kind = GT_OP_ENCODER_FWD, .refs = {{out, 0}, {inp, 0}, {wte, 0}, {wpe, 0}},
                .ints = {B, T, C, V, Vp, T}};
    GT_ASSERT_CODE(gt_device_launch(d, &op), GT_E_FORMAT);
    uint8_t back[4 * 4 * 8];
    GT_ASSERT_OK(gt_device_copy_out(d, back, out, 0, sizeof back));
    for (size_t i = 0; i < sizeof back; i++) {
        assert_int_equal(back[i], 0x5a);
    }
    toks[2] = -1;
    GT_ASSERT_OK(gt_device_copy_in(d, inp, 0, toks, sizeof toks));
    GT_ASSERT_CODE(gt_device_launch(d, &op), GT_E_FORMAT);
    // u16 data: gather refuses, targets untouched
    uint16_t u[6] = {1, 2, 3, 4, 9, 10};
    GT_ASSERT_OK(gt_device_alloc(d, sizeof u, 0, &data));
    GT_ASSERT_OK(gt_device_copy_in(d, data, 0, u, sizeof u));
    gt_op ga = {.kind = GT_OP_TOKENS_GATHER, .refs = {{inp, 0}, {out, 0}, {data, 0}},
                .ints = {4, 1, V}};
    GT_ASSERT_CODE(gt_device_launch(d, &ga), GT_E_FORMAT);
    ga.ints[1] = 0;
    GT_ASSERT_OK(gt_device_launch(d, &ga));  // tokens 0..4 are all < 10
    gt_op ck = {.kind = GT_OP_TOKENS_CHECK, .refs = {{data, 0}}, .ints = {6, V}};
    GT_ASSERT_CODE(gt_device_launch(d, &ck), GT_E_FORMAT);
    ck.ints[0] = 5;
    GT_ASSERT_OK(gt_device_launch(d, &ck));
    gt_device_close(d);
}

static void buffer_policy(void **state)
{
    (void)state;
    NEED_GPU();
    gt_device *d = NULL;
    gt_device_config g = {.kind = GT_DEVICE_CUDA, .mem_limit = 1 << 20};
    GT_ASSERT_OK(gt_device_open(&d, &g));
    assert_int_equal(gt_device_get_kind(d), GT_DEVICE_CUDA);
    gt_dbuf a = 0, b = 0;
    GT_ASSERT_OK(gt_device_alloc(d, 1000, 0, &a));
    GT_ASSERT_OK(gt_device_alloc(d, 100, GT_DBUF_NO_READBACK, &b));
    uint8_t z[1000];
    memset(z, 7, sizeof z);
    GT_ASSERT_OK(gt_device_copy_out(d, z, a, 0, sizeof z));  // fresh memory reads as zero
    for (size_t i = 0; i < sizeof z; i++) {
        assert_int_equal(z[i], 0);
    }
    GT_ASSERT_CODE(gt_device_copy_out(d, z, b, 0, 10), GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_copy_in(d, a, 990, z, 11), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(d, z, a, 1001, 0), GT_E_ARG);
    gt_dbuf big = 1;
    GT_ASSERT_CODE(gt_device_alloc(d, 2 << 20, 0, &big), GT_E_LIMIT);  // over mem_limit
    assert_int_equal(big, 0);
    uint8_t pat[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    GT_ASSERT_OK(gt_device_copy_in(d, a, 984, pat, 16));
    GT_ASSERT_OK(gt_device_memset(d, a, 984, 0xee, 4));
    uint8_t got[16];
    GT_ASSERT_OK(gt_device_copy_out(d, got, a, 984, 16));
    assert_int_equal(got[3], 0xee);
    assert_int_equal(got[4], 5);
    uint64_t sz = 0;
    GT_ASSERT_OK(gt_device_buf_size(d, a, &sz));
    assert_int_equal(sz, 1000);
    GT_ASSERT_OK(gt_device_free(d, a));
    GT_ASSERT_CODE(gt_device_free(d, a), GT_E_NOTFOUND);      // stale handle
    GT_ASSERT_CODE(gt_device_copy_out(d, z, a, 0, 1), GT_E_NOTFOUND);
    gt_op bad = {.kind = GT_OP_GELU_FWD, .refs = {{b, 0}, {b, 0}}, .ints = {26}};  // 104 > 100
    GT_ASSERT_CODE(gt_device_launch(d, &bad), GT_E_ARG);
    // Misaligned refs are refused before the GPU sees them (a misaligned access would poison
    // the context): floats need 4 bytes, the f64 sum 8.
    gt_op odd = {.kind = GT_OP_GELU_FWD, .refs = {{b, 2}, {b, 0}}, .ints = {4}};
    GT_ASSERT_CODE(gt_device_launch(d, &odd), GT_E_ARG);
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{b, 4}, {b, 16}}, .ints = {4}};
    GT_ASSERT_CODE(gt_device_launch(d, &ss), GT_E_ARG);
    ss.refs[0].offset = 8;
    GT_ASSERT_OK(gt_device_launch(d, &ss));
    GT_ASSERT_OK(gt_device_sync(d));
    gt_device_close(d);
}

int main(void)
{
    have_gpu = gt_cuda_probe(gpu_why, sizeof gpu_why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buffer_policy),
        cmocka_unit_test(bad_tokens_refused),
        cmocka_unit_test(every_op),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!have_gpu) {
        printf("SKIPPED (no GPU): %s\n", gpu_why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
