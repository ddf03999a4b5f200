// Segmented chunks (GTCHUNK2): the segment arithmetic, the per-segment nonce and AAD, and the
// openers every party uses (whole body on several threads, a range of segments, or a serial
// stream of pieces). GTCHUNK1 is the same code with one segment (nonce IV_i, AAD AAD_i), so each
// reader has one path for both formats. Layout and why: docs/formats.md "Segmented chunks".
#include <gputravel/seal.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

gt_err gt_chunk_seg_check(uint32_t seg_bytes)
{
    GT_ENSURE(seg_bytes == 0 || (seg_bytes % GT_CHUNK_SEG_MIN_BYTES == 0 &&
                                 seg_bytes <= GT_CHUNK_SEG_MAX_BYTES),
              GT_E_FORMAT, "segment size %u: a multiple of %u up to %u bytes (0: unsegmented)",
              seg_bytes, GT_CHUNK_SEG_MIN_BYTES, GT_CHUNK_SEG_MAX_BYTES);
    return GT_OK;
}

uint64_t gt_chunk_seg_count(uint64_t pt_len, uint32_t seg_bytes)
{
    if (seg_bytes == 0 || pt_len == 0) {
        return 1;
    }
    return pt_len / seg_bytes + (pt_len % seg_bytes != 0);
}

uint64_t gt_chunk_body_bytes(uint64_t pt_len, uint32_t seg_bytes)
{
    return pt_len + GT_AEAD_TAG_BYTES * gt_chunk_seg_count(pt_len, seg_bytes);
}

gt_err gt_chunk_plain_bytes(uint64_t body_len, uint32_t seg_bytes, uint64_t *pt_len)
{
    *pt_len = 0;
    GT_TRY(gt_chunk_seg_check(seg_bytes));
    uint64_t step = (uint64_t)seg_bytes + GT_AEAD_TAG_BYTES;
    uint64_t nseg = seg_bytes == 0 ? 1 : (body_len + step - 1) / step;
    uint64_t tags = GT_AEAD_TAG_BYTES * nseg;
    GT_ENSURE(body_len >= tags && gt_chunk_body_bytes(body_len - tags, seg_bytes) == body_len,
              GT_E_ARG, "a chunk body of %llu bytes is no whole number of segments of %u",
              (unsigned long long)body_len, seg_bytes);
    *pt_len = body_len - tags;
    return GT_OK;
}

uint64_t gt_chunk_seg_plain_bytes(uint64_t pt_len, uint32_t seg_bytes, uint64_t j)
{
    if (seg_bytes == 0) {
        return pt_len;
    }
    uint64_t at = j * seg_bytes;
    return at >= pt_len ? 0 : (pt_len - at < seg_bytes ? pt_len - at : seg_bytes);
}

uint64_t gt_chunk_seg_body_offset(uint32_t seg_bytes, uint64_t j)
{
    return j * ((uint64_t)seg_bytes + GT_AEAD_TAG_BYTES);
}

// XOR with the index: a bijection of j for a fixed IV_i, so the n nonces under K_i (a key that
// seals this one chunk only) are distinct.
void gt_chunk_seg_nonce(uint8_t nonce[GT_AEAD_IV_BYTES], const uint8_t iv[GT_AEAD_IV_BYTES],
                        uint32_t seg_bytes, uint64_t j)
{
    memcpy(nonce, iv, GT_AEAD_IV_BYTES);
    if (seg_bytes != 0) {
        for (int b = 0; b < 8; b++) {
            nonce[4 + b] ^= (uint8_t)(j >> (8 * b));
        }
    }
}

void gt_chunk_seg_aad(uint8_t aad_out[GT_CHUNK_SEG_AAD_BYTES], size_t *aad_len,
                      const uint8_t chunk_aad[GT_CHUNK_AAD_BYTES], uint32_t seg_bytes,
                      uint64_t j, uint64_t nseg)
{
    memcpy(aad_out, chunk_aad, GT_CHUNK_AAD_BYTES);
    if (seg_bytes == 0) {
        *aad_len = GT_CHUNK_AAD_BYTES;
        return;
    }
    gt_store_u32le(aad_out + GT_CHUNK_AAD_BYTES, seg_bytes);
    gt_store_u32le(aad_out + GT_CHUNK_AAD_BYTES + 4, (uint32_t)j);
    aad_out[GT_CHUNK_AAD_BYTES + 8] = j + 1 == nseg;
    *aad_len = GT_CHUNK_SEG_AAD_BYTES;
}

// ---- opening segments from memory -----------------------------------------------------------

gt_err gt_chunk_segs_open(uint8_t *pt, const uint8_t *part, uint64_t part_len, uint64_t pt_len,
                          uint32_t seg_bytes, uint64_t first, uint64_t end,
                          const uint8_t iv[GT_AEAD_IV_BYTES],
                          const uint8_t aad[GT_CHUNK_AAD_BYTES],
                          const uint8_t key[GT_AEAD_KEY_BYTES])
{
    GT_TRY(gt_chunk_seg_check(seg_bytes));
    const uint64_t nseg = gt_chunk_seg_count(pt_len, seg_bytes);
    GT_ENSURE(first <= end && end <= nseg, GT_E_ARG, "segments %llu..%llu of %llu",
              (unsigned long long)first, (unsigned long long)end, (unsigned long long)nseg);
    const uint64_t step = seg_bytes ? seg_bytes : pt_len;  // where segment j's plaintext goes
    uint64_t want = 0;
    for (uint64_t j = first; j < end; j++) {
        want += gt_chunk_seg_plain_bytes(pt_len, seg_bytes, j) + GT_AEAD_TAG_BYTES;
    }
    GT_ENSURE(part_len == want, GT_E_ARG, "segments %llu..%llu take %llu bytes, not %llu",
              (unsigned long long)first, (unsigned long long)end, (unsigned long long)want,
              (unsigned long long)part_len);
    gt_aead_keyed *k = NULL;
    GT_TRY(gt_aead_keyed_new(&k, false, key));
    gt_err err = GT_OK;
    uint64_t at = 0;
    for (uint64_t j = first; j < end && gt_is_ok(err); j++) {
        uint64_t n = gt_chunk_seg_plain_bytes(pt_len, seg_bytes, j);
        uint8_t nonce[GT_AEAD_IV_BYTES], sa[GT_CHUNK_SEG_AAD_BYTES];
        size_t sa_len = 0, got = 0;
        gt_chunk_seg_nonce(nonce, iv, seg_bytes, j);
        gt_chunk_seg_aad(sa, &sa_len, aad, seg_bytes, j, nseg);
        err = gt_aead_keyed_open(k, pt + j * step, (size_t)n, &got, part + at,
                                 (size_t)(n + GT_AEAD_TAG_BYTES), sa, sa_len, nonce);
        at += n + GT_AEAD_TAG_BYTES;
    }
    gt_aead_keyed_free(k);
    if (!gt_is_ok(err) && first < end) {
        uint64_t from = first * step, to = end == nseg ? pt_len : end * step;
        gt_secure_zero(pt + from, (size_t)(to - from));
    }
    return err;
}

typedef struct {
    uint8_t *pt;
    const uint8_t *body;
    uint64_t pt_len, first, end;
    uint32_t seg_bytes;
    const uint8_t *iv, *aad, *key;
    gt_err err;
} segs_job;

static void *segs_job_main(void *arg)
{
    segs_job *j = arg;
    uint64_t from = gt_chunk_seg_body_offset(j->seg_bytes, j->first);
    uint64_t to = j->end == gt_chunk_seg_count(j->pt_len, j->seg_bytes)
                      ? gt_chunk_body_bytes(j->pt_len, j->seg_bytes)
                      : gt_chunk_seg_body_offset(j->seg_bytes, j->end);
    j->err = gt_chunk_segs_open(j->pt, j->body + from, to - from, j->pt_len, j->seg_bytes,
                                j->first, j->end, j->iv, j->aad, j->key);
    return NULL;
}

gt_err gt_chunk_body_open(uint8_t *pt, const uint8_t *body, uint64_t body_len, uint64_t pt_len,
                          uint32_t seg_bytes, int threads, const uint8_t iv[GT_AEAD_IV_BYTES],
                          const uint8_t aad[GT_CHUNK_AAD_BYTES],
                          const uint8_t key[GT_AEAD_KEY_BYTES])
{
    GT_TRY(gt_chunk_seg_check(seg_bytes));
    GT_ENSURE(body_len == gt_chunk_body_bytes(pt_len, seg_bytes), GT_E_ARG,
              "a chunk body of %llu bytes for %llu plaintext bytes (expected %llu)",
              (unsigned long long)body_len, (unsigned long long)pt_len,
              (unsigned long long)gt_chunk_body_bytes(pt_len, seg_bytes));
    const uint64_t nseg = gt_chunk_seg_count(pt_len, seg_bytes);
    segs_job jobs[2] = {
        {pt, body, pt_len, 0, nseg, seg_bytes, iv, aad, key, GT_OK},
        {pt, body, pt_len, nseg, nseg, seg_bytes, iv, aad, key, GT_OK},
    };
    pthread_t th;
    bool worker = false;
    if (threads >= 2 && nseg >= 2) {
        jobs[0].end = jobs[1].first = (nseg + 1) / 2;
        worker = pthread_create(&th, NULL, segs_job_main, &jobs[1]) == 0;
        if (!worker) {
            jobs[0].end = nseg;  // no worker to be had: all on this thread, same result
        }
    }
    segs_job_main(&jobs[0]);
    if (worker) {
        pthread_join(th, NULL);
    }
    gt_err err = gt_is_ok(jobs[0].err) ? jobs[1].err : jobs[0].err;
    if (!gt_is_ok(err)) {
        gt_secure_zero(pt, (size_t)pt_len);  // the other thread's segments verified: wipe them too
    }
    return err;
}

// ---- opening a stream of pieces -------------------------------------------------------------

struct gt_chunk_stream {
    uint64_t pt_len, nseg, seg;      // seg: the segment being read
    uint64_t ct_left;                // its ciphertext bytes still to come
    uint32_t tag_have;               // its tag bytes gathered
    uint32_t seg_bytes;
    uint8_t iv[GT_AEAD_IV_BYTES], aad[GT_CHUNK_AAD_BYTES], key[GT_AEAD_KEY_BYTES];
    uint8_t tag[GT_AEAD_TAG_BYTES];
    gt_aead_stream *as;
    bool failed;
};

static gt_err stream_begin_segment(gt_chunk_stream *s)
{
    uint8_t nonce[GT_AEAD_IV_BYTES], sa[GT_CHUNK_SEG_AAD_BYTES];
    size_t sa_len = 0;
    gt_chunk_seg_nonce(nonce, s->iv, s->seg_bytes, s->seg);
    gt_chunk_seg_aad(sa, &sa_len, s->aad, s->seg_bytes, s->seg, s->nseg);
    s->ct_left = gt_chunk_seg_plain_bytes(s->pt_len, s->seg_bytes, s->seg);
    s->tag_have = 0;
    return gt_aead_stream_new(&s->as, false, sa, sa_len, nonce, s->key);
}

gt_err gt_chunk_stream_new(gt_chunk_stream **out, uint64_t pt_len, uint32_t seg_bytes,
                           const uint8_t iv[GT_AEAD_IV_BYTES],
                           const uint8_t aad[GT_CHUNK_AAD_BYTES],
                           const uint8_t key[GT_AEAD_KEY_BYTES])
{
    *out = NULL;
    GT_TRY(gt_chunk_seg_check(seg_bytes));
    gt_chunk_stream *s = calloc(1, sizeof *s);
    GT_ENSURE(s != NULL, GT_E_NOMEM, "chunk stream: out of memory");
    s->pt_len = pt_len;
    s->seg_bytes = seg_bytes;
    s->nseg = gt_chunk_seg_count(pt_len, seg_bytes);
    memcpy(s->iv, iv, sizeof s->iv);
    memcpy(s->aad, aad, sizeof s->aad);
    memcpy(s->key, key, sizeof s->key);
    gt_err err = stream_begin_segment(s);
    if (!gt_is_ok(err)) {
        gt_chunk_stream_free(s);
        return err;
    }
    *out = s;
    return GT_OK;
}

// The current segment's tag is complete: check it and move on to the next segment.
static gt_err stream_end_segment(gt_chunk_stream *s)
{
    gt_err e = gt_aead_stream_final(s->as, s->tag);
    gt_aead_stream_free(s->as);
    s->as = NULL;
    GT_TRY(e);
    s->seg++;
    return s->seg < s->nseg ? stream_begin_segment(s) : GT_OK;
}

gt_err gt_chunk_stream_update(gt_chunk_stream *s, const uint8_t *in, size_t n, uint8_t *out,
                              size_t *out_n)
{
    *out_n = 0;
    GT_ENSURE(!s->failed, GT_E_STATE, "chunk stream: used after a failure");
    size_t done = 0, wrote = 0;
    gt_err err = GT_OK;
    while (done < n && gt_is_ok(err)) {
        if (s->seg >= s->nseg) {
            err = gt_errf(GT_E_ARG, "chunk stream: bytes past the chunk's end");
        } else if (s->ct_left > 0) {
            size_t k = n - done < s->ct_left ? n - done : (size_t)s->ct_left;
            if (out == in) {
                // in place: decrypt where the bytes are, then close the gap the tags left
                // (OpenSSL refuses partially overlapping buffers)
                err = gt_aead_stream_update(s->as, out + done, in + done, k);
                if (gt_is_ok(err) && wrote != done) {
                    memmove(out + wrote, out + done, k);
                }
            } else {
                err = gt_aead_stream_update(s->as, out + wrote, in + done, k);
            }
            s->ct_left -= k;
            done += k;
            wrote += k;
        } else {
            size_t k = GT_AEAD_TAG_BYTES - s->tag_have;
            k = n - done < k ? n - done : k;
            memcpy(s->tag + s->tag_have, in + done, k);
            s->tag_have += (uint32_t)k;
            done += k;
            if (s->tag_have == GT_AEAD_TAG_BYTES) {
                err = stream_end_segment(s);
            }
        }
    }
    *out_n = wrote;
    s->failed = !gt_is_ok(err);
    return err;
}

gt_err gt_chunk_stream_final(gt_chunk_stream *s)
{
    GT_ENSURE(!s->failed, GT_E_STATE, "chunk stream: used after a failure");
    GT_ENSURE(s->seg == s->nseg, GT_E_TRUNCATED,
              "chunk stream: ended in segment %llu of %llu", (unsigned long long)s->seg,
              (unsigned long long)s->nseg);
    return GT_OK;
}

void gt_chunk_stream_free(gt_chunk_stream *s)
{
    if (s != NULL) {
        gt_aead_stream_free(s->as);
        gt_secure_zero(s, sizeof *s);
        free(s);
    }
}
