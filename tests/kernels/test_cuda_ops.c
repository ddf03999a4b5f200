// kernels/ (through the cuda device): the cuda kernels against the cpu kernels, op by op, on
// random inputs of odd shapes (testlib/kernel_cases.h: the same cases and inputs that
// test_kernel_contract holds the cpu kernels to the documented contract with), plus the cuda
// backend's buffer policy and its token checks. Every case is skipped (and the program exits 77, which CTest reports as skipped) where no usable GPU
// is present.
//
// Tolerance: both backends compute in fp32 with different summation orders, so each output
// element may differ by a few ulps times the length of its reduction (<= 128 terms here). We
// allow |cuda - cpu| <= 1e-5 * max|cpu over the ref| + 1e-4 * |cpu| per element; every ref is
// compared, the inputs too (an input a kernel wrote by mistake fails the test). The encoder's
// outputs must be bit-identical: its sums are the cpu's additions in the cpu's order.
#include "testlib.h"
#include "kernel_cases.h"

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

typedef struct {
    gt_device *cpu, *gpu;
} pair;

static void pair_open(pair *p)
{
    gt_device_config c = {.kind = GT_DEVICE_CPU, .threads = 2};
    gt_device_config g = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&p->cpu, &c));
    GT_ASSERT_OK(gt_device_open(&p->gpu, &g));
}

static void pair_close(pair *p)
{
    gt_device_close(p->cpu);
    gt_device_close(p->gpu);
}

// Runs case c on both devices with the same inputs (testlib's kernel_cases: the ones the CPU
// contract test runs too) and compares every ref afterwards.
static void run_both(pair *p, const gt_kcase *c, uint64_t *rng)
{
    gt_kcase_inputs in;
    gt_kcase_inputs_make(c, rng, &in);
    gt_dbuf bc[GT_OP_MAX_REFS] = {0}, bg[GT_OP_MAX_REFS] = {0};
    gt_op oc = c->op, og = c->op;
    for (int i = 0; i < in.nrefs; i++) {
        oc.refs[i] = og.refs[i] = (gt_dref){0, 0};
        if (in.buf[i] == NULL) {
            continue;
        }
        GT_ASSERT_OK(gt_device_alloc(p->cpu, in.len[i], 0, &bc[i]));
        GT_ASSERT_OK(gt_device_alloc(p->gpu, in.len[i], 0, &bg[i]));
        GT_ASSERT_OK(gt_device_copy_in(p->cpu, bc[i], 0, in.buf[i], in.len[i]));
        GT_ASSERT_OK(gt_device_copy_in(p->gpu, bg[i], 0, in.buf[i], in.len[i]));
        oc.refs[i] = (gt_dref){bc[i], in.off[i]};
        og.refs[i] = (gt_dref){bg[i], in.off[i]};
    }
    if (c->alias >= 0) {
        oc.refs[c->alias] = oc.refs[c->alias_of];
        og.refs[c->alias] = og.refs[c->alias_of];
    }
    GT_ASSERT_OK(gt_device_launch(p->cpu, &oc));
    GT_ASSERT_OK(gt_device_launch(p->gpu, &og));
    GT_ASSERT_OK(gt_device_sync(p->gpu));
    for (int i = 0; i < in.nrefs; i++) {
        if (bc[i] == 0) {
            continue;
        }
        uint64_t n = in.bytes[i];
        uint8_t *a = malloc(n), *b = malloc(n);
        GT_ASSERT_OK(gt_device_copy_out(p->cpu, a, bc[i], oc.refs[i].offset, n));
        GT_ASSERT_OK(gt_device_copy_out(p->gpu, b, bg[i], og.refs[i].offset, n));
        // The encoder's sums are the cpu's additions in the cpu's order (docs/cuda.md): bits.
        bool exact = c->op.kind == GT_OP_ENCODER_FWD || c->op.kind == GT_OP_ENCODER_BWD;
        double err = exact ? gt_kcase_compare(c, i, a, b, n, 0.0, 0.0, "cpu", "cuda")
                           : gt_kcase_compare(c, i, a, b, n, 1e-5, 1e-4, "cpu", "cuda");
        print_message("%-22s ref %d: max abs diff %.3g\n", gt_op_name(c->op.kind), i, err);
        free(a);
        free(b);
    }
    for (int i = 0; i < in.nrefs; i++) {
        if (bc[i] != 0) {
            GT_ASSERT_OK(gt_device_free(p->cpu, bc[i]));
            GT_ASSERT_OK(gt_device_free(p->gpu, bg[i]));
        }
    }
    gt_kcase_inputs_free(&in);
}

static void every_op(void **state)
{
    (void)state;
    NEED_GPU();
    pair p;
    pair_open(&p);
    gt_kcase *cases = NULL;
    size_t n = 0;
    gt_kcases(&cases, &n);
    uint64_t rng = GT_KCASE_SEED;
    for (size_t i = 0; i < n; i++) {
        run_both(&p, &cases[i], &rng);
    }
    free(cases);
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
