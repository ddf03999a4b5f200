// Starting and stopping gputravel devd for device tests.
#include "testlib.h"

#include <gputravel/attest.h>

#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

pid_t gt_test_devd_start(char *sock, size_t cap, const char *dir, const char *const *extra)
{
    snprintf(sock, cap, "%s/devd.sock", dir);
    if (getenv("GT_SIM_ROOT") == NULL) {  // the sim root (vendor + platform) of this test
        char root[4096];
        snprintf(root, sizeof root, "%s/sim-root", dir);
        setenv("GT_SIM_ROOT", root, 1);
    }
    GT_ASSERT_OK(gt_sim_root_set(getenv("GT_SIM_ROOT")));  // devd's is this process's too
    pid_t pid = fork();
    if (pid < 0) {
        fail_msg("fork failed");
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);  // a test that dies takes its devd with it
        const char *argv[64];
        int n = 0;
        argv[n++] = GT_CLI_PATH;
        argv[n++] = getenv("GT_TEST_DEVD_VERBOSE") ? "--verbose" : "--quiet";
        argv[n++] = "devd";
        argv[n++] = "--socket";
        argv[n++] = sock;
        for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++) {
            argv[n++] = extra[i];
        }
        argv[n] = NULL;
        execv(GT_CLI_PATH, (char *const *)argv);
        _exit(127);
    }
    // devd renames its socket into place only once it listens.
    for (int i = 0; i < 2000; i++) {
        struct stat st;
        if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
            return pid;
        }
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fail_msg("devd exited early (status %d)", status);
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("devd did not start listening on %s", sock);
    return -1;
}

void gt_test_devd_stop(pid_t pid)
{
    if (pid <= 0) {
        return;
    }
    kill(pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            return;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}
