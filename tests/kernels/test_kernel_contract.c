// kernels/: the cross-backend contract without a GPU. Every op case that test_cuda_ops runs on
// a GPU (testlib/kernel_cases.h: the same list, the same random inputs, att random above the
// diagonal too) runs here through the cpu kernels (gt_ops_cpu_run on host memory) and through
// a plain-loop reference of the op's documented contract (kernels.h, op_table.c, docs/train.md),
// written below in double from the formulas, not from the kernels. Every ref is compared, the
// inputs too. A cpu kernel that drifts from the contract the cuda kernels implement (as the
// attention backward's dv once did, reading att above the diagonal) fails in CI.
//
// Tolerance: |cpu - ref| <= 5e-6 * max|ref over the ref| + 1e-4 * |ref| per element. The cpu
// computes in fp32 (reductions of at most 384 terms here, rounding ~1e-7 each, plus the
// polynomial exp's ~1 ulp), the reference in double; the largest differences seen are printed
// and are ~1e-6 of the ref's scale. Integers must be equal; the f64 sum of squares within 1e-9.
#include "testlib.h"
#include "kernel_cases.h"

#include <gputravel/kernels.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ABS_TOL 5e-6
#define REL_TOL 1e-4

// ---- host memory as the kernels' buffers: dref.buf = ref index + 1 ----------------------------

typedef struct {
    uint8_t *buf[GT_OP_MAX_REFS];
    uint64_t len[GT_OP_MAX_REFS];
} host_mem;

static gt_err host_resolve(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    host_mem *m = ctx;
    GT_ENSURE(ref.buf >= 1 && ref.buf <= GT_OP_MAX_REFS && m->buf[ref.buf - 1] != NULL, GT_E_ARG,
              "test: no buffer %llu", (unsigned long long)ref.buf);
    uint64_t len = m->len[ref.buf - 1];
    GT_ENSURE(ref.offset <= len && bytes <= len - ref.offset, GT_E_ARG, "test: ref out of range");
    *ptr = m->buf[ref.buf - 1] + ref.offset;
    return GT_OK;
}

// ---- the reference: each op's contract as plain loops in double --------------------------------

static void ref_encoder_fwd(const gt_encoder_fwd_args *a)
{
    for (int b = 0; b < a->B; b++) {
        for (int t = 0; t < a->T; t++) {
            int bt = b * a->T + t, tok = a->inp[bt];
            for (int c = 0; c < a->C; c++) {
                a->out[(size_t)bt * a->C + c] =
                    (float)((double)a->wte[(size_t)tok * a->C + c] + a->wpe[(size_t)t * a->C + c]);
            }
        }
    }
}

static void ref_encoder_bwd(const gt_encoder_bwd_args *a)
{
    // dwte[v] += sum of dout rows whose token is v; dwpe[t] += sum over b
    for (int v = 0; v < a->Vp; v++) {
        for (int c = 0; c < a->C; c++) {
            double s = 0.0;
            for (int bt = 0; bt < a->B * a->T; bt++) {
                s += a->inp[bt] == v ? a->dout[(size_t)bt * a->C + c] : 0.0;
            }
            a->dwte[(size_t)v * a->C + c] = (float)(a->dwte[(size_t)v * a->C + c] + s);
        }
    }
    for (int t = 0; t < a->T; t++) {
        for (int c = 0; c < a->C; c++) {
            double s = 0.0;
            for (int b = 0; b < a->B; b++) {
                s += a->dout[((size_t)b * a->T + t) * a->C + c];
            }
            a->dwpe[(size_t)t * a->C + c] = (float)(a->dwpe[(size_t)t * a->C + c] + s);
        }
    }
}

#define LN_EPS 1e-5

static void ref_layernorm_fwd(const gt_layernorm_fwd_args *a)
{
    for (int n = 0; n < a->N; n++) {
        const float *x = a->inp + (size_t)n * a->C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < a->C; c++) {
            m += x[c];
        }
        m /= a->C;
        for (int c = 0; c < a->C; c++) {
            v += (x[c] - m) * (x[c] - m);
        }
        v /= a->C;  // biased variance
        double s = 1.0 / sqrt(v + LN_EPS);
        for (int c = 0; c < a->C; c++) {
            a->out[(size_t)n * a->C + c] = (float)((x[c] - m) * s * a->weight[c] + a->bias[c]);
        }
        a->mean[n] = (float)m;
        a->rstd[n] = (float)s;
    }
}

// The gradient of out = norm * w + b, norm = (x - mean) * rstd, with mean and rstd given (as
// the forward saved them): dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)).
static void ref_layernorm_bwd(const gt_layernorm_bwd_args *a)
{
    for (int c = 0; c < a->C; c++) {
        double dw = 0.0, db = 0.0;
        for (int n = 0; n < a->N; n++) {
            double d = a->dout[(size_t)n * a->C + c];
            double norm = (a->inp[(size_t)n * a->C + c] - (double)a->mean[n]) * a->rstd[n];
            dw += norm * d;
            db += d;
        }
        a->dweight[c] = (float)(a->dweight[c] + dw);
        a->dbias[c] = (float)(a->dbias[c] + db);
    }
    for (int n = 0; n < a->N; n++) {
        double m1 = 0.0, m2 = 0.0, s = a->rstd[n];
        for (int c = 0; c < a->C; c++) {
            double norm = (a->inp[(size_t)n * a->C + c] - (double)a->mean[n]) * s;
            double dn = (double)a->weight[c] * a->dout[(size_t)n * a->C + c];
            m1 += dn;
            m2 += dn * norm;
        }
        m1 /= a->C;
        m2 /= a->C;
        for (int c = 0; c < a->C; c++) {
            double norm = (a->inp[(size_t)n * a->C + c] - (double)a->mean[n]) * s;
            double dn = (double)a->weight[c] * a->dout[(size_t)n * a->C + c];
            float *di = &a->dinp[(size_t)n * a->C + c];
            *di = (float)(*di + (dn - m1 - norm * m2) * s);
        }
    }
}

static void ref_matmul_fwd(const gt_matmul_fwd_args *a)
{
    for (int n = 0; n < a->N; n++) {
        for (int o = 0; o < a->OC; o++) {
            double s = a->bias != NULL ? a->bias[o] : 0.0;
            for (int c = 0; c < a->C; c++) {
                s += (double)a->inp[(size_t)n * a->C + c] * a->weight[(size_t)o * a->C + c];
            }
            a->out[(size_t)n * a->OC + o] = (float)s;
        }
    }
}

static void ref_matmul_bwd(const gt_matmul_bwd_args *a)
{
    for (int n = 0; n < a->N; n++) {
        for (int c = 0; c < a->C; c++) {
            double s = a->dinp_accumulate ? a->dinp[(size_t)n * a->C + c] : 0.0;
            for (int o = 0; o < a->OC; o++) {
                s += (double)a->dout[(size_t)n * a->OC + o] * a->weight[(size_t)o * a->C + c];
            }
            a->dinp[(size_t)n * a->C + c] = (float)s;
        }
    }
    for (int o = 0; o < a->OC; o++) {
        for (int c = 0; c < a->C; c++) {
            double s = 0.0;
            for (int n = 0; n < a->N; n++) {
                s += (double)a->dout[(size_t)n * a->OC + o] * a->inp[(size_t)n * a->C + c];
            }
            a->dweight[(size_t)o * a->C + c] = (float)(a->dweight[(size_t)o * a->C + c] + s);
        }
        if (a->dbias != NULL) {
            double s = 0.0;
            for (int n = 0; n < a->N; n++) {
                s += a->dout[(size_t)n * a->OC + o];
            }
            a->dbias[o] = (float)(a->dbias[o] + s);
        }
    }
}

// q, k, v of head h at (b, t): inp (B,T,3C), each (NH, hs) inside its C columns
static const float *qkv(const float *inp, int B3C_T, int C, int b, int t, int which, int h,
                        int hs)
{
    (void)B3C_T;
    return inp + ((size_t)b * (size_t)B3C_T + t) * 3 * (size_t)C + (size_t)which * C +
           (size_t)h * hs;
}

static void ref_attention_fwd(const gt_attention_fwd_args *a)
{
    int T = a->T, C = a->C, hs = C / a->NH;
    double scale = 1.0 / sqrt((double)hs);
    double *p = malloc(sizeof(double) * (size_t)T);
    assert_non_null(p);
    for (int b = 0; b < a->B; b++) {
        for (int h = 0; h < a->NH; h++) {
            float *att = a->att + ((size_t)b * a->NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = qkv(a->inp, T, C, b, t, 0, h, hs);
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv(a->inp, T, C, b, t2, 1, h, hs);
                    double d = 0.0;
                    for (int e = 0; e < hs; e++) {
                        d += (double)q[e] * k[e];
                    }
                    p[t2] = d * scale;
                    mx = fmax(mx, p[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    p[t2] = exp(p[t2] - mx);
                    sum += p[t2];
                }
                for (int t2 = 0; t2 < T; t2++) {
                    att[(size_t)t * T + t2] = t2 <= t ? (float)(p[t2] / sum) : 0.0f;
                }
                float *o = a->out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int e = 0; e < hs; e++) {
                    double s = 0.0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        s += p[t2] / sum * qkv(a->inp, T, C, b, t2, 2, h, hs)[e];
                    }
                    o[e] = (float)s;
                }
            }
        }
    }
    free(p);
}

// Causal: att[t][t2] is read only for t2 <= t, whatever it holds above the diagonal.
static void ref_attention_bwd(const gt_attention_bwd_args *a)
{
    int T = a->T, C = a->C, hs = C / a->NH;
    double scale = 1.0 / sqrt((double)hs);
    size_t n3 = (size_t)a->B * T * 3 * C;
    double *acc = calloc(n3, sizeof(double));
    double *datt = malloc(sizeof(double) * (size_t)T);
    assert_true(acc != NULL && datt != NULL);
    for (int b = 0; b < a->B; b++) {
        for (int h = 0; h < a->NH; h++) {
            const float *att = a->att + ((size_t)b * a->NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *dy = a->dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                const float *q = qkv(a->inp, T, C, b, t, 0, h, hs);
                double dot = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv(a->inp, T, C, b, t2, 2, h, hs);
                    double d = 0.0;
                    for (int e = 0; e < hs; e++) {
                        d += (double)dy[e] * v[e];
                    }
                    datt[t2] = d;
                    dot += (double)att[(size_t)t * T + t2] * d;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    double at = att[(size_t)t * T + t2];
                    double dpre = at * (datt[t2] - dot) * scale;
                    const float *k = qkv(a->inp, T, C, b, t2, 1, h, hs);
                    size_t iq = (size_t)(qkv(a->inp, T, C, b, t, 0, h, hs) - a->inp);
                    size_t ik = (size_t)(k - a->inp), iv = ik + (size_t)C;
                    for (int e = 0; e < hs; e++) {
                        acc[iq + e] += dpre * k[e];
                        acc[ik + e] += dpre * q[e];
                        acc[iv + e] += at * dy[e];  // dv = mask(att)^T dout
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < n3; i++) {
        a->dinp[i] = (float)acc[i];
    }
    free(acc);
    free(datt);
}

#define GELU_K 0.044715
static double gelu_u(double x) { return sqrt(2.0 / M_PI) * (x + GELU_K * x * x * x); }

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3): the tanh form as GPT-2
// defines it (the kernels may evaluate it as x sigmoid(2u), the same function).
static void ref_gelu_fwd(const gt_gelu_fwd_args *a)
{
    for (int i = 0; i < a->N; i++) {
        double x = a->inp[i];
        a->out[i] = (float)(0.5 * x * (1.0 + tanh(gelu_u(x))));
    }
}

static void ref_gelu_bwd(const gt_gelu_bwd_args *a)
{
    for (int i = 0; i < a->N; i++) {  // element by element: dinp may be dout
        double x = a->inp[i], th = tanh(gelu_u(x));
        double du = sqrt(2.0 / M_PI) * (1.0 + 3.0 * GELU_K * x * x);
        double local = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
        a->dinp[i] = (float)(local * a->dout[i]);
    }
}

static void ref_residual_fwd(const gt_residual_fwd_args *a)
{
    for (int i = 0; i < a->N; i++) {
        a->out[i] = (float)((double)a->inp1[i] + a->inp2[i]);
    }
}

static void ref_residual_bwd(const gt_residual_bwd_args *a)
{
    for (int i = 0; i < a->N; i++) {
        a->dinp1[i] = (float)((double)a->dinp1[i] + a->dout[i]);
        a->dinp2[i] = (float)((double)a->dinp2[i] + a->dout[i]);
    }
}

static void ref_softmax_xent(const gt_softmax_xent_args *a)
{
    for (int n = 0; n < a->B * a->T; n++) {
        float *l = a->logits + (size_t)n * a->Vp;
        int tgt = a->targets[n];
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < a->V; i++) {
            mx = fmax(mx, l[i]);
        }
        for (int i = 0; i < a->V; i++) {
            sum += exp(l[i] - mx);
        }
        a->losses[n] = (float)(log(sum) + mx - l[tgt]);
        if (a->grad) {
            for (int i = 0; i < a->Vp; i++) {
                double p = i < a->V ? exp(l[i] - mx) / sum : 0.0;
                double g = i < a->V ? a->dloss * (p - (i == tgt ? 1.0 : 0.0)) : 0.0;
                l[i] = (float)g;
            }
        }
    }
}

static void ref_sumsq(const gt_sumsq_args *a)
{
    long double s = 0.0L;
    for (int i = 0; i < a->N; i++) {
        s += (long double)a->x[i] * a->x[i];
    }
    *a->out = (double)s;
}

static void ref_adamw(const gt_adamw_args *a)
{
    for (int i = 0; i < a->N; i++) {
        double g = (double)a->grads[i] * a->grad_scale;
        double m = a->beta1 * (double)a->m[i] + (1.0 - a->beta1) * g;
        double v = a->beta2 * (double)a->v[i] + (1.0 - a->beta2) * g * g;
        double p = a->params[i];
        p -= a->lr * ((m / a->bc1) / (sqrt(v / a->bc2) + a->eps) + a->weight_decay * p);
        a->m[i] = (float)m;
        a->v[i] = (float)v;
        a->params[i] = (float)p;
    }
}

static void ref_tokens_gather(const gt_tokens_gather_args *a)
{
    for (int i = 0; i < a->N; i++) {
        a->inp[i] = a->data[a->offset + i];
        a->tgt[i] = a->data[a->offset + i + 1];
    }
}

static void reference(uint32_t kind, const gt_op_args *u)
{
    switch (kind) {
    case GT_OP_ENCODER_FWD: ref_encoder_fwd(&u->encoder_fwd); break;
    case GT_OP_ENCODER_BWD: ref_encoder_bwd(&u->encoder_bwd); break;
    case GT_OP_LAYERNORM_FWD: ref_layernorm_fwd(&u->layernorm_fwd); break;
    case GT_OP_LAYERNORM_BWD: ref_layernorm_bwd(&u->layernorm_bwd); break;
    case GT_OP_MATMUL_FWD: ref_matmul_fwd(&u->matmul_fwd); break;
    case GT_OP_MATMUL_BWD: ref_matmul_bwd(&u->matmul_bwd); break;
    case GT_OP_ATTENTION_FWD: ref_attention_fwd(&u->attention_fwd); break;
    case GT_OP_ATTENTION_BWD: ref_attention_bwd(&u->attention_bwd); break;
    case GT_OP_GELU_FWD: ref_gelu_fwd(&u->gelu_fwd); break;
    case GT_OP_GELU_BWD: ref_gelu_bwd(&u->gelu_bwd); break;
    case GT_OP_RESIDUAL_FWD: ref_residual_fwd(&u->residual_fwd); break;
    case GT_OP_RESIDUAL_BWD: ref_residual_bwd(&u->residual_bwd); break;
    case GT_OP_SOFTMAX_XENT: ref_softmax_xent(&u->softmax_xent); break;
    case GT_OP_SUMSQ: ref_sumsq(&u->sumsq); break;
    case GT_OP_ADAMW: ref_adamw(&u->adamw); break;
    case GT_OP_TOKENS_GATHER: ref_tokens_gather(&u->tokens_gather); break;
    case GT_OP_TOKENS_CHECK: break;  // only refuses: every token here is < V
    default: fail_msg("no reference for %s: add one with its case", gt_op_name(kind));
    }
}

// ---- the test ---------------------------------------------------------------------------------

static void copy_inputs(const gt_kcase_inputs *in, host_mem *m, gt_op *op, const gt_kcase *c)
{
    *op = c->op;
    for (int i = 0; i < in->nrefs; i++) {
        m->buf[i] = NULL;
        op->refs[i] = (gt_dref){0, 0};
        if (in->buf[i] == NULL) {
            continue;
        }
        m->buf[i] = malloc(in->len[i]);
        assert_non_null(m->buf[i]);
        memcpy(m->buf[i], in->buf[i], in->len[i]);
        m->len[i] = in->len[i];
        op->refs[i] = (gt_dref){(uint64_t)i + 1, in->off[i]};
    }
    if (c->alias >= 0) {
        op->refs[c->alias] = op->refs[c->alias_of];
    }
}

static void host_mem_free(host_mem *m)
{
    for (int i = 0; i < GT_OP_MAX_REFS; i++) {
        free(m->buf[i]);
        m->buf[i] = NULL;
    }
}

typedef struct {
    double err[GT_OP_COUNT_];  // largest |cpu - ref| / max|ref| per op kind
} worst;

static void run_case(const gt_kcase *c, uint64_t *rng, worst *w)
{
    gt_kcase_inputs in;
    gt_kcase_inputs_make(c, rng, &in);
    host_mem cpu = {0}, ref = {0};
    gt_op ocpu, oref;
    copy_inputs(&in, &cpu, &ocpu, c);
    copy_inputs(&in, &ref, &oref, c);
    GT_ASSERT_OK(gt_ops_cpu_run(&ocpu, host_resolve, &cpu));
    gt_op_args args;
    GT_ASSERT_OK(gt_op_decode(&oref, host_resolve, &ref, &args));
    reference(c->op.kind, &args);
    for (int i = 0; i < in.nrefs; i++) {
        if (in.buf[i] == NULL) {
            continue;
        }
        const uint8_t *r = ref.buf[i] + in.off[i], *p = cpu.buf[i] + in.off[i];
        double e = gt_kcase_compare(c, i, r, p, in.bytes[i], ABS_TOL, REL_TOL, "ref", "cpu");
        double scale = 0.0;
        for (uint64_t j = 0; c->kinds[i] != GT_KC_F64 && j < in.bytes[i] / 4; j++) {
            float x = 0;
            memcpy(&x, r + 4 * j, 4);
            scale = fmax(scale, fabs(x));
        }
        if (scale > 0 && e / scale > w->err[c->op.kind]) {
            w->err[c->op.kind] = e / scale;
        }
    }
    host_mem_free(&cpu);
    host_mem_free(&ref);
    gt_kcase_inputs_free(&in);
}

static void every_cuda_case(void **state)
{
    (void)state;
    gt_kcase *cases = NULL;
    size_t n = 0;
    gt_kcases(&cases, &n);
    assert_true(n > 0);
    worst w = {0};
    bool seen[GT_OP_COUNT_] = {0};
    uint64_t rng = GT_KCASE_SEED;
    for (size_t i = 0; i < n; i++) {
        run_case(&cases[i], &rng, &w);
        seen[cases[i].op.kind] = true;
    }
    // every op kind the training step runs has a case (the release ops have their own tests)
    for (uint32_t k = GT_OP_ENCODER_FWD; k <= GT_OP_TOKENS_CHECK; k++) {
        if (!seen[k]) {
            fail_msg("no contract case for %s", gt_op_name(k));
        }
        print_message("%-22s max |cpu - ref| / max|ref| = %.3g\n", gt_op_name(k), w.err[k]);
    }
    print_message("%zu cases\n", n);
    free(cases);
}

// The reference and the comparison can fail: the attention backward's reference with att
// above the diagonal included (the cpu kernel's old dv) differs beyond the tolerance.
static void upper_triangle_would_be_caught(void **state)
{
    (void)state;
    gt_kcase *cases = NULL;
    size_t n = 0;
    gt_kcases(&cases, &n);
    uint64_t rng = GT_KCASE_SEED;
    const gt_kcase *c = NULL;
    gt_kcase_inputs in;
    for (size_t i = 0; i < n && c == NULL; i++) {
        gt_kcase_inputs_make(&cases[i], &rng, &in);  // consume the stream up to the case
        if (cases[i].op.kind == GT_OP_ATTENTION_BWD) {
            c = &cases[i];
        } else {
            gt_kcase_inputs_free(&in);
        }
    }
    assert_non_null(c);
    host_mem ref = {0};
    gt_op oref;
    copy_inputs(&in, &ref, &oref, c);
    gt_op_args args;
    GT_ASSERT_OK(gt_op_decode(&oref, host_resolve, &ref, &args));
    const gt_attention_bwd_args *a = &args.attention_bwd;
    ref_attention_bwd(a);
    // dv over the whole att (t2 > t too) for (b, h) = (0, 0), element (t2 = 0, e = 0)
    int T = a->T, C = a->C;
    double full = 0.0;
    for (int t = 0; t < T; t++) {
        full += (double)a->att[(size_t)t * T] * a->dout[(size_t)t * C];
    }
    double masked = a->dinp[2 * (size_t)C];  // row t2 = 0: dv from t >= 0, i.e. every row
    // row t2 = 0 is below the diagonal for every t: equal; the last row differs
    assert_true(fabs(full - masked) <= 1e-4 * fabs(full) + 1e-5);
    double full_last = 0.0;
    int t2 = T - 1;
    for (int t = 0; t < T; t++) {
        full_last += (double)a->att[(size_t)t * T + t2] * a->dout[(size_t)t * C];
    }
    double masked_last = a->dinp[((size_t)t2 * 3 + 2) * C];
    assert_true(fabs(full_last - masked_last) > 1e-2);
    host_mem_free(&ref);
    gt_kcase_inputs_free(&in);
    free(cases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_cuda_case),
        cmocka_unit_test(upper_triangle_would_be_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
