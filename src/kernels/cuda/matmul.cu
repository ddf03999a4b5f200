// CUDA kernels: matmuls (cuBLASLt forward with the bias fused when every pointer is 16-byte
// aligned, cuBLAS otherwise and for every backward product). Plain fp32: CUBLAS_DEFAULT_MATH
// and CUBLAS_COMPUTE_32F, never TF32.
#include "common.cuh"
#include "colsum.cuh"

#include <string.h>

// ---- matmul ------------------------------------------------------------------------------------
// Row-major out (N,OC) = inp (N,C) @ weight (OC,C)^T is, column-major, out^T (OC x N) =
// weight^T (OC x C) . inp^T (C x N): cuBLAS sees weight as a C x OC matrix (ld C) transposed and
// inp as C x N (ld C), out as OC x N (ld OC).

// I: the index type of the per-element % (uint32_t when n <= GT_CUDA_IDX32_MAX).
template <typename I>
__global__ void add_bias_kernel(float *out, const float *bias, I n, I OC)
{
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += (I)gridDim.x * blockDim.x) {
        out[i] += bias[i % OC];
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static uint32_t alignment_of(const void *p)
{
    uint32_t a = 256;
    while (a > 4 && ((uintptr_t)p & (a - 1)) != 0) {
        a >>= 1;
    }
    return a;
}

static void plan_destroy(gt_cuda_lt_plan *p)
{
    if (p->lc != NULL) {
        cublasLtMatrixLayoutDestroy(p->lc);
    }
    if (p->lb != NULL) {
        cublasLtMatrixLayoutDestroy(p->lb);
    }
    if (p->la != NULL) {
        cublasLtMatrixLayoutDestroy(p->la);
    }
    if (p->desc != NULL) {
        cublasLtMatmulDescDestroy(p->desc);
    }
    memset(p, 0, sizeof *p);
}

void gt_cuda_lt_plans_free(gt_cuda_ctx *cx)
{
    for (int i = 0; i < GT_CUDA_LT_PLANS; i++) {
        plan_destroy(&cx->lt_plans[i]);
    }
    cx->lt_next = 0;
}

#define LT(call)                                    \
    do {                                            \
        st = (call);                                \
        if (st != CUBLAS_STATUS_SUCCESS) {          \
            err = cublasGetStatusString(st);        \
            goto out;                               \
        }                                           \
    } while (0)

// Fills p (its key already set): descriptors for out^T = weight^T . inp^T (+ bias in the
// epilogue), and the heuristic's first algorithm for these alignments. p->found = false when
// the heuristic has none (not an error). On an error p is left destroyed. bias: this call's
// (16-byte aligned, like every later call's on this path), set before the heuristic runs, as
// when the descriptor was made per call.
static const char *plan_make(gt_cuda_ctx *cx, gt_cuda_lt_plan *p, const float *bias)
{
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    const char *err = NULL;
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = p->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    size_t ws = GT_CUDA_LT_WORKSPACE_BYTES;
    cublasLtMatmulHeuristicResult_t heur;
    int nres = 0;
    LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias != NULL) {
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    }
    LT(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, (uint64_t)p->C, (uint64_t)p->OC,
                                  (int64_t)p->C));
    LT(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_32F, (uint64_t)p->C, (uint64_t)p->N,
                                  (int64_t)p->C));
    LT(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, (uint64_t)p->OC, (uint64_t)p->N,
                                  (int64_t)p->OC));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    // The heuristic assumes 256-byte aligned operands unless told otherwise.
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                            &p->al_a, sizeof p->al_a));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                            &p->al_b, sizeof p->al_b));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                            &p->al_c, sizeof p->al_c));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                            &p->al_c, sizeof p->al_c));
    st = cublasLtMatmulAlgoGetHeuristic(cx->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1,
                                        &heur, &nres);
    p->found = st == CUBLAS_STATUS_SUCCESS && nres >= 1;
    if (p->found) {
        p->algo = heur.algo;
    }
out:
    if (pref != NULL) {
        cublasLtMatmulPreferenceDestroy(pref);
    }
    if (err != NULL) {
        plan_destroy(p);
    }
    return err;
}

// The cached plan for this call's key, made on first use. *plan NULL on an error.
static const char *plan_for(gt_cuda_ctx *cx, gt_cuda_lt_plan **plan, int N, int C, int OC,
                            const float *bias, uint32_t al_a, uint32_t al_b, uint32_t al_c)
{
    int has_bias = bias != NULL;
    for (int i = 0; i < GT_CUDA_LT_PLANS; i++) {
        gt_cuda_lt_plan *p = &cx->lt_plans[i];
        if (p->used && p->N == N && p->C == C && p->OC == OC && p->bias == has_bias &&
            p->al_a == al_a && p->al_b == al_b && p->al_c == al_c) {
            *plan = p;
            return NULL;
        }
    }
    gt_cuda_lt_plan *p = &cx->lt_plans[cx->lt_next];
    cx->lt_next = (cx->lt_next + 1) % GT_CUDA_LT_PLANS;
    plan_destroy(p);  // the oldest, if the cache is full
    p->N = N;
    p->C = C;
    p->OC = OC;
    p->bias = has_bias;
    p->al_a = al_a;
    p->al_b = al_b;
    p->al_c = al_c;
    const char *e = plan_make(cx, p, bias);
    if (e != NULL) {
        *plan = NULL;
        return e;
    }
    p->used = true;
    *plan = p;
    return NULL;
}

// cuBLASLt with the bias in the epilogue, on the shape's cached plan. *done = false when no
// algorithm fits (the caller then takes the cuBLAS path).
static const char *matmul_forward_lt(gt_cuda_ctx *cx, bool *done, float *out, const float *inp,
                                     const float *weight, const float *bias, int N, int C, int OC)
{
    *done = false;
    gt_cuda_lt_plan *p = NULL;
    const char *err = plan_for(cx, &p, N, C, OC, bias, alignment_of(weight),
                               alignment_of(inp), alignment_of(out));
    if (err != NULL || !p->found) {
        return err;
    }
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    float one = 1.0f, zero = 0.0f;
    if (bias != NULL) {  // the pointer changes from call to call; the descriptor is host-side
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    }
    LT(cublasLtMatmul(cx->lt, p->desc, &one, weight, p->la, inp, p->lb, &zero, out, p->lc, out,
                      p->lc, &p->algo, cx->lt_workspace, GT_CUDA_LT_WORKSPACE_BYTES,
                      cx->stream));
    *done = true;
out:
    return err;
}
#undef LT

const char *gt_cuda_matmul_forward(gt_cuda_ctx *cx, float *out, const float *inp,
                                   const float *weight, const float *bias, int N, int C, int OC)
{
    if (aligned16(out) && aligned16(inp) && aligned16(weight) &&
        (bias == NULL || aligned16(bias))) {
        bool done = false;
        const char *e = matmul_forward_lt(cx, &done, out, inp, weight, bias, N, C, OC);
        if (e != NULL) {
            return e;
        }
        if (done) {
            return NULL;
        }
    }
    float one = 1.0f, zero = 0.0f;
    CK_BLAS(cublasSgemm(cx->blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, weight, C, inp, C,
                        &zero, out, OC));
    if (bias != NULL) {
        size_t n = (size_t)N * OC;
        if (n <= GT_CUDA_IDX32_MAX) {
            add_bias_kernel<uint32_t><<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(
                out, bias, (uint32_t)n, (uint32_t)OC);
        } else {
            add_bias_kernel<size_t><<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(
                out, bias, n, (size_t)OC);
        }
        CK_LAUNCH();
    }
    return NULL;
}

const char *gt_cuda_matmul_backward(gt_cuda_ctx *cx, float *dinp, float *dweight, float *dbias,
                                    const float *dout, const float *inp, const float *weight,
                                    int N, int C, int OC, int dinp_accumulate)
{
    float one = 1.0f, beta = dinp_accumulate ? 1.0f : 0.0f;
    // dinp (N,C) = dout (N,OC) @ weight (OC,C): column-major dinp^T (C x N) = weight^T (C x OC,
    // ld C as stored) . dout^T (OC x N, ld OC as stored).
    CK_BLAS(cublasSgemm(cx->blas, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, weight, C, dout, OC,
                        &beta, dinp, C));
    // dweight (OC,C) += dout^T (OC,N) @ inp (N,C): column-major dweight^T (C x OC) =
    // inp^T (C x N, as stored) . dout (N x OC: the stored OC x N transposed).
    CK_BLAS(cublasSgemm(cx->blas, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout, OC,
                        &one, dweight, C));
    if (dbias != NULL) {
        int R = colsum_chunks(N);
        const char *e = gt_cuda_scratch(cx, (size_t)R * OC * sizeof(float));
        if (e != NULL) {
            return e;
        }
        float *p0 = (float *)cx->scratch;
        dim3 grid((unsigned int)((OC + CS_COLS - 1) / CS_COLS), (unsigned int)R);
        colsum_partial_kernel<0><<<grid, dim3(CS_COLS, CS_ROWS), 0, cx->stream>>>(
            p0, NULL, dout, NULL, NULL, NULL, N, OC, R);
        CK_LAUNCH();
        colsum_final_kernel<<<(OC + 127) / 128, 128, 0, cx->stream>>>(dbias, p0, R, OC);
        CK_LAUNCH();
    }
    return NULL;
}
