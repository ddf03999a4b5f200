// kernels/ (cpu_simd.c): the choice of instruction-set path (refused where the CPU lacks it, the
// detection against cpuid), the vector exp against libm in double over its whole range (the
// subnormal end included), and every op that has per-path code run on every path this CPU has:
// AVX2 and AVX-512 give the same bits; layernorm, AdamW and the attention backward give the
// scalar twin's bits too; the rest stay within float rounding of the scalar twin.
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

#include <gputravel/kernels.h>

#include "kernels/cpu_simd.h"

static uint64_t rng_state = 7;
static float frand(void)  // [-1, 1)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545F4914F6CDD1Dull) >> 40) / 8388608.0f - 1.0f;
}

static float *randv(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        v[i] = scale * frand();
    }
    return v;
}

static gt_err host(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    (void)ctx;
    (void)bytes;
    *ptr = (void *)(uintptr_t)ref.buf;  // the handle is the host address
    return GT_OK;
}

static gt_dref H(const void *p) { return (gt_dref){(uintptr_t)p, 0}; }

static void run_on(gt_cpu_isa isa, gt_op op)
{
    GT_ASSERT_OK(gt_ops_cpu_set_isa(isa));
    GT_ASSERT_OK(gt_ops_cpu_run(&op, host, NULL));
}

// ---- choosing a path --------------------------------------------------------------------------

static void detection_matches_cpuid(void **state)
{
    (void)state;
    bool want[GT_CPU_ISA_COUNT_] = {true, false, false};
#if defined(__x86_64__)
    want[GT_CPU_ISA_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    want[GT_CPU_ISA_AVX512] = __builtin_cpu_supports("avx512f");
#endif
    gt_cpu_isa best = GT_CPU_ISA_SCALAR;
    for (int i = 0; i < GT_CPU_ISA_COUNT_; i++) {
        gt_cpu_isa isa = (gt_cpu_isa)i;
        assert_int_equal(gt_cpu_isa_supported(isa), want[i]);
        gt_cpu_isa parsed = GT_CPU_ISA_COUNT_;
        GT_ASSERT_OK(gt_cpu_isa_parse(gt_cpu_isa_name(isa), &parsed));
        assert_int_equal(parsed, isa);
        if (want[i]) {
            GT_ASSERT_OK(gt_ops_cpu_set_isa(isa));
            assert_int_equal(gt_ops_cpu_isa(), isa);
            best = isa;
        } else {  // a path this CPU lacks: refused, and the path stays
            GT_ASSERT_OK(gt_ops_cpu_set_isa(GT_CPU_ISA_SCALAR));
            GT_ASSERT_CODE(gt_ops_cpu_set_isa(isa), GT_E_UNSUPPORTED);
            assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_SCALAR);
        }
        print_message("%-7s %s\n", gt_cpu_isa_name(isa), want[i] ? "runs here" : "not here");
    }
    assert_int_equal(gt_cpu_isa_best(), best);
    GT_ASSERT_OK(gt_ops_cpu_select_isa(NULL));  // no choice: the best
    assert_int_equal(gt_ops_cpu_isa(), best);
    char line[160];
    gt_ops_cpu_describe(line, sizeof line);
    assert_non_null(strstr(line, gt_cpu_isa_name(best)));
    assert_non_null(strstr(line, "the best this cpu has"));
    assert_non_null(strstr(line, "OpenBLAS core"));
    GT_ASSERT_OK(gt_ops_cpu_select_isa("scalar"));
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_SCALAR);
    gt_ops_cpu_describe(line, sizeof line);
    assert_non_null(strstr(line, "cpu kernels: scalar (chosen"));
    gt_ops_cpu_set_simd(true);  // the old switch: on is the best, off scalar
    assert_int_equal(gt_ops_cpu_isa(), best);
    gt_ops_cpu_set_simd(false);
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_SCALAR);
    gt_ops_cpu_set_simd(true);
}

// A CPU without AVX-512 (the VM) or without FMA: the path it lacks is refused, naming
// the feature, and the kernels keep the path they had.
static void a_path_the_cpu_lacks_is_refused(void **state)
{
    (void)state;
    const gt_cpu_features avx2_vm = {.avx2 = true, .fma = true, .avx512f = false};
    const gt_cpu_features no_fma = {.avx2 = true, .fma = false, .avx512f = false};
    const gt_cpu_features bare = {0};
    GT_ASSERT_OK(gt_ops_cpu_choose_isa(GT_CPU_ISA_SCALAR, &bare));
    GT_ASSERT_ERR(gt_ops_cpu_choose_isa(GT_CPU_ISA_AVX512, &avx2_vm), GT_E_UNSUPPORTED, "avx512f");
    GT_ASSERT_ERR(gt_ops_cpu_choose_isa(GT_CPU_ISA_AVX512, &avx2_vm), GT_E_UNSUPPORTED,
                  "best path is avx2");
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_SCALAR);
    GT_ASSERT_OK(gt_ops_cpu_choose_isa(GT_CPU_ISA_AVX2, &avx2_vm));
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_AVX2);
    GT_ASSERT_ERR(gt_ops_cpu_choose_isa(GT_CPU_ISA_AVX2, &no_fma), GT_E_UNSUPPORTED, "fma");
    GT_ASSERT_ERR(gt_ops_cpu_choose_isa(GT_CPU_ISA_AVX2, &bare), GT_E_UNSUPPORTED, "avx2");
    GT_ASSERT_ERR(gt_ops_cpu_choose_isa(GT_CPU_ISA_AVX512, &bare), GT_E_UNSUPPORTED, "avx512f");
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_AVX2);
    GT_ASSERT_CODE(gt_ops_cpu_choose_isa(GT_CPU_ISA_COUNT_, &avx2_vm), GT_E_ARG);
    GT_ASSERT_CODE(gt_ops_cpu_choose_isa((gt_cpu_isa)-1, &avx2_vm), GT_E_ARG);
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_AVX2);
    // names: exactly the three, as GPUTRAVEL_CPU_ISA spells them
    const char *bad[] = {"AVX2", "avx", "avx512f", "sse2", "", "avx2 ", "neon"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gt_cpu_isa isa = GT_CPU_ISA_SCALAR;
        GT_ASSERT_CODE(gt_cpu_isa_parse(bad[i], &isa), GT_E_ARG);
        if (bad[i][0] != '\0') {  // "" selects the default
            GT_ASSERT_CODE(gt_ops_cpu_select_isa(bad[i]), GT_E_ARG);
        }
    }
    gt_cpu_isa isa = GT_CPU_ISA_SCALAR;
    GT_ASSERT_CODE(gt_cpu_isa_parse(NULL, &isa), GT_E_ARG);
    assert_int_equal(gt_ops_cpu_isa(), GT_CPU_ISA_AVX2);
    gt_ops_cpu_set_simd(true);
}

// ---- OpenBLAS's core ---------------------------------------------------------------------------

// The core to run instead of OpenBLAS's pick: only ever wider vectors, never a core the CPU lacks.
static void blas_core_follows_the_cpu(void **state)
{
    (void)state;
    const gt_cpu_features emerald = {.avx2 = true, .fma = true, .avx512f = true,
                                     .avx512_skx = true};
    const gt_cpu_features knights = {.avx2 = true, .fma = true, .avx512f = true};  // no BW/DQ/VL
    const gt_cpu_features avx2_vm = {.avx2 = true, .fma = true};
    const gt_cpu_features bare = {0};
    assert_string_equal(gt_blas_core_upgrade_for("Prescott", &emerald), "SkylakeX");
    assert_string_equal(gt_blas_core_upgrade_for("Haswell", &emerald), "SkylakeX");
    assert_string_equal(gt_blas_core_upgrade_for(NULL, &emerald), "SkylakeX");
    assert_string_equal(gt_blas_core_upgrade_for("Prescott", &knights), "Haswell");
    assert_string_equal(gt_blas_core_upgrade_for("Nehalem", &avx2_vm), "Haswell");
    const char *fine_on_emerald[] = {"SkylakeX", "Cooperlake", "cooperlake", "SapphireRapids"};
    for (size_t i = 0; i < sizeof fine_on_emerald / sizeof fine_on_emerald[0]; i++) {
        assert_null(gt_blas_core_upgrade_for(fine_on_emerald[i], &emerald));
    }
    assert_null(gt_blas_core_upgrade_for("Haswell", &avx2_vm));
    assert_null(gt_blas_core_upgrade_for("Zen", &avx2_vm));
    assert_null(gt_blas_core_upgrade_for("SkylakeX", &avx2_vm));  // never a step down
    assert_null(gt_blas_core_upgrade_for("Haswell", &knights));
    assert_null(gt_blas_core_upgrade_for("Prescott", &bare));
}

// The core named in a startup line ("... OpenBLAS core NAME ..."), into out.
static void startup_core(const gt_buf *log, char *out, size_t cap)
{
    const char *at = strstr((const char *)log->data, "OpenBLAS core ");
    if (at == NULL) {
        gt_test_fail_log(log, NULL, "no OpenBLAS core in gputravel's startup line");
    }
    at += strlen("OpenBLAS core ");
    size_t n = strcspn(at, " \n");
    assert_true(n > 0 && n < cap);
    memcpy(out, at, n);
    out[n] = '\0';
}

// gputravel itself (a child without OPENBLAS_CORETYPE) runs a core as good as this CPU allows,
// restarting once where OpenBLAS picked a fallback (as on an Emerald Rapids VM); a set value,
// the user's, is left alone.
static void gputravel_runs_the_core_the_cpu_allows(void **state)
{
    (void)state;
    const char *args[] = {"train", "--help", NULL};
    char pinned[64] = "", core[64];
    snprintf(pinned, sizeof pinned, "%s", getenv("OPENBLAS_CORETYPE"));  // testlib's pin
    unsetenv("OPENBLAS_CORETYPE");
    gt_buf out = {0};
    assert_int_equal(gt_test_run_cli(&out, args), 0);
    startup_core(&out, core, sizeof core);
    gt_cpu_features have = gt_cpu_features_detect();
    assert_null(gt_blas_core_upgrade_for(core, &have));
    const char *ours = gt_blas_core_name();  // this process: OpenBLAS's own pick
    if (gt_blas_core_upgrade() != NULL) {
        char said[128];
        snprintf(said, sizeof said, "set by gputravel: OpenBLAS picked %s", ours);
        assert_non_null(strstr((const char *)out.data, said));
    }
    print_message("OpenBLAS picks %s here; gputravel runs %s\n", ours, core);
    gt_buf_free(&out);
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    assert_int_equal(gt_test_run_cli(&out, args), 0);
    startup_core(&out, core, sizeof core);
    assert_string_equal(core, "Prescott");
    assert_null(strstr((const char *)out.data, "set by gputravel"));
    gt_buf_free(&out);
    setenv("OPENBLAS_CORETYPE", pinned, 1);
}

// ---- exp --------------------------------------------------------------------------------------

// Every vector path's exp against exp() in double, on a grid over [-110, 88.37] plus the edges
// of the subnormal range: within 2 ulp where the result is normal, within one subnormal step
// (2^-149) below FLT_MIN; and the returned sum is the outputs' sum in the 16-lane order.
static void vector_exp_is_accurate_everywhere(void **state)
{
    (void)state;
    enum { N = 200003 };  // not a multiple of 16: the masked tail runs
    float *x = malloc(N * sizeof *x), *out = malloc(N * sizeof *out);
    float *first = malloc(N * sizeof *first);
    for (int i = 0; i < N - 3; i++) {
        x[i] = -110.0f + (88.37f + 110.0f) * (float)i / (float)(N - 4);
    }
    x[N - 3] = -87.33654f;  // FLT_MIN's edge
    x[N - 2] = -103.2789f;  // 2^-149's edge
    x[N - 1] = 0.0f;
    int paths = 0;
    for (int p = GT_CPU_ISA_AVX2; p < GT_CPU_ISA_COUNT_; p++) {
        gt_cpu_isa isa = (gt_cpu_isa)p;
        if (!gt_cpu_isa_supported(isa)) {
            print_message("%s: not on this cpu\n", gt_cpu_isa_name(isa));
            continue;
        }
        float sum = gt_simd_exp_shift_sum(isa, out, x, N, 0.0f);
        double worst_ulp = 0.0, worst_sub = 0.0;
        float lanes[16] = {0};
        for (int i = 0; i < N; i++) {
            double want = exp((double)x[i]), err = fabs((double)out[i] - want);
            lanes[i % 16] += out[i];
            if (want >= 0x1p-126) {
                double ulp = ldexp(1.0, ilogb(want) - 23);
                worst_ulp = fmax(worst_ulp, err / ulp);
            } else {
                worst_sub = fmax(worst_sub, err / 0x1p-149);
            }
        }
        float total = 0.0f;
        for (int l = 0; l < 16; l++) {
            total += lanes[l];
        }
        print_message("%s exp: worst %.2f ulp (normal), %.2f of 2^-149 (subnormal)\n",
                      gt_cpu_isa_name(isa), worst_ulp, worst_sub);
        assert_true(worst_ulp <= 2.0);
        assert_true(worst_sub <= 1.0);
        assert_true(out[N - 1] == 1.0f);
        assert_true(sum == total);
        if (paths++ == 0) {
            memcpy(first, out, N * sizeof *out);
        } else {
            assert_memory_equal(first, out, N * sizeof *out);  // avx2 == avx512, bit for bit
        }
    }
    free(x);
    free(out);
    free(first);
}

// ---- every op on every path -------------------------------------------------------------------

typedef struct {
    const char *what;
    size_t n;  // floats compared
    float *got[GT_CPU_ISA_COUNT_];
} per_path;

static void per_path_free(per_path *r)
{
    for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
        free(r->got[p]);
    }
}

// scalar_bits: every path equals the scalar twin bit for bit; otherwise the vector paths equal
// each other and stay within 1e-6 (relative to the larger of |x| and 1) of the scalar twin.
static void compare(const per_path *r, bool scalar_bits)
{
    const float *ref = r->got[GT_CPU_ISA_SCALAR], *vec = NULL;
    for (int p = GT_CPU_ISA_AVX2; p < GT_CPU_ISA_COUNT_; p++) {
        const float *g = r->got[p];
        if (g == NULL) {
            continue;
        }
        double worst = 0.0;
        for (size_t i = 0; i < r->n; i++) {
            worst = fmax(worst, fabs((double)g[i] - ref[i]) / fmax(1.0, fabs(ref[i])));
        }
        print_message("%-26s %-6s worst %.1e from scalar\n", r->what, gt_cpu_isa_name(p), worst);
        if (scalar_bits) {
            assert_memory_equal(g, ref, r->n * sizeof *g);
        }
        assert_true(worst <= 1e-6);
        if (vec != NULL) {
            assert_memory_equal(g, vec, r->n * sizeof *g);
        }
        vec = g;
    }
}

static float *keep(const float *p, size_t n)
{
    float *c = malloc(n * sizeof *c);
    memcpy(c, p, n * sizeof *c);
    return c;
}

static void layernorm_on_every_path(void **state)
{
    (void)state;
    const int shapes[][2] = {{5, 37}, {3, 29}, {2, 768}, {4, 7}};  // tails of 5, 13, 0, 7
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], C = shapes[s][1];
        size_t nc = (size_t)N * C;
        float *x = randv(nc, 2.0f), *w = randv(C, 1.0f), *b = randv(C, 0.5f);
        float *dout = randv(nc, 1.0f), *out = malloc(nc * 4), *mean = malloc(N * 4);
        float *rstd = malloc(N * 4), *dx = malloc(nc * 4), *dw = malloc(C * 4), *db = malloc(C * 4);
        per_path fo = {"layernorm out", nc, {0}}, fm = {"layernorm mean,rstd", 2 * (size_t)N, {0}};
        per_path bx = {"layernorm dinp", nc, {0}}, bw = {"layernorm dweight,dbias", 2 * (size_t)C, {0}};
        for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
            if (!gt_cpu_isa_supported((gt_cpu_isa)p)) {
                continue;
            }
            run_on(p, gt_op_layernorm_fwd(H(out), H(mean), H(rstd), H(x), H(w), H(b), N, C));
            fo.got[p] = keep(out, nc);
            fm.got[p] = malloc(2 * N * 4);
            memcpy(fm.got[p], mean, N * 4);
            memcpy(fm.got[p] + N, rstd, N * 4);
            for (size_t i = 0; i < nc; i++) {  // backward accumulates: start from the same
                dx[i] = 0.25f;
            }
            for (int c = 0; c < C; c++) {
                dw[c] = db[c] = 0.5f;
            }
            run_on(p, gt_op_layernorm_bwd(H(dx), H(dw), H(db), H(dout), H(x), H(w), H(mean),
                                          H(rstd), N, C));
            bx.got[p] = keep(dx, nc);
            bw.got[p] = malloc(2 * C * 4);
            memcpy(bw.got[p], dw, C * 4);
            memcpy(bw.got[p] + C, db, C * 4);
        }
        compare(&fo, true);
        compare(&fm, true);
        compare(&bx, true);
        compare(&bw, true);
        per_path_free(&fo); per_path_free(&fm); per_path_free(&bx); per_path_free(&bw);
        free(x); free(w); free(b); free(dout); free(out); free(mean); free(rstd); free(dx);
        free(dw); free(db);
    }
    gt_ops_cpu_set_simd(true);
}

static void adamw_on_every_path(void **state)
{
    (void)state;
    size_t N = 70013;  // two threads, a masked tail on every path
    float *p0 = randv(N, 1.0f), *g = randv(N, 0.1f), *m0 = randv(N, 0.01f), *v0 = randv(N, 0.01f);
    for (size_t i = 0; i < N; i++) {
        v0[i] = fabsf(v0[i]);
    }
    per_path rp = {"adamw params", N, {0}}, rm = {"adamw m", N, {0}}, rv = {"adamw v", N, {0}};
    for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
        if (!gt_cpu_isa_supported((gt_cpu_isa)p)) {
            continue;
        }
        float *pp = keep(p0, N), *mm = keep(m0, N), *vv = keep(v0, N);
        run_on(p, gt_op_adamw(H(pp), H(mm), H(vv), H(g), (int64_t)N, 1e-3f, 0.9f, 0.95f, 1e-8f,
                              0.1f, 1.0f - powf(0.9f, 3.0f), 1.0f - powf(0.95f, 3.0f), 0.5f));
        rp.got[p] = pp;
        rm.got[p] = mm;
        rv.got[p] = vv;
    }
    compare(&rp, true);
    compare(&rm, true);
    compare(&rv, true);
    per_path_free(&rp); per_path_free(&rm); per_path_free(&rv);
    free(p0); free(g); free(m0); free(v0);
    gt_ops_cpu_set_simd(true);
}

static void gelu_on_every_path(void **state)
{
    (void)state;
    size_t N = 100007;  // above the thread threshold, a scalar tail of 7
    float *x = randv(N, 6.0f), *dout = randv(N, 1.0f), *out = malloc(N * 4), *dx = malloc(N * 4);
    per_path f = {"gelu out", N, {0}}, b = {"gelu dinp", N, {0}};
    for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
        if (!gt_cpu_isa_supported((gt_cpu_isa)p)) {
            continue;
        }
        run_on(p, gt_op_gelu_fwd(H(out), H(x), (int64_t)N));
        run_on(p, gt_op_gelu_bwd(H(dx), H(x), H(dout), (int64_t)N));
        f.got[p] = keep(out, N);
        b.got[p] = keep(dx, N);
    }
    compare(&f, false);
    compare(&b, false);
    per_path_free(&f); per_path_free(&b);
    free(x); free(dout); free(out); free(dx);
    gt_ops_cpu_set_simd(true);
}

static void softmax_xent_on_every_path(void **state)
{
    (void)state;
    int B = 2, T = 3, V = 1013, Vp = 1024, BT = B * T;  // V: a tail of 5 past 63 blocks
    size_t nl = (size_t)BT * Vp;
    float *l0 = randv(nl, 8.0f), *l = malloc(nl * 4), *loss = malloc(BT * 4);
    int32_t tgt[6] = {0, 1012, 3, 500, 17, 999};
    per_path rl = {"softmax_xent losses", (size_t)BT, {0}}, rd = {"softmax_xent dlogits", nl, {0}};
    for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
        if (!gt_cpu_isa_supported((gt_cpu_isa)p)) {
            continue;
        }
        memcpy(l, l0, nl * 4);
        run_on(p, gt_op_softmax_xent(H(loss), H(l), H(tgt), B, T, V, Vp, 1, 1.0f / BT));
        rl.got[p] = keep(loss, BT);
        rd.got[p] = keep(l, nl);
    }
    compare(&rl, false);
    compare(&rd, false);
    per_path_free(&rl); per_path_free(&rd);
    free(l0); free(l); free(loss);
    gt_ops_cpu_set_simd(true);
}

// Rows of 1..T (every tail length): the forward's softmax on the vector paths equal to each
// other; the backward (no exp) on every path equal to the scalar twin, from one att.
static void attention_on_every_path(void **state)
{
    (void)state;
    int B = 2, T = 37, C = 24, NH = 2;
    size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *x = randv(n3, 1.5f), *dout = randv(n, 1.0f), *out = malloc(n * 4);
    float *att = malloc(na * 4), *att0 = NULL, *dx = malloc(n3 * 4);
    per_path fo = {"attention out", n, {0}}, fa = {"attention att", na, {0}};
    per_path bx = {"attention dinp", n3, {0}};
    for (int p = 0; p < GT_CPU_ISA_COUNT_; p++) {
        if (!gt_cpu_isa_supported((gt_cpu_isa)p)) {
            continue;
        }
        run_on(p, gt_op_attention_fwd(H(out), H(att), H(x), B, T, C, NH));
        fo.got[p] = keep(out, n);
        fa.got[p] = keep(att, na);
        if (att0 == NULL) {
            att0 = keep(att, na);  // the scalar path's: every backward starts from it
        }
        run_on(p, gt_op_attention_bwd(H(dx), H(dout), H(x), H(att0), B, T, C, NH));
        bx.got[p] = keep(dx, n3);
    }
    compare(&fo, false);
    compare(&fa, false);
    compare(&bx, true);
    per_path_free(&fo); per_path_free(&fa); per_path_free(&bx);
    free(x); free(dout); free(out); free(att); free(att0); free(dx);
    gt_ops_cpu_set_simd(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(detection_matches_cpuid),
        cmocka_unit_test(a_path_the_cpu_lacks_is_refused),
        cmocka_unit_test(blas_core_follows_the_cpu),
        cmocka_unit_test(gputravel_runs_the_core_the_cpu_allows),
        cmocka_unit_test(vector_exp_is_accurate_everywhere),
        cmocka_unit_test(layernorm_on_every_path),
        cmocka_unit_test(adamw_on_every_path),
        cmocka_unit_test(gelu_on_every_path),
        cmocka_unit_test(softmax_xent_on_every_path),
        cmocka_unit_test(attention_on_every_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
