// gputravel/kernels_cuda.h (GPUTRAVEL_CUDA builds only): the kernels layer's CUDA side, for the
// device layer's cuda backend. The launchers of src/kernels/cuda/*.cu (one file per kernel
// family, plain C++ over the CUDA runtime) and the executor gt_ops_cuda_run that decodes an op
// and calls them. Separate from kernels.h because it includes the CUDA runtime and cuBLAS
// headers, which exist only where the toolkit is installed; kernels.h stays includable
// everywhere. Only C types cross the launchers (no gt_err: the .cu files do not include
// util.h), and every launcher returns NULL on success or a static string naming what failed.
//
// Launchers take the cpu kernel's arguments (src/kernels/cpu_kernels.c) after a gt_cuda_ctx,
// outputs first, then inputs, then shapes (STYLE.md §1, §6). They are asynchronous on
// ctx->stream and trust their inputs: gt_ops_cuda_run has checked every pointer range
// (gt_op_ref_sizes) and every token before calling them. Precision: plain fp32 everywhere,
// cuBLAS with CUBLAS_DEFAULT_MATH (no TF32).
//
// Legend: B = batch, T = time, C = channels, NH = heads, hs = C/NH, OC = output channels,
// N = rows (B*T) or elements, V = real vocab, Vp = padded vocab, maxT = positions.
#ifndef GPUTRAVEL_KERNELS_CUDA_H
#define GPUTRAVEL_KERNELS_CUDA_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// A cuBLASLt forward matmul plan for one shape and operand alignment: descriptors and the
// heuristic's algorithm, made once and reused (a GPT-2 step calls ~49 matmuls of ~5 shapes).
typedef struct {
    bool used;
    bool found;  // the heuristic offered an algorithm (else the shape takes the cuBLAS path)
    int N, C, OC, bias;
    uint32_t al_a, al_b, al_c;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} gt_cuda_lt_plan;

#define GT_CUDA_LT_PLANS 32  // more shapes than this: the oldest plan is replaced

// One device's execution state, owned by the backend. Everything runs on `stream`, in order, so
// one scratch area serves every op: an op uses it only between its own launches.
typedef struct {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *lt_workspace;  // cuBLASLt workspace (GT_CUDA_LT_WORKSPACE_BYTES)
    void *scratch;       // grows on demand (gt_cuda_scratch); freed at close
    size_t scratch_bytes;
    unsigned long long *flag;  // device: one word, the first bad index of a token check
    gt_cuda_lt_plan lt_plans[GT_CUDA_LT_PLANS];
    unsigned int lt_next;  // the slot the next new plan takes (round robin)
} gt_cuda_ctx;

#define GT_CUDA_LT_WORKSPACE_BYTES ((size_t)32 << 20)

// Kernels switch their per-element index math (/ and %) to 32 bits when the element count is at
// most this: a grid-stride index below 2^31 plus the largest stride (2^20 blocks x 1024
// threads = 2^30) stays below 2^32, so the 32-bit loop never wraps.
#define GT_CUDA_IDX32_MAX ((size_t)1 << 31)

// Makes ctx->scratch at least `bytes` long (waits for the stream before freeing a smaller one).
const char *gt_cuda_scratch(gt_cuda_ctx *cx, size_t bytes);
// Destroys the cached cuBLASLt plans (before cublasLtDestroy; the backend's close).
void gt_cuda_lt_plans_free(gt_cuda_ctx *cx);

// ---- token checks (run before any kernel that indexes by token) -------------------------------
// *first_bad = index of the first element outside [0, V) (n if none). Synchronous: waits for the
// stream, since the caller decides on the answer whether to launch.
const char *gt_cuda_first_bad_i32(gt_cuda_ctx *cx, size_t *first_bad, const int32_t *x, size_t n,
                                  int64_t V);
const char *gt_cuda_first_bad_u16(gt_cuda_ctx *cx, size_t *first_bad, const uint16_t *x,
                                  size_t n, int64_t V);

// ---- kernels (semantics: kernels.h and cpu_kernels.c; "+=" accumulates, "=" overwrites) ------
// out (B,T,C)=; inp i32 (B,T); wte (Vp,C); wpe (maxT,C)
const char *gt_cuda_encoder_forward(gt_cuda_ctx *cx, float *out, const int32_t *inp,
                                    const float *wte, const float *wpe, int B, int T, int C);
// dwte (Vp,C)+=, dwpe (maxT,C)+=; dout (B,T,C). Deterministic: the rows of each token summed in
// b,t order, as the cpu kernel does (positions sorted by token on the device, then one thread
// per token and channel). Vp bounds the sort keys.
const char *gt_cuda_encoder_backward(gt_cuda_ctx *cx, float *dwte, float *dwpe, const float *dout,
                                     const int32_t *inp, int B, int T, int C, int Vp);
// out (N,C)=, mean, rstd (N)=; inp (N,C); weight, bias (C)
const char *gt_cuda_layernorm_forward(gt_cuda_ctx *cx, float *out, float *mean, float *rstd,
                                      const float *inp, const float *weight, const float *bias,
                                      int N, int C);
// dinp (N,C)+=, dweight, dbias (C)+=
const char *gt_cuda_layernorm_backward(gt_cuda_ctx *cx, float *dinp, float *dweight, float *dbias,
                                       const float *dout, const float *inp, const float *weight,
                                       const float *mean, const float *rstd, int N, int C);
// out (N,OC)= inp (N,C) @ weight (OC,C)^T + bias (OC; NULL for none)
const char *gt_cuda_matmul_forward(gt_cuda_ctx *cx, float *out, const float *inp,
                                   const float *weight, const float *bias, int N, int C, int OC);
// dinp (N,C) = (or += with dinp_accumulate), dweight (OC,C)+=, dbias (OC)+= (NULL for none)
const char *gt_cuda_matmul_backward(gt_cuda_ctx *cx, float *dinp, float *dweight, float *dbias,
                                    const float *dout, const float *inp, const float *weight,
                                    int N, int C, int OC, int dinp_accumulate);
// out (B,T,C)=, att (B,NH,T,T)= (0 above the diagonal); inp (B,T,3C)
const char *gt_cuda_attention_forward(gt_cuda_ctx *cx, float *out, float *att, const float *inp,
                                      int B, int T, int C, int NH);
// dinp (B,T,3C)=; dout (B,T,C); inp (B,T,3C); att (B,NH,T,T)
const char *gt_cuda_attention_backward(gt_cuda_ctx *cx, float *dinp, const float *dout,
                                       const float *inp, const float *att, int B, int T, int C,
                                       int NH);
const char *gt_cuda_gelu_forward(gt_cuda_ctx *cx, float *out, const float *inp, size_t N);
// dinp may be the same memory as dout
const char *gt_cuda_gelu_backward(gt_cuda_ctx *cx, float *dinp, const float *inp,
                                  const float *dout, size_t N);
const char *gt_cuda_residual_forward(gt_cuda_ctx *cx, float *out, const float *inp1,
                                     const float *inp2, size_t N);
const char *gt_cuda_residual_backward(gt_cuda_ctx *cx, float *dinp1, float *dinp2,
                                      const float *dout, size_t N);
// losses (BT)=; logits (BT,Vp), overwritten by dlogits when grad; targets i32 (BT), all < V
const char *gt_cuda_softmax_crossentropy(gt_cuda_ctx *cx, float *losses, float *logits,
                                         const int32_t *targets, int BT, int V, int Vp, int grad,
                                         float dloss);
// out f64 (1)= sum of squares, in an order fixed by N
const char *gt_cuda_sum_of_squares(gt_cuda_ctx *cx, double *out, const float *x, size_t N);
const char *gt_cuda_adamw(gt_cuda_ctx *cx, float *params, float *m, float *v, const float *grads,
                          size_t N, float lr, float beta1, float beta2, float eps, float wd,
                          float bc1, float bc2, float grad_scale);
// Release ops and clipping (release.cu): one thread sums in index order, as the cpu kernel does.
const char *gt_cuda_loss_mean(gt_cuda_ctx *cx, float *out, const float *losses, int N, int bits);
const char *gt_cuda_norm_release(gt_cuda_ctx *cx, float *out, const double *sumsq, int bits);
const char *gt_cuda_clip_grads(gt_cuda_ctx *cx, float *grads, const double *sumsq, size_t N,
                               float clip);
// inp[i] = src[i], tgt[i] = src[i+1] for i < N (src = data + offset, already checked < V)
const char *gt_cuda_tokens_gather(gt_cuda_ctx *cx, int32_t *inp, int32_t *tgt,
                                  const uint16_t *src, size_t N);

// ---- AES-256-GCM open on the device (aes_gcm.cu) -----------------------------------------
// Round keys: the AES-256 key expansion (FIPS-197 §5.2), 60 big-endian words. Host code, used
// only to feed the GPU kernel; every other AES use in gputravel goes through OpenSSL.
#define GT_CUDA_AES256_RK_WORDS 60
void gt_cuda_aes256_expand_key(uint32_t rk[GT_CUDA_AES256_RK_WORDS], const uint8_t key[32]);

// Test support only: runs the kernel's own device functions (the same source) on the host, so
// the cipher and GHASH code can be checked against OpenSSL on machines without a GPU. Never used
// to protect data. Writes pt (len bytes) and the computed tag.
void gt_cuda_aes_gcm_host_model(uint8_t *pt, uint8_t tag[16], const uint8_t *ct, size_t len,
                                const uint8_t *aad, size_t aad_len, const uint8_t iv[12],
                                const uint8_t key[32]);

// Step 1: computes the GCM tag of (aad, ct) into tag_out (host, 16 bytes) without producing any
// plaintext. ct is device memory of len bytes. Synchronous. `dkey` is device memory the caller
// provides for the round keys (GT_CUDA_AES256_RK_WORDS words); it is wiped before return.
const char *gt_cuda_aes_gcm_tag(gt_cuda_ctx *cx, uint8_t tag_out[16], const uint8_t *ct,
                                size_t len, const uint8_t *aad, size_t aad_len,
                                const uint8_t iv[12], const uint32_t rk[GT_CUDA_AES256_RK_WORDS],
                                uint32_t *dkey);
// Step 2, only after the caller has compared the tag: pt = ct XOR AES-CTR keystream (device
// memory, len bytes; pt may equal ct). Synchronous; wipes dkey before return.
const char *gt_cuda_aes_gcm_ctr(gt_cuda_ctx *cx, uint8_t *pt, const uint8_t *ct, size_t len,
                                const uint8_t iv[12], const uint32_t rk[GT_CUDA_AES256_RK_WORDS],
                                uint32_t *dkey);

#ifdef __cplusplus
}
#endif

// ---- the cuda executor (src/kernels/cuda/dispatch.c; C callers only) -------------------------
// Decodes the op (gt_op_decode) with the backend's resolver, refuses refs not aligned to their
// element size (a misaligned access would poison the context), checks every token against V on
// the device, then queues the kernel on cx->stream.
#ifndef __cplusplus
#include <gputravel/kernels.h>
GT_MUST_USE gt_err gt_ops_cuda_run(gt_cuda_ctx *cx, const gt_op *op, gt_dref_resolve_fn resolve,
                                   void *ctx);
#endif

#endif
