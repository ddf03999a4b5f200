// CPU kernels (llm.c style: outputs first, then inputs, then shapes) and gt_ops_cpu_run, which
// checks an op's refs against its shapes and then runs the kernel. No backend state lives here:
// the cpu backend and devd both call gt_ops_cpu_run with their own resolver.
//
// Legend: B = batch, T = time, C = channels, NH = heads, hs = C/NH head size, OC = output
// channels, N = rows (B*T), V = real vocab, Vp = padded vocab, maxT = positions.
//
// Parallelism: OpenMP over independent rows/heads/channel blocks; every reduction runs in an
// order fixed by the shapes, never by the thread count or schedule, so results are bit-identical
// run to run. Matmuls call single-threaded OpenBLAS sgemm on per-thread slices of the output.
#include <gputravel/device.h>

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ops.h"

// OpenBLAS (pthread build): its own pool would fight OpenMP for the cores, so it runs on one
// thread inside our parallel regions.
extern void openblas_set_num_threads(int num_threads);

void gt_ops_cpu_set_threads(int threads)
{
    openblas_set_num_threads(1);
    if (threads > 0) {
        omp_set_num_threads(threads);
    }
}

// Splits [0, n) into nth slices aligned to `align`; slice i is [*lo, *hi).
static void slice(int n, int nth, int i, int align, int *lo, int *hi)
{
    int per = (n + nth - 1) / nth;
    per = (per + align - 1) / align * align;
    int a = i * per, b = a + per;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

// ---- encoder --------------------------------------------------------------------------------

// out is (B,T,C); inp i32 (B,T); wte (Vp,C); wpe (maxT,C)
static void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                            int B, int T, int C)
{
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        float *o = out + (size_t)bt * C;
        const float *we = wte + (size_t)inp[bt] * C;
        const float *pe = wpe + (size_t)t * C;
        for (int c = 0; c < C; c++) {
            o[c] = we[c] + pe[c];
        }
    }
}

// dwte (Vp,C) +=, dwpe (maxT,C) +=; dout (B,T,C). Parallel over channel blocks so that rows
// sharing a token never race and the summation order is b, t for every thread count.
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                             int B, int T, int C)
{
#pragma omp parallel
    {
        int lo = 0, hi = 0;
        slice(C, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *dw = dwte + (size_t)inp[b * T + t] * C;
                float *dp = dwpe + (size_t)t * C;
                for (int c = lo; c < hi; c++) {
                    dw[c] += d[c];
                    dp[c] += d[c];
                }
            }
        }
    }
}

// ---- layernorm ------------------------------------------------------------------------------

#define LN_EPS 1e-5f

// out (N,C)=, mean (N)=, rstd (N)=; inp (N,C); weight, bias (C)
static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) {
            m += x[c];
        }
        m /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            v += d * d;
        }
        v /= C;
        float s = 1.0f / sqrtf(v + LN_EPS);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            o[c] = (s * (x[c] - m)) * weight[c] + bias[c];
        }
        mean[n] = m;
        rstd[n] = s;
    }
}

// dinp (N,C)+=, dweight, dbias (C)+=; dout, inp (N,C); weight (C); mean, rstd (N)
static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const float *mean,
                               const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C;
        const float *x = inp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float *di = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = weight[c] * d[c];
            di[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
    // Parameter gradients: each thread owns a block of channels and sums rows in order.
#pragma omp parallel
    {
        int lo = 0, hi = 0;
        slice(C, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * C;
            const float *x = inp + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            for (int c = lo; c < hi; c++) {
                dbias[c] += d[c];
                dweight[c] += (x[c] - m) * s * d[c];
            }
        }
    }
}

// ---- matmul ---------------------------------------------------------------------------------

// out (N,OC)= inp (N,C) @ weight(OC,C)^T + bias (OC, may be NULL)
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                           int N, int C, int OC)
{
#pragma omp parallel
    {
        int lo = 0, hi = 0;
        slice(OC, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        if (hi > lo) {
            float beta = 0.0f;
            if (bias != NULL) {
                for (int n = 0; n < N; n++) {
                    memcpy(out + (size_t)n * OC + lo, bias + lo, sizeof(float) * (size_t)(hi - lo));
                }
                beta = 1.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, hi - lo, C, 1.0f, inp, C,
                        weight + (size_t)lo * C, C, beta, out + lo, OC);
        }
    }
}

// dinp (N,C) = or +=, dweight (OC,C)+=, dbias (OC)+= (may be NULL); dout (N,OC); inp (N,C);
// weight (OC,C)
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC,
                            int dinp_accumulate)
{
#pragma omp parallel
    {
        int nth = omp_get_num_threads(), me = omp_get_thread_num();
        int lo = 0, hi = 0;
        // dinp = dout @ weight, rows split
        slice(N, nth, me, 1, &lo, &hi);
        if (hi > lo) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, hi - lo, C, OC, 1.0f,
                        dout + (size_t)lo * OC, OC, weight, C, dinp_accumulate ? 1.0f : 0.0f,
                        dinp + (size_t)lo * C, C);
        }
        // dweight += dout^T @ inp, output rows (OC) split
        slice(OC, nth, me, 16, &lo, &hi);
        if (hi > lo) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, C, N, 1.0f, dout + lo,
                        OC, inp, C, 1.0f, dweight + (size_t)lo * C, C);
            if (dbias != NULL) {
                for (int n = 0; n < N; n++) {
                    const float *d = dout + (size_t)n * OC;
                    for (int o = lo; o < hi; o++) {
                        dbias[o] += d[o];
                    }
                }
            }
        }
    }
}

// ---- attention ------------------------------------------------------------------------------

// out (B,T,C)=, att (B,NH,T,T)= softmax weights (0 above the diagonal); inp (B,T,3C) holds
// q, k, v, each (B,T,NH,hs) inside its C columns.
static void attention_forward(float *out, float *att, const float *inp, int B, int T, int C,
                              int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const float *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = inp + ((size_t)b * T + t2) * C3 + C + h * hs;
                    float v = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        v += q[i] * k[i];
                    }
                    v *= scale;
                    a[t2] = v;
                    if (v > maxv) {
                        maxv = v;
                    }
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    float e = expf(a[t2] - maxv);
                    a[t2] = e;
                    sum += e;
                }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 < T; t2++) {
                    a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
                }
                float *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    o[i] = 0.0f;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = inp + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float w = a[t2];
                    for (int i = 0; i < hs; i++) {
                        o[i] += w * v[i];
                    }
                }
            }
        }
    }
}

// dinp (B,T,3C)=; dout (B,T,C); inp (B,T,3C); att (B,NH,T,T). One (b,h) per task: the keys
// and values a head reads belong to it alone, so dk/dv accumulate without races.
static void attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                               int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *datt = malloc(sizeof(float) * (size_t)T);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    float *row = dinp + ((size_t)b * T + t) * C3 + h * hs;
                    for (int i = 0; i < hs; i++) {
                        row[i] = row[C + i] = row[2 * C + i] = 0.0f;
                    }
                }
                for (int t = 0; t < T; t++) {
                    const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                    const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                    const float *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                    float *dq = dinp + ((size_t)b * T + t) * C3 + h * hs;
                    // datt = dout . v ; dv += att * dout
                    float dot = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *v = inp + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                        float *dv = dinp + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                        float s = 0.0f;
                        for (int i = 0; i < hs; i++) {
                            s += d[i] * v[i];
                            dv[i] += a[t2] * d[i];
                        }
                        datt[t2] = s;
                        dot += a[t2] * s;
                    }
                    // softmax backward, then through the scaled dot product
                    for (int t2 = 0; t2 <= t; t2++) {
                        float dpre = a[t2] * (datt[t2] - dot) * scale;
                        const float *k = inp + ((size_t)b * T + t2) * C3 + C + h * hs;
                        float *dk = dinp + ((size_t)b * T + t2) * C3 + C + h * hs;
                        for (int i = 0; i < hs; i++) {
                            dq[i] += dpre * k[i];
                            dk[i] += dpre * q[i];
                        }
                    }
                }
            }
        }
        free(datt);
    }
}

// ---- GELU (tanh approximation), residual ---------------------------------------------------

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)

static void gelu_forward(float *out, const float *inp, size_t N)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
    }
}

// dinp = gelu'(inp) * dout (dinp may alias dout)
static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float arg = GELU_SCALE * (x + cube);
        float th = tanhf(arg);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) +
                      x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

static void residual_forward(float *out, const float *inp1, const float *inp2, size_t N)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        out[i] = inp1[i] + inp2[i];
    }
}

static void residual_backward(float *dinp1, float *dinp2, const float *dout, size_t N)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

// ---- fused softmax + cross-entropy ----------------------------------------------------------

// losses (B,T)=; logits (B,T,Vp) (overwritten by dlogits when grad); targets i32 (B,T)
static void softmax_crossentropy(float *losses, float *logits, const int32_t *targets, int BT,
                                 int V, int Vp, int grad, float dloss)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BT; n++) {
        float *l = logits + (size_t)n * Vp;
        float maxv = -INFINITY;
        for (int i = 0; i < V; i++) {
            maxv = l[i] > maxv ? l[i] : maxv;
        }
        int tgt = targets[n];
        float ltgt = l[tgt];
        double sum = 0.0;
        if (grad) {
            float fsum = 0.0f;
            for (int i = 0; i < V; i++) {
                float e = expf(l[i] - maxv);
                l[i] = e;
                fsum += e;
            }
            sum = fsum;
            float s = dloss / fsum;
            for (int i = 0; i < V; i++) {
                l[i] *= s;
            }
            l[tgt] -= dloss;
            for (int i = V; i < Vp; i++) {
                l[i] = 0.0f;
            }
        } else {
            float fsum = 0.0f;
            for (int i = 0; i < V; i++) {
                fsum += expf(l[i] - maxv);
            }
            sum = fsum;
        }
        losses[n] = (float)(log(sum) + (double)maxv - (double)ltgt);
    }
}

// ---- reductions, optimizer ------------------------------------------------------------------

#define SUMSQ_BLOCK 16384

static void sum_of_squares(double *out, const float *x, size_t N)
{
    size_t nblocks = (N + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double *part = malloc(sizeof(double) * nblocks);
    double total = 0.0;
    if (part == NULL) {  // fall back to one serial pass in the same block order
        for (size_t blk = 0; blk < nblocks; blk++) {
            double s = 0.0;
            size_t end = (blk + 1) * SUMSQ_BLOCK < N ? (blk + 1) * SUMSQ_BLOCK : N;
            for (size_t i = blk * SUMSQ_BLOCK; i < end; i++) {
                s += (double)x[i] * x[i];
            }
            total += s;
        }
        *out = total;
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < nblocks; blk++) {
        double s = 0.0;
        size_t end = (blk + 1) * SUMSQ_BLOCK < N ? (blk + 1) * SUMSQ_BLOCK : N;
        for (size_t i = blk * SUMSQ_BLOCK; i < end; i++) {
            s += (double)x[i] * x[i];
        }
        part[blk] = s;
    }
    for (size_t blk = 0; blk < nblocks; blk++) {
        total += part[blk];
    }
    free(part);
    *out = total;
}

static void adamw(float *params, float *m, float *v, const float *grads, size_t N, float lr,
                  float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                  float grad_scale)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mhat = mi / bc1;
        float vhat = vi / bc2;
        m[i] = mi;
        v[i] = vi;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * params[i]);
    }
}

// ---- tokens ---------------------------------------------------------------------------------

static size_t first_token_at_least(const uint16_t *data, size_t n, int64_t V)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] >= V) {
            return i;
        }
    }
    return n;
}

static size_t first_i32_out_of_range(const int32_t *x, size_t n, int64_t V)
{
    for (size_t i = 0; i < n; i++) {
        if (x[i] < 0 || x[i] >= V) {
            return i;
        }
    }
    return n;
}

// ---- dispatch -------------------------------------------------------------------------------

gt_err gt_ops_cpu_run(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx)
{
    uint64_t bytes[GT_OP_MAX_REFS] = {0};
    int nrefs = 0;
    GT_TRY(gt_op_ref_sizes(op, bytes, &nrefs));
    const char *name = gt_op_name(op->kind);
    void *p[GT_OP_MAX_REFS] = {0};
    for (int i = 0; i < nrefs; i++) {
        if (op->refs[i].buf == 0 && gt_op_ref_optional(op->kind, i)) {
            continue;
        }
        GT_ENSURE(op->refs[i].buf != 0, GT_E_ARG, "%s: ref %d is empty", name, i);
        gt_err e = resolve(ctx, op->refs[i], bytes[i], &p[i]);
        if (e.code != GT_E_NONE) {
            return gt_err_wrap(e, "%s: ref %d", name, i);
        }
    }
    const int64_t *in = op->ints;
    const float *f = op->floats;
    switch ((gt_op_kind)op->kind) {
    case GT_OP_ENCODER_FWD:
    case GT_OP_ENCODER_BWD: {
        int B = (int)in[0], T = (int)in[1], C = (int)in[2];
        const int32_t *tok = p[op->kind == GT_OP_ENCODER_FWD ? 1 : 3];
        size_t bad = first_i32_out_of_range(tok, (size_t)B * T, in[3]);
        GT_ENSURE(bad == (size_t)B * T, GT_E_FORMAT, "%s: token %zu is outside [0, %lld)", name,
                  bad, (long long)in[3]);
        if (op->kind == GT_OP_ENCODER_FWD) {
            encoder_forward(p[0], tok, p[2], p[3], B, T, C);
        } else {
            encoder_backward(p[0], p[1], p[2], tok, B, T, C);
        }
        return GT_OK;
    }
    case GT_OP_LAYERNORM_FWD:
        layernorm_forward(p[0], p[1], p[2], p[3], p[4], p[5], (int)in[0], (int)in[1]);
        return GT_OK;
    case GT_OP_LAYERNORM_BWD:
        layernorm_backward(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], (int)in[0], (int)in[1]);
        return GT_OK;
    case GT_OP_MATMUL_FWD:
        matmul_forward(p[0], p[1], p[2], p[3], (int)in[0], (int)in[1], (int)in[2]);
        return GT_OK;
    case GT_OP_MATMUL_BWD:
        matmul_backward(p[0], p[1], p[2], p[3], p[4], p[5], (int)in[0], (int)in[1], (int)in[2],
                        (int)in[3]);
        return GT_OK;
    case GT_OP_ATTENTION_FWD:
        attention_forward(p[0], p[1], p[2], (int)in[0], (int)in[1], (int)in[2], (int)in[3]);
        return GT_OK;
    case GT_OP_ATTENTION_BWD:
        attention_backward(p[0], p[1], p[2], p[3], (int)in[0], (int)in[1], (int)in[2],
                           (int)in[3]);
        return GT_OK;
    case GT_OP_GELU_FWD:
        gelu_forward(p[0], p[1], (size_t)in[0]);
        return GT_OK;
    case GT_OP_GELU_BWD:
        gelu_backward(p[0], p[1], p[2], (size_t)in[0]);
        return GT_OK;
    case GT_OP_RESIDUAL_FWD:
        residual_forward(p[0], p[1], p[2], (size_t)in[0]);
        return GT_OK;
    case GT_OP_RESIDUAL_BWD:
        residual_backward(p[0], p[1], p[2], (size_t)in[0]);
        return GT_OK;
    case GT_OP_SOFTMAX_XENT: {
        size_t BT = (size_t)in[0] * (size_t)in[1];
        size_t bad = first_i32_out_of_range(p[2], BT, in[2]);
        GT_ENSURE(bad == BT, GT_E_FORMAT, "%s: target %zu is outside [0, %lld)", name, bad,
                  (long long)in[2]);
        softmax_crossentropy(p[0], p[1], p[2], (int)BT, (int)in[2], (int)in[3], (int)in[4], f[0]);
        return GT_OK;
    }
    case GT_OP_SUMSQ:
        sum_of_squares(p[0], p[1], (size_t)in[0]);
        return GT_OK;
    case GT_OP_ADAMW:
        adamw(p[0], p[1], p[2], p[3], (size_t)in[0], f[0], f[1], f[2], f[3], f[4], f[5], f[6],
              f[7]);
        return GT_OK;
    case GT_OP_TOKENS_GATHER: {
        size_t n = (size_t)in[0];
        const uint16_t *src = (const uint16_t *)p[2] + in[1];
        size_t bad = first_token_at_least(src, n + 1, in[2]);
        GT_ENSURE(bad == n + 1, GT_E_FORMAT, "%s: token at %lld is not below vocab %lld", name,
                  (long long)(in[1] + (int64_t)bad), (long long)in[2]);
        int32_t *inp = p[0], *tgt = p[1];
        for (size_t i = 0; i < n; i++) {
            inp[i] = src[i];
            tgt[i] = src[i + 1];
        }
        return GT_OK;
    }
    case GT_OP_TOKENS_CHECK: {
        size_t n = (size_t)in[0];
        size_t bad = first_token_at_least(p[0], n, in[1]);
        GT_ENSURE(bad == n, GT_E_FORMAT, "%s: token at %zu is not below vocab %lld", name, bad,
                  (long long)in[1]);
        return GT_OK;
    }
    default:
        return gt_errf(GT_E_ARG, "op: unknown kind %u", op->kind);
    }
}
