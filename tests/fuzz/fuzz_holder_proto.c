// Fuzz: the holder protocol's messages are untrusted. The first byte picks the parser; TRAVEL's
// device address goes on through the trip address parser. Every accepted message, written back
// by its writer (travel.h), gives exactly the bytes that were parsed: one layout, both ends.
#include <gputravel/device.h>
#include <gputravel/holder.h>

#include <string.h>

// The writer's bytes for an accepted message must be the parsed body, byte for byte.
#define ROUND_TRIP(write_call, body)                                                   \
    do {                                                                               \
        uint8_t out_[GT_HP_MAX_CONTROL];                                               \
        gt_writer w_ = gt_writer_init_fixed(out_, sizeof out_);                        \
        if (!gt_is_ok(write_call(&w_)) || w_.len != (body).len ||                      \
            memcmp(out_, (body).data, w_.len) != 0) {                                  \
            __builtin_trap();                                                          \
        }                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    gt_span body = {data + 1, size - 1};
    switch (data[0] % 9) {
    case 0: {
        gt_hp_hello m;
        gt_err e = gt_hp_hello_parse(body, &m);
        size_t n = strnlen(m.trainer, sizeof m.trainer);
        if (gt_is_ok(e) && (n == 0 || body.len != 32 + GT_ED25519_PUBLIC_BYTES + 2 + n ||
                            memcmp(m.signing_key, body.data + 32, sizeof m.signing_key) != 0)) {
            __builtin_trap();  // an accepted hello names its trainer and carries its key
        }
        if (gt_is_ok(e)) {
#define WRITE_HELLO(w) gt_hp_hello_write((w), &m)
            ROUND_TRIP(WRITE_HELLO, body);
        }
        static const uint8_t zero[GT_ED25519_PUBLIC_BYTES];
        if (!gt_is_ok(e) && (n != 0 || memcmp(m.signing_key, zero, sizeof zero) != 0)) {
            __builtin_trap();  // a refused hello leaves no key behind
        }
        break;
    }
    case 1: {
        gt_hp_fetch m;
        if (!gt_is_ok(gt_hp_fetch_parse(body, &m))) {
            break;
        }
        if (m.mode != GT_FETCH_PLAIN && m.mode != GT_FETCH_KEYRELEASE) {
            __builtin_trap();
        }
#define WRITE_FETCH(w) gt_hp_fetch_write((w), &m)
        ROUND_TRIP(WRITE_FETCH, body);
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
#define WRITE_TRAVEL(w) gt_hp_travel_write((w), &m)
        ROUND_TRIP(WRITE_TRAVEL, body);
        // The device address says which trip protocol the holder speaks (device.h).
        gt_device_kind kind = GT_DEVICE_CPU;
        char path[GT_DEVICE_TRIP_ADDRESS_MAX];
        if (gt_is_ok(gt_device_trip_address_parse(m.device, &kind, path, sizeof path)) &&
            (path[0] == '\0' || strlen(path) >= sizeof path || strlen(path) > strlen(m.device))) {
            __builtin_trap();  // an accepted address names a non-empty socket path inside it
        }
        break;
    }
    case 3: {
        gt_hp_used m;
        gt_err e = gt_hp_used_parse(body, &m);
        if (gt_is_ok(e) && body.len != GT_HP_USED_BYTES) {
            __builtin_trap();  // USED is accepted only at its exact size
        }
        if (gt_is_ok(e)) {
#define WRITE_USED(w) gt_hp_used_write((w), &m)
            ROUND_TRIP(WRITE_USED, body);
        }
        break;
    }
    case 4: {
        uint64_t n = 0;
        if (gt_is_ok(gt_hp_travelled_parse(body, &n))) {
#define WRITE_TRAVELLED(w) gt_hp_travelled_write((w), n)
            ROUND_TRIP(WRITE_TRAVELLED, body);
        }
        break;
    }
    case 5: {
        gt_hp_head m;
        gt_err e = gt_hp_head_parse(body, &m);
        if (gt_is_ok(e) && body.len != GT_HP_HEAD_BYTES) {
            __builtin_trap();  // HEAD only at its exact size
        }
        if (gt_is_ok(e)) {
#define WRITE_HEAD(w) gt_hp_head_write((w), &m)
            ROUND_TRIP(WRITE_HEAD, body);
            // Fuzzed bytes never carry a valid signature under either tag.
            if (gt_is_ok(gt_hp_head_verify(&m, false)) && gt_is_ok(gt_hp_head_verify(&m, true))) {
                __builtin_trap();
            }
        }
        break;
    }
    case 6: {
        gt_hp_witness m;
        gt_err e = gt_hp_witness_parse(body, &m);
        if (gt_is_ok(e) && body.len != GT_HP_WITNESS_BYTES) {
            __builtin_trap();
        }
        if (gt_is_ok(e)) {
#define WRITE_WITNESS(w) gt_hp_witness_write((w), &m)
            ROUND_TRIP(WRITE_WITNESS, body);
        }
        break;
    }
    case 7: {
        gt_hp_witness ws[GT_AGREEMENT_MAX_HOLDERS];
        size_t n = 0;
        gt_err e = gt_hp_witnesses_parse(body, ws, GT_AGREEMENT_MAX_HOLDERS, &n);
        if (gt_is_ok(e) && body.len != 1 + n * GT_HP_WITNESS_BYTES) {
            __builtin_trap();
        }
        break;
    }
    default: {
        // A holder's refusal, as the trainer reports it: a policy error, this chunk's retry
        // (exactly when the holder named GT_E_RETRY), or a parse error.
        gt_err e = gt_hp_refuse_error(body, "h");
        bool retry = body.len >= 4 && body.data[0] == (uint8_t)GT_E_RETRY && body.data[1] == 0 &&
                     body.data[2] == 0 && body.data[3] == 0;  // u32le code GT_E_RETRY
        if (e.code != (retry ? GT_E_RETRY : GT_E_POLICY) && e.code != GT_E_TRUNCATED) {
            __builtin_trap();
        }
        break;
    }
    }
    return 0;
}
