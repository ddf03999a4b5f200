// Training-step throughput of the cpu device: tokens/s of a full step (zero_grad, batch gather,
// forward, backward, AdamW) for the two configs, achieved GFLOP/s, and peak RSS against
// the bytes of parameters + gradients + AdamW state + activations. Each config runs in its own
// child process so that its peak RSS is its own. "cpu ms/step" is the CPU time of all threads
// for one step: on a machine shared with other work, wall time varies with the load, and
// cpu ms / threads is what the step costs when the cores are free.
//
// Also in the same run: OpenBLAS sgemm's peak on the same threads (its own threading, a large
// square product), the step's FLOP efficiency against it, and where each step's milliseconds
// go, per op kind (gt_ops_cpu_profile). --peer-dir DIR writes the model (llm.c checkpoint), the
// token stream and our per-step losses there, so bench/train_vs_torch.sh can run PyTorch on the
// very same inputs and compare first losses.
//
//   bench_train [a|b|all] [--steps N] [--warmup N] [--threads N] [--peer-dir DIR]
// GPUTRAVEL_CPU_ISA=avx512|avx2|scalar chooses the kernels' path (default: the best the CPU has)
// and OPENBLAS_CORETYPE OpenBLAS's (its sgemm peak below is measured on that same core); the
// header says which ran, and the table's last column repeats it.
//   (a) L=4 C=256 NH=4 V=50257 B=4 T=256     (b) GPT-2 124M (L=12 C=768 NH=12) B=4 T=64
// llm.c's CPU trainer on the reference machine (2 threads, median): (a) 273 tok/s, (b) 35 tok/s.
#include "bench_common.h"
#include <gputravel/device.h>
#include <gputravel/kernels.h>
#include <gputravel/train.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int L, C, NH, V, maxT, B, T;
    double llmc_tok_s;
} bench_cfg;

static const bench_cfg configs[] = {
    {"a", 4, 256, 4, 50257, 1024, 4, 256, 273.0},
    {"b", 12, 768, 12, 50257, 1024, 4, 64, 35.0},
};

static double cpu_seconds(void)  // CPU time of the whole process, all threads
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Multiply-adds x 2 of one forward pass; backward is twice the forward.
static double step_flops(const bench_cfg *c, int Vp)
{
    double BT = (double)c->B * c->T, C = c->C, L = c->L;
    double fwd = 2.0 * BT * (L * 12.0 * C * C + C * Vp);
    fwd += 2.0 * 2.0 * c->B * L * (double)c->T * c->T * C / 2.0;  // q.k and att.v, causal half
    return 3.0 * fwd;
}

#define CHECK(expr)                                                                  \
    do {                                                                             \
        gt_err e_ = (expr);                                                          \
        if (e_.code != GT_E_NONE) {                                                  \
            fprintf(stderr, "%s: %s\n", #expr, e_.msg);                              \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

extern void openblas_set_num_threads(int num_threads);

// The machine's sgemm peak on `threads` threads, GFLOP/s: OpenBLAS's own threading on a square
// product large enough to reach it, best of 5 after one warm-up. Runs in a child of its own, so
// the kernels' setting (OpenBLAS held at one thread) does not apply.
static double sgemm_peak_gflops(int threads)
{
    enum { n = 2048 };
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
    float *c = calloc((size_t)n * n, sizeof(float));
    if (a == NULL || b == NULL || c == NULL) {
        exit(1);
    }
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 7) * 0.01f;
        b[i] = (float)(i % 5) * 0.02f;
    }
    openblas_set_num_threads(threads);
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = gt_now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        double t = gt_now_seconds() - t0;
        if (r > 0 && t < best) {
            best = t;
        }
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * (double)n / best / 1e9;
}

// The model and tokens the PyTorch peer loads (bench/torch_gpt2_train.py).
static void write_peer_inputs(const char *dir, gt_gpt2 *m, const uint16_t *tok, size_t ntok)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    CHECK(gt_gpt2_save(m, path));
    snprintf(path, sizeof path, "%s/tokens.u16", dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(tok, 2, ntok, f) != ntok || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

// Runs in a child; writes one result line and one profile line to fd.
static void run_config(const bench_cfg *c, int steps, int warmup, int threads, int fd,
                       const char *peer_dir)
{
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = threads};
    CHECK(gt_device_open(&dev, &dc));
    gt_gpt2_config cfg = {.max_seq_len = c->maxT, .vocab_size = c->V,
                          .padded_vocab_size = gt_gpt2_pad_vocab(c->V), .num_layers = c->L,
                          .num_heads = c->NH, .channels = c->C};
    gt_gpt2 *m = NULL;
    CHECK(gt_gpt2_create(&m, dev, &cfg));
    CHECK(gt_gpt2_init_random(m, 1));
    size_t ntok = (size_t)c->B * c->T * (size_t)(steps + warmup) + 1;
    uint16_t *tok = malloc(ntok * 2);
    uint64_t rng = 5;
    for (size_t i = 0; i < ntok; i++) {
        tok[i] = (uint16_t)(gt_rng_u32(&rng) % (uint32_t)c->V);
    }
    if (peer_dir != NULL) {
        write_peer_inputs(peer_dir, m, tok, ntok);
    }
    gt_dbuf data = 0;
    CHECK(gt_device_alloc(dev, ntok * 2, GT_DBUF_NO_READBACK, &data));
    CHECK(gt_device_copy_in(dev, data, 0, tok, ntok * 2));
    free(tok);
    FILE *steps_out = NULL;
    if (peer_dir != NULL) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ours_steps.txt", peer_dir);
        steps_out = fopen(path, "w");
        if (steps_out == NULL) {
            exit(1);
        }
    }
    gt_ops_cpu_profile prof = {0};
    uint64_t n64 = ntok;
    gt_loader *l = NULL;
    CHECK(gt_loader_create(&l, dev, &data, &n64, 1, c->B, c->T, c->V, false, 0));
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
    double *ms = calloc((size_t)steps, sizeof *ms), *fwd_ms = calloc((size_t)steps, sizeof *ms);
    double *upd_ms = calloc((size_t)steps, sizeof *ms), *cpu_ms = calloc((size_t)steps, sizeof *ms);
    float loss = 0.0f;
    for (int s = 0; s < warmup + steps; s++) {
        gt_ops_cpu_profile_enable(s >= warmup);
        double t0 = gt_now_seconds(), c0 = cpu_seconds();
        CHECK(gt_gpt2_zero_grad(m));
        CHECK(gt_loader_next(l));
        CHECK(gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l), c->B, c->T,
                                       1.0f, &loss));
        double t1 = gt_now_seconds();
        CHECK(gt_gpt2_update(m, &opt, 1e-4f, NULL));
        double t2 = gt_now_seconds(), c2 = cpu_seconds();
        if (steps_out != NULL) {
            fprintf(steps_out, "step %d loss %.6f ms %.1f\n", s, loss, (t2 - t0) * 1e3);
        }
        if (s >= warmup) {
            gt_ops_cpu_profile one;
            gt_ops_cpu_profile_take(&one);
            gt_ops_cpu_profile_enable(false);
            for (int k = 0; k < GT_OP_COUNT_; k++) {
                prof.calls[k] += one.calls[k];
                prof.nanoseconds[k] += one.nanoseconds[k];
            }
            ms[s - warmup] = (t2 - t0) * 1e3;
            cpu_ms[s - warmup] = (c2 - c0) * 1e3;
            upd_ms[s - warmup] = (t2 - t1) * 1e3;
            // a forward alone (no grad), to split the step: not part of the timed step
            double f0 = gt_now_seconds();
            CHECK(gt_gpt2_forward(m, gt_loader_inputs(l), gt_loader_targets(l), c->B, c->T,
                                  &loss));
            fwd_ms[s - warmup] = (gt_now_seconds() - f0) * 1e3;
        }
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    qsort(fwd_ms, (size_t)steps, sizeof *ms, cmp_double);
    qsort(upd_ms, (size_t)steps, sizeof *ms, cmp_double);
    qsort(cpu_ms, (size_t)steps, sizeof *ms, cmp_double);
    double med = ms[steps / 2], tok_s = c->B * c->T / (med / 1e3);
    uint64_t np = gt_gpt2_num_params(m);
    uint64_t model_bytes = np * 4 * 4 + gt_gpt2_activation_bytes(&cfg, c->B, c->T);
    char line[2048];
    int n = snprintf(line, sizeof line,
                     "%s %d %d %d %d %d %llu %.1f %.1f %.1f %.1f %.1f %.1f %.2f %llu %.1f\n",
                     c->name, c->L, c->C, c->NH, c->B, c->T, (unsigned long long)np, med, ms[0],
                     fwd_ms[steps / 2], upd_ms[steps / 2], tok_s,
                     step_flops(c, cfg.padded_vocab_size) / (med / 1e3) / 1e9, loss,
                     (unsigned long long)model_bytes, cpu_ms[steps / 2]);
    // The profile line: "prof" then, per op kind, total ns over the timed steps and calls.
    n += snprintf(line + n, sizeof line - (size_t)n, "prof");
    for (int k = 1; k < GT_OP_COUNT_ && n < (int)sizeof line; k++) {
        n += snprintf(line + n, sizeof line - (size_t)n, " %llu %llu",
                      (unsigned long long)prof.nanoseconds[k], (unsigned long long)prof.calls[k]);
    }
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    if (n >= (int)sizeof line || write(fd, line, (size_t)n) != n) {
        exit(1);
    }
    if (steps_out != NULL) {
        fclose(steps_out);
    }
    free(ms);
    free(fwd_ms);
    free(upd_ms);
    free(cpu_ms);
    gt_loader_free(l);
    gt_gpt2_free(m);
    gt_device_close(dev);
}

// Reads all of a child's output (the result and profile lines) until it closes the pipe.
static ssize_t read_all(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0 || (got += (size_t)r) == cap - 1) {
            break;
        }
    }
    buf[got] = '\0';
    return (ssize_t)got;
}

static double sgemm_peak_in_child(int threads)
{
    int pfd[2];
    if (pipe(pfd) != 0) {
        return 0.0;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        double g = sgemm_peak_gflops(threads);
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

// Where a step's time goes: each op kind's share of the median step, biggest first.
static void print_breakdown(const char *cfg, const char *prof, int steps, double step_ms)
{
    uint64_t ns[GT_OP_COUNT_] = {0}, calls[GT_OP_COUNT_] = {0};
    const char *p = strstr(prof, "prof");
    if (p == NULL) {
        return;
    }
    p += 4;
    for (int k = 1; k < GT_OP_COUNT_; k++) {
        int used = 0;
        unsigned long long a = 0, b = 0;
        if (sscanf(p, " %llu %llu%n", &a, &b, &used) != 2) {
            return;
        }
        ns[k] = a;
        calls[k] = b;
        p += used;
    }
    double in_ops = 0.0;
    for (int k = 1; k < GT_OP_COUNT_; k++) {
        in_ops += (double)ns[k] / 1e6 / steps;
    }
    printf("\nconfig %s: where a step's %.0f ms go (mean over %d steps; ops run one at a time)\n",
           cfg, step_ms, steps);
    printf("| op | ms/step | share | calls/step |\n|---|---:|---:|---:|\n");
    for (;;) {
        int best = 0;
        for (int k = 1; k < GT_OP_COUNT_; k++) {
            if (calls[k] > 0 && (best == 0 || ns[k] > ns[best])) {
                best = k;
            }
        }
        if (best == 0) {
            break;
        }
        double ms = (double)ns[best] / 1e6 / steps;
        printf("| %s | %.1f | %.1f%% | %.0f |\n", gt_op_name((gt_op_kind)best), ms,
               100.0 * ms / step_ms, (double)calls[best] / steps);
        calls[best] = 0;
    }
    printf("| (outside ops: loader, launch overhead, zero_grad's memset) | %.1f | %.1f%% | |\n",
           step_ms - in_ops, 100.0 * (step_ms - in_ops) / step_ms);
}

int main(int argc, char **argv)
{
    bench_blas_core(argv);
    const char *which = "all", *peer_dir = NULL;
    int steps = 5, warmup = 1, threads = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) {
            warmup = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--peer-dir") == 0 && i + 1 < argc) {
            peer_dir = argv[++i];
        } else if (argv[i][0] != '-') {
            which = argv[i];
        } else {
            fprintf(stderr, "usage: bench_train [a|b|all] [--steps N] [--warmup N] [--threads N] "
                            "[--peer-dir DIR]\n");
            return 64;
        }
    }
    if (steps < 1) {
        steps = 1;
    }
    const char *isa_env = getenv("GPUTRAVEL_CPU_ISA");
    gt_err ie = gt_ops_cpu_select_isa(isa_env);
    if (!gt_is_ok(ie)) {
        fprintf(stderr, "bench_train: GPUTRAVEL_CPU_ISA=%s: %s\n", isa_env, ie.msg);
        return 64;
    }
    char isa_line[160];
    gt_ops_cpu_describe(isa_line, sizeof isa_line);
    const char *isa = gt_cpu_isa_name(gt_ops_cpu_isa());
    double peak = sgemm_peak_in_child(threads);
    printf("GPT-2 training step on the cpu device, %d threads, median of %d steps (%d warmup)\n",
           threads, steps, warmup);
    printf("%s\n", isa_line);
    printf("OpenBLAS sgemm peak, %d threads, 2048^3, best of 5, core %s: %.1f GFLOP/s\n", threads,
           openblas_get_corename(), peak);
    printf("| cfg | L | C | NH | B | T | params | step ms (median/min) | cpu ms/step | fwd ms | "
           "adamw ms | tok/s | llm.c tok/s | speedup | GFLOP/s | of sgemm peak | peak RSS | "
           "params+grads+adam+acts | ratio | isa |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    char profiles[2][4096] = {{0}};
    double step_ms[2] = {0};
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        const bench_cfg *c = &configs[k];
        if (strcmp(which, "all") != 0 && strcmp(which, c->name) != 0) {
            continue;
        }
        int pfd[2];
        if (pipe(pfd) != 0) {
            return 1;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            run_config(c, steps, warmup, threads, pfd[1], peer_dir);
            _exit(0);
        }
        close(pfd[1]);
        char buf[4096];
        ssize_t got = read_all(pfd[0], buf, sizeof buf);
        close(pfd[0]);
        int status = 0;
        struct rusage ru;
        wait4(pid, &status, 0, &ru);
        char name[8];
        int L, C, NH, B, T;
        unsigned long long np, model_bytes;
        double med, mn, fwd, upd, tok_s, gflops, loss, cpu;
        if (got <= 0 ||
            sscanf(buf, "%7s %d %d %d %d %d %llu %lf %lf %lf %lf %lf %lf %lf %llu %lf", name, &L,
                   &C, &NH, &B, &T, &np, &med, &mn, &fwd, &upd, &tok_s, &gflops, &loss,
                   &model_bytes, &cpu) != 16) {
            fprintf(stderr, "config %s failed (status %d)\n", c->name, status);
            return 1;
        }
        double rss = (double)ru.ru_maxrss * 1024.0;
        printf("| %s | %d | %d | %d | %d | %d | %.1fM | %.0f / %.0f | %.0f | %.0f | %.0f | %.0f | "
               "%.0f | %.2fx | %.1f | %.0f%% | %.0f MiB | %.0f MiB | %.2f | %s |\n",
               name, L, C, NH, B, T, np / 1e6, med, mn, cpu, fwd, upd, tok_s, c->llmc_tok_s,
               tok_s / c->llmc_tok_s, gflops, peak > 0 ? 100.0 * gflops / peak : 0.0,
               rss / 1048576.0, model_bytes / 1048576.0, rss / (double)model_bytes, isa);
        fflush(stdout);
        snprintf(profiles[k], sizeof profiles[k], "%s", buf);
        step_ms[k] = med;
    }
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        if (profiles[k][0] != '\0') {
            print_breakdown(configs[k].name, profiles[k], steps, step_ms[k]);
        }
    }
    return 0;
}
