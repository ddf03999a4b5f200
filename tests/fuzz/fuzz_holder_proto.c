// Fuzz: the trainer's messages to a holder agent are untrusted. The first byte picks the parser;
// TRAVEL's device address goes on through the trip address parser.
#include <gputravel/device.h>
#include <gputravel/holder.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    gt_span body = {data + 1, size - 1};
    switch (data[0] % 4) {
    case 0: {
        gt_hp_hello m;
        gt_err e = gt_hp_hello_parse(body, &m);
        size_t n = strnlen(m.trainer, sizeof m.trainer);
        if (gt_is_ok(e) && (n == 0 || body.len != 32 + GT_ED25519_PUBLIC_BYTES + 2 + n ||
                            memcmp(m.signing_key, body.data + 32, sizeof m.signing_key) != 0)) {
            __builtin_trap();  // an accepted hello names its trainer and carries its key
        }
        static const uint8_t zero[GT_ED25519_PUBLIC_BYTES];
        if (!gt_is_ok(e) && (n != 0 || memcmp(m.signing_key, zero, sizeof zero) != 0)) {
            __builtin_trap();  // a refused hello leaves no key behind
        }
        break;
    }
    case 1: {
        gt_hp_fetch m;
        if (gt_is_ok(gt_hp_fetch_parse(body, &m)) && m.mode != GT_FETCH_PLAIN &&
            m.mode != GT_FETCH_KEYRELEASE) {
            __builtin_trap();
        }
        break;
    }
    case 2: {
        gt_hp_travel m;
        if (!gt_is_ok(gt_hp_travel_parse(body, &m))) {
            break;
        }
        if (strlen(m.device) == 0) {
            __builtin_trap();
        }
        // The device address says which trip protocol the holder speaks (device.h).
        gt_device_kind kind = GT_DEVICE_CPU;
        char path[GT_DEVICE_TRIP_ADDRESS_MAX];
        if (gt_is_ok(gt_device_trip_address_parse(m.device, &kind, path, sizeof path)) &&
            (path[0] == '\0' || strlen(path) >= sizeof path || strlen(path) > strlen(m.device))) {
            __builtin_trap();  // an accepted address names a non-empty socket path inside it
        }
        break;
    }
    default: {
        gt_hp_used m;
        gt_err e = gt_hp_used_parse(body, &m);
        if (gt_is_ok(e) && body.len != 12) {
            __builtin_trap();  // USED is accepted only at its exact size
        }
        break;
    }
    }
    return 0;
}
