// gputravel bench transfer with tiny chunks: every path runs, the JSON has every field, and the
// command refuses bad arguments.
#include "testlib.h"

#include <stdio.h>
#include <string.h>

static void transfer_bench_reports_every_path(void **state)
{
    (void)state;
    char dir[256], out[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "bench"));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"bench", "transfer", "--sizes", "64K,1M",
                                                    "--runs", "2", "--json", "--out", out, NULL});
    if (rc != 0) {
        fail_msg("bench failed (%d):\n%s", rc, (char *)log.data);
    }
    const char *text = (const char *)log.data;
    const char *paths[] = {"\"conventional\"", "\"conventional-keyrelease\"", "\"travel\"",
                           "\"decrypt-pass\""};
    for (int i = 0; i < 4; i++) {
        assert_non_null(strstr(text, paths[i]));
    }
    assert_non_null(strstr(text, "\"median_s\""));
    assert_non_null(strstr(text, "\"speedup_travel_vs_conventional\""));
    assert_non_null(strstr(text, "\"size\":1048576"));
    gt_buf_free(&log);
    rc = gt_test_run_cli(NULL, (const char *[]){"bench", "transfer", "--sizes", "3", NULL});
    assert_int_equal(rc, 64);
    rc = gt_test_run_cli(NULL, (const char *[]){"bench", "transfer", "--link", "fast", NULL});
    assert_int_equal(rc, 64);
    rc = gt_test_run_cli(NULL, (const char *[]){"bench", "nothing", NULL});
    assert_int_equal(rc, 64);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transfer_bench_reports_every_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
