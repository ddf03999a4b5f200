// CUDA kernels: causal self-attention, forward and backward.
#include "common.cuh"

// ---- attention ---------------------------------------------------------------------------------
// Per (b, h): Q, K, V are (T, hs) row-major after a permute to (B,NH,T,hs); batched cuBLAS does
// the four products, our kernels the causal softmax and its backward. Column-major reading of a
// row-major (T, hs) matrix is its transpose (hs x T, ld hs); each call below says what it forms.

// The permutes' per-element / and % run in I: uint32_t when the element count allows
// (GT_CUDA_IDX32_MAX), size_t otherwise. Element i of a head-major (B,NH,T,hs) tensor sits at
// (b, t, h, e) of the row-major (B,T,NH,hs) one.
template <typename I>
struct head_index {
    I e, t, h, b;
    __device__ head_index(I i, I T, I NH, I hs)
    {
        I r = i / hs;
        e = i - r * hs;
        I r2 = r / T;
        t = r - r2 * T;
        b = r2 / NH;
        h = r2 - b * NH;
    }
};

#define HEAD_LOOP(I, i, n) \
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < (n); i += (I)gridDim.x * blockDim.x)

// qkv (B,T,3,NH,hs) -> q, k, v (B,NH,T,hs)
template <typename I>
__global__ void permute_qkv_kernel(float *q, float *k, float *v, const float *inp, I n, I T, I NH,
                                   I hs)
{
    I C = NH * hs;
    HEAD_LOOP(I, i, n)
    {
        head_index<I> x(i, T, NH, hs);
        const float *row = inp + ((size_t)x.b * T + x.t) * 3 * C + (size_t)x.h * hs + x.e;
        q[i] = row[0];
        k[i] = row[C];
        v[i] = row[2 * C];
    }
}

// x (B,T,NH,hs) -> y (B,NH,T,hs)   (dout into head-major order)
template <typename I>
__global__ void permute_btc_kernel(float *y, const float *xin, I n, I T, I NH, I hs)
{
    I C = NH * hs;
    HEAD_LOOP(I, i, n)
    {
        head_index<I> x(i, T, NH, hs);
        y[i] = xin[((size_t)x.b * T + x.t) * C + (size_t)x.h * hs + x.e];
    }
}

// y (B,NH,T,hs) -> out (B,T,NH,hs)
template <typename I>
__global__ void unpermute_kernel(float *out, const float *y, I n, I T, I NH, I hs)
{
    I C = NH * hs;
    HEAD_LOOP(I, i, n)
    {
        head_index<I> x(i, T, NH, hs);
        out[((size_t)x.b * T + x.t) * C + (size_t)x.h * hs + x.e] = y[i];
    }
}

// dq, dk, dv (B,NH,T,hs) -> dinp (B,T,3,NH,hs), every element written
template <typename I>
__global__ void unpermute_qkv_kernel(float *dinp, const float *dq, const float *dk,
                                     const float *dv, I n, I T, I NH, I hs)
{
    I C = NH * hs;
    HEAD_LOOP(I, i, n)
    {
        head_index<I> x(i, T, NH, hs);
        float *row = dinp + ((size_t)x.b * T + x.t) * 3 * C + (size_t)x.h * hs + x.e;
        row[0] = dq[i];
        row[C] = dk[i];
        row[2 * C] = dv[i];
    }
}

// Launches kernel<uint32_t> or kernel<size_t> over n = B*NH*T*hs elements.
#define LAUNCH_PERMUTE(kernel, n, T, NH, hs, ...)                                              \
    do {                                                                                       \
        if ((n) <= GT_CUDA_IDX32_MAX) {                                                        \
            kernel<uint32_t><<<blocks_for((n), kThreads), kThreads, 0, cx->stream>>>(          \
                __VA_ARGS__, (uint32_t)(n), (uint32_t)(T), (uint32_t)(NH), (uint32_t)(hs));   \
        } else {                                                                               \
            kernel<size_t><<<blocks_for((n), kThreads), kThreads, 0, cx->stream>>>(            \
                __VA_ARGS__, (size_t)(n), (size_t)(T), (size_t)(NH), (size_t)(hs));           \
        }                                                                                      \
        CK_LAUNCH();                                                                           \
    } while (0)

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
    LAUNCH_PERMUTE(permute_qkv_kernel, btc, T, NH, hs, q, k, v, inp);
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
    LAUNCH_PERMUTE(unpermute_kernel, btc, T, NH, hs, out, y);
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
    LAUNCH_PERMUTE(permute_qkv_kernel, btc, T, NH, hs, q, k, v, inp);
    LAUNCH_PERMUTE(permute_btc_kernel, btc, T, NH, hs, dO, dout);
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
    LAUNCH_PERMUTE(unpermute_qkv_kernel, btc, T, NH, hs, dinp, dq, dk, dv);
    return NULL;
}
