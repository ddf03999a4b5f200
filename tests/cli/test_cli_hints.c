// A file given where another kind is wanted: the command fails as before and then says what the
// file is and what to run (cli/file_hint.c).
#include "testlib.h"

#include <gputravel/seal.h>

#include <string.h>

static void wrong_files_are_named(void **state)
{
    (void)state;
    char dir[256], text[512], keys[512], out[512], sealed[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(text, sizeof text, dir, "notes.txt"));
    GT_ASSERT_OK(gt_path_join(keys, sizeof keys, dir, "keys"));
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "ds"));
    GT_ASSERT_OK(gt_path_join(sealed, sizeof sealed, dir, "model.sealed"));
    static const char prose[] = "Licence text, the kind of file a new user seals by mistake.\n"
                                "It has many lines, more than a shard header's 1024 bytes?\n";
    gt_buf body = {0};
    for (int i = 0; i < 20; i++) {
        GT_ASSERT_OK(gt_buf_append(&body, prose, sizeof prose - 1));
    }
    GT_ASSERT_OK(gt_file_write_atomic(text, body.data, body.len, 0600));
    gt_buf_free(&body);
    uint8_t sc[2048] = {0};
    memcpy(sc, GT_SCKPT_MAGIC, 8);
    GT_ASSERT_OK(gt_file_write_atomic(sealed, sc, sizeof sc, 0600));
    assert_int_equal(gt_test_run_cli(NULL, (const char *[]){"keygen", "--out", keys, NULL}), 0);

    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"seal", text, "--key", keys, "--out", out,
                                                    NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "notes.txt is text; this command wants a token "
                                             "shard (make one with gputravel tokenize"));
    gt_buf_free(&log);
    rc = gt_test_run_cli(&log, (const char *[]){"sample", sealed, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "model.sealed is a sealed checkpoint (open it with "
                                             "gputravel open-checkpoint"));
    gt_buf_free(&log);
    rc = gt_test_run_cli(&log, (const char *[]){"sample", text, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "notes.txt is text; this command wants an llm.c "
                                             "model checkpoint"));
    gt_buf_free(&log);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wrong_files_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
