// Fuzz: the byte stream a peer sends inside the attested TLS channel, as the holder agent reads
// it: frame headers (net), each payload bounded by the receiver's limit, and the holder-protocol
// messages inside. The peer is attested, not trusted.
#include <gputravel/holder.h>
#include <gputravel/net.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_message(uint32_t type, gt_span body)
{
    switch (type) {
    case GT_HP_HELLO: {
        gt_hp_hello m;
        if (gt_is_ok(gt_hp_hello_parse(body, &m)) && strlen(m.trainer) == 0) {
            __builtin_trap();  // an accepted hello names its trainer
        }
        break;
    }
    case GT_HP_FETCH: {
        gt_hp_fetch m;
        if (gt_is_ok(gt_hp_fetch_parse(body, &m)) && body.len != 5) {
            __builtin_trap();  // FETCH is accepted only at its exact size
        }
        break;
    }
    case GT_HP_TRAVEL: {
        gt_hp_travel m;
        if (gt_is_ok(gt_hp_travel_parse(body, &m)) && strlen(m.device) == 0) {
            __builtin_trap();
        }
        break;
    }
    case GT_HP_USED: {
        gt_hp_used m;
        if (gt_is_ok(gt_hp_used_parse(body, &m)) && body.len != 12) {
            __builtin_trap();
        }
        break;
    }
    default:
        break;  // other types end the conversation in the agent
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_reader r = gt_reader_init(data, size);
    size_t consumed = 0;
    for (;;) {
        uint32_t type = 0;
        uint64_t len = 0;
        if (!gt_is_ok(gt_net_frame_header_parse(&r, &type, &len))) {
            break;
        }
        consumed += GT_NET_FRAME_HEADER_BYTES;
        if (len > GT_HP_MAX_CONTROL) {
            break;  // the agent ends the channel on an oversized control frame
        }
        gt_span body = {0};
        if (!gt_is_ok(gt_reader_span(&r, (size_t)len, &body))) {
            break;  // the peer closed mid-frame
        }
        consumed += (size_t)len;
        if (consumed > size || body.data + body.len > data + size) {
            __builtin_trap();  // the reader never hands out bytes beyond the input
        }
        parse_message(type, body);
    }
    return 0;
}
