// Fuzz: a training state's header (CKPT.state, plaintext, from disk) is untrusted. What parses
// must have a config that passes its check and a version this code writes or reads.
#include <gputravel/train.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_train_state_summary s;
    // The file size is taken from the input too: the size check must not trust the header.
    uint64_t file_size = size >= 8 ? (uint64_t)data[size - 1] << 20 | size : size;
    gt_err e = gt_train_state_describe_header(data, size, file_size, &s);
    if (gt_is_ok(e) && (!gt_is_ok(gt_gpt2_config_check(&s.cfg)) ||
                        (s.version != 1 && s.version != GT_TRAIN_STATE_VERSION) ||
                        (s.step > 0 && !s.has_moments))) {
        __builtin_trap();
    }
    return 0;
}
