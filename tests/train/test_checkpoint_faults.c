// Checkpoint writers under injected faults (testlib/faults.h): with the N-th allocation or
// write-side call failing, N = 1.. until the save no longer reaches the fault, gt_gpt2_save,
// gt_train_state_save and the sealed checkpoint for recipients (gt_sckpt_seal, and
// gt_sckpt_open on the recipient's side) report the right code, leave the previous file at the
// path byte for byte, and leave no temporary file. This is what makes "resume after a crash"
// safe: a crash while saving looks like one of these failures.
#include "faults.h"
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/train.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 100,
                                   .padded_vocab_size = 128, .num_layers = 2, .num_heads = 2,
                                   .channels = 16};

typedef struct {
    char dir[256], path[300], keys[300], sealed[300];
    gt_device *dev;
    gt_gpt2 *old_model, *new_model;
    gt_err (*save)(gt_gpt2 *m, const char *path);
    gt_buf before;  // the file at path before the sweep
    int entries;
    gt_recipient_keys rk;
    uint8_t signer_sec[GT_ED25519_SECRET_BYTES], signer_pub[GT_ED25519_PUBLIC_BYTES];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->path, sizeof f->path, "%s/model.bin", f->dir);
    snprintf(f->keys, sizeof f->keys, "%s/keys", f->dir);
    snprintf(f->sealed, sizeof f->sealed, "%s/model.sealed", f->dir);
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&f->dev, &dc));
    GT_ASSERT_OK(gt_gpt2_create(&f->old_model, f->dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(f->old_model, 1));
    GT_ASSERT_OK(gt_gpt2_create(&f->new_model, f->dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(f->new_model, 2));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_gpt2_free(f->old_model);
    gt_gpt2_free(f->new_model);
    gt_device_close(f->dev);
    gt_buf_free(&f->before);
    gt_recipient_keys_wipe(&f->rk);
    gt_test_rmtree(f->dir);
    free(f);
    return 0;
}

static gt_err save_model(gt_gpt2 *m, const char *path)
{
    return gt_gpt2_save(m, path);
}

static gt_err save_state(gt_gpt2 *m, const char *path)
{
    gt_loader_pos pos = {.seed = 9};
    return gt_train_state_save(m, pos, path);
}

static void read_all(const char *path, gt_buf *b)
{
    gt_buf_free(b);
    GT_ASSERT_OK(gt_file_read_all(path, 1u << 30, b));
}

static gt_err save_new(void *ctx)
{
    fixture *f = ctx;
    return f->save(f->new_model, f->path);
}

// The previous checkpoint is intact and nothing else appeared.
static void previous_intact(void *ctx, uint64_t n)
{
    fixture *f = ctx;
    gt_buf after = {0};
    read_all(f->path, &after);
    if (after.len != f->before.len || memcmp(after.data, f->before.data, after.len) != 0) {
        fail_msg("the save with call %llu failing changed the previous checkpoint",
                 (unsigned long long)n);
    }
    gt_buf_free(&after);
    if (gt_test_count_entries(f->dir) != f->entries) {
        fail_msg("the save with call %llu failing left a file behind", (unsigned long long)n);
    }
}

static void save_under(fixture *f, gt_err (*save)(gt_gpt2 *, const char *), gt_fault_kind kind,
                       gt_code want, uint64_t at_least)
{
    f->save = save;
    GT_ASSERT_OK(save(f->old_model, f->path));
    read_all(f->path, &f->before);
    f->entries = gt_test_count_entries(f->dir);
    uint64_t failed = gt_fault_sweep(kind, want, save_new, previous_intact, f);
    print_message("%llu calls, each failed once\n", (unsigned long long)failed);
    assert_true(failed >= at_least);
    gt_buf after = {0};
    read_all(f->path, &after);  // the successful save replaced it
    assert_int_equal(after.len, f->before.len);
    assert_memory_not_equal(after.data, f->before.data, f->before.len);
    gt_buf_free(&after);
}

static void model_save_allocation(void **state)
{
    save_under(*state, save_model, GT_FAULT_ALLOC, GT_E_NOMEM, 1);
}

static void model_save_write(void **state)
{
    save_under(*state, save_model, GT_FAULT_WRITE, GT_E_IO, 3);  // data, flush/fsync, rename
}

static void state_save_allocation(void **state)
{
    save_under(*state, save_state, GT_FAULT_ALLOC, GT_E_NOMEM, 1);
}

static void state_save_write(void **state)
{
    save_under(*state, save_state, GT_FAULT_WRITE, GT_E_IO, 3);
}

// ---- the sealed checkpoint for recipients ------------------------------------------------------

static gt_err seal_ckpt(void *ctx)
{
    fixture *f = ctx;
    gt_sckpt_recipient r = {.name = "alice"};
    memcpy(r.pub, f->rk.pub, sizeof r.pub);
    gt_sckpt_seal_params p = {
        .model_path = f->path, .out_path = f->sealed, .step = 7, .recipients = &r,
        .recipient_count = 1, .signing_secret = f->signer_sec,
        .model = {.max_seq_len = cfg.max_seq_len, .vocab_size = cfg.vocab_size,
                  .num_layers = cfg.num_layers, .num_heads = cfg.num_heads,
                  .channels = cfg.channels, .padded_vocab_size = cfg.padded_vocab_size},
    };
    return gt_sckpt_seal(&p, NULL);
}

static gt_err open_ckpt(void *ctx)
{
    fixture *f = ctx;
    char out[400];
    snprintf(out, sizeof out, "%s/opened.bin", f->dir);
    return gt_sckpt_open(f->sealed, &f->rk, f->signer_pub, out, NULL, NULL);
}

static void nothing_left(void *ctx, uint64_t n)
{
    fixture *f = ctx;
    if (gt_test_count_entries(f->dir) != f->entries) {
        fail_msg("the run with call %llu failing left a file behind", (unsigned long long)n);
    }
}

static void sealed_checkpoint_under(fixture *f, gt_fault_kind kind, gt_code want)
{
    GT_ASSERT_OK(gt_keydir_generate(f->keys, false, NULL));
    GT_ASSERT_OK(gt_keydir_recipient_load(f->keys, &f->rk));
    GT_ASSERT_OK(gt_ed25519_keypair(f->signer_pub, f->signer_sec));
    GT_ASSERT_OK(gt_gpt2_save(f->new_model, f->path));
    f->entries = gt_test_count_entries(f->dir);
    uint64_t sealed = gt_fault_sweep(kind, want, seal_ckpt, nothing_left, f);
    f->entries = gt_test_count_entries(f->dir);
    uint64_t opened = gt_fault_sweep(kind, want, open_ckpt, nothing_left, f);
    print_message("seal: %llu calls, open: %llu calls, each failed once\n",
                  (unsigned long long)sealed, (unsigned long long)opened);
    assert_true(sealed >= 1 && opened >= 1);
    gt_buf a = {0}, b = {0};
    char out[400];
    snprintf(out, sizeof out, "%s/opened.bin", f->dir);
    read_all(f->path, &a);
    read_all(out, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    gt_buf_free(&a);
    gt_buf_free(&b);
}

static void sealed_checkpoint_allocation(void **state)
{
    sealed_checkpoint_under(*state, GT_FAULT_ALLOC, GT_E_NOMEM);
}

static void sealed_checkpoint_write(void **state)
{
    sealed_checkpoint_under(*state, GT_FAULT_WRITE, GT_E_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(model_save_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(model_save_write, setup, teardown),
        cmocka_unit_test_setup_teardown(state_save_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(state_save_write, setup, teardown),
        cmocka_unit_test_setup_teardown(sealed_checkpoint_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(sealed_checkpoint_write, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
