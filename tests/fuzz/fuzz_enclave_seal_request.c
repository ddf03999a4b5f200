// Fuzz: the request of gputravel's seal leaves, read by the enclave process from enclave memory
// (gt_enclave_seal_request_parse). Whatever parses must encode back to the same bytes (the
// reserved bytes are zero, no field is dropped or invented).
#include <gputravel/enclave.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_enclave_seal_request q;
    if (!gt_is_ok(gt_enclave_seal_request_parse(data, size, &q))) {
        return 0;
    }
    uint8_t out[GT_ENCLAVE_SEAL_REQUEST_BYTES];
    gt_enclave_seal_request_encode(&q, out);
    if (size != sizeof out || memcmp(out, data, sizeof out) != 0) {
        __builtin_trap();
    }
    return 0;
}
