// CUDA kernels: the encoder (token + position embeddings), forward and backward.
#include "common.cuh"

#include <cub/device/device_radix_sort.cuh>

// ---- encoder -----------------------------------------------------------------------------------

// I: the index type of the per-element division (uint32_t when n <= GT_CUDA_IDX32_MAX, so the
// / and % are 32-bit; size_t otherwise).
template <typename I>
__global__ void encoder_forward_kernel(float *out, const int32_t *inp, const float *wte,
                                       const float *wpe, I n, I T, I C)
{
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += (I)gridDim.x * blockDim.x) {
        I bt = i / C, c = i - bt * C, t = bt % T;
        out[i] = wte[(size_t)inp[bt] * C + c] + wpe[(size_t)t * C + c];
    }
}

const char *gt_cuda_encoder_forward(gt_cuda_ctx *cx, float *out, const int32_t *inp,
                                    const float *wte, const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    if (n <= GT_CUDA_IDX32_MAX) {
        encoder_forward_kernel<uint32_t><<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(
            out, inp, wte, wpe, (uint32_t)n, (uint32_t)T, (uint32_t)C);
    } else {
        encoder_forward_kernel<size_t><<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(
            out, inp, wte, wpe, n, (size_t)T, (size_t)C);
    }
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

// ---- dwte: rows grouped by token, each group summed in b, t order ------------------------------
// The cpu kernel adds dout rows into dwte[token] in bt order. Here the positions are sorted by
// key = token * BT + bt (unique keys: any correct sort gives the same order, so the result does
// not depend on timing), and one thread per (group, channel) adds its group's rows in that
// order: the same additions in the same order as the cpu, bit for bit, with B*T/group x C
// threads instead of C. A token repeated r times costs its threads r dependent adds.

__global__ void wte_keys_kernel(uint32_t *keys, const int32_t *inp, uint32_t BT)
{
    uint32_t bt = blockIdx.x * blockDim.x + threadIdx.x;
    if (bt < BT) {
        keys[bt] = (uint32_t)inp[bt] * BT + bt;
    }
}

// grid (BT, channel blocks): block x = a sorted position; only the first position of each
// token's run does the work.
__global__ void encoder_backward_wte_sorted_kernel(float *dwte, const float *dout,
                                                   const uint32_t *sorted, uint32_t BT,
                                                   uint32_t C)
{
    uint32_t i = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    uint32_t tok = sorted[i] / BT;
    if (c >= C || (i > 0 && sorted[i - 1] / BT == tok)) {
        return;
    }
    float *w = dwte + (size_t)tok * C + c;
    float acc = *w;
    for (uint32_t j = i; j < BT && sorted[j] / BT == tok; j++) {
        acc += dout[(size_t)(sorted[j] - tok * BT) * C + c];
    }
    *w = acc;
}

// Beyond 32-bit keys (Vp * B*T >= 2^32): one thread per channel over every row in bt order.
__global__ void encoder_backward_wte_serial_kernel(float *dwte, const float *dout,
                                                   const int32_t *inp, int BT, int C)
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

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

static const char *encoder_backward_wte(gt_cuda_ctx *cx, float *dwte, const float *dout,
                                        const int32_t *inp, int BT, int C, int Vp)
{
    if ((uint64_t)Vp * (uint64_t)BT > (uint64_t)UINT32_MAX) {
        encoder_backward_wte_serial_kernel<<<(C + 127) / 128, 128, 0, cx->stream>>>(dwte, dout,
                                                                                    inp, BT, C);
        CK_LAUNCH();
        return NULL;
    }
    uint32_t n = (uint32_t)BT, maxkey = (uint32_t)((uint64_t)Vp * BT - 1);
    int bits = 1;
    while (bits < 32 && (maxkey >> bits) != 0) {
        bits++;
    }
    size_t temp = 0;
    CK(cub::DeviceRadixSort::SortKeys(NULL, temp, (const uint32_t *)NULL, (uint32_t *)NULL, n, 0,
                                      bits, cx->stream));
    size_t keys_bytes = round256((size_t)n * sizeof(uint32_t));
    const char *e = gt_cuda_scratch(cx, 2 * keys_bytes + temp);
    if (e != NULL) {
        return e;
    }
    uint8_t *base = (uint8_t *)cx->scratch;
    uint32_t *keys = (uint32_t *)base, *sorted = (uint32_t *)(base + keys_bytes);
    void *tmp = base + 2 * keys_bytes;
    wte_keys_kernel<<<(n + 255) / 256, 256, 0, cx->stream>>>(keys, inp, n);
    CK_LAUNCH();
    CK(cub::DeviceRadixSort::SortKeys(tmp, temp, keys, sorted, n, 0, bits, cx->stream));
    dim3 grid(n, (unsigned int)((C + 127) / 128));
    encoder_backward_wte_sorted_kernel<<<grid, 128, 0, cx->stream>>>(dwte, dout, sorted, n,
                                                                     (uint32_t)C);
    CK_LAUNCH();
    return NULL;
}

const char *gt_cuda_encoder_backward(gt_cuda_ctx *cx, float *dwte, float *dwpe, const float *dout,
                                     const int32_t *inp, int B, int T, int C, int Vp)
{
    size_t n = (size_t)T * C;
    encoder_backward_wpe_kernel<<<blocks_for(n, kThreads), kThreads, 0, cx->stream>>>(dwpe, dout,
                                                                                      B, T, C);
    CK_LAUNCH();
    return encoder_backward_wte(cx, dwte, dout, inp, B * T, C, Vp);
}
