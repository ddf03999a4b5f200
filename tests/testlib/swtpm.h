// A software TPM 2.0 for tests: Debian's swtpm, started by the test on a state folder of its own
// and two free TCP ports (command port P, control port P+1), stopped at teardown. The holder's
// rollback guard reaches it with the spec in .spec ("tpm:swtpm:host=127.0.0.1,port=P").
#ifndef GT_TESTLIB_SWTPM_H
#define GT_TESTLIB_SWTPM_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char exe[512];        // swtpm's absolute path
    char state_dir[512];  // its NV state (tpm2-00.permall): copy it to snapshot the TPM
    char log[600];
    int port;
    char spec[128];
    gt_proc proc;
} gt_test_swtpm;

// Whether swtpm is on PATH (its path into t->exe); when not, why says so, for a skip message.
bool gt_test_swtpm_find(gt_test_swtpm *t, char *why, size_t cap);
// Starts swtpm on state_dir (created if missing) and returns once its ports accept connections;
// fails the test if it cannot. t->exe must be set (gt_test_swtpm_find). A restart on the same
// state folder is the same TPM (new ports each time: update any spec kept elsewhere).
void gt_test_swtpm_start(gt_test_swtpm *t, const char *state_dir);
// SIGTERM (swtpm keeps its NV state on disk), reaped; safe when not running.
void gt_test_swtpm_stop(gt_test_swtpm *t);

#endif
