// kernels/: the op table as data. Every descriptor is well formed; its byte counts match sizes
// computed by hand for a sample shape and, over many shapes at and past the limits, the switch
// it replaced; over-large shapes are refused; builders and gt_op_decode agree on every name;
// the SIMD setter reaches the kernels; matmul and sum_of_squares parts are checked and together
// make the whole op.
#include "testlib.h"

#include <gputravel/kernels.h>

#include <math.h>
#include <string.h>

#define S31 ((int64_t)1 << 31)

// ---- the switch the table replaced (git show f9d5e51:src/device/ops.c), as an oracle ---------

static bool prod(uint64_t *out, uint64_t elem, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t r = elem;
    if (__builtin_mul_overflow(r, a, &r) || __builtin_mul_overflow(r, b, &r) ||
        __builtin_mul_overflow(r, c, &r) || __builtin_mul_overflow(r, d, &r) ||
        r > ((uint64_t)1 << 62)) {
        return false;
    }
    *out = r;
    return true;
}

// Model ops: returns false where the old code refused the op.
static bool old_model_sizes(uint32_t k, const int64_t *in, uint64_t *bytes)
{
    uint64_t a = (uint64_t)in[0], b = (uint64_t)in[1], c = (uint64_t)in[2], d = (uint64_t)in[3];
    switch (k) {
    case GT_OP_ENCODER_FWD:
    case GT_OP_ENCODER_BWD: {
        uint64_t Vp = (uint64_t)in[4], maxT = (uint64_t)in[5];
        if (d > Vp || b > maxT) {
            return false;
        }
        int o = k == GT_OP_ENCODER_FWD ? 0 : 2, wte = k == GT_OP_ENCODER_FWD ? 2 : 0;
        int wpe = wte + 1, inp = k == GT_OP_ENCODER_FWD ? 1 : 3;
        return prod(&bytes[o], 4, a, b, c, 1) && prod(&bytes[inp], 4, a, b, 1, 1) &&
               prod(&bytes[wte], 4, Vp, c, 1, 1) && prod(&bytes[wpe], 4, maxT, c, 1, 1);
    }
    case GT_OP_LAYERNORM_FWD:
        return prod(&bytes[0], 4, a, b, 1, 1) && prod(&bytes[1], 4, a, 1, 1, 1) &&
               prod(&bytes[2], 4, a, 1, 1, 1) && prod(&bytes[3], 4, a, b, 1, 1) &&
               prod(&bytes[4], 4, b, 1, 1, 1) && prod(&bytes[5], 4, b, 1, 1, 1);
    case GT_OP_LAYERNORM_BWD:
        return prod(&bytes[0], 4, a, b, 1, 1) && prod(&bytes[1], 4, b, 1, 1, 1) &&
               prod(&bytes[2], 4, b, 1, 1, 1) && prod(&bytes[3], 4, a, b, 1, 1) &&
               prod(&bytes[4], 4, a, b, 1, 1) && prod(&bytes[5], 4, b, 1, 1, 1) &&
               prod(&bytes[6], 4, a, 1, 1, 1) && prod(&bytes[7], 4, a, 1, 1, 1);
    case GT_OP_MATMUL_FWD:
        return prod(&bytes[0], 4, a, c, 1, 1) && prod(&bytes[1], 4, a, b, 1, 1) &&
               prod(&bytes[2], 4, c, b, 1, 1) && prod(&bytes[3], 4, c, 1, 1, 1);
    case GT_OP_MATMUL_BWD:
        return (in[3] == 0 || in[3] == 1) && prod(&bytes[0], 4, a, b, 1, 1) &&
               prod(&bytes[1], 4, c, b, 1, 1) && prod(&bytes[2], 4, c, 1, 1, 1) &&
               prod(&bytes[3], 4, a, c, 1, 1) && prod(&bytes[4], 4, a, b, 1, 1) &&
               prod(&bytes[5], 4, c, b, 1, 1);
    default: {  // attention
        uint64_t btc = 0, btc3 = 0, att = 0;
        if (c % d != 0 || !prod(&btc, 4, a, b, c, 1) || !prod(&btc3, 12, a, b, c, 1) ||
            !prod(&att, 4, a, d, b, b)) {
            return false;
        }
        uint64_t fwd[3] = {btc, att, btc3}, bwd[4] = {btc3, btc, btc3, att};
        memcpy(bytes, k == GT_OP_ATTENTION_FWD ? fwd : bwd,
               k == GT_OP_ATTENTION_FWD ? sizeof fwd : sizeof bwd);
        return true;
    }
    }
}

static bool old_other_sizes(uint32_t k, const int64_t *in, uint64_t *bytes)
{
    uint64_t a = (uint64_t)in[0], b = (uint64_t)in[1], c = (uint64_t)in[2], d = (uint64_t)in[3];
    bool ok = true;
    switch (k) {
    case GT_OP_GELU_FWD:
        ok = prod(&bytes[0], 4, a, 1, 1, 1);
        bytes[1] = bytes[0];
        return ok;
    case GT_OP_GELU_BWD:
    case GT_OP_RESIDUAL_FWD:
    case GT_OP_RESIDUAL_BWD:
        ok = prod(&bytes[0], 4, a, 1, 1, 1);
        bytes[1] = bytes[2] = bytes[0];
        return ok;
    case GT_OP_SOFTMAX_XENT:
        return c <= d && (in[4] == 0 || in[4] == 1) && prod(&bytes[0], 4, a, b, 1, 1) &&
               prod(&bytes[1], 4, a, b, d, 1) && prod(&bytes[2], 4, a, b, 1, 1);
    case GT_OP_SUMSQ:
        bytes[0] = 8;
        return prod(&bytes[1], 4, a, 1, 1, 1);
    case GT_OP_ADAMW:
        ok = prod(&bytes[0], 4, a, 1, 1, 1);
        bytes[1] = bytes[2] = bytes[3] = bytes[0];
        return ok;
    case GT_OP_TOKENS_GATHER:
        if (in[1] < 0 || in[1] >= ((int64_t)1 << 40) || in[2] < 1 || in[2] > 65536) {
            return false;
        }
        ok = prod(&bytes[0], 4, a, 1, 1, 1) && prod(&bytes[2], 2, a + b + 1, 1, 1, 1);
        bytes[1] = bytes[0];
        return ok;
    default:  // tokens_check
        return prod(&bytes[0], 2, a, 1, 1, 1);
    }
}

static int old_nshape(uint32_t k)
{
    switch (k) {
    case GT_OP_ENCODER_FWD: case GT_OP_ENCODER_BWD: return 6;
    case GT_OP_LAYERNORM_FWD: case GT_OP_LAYERNORM_BWD: return 2;
    case GT_OP_MATMUL_FWD: case GT_OP_MATMUL_BWD: return 3;
    case GT_OP_ATTENTION_FWD: case GT_OP_ATTENTION_BWD: case GT_OP_SOFTMAX_XENT: return 4;
    case GT_OP_TOKENS_CHECK: return 2;
    default: return 1;
    }
}

static bool old_sizes(uint32_t k, const int64_t *in, uint64_t bytes[GT_OP_MAX_REFS])
{
    memset(bytes, 0, sizeof(uint64_t) * GT_OP_MAX_REFS);
    for (int i = 0; i < old_nshape(k); i++) {
        if (in[i] < 1 || in[i] >= S31) {
            return false;
        }
    }
    return k <= GT_OP_ATTENTION_BWD ? old_model_sizes(k, in, bytes) : old_other_sizes(k, in, bytes);
}

// ---- the table --------------------------------------------------------------------------------

static void descriptors_are_well_formed(void **state)
{
    (void)state;
    assert_null(gt_op_desc(GT_OP_NONE_));
    assert_null(gt_op_desc(GT_OP_COUNT_));
    assert_null(gt_op_desc(999));
    assert_string_equal(gt_op_name(999), "unknown");
    for (uint32_t k = 1; k < GT_OP_COUNT_; k++) {
        const gt_op_descriptor *d = gt_op_desc(k);
        assert_non_null(d);
        assert_string_equal(gt_op_name(k), d->name);
        assert_true(d->nrefs >= 1 && d->nrefs <= GT_OP_MAX_REFS);
        assert_true(d->nints >= 1 && d->nints <= GT_OP_MAX_INTS);
        assert_true(d->nfloats >= 0 && d->nfloats <= GT_OP_MAX_FLOATS);
        assert_true(d->args_size <= sizeof(gt_op_args));
        for (int i = 0; i < GT_OP_MAX_REFS; i++) {
            assert_true((d->refs[i].name != NULL) == (i < d->nrefs));
            if (i < d->nrefs) {  // fields inside the struct, pointers aligned
                assert_true(d->refs[i].field + sizeof(void *) <= d->args_size);
                assert_int_equal(d->refs[i].field % sizeof(void *), 0);
                assert_true(gt_elem_size(d->refs[i].elem) >= 2);
            }
        }
        for (int i = 0; i < GT_OP_MAX_INTS; i++) {
            assert_true((d->ints[i].name != NULL) == (i < d->nints));
            if (i < d->nints) {
                assert_true(d->ints[i].width == 4 || d->ints[i].width == 8);
                assert_true(d->ints[i].field + d->ints[i].width <= d->args_size);
                assert_true(!d->ints[i].shape || (d->ints[i].min == 1 && d->ints[i].max == S31));
            }
        }
        for (int i = 0; i < GT_OP_MAX_FLOATS; i++) {
            assert_true((d->floats[i].name != NULL) == (i < d->nfloats));
        }
    }
}

typedef struct {
    uint32_t kind;
    int64_t ints[GT_OP_MAX_INTS];
    uint64_t bytes[GT_OP_MAX_REFS];
} sized;

// B=2 T=3 C=8 NH=2 V=10 Vp=16 maxT=4 N=6 OC=5 offset=7: every size worked out by hand.
static const sized by_hand[] = {
    {GT_OP_ENCODER_FWD, {2, 3, 8, 10, 16, 4}, {2 * 3 * 8 * 4, 2 * 3 * 4, 16 * 8 * 4, 4 * 8 * 4}},
    {GT_OP_ENCODER_BWD, {2, 3, 8, 10, 16, 4}, {16 * 8 * 4, 4 * 8 * 4, 2 * 3 * 8 * 4, 2 * 3 * 4}},
    {GT_OP_LAYERNORM_FWD, {6, 8}, {192, 24, 24, 192, 32, 32}},
    {GT_OP_LAYERNORM_BWD, {6, 8}, {192, 32, 32, 192, 192, 32, 24, 24}},
    {GT_OP_MATMUL_FWD, {6, 8, 5}, {6 * 5 * 4, 6 * 8 * 4, 5 * 8 * 4, 5 * 4}},
    {GT_OP_MATMUL_BWD, {6, 8, 5, 1}, {6 * 8 * 4, 5 * 8 * 4, 5 * 4, 6 * 5 * 4, 6 * 8 * 4, 160}},
    {GT_OP_ATTENTION_FWD, {2, 3, 8, 2}, {2 * 3 * 8 * 4, 2 * 2 * 3 * 3 * 4, 2 * 3 * 24 * 4}},
    {GT_OP_ATTENTION_BWD, {2, 3, 8, 2}, {576, 192, 576, 2 * 2 * 3 * 3 * 4}},
    {GT_OP_GELU_FWD, {6}, {24, 24}},
    {GT_OP_GELU_BWD, {6}, {24, 24, 24}},
    {GT_OP_RESIDUAL_FWD, {6}, {24, 24, 24}},
    {GT_OP_RESIDUAL_BWD, {6}, {24, 24, 24}},
    {GT_OP_SOFTMAX_XENT, {2, 3, 10, 16, 1}, {2 * 3 * 4, 2 * 3 * 16 * 4, 2 * 3 * 4}},
    {GT_OP_SUMSQ, {6}, {8, 24}},
    {GT_OP_ADAMW, {6}, {24, 24, 24, 24}},
    {GT_OP_TOKENS_GATHER, {6, 7, 10}, {24, 24, (7 + 6 + 1) * 2}},
    {GT_OP_TOKENS_CHECK, {6, 10}, {12}},
    {GT_OP_LOSS_MEAN, {6, 23}, {4, 24}},
    {GT_OP_NORM_RELEASE, {23}, {4, 8}},
    {GT_OP_CLIP_GRADS, {6}, {24, 8}},
    {GT_OP_SUM_F64, {3}, {8, 24}},
};

static void sizes_by_hand(void **state)
{
    (void)state;
    assert_int_equal(sizeof by_hand / sizeof by_hand[0], GT_OP_COUNT_ - 1);  // every kind
    for (size_t t = 0; t < sizeof by_hand / sizeof by_hand[0]; t++) {
        gt_op op = {.kind = by_hand[t].kind};
        memcpy(op.ints, by_hand[t].ints, sizeof op.ints);
        uint64_t bytes[GT_OP_MAX_REFS];
        int nrefs = -1;
        GT_ASSERT_OK(gt_op_ref_sizes(&op, bytes, &nrefs));
        assert_int_equal(nrefs, gt_op_desc(op.kind)->nrefs);
        for (int i = 0; i < GT_OP_MAX_REFS; i++) {
            if (bytes[i] != by_hand[t].bytes[i]) {
                fail_msg("%s ref %d: %llu bytes, by hand %llu", gt_op_name(op.kind), i,
                         (unsigned long long)bytes[i], (unsigned long long)by_hand[t].bytes[i]);
            }
        }
    }
}

static uint64_t rng = 7;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

// Values that sit at and around every limit the table enforces.
static int64_t edge_value(void)
{
    static const int64_t v[] = {-1, 0, 1, 2, 3, 7, 16, 65535, 65536, 65537, ((int64_t)1 << 20) + 3,
                                S31 - 1, S31, S31 + 1, ((int64_t)1 << 40) - 1, (int64_t)1 << 40,
                                INT64_MAX, INT64_MIN};
    uint64_t r = next();
    return r % 3 == 0 ? (int64_t)(r >> 8) % 50 : v[(r >> 8) % (sizeof v / sizeof v[0])];
}

static void sizes_match_the_old_switch(void **state)
{
    (void)state;
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 200000; iter++) {
        // the kinds the hand-written switch knew (the ones after it are checked by hand above)
        gt_op op = {.kind = 1 + (uint32_t)(next() % GT_OP_TOKENS_CHECK)};
        for (int i = 0; i < GT_OP_MAX_INTS; i++) {
            op.ints[i] = edge_value();
        }
        uint64_t want[GT_OP_MAX_REFS], got[GT_OP_MAX_REFS];
        int nrefs = 0;
        bool ok_old = old_sizes(op.kind, op.ints, want);
        gt_err e = gt_op_ref_sizes(&op, got, &nrefs);
        if (ok_old != (e.code == GT_E_NONE)) {
            fail_msg("%s ints %lld %lld %lld %lld %lld %lld: old %s, table %s", gt_op_name(op.kind),
                     (long long)op.ints[0], (long long)op.ints[1], (long long)op.ints[2],
                     (long long)op.ints[3], (long long)op.ints[4], (long long)op.ints[5],
                     ok_old ? "accepts" : "refuses", e.code == GT_E_NONE ? "accepts" : e.msg);
        }
        if (!ok_old) {
            assert_int_equal(e.code, GT_E_ARG);
            refused++;
            continue;
        }
        accepted++;
        assert_memory_equal(got, want, sizeof got);
    }
    assert_true(accepted > 1000 && refused > 1000);  // both sides of every limit were reached
}

static void over_large_shapes_are_refused(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof by_hand / sizeof by_hand[0]; t++) {
        const gt_op_descriptor *d = gt_op_desc(by_hand[t].kind);
        for (int i = 0; i < d->nints; i++) {
            if (!d->ints[i].shape) {
                continue;
            }
            int64_t bad[] = {0, -1, S31, INT64_MAX};
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                gt_op op = {.kind = by_hand[t].kind};
                memcpy(op.ints, by_hand[t].ints, sizeof op.ints);
                op.ints[i] = bad[b];
                uint64_t bytes[GT_OP_MAX_REFS];
                int nrefs = 0;
                gt_err e = gt_op_ref_sizes(&op, bytes, &nrefs);
                assert_int_equal(e.code, GT_E_ARG);
                assert_non_null(strstr(e.msg, d->ints[i].name));  // names what is wrong
            }
        }
    }
    // Every shape in range, the product past 2^62: (N,C) f32 at 2^31-1 each is ~2^64 bytes.
    gt_op big = gt_op_layernorm_fwd((gt_dref){1, 0}, (gt_dref){1, 0}, (gt_dref){1, 0},
                                    (gt_dref){1, 0}, (gt_dref){1, 0}, (gt_dref){1, 0}, S31 - 1,
                                    S31 - 1);
    uint64_t bytes[GT_OP_MAX_REFS];
    int nrefs = 0;
    GT_ASSERT_CODE(gt_op_ref_sizes(&big, bytes, &nrefs), GT_E_ARG);
    big.ints[0] = (int64_t)1 << 30;  // N*C*4 = 2^62 exactly: the largest allowed
    big.ints[1] = (int64_t)1 << 30;
    GT_ASSERT_OK(gt_op_ref_sizes(&big, bytes, &nrefs));
    assert_int_equal(bytes[0], (uint64_t)1 << 62);
    big.ints[1]++;  // one row of C more
    GT_ASSERT_CODE(gt_op_ref_sizes(&big, bytes, &nrefs), GT_E_ARG);
}

static void access_says_what_is_written(void **state)
{
    (void)state;
    const gt_op_descriptor *mm = gt_op_desc(GT_OP_MATMUL_FWD);
    assert_int_equal(mm->refs[0].access, GT_ACCESS_WRITE);
    assert_int_equal(mm->refs[1].access, GT_ACCESS_READ);
    assert_true(mm->refs[3].optional && !mm->refs[2].optional);
    assert_int_equal(gt_op_desc(GT_OP_SOFTMAX_XENT)->refs[1].access, GT_ACCESS_INPLACE);
    assert_int_equal(gt_op_desc(GT_OP_ADAMW)->refs[0].access, GT_ACCESS_ACCUM);
    assert_int_equal(gt_op_desc(GT_OP_LAYERNORM_BWD)->refs[3].access, GT_ACCESS_READ);
    assert_false(gt_access_writes(GT_ACCESS_READ));
    assert_true(gt_access_writes(GT_ACCESS_INPLACE) && gt_access_writes(GT_ACCESS_ACCUM));
    for (uint32_t k = 1; k < GT_OP_COUNT_; k++) {  // every op but the check writes something
        const gt_op_descriptor *d = gt_op_desc(k);
        int writes = 0;
        for (int i = 0; i < d->nrefs; i++) {
            writes += gt_access_writes(d->refs[i].access);
        }
        assert_true(writes > 0 || k == GT_OP_TOKENS_CHECK);
    }
}

// ---- builders and decoding ---------------------------------------------------------------------

static char arena[4096];

// Resolves buffer b at offset o to arena + 64 b + o; buffer 13 does not exist.
static gt_err resolve(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    int *calls = ctx;
    (*calls)++;
    (void)bytes;
    GT_ENSURE(ref.buf != 13, GT_E_ARG, "no buffer 13");
    *ptr = arena + 64 * ref.buf + ref.offset;
    return GT_OK;
}

#define AT(b) ((void *)(arena + 64 * (b)))
#define R(b) ((gt_dref){(b), 0})

static gt_op_args decoded(gt_op op)
{
    gt_op_args a;
    int calls = 0;
    GT_ASSERT_OK(gt_op_decode(&op, resolve, &calls, &a));
    int want = 0;
    for (int i = 0; i < gt_op_desc(op.kind)->nrefs; i++) {
        want += op.refs[i].buf != 0;
    }
    assert_int_equal(calls, want);  // every non-empty ref resolved once, empty ones never
    return a;
}

static void builders_and_decode_agree_on_layers(void **state)
{
    (void)state;
    gt_op_args a = decoded(gt_op_encoder_fwd(R(1), R(2), R(3), R(4), 2, 3, 8, 10, 16, 4));
    assert_true(a.encoder_fwd.out == AT(1) && (void *)a.encoder_fwd.inp == AT(2) &&
                a.encoder_fwd.wte == AT(3) && a.encoder_fwd.wpe == AT(4));
    assert_true(a.encoder_fwd.B == 2 && a.encoder_fwd.T == 3 && a.encoder_fwd.C == 8 &&
                a.encoder_fwd.V == 10 && a.encoder_fwd.Vp == 16 && a.encoder_fwd.maxT == 4);
    a = decoded(gt_op_encoder_bwd(R(1), R(2), R(3), R(4), 2, 3, 8, 10, 16, 4));
    assert_true(a.encoder_bwd.dwte == AT(1) && a.encoder_bwd.dwpe == AT(2) &&
                a.encoder_bwd.dout == AT(3) && (void *)a.encoder_bwd.inp == AT(4));
    a = decoded(gt_op_layernorm_fwd(R(1), R(2), R(3), R(4), R(5), R(6), 6, 8));
    assert_true(a.layernorm_fwd.out == AT(1) && a.layernorm_fwd.mean == AT(2) &&
                a.layernorm_fwd.rstd == AT(3) && a.layernorm_fwd.inp == AT(4) &&
                a.layernorm_fwd.weight == AT(5) && a.layernorm_fwd.bias == AT(6) &&
                a.layernorm_fwd.N == 6 && a.layernorm_fwd.C == 8);
    a = decoded(gt_op_layernorm_bwd(R(1), R(2), R(3), R(4), R(5), R(6), R(7), R(8), 6, 8));
    assert_true(a.layernorm_bwd.dinp == AT(1) && a.layernorm_bwd.dweight == AT(2) &&
                a.layernorm_bwd.dbias == AT(3) && a.layernorm_bwd.dout == AT(4) &&
                a.layernorm_bwd.inp == AT(5) && a.layernorm_bwd.weight == AT(6) &&
                a.layernorm_bwd.mean == AT(7) && a.layernorm_bwd.rstd == AT(8));
    a = decoded(gt_op_matmul_fwd(R(1), R(2), R(3), R(0), 6, 8, 5));
    assert_true(a.matmul_fwd.out == AT(1) && a.matmul_fwd.inp == AT(2) &&
                a.matmul_fwd.weight == AT(3) && a.matmul_fwd.bias == NULL);  // optional, empty
    assert_true(a.matmul_fwd.N == 6 && a.matmul_fwd.C == 8 && a.matmul_fwd.OC == 5);
    a = decoded(gt_op_matmul_bwd(R(1), R(2), R(3), R(4), R(5), R(6), 6, 8, 5, 1));
    assert_true(a.matmul_bwd.dinp == AT(1) && a.matmul_bwd.dweight == AT(2) &&
                a.matmul_bwd.dbias == AT(3) && a.matmul_bwd.dout == AT(4) &&
                a.matmul_bwd.inp == AT(5) && a.matmul_bwd.weight == AT(6));
    assert_true(a.matmul_bwd.OC == 5 && a.matmul_bwd.dinp_accumulate == 1);
    a = decoded(gt_op_attention_fwd(R(1), R(2), R(3), 2, 3, 8, 2));
    assert_true(a.attention_fwd.out == AT(1) && a.attention_fwd.att == AT(2) &&
                a.attention_fwd.inp == AT(3) && a.attention_fwd.NH == 2);
    a = decoded(gt_op_attention_bwd(R(1), R(2), R(3), R(4), 2, 3, 8, 2));
    assert_true(a.attention_bwd.dinp == AT(1) && a.attention_bwd.dout == AT(2) &&
                a.attention_bwd.inp == AT(3) && a.attention_bwd.att == AT(4));
}

static void builders_and_decode_agree_on_the_rest(void **state)
{
    (void)state;
    gt_op_args a = decoded(gt_op_gelu_bwd(R(1), R(2), R(1), 6));  // dinp aliasing dout
    assert_true(a.gelu_bwd.dinp == AT(1) && a.gelu_bwd.inp == AT(2) &&
                a.gelu_bwd.dout == AT(1) && a.gelu_bwd.N == 6);
    a = decoded(gt_op_gelu_fwd(R(1), R(2), 6));
    assert_true(a.gelu_fwd.out == AT(1) && a.gelu_fwd.inp == AT(2));
    a = decoded(gt_op_residual_fwd(R(1), R(2), R(3), 6));
    assert_true(a.residual_fwd.out == AT(1) && a.residual_fwd.inp1 == AT(2) &&
                a.residual_fwd.inp2 == AT(3));
    a = decoded(gt_op_residual_bwd(R(1), R(2), R(3), 6));
    assert_true(a.residual_bwd.dinp1 == AT(1) && a.residual_bwd.dinp2 == AT(2) &&
                a.residual_bwd.dout == AT(3));
    a = decoded(gt_op_softmax_xent(R(1), R(2), R(3), 2, 3, 10, 16, 1, 0.25f));
    assert_true(a.softmax_xent.losses == AT(1) && a.softmax_xent.logits == AT(2) &&
                (void *)a.softmax_xent.targets == AT(3));
    assert_true(a.softmax_xent.V == 10 && a.softmax_xent.Vp == 16 && a.softmax_xent.grad == 1 &&
                a.softmax_xent.dloss == 0.25f);
    a = decoded(gt_op_sumsq(R(1), R(2), 6));
    assert_true((void *)a.sumsq.out == AT(1) && a.sumsq.x == AT(2));
    a = decoded(gt_op_adamw(R(1), R(2), R(3), R(4), 6, 1, 2, 3, 4, 5, 6, 7, 8));
    assert_true(a.adamw.params == AT(1) && a.adamw.m == AT(2) && a.adamw.v == AT(3) &&
                a.adamw.grads == AT(4));
    assert_true(a.adamw.lr == 1 && a.adamw.beta1 == 2 && a.adamw.beta2 == 3 && a.adamw.eps == 4 &&
                a.adamw.weight_decay == 5 && a.adamw.bc1 == 6 && a.adamw.bc2 == 7 &&
                a.adamw.grad_scale == 8);
    int64_t far = ((int64_t)1 << 40) - 8;  // an offset past int: kept whole
    a = decoded(gt_op_tokens_gather(R(1), R(2), R(3), 6, far, 50257));
    assert_true((void *)a.tokens_gather.inp == AT(1) && (void *)a.tokens_gather.tgt == AT(2) &&
                (void *)a.tokens_gather.data == AT(3));
    assert_true(a.tokens_gather.N == 6 && a.tokens_gather.offset == far &&
                a.tokens_gather.V == 50257);
    a = decoded(gt_op_tokens_check(R(1), 6, 10));
    assert_true((void *)a.tokens_check.data == AT(1) && a.tokens_check.N == 6 &&
                a.tokens_check.V == 10);
}

static void decode_refuses(void **state)
{
    (void)state;
    gt_op_args a;
    int calls = 0;
    gt_op op = gt_op_matmul_fwd(R(1), R(2), R(0), R(4), 6, 8, 5);  // weight is not optional
    gt_err e = gt_op_decode(&op, resolve, &calls, &a);
    assert_int_equal(e.code, GT_E_ARG);
    assert_non_null(strstr(e.msg, "weight"));
    op.refs[2] = R(13);  // the resolver's refusal, wrapped with the ref's name
    e = gt_op_decode(&op, resolve, &calls, &a);
    assert_int_equal(e.code, GT_E_ARG);
    assert_non_null(strstr(e.msg, "weight"));
    assert_non_null(strstr(e.msg, "no buffer 13"));
    op.refs[2] = R(3);
    op.ints[2] = 0;  // shapes before any resolve
    calls = 0;
    GT_ASSERT_CODE(gt_op_decode(&op, resolve, &calls, &a), GT_E_ARG);
    assert_int_equal(calls, 0);
    op.kind = GT_OP_COUNT_;
    GT_ASSERT_CODE(gt_op_decode(&op, resolve, &calls, &a), GT_E_ARG);
    gt_op empty = {0};
    GT_ASSERT_CODE(gt_op_decode(&empty, resolve, &calls, &a), GT_E_ARG);
}

// ---- settings ----------------------------------------------------------------------------------

static gt_err host(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    (void)ctx;
    (void)bytes;
    *ptr = (void *)(uintptr_t)ref.buf;  // the handle is the host address
    return GT_OK;
}

// GELU over many values on each path: the vector exp differs from expf in the last bits, so
// every vector path this CPU has must change the answer against scalar (the setting reaches
// the kernels), and the old switch (gt_ops_cpu_set_simd) must do what the best path does.
static void simd_setter_reaches_the_kernels(void **state)
{
    (void)state;
    enum { N = 4096 };
    static float x[N], got[GT_CPU_ISA_COUNT_][N], old_on[N], old_off[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i - N / 2) / 512.0f;
    }
    for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
        if (!gt_cpu_isa_supported((gt_cpu_isa)p)) {
            continue;
        }
        GT_ASSERT_OK(gt_ops_cpu_set_isa((gt_cpu_isa)p));
        gt_op fwd = gt_op_gelu_fwd((gt_dref){(uintptr_t)got[p], 0}, (gt_dref){(uintptr_t)x, 0}, N);
        GT_ASSERT_OK(gt_ops_cpu_run(&fwd, host, NULL));
        int differ = 0;
        for (int i = 0; i < N; i++) {
            differ += got[p][i] != got[GT_CPU_ISA_SCALAR][i];
            assert_float_equal(got[p][i], got[GT_CPU_ISA_SCALAR][i], 1e-6);
        }
        print_message("%s: %d of %d differ from scalar\n", gt_cpu_isa_name((gt_cpu_isa)p), differ,
                      N);
        if (p != GT_CPU_ISA_SCALAR) {
            assert_true(differ > 0);
        }
    }
    gt_op on = gt_op_gelu_fwd((gt_dref){(uintptr_t)old_on, 0}, (gt_dref){(uintptr_t)x, 0}, N);
    gt_op off = gt_op_gelu_fwd((gt_dref){(uintptr_t)old_off, 0}, (gt_dref){(uintptr_t)x, 0}, N);
    gt_ops_cpu_set_simd(false);
    GT_ASSERT_OK(gt_ops_cpu_run(&off, host, NULL));
    gt_ops_cpu_set_simd(true);
    GT_ASSERT_OK(gt_ops_cpu_run(&on, host, NULL));
    assert_memory_equal(old_off, got[GT_CPU_ISA_SCALAR], sizeof old_off);
    assert_memory_equal(old_on, got[gt_cpu_isa_best()], sizeof old_on);
}

// ---- parts (kernels.h) -------------------------------------------------------------------------

#define HREF(p) ((gt_dref){(uintptr_t)(p), 0})

static void fill_floats(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)(seed >> 16 & 2047) - 1024) / 1024.0f;
    }
}

// The tiles of each group, what a part touches of each ref (hand-computed from the kernel's
// tile sizes), and the checks: a part outside one group's tiles, or of an op without parts,
// is refused by both gt_op_part_extents and gt_ops_cpu_run_part, which then writes nothing.
static void parts_are_checked(void **state)
{
    (void)state;
    enum { N = 256, C = 64, OC = 512 };
    static float dinp[N * C], dweight[OC * C], dbias[OC], dout[N * OC], inp[N * C], w[OC * C];
    gt_op bwd = gt_op_matmul_bwd(HREF(dinp), HREF(dweight), HREF(dbias), HREF(dout), HREF(inp),
                                 HREF(w), N, C, OC, 0);
    gt_op fwd = gt_op_matmul_fwd(HREF(dout), HREF(inp), HREF(w), HREF(dbias), N, C, OC);
    gt_op gelu = gt_op_gelu_fwd(HREF(dinp), HREF(inp), 16);
    int tiles = 0;
    assert_int_equal(gt_op_part_groups(&bwd), 2);
    assert_int_equal(gt_op_part_groups(&fwd), 1);
    assert_int_equal(gt_op_part_groups(&gelu), 0);
    GT_ASSERT_OK(gt_op_part_tiles(&bwd, 0, &tiles));
    assert_int_equal(tiles, 4);  // N >= C: rows, 64 a tile
    GT_ASSERT_OK(gt_op_part_tiles(&bwd, 1, &tiles));
    assert_int_equal(tiles, 4);  // 128 output channels a tile
    GT_ASSERT_OK(gt_op_part_tiles(&fwd, 0, &tiles));
    assert_int_equal(tiles, 4);
    GT_ASSERT_CODE(gt_op_part_tiles(&gelu, 0, &tiles), GT_E_ARG);
    uint64_t lo[GT_OP_MAX_REFS], hi[GT_OP_MAX_REFS];
    GT_ASSERT_OK(gt_op_part_extents(&bwd, &(gt_op_part){1, 1, 2}, lo, hi));
    const uint64_t want_lo[6] = {0, 128 * C * 4, 128 * 4, 128 * 4, 0, 0};
    const uint64_t want_hi[6] = {0, 256 * C * 4, 256 * 4, ((N - 1) * OC + 256) * 4, N * C * 4, 0};
    assert_memory_equal(lo, want_lo, sizeof want_lo);
    assert_memory_equal(hi, want_hi, sizeof want_hi);
    GT_ASSERT_OK(gt_op_part_extents(&bwd, &(gt_op_part){0, 2, 4}, lo, hi));
    const uint64_t dinp_lo[6] = {128 * C * 4, 0, 0, 128 * OC * 4, 0, 0};
    const uint64_t dinp_hi[6] = {N * C * 4, 0, 0, N * OC * 4, 0, OC * C * 4};
    assert_memory_equal(lo, dinp_lo, sizeof dinp_lo);
    assert_memory_equal(hi, dinp_hi, sizeof dinp_hi);
    const gt_op_part bad[] = {{2, 0, 1}, {1, 0, 0}, {1, 3, 5}, {1, -1, 1}, {0, 2, 1}};
    memset(dweight, 0, sizeof dweight);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GT_ASSERT_CODE(gt_op_part_extents(&bwd, &bad[i], lo, hi), GT_E_ARG);
        GT_ASSERT_CODE(gt_ops_cpu_run_part(&bwd, &bad[i], host, NULL), GT_E_ARG);
    }
    GT_ASSERT_CODE(gt_ops_cpu_run_part(&fwd, &(gt_op_part){1, 0, 1}, host, NULL), GT_E_ARG);
    GT_ASSERT_CODE(gt_ops_cpu_run_part(&gelu, &(gt_op_part){0, 0, 1}, host, NULL), GT_E_ARG);
    static const float zero[OC * C];
    assert_memory_equal(dweight, zero, sizeof zero);  // nothing ran
}

// Every part of matmul_backward run one tile at a time, dweight's group first and each group's
// tiles backwards, gives the whole op's bytes (both dinp tilings, dinp overwritten and
// accumulated): the tiles are the whole op's sgemm calls, independent of each other.
static void parts_make_the_whole_op(void **state)
{
    (void)state;
    static const int shapes[][3] = {{256, 64, 512}, {16, 128, 1024}};
    enum { MAXF = 256 * 1024 };
    static float dout[MAXF], inp[MAXF], w[MAXF], out[2][3][MAXF];  // [whole, parts][dinp, dw, db]
    for (int s = 0; s < 2; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        fill_floats(dout, (size_t)N * OC, 1);
        fill_floats(inp, (size_t)N * C, 2);
        fill_floats(w, (size_t)OC * C, 3);
        for (int acc = 0; acc < 2; acc++) {
            for (int k = 0; k < 2; k++) {
                fill_floats(out[k][0], (size_t)N * C, 4);
                fill_floats(out[k][1], (size_t)OC * C, 5);
                fill_floats(out[k][2], (size_t)OC, 6);
            }
            gt_op op[2];
            for (int k = 0; k < 2; k++) {
                op[k] = gt_op_matmul_bwd(HREF(out[k][0]), HREF(out[k][1]), HREF(out[k][2]),
                                         HREF(dout), HREF(inp), HREF(w), N, C, OC, acc);
            }
            GT_ASSERT_OK(gt_ops_cpu_run(&op[0], host, NULL));
            for (int g = 1; g >= 0; g--) {
                int tiles = 0;
                GT_ASSERT_OK(gt_op_part_tiles(&op[1], g, &tiles));
                for (int t = tiles - 1; t >= 0; t--) {
                    GT_ASSERT_OK(gt_ops_cpu_run_part(&op[1], &(gt_op_part){g, t, t + 1}, host,
                                                     NULL));
                }
            }
            assert_memory_equal(out[0][0], out[1][0], sizeof(float) * (size_t)N * C);
            assert_memory_equal(out[0][1], out[1][1], sizeof(float) * (size_t)OC * C);
            assert_memory_equal(out[0][2], out[1][2], sizeof(float) * (size_t)OC);
        }
    }
}

// sum_of_squares' parts are its blocks of 16384 floats: the tile counts and extents of N below
// one block, an exact multiple and one with a tail (x: its blocks' floats; out: its 8 bytes,
// whole); bad parts are refused by both entry points, which then write nothing.
static void sumsq_parts_are_checked(void **state)
{
    (void)state;
    enum { B = 16384 };
    static float x[3 * B];
    double out = -1.0;
    static const struct { int64_t n; int tiles; gt_op_part part; uint64_t lo, hi; } rows[] = {
        {1000, 1, {0, 0, 1}, 0, 1000 * 4},
        {2 * B, 2, {0, 1, 2}, B * 4, 2 * B * 4},
        {2 * B, 2, {0, 0, 2}, 0, 2 * B * 4},
        {2 * B + 7, 3, {0, 2, 3}, 2 * B * 4, (2 * B + 7) * 4},
        {2 * B + 7, 3, {0, 0, 1}, 0, B * 4},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        gt_op op = gt_op_sumsq(HREF(&out), HREF(x), rows[k].n);
        int tiles = 0;
        assert_int_equal(gt_op_part_groups(&op), 1);
        assert_string_equal(gt_op_part_group_name(&op, 0), "x");
        GT_ASSERT_OK(gt_op_part_tiles(&op, 0, &tiles));
        assert_int_equal(tiles, rows[k].tiles);
        uint64_t lo[GT_OP_MAX_REFS], hi[GT_OP_MAX_REFS];
        GT_ASSERT_OK(gt_op_part_extents(&op, &rows[k].part, lo, hi));
        const uint64_t want_lo[GT_OP_MAX_REFS] = {0, rows[k].lo};
        const uint64_t want_hi[GT_OP_MAX_REFS] = {sizeof(double), rows[k].hi};
        assert_memory_equal(lo, want_lo, sizeof want_lo);
        assert_memory_equal(hi, want_hi, sizeof want_hi);
    }
    gt_op op = gt_op_sumsq(HREF(&out), HREF(x), 2 * B + 7);  // 3 tiles
    const gt_op_part bad[] = {{1, 0, 1}, {0, 0, 0}, {0, 2, 4}, {0, -1, 1}, {0, 2, 1}, {0, 3, 4}};
    uint64_t lo[GT_OP_MAX_REFS], hi[GT_OP_MAX_REFS];
    fill_floats(x, 3 * B, 9);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GT_ASSERT_CODE(gt_op_part_extents(&op, &bad[i], lo, hi), GT_E_ARG);
        GT_ASSERT_CODE(gt_ops_cpu_run_part(&op, &bad[i], host, NULL), GT_E_ARG);
    }
    assert_true(out == -1.0);  // nothing ran
}

// Floats with full mantissas over 2^-8..2^8: their squares' sum rounds, so the order counts.
static void fill_wide_floats(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = ldexpf(1.0f + (float)(seed >> 9) / 8388608.0f, (int)(seed % 17) - 8);
    }
}

// sum_of_squares run in parts in tile order (one block a part, and two uneven parts), out
// holding garbage before: the whole op's 8 bytes. Out of order (the contract forbids it, and
// nothing can tell): a part from tile 0 starts over, so out is then what that part alone makes.
static void sumsq_parts_make_the_whole_op(void **state)
{
    (void)state;
    enum { B = 16384, N = 5 * B + 77 };  // 6 tiles
    static float x[N];
    fill_wide_floats(x, N, 11);
    double whole = 0.0, got = 0.0, first = 0.0;
    gt_op op = gt_op_sumsq(HREF(&whole), HREF(x), N);
    GT_ASSERT_OK(gt_ops_cpu_run(&op, host, NULL));
    assert_true(whole > 0.0);
    op = gt_op_sumsq(HREF(&got), HREF(x), N);
    got = 12345.0;  // a part from tile 0 does not read out
    for (int t = 0; t < 6; t++) {
        GT_ASSERT_OK(gt_ops_cpu_run_part(&op, &(gt_op_part){0, t, t + 1}, host, NULL));
    }
    assert_memory_equal(&whole, &got, sizeof whole);
    got = -3.0;
    GT_ASSERT_OK(gt_ops_cpu_run_part(&op, &(gt_op_part){0, 0, 2}, host, NULL));
    GT_ASSERT_OK(gt_ops_cpu_run_part(&op, &(gt_op_part){0, 2, 6}, host, NULL));
    assert_memory_equal(&whole, &got, sizeof whole);
    // The whole op's bytes are not those of another order of the block sums (the test could
    // not tell a reordering otherwise): blocks 1..5 first, then block 0 added last.
    double reordered = 0.0;
    op = gt_op_sumsq(HREF(&reordered), HREF(x + B), N - B);
    GT_ASSERT_OK(gt_ops_cpu_run(&op, host, NULL));
    op = gt_op_sumsq(HREF(&first), HREF(x), B);
    GT_ASSERT_OK(gt_ops_cpu_run(&op, host, NULL));
    reordered += first;
    assert_memory_not_equal(&whole, &reordered, sizeof whole);
    op = gt_op_sumsq(HREF(&got), HREF(x), N);
    GT_ASSERT_OK(gt_ops_cpu_run_part(&op, &(gt_op_part){0, 1, 6}, host, NULL));
    GT_ASSERT_OK(gt_ops_cpu_run_part(&op, &(gt_op_part){0, 0, 1}, host, NULL));
    assert_memory_equal(&got, &first, sizeof got);  // out of order: block 0's sum alone
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(descriptors_are_well_formed),
        cmocka_unit_test(sizes_by_hand),
        cmocka_unit_test(sizes_match_the_old_switch),
        cmocka_unit_test(over_large_shapes_are_refused),
        cmocka_unit_test(access_says_what_is_written),
        cmocka_unit_test(builders_and_decode_agree_on_layers),
        cmocka_unit_test(builders_and_decode_agree_on_the_rest),
        cmocka_unit_test(decode_refuses),
        cmocka_unit_test(simd_setter_reaches_the_kernels),
        cmocka_unit_test(parts_are_checked),
        cmocka_unit_test(parts_make_the_whole_op),
        cmocka_unit_test(sumsq_parts_are_checked),
        cmocka_unit_test(sumsq_parts_make_the_whole_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
