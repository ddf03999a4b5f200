// Private to kernels/: the row primitives of the cpu kernels, one body per instruction-set path
// (scalar, AVX2+FMA, AVX-512F; cpu_simd.c), and the choice of path.
//
// One summation order for every path: a sum over a row keeps 16 lane sums (lane l adds the
// elements i = l mod 16 in index order, from the row's first element), then adds the lanes
// 0..15 left to right. AVX-512 holds the 16 lanes in one register, AVX2 in two, the scalar twin
// in an array. With the same exp polynomial (explicit FMAs at the same places; 2^n applied with
// one rounding on both vector paths) and no implied multiply-add anywhere (kernels/ builds with
// -ffp-contract=off), AVX2 and AVX-512 give the same bits; the scalar twin differs only where it
// calls libm's expf instead of the polynomial. Layernorm, AdamW and the softmax backward have no
// exp: all three paths give the same bits there (tests/kernels/test_ops_cpu.c checks both).
#ifndef GT_KERNELS_CPU_SIMD_H
#define GT_KERNELS_CPU_SIMD_H

#include <gputravel/kernels.h>

#include <stddef.h>

// The CPU features the paths need, as detected (gt_cpu_features_detect) or as a test states them.
typedef struct {
    bool avx2, fma, avx512f;
    bool avx512_skx;  // avx512f + cd + bw + dq + vl: what OpenBLAS's SkylakeX kernels need
} gt_cpu_features;

gt_cpu_features gt_cpu_features_detect(void);
// Makes `isa` the path of every kernel if `have` has what it needs; else GT_E_UNSUPPORTED naming
// the missing feature, and the path stays as it was.
GT_MUST_USE gt_err gt_ops_cpu_choose_isa(gt_cpu_isa isa, const gt_cpu_features *have);

// gt_blas_core_upgrade for a stated core and CPU (tests give both).
const char *gt_blas_core_upgrade_for(const char *core, const gt_cpu_features *have);

// The path the kernels take now (the best the CPU has until someone chooses).
gt_cpu_isa gt_simd_isa(void);

// max of x[0..n); n >= 1
float gt_simd_max(gt_cpu_isa isa, const float *x, int n);
// out[i] = exp(x[i] - shift) (out may be x or NULL); returns the sum of those, in lane order.
float gt_simd_exp_shift_sum(gt_cpu_isa isa, float *out, const float *x, int n, float shift);
// x[i] *= a
void gt_simd_scale(gt_cpu_isa isa, float *x, int n, float a);

// GELU (tanh form as x sigmoid(2u)) on [lo, hi); backward: dinp = gelu'(inp) * dout, dinp may
// alias dout. A range must start where the kernel's 16-element blocks start (lo % 16 == 0).
void gt_simd_gelu_fwd(gt_cpu_isa isa, float *out, const float *inp, size_t lo, size_t hi);
void gt_simd_gelu_bwd(gt_cpu_isa isa, float *dinp, const float *inp, const float *dout, size_t lo,
                      size_t hi);

typedef struct {
    float lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale;
} gt_simd_adamw_hp;

// AdamW on [lo, hi): every element gets the same operations in the same order on every path,
// with no multiply-add, so a float's bits never depend on where a range starts (ZeRO-1's shards
// give bit for bit what the whole range gives) nor on the path.
void gt_simd_adamw(gt_cpu_isa isa, float *p, float *m, float *v, const float *g, size_t lo,
                   size_t hi, const gt_simd_adamw_hp *h);

// One row of layernorm: out (C)=, *mean, *rstd =; x, weight, bias (C)
void gt_simd_layernorm_row(gt_cpu_isa isa, float *out, float *mean, float *rstd, const float *x,
                           const float *weight, const float *bias, int C, float eps);
// One row of its input gradient: dinp (C) +=; dout, x, weight (C); m, s the row's mean, rstd
void gt_simd_layernorm_bwd_row(gt_cpu_isa isa, float *dinp, const float *dout, const float *x,
                               const float *weight, float m, float s, int C);
// One row's share of the parameter gradients on channels [lo, hi): dbias += dout,
// dweight += (x - m) s dout (elementwise: no order to keep).
void gt_simd_layernorm_param_row(gt_cpu_isa isa, float *dweight, float *dbias, const float *dout,
                                 const float *x, float m, float s, int lo, int hi);

// The softmax backward of one attention row of n: d = a * (d - sum(a * d)).
void gt_simd_softmax_bwd_row(gt_cpu_isa isa, float *d, const float *a, int n);

#endif
