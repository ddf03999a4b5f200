// Per-shape profile of the training matmuls (issue 18 goal 2): for each (kind, N, C, OC) of a
// GPT-2 step, the time of the real op (gt_device_launch on the cpu device, the kernels' tiling)
// against the same product as plain OpenBLAS calls, each as GFLOP/s and as a share of OpenBLAS's
// own sgemm peak measured in the same run (2048^3 on its own threads, as bench_train does).
//   op, hot              one op on the same buffers again and again (everything cached)
//   op, as in a step     the op on each of the shape's per-step copies in turn (12 layers'
//                        weights and gradients, so each is as cold as a step leaves it)
//   1 sgemm, 1 thread    the whole product as one single-threaded sgemm (no tiling at all):
//                        its time / threads is the best any split could reach
//   1 sgemm, OpenBLAS    the whole product on OpenBLAS's own threads (its split, its packing)
// Wall times are the best of --reps after one warm-up, with the median beside them; "cpu ms" is
// the process CPU time (best), which with OMP_WAIT_POLICY=passive counts the work alone and so
// survives a machine shared with other work: compare the op's cpu ms with the 1-thread sgemm's.
//
//   bench_matmul [--threads N] [--reps N] [--bt N] [--cfg a|b]
#include <gputravel/device.h>
#include <gputravel/kernels.h>
#include <gputravel/train.h>

#include "bench_common.h"

#include <cblas.h>

extern void openblas_set_num_threads(int num_threads);

typedef struct {
    const char *name;
    int C, OC, per_step;  // per_step: calls of this shape in one forward (and one backward)
} mm_shape;

#define CHECK(expr)                                                                  \
    do {                                                                             \
        gt_err e_ = (expr);                                                          \
        if (e_.code != GT_E_NONE) {                                                  \
            fprintf(stderr, "%s: %s\n", #expr, e_.msg);                              \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static float *filled(size_t n, float scale)
{
    float *x = malloc(sizeof(float) * n);
    if (x == NULL) {
        exit(1);
    }
    uint64_t rng = n;
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * ((float)(gt_rng_u32(&rng) % 2001) / 1000.0f - 1.0f);
    }
    return x;
}

static gt_dbuf upload(gt_device *dev, const float *x, size_t n)
{
    gt_dbuf b = 0;
    CHECK(gt_device_alloc(dev, n * 4, 0, &b));
    CHECK(gt_device_copy_in(dev, b, 0, x, n * 4));
    return b;
}

static gt_dref R(gt_dbuf b)
{
    return (gt_dref){b, 0};
}

typedef struct {
    double best, median, cpu;  // wall s (best, median); process CPU s, best
} timing;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef void (*bench_fn)(void *ctx);

static timing time_it(bench_fn fn, void *ctx, int reps)
{
    double t[64] = {0}, cpu[64] = {0};
    reps = reps > 64 ? 64 : reps;
    fn(ctx);  // warm-up: pages touched, OpenBLAS buffers allocated
    for (int r = 0; r < reps; r++) {
        double t0 = gt_now_seconds(), c0 = cpu_now();
        fn(ctx);
        t[r] = gt_now_seconds() - t0;
        cpu[r] = cpu_now() - c0;
    }
    timing out = {bench_best(t, reps), 0.0, bench_best(cpu, reps)};
    out.median = bench_median(t, reps);
    return out;
}

typedef struct {
    gt_device *dev;
    gt_op op, ops[16];
    int nops, N, C, OC, blas_threads;
    float *inp, *w, *out, *dout, *dinp, *dw;
} mm_ctx;

static void run_op(void *p)
{
    mm_ctx *c = p;
    CHECK(gt_device_launch(c->dev, &c->op));
}

static void run_ops(void *p)  // one op on each copy in turn, as a step meets a layer's weights
{
    mm_ctx *c = p;
    for (int i = 0; i < c->nops; i++) {
        CHECK(gt_device_launch(c->dev, &c->ops[i]));
    }
}

static void fwd_blas(void *p)  // out = inp @ w^T, one call
{
    mm_ctx *c = p;
    openblas_set_num_threads(c->blas_threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->N, c->OC, c->C, 1.0f, c->inp, c->C,
                c->w, c->C, 0.0f, c->out, c->OC);
    openblas_set_num_threads(1);
}

static void bwd_blas(void *p)  // dinp = dout @ w; dw += dout^T @ inp, one call each
{
    mm_ctx *c = p;
    openblas_set_num_threads(c->blas_threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->N, c->C, c->OC, 1.0f, c->dout,
                c->OC, c->w, c->C, 0.0f, c->dinp, c->C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c->OC, c->C, c->N, 1.0f, c->dout, c->OC,
                c->inp, c->C, 1.0f, c->dw, c->C);
    openblas_set_num_threads(1);
}

static double sgemm_peak(int threads)  // as bench_train: OpenBLAS threads, 2048^3, best of 5
{
    enum { n = 2048 };
    float *a = filled((size_t)n * n, 1.0f), *b = filled((size_t)n * n, 1.0f);
    float *c = calloc((size_t)n * n, sizeof(float));
    openblas_set_num_threads(threads);
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = gt_now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        double t = gt_now_seconds() - t0;
        best = r > 0 && t < best ? t : best;
    }
    openblas_set_num_threads(1);
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * (double)n / best / 1e9;
}

static void row(const char *shape, const char *what, double flops, timing t, double peak,
                int per_step)
{
    double g = flops / t.best / 1e9;
    printf("| %s | %s | %.2f | %.2f | %.2f | %.1f | %.0f%% | %.1f |\n", shape, what, t.best * 1e3,
           t.median * 1e3, t.cpu * 1e3, g, 100.0 * g / peak, t.best * 1e3 * per_step);
}

typedef struct {
    double op_fwd, op_bwd, ideal_fwd, ideal_bwd;  // ms per step, summed over shapes
    double cpu_fwd, cpu_bwd, cpu_ideal_fwd, cpu_ideal_bwd;  // CPU ms per step, all threads
} totals;

static timing per_op(timing t, int n)
{
    return (timing){t.best / n, t.median / n, t.cpu / n};
}

// The step's buffers of one shape: `copies` sets, so that a round over them leaves each set's
// weights and gradients as cold as a step leaves a layer's (12 layers of weights do not fit in
// any cache).
typedef struct {
    gt_dbuf inp, w, out, dout, dinp, dw, b, db;
} mm_bufs;

static mm_bufs upload_set(gt_device *dev, const mm_ctx *c, const float *bias)
{
    size_t nin = (size_t)c->N * c->C, nw = (size_t)c->OC * c->C, nout = (size_t)c->N * c->OC;
    mm_bufs s = {upload(dev, c->inp, nin),  upload(dev, c->w, nw),   upload(dev, c->out, nout),
                 upload(dev, c->dout, nout), upload(dev, c->dinp, nin), upload(dev, c->dw, nw),
                 upload(dev, bias, (size_t)c->OC),  upload(dev, bias, (size_t)c->OC)};
    return s;
}

static void free_set(gt_device *dev, const mm_bufs *s)
{
    gt_dbuf all[] = {s->inp, s->w, s->out, s->dout, s->dinp, s->dw, s->b, s->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        CHECK(gt_device_free(dev, all[i]));
    }
}

// One shape's table rows (forward and backward, hot and cold, and the plain-BLAS
// baselines), each timed on buffers of its own
static void bench_shape(gt_device *dev, const mm_shape *s, int N, int threads, int reps,
                        double peak, totals *tot)
{
    mm_ctx c = {.dev = dev, .N = N, .C = s->C, .OC = s->OC};
    size_t nin = (size_t)N * s->C, nw = (size_t)s->OC * s->C, nout = (size_t)N * s->OC;
    c.inp = filled(nin, 1.0f);
    c.w = filled(nw, 0.02f);
    c.out = filled(nout, 0.0f);
    c.dout = filled(nout, 0.01f);
    c.dinp = filled(nin, 0.0f);
    c.dw = filled(nw, 0.0f);
    float *bias = filled((size_t)s->OC, 0.1f);
    c.nops = s->per_step < 16 ? s->per_step : 16;
    mm_bufs sets[16];
    for (int i = 0; i < c.nops; i++) {
        sets[i] = upload_set(dev, &c, bias);
    }
    const mm_bufs *h = &sets[0];
    char shape[96];
    snprintf(shape, sizeof shape, "%s %dx%dx%d", s->name, N, s->C, s->OC);
    double f = 2.0 * N * (double)s->C * s->OC;

    c.op = gt_op_matmul_fwd(R(h->out), R(h->inp), R(h->w), R(h->b), N, s->C, s->OC);
    row(shape, "fwd op, hot", f, time_it(run_op, &c, reps), peak, s->per_step);
    for (int i = 0; i < c.nops; i++) {
        const mm_bufs *b = &sets[i];
        c.ops[i] = gt_op_matmul_fwd(R(b->out), R(b->inp), R(b->w), R(b->b), N, s->C, s->OC);
    }
    timing t = per_op(time_it(run_ops, &c, reps), c.nops);
    row(shape, "fwd op, as in a step", f, t, peak, s->per_step);
    tot->op_fwd += t.best * 1e3 * s->per_step;
    tot->cpu_fwd += t.cpu * 1e3 * s->per_step;
    c.blas_threads = 1;
    t = time_it(fwd_blas, &c, reps);
    row(shape, "fwd 1 sgemm, 1 thread, hot", f, t, peak / threads, s->per_step);
    tot->ideal_fwd += t.best * 1e3 * s->per_step / threads;
    tot->cpu_ideal_fwd += t.cpu * 1e3 * s->per_step;
    c.blas_threads = threads;
    row(shape, "fwd 1 sgemm, OpenBLAS threads, hot", f, time_it(fwd_blas, &c, reps), peak,
        s->per_step);

    c.op = gt_op_matmul_bwd(R(h->dinp), R(h->dw), R(h->db), R(h->dout), R(h->inp), R(h->w), N,
                            s->C, s->OC, 0);
    row(shape, "bwd op, hot", 2 * f, time_it(run_op, &c, reps), peak, s->per_step);
    for (int i = 0; i < c.nops; i++) {
        const mm_bufs *b = &sets[i];
        c.ops[i] = gt_op_matmul_bwd(R(b->dinp), R(b->dw), R(b->db), R(b->dout), R(b->inp),
                                    R(b->w), N, s->C, s->OC, 0);
    }
    t = per_op(time_it(run_ops, &c, reps), c.nops);
    row(shape, "bwd op, as in a step", 2 * f, t, peak, s->per_step);
    tot->op_bwd += t.best * 1e3 * s->per_step;
    tot->cpu_bwd += t.cpu * 1e3 * s->per_step;
    c.blas_threads = 1;
    t = time_it(bwd_blas, &c, reps);
    row(shape, "bwd 2 sgemm, 1 thread, hot", 2 * f, t, peak / threads, s->per_step);
    tot->ideal_bwd += t.best * 1e3 * s->per_step / threads;
    tot->cpu_ideal_bwd += t.cpu * 1e3 * s->per_step;
    c.blas_threads = threads;
    row(shape, "bwd 2 sgemm, OpenBLAS threads, hot", 2 * f, time_it(bwd_blas, &c, reps), peak,
        s->per_step);

    for (int i = 0; i < c.nops; i++) {
        free_set(dev, &sets[i]);
    }
    free(c.inp);
    free(c.w);
    free(c.out);
    free(c.dout);
    free(c.dinp);
    free(c.dw);
    free(bias);
}

static double peak_in_child(int threads)
{
    int pfd[2];
    if (pipe(pfd) != 0) {
        return 0.0;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        double g = sgemm_peak(threads);
        _exit(write(pfd[1], &g, sizeof g) == (ssize_t)sizeof g ? 0 : 1);
    }
    close(pfd[1]);
    double g = 0.0;
    if (read(pfd[0], &g, sizeof g) != (ssize_t)sizeof g) {
        g = 0.0;
    }
    close(pfd[0]);
    waitpid(pid, NULL, 0);
    return g;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_matmul [--threads N] [--reps N] [--bt N] [--cfg a|b]\n"
               "  per-shape matmul times of a GPT-2 step (default: 124M, B*T = 256 rows)\n");
}

int main(int argc, char **argv)
{
    bench_blas_core(argv);
    int threads = 2, reps = 7, N = 256;
    const char *cfg = "b";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--bt") == 0 && i + 1 < argc) {
            N = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--cfg") == 0 && i + 1 < argc) {
            cfg = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 64;
        }
    }
    bool big = strcmp(cfg, "b") == 0;
    if ((!big && strcmp(cfg, "a") != 0) || threads < 1 || reps < 1 || N < 1) {
        usage(stderr);
        return 64;
    }
    int C = big ? 768 : 256, L = big ? 12 : 4, Vp = 50304;
    mm_shape shapes[] = {{"qkv", C, 3 * C, L},  {"attproj", C, C, L}, {"fc", C, 4 * C, L},
                         {"fcproj", 4 * C, C, L}, {"lm-head", C, Vp, 1}};
    double peak = peak_in_child(threads);
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = threads};
    CHECK(gt_device_open(&dev, &dc));
    char isa[160];
    gt_ops_cpu_describe(isa, sizeof isa);
    printf("matmuls of GPT-2 %s, N = B*T = %d rows, %d threads, best (median) of %d\n%s\n",
           big ? "124M" : "config a", N, threads, reps, isa);
    printf("OpenBLAS sgemm peak, %d threads, 2048^3: %.1f GFLOP/s (1-thread rows: of peak/%d)\n",
           threads, peak, threads);
    printf("| shape NxCxOC | what | best ms | median ms | cpu ms | GFLOP/s | of peak | "
           "ms/step (x calls) |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    totals tot = {0};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        bench_shape(dev, &shapes[k], N, threads, reps, peak, &tot);
        fflush(stdout);
    }
    printf("\nper step (best times x calls): forward ops as in a step %.0f ms (hot 1-thread sgemm "
           "/ %d: %.0f ms), backward ops %.0f ms (%.0f ms)\n",
           tot.op_fwd, threads, tot.ideal_fwd, tot.op_bwd, tot.ideal_bwd);
    printf("CPU ms per step, all threads (load-proof with OMP_WAIT_POLICY=passive): forward ops "
           "%.0f (1-thread sgemm %.0f), backward ops %.0f (%.0f)\n",
           tot.cpu_fwd, tot.cpu_ideal_fwd, tot.cpu_bwd, tot.cpu_ideal_bwd);
    gt_device_close(dev);
    return 0;
}
