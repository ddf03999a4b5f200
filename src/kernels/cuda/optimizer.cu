// CUDA kernels: the gradient norm (sum of squares) and AdamW.
#include "common.cuh"

// ---- sum of squares, AdamW ---------------------------------------------------------------------

#define SUMSQ_BLOCK 16384
#define SUMSQ_THREADS 256

// part[blk] = sum over elements [blk*16384, ...) in double, by a fixed tree.
__global__ void sumsq_partial_kernel(double *part, const float *x, size_t N)
{
    __shared__ double sh[SUMSQ_THREADS / 32];
    size_t lo = (size_t)blockIdx.x * SUMSQ_BLOCK;
    size_t hi = lo + SUMSQ_BLOCK < N ? lo + SUMSQ_BLOCK : N;
    double s = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += SUMSQ_THREADS) {
        s += (double)x[i] * x[i];
    }
    s = warp_sum_d(s);
    if (threadIdx.x % 32 == 0) {
        sh[threadIdx.x / 32] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < SUMSQ_THREADS / 32; w++) {
            t += sh[w];
        }
        part[blockIdx.x] = t;
    }
}

__global__ void sumsq_final_kernel(double *out, const double *part, size_t nblocks)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double t = 0.0;
        for (size_t b = 0; b < nblocks; b++) {
            t += part[b];
        }
        *out = t;
    }
}

const char *gt_cuda_sum_of_squares(gt_cuda_ctx *cx, double *out, const float *x, size_t N)
{
    size_t nblocks = (N + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    if (nblocks > 0x7fffffffu) {
        return "sum_of_squares: too many blocks";
    }
    const char *e = gt_cuda_scratch(cx, nblocks * sizeof(double));
    if (e != NULL) {
        return e;
    }
    double *part = (double *)cx->scratch;
    sumsq_partial_kernel<<<(unsigned int)nblocks, SUMSQ_THREADS, 0, cx->stream>>>(part, x, N);
    CK_LAUNCH();
    sumsq_final_kernel<<<1, 1, 0, cx->stream>>>(out, part, nblocks);
    CK_LAUNCH();
    return NULL;
}

__global__ void adamw_kernel(float *params, float *m, float *v, const float *grads, size_t N,
                             float lr, float beta1, float beta2, float eps, float wd, float bc1,
                             float bc2, float grad_scale)
{
    GRID_STRIDE(i, N)
    {
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

const char *gt_cuda_adamw(gt_cuda_ctx *cx, float *params, float *m, float *v, const float *grads,
                          size_t N, float lr, float beta1, float beta2, float eps, float wd,
                          float bc1, float bc2, float grad_scale)
{
    adamw_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(
        params, m, v, grads, N, lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
    CK_LAUNCH();
    return NULL;
}
