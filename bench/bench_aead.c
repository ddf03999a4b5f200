// AES-256-GCM throughput on one core: gt_aead_seal / gt_aead_open (one-shot) and the streaming
// API (one update per block), over 16 KiB and 1 MiB blocks. Prints a table in MB/s (10^6 B/s).
// Each cell runs for about 0.25 s; the whole run takes a few seconds.
#include <gputravel/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OP_SEAL, OP_OPEN, OP_STREAM_ENC, OP_STREAM_DEC } op_kind;

static const char *op_name(op_kind op)
{
    switch (op) {
    case OP_SEAL:
        return "gt_aead_seal";
    case OP_OPEN:
        return "gt_aead_open";
    case OP_STREAM_ENC:
        return "stream encrypt";
    case OP_STREAM_DEC:
        return "stream decrypt";
    default:
        return "?";
    }
}

// Runs op on a block of n bytes until `budget` seconds pass; returns MB/s, or -1 on failure.
static double measure(op_kind op, size_t n, const uint8_t key[32], double budget)
{
    uint8_t *pt = malloc(n), *ct = malloc(n + GT_AEAD_TAG_BYTES), *out = malloc(n);
    uint8_t iv[GT_AEAD_IV_BYTES] = {0}, aad[16] = {1}, tag[GT_AEAD_TAG_BYTES];
    double rate = -1;
    if (pt == NULL || ct == NULL || out == NULL || !gt_is_ok(gt_random_bytes(pt, n))) {
        goto out;
    }
    size_t ct_len = 0, pt_len = 0;
    // One sealed block to open, and its tag for the streaming decrypt.
    if (!gt_is_ok(gt_aead_seal(ct, n + GT_AEAD_TAG_BYTES, &ct_len, pt, n, aad, sizeof aad, iv,
                               key))) {
        goto out;
    }
    memcpy(tag, ct + n, sizeof tag);
    uint64_t bytes = 0;
    double start = gt_now_seconds(), now = start;
    while (now - start < budget) {
        for (int rep = 0; rep < 8; rep++) {
            bool ok = false;
            gt_aead_stream *s = NULL;
            switch (op) {
            case OP_SEAL:
                // A benchmark only: real callers never reuse (key, IV).
                ok = gt_is_ok(gt_aead_seal(ct, n + GT_AEAD_TAG_BYTES, &ct_len, pt, n, aad,
                                           sizeof aad, iv, key));
                break;
            case OP_OPEN:
                ok = gt_is_ok(gt_aead_open(out, n, &pt_len, ct, ct_len, aad, sizeof aad, iv,
                                           key));
                break;
            case OP_STREAM_ENC:
            case OP_STREAM_DEC: {
                bool enc = op == OP_STREAM_ENC;
                uint8_t t[GT_AEAD_TAG_BYTES];
                memcpy(t, tag, sizeof t);
                ok = gt_is_ok(gt_aead_stream_new(&s, enc, aad, sizeof aad, iv, key)) &&
                     gt_is_ok(gt_aead_stream_update(s, out, enc ? pt : ct, n)) &&
                     gt_is_ok(gt_aead_stream_final(s, t));
                gt_aead_stream_free(s);
                break;
            }
            default:
                break;
            }
            if (!ok) {
                goto out;
            }
            bytes += n;
        }
        now = gt_now_seconds();
    }
    rate = (double)bytes / (now - start) / 1e6;
out:
    free(pt);
    free(ct);
    free(out);
    return rate;
}

int main(void)
{
    uint8_t key[GT_AEAD_KEY_BYTES];
    if (!gt_is_ok(gt_random_bytes(key, sizeof key))) {
        fprintf(stderr, "bench_aead: no randomness\n");
        return 1;
    }
    const size_t sizes[] = {16u << 10, 1u << 20};
    const op_kind ops[] = {OP_SEAL, OP_OPEN, OP_STREAM_ENC, OP_STREAM_DEC};
    printf("AES-256-GCM, one core, MB/s (10^6 bytes/s), 16-byte AAD\n");
    printf("%-16s %12s %12s\n", "operation", "16 KiB", "1 MiB");
    int rc = 0;
    for (size_t o = 0; o < 4; o++) {
        printf("%-16s", op_name(ops[o]));
        for (size_t s = 0; s < 2; s++) {
            double r = measure(ops[o], sizes[s], key, 0.25);
            if (r < 0) {
                rc = 1;
            }
            printf(" %12.1f", r);
        }
        printf("\n");
    }
    gt_secure_zero(key, sizeof key);
    return rc;
}
