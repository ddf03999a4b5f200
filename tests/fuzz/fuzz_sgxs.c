// Fuzz: SGXS streams are untrusted input.
#include <gputravel/enclave.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_sgx_measurement m;
    if (!gt_is_ok(gt_sgx_measure_sgxs(data, size, &m))) {
        return 0;
    }
    // A stream without problems or unmeasured records is exactly the measured blocks, so its
    // SHA-256 is the MRENCLAVE rebuilt from its fields.
    if (m.problem_count == 0 && m.unmeasured_chunks == 0) {
        uint8_t h[GT_SHA256_BYTES];
        if (gt_is_ok(gt_hash(GT_HASH_SHA256, h, data, size)) &&
            !gt_ct_equal(h, m.mrenclave, sizeof h)) {
            __builtin_trap();
        }
    }
    return 0;
}
