// The one devd fixture of the tests: `gputravel devd` started and stopped through util's proc.
#include "testlib.h"

#include <gputravel/attest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVD_MAX_ARGS 64

static pid_t devd_spawn(char *sock, size_t cap, const char *dir, const char *const *extra,
                        const char *log_path)
{
    snprintf(sock, cap, "%s/devd.sock", dir);
    if (getenv("GT_SIM_ROOT") == NULL) {  // the sim root (vendor + platform) of this test
        char root[4096];
        snprintf(root, sizeof root, "%s/sim-root", dir);
        setenv("GT_SIM_ROOT", root, 1);
    }
    GT_ASSERT_OK(gt_sim_root_set(getenv("GT_SIM_ROOT")));  // devd's is this process's too
    char *argv[DEVD_MAX_ARGS];
    int n = 0;
    argv[n++] = GT_CLI_PATH;
    argv[n++] = log_path != NULL || getenv("GT_TEST_DEVD_VERBOSE") ? "--verbose" : "--quiet";
    argv[n++] = "devd";
    argv[n++] = "--socket";
    argv[n++] = sock;
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        assert_true(n < DEVD_MAX_ARGS - 1);
        argv[n++] = (char *)extra[i];
    }
    argv[n] = NULL;
    gt_proc p;
    gt_proc_spec spec = {.argv = argv, .log_path = log_path, .log_append = true};
    GT_ASSERT_OK(gt_proc_spawn(&p, &spec));
    // devd renames its socket into place only once it listens.
    gt_proc_ready r = {.kind = GT_PROC_READY_SOCKET, .path = sock, .timeout_ms = 20000,
                       .what = "devd"};
    gt_err e = gt_proc_wait_ready(&p, &r);
    if (!gt_is_ok(e)) {
        gt_proc_stop(&p, 1);
        fail_msg("devd on %s: %s", sock, e.msg);
    }
    return p.pid;
}

pid_t gt_test_devd_start(char *sock, size_t cap, const char *dir, const char *const *extra)
{
    return devd_spawn(sock, cap, dir, extra, NULL);
}

pid_t gt_test_devd_start_logged(char *sock, size_t cap, const char *dir, const char *log_path)
{
    return devd_spawn(sock, cap, dir, NULL, log_path);
}

void gt_test_devd_stop(pid_t pid)
{
    gt_proc p = {.pid = pid};
    gt_proc_stop(&p, 5000);
}

int gt_test_devd_setup(void **state, const char *const *extra)
{
    gt_test_devd *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    f->pid = gt_test_devd_start(f->sock, sizeof f->sock, f->dir, extra);
    *state = f;
    return 0;
}

int gt_test_devd_teardown(void **state)
{
    gt_test_devd *f = *state;
    gt_test_devd_stop(f->pid);
    gt_test_rmtree(f->dir);
    free(f);
    *state = NULL;
    return 0;
}
