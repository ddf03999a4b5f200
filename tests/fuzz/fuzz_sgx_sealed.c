// Fuzz: sealed blobs (gt_sgx_sealed_parse) are read back from disk: untrusted bytes. A blob that
// parses accounts for every byte: header, AAD and ciphertext (with its tag) and nothing else.
#include <gputravel/enclave.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_sgx_sealed s;
    if (!gt_is_ok(gt_sgx_sealed_parse(&s, data, size))) {
        return 0;
    }
    if (s.header.data != data || s.header.len != GT_SGX_SEALED_HEADER_BYTES ||
        s.aad.data != data + s.header.len || s.ciphertext.data != s.aad.data + s.aad.len ||
        s.header.len + s.aad.len + s.ciphertext.len != size ||
        s.ciphertext.len < GT_AEAD_TAG_BYTES || s.req.keyname != GT_SGX_KEYNAME_SEAL) {
        __builtin_trap();
    }
    // Opening it under some platform must fail cleanly (or succeed), never crash.
    gt_sgx_platform pf;
    memset(&pf, 0, sizeof pf);
    gt_sgx_secs_identity secs = {.isvsvn = 0xffff};
    gt_buf pt = {0};
    gt_err e = gt_sgx_unseal(&pt, NULL, &pf, &secs, data, size);
    (void)e;
    gt_buf_free(&pt);
    return 0;
}
