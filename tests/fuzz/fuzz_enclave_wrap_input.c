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
    const gt_span parts[] = {w.agreement, w.client_hello, w.server_hello};
    for (size_t i = 0; i < 3; i++) {
        // the appraisal bytes are borrowed from the input, never past its end
        if (parts[i].len > GT_ENCLAVE_WRAP_APPRAISAL_MAX ||
            (parts[i].len > 0 &&
             (parts[i].data < data || parts[i].data + parts[i].len > data + size))) {
            __builtin_trap();
        }
    }
    if (w.info_len > GT_ENCLAVE_WRAP_INFO_MAX || w.aad_len > GT_ENCLAVE_WRAP_AAD_MAX) {
        __builtin_trap();
    }
    gt_writer wr = gt_writer_init_dynamic();
    if (!gt_is_ok(gt_enclave_wrap_input_encode(&wr, &w)) || wr.len != size ||
        memcmp(wr.data, data, size) != 0) {
        __builtin_trap();
    }
    gt_writer_free(&wr);
    return 0;
}
