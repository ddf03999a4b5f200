// CUDA kernels: GELU and the residual add, forward and backward.
#include "common.cuh"

// ---- GELU (tanh approximation), residual -------------------------------------------------------
// The cpu kernel's scalar form, expression for expression (cpu_kernels.c): 0.5 (1 + tanh(u)) =
// sigmoid(2u) = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3). Built with -fmad=false,
// so each product is rounded as on the cpu; what differs is expf (CUDA's, <= 2 ulp, vs glibc's).

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t N)
{
    GRID_STRIDE(i, N)
    {
        float x = inp[i], u = x + 0.044715f * x * x * x;
        out[i] = x / (1.0f + expf(-2.0f * GELU_SCALE * u));
    }
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t N)
{
    GRID_STRIDE(i, N)
    {
        float x = inp[i], u = x + 0.044715f * x * x * x;
        float sig = 1.0f / (1.0f + expf(-2.0f * GELU_SCALE * u));
        float local = sig + x * 2.0f * sig * (1.0f - sig) * GELU_SCALE *
                                (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];  // read before write in the same thread: dinp may be dout
    }
}

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t N)
{
    GRID_STRIDE(i, N) { out[i] = a[i] + b[i]; }
}

__global__ void residual_backward_kernel(float *d1, float *d2, const float *dout, size_t N)
{
    GRID_STRIDE(i, N)
    {
        float d = dout[i];
        d1[i] += d;
        d2[i] += d;
    }
}

const char *gt_cuda_gelu_forward(gt_cuda_ctx *cx, float *out, const float *inp, size_t N)
{
    gelu_forward_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(out, inp, N);
    CK_LAUNCH();
    return NULL;
}

const char *gt_cuda_gelu_backward(gt_cuda_ctx *cx, float *dinp, const float *inp,
                                  const float *dout, size_t N)
{
    gelu_backward_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(dinp, inp, dout,
                                                                               N);
    CK_LAUNCH();
    return NULL;
}

const char *gt_cuda_residual_forward(gt_cuda_ctx *cx, float *out, const float *inp1,
                                     const float *inp2, size_t N)
{
    residual_forward_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(out, inp1,
                                                                                  inp2, N);
    CK_LAUNCH();
    return NULL;
}

const char *gt_cuda_residual_backward(gt_cuda_ctx *cx, float *dinp1, float *dinp2,
                                      const float *dout, size_t N)
{
    residual_backward_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(dinp1, dinp2,
                                                                                   dout, N);
    CK_LAUNCH();
    return NULL;
}
