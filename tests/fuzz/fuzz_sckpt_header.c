// Fuzz: a sealed checkpoint's header is untrusted input (the file travels from the trainer to
// its recipients through anyone's hands; inspect reads it without a key).
// Checks: parsing never reads out of bounds; what parses is self-consistent (version 2, sizes
// follow the recipient count, the signer key is the one at its offset, names are NUL-terminated
// and unique, limits hold; the file size covers the signature trailer); a failed parse leaves
// nothing behind.
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gt_sckpt_header h;  // ~9 KiB: off the stack
    gt_err e = gt_sckpt_header_parse(&h, data, size);
    if (e.code != GT_E_NONE) {
        static const uint8_t zero[GT_ED25519_PUBLIC_BYTES];
        if (h.recipient_count != 0 || h.header_len != 0 ||
            memcmp(h.signer_pub, zero, sizeof zero) != 0) {
            __builtin_trap();  // nothing half-parsed survives
        }
        return 0;
    }
    uint32_t n = h.recipient_count;
    if (n < 1 || n > GT_SCKPT_MAX_RECIPIENTS ||
        h.bound_len != GT_SCKPT_FIXED_BYTES + (size_t)n * GT_SCKPT_RECIPIENT_BYTES ||
        h.header_len != h.bound_len + (size_t)n * GT_SCKPT_WRAP_BYTES || h.header_len > size ||
        h.plaintext_len > GT_SCKPT_MAX_PLAINTEXT || h.model.padded_vocab_size < h.model.vocab_size ||
        memcmp(data, GT_SCKPT_MAGIC, 8) != 0 || h.version != GT_SCKPT_VERSION ||
        memcmp(h.signer_pub, data + GT_SCKPT_SIGNER_OFFSET, GT_ED25519_PUBLIC_BYTES) != 0 ||
        gt_sckpt_file_bytes(&h) != (uint64_t)h.header_len + h.plaintext_len +
                                       GT_AEAD_TAG_BYTES + GT_SCKPT_SIG_BYTES) {
        __builtin_trap();
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strnlen(h.recipients[i].name, GT_SCKPT_NAME_BYTES);
        if (len == 0 || len >= GT_SCKPT_NAME_BYTES) {
            __builtin_trap();
        }
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(h.recipients[i].name, h.recipients[j].name) == 0) {
                __builtin_trap();
            }
        }
    }
    return 0;
}
