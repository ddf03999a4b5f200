// The one fixture for `gputravel holder` as a process (testlib.h), on util's gt_proc.
#include "testlib.h"

#include <stdio.h>
#include <sys/wait.h>

#define HOLDER_MAX_ARGS 48

void gt_test_holder_start(gt_proc *p, const char *log_path, const char *const *args)
{
    char *argv[HOLDER_MAX_ARGS];
    int n = 0;
    argv[n++] = GT_CLI_PATH;
    argv[n++] = "holder";
    for (int i = 0; args[i] != NULL; i++) {
        assert_true(n < HOLDER_MAX_ARGS - 1);
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    gt_proc_spec spec = {.argv = argv, .log_path = log_path};
    GT_ASSERT_OK(gt_proc_spawn(p, &spec));
    // It prints "holder NAME: serving ..." once it listens, with its SIGTERM handler in place.
    gt_proc_ready r = {.kind = GT_PROC_READY_LOG_LINE, .path = log_path, .text = ": serving",
                       .timeout_ms = 20000, .what = "gputravel holder"};
    gt_err e = gt_proc_wait_ready(p, &r);
    if (!gt_is_ok(e)) {
        gt_proc_stop(p, 1);
        gt_buf log = {0};
        if (gt_is_ok(gt_file_read_all(log_path, 1 << 16, &log)) &&
            gt_is_ok(gt_buf_append(&log, "", 1))) {
            fprintf(stderr, "%s:\n%s\n", log_path, (const char *)log.data);
        }
        gt_buf_free_nowipe(&log);
        fail_msg("%s", e.msg);
    }
}

void gt_test_holder_stop(gt_proc *p, const char *what)
{
    if (p->pid <= 0 && !p->exited) {
        return;
    }
    int status = gt_proc_stop(p, 10000);
    *p = (gt_proc){0};
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {  // (ASan: no leak either)
        fail_msg("%s did not exit cleanly on SIGTERM: %s %d", what,
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
}
