// gt_ring_test CASE: the encrypted ring all-reduce under mpirun (CTest runs it at 2 and 4 ranks,
// tests/CMakeLists.txt). Every rank checks its own outcome and exits 0 only when it holds.
//
//   sum        results equal an independent sum in the ring's stated order (bit for bit) and
//              a double-precision sum (within tolerance), over several sizes, buckets, windows
//   flip       a sampled bit-flip sweep over one chunk carried by MPI: every flip rejected, the
//              destination unchanged, then the untouched chunk opens; plus a flip in transit
//              inside the ring (header, ciphertext, tag): the collective stops on every rank
//   replay     a chunk delivered again in place of a later one
//   reorder    two chunks of one round swapped
//   misroute   a rank's own outgoing chunk (for its right neighbour) delivered back to it
//   oldstep    a chunk of step 7 delivered in step 8
//   samestep   a chunk of one collective replayed in a second one with the same step number:
//              only the direction's sequence number tells them apart
//   shard      reduce-scatter then all-gather apart (ZeRO-1): after the reduce-scatter rank r's
//              shard r is the sum in the stated order (bit for bit); the all-gather copies each
//              owner's shard over everything else (garbage written there first must be gone)
//   phase      an all-gather's chunk delivered into a reduce-scatter of the same step: refused
//              by its phase-bound hop field
//   kill       the last rank exits mid-collective: the job ends at once (mpirun), no hang
//   stall      the last rank stops answering mid-collective: every other rank stops with a
//              clear error within the timeout (tests/collective/ring_kill.sh checks output and time)
#include <gputravel/collective.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;

// The host endpoint's chunk: header, an empty label block, ciphertext, tag (docs/collective.md).
#define HOST_AAD (GT_PEER_HDR_BYTES + 4)

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "ring_test[%d] FAIL %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            exit(1);                                                        \
        }                                                                   \
    } while (0)
#define CHECK_OK(expr)                                                      \
    do {                                                                    \
        gt_err e_ = (expr);                                                 \
        CHECK(gt_is_ok(e_), "%s: %s", #expr, e_.msg);                       \
    } while (0)

// Rank r's input: a fixed pseudo-random float per (seed, r, i), so every rank can compute every
// other rank's input for the oracle without it crossing the wire.
static float input_of(uint64_t seed, int r, uint64_t i)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)r << 40) ^ i;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (float)((int64_t)(x % 2000001) - 1000000) / 1000.0f;
}

typedef struct {
    gt_ring_host *host;
    gt_ring *ring;
    gt_ring_endpoint ep;
    float *data;
    uint64_t n;
} world;

static void world_open(world *w, uint64_t n, const gt_ring_opts *o)
{
    memset(w, 0, sizeof *w);
    CHECK_OK(gt_ring_host_admit(&w->host, MPI_COMM_WORLD, 10000));
    uint8_t run[16];
    gt_ring_host_run_id(w->host, run);
    CHECK_OK(gt_ring_new(&w->ring, MPI_COMM_WORLD, run, o));
    w->ep = gt_ring_host_endpoint(w->host);
    w->n = n;
    w->data = calloc(n ? n : 1, sizeof(float));
    CHECK(w->data != NULL, "out of memory");
    gt_ring_host_set_buffer(w->host, w->data, n);
}

static void world_fill(world *w, uint64_t seed)
{
    for (uint64_t i = 0; i < w->n; i++) {
        w->data[i] = input_of(seed, rank, i);
    }
}

static void world_close(world *w)
{
    gt_ring_free(w->ring);
    gt_ring_host_free(w->host);
    free(w->data);
}

// ---- sum ------------------------------------------------------------------------------------

// The stated order, computed here from the definition (collective.h), not from the ring's code paths.
static void check_sum(const world *w, uint64_t seed, uint64_t bucket_elems)
{
    for (uint64_t i = 0; i < w->n; i++) {
        uint64_t b = i / bucket_elems, boff = b * bucket_elems;
        uint64_t blen = w->n - boff < bucket_elems ? w->n - boff : bucket_elems;
        uint64_t base = blen / (uint64_t)nranks, rem = blen % (uint64_t)nranks;
        uint64_t k = 0;  // the segment holding i: the first whose end is past i
        while (boff + (k + 1) * base + (k + 1 < rem ? k + 1 : rem) <= i) {
            k++;
        }
        float s = input_of(seed, (int)k, i);
        double d = s, mag = fabs(s);
        for (int j = 1; j < nranks; j++) {
            float x = input_of(seed, (int)((k + (uint64_t)j) % (uint64_t)nranks), i);
            s += x;
            d += x;
            mag += fabs(x);
        }
        CHECK(memcmp(&s, &w->data[i], sizeof s) == 0, "elem %llu: %.9g, stated order gives %.9g",
              (unsigned long long)i, w->data[i], s);
        CHECK(fabs(w->data[i] - d) <= 1e-6 * nranks * mag + 1e-30, "elem %llu: %.9g vs %.9g",
              (unsigned long long)i, w->data[i], d);
    }
}

static void case_sum(void)
{
    static const struct {
        uint64_t n, bucket_bytes;
        uint32_t window;
    } rows[] = {
        {1000, 0, 0},          // one bucket (the default 4 MiB), one window
        {10007, 4096, 2},      // many buckets, uneven segments, a short last bucket
        {10007, 4096, 3},      // a window that does not divide the bucket count
        {65536, 16384, 1},     // no pipelining
        {3, 16, 2},            // fewer floats than ranks: empty segments
        {300000, 1 << 16, 4},  // several windows of 4
    };
    for (size_t t = 0; t < sizeof rows / sizeof rows[0]; t++) {
        gt_ring_opts o = {.bucket_bytes = rows[t].bucket_bytes, .window = rows[t].window,
                          .timeout_ms = 10000};
        world w;
        world_open(&w, rows[t].n, &o);
        uint64_t be = (rows[t].bucket_bytes ? rows[t].bucket_bytes : 4u << 20) / sizeof(float);
        for (uint64_t step = 0; step < 3; step++) {  // counters carry across collectives
            world_fill(&w, 100 * t + step);
            CHECK_OK(gt_ring_allreduce(w.ring, &w.ep, w.n, step));
            check_sum(&w, 100 * t + step, be);
        }
        world_close(&w);
    }
    printf("ring_test[%d] sum: ok (%d ranks)\n", rank, nranks);
}

// ---- reduce-scatter and all-gather apart (ZeRO-1) -----------------------------------------

// Shard k's stated order: ((x_{k+1} + x_{k+2}) + ...) + x_k, the owner's own floats added last.
static float shard_sum(uint64_t seed, uint32_t k, uint64_t i)
{
    float s = input_of(seed, (int)((k + 1) % (uint32_t)nranks), i);
    for (int j = 2; j <= nranks; j++) {
        s += input_of(seed, (int)((k + (uint32_t)j) % (uint32_t)nranks), i);
    }
    return s;
}

static void case_shard(void)
{
    static const struct {
        uint64_t n, bucket_bytes;
        uint32_t window;
    } rows[] = {
        {1000, 0, 0},        // one bucket
        {10007, 4096, 2},    // many buckets, shards one float apart, a short last bucket
        {10007, 4096, 3},    // a window that does not divide the bucket count
        {3, 16, 2},          // fewer floats than ranks: empty shards
    };
    for (size_t t = 0; t < sizeof rows / sizeof rows[0]; t++) {
        gt_ring_opts o = {.bucket_bytes = rows[t].bucket_bytes, .window = rows[t].window,
                          .timeout_ms = 10000};
        world w;
        world_open(&w, rows[t].n, &o);
        uint64_t off = 0, len = 0;
        gt_ring_shard(w.n, (uint32_t)nranks, (uint32_t)rank, &off, &len);
        for (uint64_t step = 0; step < 2; step++) {
            uint64_t seed = 500 + 10 * t + step;
            world_fill(&w, seed);
            CHECK_OK(gt_ring_reduce_scatter(w.ring, &w.ep, w.n, step));
            for (uint64_t i = off; i < off + len; i++) {
                float want = shard_sum(seed, (uint32_t)rank, i);
                CHECK(memcmp(&want, &w.data[i], sizeof want) == 0,
                      "row %zu elem %llu of my shard: %.9g, stated order gives %.9g", t,
                      (unsigned long long)i, w.data[i], want);
            }
            for (uint64_t i = 0; i < w.n; i++) {  // the all-gather must copy, not add
                w.data[i] = i >= off && i < off + len ? w.data[i] : 1e30f;
            }
            CHECK_OK(gt_ring_allgather(w.ring, &w.ep, w.n, step));
            for (uint32_t k = 0; k < (uint32_t)nranks; k++) {
                uint64_t ko = 0, kl = 0;
                gt_ring_shard(w.n, (uint32_t)nranks, k, &ko, &kl);
                for (uint64_t i = ko; i < ko + kl; i++) {
                    float want = shard_sum(seed, k, i);
                    CHECK(memcmp(&want, &w.data[i], sizeof want) == 0,
                          "row %zu elem %llu (shard %u) after the all-gather: %.9g, want %.9g", t,
                          (unsigned long long)i, k, w.data[i], want);
                }
            }
        }
        world_close(&w);
    }
    printf("ring_test[%d] shard: ok (%d ranks)\n", rank, nranks);
}

// ---- the wire hook's attacks ----------------------------------------------------------------

typedef enum {
    ATK_FLIP, ATK_REPLAY, ATK_REORDER, ATK_MISROUTE, ATK_OLDSTEP, ATK_SAMESTEP, ATK_KILL,
    ATK_STALL, ATK_PHASE
} attack;

typedef struct {
    attack kind;
    int victim;        // the rank whose incoming chunks are changed
    size_t flip_bit;   // ATK_FLIP: which bit of the first arrival
    int rounds;        // arrival rounds seen so far
    int sent;          // chunks sent so far
    uint64_t step;     // the step now running
    int coll;          // collectives begun
    uint8_t saved[1 << 16];
    size_t saved_len;
    bool fired;
    // What the changed chunk would have written over, before it was opened.
    uint64_t watch_off, watch_len;
    float watch[1 << 14];
    const world *w;
} attacker;

static void watch(attacker *a, const gt_ring_arrival *arr)
{
    a->watch_off = arr->want.elem_off;
    a->watch_len = arr->want.nelem;
    CHECK(a->watch_len <= sizeof a->watch / sizeof a->watch[0], "chunk too big to watch");
    memcpy(a->watch, a->w->data + a->watch_off, a->watch_len * sizeof(float));
    a->fired = true;
}

static void save(attacker *a, const uint8_t *bytes, size_t len)
{
    CHECK(len <= sizeof a->saved, "chunk too big to save");
    memcpy(a->saved, bytes, len);
    a->saved_len = len;
}

static void replace(attacker *a, gt_ring_arrival *arr)
{
    CHECK(a->saved_len <= arr->cap && a->saved_len > 0, "nothing to inject");
    watch(a, arr);
    memcpy(arr->bytes, a->saved, a->saved_len);
    arr->len = a->saved_len;
}

static void on_sent(void *ctx, const gt_peer_hdr *h, const uint8_t *bytes, size_t len)
{
    attacker *a = ctx;
    a->sent++;
    if (a->kind == ATK_MISROUTE && rank == a->victim && a->saved_len == 0) {
        save(a, bytes, len);  // for the right neighbour; it comes back to us
    }
    if ((a->kind == ATK_KILL || a->kind == ATK_STALL) && rank == nranks - 1 && a->sent == 3) {
        bool kill = a->kind == ATK_KILL;
        fprintf(stderr, "ring_test[%d] %s mid-collective (hop %u)\n", rank,
                kill ? "kill: exiting" : "stall: stopping", h->hop);
        fflush(stderr);
        if (kill) {
            _exit(7);  // no MPI_Finalize, no goodbye: as a crashed rank
        }
        for (;;) {
            sleep(60);  // alive, connected and silent: as a wedged rank or a stalled link
        }
    }
}

static void on_arrived(void *ctx, gt_ring_arrival *arr, size_t n)
{
    attacker *a = ctx;
    int round = a->rounds++;
    if (rank != a->victim || a->fired) {
        return;
    }
    switch (a->kind) {
    case ATK_FLIP:
        watch(a, &arr[0]);
        arr[0].bytes[a->flip_bit / 8] ^= (uint8_t)(1u << (a->flip_bit % 8));
        break;
    case ATK_REPLAY:  // round 0: keep bucket 0's chunk; round 1: deliver it again
        if (round == 0) {
            save(a, arr[0].bytes, arr[0].len);
        } else {
            replace(a, &arr[0]);
        }
        break;
    case ATK_REORDER:
        CHECK(n >= 2 && arr[0].len == arr[1].len, "reorder needs two equal chunks");
        watch(a, &arr[0]);
        for (size_t i = 0; i < arr[0].len; i++) {
            uint8_t t = arr[0].bytes[i];
            arr[0].bytes[i] = arr[1].bytes[i];
            arr[1].bytes[i] = t;
        }
        break;
    case ATK_MISROUTE:
        replace(a, &arr[0]);
        break;
    case ATK_OLDSTEP:   // collective 0's first chunk, delivered in collective 1
    case ATK_SAMESTEP:
    case ATK_PHASE:
        if (a->coll == 0 && a->saved_len == 0) {
            save(a, arr[0].bytes, arr[0].len);
        } else if (a->coll == 1) {
            replace(a, &arr[0]);
        }
        break;
    default:
        break;
    }
}

// One collective under attack: the victim must reject with `want` in the reason and leave the
// attacked floats as they were; every other rank must stop too (told by the victim).
static void expect_stopped(const attacker *a, const world *w, gt_err e, const char *want)
{
    if (rank == a->victim) {
        CHECK(e.code == GT_E_AUTH, "victim: expected a rejection, got %s: %s",
              gt_code_name(e.code), e.msg);
        CHECK(strstr(e.msg, want) != NULL, "victim: reason '%s' lacks '%s'", e.msg, want);
        CHECK(a->fired, "the attack never ran");
        CHECK(memcmp(w->data + a->watch_off, a->watch, a->watch_len * sizeof(float)) == 0,
              "the rejected chunk changed the destination");
    } else {
        char told[64];
        snprintf(told, sizeof told, "rank %d aborted the collective: AUTH", a->victim);
        CHECK(e.code == GT_E_PEER && strstr(e.msg, told) != NULL,
              "rank %d: expected to be told of rank %d's rejection, got %s: %s", rank, a->victim,
              gt_code_name(e.code), e.msg);
    }
}

static gt_err attacked_run(attacker *a, world *w, uint64_t n, const gt_ring_opts *o0,
                           uint64_t first_step, int steps)
{
    gt_ring_wire_hook hook = {a, on_sent, on_arrived};
    gt_ring_opts o = *o0;
    o.hook = &hook;
    world_open(w, n, &o);
    a->w = w;
    gt_err e = GT_OK;
    for (int s = 0; s < steps && gt_is_ok(e); s++) {
        // The same step twice: a caller's bug or a restart; the sequence number still differs.
        bool same = a->kind == ATK_SAMESTEP || a->kind == ATK_PHASE;
        a->step = first_step + (same ? 0 : (uint64_t)s);
        a->coll = s;
        a->rounds = 0;
        world_fill(w, a->step);
        if (a->kind == ATK_PHASE) {  // an all-gather, then a reduce-scatter of the same step
            e = s == 0 ? gt_ring_allgather(w->ring, &w->ep, n, a->step)
                       : gt_ring_reduce_scatter(w->ring, &w->ep, n, a->step);
            continue;
        }
        e = gt_ring_allreduce(w->ring, &w->ep, n, a->step);
    }
    return e;
}

static void case_attack(attack kind, const char *name, const char *want, int steps)
{
    // Two buckets of 1024 floats per window round, segments of 1024/nranks floats.
    gt_ring_opts o = {.bucket_bytes = 4096, .window = 2, .timeout_ms = 10000};
    attacker *a = calloc(1, sizeof *a);
    CHECK(a != NULL, "out of memory");
    a->kind = kind;
    a->victim = 1;
    world w;
    gt_err e = attacked_run(a, &w, 4096, &o, 7, steps);
    expect_stopped(a, &w, e, want);
    if (rank == a->victim) {
        printf("ring_test[%d] %s: rejected: %s\n", rank, name, e.msg);
    }
    world_close(&w);
    free(a);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("ring_test[%d] %s: ok\n", rank, name);
}

// ---- the bit-flip sweep ---------------------------------------------------------------------

// Rank 0 seals one chunk for rank 1 and MPI carries it; rank 1 flips sampled bits, one at a
// time: each flip must be rejected with the destination unchanged and the direction's sequence
// number unspent, so that the untouched chunk still opens afterwards.
static void flip_sweep(void)
{
    enum { N = 256 };
    world w;
    world_open(&w, N, NULL);
    world_fill(&w, 42);
    gt_peer_hdr h = {.step = 3, .bucket = 0, .hop = 0, .src = 0, .dst = 1, .elem_off = 0,
                     .nelem = N};
    gt_ring_host_run_id(w.host, h.run);
    size_t len = HOST_AAD + N * sizeof(float) + GT_AEAD_TAG_BYTES;
    uint8_t *chunk = malloc(len), *bent = malloc(len);
    CHECK(chunk && bent, "out of memory");
    if (rank == 0) {
        size_t got = 0;
        CHECK_OK(w.ep.seal(w.ep.ctx, &h, chunk, len, &got));
        CHECK(got == len, "sealed %zu bytes, expected %zu", got, len);
        MPI_Send(chunk, (int)len, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(chunk, (int)len, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        float before[N];
        memcpy(before, w.data, sizeof before);
        size_t tried = 0;
        // Every header and label-block bit, every tag bit, every 13th ciphertext bit.
        for (size_t bit = 0; bit < len * 8; bit++) {
            bool in_ct = bit >= HOST_AAD * 8 && bit < (len - GT_AEAD_TAG_BYTES) * 8;
            if (in_ct && bit % 13 != 0) {
                continue;
            }
            memcpy(bent, chunk, len);
            bent[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            gt_err e = w.ep.open(w.ep.ctx, &h, bent, len, GT_PEER_ADD);
            CHECK(!gt_is_ok(e), "bit %zu flipped: accepted", bit);
            CHECK(memcmp(before, w.data, sizeof before) == 0, "bit %zu: destination changed", bit);
            tried++;
        }
        CHECK_OK(w.ep.open(w.ep.ctx, &h, chunk, len, GT_PEER_ADD));
        for (uint64_t i = 0; i < N; i++) {
            float want = before[i] + input_of(42, 0, i);
            CHECK(memcmp(&want, &w.data[i], sizeof want) == 0, "elem %llu after the good chunk",
                  (unsigned long long)i);
        }
        printf("ring_test[1] flip: %zu flipped bits, each rejected, destination unchanged\n",
               tried);
    }
    free(chunk);
    free(bent);
    world_close(&w);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void flip_in_ring(void)
{
    // One flip each in the header (the hop field), the ciphertext and the tag of an arriving
    // chunk of 512 bytes of floats.
    size_t ct_bits = 1024 / (size_t)nranks * 4 * 8;
    const size_t bits[] = {28 * 8 + 1, HOST_AAD * 8 + 77, HOST_AAD * 8 + ct_bits + 5};
    const char *wants[] = {"hop", "authentication failed", "authentication failed"};
    for (int i = 0; i < 3; i++) {
        gt_ring_opts o = {.bucket_bytes = 4096, .window = 2, .timeout_ms = 10000};
        attacker *a = calloc(1, sizeof *a);
        CHECK(a != NULL, "out of memory");
        a->kind = ATK_FLIP;
        a->victim = 1;
        a->flip_bit = bits[i];
        world w;
        gt_err e = attacked_run(a, &w, 4096, &o, 0, 1);
        expect_stopped(a, &w, e, wants[i]);
        world_close(&w);
        free(a);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    printf("ring_test[%d] flip: ok\n", rank);
}

// ---- a rank dies ----------------------------------------------------------------------------

// The last rank dies (kill) or stops answering (stall) at its third chunk. A dead rank ends
// the job through mpirun (Open MPI's TCP transport cannot outlive a dead peer: the job is
// aborted at once, ring_kill.sh checks how fast). A stalled one is the ring's to detect: every
// survivor must stop with a clear error within the timeout, then end the job as the CLI does.
static void case_dead_rank(attack kind)
{
    gt_ring_opts o = {.bucket_bytes = 4096, .window = 2, .timeout_ms = 2000};
    attacker *a = calloc(1, sizeof *a);
    CHECK(a != NULL, "out of memory");
    a->kind = kind;
    a->victim = -1;
    world w;
    double t0 = gt_now_seconds();
    gt_err e = attacked_run(a, &w, 1 << 16, &o, 0, 2);
    double dt = gt_now_seconds() - t0;
    CHECK(!gt_is_ok(e), "the collective finished without rank %d", nranks - 1);
    // ring_kill.sh reads this line from every survivor.
    printf("ring_test[%d] %s: stopped after %.1f s: %s: %s\n", rank,
           kind == ATK_KILL ? "kill" : "stall", dt, gt_code_name(e.code), e.msg);
    fflush(stdout);
    sleep(1);  // the other survivors stop within milliseconds (the vote); let them print too
    MPI_Abort(MPI_COMM_WORLD, 3);  // ends every rank, the stopped one too
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK(argc == 2, "usage: mpirun -np N gt_ring_test sum|flip|replay|reorder|misroute|"
                     "oldstep|samestep|shard|phase|kill|stall");
    CHECK(nranks >= 2, "run under mpirun with at least 2 ranks");
    gt_log_set_level(GT_LOG_WARN);
    const char *c = argv[1];
    if (strcmp(c, "sum") == 0) {
        case_sum();
    } else if (strcmp(c, "flip") == 0) {
        flip_sweep();
        flip_in_ring();
    } else if (strcmp(c, "replay") == 0) {
        case_attack(ATK_REPLAY, c, "hop 0, expected 1", 1);
    } else if (strcmp(c, "reorder") == 0) {
        case_attack(ATK_REORDER, c, "bucket 1, expected 0", 1);
    } else if (strcmp(c, "misroute") == 0) {
        case_attack(ATK_MISROUTE, c, "src 1, expected 0", 1);
    } else if (strcmp(c, "oldstep") == 0) {
        case_attack(ATK_OLDSTEP, c, "step 7, expected 8", 2);
    } else if (strcmp(c, "samestep") == 0) {
        case_attack(ATK_SAMESTEP, c, "sequence number", 2);
    } else if (strcmp(c, "shard") == 0) {
        case_shard();
    } else if (strcmp(c, "phase") == 0) {
        case_attack(ATK_PHASE, c, "hop 13107", 2);  // (2 << 16 | N-1), expected 1 << 16 | 0
    } else if (strcmp(c, "kill") == 0) {
        case_dead_rank(ATK_KILL);
    } else if (strcmp(c, "stall") == 0) {
        case_dead_rank(ATK_STALL);
    } else {
        CHECK(false, "unknown case '%s'", c);
    }
    MPI_Finalize();
    return 0;
}
