// CUDA kernels: the fused softmax + cross-entropy (and its backward, in place).
#include "common.cuh"

// ---- fused softmax + cross-entropy -------------------------------------------------------------
// One block per row. The target logit is read before anything is written; with grad the row is
// overwritten by dloss * (softmax - onehot), padded columns 0 (the cpu kernel's arithmetic, in
// the same order per element).

#define XENT_THREADS 512

__global__ void softmax_xent_kernel(float *losses, float *logits, const int32_t *targets, int V,
                                    int Vp, int grad, float dloss)
{
    __shared__ float sh[32];
    __shared__ float ltgt_sh;
    size_t n = blockIdx.x;
    float *l = logits + n * (size_t)Vp;
    int tgt = targets[n];
    if (threadIdx.x == 0) {
        ltgt_sh = l[tgt];
    }
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        m = fmaxf(m, l[i]);
    }
    m = block_max(m, sh);  // its barriers also publish ltgt_sh
    float s = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        s += expf(l[i] - m);
    }
    s = block_sum(s, sh);  // every read of the row is done once this returns
    if (threadIdx.x == 0) {
        losses[n] = (float)(log((double)s) + (double)m - (double)ltgt_sh);
    }
    if (grad) {
        float sc = dloss / s;
        for (int i = threadIdx.x; i < Vp; i += blockDim.x) {
            float p = 0.0f;
            if (i < V) {
                p = expf(l[i] - m) * sc;
                if (i == tgt) {
                    p -= dloss;
                }
            }
            l[i] = p;
        }
    }
}

const char *gt_cuda_softmax_crossentropy(gt_cuda_ctx *cx, float *losses, float *logits,
                                         const int32_t *targets, int BT, int V, int Vp, int grad,
                                         float dloss)
{
    softmax_xent_kernel<<<(unsigned int)BT, XENT_THREADS, 0, cx->stream>>>(losses, logits,
                                                                          targets, V, Vp, grad,
                                                                          dloss);
    CK_LAUNCH();
    return NULL;
}
