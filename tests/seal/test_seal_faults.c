// Seal and unseal under injected faults (testlib/faults.h): the N-th allocation or the N-th
// write-side call fails, for N = 1, 2, ... until the operation no longer reaches the fault. Each
// failed run must report the right code and leave nothing behind (no dataset folder, no staging
// folder, no shard, no temporary file); the run that passes must produce a dataset that verifies
// and unseals to the original tokens.
#include "faults.h"
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 5000  // 10000 bytes: 3 chunks of 4096
#define CHUNK 4096

typedef struct {
    char dir[256];
    char shard[300], keys[300], ds[300], out[300];
    gt_holder_keys k;
    uint16_t tokens[TOKENS];
    int entries;  // in dir before the operation
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->shard, sizeof f->shard, "%s/in.bin", f->dir);
    snprintf(f->keys, sizeof f->keys, "%s/keys", f->dir);
    snprintf(f->ds, sizeof f->ds, "%s/ds", f->dir);
    snprintf(f->out, sizeof f->out, "%s/out.bin", f->dir);
    for (size_t i = 0; i < TOKENS; i++) {
        f->tokens[i] = (uint16_t)((i * 37 + 11) % 256);
    }
    GT_ASSERT_OK(gt_shard_write(f->shard, f->tokens, TOKENS));
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

static gt_err seal(void *ctx)
{
    fixture *f = ctx;
    const char *shards[] = {f->shard};
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = f->ds,
                        .chunk_size = CHUNK, .vocab_size = 256};
    gt_seal_result r;
    return gt_seal(&p, &f->k, &r);
}

static gt_err unseal(void *ctx)
{
    fixture *f = ctx;
    return gt_unseal(f->ds, &f->k, f->out, false, NULL);
}

// No dataset, staging folder, plaintext or temporary file survives a failed run.
static void nothing_left(void *ctx, uint64_t n)
{
    fixture *f = ctx;
    if (gt_test_count_entries(f->dir) != f->entries) {
        fail_msg("the run with call %llu failing left something behind", (unsigned long long)n);
    }
}

static uint64_t sweep(fixture *f, gt_err (*op)(void *), gt_fault_kind kind, gt_code want)
{
    f->entries = gt_test_count_entries(f->dir);
    return gt_fault_sweep(kind, want, op, nothing_left, f);
}

static void check_unsealed(fixture *f)
{
    uint16_t *got = NULL;
    size_t count = 0;
    GT_ASSERT_OK(gt_shard_read_all(f->out, &got, &count));
    assert_int_equal(count, TOKENS);
    assert_memory_equal(got, f->tokens, sizeof f->tokens);
    free(got);
}

static void seal_survives_allocation_failures(void **state)
{
    fixture *f = *state;
    uint64_t failed = sweep(f, seal, GT_FAULT_ALLOC, GT_E_NOMEM);
    print_message("seal: %llu allocations, each failed once\n", (unsigned long long)failed);
    assert_true(failed >= 2);  // at least the manifest and the streaming buffer
    GT_ASSERT_OK(gt_dataset_verify(f->ds, f->k.holder_pub, false, NULL));
}

static void seal_survives_write_failures(void **state)
{
    fixture *f = *state;
    uint64_t failed = sweep(f, seal, GT_FAULT_WRITE, GT_E_IO);
    print_message("seal: %llu write-side calls, each failed once\n", (unsigned long long)failed);
    assert_true(failed >= 4);  // 3 chunk files, the manifest, the final rename
    GT_ASSERT_OK(gt_dataset_verify(f->ds, f->k.holder_pub, false, NULL));
}

static void unseal_survives_allocation_failures(void **state)
{
    fixture *f = *state;
    GT_ASSERT_OK(seal(f));
    uint64_t failed = sweep(f, unseal, GT_FAULT_ALLOC, GT_E_NOMEM);
    print_message("unseal: %llu allocations, each failed once\n", (unsigned long long)failed);
    assert_true(failed >= 1);
    check_unsealed(f);
}

static void unseal_survives_write_failures(void **state)
{
    fixture *f = *state;
    GT_ASSERT_OK(seal(f));
    uint64_t failed = sweep(f, unseal, GT_FAULT_WRITE, GT_E_IO);
    print_message("unseal: %llu write-side calls, each failed once\n", (unsigned long long)failed);
    assert_true(failed >= 2);  // the shard's writes and its rename
    check_unsealed(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(seal_survives_allocation_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(seal_survives_write_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(unseal_survives_allocation_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(unseal_survives_write_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
