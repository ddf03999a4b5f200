// Fuzz target: the peer parsers of the device layer (device.h "peers"): a peer's hello and a
// sealed chunk's header and label block, both bytes from another machine relayed by an
// untrusted trainer. The first byte picks the parser. A parser may fail, never crash; what
// parses must describe exactly the bytes it was given.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gputravel/device.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    gt_span in = {data + 1, size - 1};
    if (data[0] % 2 == 0) {
        gt_peer_hello_msg m;
        if (gt_is_ok(gt_peer_hello_parse(in, &m))) {
            // the trainer part ends where the signed bytes end; the evidence ends the input
            if (m.signed_len + 4 + m.evidence.len != in.len || m.evidence.len == 0 ||
                m.trainer.data + m.trainer.len != in.data + m.signed_len ||
                m.evidence.data + m.evidence.len != in.data + in.len ||
                (m.kind != GT_PEER_KIND_INPROC && m.kind != GT_PEER_KIND_DEVD)) {
                abort();
            }
        }
    } else {
        static gt_peer_chunk_msg m;
        if (gt_is_ok(gt_peer_chunk_parse(in, &m))) {
            if (m.aad_len != GT_PEER_HDR_BYTES + 4 + (size_t)m.nlabels * GT_LABEL_ID_BYTES ||
                m.aad_len + m.ct.len != in.len || m.ct.len != m.h.nelem * 4 + GT_AEAD_TAG_BYTES ||
                m.nlabels > GT_LABEL_MAX_SOURCES || m.h.nelem > GT_PEER_MAX_CHUNK_ELEMS ||
                gt_peer_chunk_bytes(m.h.nelem) < in.len) {
                abort();
            }
        }
    }
    return 0;
}
