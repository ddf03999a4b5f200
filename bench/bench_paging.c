// bench_paging: the pager (docs/paging.md) on the cpu backend, side by side in one run.
//  1. A small GPT-2 (4 layers, 128 channels, vocab 512, B=4, T=64) trained without a pager, with
//     a pager that never evicts, and capped at 50%, 25% and 12.5% of what a step touches: median
//     step time of 5 steps after one warm-up, page-outs and fault-ins per step, and whether the
//     losses are bit for bit those of the run without a pager.
//  2. Paging throughput: a 64 MiB buffer under an 8 MiB cap read back (copy_out: every page
//     faulted in, one GCM open, while an unchanged one is dropped) against one AES-256-GCM open
//     pass over the same bytes in pages of the same size; and rewritten (copy_in: every page in,
//     and one changed page sealed out) against one seal + open pass.
// The table goes to stdout, the step-time curve to a PNG (argv[1], default bench_paging.png).
#include <gputravel/crypto.h>
#include <gputravel/device.h>
#include <gputravel/train.h>

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static gt_device *open_dev(const char *store, uint64_t cap)
{
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 2, .mem_limit = cap,
                            .paging_store = cap ? store : NULL, .page_bytes = PAGE};
    gt_device *dev = NULL;
    ok("open", gt_device_open(&dev, &cfg));
    return dev;
}

typedef struct {
    double step_ms;
    float loss[STEPS + 1];
    gt_pager_stats st;
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
        }
    }
    r->step_ms = r->refused ? 0 : bench_median(t, STEPS);
    ok("stats", gt_device_paging_stats(dev, &r->st));
    gt_loader_free(l);
    gt_gpt2_free(m);
}

// Seconds for one pass of seal + open (open_only: open alone) over n bytes in PAGE pieces.
static double gcm_pass(uint8_t *pt, uint8_t *ct, size_t n, bool open_only)
{
    uint8_t key[32] = {1}, iv[12] = {0}, aad[48] = {0};
    size_t len = 0;
    for (size_t off = 0; off < n; off += PAGE) {  // the ciphertext to open, untimed
        iv[0] = (uint8_t)(off >> 16), iv[1] = (uint8_t)(off >> 24);
        ok("seal", gt_aead_seal(ct + off / PAGE * (PAGE + 16), PAGE + 16, &len, pt + off, PAGE,
                                aad, sizeof aad, iv, key));
    }
    double t0 = gt_now_seconds();
    for (size_t off = 0; off < n; off += PAGE) {
        iv[0] = (uint8_t)(off >> 16), iv[1] = (uint8_t)(off >> 24);
        uint8_t *c = ct + off / PAGE * (PAGE + 16);
        if (!open_only) {
            ok("seal", gt_aead_seal(c, PAGE + 16, &len, pt + off, PAGE, aad, sizeof aad, iv, key));
        }
        ok("open", gt_aead_open(pt + off, PAGE, &len, c, PAGE + 16, aad, sizeof aad, iv, key));
    }
    return gt_now_seconds() - t0;
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
    gt_device *dev = open_dev(store, 8u << 20);
    gt_dbuf b = 0;
    ok("alloc", gt_device_alloc(dev, n, 0, &b));
    ok("copy_in", gt_device_copy_in(dev, b, 0, pt, n));
    ok("copy_out", gt_device_copy_out(dev, back, b, 0, n));  // now every page is sealed, clean
    double rd[3], wr[3], both[3], open1[3];
    for (int i = 0; i < 3; i++) {  // side by side, round by round
        double t0 = gt_now_seconds();
        ok("copy_out", gt_device_copy_out(dev, back, b, 0, n));  // fault-ins + clean drops
        rd[i] = gt_now_seconds() - t0;
        t0 = gt_now_seconds();
        ok("copy_in", gt_device_copy_in(dev, b, 0, pt, n));  // fault-ins + reseals
        wr[i] = gt_now_seconds() - t0;
        both[i] = gcm_pass(pt, ct, n, false);
        open1[i] = gcm_pass(pt, ct, n, true);
    }
    if (memcmp(back, pt, n) != 0) {
        die("throughput", gt_errf(GT_E_STATE, "read back differs"));
    }
    double mb = (double)n / 1e6, r = bench_median(rd, 3), w = bench_median(wr, 3);
    double s = bench_median(both, 3), o = bench_median(open1, 3);
    printf("\npaging throughput, a 64 MiB buffer under an 8 MiB cap (64 KiB pages, median of 3 "
           "rounds; GCM passes in pages of 64 KiB, same rounds):\n");
    printf("| read back (page-in) | GCM open | ratio | rewrite (page-in + page-out) | "
           "GCM seal + open | ratio |\n|---|---|---|---|---|---|\n");
    printf("| %.0f MB/s | %.0f MB/s | %.2fx | %.0f MB/s | %.0f MB/s | %.2fx |\n", mb / r, mb / o,
           o / r, mb / w, mb / s, s / w);
    gt_device_close(dev);
    free(pt);
    free(ct);
    free(back);
}

int main(int argc, char **argv)
{
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
    static run_result r[6];
    gt_device *dev = open_dev(store, 0);
    train_run(dev, &r[0]);
    gt_device_close(dev);
    dev = open_dev(store, 1u << 30);  // paging, nothing evicted: the size a step touches
    train_run(dev, &r[1]);
    gt_device_close(dev);
    uint64_t touched = r[1].st.peak_resident;
    const double frac[6] = {0, 1.0, 0.5, 0.25, 0.125, 0};
    for (int i = 2; i < 5; i++) {
        dev = open_dev(store, (uint64_t)((double)touched * frac[i]) / PAGE * PAGE);
        train_run(dev, &r[i]);
        gt_device_close(dev);
    }
    dev = open_dev(store, 0);  // no pager again, last: how much the machine moved meanwhile
    train_run(dev, &r[5]);
    gt_device_close(dev);
    printf("small GPT-2 (4 layers, 128 channels, vocab 512, B=4 T=64), cpu backend, 2 threads, "
           "64 KiB pages; a step touches %.1f MiB\n", (double)touched / (1 << 20));
    printf("| cap | step ms (median of %d) | vs no pager | page-outs/step | clean drops/step | "
           "fault-ins/step | peak resident | losses as without a pager |\n"
           "|---|---|---|---|---|---|---|---|\n", STEPS);
    double x[4], y[4];
    int np = 0;
    for (int i = 0; i < 6; i++) {
        char cap[32] = "none";
        if (i == 5) {
            snprintf(cap, sizeof cap, "none, again");
        } else if (i > 0) {
            snprintf(cap, sizeof cap, "%.1f%%", 100 * frac[i]);
        }
        if (r[i].refused) {
            printf("| %s | refused: %s |\n", cap, r[i].why);
            continue;
        }
        bool same = memcmp(r[i].loss, r[0].loss, sizeof r[0].loss) == 0;
        printf("| %s | %.2f | %.2fx | %.0f | %.0f | %.0f | %.1f MiB | %s |\n", cap,
               r[i].step_ms, r[i].step_ms / r[0].step_ms, (double)r[i].st.page_outs / (STEPS + 1),
               (double)r[i].st.clean_drops / (STEPS + 1), (double)r[i].st.fault_ins / (STEPS + 1),
               (double)r[i].st.peak_resident / (1 << 20), same ? "yes" : "NO");
        if (i > 0 && i < 5) {
            x[np] = 100 * frac[i];
            y[np++] = r[i].step_ms / r[0].step_ms;
        }
    }
    throughput(store);
    rmdir(store);
    gt_plot_series s = {.name = "step time / no pager", .x = x, .y = y, .n = (size_t)np};
    gt_plot_style st = {.title = "paging: small GPT-2 step time under a memory cap (cpu)",
                        .xlabel = "cap, % of what a step touches", .ylabel = "x no pager",
                        .points = true};
    gt_err e = gt_plot_lines(png, &st, &s, 1);
    printf("\nplot: %s\n", gt_is_ok(e) ? png : e.msg);
    return 0;
}
