// bench_paging: the pager (docs/paging.md) on the cpu backend, side by side in one run.
//  1. A small GPT-2 (4 layers, 128 channels, vocab 512, B=4, T=64) trained without a pager, with
//     a pager that never evicts, and capped at 50%, 25% and 12.5% of what a step touches, each
//     with the prefetcher off and on, one after the other: median step time of 5 steps after one
//     warm-up (the step in which the op stream is learnt), per step page-outs, fault-ins, demand
//     faults, prefetch hits of those issued, and whether the losses are bit for bit those of the
//     run without a pager.
//  2. Paging throughput: a 64 MiB buffer under an 8 MiB cap read back (copy_out: every page
//     faulted in, one GCM open, while an unchanged one is dropped) against one AES-256-GCM open
//     pass over the same bytes in pages of the same size; and rewritten (copy_in: every page in,
//     and one changed page sealed out) against one seal + open pass; prefetch off and on.
// The table goes to stdout, the step-time curve to a PNG (argv[1], default bench_paging.png).
#include <gputravel/crypto.h>
#include <gputravel/device.h>
#include <gputravel/train.h>

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS 5
#define NTOK 65536
#define PAGE (64u << 10)

static void die(const char *what, gt_err e)
{
    fprintf(stderr, "bench_paging: %s: %s\n", what, e.msg);
    exit(1);
}

static void ok(const char *what, gt_err e)
{
    if (!gt_is_ok(e)) {
        die(what, e);
    }
}

static gt_device *open_dev(const char *store, uint64_t cap, bool prefetch)
{
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 2, .mem_limit = cap,
                            .paging_store = cap ? store : NULL, .page_bytes = PAGE,
                            .paging_prefetch = prefetch};
    gt_device *dev = NULL;
    ok("open", gt_device_open(&dev, &cfg));
    return dev;
}

typedef struct {
    double step_ms;
    float loss[STEPS + 1];
    gt_pager_stats st, first;  // after all steps; after the warm-up (the stream learnt)
    bool refused;
    char why[200];
} run_result;

// One warm-up and STEPS timed steps of the small model on dev.
static void train_run(gt_device *dev, run_result *r)
{
    static uint16_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++) {
        tokens[i] = (uint16_t)((i * 2654435761u) >> 7) % 512;
    }
    gt_dbuf chunk = 0;
    ok("alloc", gt_device_alloc(dev, sizeof tokens, 0, &chunk));
    ok("copy_in", gt_device_copy_in(dev, chunk, 0, tokens, sizeof tokens));
    gt_gpt2_config c = {.max_seq_len = 64, .vocab_size = 512, .padded_vocab_size = 512,
                        .num_layers = 4, .num_heads = 4, .channels = 128};
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    uint64_t ntok = NTOK;
    ok("model", gt_gpt2_create(&m, dev, &c));
    ok("init", gt_gpt2_init_random(m, 7));
    ok("loader", gt_loader_create(&l, dev, &chunk, &ntok, 1, 4, 64, 512, false, 0));
    const gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f};
    double t[STEPS];
    for (int s = 0; s <= STEPS && !r->refused; s++) {
        double t0 = gt_now_seconds();
        gt_err e = gt_loader_next(l);
        e = gt_is_ok(e) ? gt_gpt2_zero_grad(m) : e;
        e = gt_is_ok(e) ? gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l),
                                                   4, 64, 1.0f, &r->loss[s])
                        : e;
        e = gt_is_ok(e) ? gt_gpt2_update(m, &opt, 1e-3f, NULL) : e;
        if (!gt_is_ok(e)) {
            r->refused = true;
            snprintf(r->why, sizeof r->why, "%s", e.msg);
        } else if (s > 0) {
            t[s - 1] = (gt_now_seconds() - t0) * 1e3;
        } else {
            ok("stats", gt_device_paging_stats(dev, &r->first));
        }
    }
    r->step_ms = r->refused ? 0 : bench_median(t, STEPS);
    ok("stats", gt_device_paging_stats(dev, &r->st));
    gt_loader_free(l);
    gt_gpt2_free(m);
}

// CPU seconds of the calling thread: unlike the wall clock, not inflated by other jobs holding
// the cores (what is left of the load: their share of the caches).
static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Seconds for one pass of seal + open (open_only: open alone) over n bytes in PAGE pieces.
static double gcm_pass(uint8_t *pt, uint8_t *ct, size_t n, bool open_only, double *cpu)
{
    uint8_t key[32] = {1}, iv[12] = {0}, aad[48] = {0};
    size_t len = 0;
    for (size_t off = 0; off < n; off += PAGE) {  // the ciphertext to open, untimed
        iv[0] = (uint8_t)(off >> 16), iv[1] = (uint8_t)(off >> 24);
        ok("seal", gt_aead_seal(ct + off / PAGE * (PAGE + 16), PAGE + 16, &len, pt + off, PAGE,
                                aad, sizeof aad, iv, key));
    }
    double t0 = gt_now_seconds(), c0 = thread_cpu();
    for (size_t off = 0; off < n; off += PAGE) {
        iv[0] = (uint8_t)(off >> 16), iv[1] = (uint8_t)(off >> 24);
        uint8_t *c = ct + off / PAGE * (PAGE + 16);
        if (!open_only) {
            ok("seal", gt_aead_seal(c, PAGE + 16, &len, pt + off, PAGE, aad, sizeof aad, iv, key));
        }
        ok("open", gt_aead_open(pt + off, PAGE, &len, c, PAGE + 16, aad, sizeof aad, iv, key));
    }
    *cpu = thread_cpu() - c0;
    return gt_now_seconds() - t0;
}

typedef struct {
    double rd, wr;  // seconds: read back, rewrite
    double rd_cpu;  // the calling thread's CPU seconds in the read back
} tp_round;

// One round of read back and rewrite of b (n bytes) on dev.
static tp_round tp_once(gt_device *dev, gt_dbuf b, uint8_t *back, const uint8_t *pt, size_t n)
{
    tp_round r;
    double t0 = gt_now_seconds(), c0 = thread_cpu();
    ok("copy_out", gt_device_copy_out(dev, back, b, 0, n));  // fault-ins + clean drops
    r.rd = gt_now_seconds() - t0;
    r.rd_cpu = thread_cpu() - c0;
    t0 = gt_now_seconds();
    ok("copy_in", gt_device_copy_in(dev, b, 0, pt, n));  // fault-ins + reseals
    r.wr = gt_now_seconds() - t0;
    return r;
}

static void throughput(const char *store)
{
    const size_t n = 64u << 20;
    uint8_t *pt = malloc(n), *ct = malloc(n / PAGE * (PAGE + 16)), *back = malloc(n);
    if (!pt || !ct || !back) {
        die("throughput", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    for (size_t i = 0; i < n; i++) {
        pt[i] = (uint8_t)(i * 131 + (i >> 13));
    }
    gt_device *dev[2];  // without and with the prefetcher (read ahead on its second thread)
    gt_dbuf b[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        dev[k] = open_dev(store, 8u << 20, k == 1);
        ok("alloc", gt_device_alloc(dev[k], n, 0, &b[k]));
        ok("copy_in", gt_device_copy_in(dev[k], b[k], 0, pt, n));
        ok("copy_out", gt_device_copy_out(dev[k], back, b[k], 0, n));  // all sealed, clean
    }
    double rd[2][3], wr[2][3], both[3], open1[3], rdc[2][3], openc[3], bothc[3];
    gt_pager_stats st0[2], st1[2];
    for (int k = 0; k < 2; k++) {
        ok("stats", gt_device_paging_stats(dev[k], &st0[k]));
    }
    for (int i = 0; i < 3; i++) {  // side by side, round by round
        for (int k = 0; k < 2; k++) {
            tp_round r = tp_once(dev[k], b[k], back, pt, n);
            rd[k][i] = r.rd;
            rdc[k][i] = r.rd_cpu;
            wr[k][i] = r.wr;
            if (memcmp(back, pt, n) != 0) {
                die("throughput", gt_errf(GT_E_STATE, "read back differs"));
            }
        }
        both[i] = gcm_pass(pt, ct, n, false, &bothc[i]);
        open1[i] = gcm_pass(pt, ct, n, true, &openc[i]);
    }
    for (int k = 0; k < 2; k++) {
        ok("stats", gt_device_paging_stats(dev[k], &st1[k]));
    }
    double mb = (double)n / 1e6, s = bench_median(both, 3), o = bench_median(open1, 3);
    printf("\npaging throughput, a 64 MiB buffer under an 8 MiB cap (64 KiB pages, median of 3 "
           "rounds; GCM passes in pages of 64 KiB on one thread, same rounds). Pager: fault-ins "
           "opened in place in their frame; copy_in/copy_out held in runs of up to 32 pages, "
           "mapped and unmapped a run per mmap call; prefetch: the worker and the caller both "
           "open pages of a run:\n");
    printf("| prefetch | read back (page-in) | GCM open | ratio | rewrite (page-in + page-out) | "
           "GCM seal + open | ratio | mmap calls per fault-in | faults by the caller | read back, "
           "CPU ratio (caller's thread) |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        double r = bench_median(rd[k], 3), w = bench_median(wr[k], 3);
        double fi = (double)(st1[k].fault_ins - st0[k].fault_ins);
        double calls = (double)(st1[k].map_calls - st0[k].map_calls);
        double dem = (double)(st1[k].demand_faults - st0[k].demand_faults);
        // CPU: GCM open's thread time over the read back's, both medians; with prefetch the
        // worker's time is not in it, so it is left out.
        double cpu = bench_median(openc, 3) / bench_median(rdc[k], 3);
        char cpus[32];
        snprintf(cpus, sizeof cpus, k ? "- (the worker's not counted)" : "%.2fx", cpu);
        printf("| %s | %.0f MB/s | %.0f MB/s | %.2fx | %.0f MB/s | %.0f MB/s | %.2fx | %.3f | "
               "%.0f%% | %s |\n", k ? "on" : "off", mb / r, mb / o, o / r, mb / w, mb / s, s / w,
               fi > 0 ? calls / fi : 0, fi > 0 ? 100 * dem / fi : 0, cpus);
        gt_device_close(dev[k]);
    }
    free(pt);
    free(ct);
    free(back);
}

static void row(const char *cap, const char *pf, const run_result *r, const run_result *base)
{
    if (r->refused) {
        printf("| %s | %s | refused: %s |\n", cap, pf, r->why);
        return;
    }
    // Per step after the warm-up (the step in which the stream is learnt).
    double f = (double)(r->st.fault_ins - r->first.fault_ins) / STEPS;
    double d = (double)(r->st.demand_faults - r->first.demand_faults) / STEPS;
    double iss = (double)(r->st.prefetch_issued - r->first.prefetch_issued) / STEPS;
    double hit = (double)(r->st.prefetch_hits - r->first.prefetch_hits) / STEPS;
    double as = (double)(r->st.assist_faults - r->first.assist_faults) / STEPS;
    double po = (double)(r->st.page_outs - r->first.page_outs) / STEPS;
    double mis = (double)(r->st.mispredicts - r->first.mispredicts) / STEPS;
    bool same = memcmp(r->loss, base->loss, sizeof base->loss) == 0;
    printf("| %s | %s | %.1f | %.2fx | %.0f | %.0f | %.0f | %.0f / %.0f | %.0f | %.1f | %.1f MiB | %s |\n",
           cap, pf, r->step_ms, r->step_ms / base->step_ms, po, f, d, hit, iss, as, mis,
           (double)r->st.peak_resident / (1 << 20), same ? "yes" : "NO");
}

// Part 1: the step-time curve, prefetch off and on side by side at each cap.
static void train_table(const char *store, const char *png)
{
    static run_result none[2], paged[4][2];
    gt_device *dev = open_dev(store, 0, false);
    train_run(dev, &none[0]);
    gt_device_close(dev);
    dev = open_dev(store, 1u << 30, false);  // paging, nothing evicted: the size a step touches
    run_result probe = {0};
    train_run(dev, &probe);
    gt_device_close(dev);
    uint64_t touched = probe.st.peak_resident;
    const double frac[4] = {1.0, 0.5, 0.25, 0.125};
    for (int i = 0; i < 4; i++) {
        uint64_t cap = i == 0 ? 1u << 30 : (uint64_t)((double)touched * frac[i]) / PAGE * PAGE;
        for (int k = 0; k < 2; k++) {  // off, on: paired, one after the other
            dev = open_dev(store, cap, k == 1);
            train_run(dev, &paged[i][k]);
            gt_device_close(dev);
        }
    }
    dev = open_dev(store, 0, false);  // no pager again, last: how much the machine moved
    train_run(dev, &none[1]);
    gt_device_close(dev);
    printf("small GPT-2 (4 layers, 128 channels, vocab 512, B=4 T=64), cpu backend, 2 threads, "
           "64 KiB pages; a step touches %.1f MiB; counts per step after the warm-up\n",
           (double)touched / (1 << 20));
    printf("| cap | prefetch | step ms (median of %d) | vs no pager | page-outs | fault-ins | "
           "demand faults | prefetch hits / issued | assisted | mispredicted launches | "
           "peak resident | losses as without a pager |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n", STEPS);
    row("none", "-", &none[0], &none[0]);
    double x[4], y[2][4];
    for (int i = 0; i < 4; i++) {
        char cap[32];
        snprintf(cap, sizeof cap, "%.1f%%", 100 * frac[i]);
        for (int k = 0; k < 2; k++) {
            row(cap, k ? "on" : "off", &paged[i][k], &none[0]);
            y[k][i] = paged[i][k].refused ? 0 : paged[i][k].step_ms / none[0].step_ms;
        }
        x[i] = 100 * frac[i];
    }
    row("none, again", "-", &none[1], &none[0]);
    gt_plot_series s[2] = {{.name = "prefetch off", .x = x, .y = y[0], .n = 4},
                           {.name = "prefetch on", .x = x, .y = y[1], .n = 4}};
    gt_plot_style st = {.title = "paging: small GPT-2 step time under a memory cap (cpu)",
                        .xlabel = "cap, % of what a step touches", .ylabel = "x no pager",
                        .points = true};
    gt_err e = gt_plot_lines(png, &st, s, 2);
    printf("\nplot: %s\n", gt_is_ok(e) ? png : e.msg);
}

int main(int argc, char **argv)
{
    bench_blas_core(argv);
    bool only_throughput = argc > 1 && strcmp(argv[1], "--throughput") == 0;
    const char *png = argc > 1 && !only_throughput ? argv[1] : "bench_paging.png";
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: bench_paging [PNG | --throughput]   (default bench_paging.png;\n"
               "       --throughput: part 2 only)\n");
        return 0;
    }
    char store[] = "/tmp/bench-paging-XXXXXX";
    if (mkdtemp(store) == NULL) {
        die("store", gt_errf(GT_E_IO, "mkdtemp"));
    }
    gt_log_set_level(GT_LOG_WARN);
    FILE *la = fopen("/proc/loadavg", "r");
    char load[64] = "?";
    if (la != NULL) {
        if (fgets(load, sizeof load, la) == NULL) {
            snprintf(load, sizeof load, "?");
        }
        fclose(la);
    }
    printf("load average at start: %s", load);
    if (only_throughput) {
        throughput(store);
        rmdir(store);
        return 0;
    }
    train_table(store, png);
    throughput(store);
    rmdir(store);
    return 0;
}
