// CUDA kernels: the context's scratch area, grown on demand and shared by every op on the stream
// (ops use it only between their own launches).
#include "common.cuh"

const char *gt_cuda_scratch(gt_cuda_ctx *cx, size_t bytes)
{
    if (bytes <= cx->scratch_bytes) {
        return NULL;
    }
    if (cx->scratch != NULL) {
        // Earlier ops on the stream may still read the old area.
        CK(cudaMemsetAsync(cx->scratch, 0, cx->scratch_bytes, cx->stream));  // held activations
        CK(cudaStreamSynchronize(cx->stream));
        CK(cudaFree(cx->scratch));
        cx->scratch = NULL;
        cx->scratch_bytes = 0;
    }
    size_t want = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    CK(cudaMalloc(&cx->scratch, want));
    cx->scratch_bytes = want;
    return NULL;
}
