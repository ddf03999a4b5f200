// docs/quickstart.md, executed: every ```sh block, in order, in one shell (/bin/sh -e) in a fresh
// folder, with `gputravel` on PATH and two free ports for the holders. The guide cannot rot:
// a command it shows that stops working fails CI here.
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// The ```sh blocks of the Markdown text, joined (other blocks, e.g. ```console, are not run).
static void sh_blocks(const char *md, gt_buf *script, int *blocks)
{
    *blocks = 0;
    const char *p = md;
    while ((p = strstr(p, "```sh\n")) != NULL) {
        p += strlen("```sh\n");
        const char *end = strstr(p, "\n```");
        assert_non_null(end);
        GT_ASSERT_OK(gt_buf_append(script, p, (size_t)(end - p) + 1));
        (*blocks)++;
        p = end + 4;
    }
}

static void quickstart_runs_as_written(void **state)
{
    (void)state;
    char dir[256], bin[512], link[600], script_path[600], log[600];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(bin, sizeof bin, dir, "bin"));
    GT_ASSERT_OK(gt_mkdir_p(bin, 0700));
    snprintf(link, sizeof link, "%s/gputravel", bin);
    assert_int_equal(symlink(GT_CLI_PATH, link), 0);
    gt_buf md = {0};
    GT_ASSERT_OK(gt_file_read_all(GT_SOURCE_DIR "/docs/quickstart.md", 1 << 20, &md));
    GT_ASSERT_OK(gt_buf_append(&md, "", 1));
    gt_buf script = {0};
    char head[1024];
    // Run in the test's folder; whatever the guide started in the background is stopped when the
    // shell leaves, also when a command failed.
    snprintf(head, sizeof head,
             "set -e\ncd '%s'\n"
             "trap 'for p in *.pid; do [ -f \"$p\" ] && kill $(cat \"$p\") 2>/dev/null || true; "
             "done' EXIT\n", dir);
    GT_ASSERT_OK(gt_buf_append(&script, head, strlen(head)));
    int blocks = 0;
    sh_blocks((const char *)md.data, &script, &blocks);
    assert_true(blocks >= 6);
    snprintf(script_path, sizeof script_path, "%s/quickstart.sh", dir);
    GT_ASSERT_OK(gt_file_write_atomic(script_path, script.data, script.len, 0600));
    snprintf(log, sizeof log, "%s/quickstart.log", dir);
    char path_env[4200], alice[64], bob[64];
    snprintf(path_env, sizeof path_env, "PATH=%s:%s", bin, getenv("PATH") ? getenv("PATH") : "");
    snprintf(alice, sizeof alice, "ALICE_PORT=%d", gt_test_free_port());
    snprintf(bob, sizeof bob, "BOB_PORT=%d", gt_test_free_port());
    const char *env[] = {path_env, alice, bob, NULL};
    gt_proc p;
    gt_proc_spec spec = {.argv = (char *[]){"/bin/sh", script_path, NULL}, .log_path = log,
                         .env = env};
    GT_ASSERT_OK(gt_proc_spawn(&p, &spec));
    double t0 = gt_now_seconds();
    int status = gt_test_proc_wait(&p, 300000);
    gt_buf out = {0};
    GT_ASSERT_OK(gt_file_read_all(log, 1 << 24, &out));
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail_msg("docs/quickstart.md failed (status %d) after %.1f s:\n%s", status,
                 gt_now_seconds() - t0, (char *)out.data);
    }
    print_message("docs/quickstart.md: %d blocks ran in %.1f s\n", blocks,
                  gt_now_seconds() - t0);
    const char *said = (const char *)out.data;
    assert_non_null(strstr(said, "OK: a run could start under this agreement"));
    assert_non_null(strstr(said, "trained 20 step(s)"));
    // 20 steps fit in alice's first chunk: bob's data never went in, and the table says so.
    assert_non_null(strstr(said, "warning: holder bob contributed nothing to this run (no "
                                 "chunk of it was trained on: the steps ran out before its "
                                 "turn)"));
    assert_non_null(strstr(said, "\nstopped: trained the agreement's 20 steps\n"));
    assert_non_null(strstr(said, "wrote model.bin"));
    assert_non_null(strstr(said, "ledger verified"));
    // bob served from his --config file, and alice's ledger came out as JSON
    char bob_log[700];
    snprintf(bob_log, sizeof bob_log, "%s/bob.log", dir);
    gt_buf bob_said = {0};
    GT_ASSERT_OK(gt_file_read_all(bob_log, 1 << 20, &bob_said));
    GT_ASSERT_OK(gt_buf_append(&bob_said, "", 1));
    assert_non_null(strstr((char *)bob_said.data, "holder bob: serving dataset bob-ds"));
    gt_buf_free(&bob_said);
    char ledger_json[700];
    snprintf(ledger_json, sizeof ledger_json, "%s/alice-ledger.json", dir);
    cJSON *j = NULL;
    GT_ASSERT_OK(gt_json_load_file(ledger_json, 1 << 20, &j));
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(j, "log")) >= 3);
    cJSON_Delete(j);
    gt_buf_free(&out);
    gt_buf_free(&script);
    gt_buf_free(&md);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quickstart_runs_as_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
