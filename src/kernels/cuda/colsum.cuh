// Private to src/kernels/cuda/: the deterministic column sums that layernorm's and matmul's
// backward passes share (dweight, dbias). Internal linkage: each including file gets its own.
#ifndef GT_KERNELS_CUDA_COLSUM_CUH
#define GT_KERNELS_CUDA_COLSUM_CUH

#include "common.cuh"

// ---- column sums (deterministic two-stage) -----------------------------------------------------
// Stage 1: block (32, 8) covers 32 columns of one chunk of rows; part[r][c] = sum over the
// chunk. Stage 2: one thread per column adds part[0..R) in order to out[c] (+=).

#define CS_COLS 32
#define CS_ROWS 8

static inline int colsum_chunks(int N)
{
    int R = (N + 63) / 64;
    return R < 1 ? 1 : R > 128 ? 128 : R;
}

// mode 0: part0 = sum dout. mode 1 (layernorm): part0 = sum (x-m)*s*d, part1 = sum d.
template <int MODE>
__global__ void colsum_partial_kernel(float *part0, float *part1, const float *dout,
                                      const float *inp, const float *mean, const float *rstd,
                                      int N, int C, int R)
{
    __shared__ float s0[CS_ROWS][CS_COLS];
    __shared__ float s1[CS_ROWS][CS_COLS];
    int c = blockIdx.x * CS_COLS + threadIdx.x;
    int r = blockIdx.y;
    int per = (N + R - 1) / R;
    int lo = r * per, hi = min(N, lo + per);
    float a0 = 0.0f, a1 = 0.0f;
    if (c < C) {
        for (int n = lo + threadIdx.y; n < hi; n += CS_ROWS) {
            float d = dout[(size_t)n * C + c];
            if (MODE == 0) {
                a0 += d;
            } else {
                float norm = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
                a0 += norm * d;
                a1 += d;
            }
        }
    }
    s0[threadIdx.y][threadIdx.x] = a0;
    s1[threadIdx.y][threadIdx.x] = a1;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t0 = 0.0f, t1 = 0.0f;
        for (int y = 0; y < CS_ROWS; y++) {
            t0 += s0[y][threadIdx.x];
            t1 += s1[y][threadIdx.x];
        }
        part0[(size_t)r * C + c] = t0;
        if (MODE == 1) {
            part1[(size_t)r * C + c] = t1;
        }
    }
}

static __global__ void colsum_final_kernel(float *out, const float *part, int R, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    float acc = 0.0f;
    for (int r = 0; r < R; r++) {
        acc += part[(size_t)r * C + c];
    }
    out[c] += acc;
}

#endif
