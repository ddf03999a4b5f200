// gputravel tokenize through the binary: output content, and no output on failure.
#include "testlib.h"

#include <gputravel/data.h>

#include <stdlib.h>
#include <string.h>

static void tokenizes_files_in_order(void **state)
{
    (void)state;
    char dir[256], a[512], b[512], out[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(a, sizeof a, dir, "a.txt"));
    GT_ASSERT_OK(gt_path_join(b, sizeof b, dir, "b.txt"));
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "out.bin"));
    GT_ASSERT_OK(gt_file_write_atomic(a, "Hi ", 3, 0644));
    GT_ASSERT_OK(gt_file_write_atomic(b, "\xffthere", 6, 0644));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"tokenize", a, b, "--out", out, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "9 tokens"));
    gt_buf_free(&log);
    uint16_t *tokens = NULL;
    size_t n = 0;
    GT_ASSERT_OK(gt_shard_read_all(out, &tokens, &n));
    assert_int_equal(n, 9);
    const uint16_t want[] = {'H', 'i', ' ', 0xff, 't', 'h', 'e', 'r', 'e'};
    assert_memory_equal(tokens, want, sizeof want);
    free(tokens);
    gt_test_rmtree(dir);
}

static void failures_leave_no_output(void **state)
{
    (void)state;
    char dir[256], out[512], missing[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "out.bin"));
    GT_ASSERT_OK(gt_path_join(missing, sizeof missing, dir, "missing.txt"));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"tokenize", missing, "--out", out, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "missing.txt"));
    gt_buf_free(&log);
    assert_int_equal(gt_test_count_files(dir), 0);
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", missing, NULL});
    assert_int_equal(rc, 64);
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", "--help", NULL});
    assert_int_equal(rc, 0);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokenizes_files_in_order),
        cmocka_unit_test(failures_leave_no_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
