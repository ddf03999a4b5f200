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

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

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

// The ciphertext of n bytes of pt in PAGE pieces, each PAGE + 16 bytes in ct (the store's
// layout), under the key and IVs gcm_range uses.
static void gcm_prepare(const uint8_t *pt, uint8_t *ct, size_t n)
{
    uint8_t key[32] = {1}, iv[12] = {0}, aad[48] = {0};
    size_t len = 0;
    for (size_t off = 0; off < n; off += PAGE) {
        iv[0] = (uint8_t)(off >> 16), iv[1] = (uint8_t)(off >> 24);
        ok("seal", gt_aead_seal(ct + off / PAGE * (PAGE + 16), PAGE + 16, &len, pt + off, PAGE,
                                aad, sizeof aad, iv, key));
    }
}

// One thread's share of a pass: pages [lo, hi) (in PAGE pieces) of pt / ct.
typedef struct {
    uint8_t *pt, *ct;
    size_t lo, hi;
    bool open_only;
    double cpu;  // that thread's CPU seconds in it
} gcm_job;

// Seal + open (open_only: open alone) of the job's pages, as gcm_prepare laid them out.
static void *gcm_range(void *arg)
{
    gcm_job *j = arg;
    uint8_t key[32] = {1}, iv[12] = {0}, aad[48] = {0};
    size_t len = 0;
    double c0 = thread_cpu();
    for (size_t pg = j->lo; pg < j->hi; pg++) {
        size_t off = pg * PAGE;
        iv[0] = (uint8_t)(off >> 16), iv[1] = (uint8_t)(off >> 24);
        uint8_t *c = j->ct + pg * (PAGE + 16);
        if (!j->open_only) {
            ok("seal", gt_aead_seal(c, PAGE + 16, &len, j->pt + off, PAGE, aad, sizeof aad, iv,
                                    key));
        }
        ok("open", gt_aead_open(j->pt + off, PAGE, &len, c, PAGE + 16, aad, sizeof aad, iv,
                                key));
    }
    j->cpu = thread_cpu() - c0;
    return NULL;
}

// Wall seconds of fn over jobs[0 .. threads) (each job_bytes long), jobs[0] on this thread,
// the others on threads of their own, all started together.
static double on_threads(int threads, void *(*fn)(void *), void *jobs, size_t job_bytes)
{
    pthread_t t[2];
    double t0 = gt_now_seconds();
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&t[i], NULL, fn, (uint8_t *)jobs + (size_t)i * job_bytes) != 0) {
            die("thread", gt_errf(GT_E_NOMEM, "pthread_create"));
        }
    }
    fn(jobs);
    for (int i = 1; i < threads; i++) {
        pthread_join(t[i], NULL);
    }
    return gt_now_seconds() - t0;
}

// CPU seconds of the whole process: the caller's and the pager worker's threads together.
static double process_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Seconds for one pass of seal + open (open_only: open alone) over n bytes in PAGE pieces, the
// pages split between `threads` threads (1 or 2); *cpu: the first thread's CPU seconds.
static double gcm_pass(uint8_t *pt, uint8_t *ct, size_t n, bool open_only, int threads,
                       double *cpu)
{
    gcm_prepare(pt, ct, n);  // the ciphertext to open, untimed
    size_t pages = n / PAGE, half = threads > 1 ? pages / 2 : pages;
    gcm_job j[2] = {{pt, ct, 0, half, open_only, 0}, {pt, ct, half, pages, open_only, 0}};
    double wall = on_threads(threads, gcm_range, j, sizeof j[0]);
    *cpu = j[0].cpu;
    return wall;
}

// ---- the pager's non-crypto work per page, by hand (the bound on the read back) -------------
// The same calls as the pager's read back of a run (src/device/pager.c: open_blob's preadv,
// map_range's run_map, evict's wipe, pend_flush's run_unmap), without the GCM open, and the
// bench's own copy out of the held run (copy_out's memcpy, part of the read back timed above).
enum { FL_READ, FL_MAP, FL_COPY, FL_WIPE, FL_UNMAP, FL_PHASES };
static const char *const fl_names[FL_PHASES] = {
    "blob `preadv` from the store file into the frame (64 KiB + tag)",
    "run `mmap(MAP_SHARED|MAP_FIXED|MAP_POPULATE)` of the frames + `MADV_DONTDUMP`, 32 pages a call",
    "the bench's copy out of the held run (`memcpy`)",
    "wipe of the frame (`gt_secure_zero`)",
    "`mmap(PROT_NONE, MAP_FIXED)` over the run, 32 pages a call"};

#define FL_RUN 32u  // pages per run: gt_pager_each's run at this cap (each_run)

typedef struct {
    int store_fd, pool_fd;
    uint8_t *arena, *pool, *back;
    size_t run0, nruns;  // runs run0, run0 + 2, ... below nruns (two threads), or all (one)
    size_t step;
    uint32_t frame0;     // this thread's FL_RUN frames of the pool
    double t[FL_PHASES];  // seconds in each phase
} floor_job;

static void *floor_runs(void *arg)
{
    floor_job *j = arg;
    uint8_t tag[16];
    memset(j->t, 0, sizeof j->t);
    for (size_t r = j->run0; r < j->nruns; r += j->step) {
        uint8_t *frames = j->pool + (size_t)j->frame0 * PAGE, *at = j->arena + r * FL_RUN * PAGE;
        double t0 = gt_now_seconds();
        for (uint32_t i = 0; i < FL_RUN; i++) {
            size_t pg = r * FL_RUN + i;
            struct iovec io[2] = {{frames + (size_t)i * PAGE, PAGE}, {tag, sizeof tag}};
            if (preadv(j->store_fd, io, 2, (off_t)(pg * (PAGE + 16))) != PAGE + 16) {
                die("floor", gt_errf(GT_E_IO, "preadv"));
            }
        }
        double t1 = gt_now_seconds();
        void *m = mmap(at, (size_t)FL_RUN * PAGE, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED | MAP_POPULATE, j->pool_fd,
                       (off_t)j->frame0 * PAGE);
        if (m == MAP_FAILED) {
            die("floor", gt_errf(GT_E_NOMEM, "mmap"));
        }
        (void)madvise(m, (size_t)FL_RUN * PAGE, MADV_DONTDUMP);
        double t2 = gt_now_seconds();
        memcpy(j->back + r * FL_RUN * PAGE, at, (size_t)FL_RUN * PAGE);
        double t3 = gt_now_seconds();
        gt_secure_zero(frames, (size_t)FL_RUN * PAGE);
        double t4 = gt_now_seconds();
        if (mmap(at, (size_t)FL_RUN * PAGE, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
            die("floor", gt_errf(GT_E_NOMEM, "mmap"));
        }
        double t5 = gt_now_seconds();
        j->t[FL_READ] += t1 - t0;
        j->t[FL_MAP] += t2 - t1;
        j->t[FL_COPY] += t3 - t2;
        j->t[FL_WIPE] += t4 - t3;
        j->t[FL_UNMAP] += t5 - t4;
    }
    return NULL;
}

typedef struct {
    int store_fd, pool_fd;
    uint8_t *arena, *pool;
    char path[600];
} floor_setup;

// A store file holding ct's blobs (in the page cache, as the pager's just written), a frame
// pool of the cap's size (a memfd mapped once) and an arena reserved PROT_NONE.
static floor_setup floor_open(const char *store, const uint8_t *ct, size_t n, size_t cap)
{
    floor_setup s;
    snprintf(s.path, sizeof s.path, "%s/floor.pages", store);
    s.store_fd = open(s.path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t bytes = n / PAGE * (PAGE + 16);
    if (s.store_fd < 0 || pwrite(s.store_fd, ct, bytes, 0) != (ssize_t)bytes) {
        die("floor", gt_errf(GT_E_IO, "cannot write %s", s.path));
    }
    s.pool_fd = memfd_create("bench-frames", MFD_CLOEXEC);
    if (s.pool_fd < 0 || ftruncate(s.pool_fd, (off_t)cap) != 0) {
        die("floor", gt_errf(GT_E_NOMEM, "memfd"));
    }
    s.pool = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, s.pool_fd, 0);
    s.arena = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s.pool == MAP_FAILED || s.arena == MAP_FAILED) {
        die("floor", gt_errf(GT_E_NOMEM, "mmap"));
    }
    memset(s.pool, 0, cap);  // the pool's pages exist, as the pager's do after the first cycle
    return s;
}

static void floor_close(floor_setup *s, size_t n, size_t cap)
{
    munmap(s->arena, n);
    munmap(s->pool, cap);
    close(s->pool_fd);
    close(s->store_fd);
    unlink(s->path);
}

// Wall seconds of the non-crypto work over n bytes on `threads` threads (alternate runs, each
// thread its own frames); sum[]: the seconds of each phase summed over the threads.
static double floor_pass(const floor_setup *s, uint8_t *back, size_t n, int threads,
                         double sum[FL_PHASES])
{
    floor_job j[2];
    for (int i = 0; i < 2; i++) {
        j[i] = (floor_job){.store_fd = s->store_fd, .pool_fd = s->pool_fd, .arena = s->arena,
                           .pool = s->pool, .back = back, .run0 = (size_t)i,
                           .nruns = n / PAGE / FL_RUN, .step = (size_t)threads,
                           .frame0 = (uint32_t)i * FL_RUN};
    }
    double wall = on_threads(threads, floor_runs, j, sizeof j[0]);
    for (int k = 0; k < FL_PHASES; k++) {
        sum[k] = j[0].t[k] + (threads > 1 ? j[1].t[k] : 0);
    }
    return wall;
}

typedef struct {
    double rd, wr;  // seconds: read back, rewrite
    double rd_cpu;  // the calling thread's CPU seconds in the read back
    double rd_all;  // the process's (all threads': with prefetch, the worker's too)
} tp_round;

// One round of read back and rewrite of b (n bytes) on dev.
static tp_round tp_once(gt_device *dev, gt_dbuf b, uint8_t *back, const uint8_t *pt, size_t n)
{
    tp_round r;
    double t0 = gt_now_seconds(), c0 = thread_cpu(), a0 = process_cpu();
    ok("copy_out", gt_device_copy_out(dev, back, b, 0, n));  // fault-ins + clean drops
    r.rd = gt_now_seconds() - t0;
    r.rd_cpu = thread_cpu() - c0;
    r.rd_all = process_cpu() - a0;
    t0 = gt_now_seconds();
    ok("copy_in", gt_device_copy_in(dev, b, 0, pt, n));  // fault-ins + reseals
    r.wr = gt_now_seconds() - t0;
    return r;
}

// The non-crypto work per page on 1 and 2 threads beside GCM's, and the read-back ratio they
// leave room for: on one thread open / (open + floor); on two, one thread's open over the two
// threads' open and floor walls (each thread doing half of both; an upper bound: the pager has
// a lock and a plan besides). All medians of the same rounds.
static void print_bound(size_t n, double rd[2][3], double *open1, double *open2, double fl[2][3],
                        double flsum[2][FL_PHASES][3])
{
    double pages = (double)(n / PAGE), us = 1e6 / pages;
    printf("\nthe bound: the pager's non-crypto work per 64 KiB page done by hand with the same "
           "calls (same rounds, median of 3; 2 threads: alternate runs of 32 pages, each thread "
           "its own frames; \"summed\": both threads' seconds in that phase, per page):\n");
    printf("| work per page | 1 thread, us | 2 threads, summed, us | x of 1 thread |\n"
           "|---|---|---|---|\n");
    for (int k = 0; k < FL_PHASES; k++) {
        double a = bench_median(flsum[0][k], 3) * us, b = bench_median(flsum[1][k], 3) * us;
        printf("| %s | %.2f | %.2f | %.2fx |\n", fl_names[k], a, b, b / a);
    }
    double f1 = bench_median(fl[0], 3), f2 = bench_median(fl[1], 3);
    double o1 = bench_median(open1, 3), o2 = bench_median(open2, 3);
    printf("| all of it, wall per page | %.2f | %.2f (wall, 2 threads) | %.2fx faster |\n", f1 * us,
           f2 * us, f1 / f2);
    printf("| GCM open (`gt_aead_open`), wall per page | %.2f | %.2f (wall, 2 threads) | %.2fx "
           "faster |\n", o1 * us, o2 * us, o1 / o2);
    printf("read back, ceiling vs measured (ratio to one GCM open pass on one thread): 1 thread "
           "%.2fx (measured, prefetch off: %.2fx); 2 threads %.2fx (measured, prefetch on: "
           "%.2fx)\n", o1 / (o1 + f1), o1 / bench_median(rd[0], 3), o1 / (o2 + f2),
           o1 / bench_median(rd[1], 3));
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
    double rd[2][3], wr[2][3], both[3], open1[3], rdc[2][3], openc[3], bothc[3], open2[3];
    double fl[2][3], flsum[2][FL_PHASES][3], cpu_unused = 0, rda[2][3], busy[2][3];
    gcm_prepare(pt, ct, n);  // the floor's store: the same blobs
    floor_setup fs = floor_open(store, ct, n, 8u << 20);
    gt_pager_stats st0[2], st1[2];
    for (int k = 0; k < 2; k++) {
        ok("stats", gt_device_paging_stats(dev[k], &st0[k]));
    }
    for (int i = 0; i < 3; i++) {  // side by side, round by round
        for (int k = 0; k < 2; k++) {
            tp_round r = tp_once(dev[k], b[k], back, pt, n);
            rd[k][i] = r.rd;
            rdc[k][i] = r.rd_cpu;
            rda[k][i] = r.rd_all;
            busy[k][i] = r.rd_all / r.rd;
            wr[k][i] = r.wr;
            if (memcmp(back, pt, n) != 0) {
                die("throughput", gt_errf(GT_E_STATE, "read back differs"));
            }
        }
        both[i] = gcm_pass(pt, ct, n, false, 1, &bothc[i]);
        open1[i] = gcm_pass(pt, ct, n, true, 1, &openc[i]);
        open2[i] = gcm_pass(pt, ct, n, true, 2, &cpu_unused);
        for (int t = 0; t < 2; t++) {
            double sum[FL_PHASES];
            fl[t][i] = floor_pass(&fs, back, n, t + 1, sum);
            for (int k = 0; k < FL_PHASES; k++) {
                flsum[t][k][i] = sum[k];
            }
        }
        if (memcmp(back, ct, PAGE) != 0) {  // the floor copied the first blob out through the run
            die("throughput", gt_errf(GT_E_STATE, "the floor's copy differs from the store"));
        }
    }
    floor_close(&fs, n, 8u << 20);
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
           "CPU ratio: caller's thread / all threads | cores busy in the read back (all threads' "
           "CPU / wall) |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        double r = bench_median(rd[k], 3), w = bench_median(wr[k], 3);
        double fi = (double)(st1[k].fault_ins - st0[k].fault_ins);
        double calls = (double)(st1[k].map_calls - st0[k].map_calls);
        double dem = (double)(st1[k].demand_faults - st0[k].demand_faults);
        // CPU: GCM open's thread time over the read back's, both medians: the caller's thread
        // alone, and the process's threads (with prefetch, the worker's time too).
        double oc = bench_median(openc, 3);
        printf("| %s | %.0f MB/s | %.0f MB/s | %.2fx | %.0f MB/s | %.0f MB/s | %.2fx | %.3f | "
               "%.0f%% | %.2fx / %.2fx | %.2f |\n", k ? "on" : "off", mb / r, mb / o, o / r,
               mb / w, mb / s, s / w, fi > 0 ? calls / fi : 0, fi > 0 ? 100 * dem / fi : 0,
               oc / bench_median(rdc[k], 3), oc / bench_median(rda[k], 3),
               bench_median(busy[k], 3));
        gt_device_close(dev[k]);
    }
    print_bound(n, rd, open1, open2, fl, flsum);
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
