// train/: the GPT-2 oracle test (test_gpt2_oracle.c: logits, loss, every gradient, 10 AdamW
// steps against PyTorch) on the cuda backend, with the same tolerances: both backends compute in
// plain fp32 (docs/cuda.md). Without a usable GPU every case is reported as skipped and the
// program exits 77, which CTest counts as skipped, never as passed.
#define GT_ORACLE_DEVICE GT_DEVICE_CUDA
#define GT_ORACLE_OWN_MAIN 1
#include "test_gpt2_oracle.c"

#include <stdio.h>

#include <gputravel/device_cuda.h>

static bool have_gpu;
static char gpu_why[256];

#define ON_GPU(name)                                              \
    static void cuda_##name(void **state)                         \
    {                                                             \
        if (!have_gpu) {                                          \
            print_message("SKIPPED: %s\n", gpu_why);              \
            skip();                                               \
        }                                                         \
        name(state);                                              \
    }
ON_GPU(logits_and_loss)
ON_GPU(gradients)
ON_GPU(adamw_steps)

int main(void)
{
    have_gpu = gt_cuda_probe(gpu_why, sizeof gpu_why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cuda_logits_and_loss),
        cmocka_unit_test(cuda_gradients),
        cmocka_unit_test(cuda_adamw_steps),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!have_gpu) {
        printf("SKIPPED (no GPU): %s\n", gpu_why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
