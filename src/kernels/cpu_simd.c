// The row primitives of the cpu kernels on three paths (scalar, AVX2+FMA, AVX-512F) and the
// choice of path (cpu_simd.h says what stays equal between the paths, and why).
//
// exp on the vector paths: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, a degree-7
// polynomial for e^r (Cephes' expf coefficients, ~1 ulp), then 2^n: vscalefps on AVX-512; on
// AVX2, which has no such instruction, two multiplies by normal powers of two, of which only the
// second rounds, so the result is the same float.
#include "cpu_simd.h"

#include <cblas.h>
#include <strings.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the path ---------------------------------------------------------------------------------

static const char *const isa_names[GT_CPU_ISA_COUNT_] = {"scalar", "avx2", "avx512"};

// -1: nobody chose yet (the best the CPU has). Atomics: devd's worker and a test's main thread
// may both read it while a test changes it between groups.
static atomic_int isa_now = -1;
static atomic_bool isa_forced;

const char *gt_cpu_isa_name(gt_cpu_isa isa)
{
    return (unsigned)isa < GT_CPU_ISA_COUNT_ ? isa_names[isa] : "unknown";
}

gt_err gt_cpu_isa_parse(const char *name, gt_cpu_isa *out)
{
    for (int i = 0; i < GT_CPU_ISA_COUNT_; i++) {
        if (name != NULL && strcmp(name, isa_names[i]) == 0) {
            *out = (gt_cpu_isa)i;
            return GT_OK;
        }
    }
    return gt_errf(GT_E_ARG, "cpu isa '%s': not one of scalar, avx2, avx512",
                   name != NULL ? name : "(null)");
}

gt_cpu_features gt_cpu_features_detect(void)
{
#if defined(__x86_64__)
    // libgcc's checks include the OS's XCR0 state bits, so a feature the kernel does not save
    // on a context switch reads as absent.
    __builtin_cpu_init();
    return (gt_cpu_features){.avx2 = __builtin_cpu_supports("avx2"),
                             .fma = __builtin_cpu_supports("fma"),
                             .avx512f = __builtin_cpu_supports("avx512f"),
                             .avx512_skx = __builtin_cpu_supports("avx512f") &&
                                           __builtin_cpu_supports("avx512cd") &&
                                           __builtin_cpu_supports("avx512bw") &&
                                           __builtin_cpu_supports("avx512dq") &&
                                           __builtin_cpu_supports("avx512vl")};
#else
    return (gt_cpu_features){0};
#endif
}

// NULL when `have` runs isa, else the first feature it lacks.
static const char *missing_feature(gt_cpu_isa isa, const gt_cpu_features *have)
{
    switch (isa) {
    case GT_CPU_ISA_SCALAR:
        return NULL;
    case GT_CPU_ISA_AVX2:
        return !have->avx2 ? "avx2" : !have->fma ? "fma" : NULL;
    case GT_CPU_ISA_AVX512:
        return !have->avx512f ? "avx512f" : NULL;
    default:
        return "a known path";
    }
}

static gt_cpu_isa best_of(const gt_cpu_features *have)
{
    for (int i = GT_CPU_ISA_COUNT_ - 1; i > 0; i--) {
        if (missing_feature((gt_cpu_isa)i, have) == NULL) {
            return (gt_cpu_isa)i;
        }
    }
    return GT_CPU_ISA_SCALAR;
}

gt_err gt_ops_cpu_choose_isa(gt_cpu_isa isa, const gt_cpu_features *have)
{
    GT_ENSURE((unsigned)isa < GT_CPU_ISA_COUNT_, GT_E_ARG, "cpu isa %d: no such path", (int)isa);
    const char *lack = missing_feature(isa, have);
    GT_ENSURE(lack == NULL, GT_E_UNSUPPORTED,
              "cpu isa %s: this CPU lacks %s (its best path is %s)", isa_names[isa], lack,
              isa_names[best_of(have)]);
    atomic_store(&isa_now, (int)isa);
    atomic_store(&isa_forced, true);
    return GT_OK;
}

bool gt_cpu_isa_supported(gt_cpu_isa isa)
{
    gt_cpu_features f = gt_cpu_features_detect();
    return (unsigned)isa < GT_CPU_ISA_COUNT_ && missing_feature(isa, &f) == NULL;
}

gt_cpu_isa gt_cpu_isa_best(void)
{
    gt_cpu_features f = gt_cpu_features_detect();
    return best_of(&f);
}

gt_err gt_ops_cpu_set_isa(gt_cpu_isa isa)
{
    gt_cpu_features f = gt_cpu_features_detect();
    return gt_ops_cpu_choose_isa(isa, &f);
}

gt_cpu_isa gt_simd_isa(void)
{
    int now = atomic_load_explicit(&isa_now, memory_order_relaxed);
    return now >= 0 ? (gt_cpu_isa)now : gt_cpu_isa_best();
}

gt_cpu_isa gt_ops_cpu_isa(void) { return gt_simd_isa(); }

gt_err gt_ops_cpu_select_isa(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        atomic_store(&isa_now, (int)gt_cpu_isa_best());
        atomic_store(&isa_forced, false);
        return GT_OK;
    }
    gt_cpu_isa isa = GT_CPU_ISA_SCALAR;
    GT_TRY(gt_cpu_isa_parse(name, &isa));
    return gt_ops_cpu_set_isa(isa);
}

void gt_ops_cpu_set_simd(bool on)
{
    atomic_store(&isa_now, (int)(on ? gt_cpu_isa_best() : GT_CPU_ISA_SCALAR));
    atomic_store(&isa_forced, !on);
}

void gt_ops_cpu_describe(char *out, size_t cap)
{
    gt_cpu_isa now = gt_simd_isa(), best = gt_cpu_isa_best();
    const char *how = !atomic_load(&isa_forced) ? "the best this cpu has"
                      : now == best             ? "chosen, the best this cpu has"
                                                : "chosen";
    char has[64] = "";
    if (now != best) {
        snprintf(has, sizeof has, "; cpu has %s", isa_names[best]);
    }
    snprintf(out, cap, "cpu kernels: %s (%s%s), OpenBLAS core %s", isa_names[now], how, has,
             openblas_get_corename());
}

// ---- OpenBLAS's core --------------------------------------------------------------------------
// OpenBLAS names its x86 cores after the CPUs it knows; what matters here is the widest vectors
// each one's sgemm uses: 2 = AVX-512, 1 = AVX2 + FMA, 0 = older or generic (the fallback).
static int blas_core_level(const char *core)
{
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen"};
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++) {
        if (strcasecmp(core, avx512[i]) == 0) {
            return 2;
        }
    }
    for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++) {
        if (strcasecmp(core, avx2[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

const char *gt_blas_core_upgrade_for(const char *core, const gt_cpu_features *have)
{
    int level = blas_core_level(core != NULL ? core : "");
    if (have->avx512_skx && level < 2) {
        return "SkylakeX";
    }
    if (have->avx2 && have->fma && level < 1) {
        return "Haswell";
    }
    return NULL;
}

const char *gt_blas_core_name(void) { return openblas_get_corename(); }

const char *gt_blas_core_upgrade(void)
{
    gt_cpu_features f = gt_cpu_features_detect();
    return gt_blas_core_upgrade_for(openblas_get_corename(), &f);
}

size_t gt_blas_core_env(const char *coretype_env, gt_env_var vars[2])
{
    const char *core = coretype_env == NULL ? gt_blas_core_upgrade() : NULL;
    if (core == NULL) {
        return 0;
    }
    vars[0] = (gt_env_var){"GPUTRAVEL_BLAS_FALLBACK", openblas_get_corename()};
    vars[1] = (gt_env_var){"OPENBLAS_CORETYPE", core};
    return 2;
}

gt_err gt_blas_core_reexec(const char *coretype_env, char **argv)
{
    gt_env_var vars[2];
    return gt_proc_reexec(argv, vars, gt_blas_core_env(coretype_env, vars));
}

// ---- shared scalar pieces ---------------------------------------------------------------------
// Inlined into the vector paths' tails too; -ffp-contract=off keeps them plain multiplies and
// adds there.

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
#define GELU_C 0.044715f

static inline float lanes_total(const float lanes[16])
{
    float s = 0.0f;
    for (int l = 0; l < 16; l++) {
        s += lanes[l];
    }
    return s;
}

static inline float gelu_one(float x)
{
    float u = x + GELU_C * x * x * x;
    return x / (1.0f + expf(-2.0f * GELU_SCALE * u));
}

static inline float gelu_grad_one(float x, float dout)
{
    float u = x + GELU_C * x * x * x;
    float sig = 1.0f / (1.0f + expf(-2.0f * GELU_SCALE * u));
    float local = sig + x * 2.0f * sig * (1.0f - sig) * GELU_SCALE * (1.0f + 3.0f * GELU_C * x * x);
    return local * dout;
}

static inline void adamw_one(float *p, float *m, float *v, float g, const gt_simd_adamw_hp *h)
{
    g *= h->grad_scale;
    float mi = h->beta1 * *m + (1.0f - h->beta1) * g;
    float vi = h->beta2 * *v + (1.0f - h->beta2) * g * g;
    float mhat = mi / h->bc1, vhat = vi / h->bc2;
    *m = mi;
    *v = vi;
    *p -= h->lr * (mhat / (sqrtf(vhat) + h->eps) + h->wd * *p);
}

// ---- scalar path ------------------------------------------------------------------------------

static float max_scalar(const float *x, int n)
{
    float m = -INFINITY;
    for (int i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

static float exp_shift_sum_scalar(float *out, const float *x, int n, float shift)
{
    float lanes[16] = {0};
    for (int i = 0; i < n; i++) {
        float e = expf(x[i] - shift);
        if (out != NULL) {
            out[i] = e;
        }
        lanes[i % 16] += e;
    }
    return lanes_total(lanes);
}

static void layernorm_row_scalar(float *out, float *mean, float *rstd, const float *x,
                                 const float *w, const float *b, int C, float eps)
{
    float lanes[16] = {0};
    for (int c = 0; c < C; c++) {
        lanes[c % 16] += x[c];
    }
    float m = lanes_total(lanes) / (float)C;
    memset(lanes, 0, sizeof lanes);
    for (int c = 0; c < C; c++) {
        float d = x[c] - m;
        lanes[c % 16] += d * d;
    }
    float v = lanes_total(lanes) / (float)C;
    float s = 1.0f / sqrtf(v + eps);
    for (int c = 0; c < C; c++) {
        out[c] = (s * (x[c] - m)) * w[c] + b[c];
    }
    *mean = m;
    *rstd = s;
}

static void layernorm_bwd_row_scalar(float *dinp, const float *dout, const float *x,
                                     const float *w, float m, float s, int C)
{
    float dm[16] = {0}, dnm[16] = {0};
    for (int c = 0; c < C; c++) {
        float norm = (x[c] - m) * s, dnorm = w[c] * dout[c];
        dm[c % 16] += dnorm;
        dnm[c % 16] += dnorm * norm;
    }
    float dnorm_mean = lanes_total(dm) / (float)C, dnorm_norm_mean = lanes_total(dnm) / (float)C;
    for (int c = 0; c < C; c++) {
        float norm = (x[c] - m) * s, dnorm = w[c] * dout[c];
        dinp[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
}

static void softmax_bwd_row_scalar(float *d, const float *a, int n)
{
    float lanes[16] = {0};
    for (int i = 0; i < n; i++) {
        lanes[i % 16] += a[i] * d[i];
    }
    float dot = lanes_total(lanes);
    for (int i = 0; i < n; i++) {
        d[i] = a[i] * (d[i] - dot);
    }
}

// ---- AVX2 + FMA path --------------------------------------------------------------------------
// 16 lanes as two 8-float registers: lo holds lanes 0..7, hi 8..15. Tails use masked loads
// (lanes past the end read as 0 and are zeroed before any sum) and masked stores.

#define EXP_HI 88.3762626647949f
#define EXP_LO -103.972084f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

#if defined(__x86_64__)
#define GT_AVX2 __attribute__((target("avx2,fma")))
#define GT_AVX512 __attribute__((target("avx512f")))

// Lanes below rem all ones (rem may be <= 0: none, or >= 8: all).
GT_AVX2 static inline __m256i mask8(int rem)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

GT_AVX2 static inline __m256 load8(const float *p, __m256i k) { return _mm256_maskload_ps(p, k); }

GT_AVX2 static inline __m256 keep8(__m256 v, __m256i k)
{
    return _mm256_and_ps(v, _mm256_castsi256_ps(k));
}

GT_AVX2 static inline float total8(__m256 lo, __m256 hi)
{
    float lanes[16];
    _mm256_storeu_ps(lanes, lo);
    _mm256_storeu_ps(lanes + 8, hi);
    return lanes_total(lanes);
}

// 2^k for integral k in [-126, 127], built in the exponent field.
GT_AVX2 static inline __m256 pow2_8(__m256 k)
{
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}

GT_AVX2 static inline __m256 exp8(__m256 x)
{
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(EXP_HI)), _mm256_set1_ps(EXP_LO));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    // n is in [-150, 127], past one exponent field's [-126, 127]: 2^a 2^b with a = floor(n/2)
    // are both normal, p 2^a is exact, and the second product rounds once, as vscalefps does.
    __m256 a = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2_8(a)), pow2_8(_mm256_sub_ps(n, a)));
}

GT_AVX2 static float max_avx2(const float *x, int n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m = ninf;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    }
    if (i < n) {
        __m256i k = mask8(n - i);
        m = _mm256_max_ps(m, _mm256_blendv_ps(ninf, load8(x + i, k), _mm256_castsi256_ps(k)));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    float r = lanes[0];
    for (int l = 1; l < 8; l++) {
        r = lanes[l] > r ? lanes[l] : r;
    }
    return r;
}

GT_AVX2 static float exp_shift_sum_avx2(float *out, const float *x, int n, float shift)
{
    __m256 s = _mm256_set1_ps(shift), lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s));
        if (out != NULL) {
            _mm256_storeu_ps(out + i, e0);
            _mm256_storeu_ps(out + i + 8, e1);
        }
        lo = _mm256_add_ps(lo, e0);
        hi = _mm256_add_ps(hi, e1);
    }
    for (int half = 0; i < n; i += 8, half++) {  // half 0 feeds lanes 0..7, half 1 lanes 8..15
        __m256i k = mask8(n - i);
        __m256 e = keep8(exp8(_mm256_sub_ps(load8(x + i, k), s)), k);
        if (out != NULL) {
            _mm256_maskstore_ps(out + i, k, e);
        }
        if (half == 0) {
            lo = _mm256_add_ps(lo, e);
        } else {
            hi = _mm256_add_ps(hi, e);
        }
    }
    return total8(lo, hi);
}

GT_AVX2 static void scale_avx2(float *x, int n, float a)
{
    __m256 s = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
    }
    for (; i < n; i++) {
        x[i] *= a;
    }
}

GT_AVX2 static inline __m256 gelu8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 u = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_C), x), _mm256_mul_ps(x, x), x);
    __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f * GELU_SCALE), u));
    return _mm256_mul_ps(x, _mm256_div_ps(one, _mm256_add_ps(one, e)));
}

GT_AVX2 static inline __m256 gelu_grad8(__m256 x, __m256 dout)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 u = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_C), x), x2, x);
    __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f * GELU_SCALE), u));
    __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, e));
    // d/dx [x sig(2u)] = sig + x * 2 sig (1 - sig) * u'(x), u' = g (1 + 3c x^2)
    __m256 du = _mm256_mul_ps(_mm256_set1_ps(GELU_SCALE),
                              _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_C), x2, one));
    __m256 ds = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), sig), _mm256_sub_ps(one, sig));
    __m256 local = _mm256_fmadd_ps(_mm256_mul_ps(x, ds), du, sig);
    return _mm256_mul_ps(local, dout);
}

// In 16-element blocks with the scalar tail where AVX-512 has it, so the two paths vectorize
// the same elements.
GT_AVX2 static void gelu_fwd_avx2(float *out, const float *inp, size_t lo, size_t hi)
{
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) {
        _mm256_storeu_ps(out + i, gelu8(_mm256_loadu_ps(inp + i)));
        _mm256_storeu_ps(out + i + 8, gelu8(_mm256_loadu_ps(inp + i + 8)));
    }
    for (; i < hi; i++) {
        out[i] = gelu_one(inp[i]);
    }
}

GT_AVX2 static void gelu_bwd_avx2(float *dinp, const float *inp, const float *dout, size_t lo,
                                  size_t hi)
{
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) {
        __m256 g0 = gelu_grad8(_mm256_loadu_ps(inp + i), _mm256_loadu_ps(dout + i));
        __m256 g1 = gelu_grad8(_mm256_loadu_ps(inp + i + 8), _mm256_loadu_ps(dout + i + 8));
        _mm256_storeu_ps(dinp + i, g0);
        _mm256_storeu_ps(dinp + i + 8, g1);
    }
    for (; i < hi; i++) {
        dinp[i] = gelu_grad_one(inp[i], dout[i]);
    }
}

// adamw_one's operations in its order, 8 lanes at a time, the last lanes masked (not left to
// adamw_one: every element takes this one code path wherever its range starts).
GT_AVX2 static void adamw_avx2(float *p, float *m, float *v, const float *g, size_t lo,
                               size_t hi, const gt_simd_adamw_hp *h)
{
    const __m256 b1 = _mm256_set1_ps(h->beta1), b2 = _mm256_set1_ps(h->beta2);
    const __m256 nb1 = _mm256_set1_ps(1.0f - h->beta1), nb2 = _mm256_set1_ps(1.0f - h->beta2);
    const __m256 bc1 = _mm256_set1_ps(h->bc1), bc2 = _mm256_set1_ps(h->bc2);
    const __m256 eps = _mm256_set1_ps(h->eps), lr = _mm256_set1_ps(h->lr);
    const __m256 wd = _mm256_set1_ps(h->wd), gs = _mm256_set1_ps(h->grad_scale);
    for (size_t i = lo; i < hi; i += 8) {
        __m256i k = mask8(hi - i >= 8 ? 8 : (int)(hi - i));
        __m256 gi = _mm256_mul_ps(load8(g + i, k), gs);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, load8(m + i, k)), _mm256_mul_ps(nb1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, load8(v + i, k)),
                                  _mm256_mul_ps(_mm256_mul_ps(nb2, gi), gi));
        __m256 mhat = _mm256_div_ps(mi, bc1), vhat = _mm256_div_ps(vi, bc2);
        __m256 pi = load8(p + i, k);
        __m256 upd = _mm256_add_ps(_mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), eps)),
                                   _mm256_mul_ps(wd, pi));
        _mm256_maskstore_ps(m + i, k, mi);
        _mm256_maskstore_ps(v + i, k, vi);
        _mm256_maskstore_ps(p + i, k, _mm256_sub_ps(pi, _mm256_mul_ps(lr, upd)));
    }
}

GT_AVX2 static void layernorm_row_avx2(float *out, float *mean, float *rstd, const float *x,
                                       const float *w, const float *b, int C, float eps)
{
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int c = 0; c < C; c += 8) {  // chunk c/8 feeds lanes 0..7 when even, 8..15 when odd
        acc[(c >> 3) & 1] = _mm256_add_ps(acc[(c >> 3) & 1], load8(x + c, mask8(C - c)));
    }
    float m = total8(acc[0], acc[1]) / (float)C;
    const __m256 mv = _mm256_set1_ps(m);
    acc[0] = acc[1] = _mm256_setzero_ps();
    for (int c = 0; c < C; c += 8) {
        __m256i k = mask8(C - c);
        __m256 d = keep8(_mm256_sub_ps(load8(x + c, k), mv), k);
        acc[(c >> 3) & 1] = _mm256_add_ps(acc[(c >> 3) & 1], _mm256_mul_ps(d, d));
    }
    float v = total8(acc[0], acc[1]) / (float)C;
    float s = 1.0f / sqrtf(v + eps);
    const __m256 sv = _mm256_set1_ps(s);
    for (int c = 0; c < C; c += 8) {
        __m256i k = mask8(C - c);
        __m256 n = _mm256_mul_ps(sv, _mm256_sub_ps(load8(x + c, k), mv));
        _mm256_maskstore_ps(out + c, k,
                            _mm256_add_ps(_mm256_mul_ps(n, load8(w + c, k)), load8(b + c, k)));
    }
    *mean = m;
    *rstd = s;
}

GT_AVX2 static void layernorm_bwd_row_avx2(float *dinp, const float *dout, const float *x,
                                           const float *w, float m, float s, int C)
{
    const __m256 mv = _mm256_set1_ps(m), sv = _mm256_set1_ps(s);
    __m256 dm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, dnm[2] = {dm[0], dm[1]};
    for (int c = 0; c < C; c += 8) {
        __m256i k = mask8(C - c);
        __m256 norm = _mm256_mul_ps(_mm256_sub_ps(load8(x + c, k), mv), sv);
        __m256 dnorm = _mm256_mul_ps(load8(w + c, k), load8(dout + c, k));
        int h = (c >> 3) & 1;
        dm[h] = _mm256_add_ps(dm[h], dnorm);
        dnm[h] = _mm256_add_ps(dnm[h], keep8(_mm256_mul_ps(dnorm, norm), k));
    }
    const __m256 dmv = _mm256_set1_ps(total8(dm[0], dm[1]) / (float)C);
    const __m256 dnmv = _mm256_set1_ps(total8(dnm[0], dnm[1]) / (float)C);
    for (int c = 0; c < C; c += 8) {
        __m256i k = mask8(C - c);
        __m256 norm = _mm256_mul_ps(_mm256_sub_ps(load8(x + c, k), mv), sv);
        __m256 dnorm = _mm256_mul_ps(load8(w + c, k), load8(dout + c, k));
        __m256 g = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(dnorm, dmv), _mm256_mul_ps(norm, dnmv)),
                                 sv);
        _mm256_maskstore_ps(dinp + c, k, _mm256_add_ps(load8(dinp + c, k), g));
    }
}

GT_AVX2 static void layernorm_param_row_avx2(float *dweight, float *dbias, const float *dout,
                                             const float *x, float m, float s, int lo, int hi)
{
    const __m256 mv = _mm256_set1_ps(m), sv = _mm256_set1_ps(s);
    int c = lo;
    for (; c + 8 <= hi; c += 8) {
        __m256 d = _mm256_loadu_ps(dout + c);
        __m256 n = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + c), mv), sv);
        _mm256_storeu_ps(dbias + c, _mm256_add_ps(_mm256_loadu_ps(dbias + c), d));
        _mm256_storeu_ps(dweight + c, _mm256_add_ps(_mm256_loadu_ps(dweight + c),
                                                    _mm256_mul_ps(n, d)));
    }
    for (; c < hi; c++) {
        dbias[c] += dout[c];
        dweight[c] += (x[c] - m) * s * dout[c];
    }
}

GT_AVX2 static void softmax_bwd_row_avx2(float *d, const float *a, int n)
{
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n; i += 8) {
        __m256i k = mask8(n - i);
        acc[(i >> 3) & 1] = _mm256_add_ps(acc[(i >> 3) & 1],
                                          _mm256_mul_ps(load8(a + i, k), load8(d + i, k)));
    }
    const __m256 dot = _mm256_set1_ps(total8(acc[0], acc[1]));
    for (int i = 0; i < n; i += 8) {
        __m256i k = mask8(n - i);
        __m256 r = _mm256_mul_ps(load8(a + i, k), _mm256_sub_ps(load8(d + i, k), dot));
        _mm256_maskstore_ps(d + i, k, r);
    }
}

// ---- AVX-512F path ----------------------------------------------------------------------------

GT_AVX512 static inline __mmask16 mask16(int rem)
{
    return rem >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rem) - 1);
}

GT_AVX512 static inline float total16(__m512 acc)
{
    float lanes[16];
    _mm512_storeu_ps(lanes, acc);
    return lanes_total(lanes);
}

GT_AVX512 static inline __m512 exp16(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(EXP_HI)), _mm512_set1_ps(EXP_LO));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

GT_AVX512 static float exp_shift_sum_avx512(float *out, const float *x, int n, float shift)
{
    __m512 s = _mm512_set1_ps(shift), acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
        if (out != NULL) {
            _mm512_storeu_ps(out + i, e);
        }
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 k = mask16(n - i);
        __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), s)));
        if (out != NULL) {
            _mm512_mask_storeu_ps(out + i, k, e);
        }
        acc = _mm512_add_ps(acc, e);
    }
    return total16(acc);
}

GT_AVX512 static float max_avx512(const float *x, int n)
{
    __m512 m = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    }
    if (i < n) {
        __mmask16 k = mask16(n - i);
        m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + i));
    }
    return _mm512_reduce_max_ps(m);
}

GT_AVX512 static void scale_avx512(float *x, int n, float a)
{
    __m512 s = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), s));
    }
    for (; i < n; i++) {
        x[i] *= a;
    }
}

GT_AVX512 static void gelu_fwd_avx512(float *out, const float *inp, size_t lo, size_t hi)
{
    const __m512 c = _mm512_set1_ps(GELU_C), s = _mm512_set1_ps(-2.0f * GELU_SCALE);
    const __m512 one = _mm512_set1_ps(1.0f);
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i);
        __m512 u = _mm512_fmadd_ps(_mm512_mul_ps(c, x), _mm512_mul_ps(x, x), x);
        __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_mul_ps(s, u))));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(x, sig));
    }
    for (; i < hi; i++) {
        out[i] = gelu_one(inp[i]);
    }
}

GT_AVX512 static void gelu_bwd_avx512(float *dinp, const float *inp, const float *dout,
                                      size_t lo, size_t hi)
{
    const __m512 c = _mm512_set1_ps(GELU_C), c3 = _mm512_set1_ps(3.0f * GELU_C);
    const __m512 s = _mm512_set1_ps(-2.0f * GELU_SCALE), g = _mm512_set1_ps(GELU_SCALE);
    const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i), x2 = _mm512_mul_ps(x, x);
        __m512 u = _mm512_fmadd_ps(_mm512_mul_ps(c, x), x2, x);
        __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_mul_ps(s, u))));
        __m512 du = _mm512_mul_ps(g, _mm512_fmadd_ps(c3, x2, one));
        __m512 ds = _mm512_mul_ps(_mm512_mul_ps(two, sig), _mm512_sub_ps(one, sig));
        __m512 local = _mm512_fmadd_ps(_mm512_mul_ps(x, ds), du, sig);
        _mm512_storeu_ps(dinp + i, _mm512_mul_ps(local, _mm512_loadu_ps(dout + i)));
    }
    for (; i < hi; i++) {
        dinp[i] = gelu_grad_one(inp[i], dout[i]);
    }
}

GT_AVX512 static void adamw_avx512(float *p, float *m, float *v, const float *g, size_t lo,
                                   size_t hi, const gt_simd_adamw_hp *h)
{
    const __m512 b1 = _mm512_set1_ps(h->beta1), b2 = _mm512_set1_ps(h->beta2);
    const __m512 nb1 = _mm512_set1_ps(1.0f - h->beta1), nb2 = _mm512_set1_ps(1.0f - h->beta2);
    const __m512 bc1 = _mm512_set1_ps(h->bc1), bc2 = _mm512_set1_ps(h->bc2);
    const __m512 eps = _mm512_set1_ps(h->eps), lr = _mm512_set1_ps(h->lr);
    const __m512 wd = _mm512_set1_ps(h->wd), gs = _mm512_set1_ps(h->grad_scale);
    for (size_t i = lo; i < hi; i += 16) {
        __mmask16 k = mask16(hi - i >= 16 ? 16 : (int)(hi - i));
        __m512 gi = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, g + i), gs);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(k, m + i)),
                                  _mm512_mul_ps(nb1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(k, v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(nb2, gi), gi));
        __m512 mhat = _mm512_div_ps(mi, bc1), vhat = _mm512_div_ps(vi, bc2);
        __m512 pi = _mm512_maskz_loadu_ps(k, p + i);
        __m512 upd = _mm512_add_ps(_mm512_div_ps(mhat, _mm512_add_ps(_mm512_sqrt_ps(vhat), eps)),
                                   _mm512_mul_ps(wd, pi));
        _mm512_mask_storeu_ps(m + i, k, mi);
        _mm512_mask_storeu_ps(v + i, k, vi);
        _mm512_mask_storeu_ps(p + i, k, _mm512_sub_ps(pi, _mm512_mul_ps(lr, upd)));
    }
}

GT_AVX512 static void layernorm_row_avx512(float *out, float *mean, float *rstd, const float *x,
                                           const float *w, const float *b, int C, float eps)
{
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < C; c += 16) {
        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mask16(C - c), x + c));
    }
    float m = total16(acc) / (float)C;
    const __m512 mv = _mm512_set1_ps(m);
    acc = _mm512_setzero_ps();
    for (int c = 0; c < C; c += 16) {
        __mmask16 k = mask16(C - c);
        __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + c), mv);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(d, d));
    }
    float v = total16(acc) / (float)C;
    float s = 1.0f / sqrtf(v + eps);
    const __m512 sv = _mm512_set1_ps(s);
    for (int c = 0; c < C; c += 16) {
        __mmask16 k = mask16(C - c);
        __m512 n = _mm512_mul_ps(sv, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), mv));
        __m512 o = _mm512_add_ps(_mm512_mul_ps(n, _mm512_maskz_loadu_ps(k, w + c)),
                                 _mm512_maskz_loadu_ps(k, b + c));
        _mm512_mask_storeu_ps(out + c, k, o);
    }
    *mean = m;
    *rstd = s;
}

GT_AVX512 static void layernorm_bwd_row_avx512(float *dinp, const float *dout, const float *x,
                                               const float *w, float m, float s, int C)
{
    const __m512 mv = _mm512_set1_ps(m), sv = _mm512_set1_ps(s);
    __m512 dm = _mm512_setzero_ps(), dnm = _mm512_setzero_ps();
    for (int c = 0; c < C; c += 16) {
        __mmask16 k = mask16(C - c);
        __m512 norm = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), mv), sv);
        __m512 dnorm = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + c),
                                     _mm512_maskz_loadu_ps(k, dout + c));
        dm = _mm512_add_ps(dm, dnorm);
        dnm = _mm512_add_ps(dnm, _mm512_maskz_mul_ps(k, dnorm, norm));
    }
    const __m512 dmv = _mm512_set1_ps(total16(dm) / (float)C);
    const __m512 dnmv = _mm512_set1_ps(total16(dnm) / (float)C);
    for (int c = 0; c < C; c += 16) {
        __mmask16 k = mask16(C - c);
        __m512 norm = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), mv), sv);
        __m512 dnorm = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + c),
                                     _mm512_maskz_loadu_ps(k, dout + c));
        __m512 g = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(dnorm, dmv), _mm512_mul_ps(norm, dnmv)),
                                 sv);
        _mm512_mask_storeu_ps(dinp + c, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dinp + c), g));
    }
}

GT_AVX512 static void layernorm_param_row_avx512(float *dweight, float *dbias, const float *dout,
                                                 const float *x, float m, float s, int lo, int hi)
{
    const __m512 mv = _mm512_set1_ps(m), sv = _mm512_set1_ps(s);
    int c = lo;
    for (; c + 16 <= hi; c += 16) {
        __m512 d = _mm512_loadu_ps(dout + c);
        __m512 n = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + c), mv), sv);
        _mm512_storeu_ps(dbias + c, _mm512_add_ps(_mm512_loadu_ps(dbias + c), d));
        _mm512_storeu_ps(dweight + c, _mm512_add_ps(_mm512_loadu_ps(dweight + c),
                                                    _mm512_mul_ps(n, d)));
    }
    for (; c < hi; c++) {
        dbias[c] += dout[c];
        dweight[c] += (x[c] - m) * s * dout[c];
    }
}

GT_AVX512 static void softmax_bwd_row_avx512(float *d, const float *a, int n)
{
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = mask16(n - i);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + i),
                                               _mm512_maskz_loadu_ps(k, d + i)));
    }
    const __m512 dot = _mm512_set1_ps(total16(acc));
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = mask16(n - i);
        __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + i),
                                 _mm512_sub_ps(_mm512_maskz_loadu_ps(k, d + i), dot));
        _mm512_mask_storeu_ps(d + i, k, r);
    }
}
#endif

// ---- dispatch ---------------------------------------------------------------------------------

#if defined(__x86_64__)
#define PICK(isa, avx512_call, avx2_call)  \
    do {                                   \
        if ((isa) == GT_CPU_ISA_AVX512) {  \
            avx512_call;                   \
        }                                  \
        if ((isa) == GT_CPU_ISA_AVX2) {    \
            avx2_call;                     \
        }                                  \
    } while (0)
#else
#define PICK(isa, avx512_call, avx2_call) (void)(isa)
#endif

float gt_simd_max(gt_cpu_isa isa, const float *x, int n)
{
    PICK(isa, return max_avx512(x, n), return max_avx2(x, n));
    return max_scalar(x, n);
}

float gt_simd_exp_shift_sum(gt_cpu_isa isa, float *out, const float *x, int n, float shift)
{
    PICK(isa, return exp_shift_sum_avx512(out, x, n, shift),
         return exp_shift_sum_avx2(out, x, n, shift));
    return exp_shift_sum_scalar(out, x, n, shift);
}

void gt_simd_scale(gt_cpu_isa isa, float *x, int n, float a)
{
    PICK(isa, scale_avx512(x, n, a); return, scale_avx2(x, n, a); return);
    for (int i = 0; i < n; i++) {
        x[i] *= a;
    }
}

void gt_simd_gelu_fwd(gt_cpu_isa isa, float *out, const float *inp, size_t lo, size_t hi)
{
    PICK(isa, gelu_fwd_avx512(out, inp, lo, hi); return, gelu_fwd_avx2(out, inp, lo, hi); return);
    for (size_t i = lo; i < hi; i++) {
        out[i] = gelu_one(inp[i]);
    }
}

void gt_simd_gelu_bwd(gt_cpu_isa isa, float *dinp, const float *inp, const float *dout, size_t lo,
                      size_t hi)
{
    PICK(isa, gelu_bwd_avx512(dinp, inp, dout, lo, hi); return,
         gelu_bwd_avx2(dinp, inp, dout, lo, hi); return);
    for (size_t i = lo; i < hi; i++) {
        dinp[i] = gelu_grad_one(inp[i], dout[i]);
    }
}

void gt_simd_adamw(gt_cpu_isa isa, float *p, float *m, float *v, const float *g, size_t lo,
                   size_t hi, const gt_simd_adamw_hp *h)
{
    PICK(isa, adamw_avx512(p, m, v, g, lo, hi, h); return, adamw_avx2(p, m, v, g, lo, hi, h);
         return);
    for (size_t i = lo; i < hi; i++) {
        adamw_one(p + i, m + i, v + i, g[i], h);
    }
}

void gt_simd_layernorm_row(gt_cpu_isa isa, float *out, float *mean, float *rstd, const float *x,
                           const float *weight, const float *bias, int C, float eps)
{
    PICK(isa, layernorm_row_avx512(out, mean, rstd, x, weight, bias, C, eps); return,
         layernorm_row_avx2(out, mean, rstd, x, weight, bias, C, eps); return);
    layernorm_row_scalar(out, mean, rstd, x, weight, bias, C, eps);
}

void gt_simd_layernorm_bwd_row(gt_cpu_isa isa, float *dinp, const float *dout, const float *x,
                               const float *weight, float m, float s, int C)
{
    PICK(isa, layernorm_bwd_row_avx512(dinp, dout, x, weight, m, s, C); return,
         layernorm_bwd_row_avx2(dinp, dout, x, weight, m, s, C); return);
    layernorm_bwd_row_scalar(dinp, dout, x, weight, m, s, C);
}

void gt_simd_layernorm_param_row(gt_cpu_isa isa, float *dweight, float *dbias, const float *dout,
                                 const float *x, float m, float s, int lo, int hi)
{
    PICK(isa, layernorm_param_row_avx512(dweight, dbias, dout, x, m, s, lo, hi); return,
         layernorm_param_row_avx2(dweight, dbias, dout, x, m, s, lo, hi); return);
    for (int c = lo; c < hi; c++) {
        dbias[c] += dout[c];
        dweight[c] += (x[c] - m) * s * dout[c];
    }
}

void gt_simd_softmax_bwd_row(gt_cpu_isa isa, float *d, const float *a, int n)
{
    PICK(isa, softmax_bwd_row_avx512(d, a, n); return, softmax_bwd_row_avx2(d, a, n); return);
    softmax_bwd_row_scalar(d, a, n);
}
