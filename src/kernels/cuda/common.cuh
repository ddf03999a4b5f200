// Private to src/kernels/cuda/: what every kernel family's file shares. Error macros (a
// launcher returns NULL or a static message), the grid-stride helpers, and the fixed-tree warp
// and block reductions that keep every sum in an order fixed by the shapes.
//
// Determinism: every reduction runs in an order fixed by the shapes (warp and block trees of a
// fixed shape, column sums in fixed row chunks summed in chunk order, the encoder's scatter in
// b, t order like the cpu kernel). No floating-point atomics.
//
// Aliasing: gelu_backward's dinp may be dout, softmax_crossentropy writes its logits in place;
// no kernel marks pointers __restrict__, so any such aliasing stays correct.
//
// Legend: B = batch, T = time, C = channels, NH = heads, hs = C/NH, OC = output channels,
// N = rows (B*T) or elements, V = real vocab, Vp = padded vocab, R = row chunks of a column sum.
#ifndef GT_KERNELS_CUDA_COMMON_CUH
#define GT_KERNELS_CUDA_COMMON_CUH

#include <gputravel/kernels_cuda.h>

#include <float.h>
#include <math.h>

#define CK(call)                                  \
    do {                                          \
        cudaError_t e_ = (call);                  \
        if (e_ != cudaSuccess) {                  \
            return cudaGetErrorString(e_);        \
        }                                         \
    } while (0)
#define CK_LAUNCH() CK(cudaGetLastError())
#define CK_BLAS(call)                             \
    do {                                          \
        cublasStatus_t s_ = (call);               \
        if (s_ != CUBLAS_STATUS_SUCCESS) {        \
            return cublasGetStatusString(s_);     \
        }                                         \
    } while (0)

static const int kThreads = 256;

// Blocks for a grid-stride loop over n items (at least 1, at most 2^20: the loops cover the rest).
static inline unsigned int blocks_for(size_t n, int threads)
{
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    if (b < 1) {
        b = 1;
    }
    if (b > ((size_t)1 << 20)) {
        b = (size_t)1 << 20;
    }
    return (unsigned int)b;
}

#define GRID_STRIDE(i, n)                                                                    \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
         i += (size_t)gridDim.x * blockDim.x)

// ---- reductions inside a warp / block (fixed trees) --------------------------------------------

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

// Block-wide reductions for blockDim.x a multiple of 32 (<= 1024); every thread gets the result.
// `sh` holds 32 floats. Ends with a barrier, so sh may be reused at once.
static __device__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0) {
        sh[warp] = v;
    }
    __syncthreads();
    float r = lane < nwarps ? sh[lane] : 0.0f;
    r = warp_sum(r);
    __syncthreads();
    return r;
}

static __device__ float block_max(float v, float *sh)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_max(v);
    if (lane == 0) {
        sh[warp] = v;
    }
    __syncthreads();
    float r = lane < nwarps ? sh[lane] : -INFINITY;
    r = warp_max(r);
    __syncthreads();
    return r;
}

#endif
