// Fuzz: SGX SDK signed enclaves (ELF + .note.sgxmeta metadata) are untrusted input.
#include <gputravel/enclave.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_sgx_meta meta;
    if (!gt_is_ok(gt_sgx_meta_parse(data, size, &meta))) {
        return 0;
    }
    if (meta.sigstruct_offset > size || size - meta.sigstruct_offset < GT_SGX_SIGSTRUCT_BYTES) {
        __builtin_trap();  // a parsed metadata_t holds its whole SIGSTRUCT
    }
    gt_sgx_measurement m;
    gt_sgx_meta again;
    if (gt_is_ok(gt_sgx_measure_signed_so(data, size, &m, &again)) &&
        again.metadata_offset != meta.metadata_offset) {
        __builtin_trap();
    }
    return 0;
}
