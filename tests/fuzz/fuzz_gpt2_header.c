// Fuzz: llm.c GPT-2 checkpoint headers are untrusted input. An accepted header must describe a
// config whose parameter count is computed without overflow and is what the file must hold.
#include <gputravel/train.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_gpt2_config cfg = {0};
    int version = 0;
    gt_err e = gt_gpt2_ckpt_header_parse(data, size, &cfg, &version);
    if (e.code == GT_E_NONE) {
        size_t sizes[GT_GPT2_NUM_TENSORS];
        size_t n = gt_gpt2_param_sizes(&cfg, sizes);
        if (size < GT_GPT2_CKPT_HEADER_BYTES || n == 0 || n > ((size_t)1 << 50) ||
            !gt_is_ok(gt_gpt2_config_check(&cfg)) ||
            (version != GT_GPT2_CKPT_VERSION && version != GT_GPT2_CKPT_VERSION_BF16)) {
            __builtin_trap();
        }
    }
    return 0;
}
