// The op table: names, argument layouts and the byte count every ref must provide (ops.h).
#include "ops.h"

#include <string.h>

#define GT_OP_NAME(kind, name, nrefs) [kind] = name,
static const char *const op_names[GT_OP_COUNT_] = {GT_OP_TABLE(GT_OP_NAME)};
#undef GT_OP_NAME
#define GT_OP_NREFS(kind, name, nrefs) [kind] = nrefs,
static const int op_nrefs[GT_OP_COUNT_] = {GT_OP_TABLE(GT_OP_NREFS)};
#undef GT_OP_NREFS

const char *gt_op_name(uint32_t kind)
{
    if (kind == GT_OP_NONE_ || kind >= GT_OP_COUNT_) {
        return "unknown";
    }
    return op_names[kind];
}

bool gt_op_ref_optional(uint32_t kind, int i)
{
    return (kind == GT_OP_MATMUL_FWD && i == 3) || (kind == GT_OP_MATMUL_BWD && i == 2);
}

// Shapes are positive and below 2^31; products of up to four of them, times the element size,
// must fit in 63 bits (so every offset computed later in size_t is exact).
#define SHAPE_MAX ((int64_t)1 << 31)

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

gt_err gt_op_ref_sizes(const gt_op *op, uint64_t bytes[GT_OP_MAX_REFS], int *nrefs)
{
    uint32_t k = op->kind;
    GT_ENSURE(k != GT_OP_NONE_ && k < GT_OP_COUNT_, GT_E_ARG, "op: unknown kind %u", k);
    const char *name = op_names[k];
    memset(bytes, 0, sizeof(uint64_t) * GT_OP_MAX_REFS);
    *nrefs = op_nrefs[k];
    const int64_t *in = op->ints;
    int nshape = 0;  // how many leading ints are shapes (each checked >= 1)
    switch (k) {
    case GT_OP_ENCODER_FWD: case GT_OP_ENCODER_BWD: nshape = 6; break;
    case GT_OP_LAYERNORM_FWD: case GT_OP_LAYERNORM_BWD: nshape = 2; break;
    case GT_OP_MATMUL_FWD: case GT_OP_MATMUL_BWD: nshape = 3; break;
    case GT_OP_ATTENTION_FWD: case GT_OP_ATTENTION_BWD: nshape = 4; break;
    case GT_OP_SOFTMAX_XENT: nshape = 4; break;
    case GT_OP_TOKENS_CHECK: nshape = 2; break;
    default: nshape = 1; break;  // N
    }
    for (int i = 0; i < nshape; i++) {
        GT_ENSURE(in[i] >= 1 && in[i] < SHAPE_MAX, GT_E_ARG, "%s: shape int %d is %lld", name, i,
                  (long long)in[i]);
    }
    uint64_t a = (uint64_t)in[0], b = (uint64_t)in[1], c = (uint64_t)in[2], d = (uint64_t)in[3];
    bool ok = true;
    switch (k) {
    case GT_OP_ENCODER_FWD:
    case GT_OP_ENCODER_BWD: {  // B,T,C,V,Vp,maxT
        uint64_t V = d, Vp = (uint64_t)in[4], maxT = (uint64_t)in[5];
        GT_ENSURE(V <= Vp, GT_E_ARG, "%s: V %llu > Vp %llu", name, (unsigned long long)V,
                  (unsigned long long)Vp);
        GT_ENSURE(b <= maxT, GT_E_ARG, "%s: T %llu > maxT %llu", name, (unsigned long long)b,
                  (unsigned long long)maxT);
        int o = k == GT_OP_ENCODER_FWD ? 0 : 2;  // forward: out first; backward: dwte, dwpe first
        int wte = k == GT_OP_ENCODER_FWD ? 2 : 0, wpe = wte + 1, inp = k == GT_OP_ENCODER_FWD ? 1 : 3;
        ok = prod(&bytes[o], 4, a, b, c, 1) && prod(&bytes[inp], 4, a, b, 1, 1) &&
             prod(&bytes[wte], 4, Vp, c, 1, 1) && prod(&bytes[wpe], 4, maxT, c, 1, 1);
        break;
    }
    case GT_OP_LAYERNORM_FWD:  // N,C
        ok = prod(&bytes[0], 4, a, b, 1, 1) && prod(&bytes[1], 4, a, 1, 1, 1) &&
             prod(&bytes[2], 4, a, 1, 1, 1) && prod(&bytes[3], 4, a, b, 1, 1) &&
             prod(&bytes[4], 4, b, 1, 1, 1) && prod(&bytes[5], 4, b, 1, 1, 1);
        break;
    case GT_OP_LAYERNORM_BWD:
        ok = prod(&bytes[0], 4, a, b, 1, 1) && prod(&bytes[1], 4, b, 1, 1, 1) &&
             prod(&bytes[2], 4, b, 1, 1, 1) && prod(&bytes[3], 4, a, b, 1, 1) &&
             prod(&bytes[4], 4, a, b, 1, 1) && prod(&bytes[5], 4, b, 1, 1, 1) &&
             prod(&bytes[6], 4, a, 1, 1, 1) && prod(&bytes[7], 4, a, 1, 1, 1);
        break;
    case GT_OP_MATMUL_FWD:  // N,C,OC
        ok = prod(&bytes[0], 4, a, c, 1, 1) && prod(&bytes[1], 4, a, b, 1, 1) &&
             prod(&bytes[2], 4, c, b, 1, 1) && prod(&bytes[3], 4, c, 1, 1, 1);
        break;
    case GT_OP_MATMUL_BWD:  // N,C,OC,acc
        GT_ENSURE(in[3] == 0 || in[3] == 1, GT_E_ARG, "%s: dinp_accumulate %lld", name,
                  (long long)in[3]);
        ok = prod(&bytes[0], 4, a, b, 1, 1) && prod(&bytes[1], 4, c, b, 1, 1) &&
             prod(&bytes[2], 4, c, 1, 1, 1) && prod(&bytes[3], 4, a, c, 1, 1) &&
             prod(&bytes[4], 4, a, b, 1, 1) && prod(&bytes[5], 4, c, b, 1, 1);
        break;
    case GT_OP_ATTENTION_FWD:
    case GT_OP_ATTENTION_BWD: {  // B,T,C,NH
        GT_ENSURE(c % d == 0, GT_E_ARG, "%s: C %llu not a multiple of NH %llu", name,
                  (unsigned long long)c, (unsigned long long)d);
        uint64_t btc = 0, btc3 = 0, att = 0;
        ok = prod(&btc, 4, a, b, c, 1) && prod(&btc3, 12, a, b, c, 1) && prod(&att, 4, a, d, b, b);
        if (k == GT_OP_ATTENTION_FWD) {
            bytes[0] = btc; bytes[1] = att; bytes[2] = btc3;
        } else {
            bytes[0] = btc3; bytes[1] = btc; bytes[2] = btc3; bytes[3] = att;
        }
        break;
    }
    case GT_OP_GELU_FWD:
        ok = prod(&bytes[0], 4, a, 1, 1, 1);
        bytes[1] = bytes[0];
        break;
    case GT_OP_GELU_BWD:
    case GT_OP_RESIDUAL_FWD:
    case GT_OP_RESIDUAL_BWD:
        ok = prod(&bytes[0], 4, a, 1, 1, 1);
        bytes[1] = bytes[2] = bytes[0];
        break;
    case GT_OP_SOFTMAX_XENT:  // B,T,V,Vp,grad
        GT_ENSURE(c <= d, GT_E_ARG, "%s: V %llu > Vp %llu", name, (unsigned long long)c,
                  (unsigned long long)d);
        GT_ENSURE(in[4] == 0 || in[4] == 1, GT_E_ARG, "%s: grad %lld", name, (long long)in[4]);
        ok = prod(&bytes[0], 4, a, b, 1, 1) && prod(&bytes[1], 4, a, b, d, 1) &&
             prod(&bytes[2], 4, a, b, 1, 1);
        break;
    case GT_OP_SUMSQ:
        bytes[0] = 8;
        ok = prod(&bytes[1], 4, a, 1, 1, 1);
        break;
    case GT_OP_ADAMW:
        ok = prod(&bytes[0], 4, a, 1, 1, 1);
        bytes[1] = bytes[2] = bytes[3] = bytes[0];
        break;
    case GT_OP_TOKENS_GATHER:  // N, offset, V
        GT_ENSURE(in[1] >= 0 && in[1] < ((int64_t)1 << 40), GT_E_ARG, "%s: offset %lld", name,
                  (long long)in[1]);
        GT_ENSURE(in[2] >= 1 && in[2] <= 65536, GT_E_ARG, "%s: V %lld", name, (long long)in[2]);
        ok = prod(&bytes[0], 4, a, 1, 1, 1) && prod(&bytes[2], 2, a + b + 1, 1, 1, 1);
        bytes[1] = bytes[0];
        break;
    case GT_OP_TOKENS_CHECK:
        ok = prod(&bytes[0], 2, a, 1, 1, 1);
        break;
    default:
        return gt_errf(GT_E_ARG, "op: unknown kind %u", k);
    }
    GT_ENSURE(ok, GT_E_ARG, "%s: shapes too large", name);
    return GT_OK;
}
