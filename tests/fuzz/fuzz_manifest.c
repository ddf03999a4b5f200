// Fuzz: a sealed dataset's manifest is untrusted input (it arrives with the chunks, from anyone).
// Checks: decode never reads out of bounds; a decoded manifest re-encodes to exactly the input's
// signed bytes; the consistency check and per-chunk derivations never misbehave on what decodes.
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_manifest m;
    if (gt_manifest_decode(&m, data, size).code == GT_E_NONE) {
        if (size < GT_ED25519_SIG_BYTES || m.chunks == NULL) {
            __builtin_trap();
        }
        gt_err e = gt_manifest_check(&m);
        (void)e;
        if (m.chunk_count > 0) {
            uint8_t aad[GT_CHUNK_AAD_BYTES];
            uint32_t last = m.chunk_count - 1;
            if (gt_chunk_aad_build(aad, &m, last).code != GT_E_NONE) {
                __builtin_trap();
            }
            e = gt_chunk_header_check(data, size < 40 ? size : 40, &m, last);
            (void)gt_manifest_chunk_file_bytes(&m, last);
        }
        // encoding what was decoded gives back the same signed bytes
        static const uint8_t sec[GT_ED25519_SECRET_BYTES] = {1, 2, 3};
        gt_buf out = {0};
        if (gt_manifest_encode(&m, sec, &out).code != GT_E_NONE || out.len != size ||
            memcmp(out.data, data, size - GT_ED25519_SIG_BYTES) != 0) {
            __builtin_trap();
        }
        gt_buf_free_nowipe(&out);
        gt_manifest_free(&m);
    }
    if (gt_manifest_parse(&m, data, size).code == GT_E_NONE) {
        if (gt_manifest_check(&m).code != GT_E_NONE) {
            __builtin_trap();  // parse accepts only consistent manifests
        }
        gt_manifest_free(&m);
    }
    return 0;
}
