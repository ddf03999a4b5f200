// CUDA kernels: the encoder (token + position embeddings), forward and backward.
#include "common.cuh"

// ---- encoder -----------------------------------------------------------------------------------

__global__ void encoder_forward_kernel(float *out, const int32_t *inp, const float *wte,
                                       const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    GRID_STRIDE(i, n)
    {
        size_t bt = i / (size_t)C;
        int c = (int)(i % (size_t)C), t = (int)(bt % (size_t)T);
        out[i] = wte[(size_t)inp[bt] * C + c] + wpe[(size_t)t * C + c];
    }
}

const char *gt_cuda_encoder_forward(gt_cuda_ctx *cx, float *out, const int32_t *inp,
                                    const float *wte, const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    encoder_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(out, inp, wte,
                                                                                 wpe, B, T, C);
    CK_LAUNCH();
    return NULL;
}

// dwpe (t, c) += dout (b, t, c) for b in order: one thread per (t, c).
__global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t n = (size_t)T * C;
    GRID_STRIDE(i, n)
    {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) {
            acc += dout[(size_t)b * T * C + i];
        }
        dwpe[i] = acc;
    }
}

// dwte (inp[bt], c) += dout (bt, c) for bt in order: one thread per channel, so rows that share
// a token are added one after another, in the cpu kernel's order, without atomics.
__global__ void encoder_backward_wte_kernel(float *dwte, const float *dout, const int32_t *inp,
                                            int BT, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    for (int bt = 0; bt < BT; bt++) {
        float *w = dwte + (size_t)inp[bt] * C + c;
        *w += dout[(size_t)bt * C + c];
    }
}

const char *gt_cuda_encoder_backward(gt_cuda_ctx *cx, float *dwte, float *dwpe, const float *dout,
                                     const int32_t *inp, int B, int T, int C)
{
    size_t n = (size_t)T * C;
    encoder_backward_wpe_kernel<<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(dwpe, dout,
                                                                                      B, T, C);
    CK_LAUNCH();
    encoder_backward_wte_kernel<<<(C + 127) / 128, 128, 0, cx->stream>>>(dwte, dout, inp, B * T,
                                                                         C);
    CK_LAUNCH();
    return NULL;
}
