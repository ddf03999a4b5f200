// Per-backend cmocka groups (backend_fixture.h).
#include "backend_fixture.h"

#include <stdlib.h>

#ifdef GT_HAVE_CUDA
#include <gputravel/device_cuda.h>
#endif

const char *const *gt_test_backend_devd_args;

static gt_test_backend *backend_new(gt_device_kind kind)
{
    gt_test_backend *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b->kind = kind;
    b->devd = -1;
    return b;
}

int gt_test_backend_setup_cpu(void **state)
{
    *state = backend_new(GT_DEVICE_CPU);
    return 0;
}

int gt_test_backend_setup_sim(void **state)
{
    static const char *const none[] = {NULL};
    gt_test_backend *b = backend_new(GT_DEVICE_SIM);
    gt_test_tmpdir(b->dir, sizeof b->dir);
    b->devd = gt_test_devd_start(b->sock, sizeof b->sock, b->dir,
                                 gt_test_backend_devd_args ? gt_test_backend_devd_args : none);
    *state = b;
    return 0;
}

#ifdef GT_HAVE_CUDA
int gt_test_backend_setup_cuda(void **state)
{
    gt_test_backend *b = backend_new(GT_DEVICE_CUDA);
    b->skip = !gt_cuda_probe(b->why, sizeof b->why);
    *state = b;
    return 0;
}
#endif

int gt_test_backend_teardown(void **state)
{
    gt_test_backend *b = *state;
    if (b->devd > 0) {
        gt_test_devd_stop(b->devd);
        gt_test_rmtree(b->dir);
    }
    free(b);
    return 0;
}

void gt_test_backend_skip_absent(void **state)
{
    gt_test_backend *b = *state;
    if (b->skip) {
        print_message("SKIPPED: %s\n", b->why);
        skip();
    }
}

int gt_test_backend_case_teardown(void **state)
{
    gt_test_backend *b = *state;
    gt_device_close(b->dev);
    b->dev = NULL;
    return 0;
}
