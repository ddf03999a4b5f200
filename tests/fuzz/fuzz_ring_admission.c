// Fuzz: what the ranks exchange over MPI at admission (collective.h): a hello slot and a verdict. The
// first byte picks the parser; both must consume only what they may and judge alike each time.
#include <gputravel/collective.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void verdict(const uint8_t *data, size_t size)
{
    gt_ring_verdict v;
    if (!gt_is_ok(gt_ring_verdict_parse((gt_span){data, size}, &v))) {
        return;
    }
    if (strlen(v.reason) > GT_RING_REASON_MAX) {
        __builtin_trap();
    }
    uint8_t again[GT_RING_VERDICT_BYTES];
    gt_ring_verdict_encode(again, &v);
    // A parsed ok verdict carries no reason; a refusal re-encodes byte for byte.
    if (!v.ok && memcmp(again, data, GT_RING_VERDICT_BYTES) != 0) {
        __builtin_trap();
    }
    gt_ring_verdict w;
    if (!gt_is_ok(gt_ring_verdict_parse((gt_span){again, sizeof again}, &w)) || w.ok != v.ok ||
        memcmp(w.run, v.run, 16) != 0) {
        __builtin_trap();
    }
}

static void hello_slot(const uint8_t *data, size_t size)
{
    gt_span hello = {0};
    if (!gt_is_ok(gt_ring_hello_slot_parse((gt_span){data, size}, &hello))) {
        return;
    }
    if (hello.len == 0 || hello.len > GT_PEER_HELLO_MAX || hello.data != data + 4 ||
        hello.len > size - 4) {
        __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    if (data[0] & 1) {
        verdict(data + 1, size - 1);
    } else {
        hello_slot(data + 1, size - 1);
    }
    return 0;
}
