// CUDA kernels: layernorm, forward and backward.
#include "common.cuh"
#include "colsum.cuh"

// ---- layernorm ---------------------------------------------------------------------------------

#define LN_EPS 1e-5f

// One warp per row.
__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, int N, int C)
{
    int row = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = threadIdx.x % 32;
    if (row >= N) {
        return;
    }
    const float *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) {
        s += x[c];
    }
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    v = warp_sum(v) / C;
    float rs = 1.0f / sqrtf(v + LN_EPS);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        o[c] = (rs * (x[c] - m)) * weight[c] + bias[c];
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

const char *gt_cuda_layernorm_forward(gt_cuda_ctx *cx, float *out, float *mean, float *rstd,
                                      const float *inp, const float *weight, const float *bias,
                                      int N, int C)
{
    size_t threads = (size_t)N * 32;
    layernorm_forward_kernel<<<(unsigned int)((threads + kThreads - 1) / kThreads), kThreads, 0,
                               cx->stream>>>(out, mean, rstd, inp, weight, bias, N, C);
    CK_LAUNCH();
    return NULL;
}

// dinp (N,C) +=: one warp per row.
__global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                               const float *weight, const float *mean,
                                               const float *rstd, int N, int C)
{
    int row = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = threadIdx.x % 32;
    if (row >= N) {
        return;
    }
    const float *d = dout + (size_t)row * C;
    const float *x = inp + (size_t)row * C;
    float m = mean[row], s = rstd[row];
    float dm = 0.0f, dnm = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * s;
        float dnorm = weight[c] * d[c];
        dm += dnorm;
        dnm += dnorm * norm;
    }
    dm = warp_sum(dm) / C;
    dnm = warp_sum(dnm) / C;
    float *di = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * s;
        float dnorm = weight[c] * d[c];
        di[c] += (dnorm - dm - norm * dnm) * s;
    }
}

const char *gt_cuda_layernorm_backward(gt_cuda_ctx *cx, float *dinp, float *dweight, float *dbias,
                                       const float *dout, const float *inp, const float *weight,
                                       const float *mean, const float *rstd, int N, int C)
{
    size_t threads = (size_t)N * 32;
    layernorm_backward_dinp_kernel<<<(unsigned int)((threads + kThreads - 1) / kThreads),
                                     kThreads, 0, cx->stream>>>(dinp, dout, inp, weight, mean,
                                                                rstd, N, C);
    CK_LAUNCH();
    int R = colsum_chunks(N);
    const char *e = gt_cuda_scratch(cx, (size_t)2 * R * C * sizeof(float));
    if (e != NULL) {
        return e;
    }
    float *p0 = (float *)cx->scratch, *p1 = p0 + (size_t)R * C;
    dim3 grid((unsigned int)((C + CS_COLS - 1) / CS_COLS), (unsigned int)R);
    colsum_partial_kernel<1><<<grid, dim3(CS_COLS, CS_ROWS), 0, cx->stream>>>(
        p0, p1, dout, inp, mean, rstd, N, C, R);
    CK_LAUNCH();
    colsum_final_kernel<<<(C + 127) / 128, 128, 0, cx->stream>>>(dweight, p0, R, C);
    CK_LAUNCH();
    colsum_final_kernel<<<(C + 127) / 128, 128, 0, cx->stream>>>(dbias, p1, R, C);
    CK_LAUNCH();
    return NULL;
}
