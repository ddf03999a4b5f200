// The shared op cases and their inputs (kernel_cases.h).
#include "testlib.h"
#include "kernel_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int B, T, C, NH, OC, V, Vp, maxT;
} shapes;

// Odd shapes: T not a multiple of the warp, OC not of 16, V < Vp.
static const shapes configs[] = {
    {2, 5, 48, 3, 40, 100, 128, 8},
    {1, 70, 64, 4, 130, 300, 384, 70},
};

#define P {1, 0}  // present
#define A {0, 0}  // absent (an optional ref)
#define F GT_KC_F32
#define FP GT_KC_F32_POS
#define I GT_KC_I32_TOK
#define U GT_KC_U16_TOK
#define D GT_KC_F64

typedef struct {
    gt_kcase *v;
    size_t n, cap;
    int config;
    uint64_t pad;
} list;

static void add(list *l, gt_op op, const gt_kc_kind *kinds, int nk, int64_t V, int alias,
                int alias_of)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        assert_non_null(l->v);
    }
    gt_kcase *c = &l->v[l->n++];
    memset(c, 0, sizeof *c);
    c->op = op;
    memcpy(c->kinds, kinds, sizeof(gt_kc_kind) * (size_t)nk);
    c->V = V;
    c->pad = l->pad;
    c->alias = alias;
    c->alias_of = alias_of;
    c->config = l->config;
}

#define ADD(op, V, ...)                                                                   \
    do {                                                                                  \
        const gt_kc_kind k_[] = {__VA_ARGS__};                                            \
        add(l, (op), k_, (int)(sizeof k_ / sizeof k_[0]), (V), -1, -1);                   \
    } while (0)

static void add_config(list *l, const shapes *s)
{
    int64_t N = (int64_t)s->B * s->T, n4 = N * 4 * s->C;
    gt_op enc = {.kind = GT_OP_ENCODER_FWD, .refs = {P, P, P, P},
                 .ints = {s->B, s->T, s->C, s->V, s->Vp, s->maxT}};
    ADD(enc, s->V, F, I, F, F);
    enc.kind = GT_OP_ENCODER_BWD;
    ADD(enc, s->V, F, F, F, I);
    gt_op ln = {.kind = GT_OP_LAYERNORM_FWD, .refs = {P, P, P, P, P, P}, .ints = {N, s->C}};
    ADD(ln, 0, F, F, F, F, F, F);
    gt_op lb = {.kind = GT_OP_LAYERNORM_BWD, .refs = {P, P, P, P, P, P, P, P}, .ints = {N, s->C}};
    ADD(lb, 0, F, F, F, F, F, F, F, FP);  // rstd > 0
    for (int bias = 0; bias <= 1; bias++) {
        gt_dref b = bias ? (gt_dref)P : (gt_dref)A;
        gt_op mf = {.kind = GT_OP_MATMUL_FWD, .refs = {P, P, P, b}, .ints = {N, s->C, s->OC}};
        ADD(mf, 0, F, F, F, F);
        for (int acc = 0; acc <= 1; acc++) {
            gt_op mb = {.kind = GT_OP_MATMUL_BWD, .refs = {P, P, b, P, P, P},
                        .ints = {N, s->C, s->OC, acc}};
            ADD(mb, 0, F, F, F, F, F, F);
        }
    }
    gt_op af = {.kind = GT_OP_ATTENTION_FWD, .refs = {P, P, P}, .ints = {s->B, s->T, s->C, s->NH}};
    ADD(af, 0, F, F, F);
    // att random everywhere, above the diagonal too: the result must not depend on it
    gt_op ab = {.kind = GT_OP_ATTENTION_BWD, .refs = {P, P, P, P},
                .ints = {s->B, s->T, s->C, s->NH}};
    ADD(ab, 0, F, F, F, FP);
    gt_op gf = {.kind = GT_OP_GELU_FWD, .refs = {P, P}, .ints = {n4}};
    ADD(gf, 0, F, F);
    gt_op gb = {.kind = GT_OP_GELU_BWD, .refs = {P, P, P}, .ints = {n4}};
    ADD(gb, 0, F, F, F);
    {
        const gt_kc_kind k[] = {F, F, F};
        add(l, gb, k, 3, 0, 0, 2);  // dinp is dout, as the trainer calls it
    }
    gt_op rf = {.kind = GT_OP_RESIDUAL_FWD, .refs = {P, P, P}, .ints = {n4}};
    ADD(rf, 0, F, F, F);
    gt_op rb = {.kind = GT_OP_RESIDUAL_BWD, .refs = {P, P, P}, .ints = {n4}};
    ADD(rb, 0, F, F, F);
    for (int grad = 0; grad <= 1; grad++) {
        gt_op sx = {.kind = GT_OP_SOFTMAX_XENT, .refs = {P, P, P},
                    .ints = {s->B, s->T, s->V, s->Vp, grad}, .floats = {1.0f / (float)N}};
        ADD(sx, s->V, F, F, I);
    }
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {P, P}, .ints = {40000 + 7}};
    ADD(ss, 0, D, F);
    gt_op aw = {.kind = GT_OP_ADAMW, .refs = {P, P, P, P}, .ints = {n4},
                .floats = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f}};
    ADD(aw, 0, F, F, FP, F);  // v >= 0
    gt_op tg = {.kind = GT_OP_TOKENS_GATHER, .refs = {P, P, P}, .ints = {N, 3, s->V}};
    ADD(tg, s->V, I, I, U);
    gt_op tc = {.kind = GT_OP_TOKENS_CHECK, .refs = {P}, .ints = {N, s->V}};
    ADD(tc, s->V, U);
}

// Heavy token repeats (V = 3 over 256 positions): the encoder gradient's grouping by token
// (the cuda kernel sorts positions by token) must keep the cpu's b, t order in every group.
static void add_repeats(list *l)
{
    const shapes s = {4, 64, 32, 4, 8, 3, 8, 64};
    gt_op enc = {.kind = GT_OP_ENCODER_BWD, .refs = {P, P, P, P},
                 .ints = {s.B, s.T, s.C, s.V, s.Vp, s.maxT}};
    ADD(enc, s.V, F, F, F, I);
}

void gt_kcases(gt_kcase **out, size_t *n)
{
    list l = {0};
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        for (uint64_t pad = 0; pad <= 4; pad += 4) {  // 4: unaligned refs (cuBLAS, not Lt)
            l.config = (int)ci;
            l.pad = pad;
            add_config(&l, &configs[ci]);
        }
    }
    l.config = 2;
    l.pad = 0;
    add_repeats(&l);
    *out = l.v;
    *n = l.n;
}

static uint32_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

static float rndf(uint64_t *s) { return (float)(rnd(s) >> 8) / 16777216.0f * 2.0f - 1.0f; }

void gt_kcase_inputs_make(const gt_kcase *c, uint64_t *rng, gt_kcase_inputs *in)
{
    memset(in, 0, sizeof *in);
    GT_ASSERT_OK(gt_op_ref_sizes(&c->op, in->bytes, &in->nrefs));
    for (int i = 0; i < in->nrefs; i++) {
        bool absent = gt_op_ref_optional(c->op.kind, i) && c->op.refs[i].buf == 0;
        if (in->bytes[i] == 0 || absent || i == c->alias) {
            continue;
        }
        gt_kc_kind k = c->kinds[i];
        in->off[i] = k == GT_KC_F64 ? 0 : c->pad;  // a double needs 8-byte alignment
        in->len[i] = in->bytes[i] + in->off[i];
        in->buf[i] = calloc(1, in->len[i]);
        assert_non_null(in->buf[i]);
        uint8_t *d = in->buf[i] + in->off[i];
        if (k == GT_KC_U16_TOK) {
            for (uint64_t j = 0; j < in->bytes[i] / 2; j++) {
                uint16_t t = (uint16_t)(rnd(rng) % (uint32_t)c->V);
                memcpy(d + 2 * j, &t, 2);
            }
            continue;
        }
        if (k == GT_KC_F64) {
            continue;  // an output only: starts as zeros
        }
        for (uint64_t j = 0; j < in->bytes[i] / 4; j++) {
            float f = rndf(rng);
            if (k == GT_KC_F32_POS) {
                f = fabsf(f) + 0.01f;
            }
            if (k == GT_KC_I32_TOK) {
                int32_t t = (int32_t)(rnd(rng) % (uint32_t)c->V);
                memcpy(d + 4 * j, &t, 4);
            } else {
                memcpy(d + 4 * j, &f, 4);
            }
        }
    }
}

void gt_kcase_inputs_free(gt_kcase_inputs *in)
{
    for (int i = 0; i < GT_OP_MAX_REFS; i++) {
        free(in->buf[i]);
    }
    memset(in, 0, sizeof *in);
}

void gt_kcase_name(const gt_kcase *c, char *out, size_t cap)
{
    snprintf(out, cap, "%s (config %d, pad %llu%s)", gt_op_name(c->op.kind), c->config,
             (unsigned long long)c->pad, c->alias >= 0 ? ", aliased" : "");
}

double gt_kcase_compare(const gt_kcase *c, int i, const uint8_t *a, const uint8_t *b,
                        uint64_t bytes, double abs_tol, double rel_tol, const char *a_name,
                        const char *b_name)
{
    char name[96];
    gt_kcase_name(c, name, sizeof name);
    gt_kc_kind k = c->kinds[i];
    if (k == GT_KC_I32_TOK || k == GT_KC_U16_TOK) {
        if (memcmp(a, b, bytes) != 0) {
            fail_msg("%s ref %d: integers differ", name, i);
        }
        return 0.0;
    }
    if (k == GT_KC_F64) {
        double x = 0, y = 0;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (!(fabs(x - y) <= 1e-9 * fabs(x))) {
            fail_msg("%s ref %d: %s %.17g %s %.17g", name, i, a_name, x, b_name, y);
        }
        return fabs(x - y);
    }
    double maxref = 0, maxerr = 0;
    for (uint64_t j = 0; j < bytes / 4; j++) {
        float x = 0;
        memcpy(&x, a + 4 * j, 4);
        maxref = fmax(maxref, fabs(x));
    }
    for (uint64_t j = 0; j < bytes / 4; j++) {
        float x = 0, y = 0;
        memcpy(&x, a + 4 * j, 4);
        memcpy(&y, b + 4 * j, 4);
        double err = fabs((double)x - y);
        maxerr = fmax(maxerr, err);
        if (!(err <= abs_tol * maxref + rel_tol * fabs(x))) {
            fail_msg("%s ref %d [%llu]: %s %.9g %s %.9g (max |%s| %.3g)", name, i,
                     (unsigned long long)j, a_name, x, b_name, y, a_name, maxref);
        }
    }
    return maxerr;
}
