// What the devd benchmarks share: statistics over repeated timings, the size list from argv and
// a devd in a forked child with its own scratch folder. Header-only: every bench/*.c is its own
// executable.
#ifndef GPUTRAVEL_BENCH_COMMON_H
#define GPUTRAVEL_BENCH_COMMON_H

#include <gputravel/attest.h>
#include <gputravel/device.h>
#include <gputravel/devd.h>
#include <gputravel/kernels.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// First in main of a bench that runs matmuls: the core gputravel itself would run (kernels.h,
// gt_blas_core_reexec), so that the bench measures what a user gets.
static inline void bench_blas_core(char **argv)
{
    gt_err e = gt_blas_core_reexec(getenv("OPENBLAS_CORETYPE"), argv);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench: OpenBLAS stays on %s: %s\n", gt_blas_core_name(), e.msg);
    }
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Sorts v in place.
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

static inline double bench_best(const double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++) {
        b = v[i] < b ? v[i] : b;
    }
    return b;
}

// Sizes in MiB from argv[1..] (at most cap, each 1..65536), else 64 128 256 512. Returns the
// largest. --help prints the usage and exits 0; anything else that is not a size exits 64.
static inline size_t bench_sizes_mib(int argc, char **argv, size_t *sizes, int cap, int *count)
{
    static const size_t defaults[] = {64, 128, 256, 512};
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [MiB ...]   (chunk sizes, default 64 128 256 512)\n", argv[0]);
            exit(0);
        }
        char *end = NULL;
        unsigned long v = strtoul(argv[i], &end, 10);
        if (end == argv[i] || *end != '\0' || v == 0 || v > 65536 || argv[i][0] == '-') {
            fprintf(stderr, "%s: '%s' is not a size in MiB (1..65536); --help for usage\n",
                    argv[0], argv[i]);
            exit(64);
        }
        if (n == cap) {
            fprintf(stderr, "%s: at most %d sizes\n", argv[0], cap);
            exit(64);
        }
        sizes[n++] = (size_t)v;
    }
    if (n == 0) {
        for (; n < 4 && n < cap; n++) {
            sizes[n] = defaults[n];
        }
    }
    size_t max = 0;
    for (int i = 0; i < n; i++) {
        max = sizes[i] > max ? sizes[i] : max;
    }
    *count = n;
    return max;
}

typedef struct {
    char dir[64];    // scratch folder: the socket and the sim root
    char sock[256];
    pid_t pid;
    double start_s;  // until the socket appeared (arena reserved and touched, identity made)
} bench_devd;

// Starts devd (gt_devd_run) in a forked child. cfg's socket_path is filled in here.
static inline int bench_devd_start(bench_devd *d, const char *name, gt_devd_config cfg)
{
    snprintf(d->dir, sizeof d->dir, "/tmp/%s-XXXXXX", name);
    if (mkdtemp(d->dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    char root[300];
    snprintf(d->sock, sizeof d->sock, "%s/devd.sock", d->dir);
    snprintf(root, sizeof root, "%s/sim-root", d->dir);
    setenv("GT_SIM_ROOT", root, 1);  // devd's
    if (!gt_is_ok(gt_sim_root_set(root))) {  // and this process's
        abort();
    }
    double t0 = gt_now_seconds();
    d->pid = fork();
    if (d->pid < 0) {
        perror("fork");
        return -1;
    }
    if (d->pid == 0) {
        cfg.socket_path = d->sock;
        _exit(gt_is_ok(gt_devd_run(&cfg)) ? 0 : 1);
    }
    gt_proc child = {.pid = d->pid};
    gt_proc_ready r = {.kind = GT_PROC_READY_SOCKET, .path = d->sock, .timeout_ms = 600000,
                       .what = "devd"};
    gt_err e = gt_proc_wait_ready(&child, &r);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "%s: devd failed to start: %s\n", name, e.msg);
        gt_proc_stop(&child, 1000);
        return -1;
    }
    d->start_s = gt_now_seconds() - t0;
    return 0;
}

// Stops devd (SIGTERM when it still serves; else waits for it to end) and removes the scratch
// folder.
static inline void bench_devd_stop(bench_devd *d, bool terminate)
{
    gt_proc child = {.pid = d->pid};
    if (terminate) {
        gt_proc_stop(&child, 10000);
    } else {
        waitpid(d->pid, NULL, 0);
    }
    unlink(d->sock);
    gt_err e = gt_rmtree_below(d->dir, "/tmp");
    if (!gt_is_ok(e)) {
        fprintf(stderr, "could not remove %s: %s\n", d->dir, e.msg);
    }
}

#endif
