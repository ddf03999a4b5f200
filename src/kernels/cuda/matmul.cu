// CUDA kernels: matmuls (cuBLASLt forward with the bias fused when every pointer is 16-byte
// aligned, cuBLAS otherwise and for every backward product). Plain fp32: CUBLAS_DEFAULT_MATH
// and CUBLAS_COMPUTE_32F, never TF32.
#include "common.cuh"
#include "colsum.cuh"

// ---- matmul ------------------------------------------------------------------------------------
// Row-major out (N,OC) = inp (N,C) @ weight (OC,C)^T is, column-major, out^T (OC x N) =
// weight^T (OC x C) . inp^T (C x N): cuBLAS sees weight as a C x OC matrix (ld C) transposed and
// inp as C x N (ld C), out as OC x N (ld OC).

__global__ void add_bias_kernel(float *out, const float *bias, int N, int OC)
{
    size_t n = (size_t)N * OC;
    GRID_STRIDE(i, n)
    {
        out[i] += bias[i % (size_t)OC];
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

// cuBLASLt with the bias in the epilogue. *done = false when no algorithm fits (the caller then
// takes the cuBLAS path).
static const char *matmul_forward_lt(gt_cuda_ctx *cx, bool *done, float *out, const float *inp,
                                     const float *weight, const float *bias, int N, int C, int OC)
{
    *done = false;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    const char *err = NULL;
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    size_t ws = GT_CUDA_LT_WORKSPACE_BYTES;
    uint32_t al_a = alignment_of(weight), al_b = alignment_of(inp), al_c = alignment_of(out);
    cublasLtMatmulHeuristicResult_t heur;
    int nres = 0;
    float one = 1.0f, zero = 0.0f;
#define LT(call)                                    \
    do {                                            \
        st = (call);                                \
        if (st != CUBLAS_STATUS_SUCCESS) {          \
            err = cublasGetStatusString(st);        \
            goto out;                               \
        }                                           \
    } while (0)
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias != NULL) {
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    }
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, (uint64_t)C, (uint64_t)OC, (int64_t)C));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, (uint64_t)C, (uint64_t)N, (int64_t)C));
    LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, (uint64_t)OC, (uint64_t)N, (int64_t)OC));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    // The heuristic assumes 256-byte aligned operands unless told otherwise.
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                            &al_a, sizeof al_a));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                            &al_b, sizeof al_b));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                            &al_c, sizeof al_c));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                            &al_c, sizeof al_c));
    st = cublasLtMatmulAlgoGetHeuristic(cx->lt, desc, la, lb, lc, lc, pref, 1, &heur, &nres);
    if (st != CUBLAS_STATUS_SUCCESS || nres < 1) {
        goto out;  // not an error: the cuBLAS path runs instead
    }
    LT(cublasLtMatmul(cx->lt, desc, &one, weight, la, inp, lb, &zero, out, lc, out, lc,
                      &heur.algo, cx->lt_workspace, ws, cx->stream));
    *done = true;
#undef LT
out:
    if (pref != NULL) {
        cublasLtMatmulPreferenceDestroy(pref);
    }
    if (lc != NULL) {
        cublasLtMatrixLayoutDestroy(lc);
    }
    if (lb != NULL) {
        cublasLtMatrixLayoutDestroy(lb);
    }
    if (la != NULL) {
        cublasLtMatrixLayoutDestroy(la);
    }
    if (desc != NULL) {
        cublasLtMatmulDescDestroy(desc);
    }
    return err;
}

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
        add_bias_kernel<<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(out, bias, N, OC);
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
