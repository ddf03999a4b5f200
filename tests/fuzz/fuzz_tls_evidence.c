// Fuzz: the evidence message of an attested channel (travel/attestor.c) comes from a peer that
// has not attested yet; only its split into agreement hint and evidence is ours to parse.
#include <gputravel/travel.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_span ev;
    uint8_t hint[GT_SHA256_BYTES];
    bool has = false;
    gt_err e = gt_tls_evidence_split(data, size, &ev, hint, &has);
    if (gt_is_ok(e)) {
        // The evidence is the message's tail, inside it; with a hint, exactly after it.
        size_t head = has ? GT_TLS_EVIDENCE_MAGIC_BYTES + GT_SHA256_BYTES : 0;
        if (ev.data != data + head || ev.len != size - head ||
            (has && memcmp(hint, data + GT_TLS_EVIDENCE_MAGIC_BYTES, GT_SHA256_BYTES) != 0)) {
            __builtin_trap();
        }
    } else if (size >= GT_TLS_EVIDENCE_MAGIC_BYTES + GT_SHA256_BYTES) {
        __builtin_trap();  // only a cut-short hint is refused
    }
    return 0;
}
