// Internal to device/: the op table. Each gt_op_kind fixes which refs, ints and floats an op
// takes (the argument layout below), and gt_op_ref_sizes computes from the op's shapes how many
// bytes every ref must have, so a backend checks every range once, at launch, before any kernel
// runs (STYLE.md §6). Shared by every backend (cpu, devd, cuda).
//
// Legend: B = batch, T = time (sequence), C = channels, NH = heads, hs = C/NH, OC = output
// channels, N = rows (B*T), V = real vocabulary, Vp = padded vocabulary (>= V), maxT = positions.
// All tensors are float32 row-major unless marked i32 (int32) or u16 (uint16, llm.c tokens).
// "+=" marks outputs that accumulate; "=" outputs are overwritten.
#ifndef GT_DEVICE_OPS_H
#define GT_DEVICE_OPS_H

#include <gputravel/device.h>

// X(kind, name, number of refs)
#define GT_OP_TABLE(X)                                                                           \
    /* refs: out(B,T,C)= | inp i32(B,T) | wte(Vp,C) | wpe(maxT,C); ints: B,T,C,V,Vp,maxT      */ \
    /* every token must be < V (checked before the kernel runs)                               */ \
    X(GT_OP_ENCODER_FWD, "encoder_forward", 4)                                                   \
    /* refs: dwte(Vp,C)+= | dwpe(maxT,C)+= | dout(B,T,C) | inp i32(B,T); ints as forward       */ \
    X(GT_OP_ENCODER_BWD, "encoder_backward", 4)                                                  \
    /* refs: out(N,C)= | mean(N)= | rstd(N)= | inp(N,C) | weight(C) | bias(C); ints: N,C      */ \
    X(GT_OP_LAYERNORM_FWD, "layernorm_forward", 6)                                               \
    /* refs: dinp(N,C)+= | dweight(C)+= | dbias(C)+= | dout(N,C) | inp(N,C) | weight(C) |     */ \
    /*       mean(N) | rstd(N); ints: N,C                                                     */ \
    X(GT_OP_LAYERNORM_BWD, "layernorm_backward", 8)                                              \
    /* refs: out(N,OC)= | inp(N,C) | weight(OC,C) | bias(OC) or buf 0; ints: N,C,OC           */ \
    X(GT_OP_MATMUL_FWD, "matmul_forward", 4)                                                     \
    /* refs: dinp(N,C) | dweight(OC,C)+= | dbias(OC)+= or buf 0 | dout(N,OC) | inp(N,C) |     */ \
    /*       weight(OC,C); ints: N,C,OC, dinp_accumulate (0: dinp=, 1: dinp+=)                */ \
    X(GT_OP_MATMUL_BWD, "matmul_backward", 6)                                                    \
    /* refs: out(B,T,C)= | att(B,NH,T,T)= | inp(B,T,3C) (q,k,v); ints: B,T,C,NH               */ \
    X(GT_OP_ATTENTION_FWD, "attention_forward", 3)                                               \
    /* refs: dinp(B,T,3C)= | dout(B,T,C) | inp(B,T,3C) | att(B,NH,T,T); ints: B,T,C,NH        */ \
    X(GT_OP_ATTENTION_BWD, "attention_backward", 4)                                              \
    /* refs: out(N)= | inp(N); ints: N  (tanh approximation)                                  */ \
    X(GT_OP_GELU_FWD, "gelu_forward", 2)                                                         \
    /* refs: dinp(N)= | inp(N) | dout(N); ints: N  (dinp may be the same memory as dout)      */ \
    X(GT_OP_GELU_BWD, "gelu_backward", 3)                                                        \
    /* refs: out(N)= | inp1(N) | inp2(N); ints: N                                             */ \
    X(GT_OP_RESIDUAL_FWD, "residual_forward", 3)                                                 \
    /* refs: dinp1(N)+= | dinp2(N)+= | dout(N); ints: N                                       */ \
    X(GT_OP_RESIDUAL_BWD, "residual_backward", 3)                                                \
    /* Fused softmax + cross-entropy over the first V of Vp columns.                          */ \
    /* refs: losses(B,T)= | logits(B,T,Vp) | targets i32(B,T); ints: B,T,V,Vp, grad;          */ \
    /* floats: dloss. With grad=1 the logits are overwritten in place by dlogits =            */ \
    /* dloss * (softmax - onehot(target)), padded columns 0: the backward of mean loss when   */ \
    /* dloss = 1/(B*T). Every target must be < V.                                             */ \
    X(GT_OP_SOFTMAX_XENT, "softmax_crossentropy", 3)                                             \
    /* refs: out f64(1)= sum of squares of x, in double, in an order fixed by N | x(N);       */ \
    /* ints: N                                                                                */ \
    X(GT_OP_SUMSQ, "sum_of_squares", 2)                                                          \
    /* AdamW as llm.c: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m/bc1 /           */ \
    /* (sqrt(v/bc2) + eps) + wd p), with g = grad * grad_scale.                               */ \
    /* refs: params(N)+= | m(N)+= | v(N)+= | grads(N); ints: N;                               */ \
    /* floats: lr, beta1, beta2, eps, weight_decay, bc1 = 1-b1^t, bc2 = 1-b2^t, grad_scale    */ \
    X(GT_OP_ADAMW, "adamw", 4)                                                                   \
    /* Batch from a token buffer: inp[i] = data[offset+i], tgt[i] = data[offset+i+1].         */ \
    /* refs: inp i32(N)= | tgt i32(N)= | data u16(offset+N+1); ints: N, offset, V             */ \
    /* every token copied must be < V                                                         */ \
    X(GT_OP_TOKENS_GATHER, "tokens_gather", 3)                                                   \
    /* refs: data u16(N); ints: N, V. Fails unless every token is < V.                        */ \
    X(GT_OP_TOKENS_CHECK, "tokens_check", 1)

#define GT_OP_ENUM(kind, name, nrefs) kind,
typedef enum { GT_OP_NONE_ = 0, GT_OP_TABLE(GT_OP_ENUM) GT_OP_COUNT_ } gt_op_kind;
#undef GT_OP_ENUM

const char *gt_op_name(uint32_t kind);

// Checks the op's kind and shapes and fills bytes[i] with what ref i must provide (0 for an
// optional ref left as buf 0) and *nrefs with the op's ref count. Every shape must be >= 1 and
// every size must fit in 63 bits. Fails with GT_E_ARG, naming the op and the shape.
GT_MUST_USE gt_err gt_op_ref_sizes(const gt_op *op, uint64_t bytes[GT_OP_MAX_REFS], int *nrefs);

// True when ref i of this op kind may be buf 0 (an absent bias).
bool gt_op_ref_optional(uint32_t kind, int i);

#endif
