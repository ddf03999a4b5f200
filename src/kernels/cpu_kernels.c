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
//
// Instruction sets: the row loops are cpu_simd.c's (scalar, AVX2+FMA, AVX-512F); each kernel
// reads the chosen path once (gt_simd_isa) and hands it to every thread, so one call never mixes
// paths.
#include <gputravel/kernels.h>

#include "cpu_simd.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

// Parallel regions pay only above this much work (elements or multiply-adds): on a busy machine
// every barrier waits for a descheduled thread, which costs more than a small loop.
#define PAR_MIN_WORK ((size_t)1 << 15)
#define PAR(work) ((size_t)(work) >= PAR_MIN_WORK)

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
#pragma omp parallel for schedule(static) if (PAR((size_t)B * T * C))
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
#pragma omp parallel if (PAR((size_t)B * T * C))
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
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel for schedule(static) if (PAR((size_t)N * C))
    for (int n = 0; n < N; n++) {
        gt_simd_layernorm_row(isa, out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C,
                              weight, bias, C, LN_EPS);
    }
}

// dinp (N,C)+=, dweight, dbias (C)+=; dout, inp (N,C); weight (C); mean, rstd (N)
static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const float *mean,
                               const float *rstd, int N, int C)
{
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel for schedule(static) if (PAR((size_t)N * C))
    for (int n = 0; n < N; n++) {
        gt_simd_layernorm_bwd_row(isa, dinp + (size_t)n * C, dout + (size_t)n * C,
                                  inp + (size_t)n * C, weight, mean[n], rstd[n], C);
    }
    // Parameter gradients: each thread owns a block of channels and sums rows in order.
#pragma omp parallel if (PAR((size_t)N * C))
    {
        int lo = 0, hi = 0;
        slice(C, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        for (int n = 0; n < N && lo < hi; n++) {
            gt_simd_layernorm_param_row(isa, dweight, dbias, dout + (size_t)n * C,
                                        inp + (size_t)n * C, mean[n], rstd[n], lo, hi);
        }
    }
}

// ---- matmul ---------------------------------------------------------------------------------
// The output is cut into tiles whose bounds depend only on the shapes (never on the thread
// count), each tile one single-threaded sgemm; threads take tiles dynamically, so a thread that
// the OS parks does not hold the others at the barrier, and the bits do not depend on how many
// threads ran.

// Tiles of at least `min` (a multiple of 16) covering n, at most `most` of them.
static int tile_size(int n, int min, int most)
{
    int t = (n + most - 1) / most;
    t = (t + 15) / 16 * 16;
    return t > min ? t : min;
}

// Output-channel tiles of matmul_forward's out and matmul_backward's dweight.
static int oc_tile(int OC) { return tile_size(OC, 128, 16); }

static int tiles_of(int n, int per) { return (n + per - 1) / per; }

// out (N,OC)= inp (N,C) @ weight(OC,C)^T + bias (OC, may be NULL); only tiles [first, last)
static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                           int N, int C, int OC, int first, int last)
{
    int ts = oc_tile(OC);
#pragma omp parallel for schedule(dynamic, 1) if (PAR((size_t)N * C * OC >> 7))
    for (int tile = first; tile < last; tile++) {
        int lo = tile * ts, hi = lo + ts < OC ? lo + ts : OC;
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

// matmul_backward's tiles, from the shapes alone: dinp's (`rs` rows of N when by_rows, else
// `rs` columns of C), then dweight's (`ws` output channels each).
//
// dinp: a few tiles (each packs a whole operand: weight for row tiles, dout for column tiles,
// so tile the dimension whose tiles pack less); dweight: tiles of output channels. Column tiles
// come two to a product: each repacks all of dout (51 MB at the 124M lm-head), and halving the
// repacking took 2-6% off the backward's CPU time (bench_matmul, docs/train.md); row tiles
// measured no better in two than in four. Splitting columns leaves each element's sum over OC to
// the same sgemm loop: the 124M shapes gave four tiles' bits.
typedef struct {
    bool by_rows;
    int rs, nrow;  // dinp
    int ws, nw;    // dweight
} bwd_tiling;

static bwd_tiling bwd_tiles(int N, int C, int OC)
{
    bwd_tiling t = {.by_rows = N >= C, .ws = oc_tile(OC)};
    t.rs = t.by_rows ? tile_size(N, 64, 4) : tile_size(C, 64, 2);
    t.nrow = tiles_of(t.by_rows ? N : C, t.rs);
    t.nw = tiles_of(OC, t.ws);
    return t;
}

// dinp (N,C) = or +=, dweight (OC,C)+=, dbias (OC)+= (may be NULL); dout (N,OC); inp (N,C);
// weight (OC,C). Only tiles [first, last) of bwd_tiles' order (dinp's, then dweight's).
static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC,
                            int dinp_accumulate, int first, int last)
{
    bwd_tiling t = bwd_tiles(N, C, OC);
    float beta = dinp_accumulate ? 1.0f : 0.0f;
#pragma omp parallel for schedule(dynamic, 1) if (PAR((size_t)N * C * OC >> 7))
    for (int tile = first; tile < last; tile++) {
        if (tile < t.nrow && t.by_rows) {  // dinp rows = dout rows @ weight
            int lo = tile * t.rs, hi = lo + t.rs < N ? lo + t.rs : N;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, hi - lo, C, OC, 1.0f,
                        dout + (size_t)lo * OC, OC, weight, C, beta, dinp + (size_t)lo * C, C);
            continue;
        }
        if (tile < t.nrow) {  // dinp columns = dout @ weight columns
            int lo = tile * t.rs, hi = lo + t.rs < C ? lo + t.rs : C;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, hi - lo, OC, 1.0f, dout,
                        OC, weight + lo, C, beta, dinp + lo, C);
            continue;
        }
        // dweight += dout^T @ inp; dbias += column sums of dout
        int lo = (tile - t.nrow) * t.ws, hi = lo + t.ws < OC ? lo + t.ws : OC;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, C, N, 1.0f, dout + lo, OC,
                    inp, C, 1.0f, dweight + (size_t)lo * C, C);
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

// ---- attention ------------------------------------------------------------------------------
// Per (b, h): preatt = scale Q K^T and out = att V as single-threaded sgemms (the upper triangle
// is computed and then masked: half the multiply-adds are wasted, but sgemm runs ~30x faster
// than a scalar causal loop), with the causal softmax between them.

// out (B,T,C)=, att (B,NH,T,T)= softmax weights (0 above the diagonal); inp (B,T,3C) holds
// q, k, v, each (B,T,NH,hs) inside its C columns.
static void attention_forward(float *out, float *att, const float *inp, int B, int T, int C,
                              int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel for schedule(dynamic, 1) if (PAR((size_t)B * T * T * C >> 5))
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *q = inp + (size_t)b * T * C3 + h * hs;
        float *a = att + (size_t)bh * T * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, q + C, C3,
                    0.0f, a, T);
        for (int t = 0; t < T; t++) {
            float *row = a + (size_t)t * T;
            float mx = gt_simd_max(isa, row, t + 1);
            float sum = gt_simd_exp_shift_sum(isa, row, row, t + 1, mx);
            gt_simd_scale(isa, row, t + 1, 1.0f / sum);
            for (int t2 = t + 1; t2 < T; t2++) {
                row[t2] = 0.0f;
            }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, q + 2 * C,
                    C3, 0.0f, out + (size_t)b * T * C + h * hs, C);
    }
}

// dinp (B,T,3C)=; dout (B,T,C); inp (B,T,3C); att (B,NH,T,T), read only at t2 <= t (the
// causal contract, docs/train.md: att above the diagonal never contributes, whatever it holds).
// Per (b, h), with a (T,T) scratch:
//   dV = mask(att)^T dout (the scratch holds the masked att first); datt = dout V^T;
//   dpre = att * (datt - rowsum(att * datt)) on t2 <= t, 0 above; dQ = scale dpre K;
//   dK = scale dpre^T Q. The forward writes zeros above the diagonal, so in training the masked
//   copy equals att and sgemm sees the same operands: the bits do not change.
static void attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                               int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel if (PAR((size_t)B * T * T * C >> 4))
    {
        float *d = malloc(sizeof(float) * (size_t)T * T);
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            int b = bh / NH, h = bh % NH;
            const float *q = inp + (size_t)b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
            float *dq = dinp + (size_t)b * T * C3 + h * hs, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + (size_t)bh * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hs;
            for (int t = 0; t < T; t++) {
                const float *ar = a + (size_t)t * T;
                float *dr = d + (size_t)t * T;
                memcpy(dr, ar, sizeof(float) * (size_t)(t + 1));
                memset(dr + t + 1, 0, sizeof(float) * (size_t)(T - t - 1));
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, d, T, dy, C,
                        0.0f, dv, C3);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3,
                        0.0f, d, T);
            for (int t = 0; t < T; t++) {
                float *dr = d + (size_t)t * T;
                gt_simd_softmax_bwd_row(isa, dr, a + (size_t)t * T, t + 1);
                memset(dr + t + 1, 0, sizeof(float) * (size_t)(T - t - 1));
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, d, T, k, C3,
                        0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, d, T, q, C3,
                        0.0f, dk, C3);
        }
        free(d);
    }
}

// ---- GELU (tanh approximation), residual ---------------------------------------------------
// 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).

// Threads take slices of whole 16-element blocks: which elements the vector body takes (and
// so their bits) depends on N only, not on the thread count.
static void gelu_forward(float *out, const float *inp, size_t N)
{
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel if (PAR(N * 8))
    {
        int lo = 0, hi = 0;
        slice((int)((N + 15) / 16), omp_get_num_threads(), omp_get_thread_num(), 1, &lo, &hi);
        size_t a = (size_t)lo * 16, z = (size_t)hi * 16 < N ? (size_t)hi * 16 : N;
        gt_simd_gelu_fwd(isa, out, inp, a, z);
    }
}

// dinp = gelu'(inp) * dout (dinp may alias dout)
static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel if (PAR(N * 8))
    {
        int lo = 0, hi = 0;
        slice((int)((N + 15) / 16), omp_get_num_threads(), omp_get_thread_num(), 1, &lo, &hi);
        size_t a = (size_t)lo * 16, z = (size_t)hi * 16 < N ? (size_t)hi * 16 : N;
        gt_simd_gelu_bwd(isa, dinp, inp, dout, a, z);
    }
}

static void residual_forward(float *out, const float *inp1, const float *inp2, size_t N)
{
#pragma omp parallel for schedule(static) if (PAR(N))
    for (size_t i = 0; i < N; i++) {
        out[i] = inp1[i] + inp2[i];
    }
}

static void residual_backward(float *dinp1, float *dinp2, const float *dout, size_t N)
{
#pragma omp parallel for schedule(static) if (PAR(N))
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
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel for schedule(static) if (PAR((size_t)BT * V))
    for (int n = 0; n < BT; n++) {
        float *l = logits + (size_t)n * Vp;
        int tgt = targets[n];
        float ltgt = l[tgt];
        float maxv = gt_simd_max(isa, l, V);
        float sum = gt_simd_exp_shift_sum(isa, grad ? l : NULL, l, V, maxv);
        if (grad) {
            gt_simd_scale(isa, l, V, dloss / sum);
            l[tgt] -= dloss;
            for (int i = V; i < Vp; i++) {
                l[i] = 0.0f;
            }
        }
        losses[n] = (float)(log((double)sum) + (double)maxv - (double)ltgt);
    }
}

// ---- reductions, optimizer ------------------------------------------------------------------

// The blocks are sum_of_squares' tiles (its parts, kernels.h): their bounds depend on N alone.
#define SUMSQ_BLOCK 16384

static size_t sumsq_blocks(size_t N) { return (N + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK; }

static double sumsq_block(const float *x, size_t lo, size_t hi)
{
    double s = 0.0;
    for (size_t i = lo; i < hi; i++) {
        s += (double)x[i] * x[i];
    }
    return s;
}

// *out = the sum of squares of blocks [first, last) of x (N), each block in double serially,
// the block sums added in block order. first == 0 starts from 0.0; a later first starts from
// *out, the total of blocks [0, first) that the earlier parts wrote: a double, so nothing is
// rounded away between parts, and the adds are the whole op's, in its order, on the same
// doubles. So parts run in order give the whole op's bytes (docs/paging.md).
static void sum_of_squares(double *out, const float *x, size_t N, size_t first, size_t last)
{
    double *part = malloc(sizeof(double) * (last - first));
    double total = first == 0 ? 0.0 : *out;
    if (part == NULL) {  // one serial pass in the same block order
        for (size_t blk = first; blk < last; blk++) {
            size_t end = (blk + 1) * SUMSQ_BLOCK < N ? (blk + 1) * SUMSQ_BLOCK : N;
            total += sumsq_block(x, blk * SUMSQ_BLOCK, end);
        }
        *out = total;
        return;
    }
    size_t stop = last * SUMSQ_BLOCK < N ? last * SUMSQ_BLOCK : N;  // the floats summed here
#pragma omp parallel for schedule(static) if (PAR(stop - first * SUMSQ_BLOCK))
    for (size_t blk = first; blk < last; blk++) {
        size_t end = (blk + 1) * SUMSQ_BLOCK < N ? (blk + 1) * SUMSQ_BLOCK : N;
        part[blk - first] = sumsq_block(x, blk * SUMSQ_BLOCK, end);
    }
    for (size_t blk = first; blk < last; blk++) {
        total += part[blk - first];
    }
    free(part);
    *out = total;
}

static void adamw(float *params, float *m, float *v, const float *grads, size_t N,
                  const gt_simd_adamw_hp *h)
{
    gt_cpu_isa isa = gt_simd_isa();
#pragma omp parallel if (PAR(N))
    {
        int lo = 0, hi = 0;
        size_t nblk = (N + 15) / 16;
        slice((int)nblk, omp_get_num_threads(), omp_get_thread_num(), 1, &lo, &hi);
        size_t a = (size_t)lo * 16, z = (size_t)hi * 16 < N ? (size_t)hi * 16 : N;
        gt_simd_adamw(isa, params, m, v, grads, a, z, h);
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
// One adapter per op kind: named fields of the decoded args to the kernel's arguments, after the
// token checks that keep every index inside its table.

static gt_err check_i32(const char *name, const char *what, const int32_t *x, size_t n, int64_t V)
{
    size_t bad = first_i32_out_of_range(x, n, V);
    GT_ENSURE(bad == n, GT_E_FORMAT, "%s: %s %zu is outside [0, %lld)", name, what, bad,
              (long long)V);
    return GT_OK;
}

static gt_err run_encoder_fwd(const gt_op_args *u, const char *name)
{
    const gt_encoder_fwd_args *a = &u->encoder_fwd;
    GT_TRY(check_i32(name, "token", a->inp, (size_t)a->B * a->T, a->V));
    encoder_forward(a->out, a->inp, a->wte, a->wpe, a->B, a->T, a->C);
    return GT_OK;
}

static gt_err run_encoder_bwd(const gt_op_args *u, const char *name)
{
    const gt_encoder_bwd_args *a = &u->encoder_bwd;
    GT_TRY(check_i32(name, "token", a->inp, (size_t)a->B * a->T, a->V));
    encoder_backward(a->dwte, a->dwpe, a->dout, a->inp, a->B, a->T, a->C);
    return GT_OK;
}

static gt_err run_layernorm_fwd(const gt_op_args *u, const char *name)
{
    const gt_layernorm_fwd_args *a = &u->layernorm_fwd;
    (void)name;
    layernorm_forward(a->out, a->mean, a->rstd, a->inp, a->weight, a->bias, a->N, a->C);
    return GT_OK;
}

static gt_err run_layernorm_bwd(const gt_op_args *u, const char *name)
{
    const gt_layernorm_bwd_args *a = &u->layernorm_bwd;
    (void)name;
    layernorm_backward(a->dinp, a->dweight, a->dbias, a->dout, a->inp, a->weight, a->mean,
                       a->rstd, a->N, a->C);
    return GT_OK;
}

static gt_err run_matmul_fwd(const gt_op_args *u, const char *name)
{
    const gt_matmul_fwd_args *a = &u->matmul_fwd;
    (void)name;
    int all = tiles_of(a->OC, oc_tile(a->OC));
    matmul_forward(a->out, a->inp, a->weight, a->bias, a->N, a->C, a->OC,
                   a->tile_hi ? a->tile_lo : 0, a->tile_hi ? a->tile_hi : all);
    return GT_OK;
}

static gt_err run_matmul_bwd(const gt_op_args *u, const char *name)
{
    const gt_matmul_bwd_args *a = &u->matmul_bwd;
    (void)name;
    bwd_tiling t = bwd_tiles(a->N, a->C, a->OC);
    matmul_backward(a->dinp, a->dweight, a->dbias, a->dout, a->inp, a->weight, a->N, a->C, a->OC,
                    a->dinp_accumulate, a->tile_hi ? a->tile_lo : 0,
                    a->tile_hi ? a->tile_hi : t.nrow + t.nw);
    return GT_OK;
}

static gt_err run_attention_fwd(const gt_op_args *u, const char *name)
{
    const gt_attention_fwd_args *a = &u->attention_fwd;
    (void)name;
    attention_forward(a->out, a->att, a->inp, a->B, a->T, a->C, a->NH);
    return GT_OK;
}

static gt_err run_attention_bwd(const gt_op_args *u, const char *name)
{
    const gt_attention_bwd_args *a = &u->attention_bwd;
    (void)name;
    attention_backward(a->dinp, a->dout, a->inp, a->att, a->B, a->T, a->C, a->NH);
    return GT_OK;
}

static gt_err run_gelu_fwd(const gt_op_args *u, const char *name)
{
    (void)name;
    gelu_forward(u->gelu_fwd.out, u->gelu_fwd.inp, (size_t)u->gelu_fwd.N);
    return GT_OK;
}

static gt_err run_gelu_bwd(const gt_op_args *u, const char *name)
{
    const gt_gelu_bwd_args *a = &u->gelu_bwd;
    (void)name;
    gelu_backward(a->dinp, a->inp, a->dout, (size_t)a->N);
    return GT_OK;
}

static gt_err run_residual_fwd(const gt_op_args *u, const char *name)
{
    const gt_residual_fwd_args *a = &u->residual_fwd;
    (void)name;
    residual_forward(a->out, a->inp1, a->inp2, (size_t)a->N);
    return GT_OK;
}

static gt_err run_residual_bwd(const gt_op_args *u, const char *name)
{
    const gt_residual_bwd_args *a = &u->residual_bwd;
    (void)name;
    residual_backward(a->dinp1, a->dinp2, a->dout, (size_t)a->N);
    return GT_OK;
}

static gt_err run_softmax_xent(const gt_op_args *u, const char *name)
{
    const gt_softmax_xent_args *a = &u->softmax_xent;
    size_t BT = (size_t)a->B * (size_t)a->T;
    GT_TRY(check_i32(name, "target", a->targets, BT, a->V));
    softmax_crossentropy(a->losses, a->logits, a->targets, (int)BT, a->V, a->Vp, a->grad,
                         a->dloss);
    return GT_OK;
}

static gt_err run_sumsq(const gt_op_args *u, const char *name)
{
    const gt_sumsq_args *a = &u->sumsq;
    (void)name;
    size_t all = sumsq_blocks((size_t)a->N);
    sum_of_squares(a->out, a->x, (size_t)a->N, a->tile_hi ? (size_t)a->tile_lo : 0,
                   a->tile_hi ? (size_t)a->tile_hi : all);
    return GT_OK;
}

static gt_err run_adamw(const gt_op_args *u, const char *name)
{
    const gt_adamw_args *a = &u->adamw;
    (void)name;
    gt_simd_adamw_hp h = {a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->bc1, a->bc2,
                  a->grad_scale};
    adamw(a->params, a->m, a->v, a->grads, (size_t)a->N, &h);
    return GT_OK;
}

static gt_err run_tokens_gather(const gt_op_args *u, const char *name)
{
    const gt_tokens_gather_args *a = &u->tokens_gather;
    size_t n = (size_t)a->N;
    const uint16_t *src = a->data + a->offset;
    size_t bad = first_token_at_least(src, n + 1, a->V);
    GT_ENSURE(bad == n + 1, GT_E_FORMAT, "%s: token at %lld is not below vocab %d", name,
              (long long)(a->offset + (int64_t)bad), a->V);
    for (size_t i = 0; i < n; i++) {
        a->inp[i] = src[i];
        a->tgt[i] = src[i + 1];
    }
    return GT_OK;
}

static gt_err run_tokens_check(const gt_op_args *u, const char *name)
{
    const gt_tokens_check_args *a = &u->tokens_check;
    size_t n = (size_t)a->N;
    size_t bad = first_token_at_least(a->data, n, a->V);
    GT_ENSURE(bad == n, GT_E_FORMAT, "%s: token at %zu is not below vocab %d", name, bad, a->V);
    return GT_OK;
}

static gt_err run_loss_mean(const gt_op_args *u, const char *name)
{
    const gt_loss_mean_args *a = &u->loss_mean;
    (void)name;
    double s = 0.0;  // in index order: the mean the trainer computed on its CPU before
    for (int i = 0; i < a->N; i++) {
        s += a->losses[i];
    }
    *a->out = gt_round_mantissa((float)(s / (double)a->N), a->bits);
    return GT_OK;
}

static gt_err run_norm_release(const gt_op_args *u, const char *name)
{
    (void)name;
    *u->norm_release.out = gt_round_mantissa((float)sqrt(*u->norm_release.sumsq), u->norm_release.bits);
    return GT_OK;
}

static gt_err run_clip_grads(const gt_op_args *u, const char *name)
{
    const gt_clip_grads_args *a = &u->clip_grads;
    (void)name;
    float norm = (float)sqrt(*a->sumsq);
    if (a->clip > 0.0f && norm > a->clip) {
        float scale = a->clip / norm;
#pragma omp parallel for schedule(static) if (a->N >= 65536)
        for (int i = 0; i < a->N; i++) {
            a->grads[i] *= scale;
        }
    }
    return GT_OK;
}

static gt_err run_sum_f64(const gt_op_args *u, const char *name)
{
    const gt_sum_f64_args *a = &u->sum_f64;
    (void)name;
    double s = 0.0;
    for (int i = 0; i < a->N; i++) {
        s += a->x[i];
    }
    *a->out = s;
    return GT_OK;
}

typedef gt_err (*run_fn)(const gt_op_args *args, const char *name);

static const run_fn runners[GT_OP_COUNT_] = {
    [GT_OP_ENCODER_FWD] = run_encoder_fwd,     [GT_OP_ENCODER_BWD] = run_encoder_bwd,
    [GT_OP_LAYERNORM_FWD] = run_layernorm_fwd, [GT_OP_LAYERNORM_BWD] = run_layernorm_bwd,
    [GT_OP_MATMUL_FWD] = run_matmul_fwd,       [GT_OP_MATMUL_BWD] = run_matmul_bwd,
    [GT_OP_ATTENTION_FWD] = run_attention_fwd, [GT_OP_ATTENTION_BWD] = run_attention_bwd,
    [GT_OP_GELU_FWD] = run_gelu_fwd,           [GT_OP_GELU_BWD] = run_gelu_bwd,
    [GT_OP_RESIDUAL_FWD] = run_residual_fwd,   [GT_OP_RESIDUAL_BWD] = run_residual_bwd,
    [GT_OP_SOFTMAX_XENT] = run_softmax_xent,   [GT_OP_SUMSQ] = run_sumsq,
    [GT_OP_ADAMW] = run_adamw,                 [GT_OP_TOKENS_GATHER] = run_tokens_gather,
    [GT_OP_TOKENS_CHECK] = run_tokens_check,   [GT_OP_LOSS_MEAN] = run_loss_mean,
    [GT_OP_NORM_RELEASE] = run_norm_release,   [GT_OP_CLIP_GRADS] = run_clip_grads,
    [GT_OP_SUM_F64] = run_sum_f64,
};

// The profile: atomics, so devd's worker and a test's thread may both run ops while it is on.
static atomic_bool profile_on;
static _Atomic uint64_t profile_calls[GT_OP_COUNT_], profile_ns[GT_OP_COUNT_];

void gt_ops_cpu_profile_enable(bool on)
{
    gt_ops_cpu_profile discard;
    gt_ops_cpu_profile_take(&discard);
    atomic_store(&profile_on, on);
}

void gt_ops_cpu_profile_take(gt_ops_cpu_profile *out)
{
    for (int k = 0; k < GT_OP_COUNT_; k++) {
        out->calls[k] = atomic_exchange(&profile_calls[k], 0);
        out->nanoseconds[k] = atomic_exchange(&profile_ns[k], 0);
    }
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// ---- parts (kernels.h) ------------------------------------------------------------------------

int gt_op_part_groups(const gt_op *op)
{
    switch (op->kind) {
    case GT_OP_MATMUL_FWD:
    case GT_OP_SUMSQ:
        return 1;
    case GT_OP_MATMUL_BWD:
        return 2;
    default:
        return 0;
    }
}

const char *gt_op_part_group_name(const gt_op *op, int group)
{
    if (op->kind == GT_OP_MATMUL_FWD && group == 0) {
        return "out";
    }
    if (op->kind == GT_OP_MATMUL_BWD && (group == 0 || group == 1)) {
        return group == 0 ? "dinp" : "dweight";
    }
    if (op->kind == GT_OP_SUMSQ && group == 0) {
        return "x";
    }
    return "no";
}

// The shapes of an op that has parts, checked (both matmuls' ints begin N, C, OC;
// sum_of_squares has N alone, and C, OC are 0 for it).
static gt_err part_shapes(const gt_op *op, int *N, int *C, int *OC)
{
    uint64_t bytes[GT_OP_MAX_REFS];
    int nrefs = 0;
    GT_TRY(gt_op_ref_sizes(op, bytes, &nrefs));
    GT_ENSURE(gt_op_part_groups(op) > 0, GT_E_ARG, "%s: has no parts", gt_op_name(op->kind));
    bool matmul = op->kind != GT_OP_SUMSQ;
    *N = (int)op->ints[0];
    *C = matmul ? (int)op->ints[1] : 0;
    *OC = matmul ? (int)op->ints[2] : 0;
    return GT_OK;
}

gt_err gt_op_part_tiles(const gt_op *op, int group, int *tiles)
{
    int N = 0, C = 0, OC = 0;
    GT_TRY(part_shapes(op, &N, &C, &OC));
    GT_ENSURE(group >= 0 && group < gt_op_part_groups(op), GT_E_ARG, "%s: no part group %d",
              gt_op_name(op->kind), group);
    if (op->kind == GT_OP_SUMSQ) {
        *tiles = (int)sumsq_blocks((size_t)N);  // N < 2^31: at most 2^17 blocks
        return GT_OK;
    }
    if (op->kind == GT_OP_MATMUL_FWD) {
        *tiles = tiles_of(OC, oc_tile(OC));
        return GT_OK;
    }
    bwd_tiling t = bwd_tiles(N, C, OC);
    *tiles = group == 0 ? t.nrow : t.nw;
    return GT_OK;
}

// The kernel's tiles [*first, *last) that the part names (matmul_backward's loop numbers
// dweight's tiles after dinp's).
static gt_err part_span(const gt_op *op, const gt_op_part *part, int *first, int *last)
{
    int tiles = 0, base = 0;
    GT_TRY(gt_op_part_tiles(op, part->group, &tiles));
    GT_ENSURE(part->lo >= 0 && part->lo < part->hi && part->hi <= tiles, GT_E_ARG,
              "%s: part [%d, %d) of %d %s tiles", gt_op_name(op->kind), part->lo, part->hi,
              tiles, gt_op_part_group_name(op, part->group));
    if (op->kind == GT_OP_MATMUL_BWD && part->group == 1) {
        GT_TRY(gt_op_part_tiles(op, 0, &base));
    }
    *first = base + part->lo;
    *last = base + part->hi;
    return GT_OK;
}

// The refs of both matmuls and of sum_of_squares, in descriptor order (op_table.c).
enum { FWD_OUT, FWD_INP, FWD_WEIGHT, FWD_BIAS };
enum { BWD_DINP, BWD_DWEIGHT, BWD_DBIAS, BWD_DOUT, BWD_INP, BWD_WEIGHT };
enum { SUMSQ_OUT, SUMSQ_X };

// Ref i's extent widened to hold its f32 elements [a, b).
static void widen(uint64_t *lo, uint64_t *hi, int i, uint64_t a, uint64_t b)
{
    a *= sizeof(float), b *= sizeof(float);
    bool empty = lo[i] == hi[i];
    lo[i] = empty || a < lo[i] ? a : lo[i];
    hi[i] = empty || b > hi[i] ? b : hi[i];
}

// What one tile of the kernel's loop reads and writes: the same bounds as the loops above.
// Columns [a, b) of a row-major (rows, cols) matrix span [a, (rows - 1) * cols + b).
static void tile_extents(const gt_op *op, int N, int C, int OC, int tile, uint64_t *lo,
                         uint64_t *hi)
{
    uint64_t n = (uint64_t)N, c = (uint64_t)C, oc = (uint64_t)OC;
    if (op->kind == GT_OP_MATMUL_FWD) {
        uint64_t ts = (uint64_t)oc_tile(OC), a = (uint64_t)tile * ts, b = a + ts < oc ? a + ts : oc;
        widen(lo, hi, FWD_OUT, a, (n - 1) * oc + b);
        widen(lo, hi, FWD_INP, 0, n * c);
        widen(lo, hi, FWD_WEIGHT, a * c, b * c);
        widen(lo, hi, FWD_BIAS, a, b);
        return;
    }
    bwd_tiling t = bwd_tiles(N, C, OC);
    if (tile < t.nrow) {
        uint64_t rs = (uint64_t)t.rs, a = (uint64_t)tile * rs, end = t.by_rows ? n : c;
        uint64_t b = a + rs < end ? a + rs : end;
        if (t.by_rows) {  // rows [a, b) of dinp and dout, all of weight
            widen(lo, hi, BWD_DINP, a * c, b * c);
            widen(lo, hi, BWD_DOUT, a * oc, b * oc);
            widen(lo, hi, BWD_WEIGHT, 0, oc * c);
        } else {  // columns [a, b) of dinp and weight, all of dout
            widen(lo, hi, BWD_DINP, a, (n - 1) * c + b);
            widen(lo, hi, BWD_DOUT, 0, n * oc);
            widen(lo, hi, BWD_WEIGHT, a, (oc - 1) * c + b);
        }
        return;
    }
    uint64_t ws = (uint64_t)t.ws, a = (uint64_t)(tile - t.nrow) * ws;
    uint64_t b = a + ws < oc ? a + ws : oc;
    widen(lo, hi, BWD_DWEIGHT, a * c, b * c);  // rows [a, b) of dweight, dbias [a, b)
    widen(lo, hi, BWD_DBIAS, a, b);
    widen(lo, hi, BWD_DOUT, a, (n - 1) * oc + b);  // columns [a, b) of dout, all of inp
    widen(lo, hi, BWD_INP, 0, n * c);
}

gt_err gt_op_part_extents(const gt_op *op, const gt_op_part *part, uint64_t lo[GT_OP_MAX_REFS],
                          uint64_t hi[GT_OP_MAX_REFS])
{
    int first = 0, last = 0, N = 0, C = 0, OC = 0;
    GT_TRY(part_shapes(op, &N, &C, &OC));
    GT_TRY(part_span(op, part, &first, &last));
    memset(lo, 0, sizeof(uint64_t) * GT_OP_MAX_REFS);
    memset(hi, 0, sizeof(uint64_t) * GT_OP_MAX_REFS);
    if (op->kind == GT_OP_SUMSQ) {  // out whole (a later part reads it), x its blocks' floats
        uint64_t n = (uint64_t)N, b = (uint64_t)last * SUMSQ_BLOCK;
        widen(lo, hi, SUMSQ_X, (uint64_t)first * SUMSQ_BLOCK, b < n ? b : n);
        hi[SUMSQ_OUT] = sizeof(double);
        return GT_OK;
    }
    for (int tile = first; tile < last; tile++) {
        tile_extents(op, N, C, OC, tile, lo, hi);
    }
    return GT_OK;
}

gt_err gt_ops_cpu_run(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx)
{
    return gt_ops_cpu_run_part(op, NULL, resolve, ctx);
}

gt_err gt_ops_cpu_run_part(const gt_op *op, const gt_op_part *part, gt_dref_resolve_fn resolve,
                           void *ctx)
{
    gt_op_args args;
    GT_TRY(gt_op_decode(op, resolve, ctx, &args));  // refuses unknown kinds; checks every ref
    if (part != NULL) {
        int first = 0, last = 0;
        GT_TRY(part_span(op, part, &first, &last));
        if (op->kind == GT_OP_MATMUL_FWD) {
            args.matmul_fwd.tile_lo = first, args.matmul_fwd.tile_hi = last;
        } else if (op->kind == GT_OP_SUMSQ) {
            args.sumsq.tile_lo = first, args.sumsq.tile_hi = last;
        } else {
            args.matmul_bwd.tile_lo = first, args.matmul_bwd.tile_hi = last;
        }
    }
    if (!atomic_load_explicit(&profile_on, memory_order_relaxed)) {
        return runners[op->kind](&args, gt_op_name(op->kind));
    }
    uint64_t t0 = monotonic_ns();
    gt_err e = runners[op->kind](&args, gt_op_name(op->kind));
    atomic_fetch_add(&profile_ns[op->kind], monotonic_ns() - t0);
    atomic_fetch_add(&profile_calls[op->kind], 1);
    return e;
}
