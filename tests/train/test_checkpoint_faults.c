// Checkpoint writers under injected faults (testlib/faults.h): with the N-th allocation or
// write-side call failing, N = 1.. until the save no longer reaches the fault, gt_gpt2_save and
// gt_train_state_save report the right code, leave the previous checkpoint at the path byte for
// byte, and leave no temporary file (writes: the data, flush, fsync and the rename at least). This is what makes "resume after a crash" safe: a crash
// while saving looks like one of these failures.
#include "faults.h"
#include "testlib.h"

#include <gputravel/train.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 100,
                                   .padded_vocab_size = 128, .num_layers = 2, .num_heads = 2,
                                   .channels = 16};

typedef struct {
    char dir[256], path[300];
    gt_device *dev;
    gt_gpt2 *old_model, *new_model;
} fixture;

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->path, sizeof f->path, "%s/model.bin", f->dir);
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
    gt_test_rmtree(f->dir);
    free(f);
    return 0;
}

typedef gt_err (*save_fn)(gt_gpt2 *m, const char *path);

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

static void save_under(fixture *f, save_fn save, gt_fault_kind kind, gt_code want,
                       uint64_t at_least)
{
    GT_ASSERT_OK(save(f->old_model, f->path));
    gt_buf before = {0}, after = {0};
    read_all(f->path, &before);
    int entries = count_entries(f->dir);
    uint64_t n = 1;
    for (;; n++) {
        gt_fault_arm(kind, n);
        gt_err e = save(f->new_model, f->path);
        if (!gt_fault_disarm()) {
            GT_ASSERT_OK(e);
            break;
        }
        if (e.code != want) {
            fail_msg("save with call %llu failing: expected %s, got %s (%s)",
                     (unsigned long long)n, gt_code_name(want), gt_code_name(e.code), e.msg);
        }
        read_all(f->path, &after);
        if (after.len != before.len || memcmp(after.data, before.data, before.len) != 0) {
            fail_msg("save with call %llu failing changed the previous checkpoint",
                     (unsigned long long)n);
        }
        if (count_entries(f->dir) != entries) {
            fail_msg("save with call %llu failing left a file behind", (unsigned long long)n);
        }
    }
    print_message("%llu calls, each failed once\n", (unsigned long long)(n - 1));
    assert_true(n - 1 >= at_least);
    read_all(f->path, &after);  // the successful save replaced it
    assert_int_equal(after.len, before.len);
    assert_memory_not_equal(after.data, before.data, before.len);
    gt_buf_free(&before);
    gt_buf_free(&after);
}

static void model_save_allocation(void **state)
{
    save_under(*state, save_model, GT_FAULT_ALLOC, GT_E_NOMEM, 1);
}

static void model_save_write(void **state)
{
    save_under(*state, save_model, GT_FAULT_WRITE, GT_E_IO, 3);
}

static void state_save_allocation(void **state)
{
    save_under(*state, save_state, GT_FAULT_ALLOC, GT_E_NOMEM, 1);
}

static void state_save_write(void **state)
{
    save_under(*state, save_state, GT_FAULT_WRITE, GT_E_IO, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(model_save_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(model_save_write, setup, teardown),
        cmocka_unit_test_setup_teardown(state_save_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(state_save_write, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
