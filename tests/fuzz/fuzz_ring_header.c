// Fuzz: a sealed ring chunk's header is the first thing a rank reads of bytes MPI delivered.
#include <gputravel/collective.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_reader r = gt_reader_init(data, size);
    gt_peer_hdr h;
    uint64_t seq = 0;
    gt_err e = gt_ring_hdr_parse(&r, &h, &seq);
    if (e.code != GT_E_NONE) {
        if (e.code == GT_E_TRUNCATED && r.pos != 0) {
            __builtin_trap();  // a failed read consumes nothing
        }
        return 0;
    }
    if (r.pos != GT_PEER_HDR_BYTES || h.nelem == 0 || h.nelem > GT_PEER_MAX_CHUNK_ELEMS) {
        __builtin_trap();
    }
    uint8_t again[GT_PEER_HDR_BYTES];
    gt_ring_hdr_encode(again, &h, seq);
    if (memcmp(again, data, sizeof again) != 0) {
        __builtin_trap();  // parse and encode disagree on the layout
    }
    gt_peer_hdr want = h;
    if (!gt_is_ok(gt_ring_hdr_expect(&h, seq, &want, seq))) {
        __builtin_trap();  // a header equals itself
    }
    want.hop ^= 1;
    if (gt_is_ok(gt_ring_hdr_expect(&h, seq, &want, seq)) ||
        gt_is_ok(gt_ring_hdr_expect(&h, seq, &h, seq + 1))) {
        __builtin_trap();  // one field or the sequence number off: rejected
    }
    return 0;
}
