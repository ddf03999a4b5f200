// One set of cases run against every built backend, as cmocka groups: cpu; sim, against a devd
// the group starts in a folder of its own; cuda where the build has it and a GPU is present (else
// each case is skipped, saying why). The group's state is a gt_test_backend.
#ifndef GT_BACKEND_FIXTURE_H
#define GT_BACKEND_FIXTURE_H

#include "testlib.h"

#include <gputravel/device.h>

typedef struct {
    gt_device_kind kind;
    bool skip;
    char why[256];
    char dir[512];
    char sock[600];
    pid_t devd;
    gt_device *dev;  // the open device of the running case (closed by the case teardown)
} gt_test_backend;

// The devd arguments the sim group's setup starts devd with (borrowed; NULL-terminated). Set it
// before running the group.
extern const char *const *gt_test_backend_devd_args;

int gt_test_backend_setup_cpu(void **state);
int gt_test_backend_setup_sim(void **state);
#ifdef GT_HAVE_CUDA
int gt_test_backend_setup_cuda(void **state);
#endif
int gt_test_backend_teardown(void **state);
// Skips the running case when its backend is not there (cuda without a GPU).
void gt_test_backend_skip_absent(void **state);
// A case that fails midway leaves its device open; closing it here keeps devd free for the next
// case (devd serves one session at a time), so one failure does not fail the rest.
int gt_test_backend_case_teardown(void **state);

#endif
