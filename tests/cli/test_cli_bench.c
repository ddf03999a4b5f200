// gputravel bench transfer with tiny chunks: every path runs, the JSON has every field, and the
// command refuses bad arguments. gputravel bench holder, briefly: both scenarios of one level
// run, the holder ends with the threads and descriptors it began with, its ledger verifies.
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
        gt_test_fail_log(&log, NULL, "bench failed (%d)", rc);
    }
    const char *text = (const char *)log.data;
    const char *paths[] = {"\"conventional\"", "\"conventional-keyrelease\"", "\"travel\"",
                           "\"decrypt-pass\"", "\"tls-push\""};
    for (int i = 0; i < 5; i++) {
        assert_non_null(strstr(text, paths[i]));
    }
    assert_non_null(strstr(text, "\"median_s\""));
    assert_non_null(strstr(text, "\"speedup_travel_vs_conventional\""));
    assert_non_null(strstr(text, "\"speedup_travel_vs_tls_push\""));
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

static void holder_bench_runs_clean(void **state)
{
    (void)state;
    char dir[256], out[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "bench"));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"bench", "holder", "--trainers", "3",
                                                    "--seconds", "0.5", "--slowloris", "6",
                                                    "--chunk", "4K", "--json", "--out", out,
                                                    NULL});
    if (rc != 0) {
        gt_test_fail_log(&log, NULL, "bench failed (%d)", rc);
    }
    const char *text = (const char *)log.data;
    assert_non_null(strstr(text, "{\"trainers\":3,\"abuse\":false,"));
    assert_non_null(strstr(text, "{\"trainers\":3,\"abuse\":true,"));
    assert_non_null(strstr(text, "\"grant_p99_ms\""));
    assert_non_null(strstr(text, "ledger:"));
    assert_non_null(strstr(text, "verifies"));
    int t0 = 0, t1 = 0, f0 = 0, f1 = 0;
    const char *counts = strstr(text, "threads ");
    assert_non_null(counts);
    assert_int_equal(sscanf(counts, "threads %d -> %d, descriptors %d -> %d", &t0, &t1, &f0, &f1),
                     4);
    assert_int_equal(t1, t0);
    assert_int_equal(f1, f0);
    gt_buf_free(&log);
    rc = gt_test_run_cli(NULL, (const char *[]){"bench", "holder", "--trainers", "0", NULL});
    assert_int_equal(rc, 64);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transfer_bench_reports_every_path),
        cmocka_unit_test(holder_bench_runs_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
