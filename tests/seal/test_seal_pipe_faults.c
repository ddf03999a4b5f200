// The sealing pipeline against its single-threaded reference, and its failures.
//
// 1. Byte for byte: with the randomness fixed (dataset id, IVs: gt_random_bytes is wrapped here
//    and replays one stream per seal), the pipeline (the cipher reading a sliding mapping of the
//    input, hashing and writing on worker threads) and the reference (threads 1: read(), encrypt
//    in place, all inline) write identical datasets: every chunk file and the manifest, over
//    sizes and shard splits that cross the 1 MiB ring slots, the 64 KiB cipher pieces, the 8 MiB
//    mapping windows and the chunk boundaries.
// 2. A write that fails in the middle of a multi-slot chunk (testlib/faults.h: every write-side
//    call in turn) leaves no dataset, no staging folder and no shard behind, and every streaming
//    ring is all zeros when it is freed (free is wrapped here: the ring is the only allocation of
//    RING_MIN bytes or more), after seal and after unseal, failed or not.
#include "faults.h"
#include "testlib.h"

#include <gputravel/crypto.h>
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- wrapped: gt_random_bytes (fixed stream when asked), free (checks the ring is wiped) ------

gt_err __real_gt_random_bytes(void *out, size_t n);
gt_err __wrap_gt_random_bytes(void *out, size_t n);
void __real_free(void *p);
void __wrap_free(void *p);

static bool g_fixed_random;
static uint64_t g_random_state;

gt_err __wrap_gt_random_bytes(void *out, size_t n)
{
    if (!g_fixed_random) {
        return __real_gt_random_bytes(out, n);
    }
    uint8_t *b = out;
    for (size_t i = 0; i < n; i++) {  // splitmix64, a byte per step: only needs to repeat
        uint64_t z = (g_random_state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        b[i] = (uint8_t)(z ^ (z >> 31));
    }
    return GT_OK;
}

#define RING_MIN ((size_t)GT_SEAL_PIPE_SLOTS * GT_SEAL_PIPE_BYTES)

static int g_rings_freed, g_rings_dirty;

void __wrap_free(void *p)
{
    if (p != NULL) {
        size_t n = malloc_usable_size(p);
        if (n >= RING_MIN) {
            const uint8_t *b = p;
            uint8_t any = 0;
            for (size_t i = 0; i < n; i++) {
                any |= b[i];
            }
            g_rings_freed++;
            g_rings_dirty += any != 0;
        }
    }
    __real_free(p);
}

// ---- fixture ------------------------------------------------------------------------------

typedef struct {
    char dir[256];
    char keys[300], ds[300], ref[300], out[300], shard[4][300];
    gt_holder_keys k;
    int entries;
    uint64_t chunk;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->keys, sizeof f->keys, "%s/keys", f->dir);
    snprintf(f->ds, sizeof f->ds, "%s/ds", f->dir);
    snprintf(f->ref, sizeof f->ref, "%s/ref", f->dir);
    snprintf(f->out, sizeof f->out, "%s/out.bin", f->dir);
    for (int i = 0; i < 4; i++) {
        snprintf(f->shard[i], sizeof f->shard[i], "%s/in%d.bin", f->dir, i);
    }
    GT_ASSERT_OK(gt_keydir_generate(f->keys, false, &f->k));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_test_rmtree(f->dir);
    gt_holder_keys_wipe(&f->k);
    free(f);
    return 0;
}

// Shard i holds n tokens, all < 50257, different in every shard.
static void shard_make(fixture *f, int i, size_t n)
{
    uint16_t *t = malloc(n * sizeof *t + 1);
    assert_non_null(t);
    for (size_t j = 0; j < n; j++) {
        t[j] = (uint16_t)(((j + 1000003u * (size_t)i) * 2654435761u >> 7) % 50257);
    }
    GT_ASSERT_OK(gt_shard_write(f->shard[i], t, n));
    free(t);
}

static gt_err seal_with(fixture *f, const char *out, int nshards, uint64_t chunk, int threads)
{
    const char *shards[4] = {f->shard[0], f->shard[1], f->shard[2], f->shard[3]};
    gt_seal_params p = {.shards = shards, .shard_count = (size_t)nshards, .out_dir = out,
                        .chunk_size = chunk, .vocab_size = 50257, .threads = threads};
    gt_seal_result r;
    g_random_state = 42;  // the same dataset id and IVs for every seal
    return gt_seal(&p, &f->k, &r);
}

static void files_equal(const char *a, const char *b)
{
    gt_buf x = {0}, y = {0};
    GT_ASSERT_OK(gt_file_read_all(a, 1u << 30, &x));
    GT_ASSERT_OK(gt_file_read_all(b, 1u << 30, &y));
    if (x.len != y.len || memcmp(x.data, y.data, x.len) != 0) {
        fail_msg("%s (%zu bytes) differs from %s (%zu bytes)", a, x.len, b, y.len);
    }
    gt_buf_free_nowipe(&x);
    gt_buf_free_nowipe(&y);
}

static void datasets_equal(const char *a, const char *b, uint32_t chunks)
{
    assert_int_equal(gt_test_count_entries(a), (int)chunks + 1);
    assert_int_equal(gt_test_count_entries(b), (int)chunks + 1);
    char pa[600], pb[600];
    for (uint32_t i = 0; i < chunks; i++) {
        GT_ASSERT_OK(gt_chunk_path(pa, sizeof pa, a, i));
        GT_ASSERT_OK(gt_chunk_path(pb, sizeof pb, b, i));
        files_equal(pa, pb);
    }
    snprintf(pa, sizeof pa, "%s/%s", a, GT_MANIFEST_FILE);
    snprintf(pb, sizeof pb, "%s/%s", b, GT_MANIFEST_FILE);
    files_equal(pa, pb);
}

// ---- 1. the pipeline writes what the reference writes -------------------------------------

#define MIB (1u << 20)

typedef struct {
    size_t tokens[4];  // per shard; 0 ends the list
    uint64_t chunk;    // bytes
} layout;

static void pipeline_matches_reference(void **state)
{
    fixture *f = *state;
    static const layout cases[] = {
        {{1}, 0},                                            // one token
        {{MIB / 2 - 20}, 0},                                 // header + tokens: exactly a slot
        {{MIB / 2 - 19, 7, 32769}, 0},                       // a slot + 2 bytes, odd shards
        {{3 * MIB / 2 + 617, 1, 100000}, MIB + 6},           // chunks not slot-aligned
        {{9 * MIB / 2 + 3, 11}, 2 * MIB},                    // past an 8 MiB window
        {{3000, 3000, 3001}, 4096},                          // many small chunks
    };
    g_fixed_random = true;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = 0;
        uint64_t bytes = 0;
        for (; n < 4 && cases[c].tokens[n] > 0; n++) {
            shard_make(f, n, cases[c].tokens[n]);
            bytes += 2 * cases[c].tokens[n];
        }
        uint64_t chunk = cases[c].chunk ? cases[c].chunk : GT_SEAL_DEFAULT_CHUNK_BYTES;
        uint32_t chunks = (uint32_t)((bytes + chunk - 1) / chunk);
        GT_ASSERT_OK(seal_with(f, f->ref, n, cases[c].chunk, 1));
        GT_ASSERT_OK(seal_with(f, f->ds, n, cases[c].chunk, 0));
        datasets_equal(f->ref, f->ds, chunks);
        GT_ASSERT_OK(gt_dataset_verify(f->ds, f->k.holder_pub, false, NULL));
        gt_test_rmtree(f->ref);
        gt_test_rmtree(f->ds);
    }
    g_fixed_random = false;
}

// The fixed stream really fixes the output: two reference seals with different streams differ
// (else the comparison above would prove nothing about IVs).
static void different_randomness_differs(void **state)
{
    fixture *f = *state;
    shard_make(f, 0, 1000);
    g_fixed_random = true;
    GT_ASSERT_OK(seal_with(f, f->ref, 1, 0, 1));
    g_fixed_random = false;
    GT_ASSERT_OK(seal_with(f, f->ds, 1, 0, 1));
    char pa[600], pb[600];
    GT_ASSERT_OK(gt_chunk_path(pa, sizeof pa, f->ref, 0));
    GT_ASSERT_OK(gt_chunk_path(pb, sizeof pb, f->ds, 0));
    gt_buf x = {0}, y = {0};
    GT_ASSERT_OK(gt_file_read_all(pa, 1u << 20, &x));
    GT_ASSERT_OK(gt_file_read_all(pb, 1u << 20, &y));
    assert_int_equal(x.len, y.len);
    assert_true(memcmp(x.data, y.data, x.len) != 0);
    gt_buf_free_nowipe(&x);
    gt_buf_free_nowipe(&y);
}

static void threads_out_of_range_refused(void **state)
{
    fixture *f = *state;
    shard_make(f, 0, 10);
    gt_err e = seal_with(f, f->ds, 1, 0, 2);
    assert_int_equal(e.code, GT_E_ARG);
    assert_non_null(strstr(e.msg, "threads"));
    assert_int_equal(gt_test_count_entries(f->dir), 2);  // keys, in0.bin
}

// One token outside the vocabulary, wherever it sits in a vector of the check (AVX2, SSE2 or
// the scalar tail) and whichever its value, fails both paths with its position.
#define TOK 40000  // past one 64 KiB piece

static void token_outside_vocabulary_found_anywhere(void **state)
{
    fixture *f = *state;
    static const size_t at[] = {0, 15, 31, 33, 30000, TOK - 1};
    static const uint16_t bad[] = {50257, 65535};
    uint16_t *t = calloc(TOK, sizeof *t);
    assert_non_null(t);
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
        for (size_t v = 0; v < sizeof bad / sizeof bad[0]; v++) {
            for (size_t j = 0; j < TOK; j++) {
                t[j] = (uint16_t)(50256 - j % 3);  // the largest allowed, and just below
            }
            t[at[a]] = bad[v];
            GT_ASSERT_OK(gt_shard_write(f->shard[0], t, TOK));
            for (int threads = 0; threads <= 1; threads++) {
                gt_err e = seal_with(f, f->ds, 1, 0, threads);
                assert_int_equal(e.code, GT_E_FORMAT);
                char want[64];
                snprintf(want, sizeof want, "token %u at position %zu ", bad[v], at[a]);
                if (strstr(e.msg, want) == NULL) {
                    fail_msg("threads %d: '%s' does not name '%s'", threads, e.msg, want);
                }
                assert_int_equal(gt_test_count_entries(f->dir), 2);  // keys, in0.bin
            }
        }
    }
    for (size_t j = 0; j < TOK; j++) {
        t[j] = (uint16_t)(50256 - j % 3);
    }
    GT_ASSERT_OK(gt_shard_write(f->shard[0], t, TOK));
    GT_ASSERT_OK(seal_with(f, f->ds, 1, 0, 0));  // every token allowed: sealed
    free(t);
}

// ---- 2. failures in the middle of the pipeline ---------------------------------------------

static gt_err seal_op(void *ctx)
{
    fixture *f = ctx;
    return seal_with(f, f->ds, 2, f->chunk, 0);
}

static gt_err seal_ref_op(void *ctx)
{
    fixture *f = ctx;
    return seal_with(f, f->ds, 2, f->chunk, 1);
}

static gt_err unseal_op(void *ctx)
{
    fixture *f = ctx;
    return gt_unseal(f->ds, &f->k, f->out, false, NULL);
}

static void nothing_left_ring_wiped(void *ctx, uint64_t n)
{
    fixture *f = ctx;
    if (gt_test_count_entries(f->dir) != f->entries) {
        fail_msg("the run with write %llu failing left something behind", (unsigned long long)n);
    }
    if (g_rings_freed < 1 || g_rings_dirty != 0) {
        fail_msg("the run with write %llu failing freed %d ring(s), %d not wiped",
                 (unsigned long long)n, g_rings_freed, g_rings_dirty);
    }
    g_rings_freed = g_rings_dirty = 0;
}

static uint64_t sweep(fixture *f, gt_err (*op)(void *))
{
    f->entries = gt_test_count_entries(f->dir);
    g_rings_freed = g_rings_dirty = 0;
    uint64_t failed = gt_fault_sweep(GT_FAULT_WRITE, GT_E_IO, op, nothing_left_ring_wiped, f);
    assert_int_equal(g_rings_dirty, 0);  // the final, successful run too
    return failed;
}

// 3.3 MiB over two shards in 2 MiB chunks: chunk 0 spans three slots, so writes fail with
// slots still queued behind them.
static void write_failures_mid_pipeline(void **state)
{
    fixture *f = *state;
    shard_make(f, 0, 1200000);
    shard_make(f, 1, 530000);
    f->chunk = 2 * MIB;
    uint64_t failed = sweep(f, seal_op);
    print_message("seal (pipeline): %llu write-side calls, each failed once\n",
                  (unsigned long long)failed);
    assert_true(failed >= 6);  // 3 + 2 slot writes, fsyncs, the manifest, the rename
    GT_ASSERT_OK(gt_dataset_verify(f->ds, f->k.holder_pub, false, NULL));
    gt_test_rmtree(f->ds);

    failed = sweep(f, seal_ref_op);
    print_message("seal (threads 1): %llu write-side calls, each failed once\n",
                  (unsigned long long)failed);
    assert_true(failed >= 6);
    GT_ASSERT_OK(gt_dataset_verify(f->ds, f->k.holder_pub, false, NULL));

    failed = sweep(f, unseal_op);
    print_message("unseal: %llu write-side calls, each failed once\n",
                  (unsigned long long)failed);
    assert_true(failed >= 2);
    uint16_t *got = NULL;
    size_t count = 0;
    GT_ASSERT_OK(gt_shard_read_all(f->out, &got, &count));
    assert_int_equal(count, 1730000);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pipeline_matches_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(different_randomness_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(threads_out_of_range_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(token_outside_vocabulary_found_anywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(write_failures_mid_pipeline, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
