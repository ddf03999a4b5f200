// Fuzz: the holder protocol's ENCLAVE_QUOTE (gt_hp_enclave_quote_parse) and the trainer's
// appraisal of what it carries (gt_holder_quote_appraise). What parses writes back to the same
// bytes; no quote is ever accepted without a trusted root, whatever it holds.
#include <gputravel/travel.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char doc[] =
    "{\"version\":1,\"name\":\"f\",\"model\":{\"layers\":1,\"channels\":16,\"heads\":2,"
    "\"vocab\":256,\"max_seq\":16,\"init_seed\":1},\"training\":{\"steps\":1,\"batch\":1,"
    "\"seq\":16,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h\",\"identity_key\":"
    "\"1111111111111111111111111111111111111111111111111111111111111111\",\"endpoint\":"
    "\"127.0.0.1:7001\",\"dataset_id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"token_budget\":1,"
    "\"max_uses_per_chunk\":1,\"enclave\":{\"mrsigner\":"
    "\"2f9f8fd4fe12d772000000000000000000000000000000000000000000000000\"}}],\"trainer\":{},"
    "\"device\":{},\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gt_agreement a;
    static int parsed;
    if (!parsed) {
        if (!gt_is_ok(gt_agreement_parse(&a, (const uint8_t *)doc, sizeof doc - 1))) {
            __builtin_trap();
        }
        parsed = 1;
    }
    gt_span ev;
    if (!gt_is_ok(gt_hp_enclave_quote_parse((gt_span){data, size}, &ev))) {
        return 0;
    }
    if (ev.data < data || ev.data + ev.len > data + size || ev.len == 0) {
        __builtin_trap();
    }
    gt_writer w = gt_writer_init_dynamic();
    if (!gt_is_ok(gt_hp_enclave_quote_write(&w, ev)) || w.len != size ||
        memcmp(w.data, data, size) != 0) {
        __builtin_trap();
    }
    gt_writer_free(&w);
    uint8_t binding[GT_NET_BINDING_BYTES] = {0};
    gt_holder_enclave_seen seen;
    if (gt_is_ok(gt_holder_quote_appraise(&a, 0, binding, ev, NULL, 0, &seen))) {
        __builtin_trap();  // no root: nothing is authentic
    }
    return 0;
}
