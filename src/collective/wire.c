// The sealed chunk's header: one encoder, one bounds-checked parser, one comparison against
// what the receiver expects (docs/collective.md "Wire format").
#include <gputravel/collective.h>

#include <string.h>

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

void gt_ring_hdr_encode(uint8_t out[GT_PEER_HDR_BYTES], const gt_peer_hdr *h, uint64_t seq)
{
    memcpy(out, h->run, sizeof h->run);
    put_le(out + 16, h->step, 8);
    put_le(out + 24, h->bucket, 4);
    put_le(out + 28, h->hop, 4);
    put_le(out + 32, h->src, 4);
    put_le(out + 36, h->dst, 4);
    put_le(out + 40, h->elem_off, 8);
    put_le(out + 48, h->nelem, 8);
    put_le(out + 56, seq, 8);
}

gt_err gt_ring_hdr_parse(gt_reader *r, gt_peer_hdr *h, uint64_t *seq)
{
    gt_reader sub;
    GT_TRY(gt_reader_sub(r, GT_PEER_HDR_BYTES, &sub));  // all or nothing
    GT_TRY(gt_reader_bytes(&sub, h->run, sizeof h->run));
    GT_TRY(gt_reader_u64le(&sub, &h->step));
    GT_TRY(gt_reader_u32le(&sub, &h->bucket));
    GT_TRY(gt_reader_u32le(&sub, &h->hop));
    GT_TRY(gt_reader_u32le(&sub, &h->src));
    GT_TRY(gt_reader_u32le(&sub, &h->dst));
    GT_TRY(gt_reader_u64le(&sub, &h->elem_off));
    GT_TRY(gt_reader_u64le(&sub, &h->nelem));
    GT_TRY(gt_reader_u64le(&sub, seq));
    GT_ENSURE(h->nelem >= 1 && h->nelem <= GT_PEER_MAX_CHUNK_ELEMS, GT_E_LIMIT,
              "chunk header: %llu floats (1..%u)", (unsigned long long)h->nelem,
              GT_PEER_MAX_CHUNK_ELEMS);
    return GT_OK;
}

#define EXPECT_FIELD(name, got, want)                                                      \
    GT_ENSURE((got) == (want), GT_E_AUTH, "chunk rejected: %s %llu, expected %llu", name,  \
              (unsigned long long)(got), (unsigned long long)(want))

gt_err gt_ring_hdr_expect(const gt_peer_hdr *got, uint64_t seq, const gt_peer_hdr *want,
                          uint64_t want_seq)
{
    // The run id is public (a hash of public keys): a plain compare is fine.
    GT_ENSURE(memcmp(got->run, want->run, sizeof got->run) == 0, GT_E_AUTH,
              "chunk rejected: from another run");
    EXPECT_FIELD("step", got->step, want->step);
    EXPECT_FIELD("bucket", got->bucket, want->bucket);
    EXPECT_FIELD("hop", got->hop, want->hop);
    EXPECT_FIELD("src", got->src, want->src);
    EXPECT_FIELD("dst", got->dst, want->dst);
    EXPECT_FIELD("elem_off", got->elem_off, want->elem_off);
    EXPECT_FIELD("nelem", got->nelem, want->nelem);
    EXPECT_FIELD("sequence number", seq, want_seq);
    return GT_OK;
}
