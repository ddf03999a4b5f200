// Fuzz: llm.c shard headers are untrusted input.
#include <gputravel/data.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t count = 0;
    gt_err e = gt_shard_header_parse(data, size, &count);
    if (e.code == GT_E_NONE && count > INT32_MAX) {
        __builtin_trap();  // the header's count is an int32
    }
    return 0;
}
