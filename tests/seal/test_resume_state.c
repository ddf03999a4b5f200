// seal/: the device-sealed resume state (resume.c). Round trip (with and without moments, labels kept);
// a state from another device secret, another device id, another agreement; every truncation;
// every flipped bit of header and tag and a sample of the body: each refused with the reason
// named and nothing restored (the body handed back is empty); fresh IVs; bad sizes refused.
#include "testlib.h"

#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>

#define NPARAMS 3000  // floats: 12 KB per part
static uint8_t secret[GT_RESUME_SECRET_BYTES], other_secret[GT_RESUME_SECRET_BYTES];
static uint8_t dev_id[GT_RESUME_DEVICE_ID_BYTES], agreement[GT_SHA256_BYTES];
static uint8_t params[4 * NPARAMS], m[4 * NPARAMS], v[4 * NPARAMS];
static const gt_sckpt_model shapes = {.max_seq_len = 64, .vocab_size = 256, .num_layers = 2,
                                      .num_heads = 4, .channels = 32, .padded_vocab_size = 256};

static int setup(void **state)
{
    (void)state;
    GT_ASSERT_OK(gt_random_bytes(secret, sizeof secret));
    GT_ASSERT_OK(gt_random_bytes(other_secret, sizeof other_secret));
    GT_ASSERT_OK(gt_random_bytes(dev_id, sizeof dev_id));
    memset(agreement, 0xA5, sizeof agreement);
    GT_ASSERT_OK(gt_random_bytes(params, sizeof params));
    GT_ASSERT_OK(gt_random_bytes(m, sizeof m));
    GT_ASSERT_OK(gt_random_bytes(v, sizeof v));
    return 0;
}

static gt_resume_header header_for(uint64_t step, bool moments)
{
    gt_resume_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.device_id, dev_id, sizeof h.device_id);
    memcpy(h.agreement_hash, agreement, sizeof h.agreement_hash);
    h.step = step;
    h.loader = (gt_resume_loader){.epoch = 1, .shard = 2, .sample = 3, .sample_tokens = 4,
                                  .seed = 5, .shuffle = 1};
    h.model = shapes;
    h.params_bytes = sizeof params;
    h.m_bytes = moments ? sizeof m : 0;
    h.v_bytes = moments ? sizeof v : 0;
    h.label_count = 2;
    memset(h.labels[0], 0x11, GT_RESUME_LABEL_BYTES);
    memset(h.labels[1], 0x22, GT_RESUME_LABEL_BYTES);
    return h;
}

static void seal_state(gt_buf *out, uint64_t step, bool moments, const uint8_t *sec)
{
    gt_resume_header h = header_for(step, moments);
    gt_span parts[3] = {{params, sizeof params}, {m, sizeof m}, {v, sizeof v}};
    gt_seal_spans sp = {.spans = parts, .count = moments ? 3 : 1};
    gt_seal_source src = gt_seal_spans_source(&sp);
    GT_ASSERT_OK(gt_resume_seal(&h, sec, &src, out));
    assert_int_equal(out->len, gt_resume_file_bytes(&h));
}

// Opening must fail with code and reason, restore nothing and leave the header zeroed.
static void assert_refused(gt_span file, const uint8_t *sec, const uint8_t *id,
                           const uint8_t *agr, gt_code code, const char *why)
{
    gt_resume_header h;
    gt_buf body = {0};
    GT_ASSERT_ERR(gt_resume_open(file, sec, id, agr, &h, &body), code, why);
    assert_int_equal(body.len, 0);
    for (size_t i = 0; i < body.cap; i++) {
        assert_int_equal(body.data[i], 0);  // no plaintext left in the staging buffer
    }
    assert_int_equal(h.params_bytes, 0);
    assert_int_equal(h.label_count, 0);
    gt_buf_free(&body);
}

static void round_trip(void **state)
{
    (void)state;
    gt_buf file = {0}, body = {0};
    seal_state(&file, 42, true, secret);
    assert_memory_equal(file.data, GT_RESUME_MAGIC, 8);
    assert_null(memmem(file.data, file.len, params, 64));  // ciphertext only
    gt_resume_header h;
    GT_ASSERT_OK(gt_resume_open(gt_buf_span(&file), secret, dev_id, agreement, &h, &body));
    assert_int_equal(h.step, 42);
    assert_int_equal(h.loader.sample, 3);
    assert_int_equal(h.loader.seed, 5);
    assert_int_equal(h.loader.shuffle, 1);
    assert_int_equal(h.model.channels, 32);
    assert_int_equal(h.label_count, 2);
    assert_int_equal(h.labels[1][0], 0x22);
    assert_int_equal(h.header_len, GT_RESUME_FIXED_BYTES + 2 * 16 + 12);
    assert_int_equal(body.len, 3 * sizeof params);
    assert_memory_equal(body.data, params, sizeof params);
    assert_memory_equal(body.data + sizeof params, m, sizeof m);
    assert_memory_equal(body.data + 2 * sizeof params, v, sizeof v);
    // Without moments (step 0): params only.
    gt_buf f0 = {0};
    seal_state(&f0, 0, false, secret);
    GT_ASSERT_OK(gt_resume_open(gt_buf_span(&f0), secret, dev_id, agreement, &h, &body));
    assert_int_equal(body.len, sizeof params);
    assert_memory_equal(body.data, params, sizeof params);
    // Two seals of the same state: fresh IVs, so different ciphertexts.
    gt_buf again = {0};
    seal_state(&again, 42, true, secret);
    gt_resume_header h1, h2;
    GT_ASSERT_OK(gt_resume_header_parse(&h1, file.data, file.len));
    GT_ASSERT_OK(gt_resume_header_parse(&h2, again.data, again.len));
    assert_memory_not_equal(h1.iv, h2.iv, GT_AEAD_IV_BYTES);
    assert_memory_not_equal(file.data + h1.header_len, again.data + h2.header_len, 64);
    gt_buf_free_nowipe(&file);
    gt_buf_free_nowipe(&f0);
    gt_buf_free_nowipe(&again);
    gt_buf_free(&body);
}

static void foreign_states_refused(void **state)
{
    (void)state;
    gt_buf file = {0};
    seal_state(&file, 7, true, secret);
    gt_span f = gt_buf_span(&file);
    // Another device: its own id differs, so the header names someone else.
    uint8_t other_id[GT_RESUME_DEVICE_ID_BYTES];
    memcpy(other_id, dev_id, sizeof other_id);
    other_id[5] ^= 0x40;
    assert_refused(f, secret, other_id, agreement, GT_E_AUTH, "sealed by another device");
    // Another device that claims this one's id: its secret derives another key.
    assert_refused(f, other_secret, dev_id, agreement, GT_E_AUTH, "does not authenticate");
    // The same device, another agreement.
    uint8_t other_agreement[GT_SHA256_BYTES];
    memset(other_agreement, 0x5A, sizeof other_agreement);
    assert_refused(f, secret, dev_id, other_agreement, GT_E_AUTH, "another agreement");
    // Rewriting the header's agreement to this session's does not help: the key and the AAD
    // bind the original one.
    gt_buf g = {0};
    gt_resume_header hh = header_for(7, true);
    memcpy(hh.agreement_hash, other_agreement, sizeof hh.agreement_hash);
    gt_span parts[3] = {{params, sizeof params}, {m, sizeof m}, {v, sizeof v}};
    gt_seal_spans sp = {.spans = parts, .count = 3};
    gt_seal_source src = gt_seal_spans_source(&sp);
    GT_ASSERT_OK(gt_resume_seal(&hh, secret, &src, &g));
    memcpy(g.data + 48, agreement, GT_SHA256_BYTES);
    assert_refused(gt_buf_span(&g), secret, dev_id, agreement, GT_E_AUTH,
                   "does not authenticate");
    gt_buf_free_nowipe(&g);
    gt_buf_free_nowipe(&file);
}

static void truncations_refused(void **state)
{
    (void)state;
    gt_buf file = {0};
    seal_state(&file, 7, true, secret);
    for (size_t n = 0; n < file.len; n += n < 400 ? 1 : 997) {
        gt_resume_header h;
        gt_buf body = {0};
        gt_err e = gt_resume_open((gt_span){file.data, n}, secret, dev_id, agreement, &h, &body);
        if (e.code != GT_E_TRUNCATED || body.len != 0) {
            fail_msg("%zu of %zu bytes: %s (%s)", n, file.len, gt_code_name(e.code), e.msg);
        }
        gt_buf_free(&body);
    }
    assert_refused((gt_span){file.data, file.len - 1}, secret, dev_id, agreement,
                   GT_E_TRUNCATED, "ends early");
    GT_ASSERT_OK(gt_buf_append(&file, "x", 1));
    assert_refused(gt_buf_span(&file), secret, dev_id, agreement, GT_E_FORMAT,
                   "after its end");
    gt_buf_free_nowipe(&file);
}

static void every_bit_flip_refused(void **state)
{
    (void)state;
    gt_buf file = {0};
    seal_state(&file, 7, true, secret);
    gt_resume_header h;
    GT_ASSERT_OK(gt_resume_header_parse(&h, file.data, file.len));
    size_t body_end = file.len - GT_AEAD_TAG_BYTES;
    for (size_t bit = 0; bit < 8 * file.len; bit++) {
        size_t at = bit / 8;
        if (at >= h.header_len && at < body_end && at % 101 != 0) {
            continue;  // the body: a sample (every byte of header and tag is flipped)
        }
        file.data[at] ^= (uint8_t)(1u << (bit % 8));
        gt_resume_header got;
        gt_buf body = {0};
        gt_err e = gt_resume_open(gt_buf_span(&file), secret, dev_id, agreement, &got, &body);
        file.data[at] ^= (uint8_t)(1u << (bit % 8));
        if (gt_is_ok(e) || body.len != 0 || e.msg[0] == '\0') {
            fail_msg("bit %zu (byte %zu): %s (%s), %zu bytes restored", bit, at,
                     gt_code_name(e.code), e.msg, body.len);
        }
        gt_buf_free(&body);
    }
    // A flip in the body or tag names the tag; one in the agreement field names the agreement.
    file.data[h.header_len + 10] ^= 1;
    assert_refused(gt_buf_span(&file), secret, dev_id, agreement, GT_E_AUTH,
                   "does not authenticate");
    file.data[h.header_len + 10] ^= 1;
    file.data[file.len - 1] ^= 0x80;
    assert_refused(gt_buf_span(&file), secret, dev_id, agreement, GT_E_AUTH,
                   "does not authenticate");
    file.data[file.len - 1] ^= 0x80;
    file.data[60] ^= 2;
    assert_refused(gt_buf_span(&file), secret, dev_id, agreement, GT_E_AUTH,
                   "another agreement");
    file.data[60] ^= 2;
    file.data[100] ^= 1;  // the loader position: bound by the AAD
    assert_refused(gt_buf_span(&file), secret, dev_id, agreement, GT_E_AUTH,
                   "does not authenticate");
    gt_buf_free_nowipe(&file);
}

static void seal_refuses_bad_sizes(void **state)
{
    (void)state;
    gt_buf out = {0};
    gt_span parts[1] = {{params, sizeof params}};
    gt_seal_spans sp = {.spans = parts, .count = 1};
    gt_seal_source src = gt_seal_spans_source(&sp);
    gt_resume_header h = header_for(5, false);  // a step without moments
    GT_ASSERT_ERR(gt_resume_seal(&h, secret, &src, &out), GT_E_FORMAT, "without optimizer");
    h = header_for(0, true);  // announces moments, the source has params only
    src = gt_seal_spans_source(&sp);
    GT_ASSERT_ERR(gt_resume_seal(&h, secret, &src, &out), GT_E_ARG, "the header announces");
    h = header_for(0, false);
    h.label_count = 2;
    memcpy(h.labels[1], h.labels[0], GT_RESUME_LABEL_BYTES);
    src = gt_seal_spans_source(&sp);
    GT_ASSERT_ERR(gt_resume_seal(&h, secret, &src, &out), GT_E_FORMAT, "repeats label");
    assert_int_equal(out.len, 0);
    gt_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(foreign_states_refused),
        cmocka_unit_test(truncations_refused),
        cmocka_unit_test(every_bit_flip_refused),
        cmocka_unit_test(seal_refuses_bad_sizes),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
