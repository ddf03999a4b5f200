// CUDA kernels: the release ops (loss_mean, norm_release) and gradient clipping on the device.
// Release results are one scalar: one thread computes it in the cpu kernel's order, so a
// released loss is the same number on every backend.
#include "mantissa.h"
#include "common.cuh"

__global__ void loss_mean_kernel(float *out, const float *losses, int N, int bits)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double s = 0.0;
        for (int i = 0; i < N; i++) {
            s += losses[i];
        }
        *out = gt_mantissa_round((float)(s / (double)N), bits);
    }
}

const char *gt_cuda_loss_mean(gt_cuda_ctx *cx, float *out, const float *losses, int N, int bits)
{
    loss_mean_kernel<<<1, 1, 0, cx->stream>>>(out, losses, N, bits);
    CK_LAUNCH();
    return NULL;
}

__global__ void norm_release_kernel(float *out, const double *sumsq, int bits)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *out = gt_mantissa_round((float)sqrt(*sumsq), bits);
    }
}

const char *gt_cuda_norm_release(gt_cuda_ctx *cx, float *out, const double *sumsq, int bits)
{
    norm_release_kernel<<<1, 1, 0, cx->stream>>>(out, sumsq, bits);
    CK_LAUNCH();
    return NULL;
}

// The scale is computed per thread from the same double, so every thread gets the same float.
__global__ void clip_grads_kernel(float *grads, const double *sumsq, size_t N, float clip)
{
    float norm = (float)sqrt(*sumsq);
    if (!(clip > 0.0f && norm > clip)) {
        return;
    }
    float scale = clip / norm;
    GRID_STRIDE(i, N) { grads[i] *= scale; }
}

const char *gt_cuda_clip_grads(gt_cuda_ctx *cx, float *grads, const double *sumsq, size_t N,
                               float clip)
{
    clip_grads_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(grads, sumsq, N,
                                                                              clip);
    CK_LAUNCH();
    return NULL;
}
