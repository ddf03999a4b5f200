// Fuzz: a GTCHUNK2 chunk body is untrusted input (the holder's file, bounce memory). Input: u32le
// segment size selector, u32le plaintext length, then body bytes. Checks: the stream opener,
// fed the body in pieces whose sizes come from the input, never writes past the plaintext it
// announces nor accepts bytes past the chunk's end; the length arithmetic round-trips; the
// two-thread opener never succeeds where the stream failed, and wipes on failure.
#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_reader r = gt_reader_init(data, size);
    uint32_t sel = 0, len = 0;
    if (!gt_is_ok(gt_reader_u32le(&r, &sel)) || !gt_is_ok(gt_reader_u32le(&r, &len))) {
        return 0;
    }
    static const uint32_t segs[4] = {0, 4096, 8192, 65536};
    const uint32_t seg = segs[sel % 4];
    const uint64_t pt_len = 1 + len % (1u << 18);
    const uint8_t *body = data + 8;
    const size_t body_len = size - 8;
    static const uint8_t key[32] = {7}, iv[12] = {1}, aad[32] = {2};
    uint64_t back = 0;
    if (gt_chunk_plain_bytes(gt_chunk_body_bytes(pt_len, seg), seg, &back).code != GT_E_NONE ||
        back != pt_len) {
        __builtin_trap();
    }
    uint8_t *buf = malloc(body_len ? body_len : 1);
    memcpy(buf, body, body_len);
    gt_chunk_stream *s = NULL;
    bool stream_ok = false;
    if (gt_chunk_stream_new(&s, pt_len, seg, iv, aad, key).code == GT_E_NONE) {
        size_t at = 0, plain = 0, k = 0;
        gt_err e = GT_OK;
        while (at < body_len && gt_is_ok(e)) {
            size_t n = 1 + (size_t)body[k++ % body_len] * 37, got = 0;
            n = n < body_len - at ? n : body_len - at;
            e = gt_chunk_stream_update(s, buf + at, n, buf + at, &got);
            if (got > n || plain + got > pt_len) {
                __builtin_trap();
            }
            plain += got;
            at += n;
        }
        stream_ok = gt_is_ok(e) && gt_is_ok(gt_chunk_stream_final(s));
        gt_chunk_stream_free(s);
    }
    uint64_t n = 0;
    if (gt_chunk_plain_bytes(body_len, seg, &n).code == GT_E_NONE && n <= (1u << 20)) {
        uint8_t *pt = malloc(n ? n : 1);
        gt_err e = gt_chunk_body_open(pt, body, body_len, n, seg, 2, iv, aad, key);
        if (gt_is_ok(e) && !stream_ok && n == pt_len) {
            __builtin_trap();  // the two openers disagree
        }
        for (uint64_t i = 0; !gt_is_ok(e) && i < n; i++) {
            if (pt[i] != 0) {
                __builtin_trap();  // a failed open left plaintext
            }
        }
        free(pt);
    }
    free(buf);
    return 0;
}
