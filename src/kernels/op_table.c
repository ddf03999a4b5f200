// The op table (kernels.h): one descriptor per op kind, and everything computed from it: the
// byte count every ref must provide, the decoding of an op into its args struct, the builders.
#include <gputravel/kernels.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/mantissa.h"  // shared with the CUDA release kernels

// Shapes are positive and below 2^31; a byte count may be at most 2^62 (so every offset
// computed later in size_t is exact).
#define SHAPE_MAX ((int64_t)1 << 31)
#define BYTES_MAX ((uint64_t)1 << 62)

// Descriptor entries; ARGS names the args struct of the op being described.
#define REF(f, type, acc, shp) {#f, GT_ELEM_##type, GT_ACCESS_##acc, false, shp, offsetof(ARGS, f)}
#define OPT(f, type, acc, shp) {#f, GT_ELEM_##type, GT_ACCESS_##acc, true, shp, offsetof(ARGS, f)}
#define INT(f, lo, hi, is_shape) {#f, lo, hi, is_shape, offsetof(ARGS, f), sizeof(((ARGS *)0)->f)}
#define SHAPE(f) INT(f, 1, SHAPE_MAX, true)
#define FLAG(f) INT(f, 0, 2, false)  // 0 or 1
#define FLT(f) {#f, offsetof(ARGS, f)}
#define LE(a, b) {GT_OP_REL_LE, #a, #b}
#define DIVIDES(a, b) {GT_OP_REL_DIVIDES, #a, #b}
#define SIZE .args_size = sizeof(ARGS)

static const gt_op_descriptor descs[GT_OP_COUNT_] = {
#define ARGS gt_encoder_fwd_args
    [GT_OP_ENCODER_FWD] = {"encoder_forward", 4, 6, 0, SIZE,
        .refs = {REF(out, F32, WRITE, "B,T,C"), REF(inp, I32, READ, "B,T"),
                 REF(wte, F32, READ, "Vp,C"), REF(wpe, F32, READ, "maxT,C")},
        .ints = {SHAPE(B), SHAPE(T), SHAPE(C), SHAPE(V), SHAPE(Vp), SHAPE(maxT)},
        .rels = {LE(V, Vp), LE(T, maxT)}},
#undef ARGS
#define ARGS gt_encoder_bwd_args
    [GT_OP_ENCODER_BWD] = {"encoder_backward", 4, 6, 0, SIZE,
        .refs = {REF(dwte, F32, ACCUM, "Vp,C"), REF(dwpe, F32, ACCUM, "maxT,C"),
                 REF(dout, F32, READ, "B,T,C"), REF(inp, I32, READ, "B,T")},
        .ints = {SHAPE(B), SHAPE(T), SHAPE(C), SHAPE(V), SHAPE(Vp), SHAPE(maxT)},
        .rels = {LE(V, Vp), LE(T, maxT)}},
#undef ARGS
#define ARGS gt_layernorm_fwd_args
    [GT_OP_LAYERNORM_FWD] = {"layernorm_forward", 6, 2, 0, SIZE,
        .refs = {REF(out, F32, WRITE, "N,C"), REF(mean, F32, WRITE, "N"),
                 REF(rstd, F32, WRITE, "N"), REF(inp, F32, READ, "N,C"),
                 REF(weight, F32, READ, "C"), REF(bias, F32, READ, "C")},
        .ints = {SHAPE(N), SHAPE(C)}},
#undef ARGS
#define ARGS gt_layernorm_bwd_args
    [GT_OP_LAYERNORM_BWD] = {"layernorm_backward", 8, 2, 0, SIZE,
        .refs = {REF(dinp, F32, ACCUM, "N,C"), REF(dweight, F32, ACCUM, "C"),
                 REF(dbias, F32, ACCUM, "C"), REF(dout, F32, READ, "N,C"),
                 REF(inp, F32, READ, "N,C"), REF(weight, F32, READ, "C"),
                 REF(mean, F32, READ, "N"), REF(rstd, F32, READ, "N")},
        .ints = {SHAPE(N), SHAPE(C)}},
#undef ARGS
#define ARGS gt_matmul_fwd_args
    [GT_OP_MATMUL_FWD] = {"matmul_forward", 4, 3, 0, SIZE,
        .refs = {REF(out, F32, WRITE, "N,OC"), REF(inp, F32, READ, "N,C"),
                 REF(weight, F32, READ, "OC,C"), OPT(bias, F32, READ, "OC")},
        .ints = {SHAPE(N), SHAPE(C), SHAPE(OC)}},
#undef ARGS
#define ARGS gt_matmul_bwd_args
    // dinp is overwritten unless dinp_accumulate; described as "+=", which keeps the labels of
    // what it held: never fewer than the truth.
    [GT_OP_MATMUL_BWD] = {"matmul_backward", 6, 4, 0, SIZE,
        .refs = {REF(dinp, F32, ACCUM, "N,C"), REF(dweight, F32, ACCUM, "OC,C"),
                 OPT(dbias, F32, ACCUM, "OC"), REF(dout, F32, READ, "N,OC"),
                 REF(inp, F32, READ, "N,C"), REF(weight, F32, READ, "OC,C")},
        .ints = {SHAPE(N), SHAPE(C), SHAPE(OC), FLAG(dinp_accumulate)}},
#undef ARGS
#define ARGS gt_attention_fwd_args
    [GT_OP_ATTENTION_FWD] = {"attention_forward", 3, 4, 0, SIZE,
        .refs = {REF(out, F32, WRITE, "B,T,C"), REF(att, F32, WRITE, "B,NH,T,T"),
                 REF(inp, F32, READ, "B,T,3C")},
        .ints = {SHAPE(B), SHAPE(T), SHAPE(C), SHAPE(NH)},
        .rels = {DIVIDES(NH, C)}},
#undef ARGS
#define ARGS gt_attention_bwd_args
    // Causal: att is read only on and below the diagonal (kernels.h; every backend, and
    // tests/kernels/test_kernel_contract.c holds them to it with random att everywhere).
    [GT_OP_ATTENTION_BWD] = {"attention_backward", 4, 4, 0, SIZE,
        .refs = {REF(dinp, F32, WRITE, "B,T,3C"), REF(dout, F32, READ, "B,T,C"),
                 REF(inp, F32, READ, "B,T,3C"), REF(att, F32, READ, "B,NH,T,T")},
        .ints = {SHAPE(B), SHAPE(T), SHAPE(C), SHAPE(NH)},
        .rels = {DIVIDES(NH, C)}},
#undef ARGS
#define ARGS gt_gelu_fwd_args
    [GT_OP_GELU_FWD] = {"gelu_forward", 2, 1, 0, SIZE,
        .refs = {REF(out, F32, WRITE, "N"), REF(inp, F32, READ, "N")},
        .ints = {SHAPE(N)}},
#undef ARGS
#define ARGS gt_gelu_bwd_args
    [GT_OP_GELU_BWD] = {"gelu_backward", 3, 1, 0, SIZE,
        .refs = {REF(dinp, F32, WRITE, "N"), REF(inp, F32, READ, "N"), REF(dout, F32, READ, "N")},
        .ints = {SHAPE(N)}},
#undef ARGS
#define ARGS gt_residual_fwd_args
    [GT_OP_RESIDUAL_FWD] = {"residual_forward", 3, 1, 0, SIZE,
        .refs = {REF(out, F32, WRITE, "N"), REF(inp1, F32, READ, "N"),
                 REF(inp2, F32, READ, "N")},
        .ints = {SHAPE(N)}},
#undef ARGS
#define ARGS gt_residual_bwd_args
    [GT_OP_RESIDUAL_BWD] = {"residual_backward", 3, 1, 0, SIZE,
        .refs = {REF(dinp1, F32, ACCUM, "N"), REF(dinp2, F32, ACCUM, "N"),
                 REF(dout, F32, READ, "N")},
        .ints = {SHAPE(N)}},
#undef ARGS
#define ARGS gt_softmax_xent_args
    [GT_OP_SOFTMAX_XENT] = {"softmax_crossentropy", 3, 5, 1, SIZE,
        .refs = {REF(losses, F32, WRITE, "B,T"), REF(logits, F32, INPLACE, "B,T,Vp"),
                 REF(targets, I32, READ, "B,T")},
        .ints = {SHAPE(B), SHAPE(T), SHAPE(V), SHAPE(Vp), FLAG(grad)},
        .floats = {FLT(dloss)},
        .rels = {LE(V, Vp)}},
#undef ARGS
#define ARGS gt_sumsq_args
    [GT_OP_SUMSQ] = {"sum_of_squares", 2, 1, 0, SIZE,
        .refs = {REF(out, F64, WRITE, ""), REF(x, F32, READ, "N")},
        .ints = {SHAPE(N)}},
#undef ARGS
#define ARGS gt_adamw_args
    [GT_OP_ADAMW] = {"adamw", 4, 1, 8, SIZE,
        .refs = {REF(params, F32, ACCUM, "N"), REF(m, F32, ACCUM, "N"), REF(v, F32, ACCUM, "N"),
                 REF(grads, F32, READ, "N")},
        .ints = {SHAPE(N)},
        .floats = {FLT(lr), FLT(beta1), FLT(beta2), FLT(eps), FLT(weight_decay), FLT(bc1),
                   FLT(bc2), FLT(grad_scale)}},
#undef ARGS
#define ARGS gt_tokens_gather_args
    [GT_OP_TOKENS_GATHER] = {"tokens_gather", 3, 3, 0, SIZE,
        .refs = {REF(inp, I32, WRITE, "N"), REF(tgt, I32, WRITE, "N"),
                 REF(data, U16, READ, "offset+N+1")},
        .ints = {SHAPE(N), INT(offset, 0, (int64_t)1 << 40, false), INT(V, 1, 65537, false)}},
#undef ARGS
#define ARGS gt_tokens_check_args
    [GT_OP_TOKENS_CHECK] = {"tokens_check", 1, 2, 0, SIZE,
        .refs = {REF(data, U16, READ, "N")},
        .ints = {SHAPE(N), SHAPE(V)}},
#undef ARGS
#define ARGS gt_loss_mean_args
    [GT_OP_LOSS_MEAN] = {"loss_mean", 2, 2, 0, SIZE,
        .refs = {REF(out, F32, WRITE, ""), REF(losses, F32, READ, "N")},
        .ints = {SHAPE(N), INT(bits, 1, 24, false)}, .release = "loss"},
#undef ARGS
#define ARGS gt_norm_release_args
    [GT_OP_NORM_RELEASE] = {"norm_release", 2, 1, 0, SIZE,
        .refs = {REF(out, F32, WRITE, ""), REF(sumsq, F64, READ, "")},
        .ints = {INT(bits, 1, 24, false)}, .release = "grad_norm"},
#undef ARGS
#define ARGS gt_clip_grads_args
    [GT_OP_CLIP_GRADS] = {"clip_grads", 2, 1, 1, SIZE,
        .refs = {REF(grads, F32, INPLACE, "N"), REF(sumsq, F64, READ, "")},
        .ints = {SHAPE(N)}, .floats = {FLT(clip)}},
#undef ARGS
#define ARGS gt_sum_f64_args
    [GT_OP_SUM_F64] = {"sum_f64", 2, 1, 0, SIZE,
        .refs = {REF(out, F64, WRITE, ""), REF(x, F64, READ, "N")},
        .ints = {SHAPE(N)}},
#undef ARGS
};

size_t gt_elem_size(gt_elem elem)
{
    switch (elem) {
    case GT_ELEM_F64: return 8;
    case GT_ELEM_U16: return 2;
    case GT_ELEM_F32:
    case GT_ELEM_I32:
    default: return 4;
    }
}

bool gt_access_writes(gt_access access) { return access != GT_ACCESS_READ; }

const gt_op_descriptor *gt_op_desc(uint32_t kind)
{
    if (kind == GT_OP_NONE_ || kind >= GT_OP_COUNT_) {
        return NULL;
    }
    return &descs[kind];
}

const char *gt_op_name(uint32_t kind)
{
    const gt_op_descriptor *d = gt_op_desc(kind);
    return d != NULL ? d->name : "unknown";
}

bool gt_op_ref_optional(uint32_t kind, int i)
{
    const gt_op_descriptor *d = gt_op_desc(kind);
    return d != NULL && i >= 0 && i < d->nrefs && d->refs[i].optional;
}

// ---- sizes ------------------------------------------------------------------------------------

// The index of int `name` (len bytes) in d, or -1.
static int int_index(const gt_op_descriptor *d, const char *name, size_t len)
{
    for (int i = 0; i < d->nints; i++) {
        if (strlen(d->ints[i].name) == len && memcmp(d->ints[i].name, name, len) == 0) {
            return i;
        }
    }
    return -1;
}

// One extent of a shape string at *s: a sum of terms `[k]name` or `k`. Advances *s past it.
// Returns false on a malformed shape (a defect of the table: the table test parses them all).
static bool extent(const gt_op_descriptor *d, const int64_t *ints, const char **s, uint64_t *out,
                   bool *overflow)
{
    uint64_t sum = 0;
    for (;;) {
        const char *p = *s;
        uint64_t k = 0;
        bool digits = false;
        while (*p >= '0' && *p <= '9') {
            k = k * 10 + (uint64_t)(*p++ - '0');
            digits = true;
        }
        const char *name = p;
        while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')) {
            p++;
        }
        uint64_t term = digits ? k : 1;
        if (p > name) {
            int i = int_index(d, name, (size_t)(p - name));
            if (i < 0) {
                return false;
            }
            *overflow |= __builtin_mul_overflow(term, (uint64_t)ints[i], &term);
        } else if (!digits) {
            return false;
        }
        *overflow |= __builtin_add_overflow(sum, term, &sum);
        *s = p;
        if (*p != '+') {
            break;
        }
        (*s)++;
    }
    *out = sum;
    return true;
}

// Bytes of one ref: the element size times every extent; *overflow when past BYTES_MAX.
static bool ref_bytes(const gt_op_descriptor *d, const gt_op_ref_desc *r, const int64_t *ints,
                      uint64_t *out, bool *overflow)
{
    uint64_t bytes = gt_elem_size(r->elem);
    const char *s = r->shape;
    while (*s != '\0') {
        uint64_t e = 0;
        if (!extent(d, ints, &s, &e, overflow)) {
            return false;
        }
        *overflow |= __builtin_mul_overflow(bytes, e, &bytes);
        if (*s == ',') {
            s++;
        } else if (*s != '\0') {
            return false;
        }
    }
    *overflow |= bytes > BYTES_MAX;
    *out = bytes;
    return true;
}

static gt_err check_ints(const gt_op_descriptor *d, const int64_t *in)
{
    for (int i = 0; i < d->nints; i++) {
        const gt_op_int_desc *x = &d->ints[i];
        if (x->shape) {
            GT_ENSURE(in[i] >= x->min && in[i] < x->max, GT_E_ARG, "%s: shape %s is %lld",
                      d->name, x->name, (long long)in[i]);
        } else {
            GT_ENSURE(in[i] >= x->min && in[i] < x->max, GT_E_ARG, "%s: %s %lld", d->name,
                      x->name, (long long)in[i]);
        }
    }
    for (int i = 0; i < GT_OP_MAX_RELS && d->rels[i].kind != GT_OP_REL_NONE; i++) {
        const gt_op_rel *r = &d->rels[i];
        int a = int_index(d, r->a, strlen(r->a)), b = int_index(d, r->b, strlen(r->b));
        GT_ENSURE(a >= 0 && b >= 0, GT_E_STATE, "%s: relation over unknown ints", d->name);
        if (r->kind == GT_OP_REL_LE) {
            GT_ENSURE(in[a] <= in[b], GT_E_ARG, "%s: %s %lld > %s %lld", d->name, r->a,
                      (long long)in[a], r->b, (long long)in[b]);
        } else {
            GT_ENSURE(in[a] != 0 && in[b] % in[a] == 0, GT_E_ARG,
                      "%s: %s %lld not a multiple of %s %lld", d->name, r->b, (long long)in[b], r->a, (long long)in[a]);
        }
    }
    return GT_OK;
}

gt_err gt_op_ref_sizes(const gt_op *op, uint64_t bytes[GT_OP_MAX_REFS], int *nrefs)
{
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    GT_ENSURE(d != NULL, GT_E_ARG, "op: unknown kind %u", op->kind);
    memset(bytes, 0, sizeof(uint64_t) * GT_OP_MAX_REFS);
    *nrefs = d->nrefs;
    GT_TRY(check_ints(d, op->ints));
    for (int i = 0; i < d->nrefs; i++) {
        bool overflow = false;
        GT_ENSURE(ref_bytes(d, &d->refs[i], op->ints, &bytes[i], &overflow), GT_E_STATE,
                  "%s: ref %s has a malformed shape \"%s\"", d->name, d->refs[i].name,
                  d->refs[i].shape);
        GT_ENSURE(!overflow, GT_E_ARG, "%s: shapes too large (ref %s, %s)", d->name,
                  d->refs[i].name, d->refs[i].shape);
    }
    return GT_OK;
}

// ---- decoding ---------------------------------------------------------------------------------

gt_err gt_op_decode(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx, gt_op_args *args)
{
    uint64_t bytes[GT_OP_MAX_REFS] = {0};
    int nrefs = 0;
    GT_TRY(gt_op_ref_sizes(op, bytes, &nrefs));
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    memset(args, 0, sizeof *args);
    char *base = (char *)args;
    for (int i = 0; i < nrefs; i++) {
        void *p = NULL;
        const gt_op_ref_desc *r = &d->refs[i];
        if (op->refs[i].buf != 0 || !r->optional) {
            GT_ENSURE(op->refs[i].buf != 0, GT_E_ARG, "%s: ref %d (%s) is empty", d->name, i,
                      r->name);
            gt_err e = resolve(ctx, op->refs[i], bytes[i], &p);
            if (e.code != GT_E_NONE) {
                return gt_err_wrap(e, "%s: ref %d (%s)", d->name, i, r->name);
            }
        }
        memcpy(base + r->field, &p, sizeof p);  // every field is an object pointer
    }
    for (int i = 0; i < d->nints; i++) {  // ranges are checked: shapes fit an int
        const gt_op_int_desc *x = &d->ints[i];
        if (x->width == sizeof(int64_t)) {
            memcpy(base + x->field, &op->ints[i], sizeof(int64_t));
        } else {
            int v = (int)op->ints[i];
            memcpy(base + x->field, &v, sizeof v);
        }
    }
    for (int i = 0; i < d->nfloats; i++) {
        memcpy(base + d->floats[i].field, &op->floats[i], sizeof(float));
    }
    return GT_OK;
}

// ---- builders ---------------------------------------------------------------------------------

// The arity of every builder is checked against the descriptor, so a builder and the table
// cannot disagree on how many refs, ints and floats an op has.
static gt_op make(uint32_t kind, const gt_dref *refs, int nrefs, const int64_t *ints, int nints,
                  const float *floats, int nfloats)
{
    const gt_op_descriptor *d = gt_op_desc(kind);
    assert(d != NULL && d->nrefs == nrefs && d->nints == nints && d->nfloats == nfloats);
    (void)d;
    gt_op op = {.kind = kind};
    memcpy(op.refs, refs, sizeof *refs * (size_t)nrefs);
    memcpy(op.ints, ints, sizeof *ints * (size_t)nints);
    if (nfloats > 0) {
        memcpy(op.floats, floats, sizeof *floats * (size_t)nfloats);
    }
    return op;
}

// An array and its length, from the builder's arguments.
#define LIST(type, ...) (const type[]){__VA_ARGS__}, (int)(sizeof((type[]){__VA_ARGS__}) / sizeof(type))
#define REFS(...) LIST(gt_dref, __VA_ARGS__)
#define INTS(...) LIST(int64_t, __VA_ARGS__)
#define FLOATS(...) LIST(float, __VA_ARGS__)
#define NO_FLOATS NULL, 0

gt_op gt_op_encoder_fwd(gt_dref out, gt_dref inp, gt_dref wte, gt_dref wpe, int64_t B, int64_t T,
                        int64_t C, int64_t V, int64_t Vp, int64_t maxT)
{
    return make(GT_OP_ENCODER_FWD, REFS(out, inp, wte, wpe), INTS(B, T, C, V, Vp, maxT),
                NO_FLOATS);
}

gt_op gt_op_encoder_bwd(gt_dref dwte, gt_dref dwpe, gt_dref dout, gt_dref inp, int64_t B,
                        int64_t T, int64_t C, int64_t V, int64_t Vp, int64_t maxT)
{
    return make(GT_OP_ENCODER_BWD, REFS(dwte, dwpe, dout, inp), INTS(B, T, C, V, Vp, maxT),
                NO_FLOATS);
}

gt_op gt_op_layernorm_fwd(gt_dref out, gt_dref mean, gt_dref rstd, gt_dref inp, gt_dref weight,
                          gt_dref bias, int64_t N, int64_t C)
{
    return make(GT_OP_LAYERNORM_FWD, REFS(out, mean, rstd, inp, weight, bias), INTS(N, C),
                NO_FLOATS);
}

gt_op gt_op_layernorm_bwd(gt_dref dinp, gt_dref dweight, gt_dref dbias, gt_dref dout, gt_dref inp,
                          gt_dref weight, gt_dref mean, gt_dref rstd, int64_t N, int64_t C)
{
    return make(GT_OP_LAYERNORM_BWD, REFS(dinp, dweight, dbias, dout, inp, weight, mean, rstd),
                INTS(N, C), NO_FLOATS);
}

gt_op gt_op_matmul_fwd(gt_dref out, gt_dref inp, gt_dref weight, gt_dref bias, int64_t N,
                       int64_t C, int64_t OC)
{
    return make(GT_OP_MATMUL_FWD, REFS(out, inp, weight, bias), INTS(N, C, OC), NO_FLOATS);
}

gt_op gt_op_matmul_bwd(gt_dref dinp, gt_dref dweight, gt_dref dbias, gt_dref dout, gt_dref inp,
                       gt_dref weight, int64_t N, int64_t C, int64_t OC, int64_t dinp_accumulate)
{
    return make(GT_OP_MATMUL_BWD, REFS(dinp, dweight, dbias, dout, inp, weight),
                INTS(N, C, OC, dinp_accumulate), NO_FLOATS);
}

gt_op gt_op_attention_fwd(gt_dref out, gt_dref att, gt_dref inp, int64_t B, int64_t T, int64_t C,
                          int64_t NH)
{
    return make(GT_OP_ATTENTION_FWD, REFS(out, att, inp), INTS(B, T, C, NH), NO_FLOATS);
}

gt_op gt_op_attention_bwd(gt_dref dinp, gt_dref dout, gt_dref inp, gt_dref att, int64_t B,
                          int64_t T, int64_t C, int64_t NH)
{
    return make(GT_OP_ATTENTION_BWD, REFS(dinp, dout, inp, att), INTS(B, T, C, NH), NO_FLOATS);
}

gt_op gt_op_gelu_fwd(gt_dref out, gt_dref inp, int64_t N)
{
    return make(GT_OP_GELU_FWD, REFS(out, inp), INTS(N), NO_FLOATS);
}

gt_op gt_op_gelu_bwd(gt_dref dinp, gt_dref inp, gt_dref dout, int64_t N)
{
    return make(GT_OP_GELU_BWD, REFS(dinp, inp, dout), INTS(N), NO_FLOATS);
}

gt_op gt_op_residual_fwd(gt_dref out, gt_dref inp1, gt_dref inp2, int64_t N)
{
    return make(GT_OP_RESIDUAL_FWD, REFS(out, inp1, inp2), INTS(N), NO_FLOATS);
}

gt_op gt_op_residual_bwd(gt_dref dinp1, gt_dref dinp2, gt_dref dout, int64_t N)
{
    return make(GT_OP_RESIDUAL_BWD, REFS(dinp1, dinp2, dout), INTS(N), NO_FLOATS);
}

gt_op gt_op_softmax_xent(gt_dref losses, gt_dref logits, gt_dref targets, int64_t B, int64_t T,
                         int64_t V, int64_t Vp, int64_t grad, float dloss)
{
    return make(GT_OP_SOFTMAX_XENT, REFS(losses, logits, targets), INTS(B, T, V, Vp, grad),
                FLOATS(dloss));
}

gt_op gt_op_sumsq(gt_dref out, gt_dref x, int64_t N)
{
    return make(GT_OP_SUMSQ, REFS(out, x), INTS(N), NO_FLOATS);
}

gt_op gt_op_adamw(gt_dref params, gt_dref m, gt_dref v, gt_dref grads, int64_t N, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2,
                  float grad_scale)
{
    return make(GT_OP_ADAMW, REFS(params, m, v, grads), INTS(N),
                FLOATS(lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale));
}

gt_op gt_op_tokens_gather(gt_dref inp, gt_dref tgt, gt_dref data, int64_t N, int64_t offset,
                          int64_t V)
{
    return make(GT_OP_TOKENS_GATHER, REFS(inp, tgt, data), INTS(N, offset, V), NO_FLOATS);
}

gt_op gt_op_tokens_check(gt_dref data, int64_t N, int64_t V)
{
    return make(GT_OP_TOKENS_CHECK, REFS(data), INTS(N, V), NO_FLOATS);
}

gt_op gt_op_loss_mean(gt_dref out, gt_dref losses, int64_t N)
{
    return make(GT_OP_LOSS_MEAN, REFS(out, losses), INTS(N, 23), NO_FLOATS);
}

gt_op gt_op_norm_release(gt_dref out, gt_dref sumsq)
{
    return make(GT_OP_NORM_RELEASE, REFS(out, sumsq), INTS(23), NO_FLOATS);
}

gt_op gt_op_clip_grads(gt_dref grads, gt_dref sumsq, int64_t N, float clip)
{
    return make(GT_OP_CLIP_GRADS, REFS(grads, sumsq), INTS(N), FLOATS(clip));
}

gt_op gt_op_sum_f64(gt_dref out, gt_dref x, int64_t N)
{
    return make(GT_OP_SUM_F64, REFS(out, x), INTS(N), NO_FLOATS);
}

float gt_round_mantissa(float f, int bits) { return gt_mantissa_round(f, bits); }
