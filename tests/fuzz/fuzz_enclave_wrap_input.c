// Fuzz: the input of gputravel's wrap leaf, read by the enclave process from enclave memory
// (gt_enclave_wrap_input_parse). Whatever parses must encode back to the same bytes (no field
// dropped or invented, lengths within their bounds).
#include <gputravel/enclave.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_enclave_wrap_input w;
    if (!gt_is_ok(gt_enclave_wrap_input_parse(data, size, &w))) {
        return 0;
    }
    if (w.info_len > GT_ENCLAVE_WRAP_INFO_MAX || w.aad_len > GT_ENCLAVE_WRAP_AAD_MAX) {
        __builtin_trap();
    }
    uint8_t out[32 + 16 + 2 + GT_ENCLAVE_WRAP_INFO_MAX + 32 + 2 + GT_ENCLAVE_WRAP_AAD_MAX];
    gt_writer wr = gt_writer_init_fixed(out, sizeof out);
    if (!gt_is_ok(gt_enclave_wrap_input_encode(&wr, &w)) || wr.len != size ||
        memcmp(out, data, size) != 0) {
        __builtin_trap();
    }
    return 0;
}
