// bench_train_sim: GPT-2 training step time on the sim device (devd in a forked child, every op
// an attested, encrypted launch) against the cpu backend, same model, same data, same threads,
// steps interleaved so both see the same machine load (target: sim <= 1.05x cpu). Also checks
// that both devices produce the same losses.
//
// usage: bench_train_sim [steps] [threads]   (default 6 steps, 2 threads)
#include "bench_common.h"
#include <gputravel/attest.h>
#include <gputravel/device.h>
#include <gputravel/devd.h>
#include <gputravel/train.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { B = 4, T = 64 };

typedef struct {
    gt_device *dev;
    gt_gpt2 *m;
    gt_dbuf in, tg;
} run;

static void check(gt_err e, const char *what)
{
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_train_sim: %s: %s\n", what, e.msg);
        exit(1);
    }
}

static void setup(run *r, gt_device *dev, const gt_gpt2_config *cfg)
{
    r->dev = dev;
    check(gt_gpt2_create(&r->m, dev, cfg), "create");
    check(gt_gpt2_init_random(r->m, 42), "init");
    check(gt_device_alloc(dev, B * T * 4, GT_DBUF_NO_READBACK, &r->in), "alloc");
    check(gt_device_alloc(dev, B * T * 4, GT_DBUF_NO_READBACK, &r->tg), "alloc");
}

static double step(run *r, int s, int V, float *loss)
{
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(((uint32_t)i * 2654435761u + (uint32_t)s * 97u) % (uint32_t)V);
        y[i] = (int32_t)(((uint32_t)i * 2654435761u + (uint32_t)s * 97u + 1u) % (uint32_t)V);
    }
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f,
                    .grad_clip = 1.0f};
    double t0 = gt_now_seconds();
    check(gt_device_copy_in(r->dev, r->in, 0, x, sizeof x), "copy_in");
    check(gt_device_copy_in(r->dev, r->tg, 0, y, sizeof y), "copy_in");
    check(gt_gpt2_zero_grad(r->m), "zero_grad");
    check(gt_gpt2_forward_backward(r->m, r->in, r->tg, B, T, 1.0f, loss), "forward_backward");
    check(gt_gpt2_update(r->m, &opt, 3e-4f, NULL), "update");
    check(gt_device_sync(r->dev), "sync");
    return gt_now_seconds() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bench_blas_core(argv);
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    if (steps < 1 || steps > 1000) {
        steps = 6;
    }
    gt_gpt2_config cfg = {.max_seq_len = 64, .vocab_size = 4096, .padded_vocab_size = 4096,
                          .num_layers = 4, .num_heads = 4, .channels = 256};
    char dir[] = "/tmp/bench-train-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char sock[256], root[256];
    snprintf(sock, sizeof sock, "%s/devd.sock", dir);
    snprintf(root, sizeof root, "%s/sim-root", dir);
    setenv("GT_SIM_ROOT", root, 1);  // devd's
    if (!gt_is_ok(gt_sim_root_set(root))) {  // and this process's
        abort();
    }
    gt_log_set_level(GT_LOG_WARN);
    pid_t pid = fork();
    if (pid == 0) {
        gt_devd_config dc;
        memset(&dc, 0, sizeof dc);
        dc.socket_path = sock;
        dc.mem_limit = 256u << 20;
        dc.threads = threads;
        dc.max_sessions = 1;
        _exit(gt_is_ok(gt_devd_run(&dc)) ? 0 : 1);
    }
    gt_proc devd = {.pid = pid};
    gt_proc_ready ready = {.kind = GT_PROC_READY_SOCKET, .path = sock, .timeout_ms = 600000,
                           .what = "devd"};
    gt_err started = gt_proc_wait_ready(&devd, &ready);
    if (!gt_is_ok(started)) {
        fprintf(stderr, "bench_train_sim: devd failed to start: %s\n", started.msg);
        gt_proc_stop(&devd, 1000);
        return 1;
    }
    gt_device *cpu = NULL, *sim = NULL;
    gt_device_config cc = {.kind = GT_DEVICE_CPU, .threads = threads};
    gt_device_config sc = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    check(gt_device_open(&cpu, &cc), "open cpu");
    check(gt_device_open(&sim, &sc), "open sim");
    run rc, rs;
    setup(&rc, cpu, &cfg);
    setup(&rs, sim, &cfg);
    printf("GPT-2 L=%d C=%d NH=%d V=%d, B=%d T=%d, %zu params, %d threads each\n",
           cfg.num_layers, cfg.channels, cfg.num_heads, cfg.vocab_size, B, T,
           gt_gpt2_num_params(rc.m), threads);
    printf("%5s | %9s %9s | %10s %10s\n", "step", "cpu s", "sim s", "cpu loss", "sim loss");
    double tc[1000], ts[1000];
    int same = 1;
    float lc = 0, ls = 0;
    step(&rc, -1, cfg.vocab_size, &lc);  // warm-up (first touch of activations)
    step(&rs, -1, cfg.vocab_size, &ls);
    for (int s = 0; s < steps; s++) {
        // alternate which goes first, so both see the same load
        if (s % 2 == 0) {
            tc[s] = step(&rc, s, cfg.vocab_size, &lc);
            ts[s] = step(&rs, s, cfg.vocab_size, &ls);
        } else {
            ts[s] = step(&rs, s, cfg.vocab_size, &ls);
            tc[s] = step(&rc, s, cfg.vocab_size, &lc);
        }
        same &= memcmp(&lc, &ls, sizeof lc) == 0;
        printf("%5d | %9.4f %9.4f | %10.6f %10.6f\n", s, tc[s], ts[s], lc, ls);
    }
    double sum_c = 0, sum_s = 0;
    for (int s = 0; s < steps; s++) {
        sum_c += tc[s];
        sum_s += ts[s];
    }
    qsort(tc, (size_t)steps, sizeof(double), cmp_double);
    qsort(ts, (size_t)steps, sizeof(double), cmp_double);
    double mc = tc[steps / 2], ms = ts[steps / 2];
    // on a shared machine the fastest step is the least disturbed one
    printf("step time: median cpu %.4f s, sim %.4f s (%.3fx); min cpu %.4f s, sim %.4f s "
           "(%.3fx); mean ratio %.3fx\n", mc, ms, ms / mc, tc[0], ts[0], ts[0] / tc[0],
           sum_s / sum_c);
    printf("target sim <= 1.05x cpu (median): %s; losses identical: %s\n",
           ms / mc <= 1.05 ? "met" : "NOT met", same ? "yes" : "NO");
    gt_gpt2_free(rc.m);
    gt_gpt2_free(rs.m);
    gt_device_close(cpu);
    gt_device_close(sim);
    waitpid(pid, NULL, 0);
    gt_err removed = gt_rmtree_below(dir, "/tmp");
    if (!gt_is_ok(removed)) {
        fprintf(stderr, "bench_train_sim: could not remove %s: %s\n", dir, removed.msg);
    }
    return 0;
}
