// Fuzz: SIGSTRUCTs (raw 1808 bytes, or inside an SGX SDK signed ELF) are untrusted input.
#include <gputravel/enclave.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gt_sgx_sigstruct s, again;
    size_t offset = 0;
    if (!gt_is_ok(gt_sgx_sigstruct_find(data, size, &s, &offset))) {
        return 0;
    }
    gt_sgx_sigstruct_checks c;
    if (!gt_is_ok(gt_sgx_sigstruct_verify(&s, &c))) {
        return 0;
    }
    // The fields say everything: encoding them again gives back the bytes parsed.
    again = s;
    gt_sgx_sigstruct_encode(&again);
    if (memcmp(again.raw, s.raw, sizeof s.raw) != 0) {
        __builtin_trap();
    }
    cJSON *j = NULL;
    if (gt_is_ok(gt_sgx_sigstruct_json(&s, &c, offset, &j))) {
        char *text = cJSON_PrintUnformatted(j);
        free(text);
        cJSON_Delete(j);
    }
    return 0;
}
