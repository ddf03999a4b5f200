// Strict number flags (cli_args.c): a value that is not wholly a number in range is a usage
// error (exit 64) naming the flag, before any work starts; the values that were accepted before
// still are.
#include "testlib.h"

#include <string.h>

static void expect_usage(const char *const *args, const char *says)
{
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, args);
    if (rc != 64 || strstr((const char *)out.data, says) == NULL) {
        fail_msg("gputravel %s %s: rc %d, wanted 64 and '%s' in:\n%s", args[0], args[1], rc,
                 says, (const char *)out.data);
    }
    gt_buf_free(&out);
}

static void bad_numbers_are_usage_errors(void **state)
{
    (void)state;
    // Was atoi: "3x" ran with 3 threads, "x" with 0 (all cores).
    expect_usage((const char *[]){"train", "--agreement", "a.json", "--state", "s", "--threads",
                                  "3x", NULL},
                 "--threads '3x': not a whole number");
    expect_usage((const char *[]){"train", "--agreement", "a.json", "--state", "s", "--threads",
                                  "-1", NULL},
                 "--threads -1: must be 0..4096");
    // Was atoi: "2x" ran twice.
    expect_usage((const char *[]){"bench", "transfer", "--runs", "2x", NULL},
                 "--runs must be 1..50");
    // Was strtoul without an end check: "5x" trained 5 steps.
    expect_usage((const char *[]){"demo", "--steps", "5x", NULL}, "--steps 1..100000");
    expect_usage((const char *[]){"demo", "--steps", "0", NULL}, "--steps 1..100000");
    // Was strtoull: "-1" wrapped to 2^64-1.
    expect_usage((const char *[]){"train", "--init-random", "--data", "x", "--seed", "-1", NULL},
                 "bad value '-1' for --seed");
    expect_usage((const char *[]){"sample", "--seed", "1x", "m.bin", NULL}, "bad value '1x'");
    expect_usage((const char *[]){"attest", "--type", "sim", "--report-data", "00", "--out", "e",
                                  "--svn", "+5", NULL},
                 "--svn must be an integer");
    expect_usage((const char *[]){"devd", "--socket", "s", "--threads", "2x", NULL},
                 "bad number '2x'");
    expect_usage((const char *[]){"seal", "in.bin", "--key", "k", "--out", "o", "--vocab", " 5",
                                  NULL},
                 "--vocab  5: a number from 1 to 65536");
    expect_usage((const char *[]){"seal", "in.bin", "--key", "k", "--out", "o", "--threads", "2",
                                  NULL},
                 "--threads 2: 0 (the pipeline) or 1");
}

static void good_numbers_still_parse(void **state)
{
    (void)state;
    // Past parsing, these fail for want of files (exit 1), not as usage errors (64).
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"train", "--agreement", "/nonexistent.json",
                                                    "--state", "/nonexistent/s", "--threads",
                                                    "2", NULL});
    assert_int_equal(rc, 1);
    gt_buf_free(&out);
    rc = gt_test_run_cli(&out, (const char *[]){"seal", "/nonexistent.bin", "--key",
                                                "/nonexistent", "--out", "/nonexistent/o",
                                                "--vocab", "65536", NULL});
    assert_int_equal(rc, 1);
    gt_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_numbers_are_usage_errors),
        cmocka_unit_test(good_numbers_still_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
