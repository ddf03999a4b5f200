// travel/: the training agreement - a valid document, its hash, and each rule it must satisfy.
#include "testlib.h"

#include <gputravel/travel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_A "1111111111111111111111111111111111111111111111111111111111111111"
#define KEY_B "2222222222222222222222222222222222222222222222222222222222222222"
#define RKEY_A "3333333333333333333333333333333333333333333333333333333333333333"
#define DS_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DS_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ZERO31 "00000000000000000000000000000000000000000000000000000000000000"
#define FF30 "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"

// A template with one %s hole per replaceable part: model, holders, output.
static void make_doc(char *out, size_t cap, const char *model, const char *holder_b,
                     const char *output, const char *sim)
{
    snprintf(out, cap,
             "{\"version\":1,\"name\":\"demo\",\"model\":%s,"
             "\"training\":{\"steps\":10,\"batch\":4,\"seq\":32,\"learning_rate\":0.0003},"
             "\"holders\":[{\"name\":\"alice\",\"identity_key\":\"" KEY_A "\","
             "\"endpoint\":\"127.0.0.1:7001\",\"dataset_id\":\"" DS_A "\","
             "\"token_budget\":100000,\"max_uses_per_chunk\":2,\"recipient_key\":\"" RKEY_A "\"}%s],"
             "\"trainer\":{},\"device\":{},%s\"output\":%s}",
             model ? model : "{\"layers\":2,\"channels\":64,\"heads\":4,\"vocab\":256,"
                             "\"max_seq\":64,\"init_seed\":7}",
             holder_b ? holder_b : ",{\"name\":\"bob\",\"identity_key\":\"" KEY_B "\","
                                   "\"endpoint\":\"127.0.0.1:7002\",\"dataset_id\":\"" DS_B "\","
                                   "\"token_budget\":5000,\"max_uses_per_chunk\":1}",
             sim ? sim : "\"allow_simulation\":true,",
             output ? output : "{\"kind\":\"sealed_checkpoint\",\"recipients\":[\"alice\"]}");
}

static void valid_document(void **state)
{
    (void)state;
    char doc[4096];
    make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
    gt_agreement a;
    GT_ASSERT_OK(gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc)));
    assert_int_equal(a.holder_count, 2);
    assert_string_equal(a.holders[1].name, "bob");
    assert_int_equal(a.holders[1].token_budget, 5000);
    assert_int_equal(a.holders[0].max_uses_per_chunk, 2);
    assert_int_equal(a.holders[0].identity_key[31], 0x11);
    assert_int_equal(a.layers, 2);
    assert_int_equal(a.seq, 32);
    assert_true(a.allow_simulation);
    assert_int_equal(a.output, GT_OUTPUT_SEALED_CHECKPOINT);
    assert_string_equal(a.recipients[0], "alice");
    assert_int_equal(a.recipient_count, 1);
    assert_true(a.holders[0].has_recipient_key);
    assert_int_equal(a.holders[0].recipient_key[0], 0x33);
    assert_false(a.holders[1].has_recipient_key);  // bob is no recipient: his key is optional
    uint8_t h[32];
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, h, doc, strlen(doc)));
    assert_memory_equal(a.hash, h, 32);
    assert_non_null(gt_agreement_find_holder(&a, "alice"));
    assert_null(gt_agreement_find_holder(&a, "carol"));

    // One changed byte (even whitespace) is another agreement.
    size_t n = strlen(doc);
    doc[n] = ' ';
    doc[n + 1] = '\0';
    gt_agreement b;
    GT_ASSERT_OK(gt_agreement_parse(&b, (const uint8_t *)doc, n + 1));
    assert_memory_not_equal(a.hash, b.hash, 32);
}

// The document with its "trainer" object replaced by trainer (and "device" by device).
static gt_err parse_parties(gt_agreement *a, const char *trainer, const char *device)
{
    char doc[4096], out[4200];
    make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
    char *at = strstr(doc, "\"trainer\":{},\"device\":{}");
    assert_non_null(at);
    snprintf(out, sizeof out, "%.*s\"trainer\":%s,\"device\":%s%s", (int)(at - doc), doc,
             trainer, device, at + strlen("\"trainer\":{},\"device\":{}"));
    return gt_agreement_parse(a, (const uint8_t *)out, strlen(out));
}

// trainer.ranks (issue 16): how many data-parallel trainer ranks the agreement admits.
static void trainer_ranks(void **state)
{
    (void)state;
    gt_agreement a;
    GT_ASSERT_OK(parse_parties(&a, "{}", "{}"));
    assert_int_equal(a.ranks, 1);  // absent: one trainer
    GT_ASSERT_OK(parse_parties(&a, "{\"ranks\":4}", "{}"));
    assert_int_equal(a.ranks, 4);
    gt_device_outputs o;
    gt_agreement_device_outputs(&a, &o);
    assert_int_equal(o.peers.ranks, 4);
    assert_true(o.peers.allow_simulation);
    assert_memory_equal(o.peers.agreement_hash, a.hash, sizeof a.hash);
    GT_ASSERT_ERR(parse_parties(&a, "{\"ranks\":0}", "{}"), GT_E_FORMAT, "'ranks' is 0");
    GT_ASSERT_ERR(parse_parties(&a, "{\"ranks\":257}", "{}"), GT_E_FORMAT, "expected 1..256");
    GT_ASSERT_ERR(parse_parties(&a, "{\"ranks\":\"2\"}", "{}"), GT_E_FORMAT,
                  "trainer.ranks: expected an integer");
    GT_ASSERT_ERR(parse_parties(&a, "{}", "{\"ranks\":2}"), GT_E_FORMAT,
                  "device.ranks: unknown field");
}

static void each_rule_is_enforced(void **state)
{
    (void)state;
    struct { const char *model, *holder_b, *output, *sim, *says; } rows[] = {
        {"{\"layers\":2,\"channels\":66,\"heads\":4,\"vocab\":256,\"max_seq\":64,\"init_seed\":1}",
         NULL, NULL, NULL, "multiple of heads"},
        {"{\"layers\":2,\"channels\":64,\"heads\":4,\"vocab\":256,\"max_seq\":16,\"init_seed\":1}",
         NULL, NULL, NULL, "'seq' is 32"},
        {NULL, ",{\"name\":\"alice\",\"identity_key\":\"" KEY_B "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1}",
         NULL, NULL, "appears twice"},
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"" KEY_B "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_A "\",\"token_budget\":1,\"max_uses_per_chunk\":1}",
         NULL, NULL, "same dataset"},
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"22\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1}",
         NULL, NULL, "identity_key"},
        // The identity (y = 1) and a non-canonical order-4 point (y = p): a forged signature
        // would verify under either for every message.
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"01" ZERO31 "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1}",
         NULL, NULL, "holder bob: identity_key: ed25519 public key: a point of small order"},
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"ed" FF30 "7f\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1}",
         NULL, NULL, "not canonical"},
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"" KEY_B "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":0,\"max_uses_per_chunk\":1}",
         NULL, NULL, "token_budget must be positive"},
        {NULL, ",{\"name\":\"b o b\",\"identity_key\":\"" KEY_B "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1}",
         NULL, NULL, "may hold only"},
        {NULL, NULL, "{\"kind\":\"sealed_checkpoint\",\"recipients\":[\"carol\"]}", NULL,
         "recipient 'carol' is not a holder"},
        {NULL, NULL, "{\"kind\":\"sealed_checkpoint\",\"recipients\":[\"alice\",\"bob\"]}",
         NULL, "recipient 'bob' has no 'recipient_key'"},
        {NULL, NULL, "{\"kind\":\"sealed_checkpoint\",\"recipients\":[\"alice\",\"alice\"]}",
         NULL, "recipient 'alice' appears twice"},
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"" KEY_B "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1,"
               "\"recipient_key\":\"44\"}",
         NULL, NULL, "recipient_key"},
        {NULL, ",{\"name\":\"bob\",\"identity_key\":\"" KEY_B "\",\"endpoint\":\"h:1\","
               "\"dataset_id\":\"" DS_B "\",\"token_budget\":1,\"max_uses_per_chunk\":1,"
               "\"recipient_key\":\"" RKEY_A "\"}",
         NULL, NULL, "same recipient_key"},
        {NULL, NULL, "{\"kind\":\"everything\"}", NULL, "kind 'everything'"},
        {NULL, NULL, NULL, "", "measurement lists are required"},
        {NULL, NULL, NULL, "\"allow_simulation\":1,",
         "allow_simulation: expected a bool (true or false), got a number"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char doc[4096];
        make_doc(doc, sizeof doc, rows[i].model, rows[i].holder_b, rows[i].output, rows[i].sim);
        gt_agreement a;
        gt_err e = gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc));
        if (e.code == GT_E_NONE || strstr(e.msg, rows[i].says) == NULL) {
            fail_msg("row %zu: expected '%s', got %s '%s'", i, rows[i].says,
                     gt_code_name(e.code), e.msg);
        }
        assert_int_equal(a.holder_count, 0);  // nothing half-parsed survives
    }
    gt_agreement a;
    GT_ASSERT_CODE(gt_agreement_parse(&a, (const uint8_t *)"{\"version\":2}", 13),
                   GT_E_UNSUPPORTED);
    GT_ASSERT_CODE(gt_agreement_parse(&a, (const uint8_t *)"[", 1), GT_E_FORMAT);
}

static void measurement_lists(void **state)
{
    (void)state;
    gt_measurement_list l = {.count = 0};
    uint8_t m[GT_MEASUREMENT_BYTES] = {1};
    assert_true(gt_measurement_allowed(&l, m));
    l.count = 1;
    memset(l.values[0], 2, GT_MEASUREMENT_BYTES);
    assert_false(gt_measurement_allowed(&l, m));
    memcpy(l.values[0], m, GT_MEASUREMENT_BYTES);
    assert_true(gt_measurement_allowed(&l, m));
}

// "transfer": absent is travel + conventional-keyrelease only; a list is exactly what it names.
static void transfer_modes(void **state)
{
    (void)state;
    char doc[4096];
    gt_agreement a;
    make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
    GT_ASSERT_OK(gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc)));
    assert_int_equal(a.transfers, GT_TRANSFER_DEFAULT);
    assert_true(gt_agreement_allows(&a, GT_TRANSFER_TRAVEL));
    assert_true(gt_agreement_allows(&a, GT_TRANSFER_CONVENTIONAL_KEYRELEASE));
    assert_false(gt_agreement_allows(&a, GT_TRANSFER_CONVENTIONAL));
    assert_false(gt_agreement_allows(&a, GT_TRANSFER_INSECURE_HOST_TRIP));
    assert_false(gt_agreement_allows(&a, GT_TRANSFER_MODE_COUNT));
    char list[96];
    gt_agreement_transfer_list(&a, list, sizeof list);
    assert_string_equal(list, "conventional-keyrelease, travel");
    gt_err e = gt_agreement_transfer_check(&a, GT_TRANSFER_CONVENTIONAL, "FETCH plain");
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "FETCH plain: transfer mode 'conventional' is not in the "
                                  "agreement's transfer list (conventional-keyrelease, travel)"));
    GT_ASSERT_OK(gt_agreement_transfer_check(&a, GT_TRANSFER_TRAVEL, "TRAVEL"));

    make_doc(doc, sizeof doc, NULL, NULL, NULL,
             "\"allow_simulation\":true,\"transfer\":[\"insecure-host-trip\",\"conventional\"],");
    GT_ASSERT_OK(gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc)));
    assert_int_equal(a.transfers, GT_TRANSFER_BIT(GT_TRANSFER_INSECURE_HOST_TRIP) |
                                      GT_TRANSFER_BIT(GT_TRANSFER_CONVENTIONAL));
    assert_false(gt_agreement_allows(&a, GT_TRANSFER_TRAVEL));
    gt_agreement_transfer_list(&a, list, sizeof list);
    assert_string_equal(list, "conventional, insecure-host-trip");
    gt_agreement_transfer_list(&a, list, 8);  // cut, still a string
    assert_true(strlen(list) < 8);

    struct { const char *transfer, *says; } rows[] = {
        {"[]", "'transfer' must be a non-empty array"},
        {"\"travel\"", "transfer: expected an array, got a string"},
        {"{}", "transfer: expected an array, got an object"},
        {"[\"travel\",\"teleport\"]", "'transfer'[1]: unknown transfer mode 'teleport'"},
        {"[\"Travel\"]", "'transfer'[0]: unknown transfer mode 'Travel'"},
        {"[\"\"]", "'transfer'[0]: unknown transfer mode ''"},
        {"[\"travel\",\"conventional\",\"travel\"]", "'transfer'[2]: 'travel' appears twice"},
        {"[\"travel\",7]", "transfer[1]: expected a string, got a number"},
        {"[null]", "transfer[0]: expected a string, got null"},
        {"[\"travel\",\"conventional\",\"conventional-keyrelease\",\"insecure-host-trip\","
         "\"travel\"]", "more than 4 entries"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char sim[256];
        snprintf(sim, sizeof sim, "\"allow_simulation\":true,\"transfer\":%s,", rows[i].transfer);
        make_doc(doc, sizeof doc, NULL, NULL, NULL, sim);
        e = gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc));
        if (e.code != GT_E_FORMAT || strstr(e.msg, rows[i].says) == NULL) {
            fail_msg("row %zu: expected GT_E_FORMAT '%s', got %s '%s'", i, rows[i].says,
                     gt_code_name(e.code), e.msg);
        }
        assert_int_equal(a.transfers, 0);  // nothing half-parsed survives
        assert_int_equal(a.holder_count, 0);
    }
}

// Replaces the first occurrence of `from` in doc by `to` (the test documents are short).
static void patch(char *doc, size_t cap, const char *from, const char *to)
{
    char *at = strstr(doc, from);
    assert_non_null(at);
    char rest[4096];
    snprintf(rest, sizeof rest, "%s", at + strlen(from));
    snprintf(at, cap - (size_t)(at - doc), "%s%s", to, rest);
}

// The contract is read strictly: an unknown, misspelled, repeated or wrongly typed field is an
// error naming its JSON path, never silently ignored or coerced.
static void strict_shape(void **state)
{
    (void)state;
    struct { const char *from, *to, *says; } rows[] = {
        {"\"version\":1,", "\"version\":1,\"typo_field\":1,",
         "agreement: typo_field: unknown field (known here: version, name, model"},
        {"\"learning_rate\":0.0003}", "\"learning_rate\":0.0003,\"warmup\":5}",
         "agreement: training.warmup: unknown field"},
        {"\"allow_simulation\":true", "\"allow_simulaton\":true",
         "agreement: allow_simulaton: unknown field (did you mean allow_simulation?)"},
        {"\"layers\":2", "\"layers\":\"2\"",
         "agreement: model.layers: expected an integer, got a string"},
        {"\"layers\":2", "\"layers\":2.5", "model.layers: expected a whole number >= 0, got 2.5"},
        {"\"layers\":2", "\"layers\":-2", "model.layers: expected a whole number >= 0, got -2"},
        {"\"heads\":4,", "", "agreement: model.heads: missing (an integer is required)"},
        {"\"name\":\"demo\",", "\"name\":\"demo\",\"name\":\"demo2\",",
         "agreement: name: field given twice"},
        {"\"endpoint\":\"127.0.0.1:7002\"", "\"endpont\":\"127.0.0.1:7002\"",
         "holders[1].endpont: unknown field (did you mean endpoint?)"},
        {"\"token_budget\":5000,", "\"token_budget\":5000,\"token_budget\":6000,",
         "holders[1].token_budget: field given twice"},
        {"\"token_budget\":5000", "\"token_budget\":\"5k\"",
         "holders[1].token_budget: expected an integer, got a string that is not one"},
        {"\"trainer\":{}", "\"trainer\":{\"accepted_measurement\":[]}",
         "trainer.accepted_measurement: unknown field (did you mean accepted_measurements?)"},
        {"\"device\":{}", "\"device\":[]", "agreement: device: expected an object, got an array"},
        {"\"learning_rate\":0.0003", "\"learning_rate\":\"0.0003\"",
         "training.learning_rate: expected a number, got a string"},
        {"\"seq\":32,", "\"seq\":32,\"program\":7,",
         "training.program: expected a string, got a number"},
        {"\"recipients\":[\"alice\"]", "\"recipients\":[\"alice\"],\"recipient\":[]",
         "output.recipient: unknown field (did you mean recipients?)"},
        {"\"kind\":\"sealed_checkpoint\",", "", "output.kind: missing (a string is required)"},
        {"\"output\":", "\"outputs\":{\"loss\":{\"evry\":2}},\"output\":",
         "outputs.loss.evry: unknown field (did you mean every?)"},
        {"\"output\":", "\"outputs\":{\"loss\":3},\"output\":",
         "outputs.loss: expected false or an object {every, mantissa_bits}, got a number"},
        {"\"output\":", "\"outputs\":{\"grad_norm\":\"no\"},\"output\":",
         "outputs.grad_norm: expected a bool (true or false), got a string"},
        {"\"holders\":[{", "\"holders\":[7,{", "holders[0]: expected an object, got a number"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char doc[4096];
        make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
        patch(doc, sizeof doc, rows[i].from, rows[i].to);
        gt_agreement a;
        gt_err e = gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc));
        if (e.code != GT_E_FORMAT || strstr(e.msg, rows[i].says) == NULL) {
            fail_msg("row %zu: expected FORMAT '%s', got %s '%s'", i, rows[i].says,
                     gt_code_name(e.code), e.msg);
        }
        assert_int_equal(a.holder_count, 0);
    }
    // Values beyond 2^53 may be written as decimal strings where the schema allows them.
    char doc[4096];
    make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
    patch(doc, sizeof doc, "\"init_seed\":7", "\"init_seed\":\"18446744073709551615\"");
    patch(doc, sizeof doc, "\"token_budget\":5000", "\"token_budget\":\"5000\"");
    gt_agreement a;
    GT_ASSERT_OK(gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc)));
    assert_true(a.init_seed == UINT64_MAX);
    assert_int_equal(a.holders[1].token_budget, 5000);
    // Another version is refused as such, whatever its fields.
    GT_ASSERT_CODE(gt_agreement_parse(&a, (const uint8_t *)"{\"version\":2,\"new\":1}", 21),
                   GT_E_UNSUPPORTED);
    GT_ASSERT_CODE(gt_agreement_parse(&a, (const uint8_t *)"[1]", 3), GT_E_FORMAT);
}

typedef struct {
    char lines[8][256];
    unsigned n;
} collected;

static void collect_problem(void *ctx, const char *problem)
{
    collected *c = ctx;
    if (c->n < 8) {
        snprintf(c->lines[c->n++], sizeof c->lines[0], "%s", problem);
    }
}

// The lint reports every shape problem, in document order, up to its maximum.
static void lint_lists_every_problem(void **state)
{
    (void)state;
    char doc[4096];
    make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
    patch(doc, sizeof doc, "\"layers\":2", "\"layers\":\"2\"");
    patch(doc, sizeof doc, "\"learning_rate\":0.0003}", "\"learning_rate\":0.0003,\"warmup\":5}");
    patch(doc, sizeof doc, "\"allow_simulation\":true", "\"allow_simulaton\":true");
    collected c = {0};
    unsigned n = 0;
    GT_ASSERT_OK(gt_agreement_lint((const uint8_t *)doc, strlen(doc), collect_problem, &c, 8, &n));
    assert_int_equal(n, 3);
    assert_string_equal(c.lines[0], "model.layers: expected an integer, got a string");
    assert_non_null(strstr(c.lines[1], "training.warmup: unknown field"));
    assert_string_equal(c.lines[2], "allow_simulaton: unknown field (did you mean "
                                    "allow_simulation?)");
    c.n = 0;
    GT_ASSERT_OK(gt_agreement_lint((const uint8_t *)doc, strlen(doc), collect_problem, &c, 2, &n));
    assert_int_equal(n, 2);  // cut at max
    make_doc(doc, sizeof doc, NULL, NULL, NULL, NULL);
    GT_ASSERT_OK(gt_agreement_lint((const uint8_t *)doc, strlen(doc), collect_problem, &c, 8, &n));
    assert_int_equal(n, 0);
    GT_ASSERT_CODE(gt_agreement_lint((const uint8_t *)"{", 1, collect_problem, &c, 8, &n),
                   GT_E_FORMAT);
}

// Every cut of a valid document is refused whole; every flipped byte is refused or, when it
// still reads as an agreement (a digit changed), is another agreement with another hash.
static void truncations_and_flips(void **state)
{
    (void)state;
    char doc[4096];
    // With optional fields too: a lenient reader would take a misspelled one as absent.
    make_doc(doc, sizeof doc, NULL, NULL, NULL,
             "\"allow_simulation\":true,\"transfer\":[\"travel\"],\"outputs\":{\"grad_norm\":false,"
             "\"resume\":true,\"loss\":{\"every\":1,\"mantissa_bits\":23}},");
    size_t n = strlen(doc);
    gt_agreement *good = malloc(sizeof *good), *a = malloc(sizeof *a);
    assert_non_null(good);
    assert_non_null(a);
    GT_ASSERT_OK(gt_agreement_parse(good, (const uint8_t *)doc, n));
    for (size_t cut = 0; cut < n; cut++) {
        gt_err e = gt_agreement_parse(a, (const uint8_t *)doc, cut);
        if (gt_is_ok(e)) {
            fail_msg("a document cut at %zu of %zu was accepted", cut, n);
        }
        assert_int_equal(a->holder_count, 0);
    }
    // Which bytes belong to a field name: a quoted string followed by ':'. (No two field names
    // of one object differ in a single bit, so a flipped name is never another valid one.)
    bool in_name[4096] = {false};
    for (size_t i = 0; i < n; i++) {
        if (doc[i] != '"') {
            continue;
        }
        size_t j = i + 1;
        while (j < n && doc[j] != '"') {
            j++;
        }
        for (size_t k = i + 1; k < j && j + 1 < n && doc[j + 1] == ':'; k++) {
            in_name[k] = true;
        }
        i = j;
    }
    unsigned names = 0;
    for (size_t i = 0; i < n; i++) {
        char saved = doc[i];
        doc[i] = (char)(doc[i] ^ 0x01);
        gt_err e = gt_agreement_parse(a, (const uint8_t *)doc, n);
        if (in_name[i] && gt_is_ok(e)) {
            fail_msg("a flipped field name at %zu was accepted: %.40s", i, doc + i - 5);
        }
        names += in_name[i];
        if (gt_is_ok(e)) {
            assert_memory_not_equal(a->hash, good->hash, GT_SHA256_BYTES);
        } else {
            assert_int_equal(a->holder_count, 0);
        }
        doc[i] = saved;
    }
    assert_true(names > 200);  // the scan found the names
    free(good);
    free(a);
}

// holders[i].enclave: accepted with either identity, parsed into the holder; refused (naming the
// member) when unknown, repeated, of bad hex or length, out of range, or naming neither
// identity; and the agreement's hash changes with it.
#define MRS "ab" "000000000000000000000000000000000000000000000000000000000000cd"
static void holder_enclave_field(void **state)
{
    (void)state;
    char base[4096], doc[4096];
    make_doc(base, sizeof base, NULL, NULL, NULL, NULL);
    gt_agreement *a = calloc(1, sizeof *a), *plain = calloc(1, sizeof *plain);
    assert_non_null(a);
    assert_non_null(plain);
    GT_ASSERT_OK(gt_agreement_parse(plain, (const uint8_t *)base, strlen(base)));
    assert_false(plain->holders[0].enclave.present);
    snprintf(doc, sizeof doc, "%s", base);
    patch(doc, sizeof doc, "\"max_uses_per_chunk\":2,",
          "\"max_uses_per_chunk\":2,\"enclave\":{\"mrsigner\":\"" MRS "\",\"isvprodid\":7,"
          "\"min_isvsvn\":3,\"debug\":true},");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
    const gt_agreement_enclave *e = &a->holders[0].enclave;
    assert_true(e->present && e->has_mrsigner && !e->has_mrenclave && e->has_isvprodid);
    assert_int_equal(e->mrsigner[0], 0xab);
    assert_int_equal(e->mrsigner[31], 0xcd);
    assert_int_equal(e->isvprodid, 7);
    assert_int_equal(e->min_isvsvn, 3);
    assert_true(e->debug);
    assert_false(a->holders[1].enclave.present);
    assert_memory_not_equal(a->hash, plain->hash, 32);  // part of what every party signs
    // mrenclave alone, defaults for the rest
    snprintf(doc, sizeof doc, "%s", base);
    patch(doc, sizeof doc, "\"max_uses_per_chunk\":1}",
          "\"max_uses_per_chunk\":1,\"enclave\":{\"mrenclave\":\"" MRS "\"}}");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
    e = &a->holders[1].enclave;
    assert_true(e->present && !e->has_mrsigner && e->has_mrenclave && !e->has_isvprodid);
    assert_false(e->debug);
    assert_int_equal(e->min_isvsvn, 0);
    struct {
        const char *enclave, *says;
    } bad[] = {
        {"{\"mrsigner\":\"" MRS "\",\"mrsignr\":1}",
         "holders[0].enclave.mrsignr: unknown field (did you mean mrsigner?)"},
        {"{\"mrsigner\":\"" MRS "\",\"mrsigner\":\"" MRS "\"}",
         "holders[0].enclave.mrsigner: field given twice"},
        {"{\"mrsigner\":\"zz" MRS "\"}", "enclave.mrsigner (64 hex digits)"},
        {"{\"mrsigner\":\"abcd\"}", "enclave.mrsigner (64 hex digits)"},
        {"{\"mrenclave\":\"" MRS "00\"}", "enclave.mrenclave (64 hex digits)"},
        {"{\"isvprodid\":1}", "names neither mrsigner nor mrenclave"},
        {"{}", "names neither mrsigner nor mrenclave"},
        {"{\"mrsigner\":\"" MRS "\",\"isvprodid\":70000}", "'isvprodid' is 70000"},
        {"{\"mrsigner\":\"" MRS "\",\"min_isvsvn\":-1}", "enclave.min_isvsvn: expected a whole"},
        {"{\"mrsigner\":\"" MRS "\",\"debug\":1}", "enclave.debug: expected a bool"},
        {"\"" MRS "\"", "holders[0].enclave: expected an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char to[512];
        snprintf(to, sizeof to, "\"max_uses_per_chunk\":2,\"enclave\":%s,", bad[i].enclave);
        snprintf(doc, sizeof doc, "%s", base);
        patch(doc, sizeof doc, "\"max_uses_per_chunk\":2,", to);
        gt_err err = gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc));
        if (gt_is_ok(err) || strstr(err.msg, bad[i].says) == NULL) {
            fail_msg("row %zu: %s -> %s (wanted '%s')", i, bad[i].enclave,
                     gt_is_ok(err) ? "accepted" : err.msg, bad[i].says);
        }
    }
    free(a);
    free(plain);
}

int main(void)


{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_document),
        cmocka_unit_test(each_rule_is_enforced),
        cmocka_unit_test(trainer_ranks),
        cmocka_unit_test(measurement_lists),
        cmocka_unit_test(transfer_modes),
        cmocka_unit_test(strict_shape),
        cmocka_unit_test(lint_lists_every_problem),
        cmocka_unit_test(truncations_and_flips),
        cmocka_unit_test(holder_enclave_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
