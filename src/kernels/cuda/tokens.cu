// CUDA kernels: token checks (run before any kernel that indexes by token) and the batch gather.
#include "common.cuh"

// ---- token checks ------------------------------------------------------------------------------

__global__ void first_bad_i32_kernel(unsigned long long *flag, const int32_t *x, size_t n,
                                     long long V)
{
    GRID_STRIDE(i, n)
    {
        if (x[i] < 0 || (long long)x[i] >= V) {
            atomicMin(flag, (unsigned long long)i);
        }
    }
}

__global__ void first_bad_u16_kernel(unsigned long long *flag, const uint16_t *x, size_t n,
                                     long long V)
{
    GRID_STRIDE(i, n)
    {
        if ((long long)x[i] >= V) {
            atomicMin(flag, (unsigned long long)i);
        }
    }
}

static const char *flag_read(gt_cuda_ctx *cx, size_t *first_bad, size_t n)
{
    unsigned long long h = 0;
    CK(cudaMemcpyAsync(&h, cx->flag, sizeof h, cudaMemcpyDeviceToHost, cx->stream));
    CK(cudaStreamSynchronize(cx->stream));
    *first_bad = h == ~0ull ? n : (size_t)h;
    return NULL;
}

const char *gt_cuda_first_bad_i32(gt_cuda_ctx *cx, size_t *first_bad, const int32_t *x, size_t n,
                                  int64_t V)
{
    *first_bad = 0;
    CK(cudaMemsetAsync(cx->flag, 0xff, sizeof *cx->flag, cx->stream));
    first_bad_i32_kernel<<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(cx->flag, x, n,
                                                                               (long long)V);
    CK_LAUNCH();
    return flag_read(cx, first_bad, n);
}

const char *gt_cuda_first_bad_u16(gt_cuda_ctx *cx, size_t *first_bad, const uint16_t *x,
                                  size_t n, int64_t V)
{
    *first_bad = 0;
    CK(cudaMemsetAsync(cx->flag, 0xff, sizeof *cx->flag, cx->stream));
    first_bad_u16_kernel<<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(cx->flag, x, n,
                                                                               (long long)V);
    CK_LAUNCH();
    return flag_read(cx, first_bad, n);
}


// ---- tokens_gather -----------------------------------------------------------------------------

__global__ void tokens_gather_kernel(int32_t *inp, int32_t *tgt, const uint16_t *src, size_t N)
{
    GRID_STRIDE(i, N)
    {
        inp[i] = src[i];
        tgt[i] = src[i + 1];
    }
}

const char *gt_cuda_tokens_gather(gt_cuda_ctx *cx, int32_t *inp, int32_t *tgt,
                                  const uint16_t *src, size_t N)
{
    tokens_gather_kernel<<<blocks_for(N, kThreads), kThreads, 0, cx->stream>>>(inp, tgt, src, N);
    CK_LAUNCH();
    return NULL;
}
