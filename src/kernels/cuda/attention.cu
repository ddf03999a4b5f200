// CUDA kernels: causal self-attention, forward and backward.
#include "common.cuh"

// ---- attention ---------------------------------------------------------------------------------
// Per (b, h): Q, K, V are (T, hs) row-major after a permute to (B,NH,T,hs); batched cuBLAS does
// the four products, our kernels the causal softmax and its backward. Column-major reading of a
// row-major (T, hs) matrix is its transpose (hs x T, ld hs); each call below says what it forms.

// qkv (B,T,3,NH,hs) -> q, k, v (B,NH,T,hs)
__global__ void permute_qkv_kernel(float *q, float *k, float *v, const float *inp, int B, int T,
                                   int NH, int hs)
{
    size_t n = (size_t)B * NH * T * hs;
    int C = NH * hs;
    GRID_STRIDE(i, n)
    {
        int e = (int)(i % (size_t)hs);
        size_t r = i / (size_t)hs;
        int t = (int)(r % (size_t)T);
        r /= (size_t)T;
        int h = (int)(r % (size_t)NH);
        int b = (int)(r / (size_t)NH);
        const float *row = inp + ((size_t)b * T + t) * 3 * C + (size_t)h * hs + e;
        q[i] = row[0];
        k[i] = row[C];
        v[i] = row[2 * C];
    }
}

// x (B,T,NH,hs) -> y (B,NH,T,hs)   (dout into head-major order)
__global__ void permute_btc_kernel(float *y, const float *x, int B, int T, int NH, int hs)
{
    size_t n = (size_t)B * NH * T * hs;
    int C = NH * hs;
    GRID_STRIDE(i, n)
    {
        int e = (int)(i % (size_t)hs);
        size_t r = i / (size_t)hs;
        int t = (int)(r % (size_t)T);
        r /= (size_t)T;
        int h = (int)(r % (size_t)NH);
        int b = (int)(r / (size_t)NH);
        y[i] = x[((size_t)b * T + t) * C + (size_t)h * hs + e];
    }
}

// y (B,NH,T,hs) -> out (B,T,NH,hs)
__global__ void unpermute_kernel(float *out, const float *y, int B, int T, int NH, int hs)
{
    size_t n = (size_t)B * NH * T * hs;
    int C = NH * hs;
    GRID_STRIDE(i, n)
    {
        int e = (int)(i % (size_t)hs);
        size_t r = i / (size_t)hs;
        int t = (int)(r % (size_t)T);
        r /= (size_t)T;
        int h = (int)(r % (size_t)NH);
        int b = (int)(r / (size_t)NH);
        out[((size_t)b * T + t) * C + (size_t)h * hs + e] = y[i];
    }
}

// dq, dk, dv (B,NH,T,hs) -> dinp (B,T,3,NH,hs), every element written
__global__ void unpermute_qkv_kernel(float *dinp, const float *dq, const float *dk,
                                     const float *dv, int B, int T, int NH, int hs)
{
    size_t n = (size_t)B * NH * T * hs;
    int C = NH * hs;
    GRID_STRIDE(i, n)
    {
        int e = (int)(i % (size_t)hs);
        size_t r = i / (size_t)hs;
        int t = (int)(r % (size_t)T);
        r /= (size_t)T;
        int h = (int)(r % (size_t)NH);
        int b = (int)(r / (size_t)NH);
        float *row = dinp + ((size_t)b * T + t) * 3 * C + (size_t)h * hs + e;
        row[0] = dq[i];
        row[C] = dk[i];
        row[2 * C] = dv[i];
    }
}

// att rows (B*NH*T rows of T) hold scaled scores; in place: causal softmax, 0 above the
// diagonal. One warp per row (row index = (b*NH + h)*T + t).
__global__ void softmax_causal_kernel(float *att, int rows, int T)
{
    int row = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = threadIdx.x % 32;
    if (row >= rows) {
        return;
    }
    int t = row % T;
    float *a = att + (size_t)row * T;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32) {
        m = fmaxf(m, a[j]);
    }
    m = warp_max(m);
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        s += expf(a[j] - m);
    }
    s = warp_sum(s);
    float inv = 1.0f / s;
    for (int j = lane; j < T; j += 32) {
        a[j] = j <= t ? expf(a[j] - m) * inv : 0.0f;
    }
}

// In place: datt -> dpreatt = att * (datt - sum(att * datt)) * scale below and on the diagonal,
// 0 above it. One warp per row.
__global__ void softmax_causal_backward_kernel(float *datt, const float *att, int rows, int T,
                                               float scale)
{
    int row = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = threadIdx.x % 32;
    if (row >= rows) {
        return;
    }
    int t = row % T;
    float *d = datt + (size_t)row * T;
    const float *a = att + (size_t)row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        dot += a[j] * d[j];
    }
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32) {
        d[j] = j <= t ? a[j] * (d[j] - dot) * scale : 0.0f;
    }
}

// dst row = src row with everything above the diagonal 0. One warp per row.
__global__ void causal_mask_copy_kernel(float *dst, const float *src, int rows, int T)
{
    int row = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = threadIdx.x % 32;
    if (row >= rows) {
        return;
    }
    int t = row % T;
    for (int j = lane; j < T; j += 32) {
        dst[(size_t)row * T + j] = j <= t ? src[(size_t)row * T + j] : 0.0f;
    }
}

static unsigned int warp_rows_blocks(size_t rows)
{
    return (unsigned int)((rows * 32 + kThreads - 1) / kThreads);
}

const char *gt_cuda_attention_forward(gt_cuda_ctx *cx, float *out, float *att, const float *inp,
                                      int B, int T, int C, int NH)
{
    int hs = C / NH, batch = B * NH;
    size_t btc = (size_t)B * T * C;
    const char *e = gt_cuda_scratch(cx, 4 * btc * sizeof(float));
    if (e != NULL) {
        return e;
    }
    float *q = (float *)cx->scratch, *k = q + btc, *v = k + btc, *y = v + btc;
    permute_qkv_kernel<<<blocks_for(btc, kThreads), kThreads, 0, cx->stream>>>(q, k, v, inp, B,
                                                                               T, NH, hs);
    CK_LAUNCH();
    float scale = 1.0f / sqrtf((float)hs), one = 1.0f, zero = 0.0f;
    long long sq = (long long)T * hs, sa = (long long)T * T;
    // att (T,T) = scale * Q K^T: column-major att^T = K . Q^T, i.e. (K^T as stored)^T . Q^T.
    CK_BLAS(cublasSgemmStridedBatched(cx->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &scale, k, hs,
                                      sq, q, hs, sq, &zero, att, T, sa, batch));
    size_t rows = (size_t)batch * T;
    softmax_causal_kernel<<<warp_rows_blocks(rows), kThreads, 0, cx->stream>>>(att, (int)rows, T);
    CK_LAUNCH();
    // y (T,hs) = att V: column-major y^T = V^T . att^T, both as stored.
    CK_BLAS(cublasSgemmStridedBatched(cx->blas, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &one, v, hs,
                                      sq, att, T, sa, &zero, y, hs, sq, batch));
    unpermute_kernel<<<blocks_for(btc, kThreads), kThreads, 0, cx->stream>>>(out, y, B, T, NH,
                                                                             hs);
    CK_LAUNCH();
    return NULL;
}

const char *gt_cuda_attention_backward(gt_cuda_ctx *cx, float *dinp, const float *dout,
                                       const float *inp, const float *att, int B, int T, int C,
                                       int NH)
{
    int hs = C / NH, batch = B * NH;
    size_t btc = (size_t)B * T * C, natt = (size_t)batch * T * T;
    const char *e = gt_cuda_scratch(cx, (7 * btc + natt) * sizeof(float));
    if (e != NULL) {
        return e;
    }
    float *q = (float *)cx->scratch, *k = q + btc, *v = k + btc, *dO = v + btc;
    float *dq = dO + btc, *dk = dq + btc, *dv = dk + btc, *datt = dv + btc;
    permute_qkv_kernel<<<blocks_for(btc, kThreads), kThreads, 0, cx->stream>>>(q, k, v, inp, B,
                                                                               T, NH, hs);
    CK_LAUNCH();
    permute_btc_kernel<<<blocks_for(btc, kThreads), kThreads, 0, cx->stream>>>(dO, dout, B, T,
                                                                               NH, hs);
    CK_LAUNCH();
    float scale = 1.0f / sqrtf((float)hs), one = 1.0f, zero = 0.0f;
    long long sq = (long long)T * hs, sa = (long long)T * T;
    // datt (T,T) = dO V^T: column-major datt^T = V . dO^T = (V^T as stored)^T . (dO^T as stored)
    CK_BLAS(cublasSgemmStridedBatched(cx->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &one, v, hs,
                                      sq, dO, hs, sq, &zero, datt, T, sa, batch));
    size_t rows = (size_t)batch * T;
    softmax_causal_backward_kernel<<<warp_rows_blocks(rows), kThreads, 0, cx->stream>>>(
        datt, att, (int)rows, T, scale);
    CK_LAUNCH();
    // dq (T,hs) = dpre K: column-major dq^T = K^T . dpre^T, both as stored.
    CK_BLAS(cublasSgemmStridedBatched(cx->blas, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, &one, k, hs,
                                      sq, datt, T, sa, &zero, dq, hs, sq, batch));
    // dk (T,hs) = dpre^T Q: column-major dk^T = Q^T . dpre = (Q^T stored) . (dpre^T stored)^T
    CK_BLAS(cublasSgemmStridedBatched(cx->blas, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, &one, q, hs,
                                      sq, datt, T, sa, &zero, dk, hs, sq, batch));
    // dv reads att as a whole matrix; the cpu kernel reads only t2 <= t. Mask a copy (into the
    // dpre area, no longer needed) so that the result never depends on att above the diagonal.
    causal_mask_copy_kernel<<<warp_rows_blocks(rows), kThreads, 0, cx->stream>>>(datt, att,
                                                                                 (int)rows, T);
    CK_LAUNCH();
    // dv (T,hs) = att^T dO: column-major dv^T = dO^T . att = (dO^T as stored) . (att^T stored)^T
    CK_BLAS(cublasSgemmStridedBatched(cx->blas, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, &one, dO, hs,
                                      sq, datt, T, sa, &zero, dv, hs, sq, batch));
    unpermute_qkv_kernel<<<blocks_for(btc, kThreads), kThreads, 0, cx->stream>>>(dinp, dq, dk, dv,
                                                                                 B, T, NH, hs);
    CK_LAUNCH();
    return NULL;
}
