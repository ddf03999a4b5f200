// holder/: a holder named by enclave (docs/holder-enclave.md "Named by enclave"), INSECURE
// SIMULATION. The holder enclave's QUOTE ECALL and the vQE make the quote; the trainer's check
// (travel.h gt_holder_quote_appraise) accepts it only for the agreement's enclave identity, this
// agreement, this holder's identity key and this channel, on an accepted host. One case per
// attack.
#include "testlib.h"

#include <gputravel/holder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Real TEEs only: the parties' measurement lists are required then.
#define MEASURED "{\"accepted_measurements\":[\"" IDKEY IDKEY_HALF "\"]}"
#define IDKEY_HALF "11111111111111111111111111111111"
#define IDKEY "1111111111111111111111111111111111111111111111111111111111111111"

typedef struct {
    char dir[4096], root_dir[4200], other_root[4200], vqe_dir[4200];
    char pub[4400], other_pub[4400];
    gt_sgx_platform pf;
    uint8_t mrsigner[32], mrenclave[32];  // the holder enclave this build signed
    uint8_t identity_key[32];
    uint8_t binding[GT_NET_BINDING_BYTES];
} fixture;

static fixture F;

static gt_sgx_platform test_platform(void)
{
    gt_sgx_platform pf;
    for (int i = 0; i < 16; i++) {
        pf.root[i] = (uint8_t)(0x61 + i);
        pf.cpusvn[i] = 2;
        pf.ownerepoch[i] = (uint8_t)(0x20 + i);
        pf.seal_key_fuses[i] = (uint8_t)(0xa0 + i);
    }
    return pf;
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(F.dir, sizeof F.dir);
    snprintf(F.root_dir, sizeof F.root_dir, "%s/sim", F.dir);
    snprintf(F.other_root, sizeof F.other_root, "%s/sim-other", F.dir);
    snprintf(F.vqe_dir, sizeof F.vqe_dir, "%s/vqe", F.dir);
    gt_pkey *k = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&k, F.pub, sizeof F.pub, F.root_dir, true));
    gt_pkey_free(k);
    GT_ASSERT_OK(gt_sim_root_open(&k, F.other_pub, sizeof F.other_pub, F.other_root, true));
    gt_pkey_free(k);
    GT_ASSERT_OK(gt_mkdir_p(F.vqe_dir, 0700));
    F.pf = test_platform();
    GT_ASSERT_OK(gt_hex_decode_exact(F.identity_key, 32, IDKEY));
    for (int i = 0; i < GT_NET_BINDING_BYTES; i++) {
        F.binding[i] = (uint8_t)(0x70 ^ i);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(F.dir);
    return 0;
}

// An agreement naming holder "hospital" (identity key IDKEY) by enclave_json (NULL: not named).
static void agreement_make(gt_agreement *a, const char *enclave_json, bool sim)
{
    char doc[4096];
    char encl[512] = "";
    if (enclave_json != NULL) {
        snprintf(encl, sizeof encl, ",\"enclave\":%s", enclave_json);
    }
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"q\",\"model\":{\"layers\":1,\"channels\":16,\"heads\":2,"
             "\"vocab\":256,\"max_seq\":16,\"init_seed\":1},\"training\":{\"steps\":1,"
             "\"batch\":1,\"seq\":16,\"learning_rate\":0.001},\"holders\":[{\"name\":"
             "\"hospital\",\"identity_key\":\"" IDKEY "\",\"endpoint\":\"127.0.0.1:7001\","
             "\"dataset_id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"token_budget\":100,"
             "\"max_uses_per_chunk\":1%s}],\"trainer\":%s,\"device\":%s,"
             "\"allow_simulation\":%s,\"output\":{\"kind\":\"loss_only\"}}",
             encl, sim ? "{}" : MEASURED, sim ? "{}" : MEASURED, sim ? "true" : "false");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

// The signer's agreement entry: {"mrsigner": <this build's holder enclave signer>, extra}.
static void by_signer(char *out, size_t cap, const uint8_t mrsigner[32], const char *extra)
{
    char hex[65];
    gt_hex_encode(hex, sizeof hex, mrsigner, 32);
    snprintf(out, cap, "{\"mrsigner\":\"%s\"%s}", hex, extra ? extra : "");
}

static gt_holder_enclave *enclave_start(void)
{
    char image[512], sig[512];
    snprintf(image, sizeof image, "%s/holder.bin", GT_ENCLAVE_DIR);
    snprintf(sig, sizeof sig, "%s/holder.sig", GT_ENCLAVE_DIR);
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = F.root_dir};
    gt_holder_enclave_config cfg = {.image_path = image, .sigstruct_path = sig,
                                    .process_path = GT_ENCLAVE_PROCESS_PATH, .platform = &F.pf,
                                    .vqe_dir = F.vqe_dir, .vqe_host = &host};
    gt_holder_enclave *he = NULL;
    GT_ASSERT_OK(gt_holder_enclave_start(&he, &cfg));
    return he;
}

// The holder enclave, its TERMS under terms_hash, quoted for (identity key, binding).
static void enclave_quote(const uint8_t terms_hash[32], const uint8_t key[32],
                          const uint8_t binding[GT_NET_BINDING_BYTES], gt_buf *ev)
{
    gt_holder_enclave *he = enclave_start();
    const gt_sgx_identity *id = gt_holder_enclave_identity(he);
    memcpy(F.mrsigner, id->mrsigner, 32);
    memcpy(F.mrenclave, id->mrenclave, 32);
    uint8_t session[32];
    GT_ASSERT_CODE(gt_holder_enclave_quote(he, session, ev), GT_E_STATE);  // before TERMS
    uint64_t tokens[1] = {50};
    gt_holder_enclave_terms t = {.max_uses_per_chunk = 1, .token_budget = 100,
                                 .chunk_count = 1, .tokens = tokens};
    memcpy(t.agreement_hash, terms_hash, 32);
    GT_ASSERT_OK(gt_holder_enclave_set_terms(he, &t));
    GT_ASSERT_OK(gt_holder_quote_session(session, key, binding));
    GT_ASSERT_OK(gt_holder_enclave_quote(he, session, ev));
    gt_holder_enclave_stop(he);
}

static gt_err appraise(const gt_agreement *a, const uint8_t binding[GT_NET_BINDING_BYTES],
                       const gt_buf *ev, const char *root_pub, gt_holder_enclave_seen *seen)
{
    gt_attest_file root = {.path = root_pub};
    return gt_holder_quote_appraise(a, 0, binding, gt_buf_span(ev), &root, 1, seen);
}

// The honest case, then each field the agreement names, each with its own holder enclave run
// (TERMS is that agreement's): the error names the field.
static void identity_fields(void **state)
{
    (void)state;
    gt_agreement *a = calloc(1, sizeof *a);
    assert_non_null(a);
    gt_buf ev = {0};
    gt_holder_enclave_seen seen;
    // learn the signer first (an honest quote under a placeholder agreement)
    agreement_make(a, "{\"mrsigner\":\"" IDKEY "\"}", true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    gt_buf_free_nowipe(&ev);
    char encl[512], hex[65];
    by_signer(encl, sizeof encl, F.mrsigner, ",\"isvprodid\":0,\"min_isvsvn\":0,\"debug\":false");
    agreement_make(a, encl, true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    GT_ASSERT_OK(appraise(a, F.binding, &ev, F.pub, &seen));
    assert_memory_equal(seen.mrsigner, F.mrsigner, 32);
    assert_memory_equal(seen.mrenclave, F.mrenclave, 32);
    assert_string_equal(seen.host, "sim");
    assert_true(seen.insecure_simulation);
    assert_false(seen.debug);
    gt_buf_free_nowipe(&ev);
    // pinned by MRENCLAVE alone: accepted too
    gt_hex_encode(hex, sizeof hex, F.mrenclave, 32);
    snprintf(encl, sizeof encl, "{\"mrenclave\":\"%s\"}", hex);
    agreement_make(a, encl, true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    GT_ASSERT_OK(appraise(a, F.binding, &ev, F.pub, &seen));
    gt_buf_free_nowipe(&ev);

    struct {
        const char *what, *enclave, *says;
    } rows[] = {
        {"another signer", "{\"mrsigner\":\"" IDKEY "\"}", "holders[0].enclave.mrsigner"},
        {"another build", "{\"mrenclave\":\"" IDKEY "\"}", "holders[0].enclave.mrenclave"},
        {"another product", NULL, "holders[0].enclave.isvprodid"},
        {"ISVSVN below the minimum", NULL, "holders[0].enclave.min_isvsvn"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (i == 2) {
            by_signer(encl, sizeof encl, F.mrsigner, ",\"isvprodid\":9");
        } else if (i == 3) {
            by_signer(encl, sizeof encl, F.mrsigner, ",\"min_isvsvn\":1");
        } else {
            snprintf(encl, sizeof encl, "%s", rows[i].enclave);
        }
        agreement_make(a, encl, true);
        enclave_quote(a->hash, F.identity_key, F.binding, &ev);
        gt_err err = appraise(a, F.binding, &ev, F.pub, &seen);
        if (err.code != GT_E_POLICY || strstr(err.msg, rows[i].says) == NULL ||
            strstr(err.msg, "holder hospital") == NULL) {
            fail_msg("%s: %s (wanted '%s')", rows[i].what, gt_is_ok(err) ? "accepted" : err.msg,
                     rows[i].says);
        }
        gt_buf_free_nowipe(&ev);
    }
    free(a);
}

// A DEBUG enclave of the right signer: refused unless the agreement says debug. The vQE quotes
// what the platform's EREPORT says; here it quotes a debug identity directly (what it would
// have quoted for a debug launch of the same enclave).
static void debug_enclave(void **state)
{
    (void)state;
    gt_agreement *a = calloc(1, sizeof *a);
    assert_non_null(a);
    char encl[512];
    gt_buf ev = {0};
    agreement_make(a, "{\"mrsigner\":\"" IDKEY "\"}", true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);  // F.mrsigner, F.mrenclave
    gt_buf_free_nowipe(&ev);
    gt_vqe *q = NULL;
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = F.root_dir};
    GT_ASSERT_OK(gt_vqe_open(&q, F.vqe_dir, &F.pf, &host));
    gt_sgx_identity id = {.debug = true,
                          .attributes = {.flags = GT_SGX_ATTR_INIT | GT_SGX_ATTR_MODE64BIT |
                                                  GT_SGX_ATTR_DEBUG, .xfrm = 3}};
    memcpy(id.mrsigner, F.mrsigner, 32);
    memcpy(id.mrenclave, F.mrenclave, 32);
    for (int allow = 0; allow < 2; allow++) {
        by_signer(encl, sizeof encl, F.mrsigner, allow ? ",\"debug\":true" : "");
        agreement_make(a, encl, true);
        uint8_t rd[GT_REPORT_DATA_BYTES];
        GT_ASSERT_OK(gt_holder_quote_reportdata(rd, a->hash, F.identity_key, F.binding));
        gt_evidence e = {0};
        GT_ASSERT_OK(gt_vqe_quote(q, &id, rd, &e));
        GT_ASSERT_OK(gt_evidence_encode(&e, &ev));
        gt_evidence_free(&e);
        gt_holder_enclave_seen seen;
        gt_err err = appraise(a, F.binding, &ev, F.pub, &seen);
        if (allow) {
            GT_ASSERT_OK(err);
            assert_true(seen.debug);
        } else {
            GT_ASSERT_ERR(err, GT_E_POLICY, "holders[0].enclave.debug");
        }
        gt_buf_free_nowipe(&ev);
    }
    gt_vqe_free(q);
    free(a);
}

// The binding: a quote from another session (channel), for another agreement (the enclave's
// TERMS), for another holder identity key, or with one bit flipped is refused.
static void bound_to_session_agreement_and_key(void **state)
{
    (void)state;
    gt_agreement *a = calloc(1, sizeof *a), *other = calloc(1, sizeof *other);
    assert_non_null(a);
    assert_non_null(other);
    gt_buf ev = {0};
    gt_holder_enclave_seen seen;
    agreement_make(a, "{\"mrsigner\":\"" IDKEY "\"}", true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);  // learns F.mrsigner
    gt_buf_free_nowipe(&ev);
    char encl[512];
    by_signer(encl, sizeof encl, F.mrsigner, NULL);
    agreement_make(a, encl, true);
    by_signer(encl, sizeof encl, F.mrsigner, ",\"min_isvsvn\":0");  // another document
    agreement_make(other, encl, true);

    // replayed into another session: the same quote, another channel binding
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    GT_ASSERT_OK(appraise(a, F.binding, &ev, F.pub, &seen));
    const char *corpus = getenv("GT_WRITE_CORPUS");  // the fuzz corpus's real message
    if (corpus != NULL) {
        gt_writer w = gt_writer_init_dynamic();
        GT_ASSERT_OK(gt_hp_enclave_quote_write(&w, gt_buf_span(&ev)));
        GT_ASSERT_OK(gt_file_write_atomic(corpus, w.data, w.len, 0644));
        gt_writer_free(&w);
    }
    uint8_t other_binding[GT_NET_BINDING_BYTES];
    memcpy(other_binding, F.binding, sizeof other_binding);
    other_binding[5] ^= 1;
    GT_ASSERT_ERR(appraise(a, other_binding, &ev, F.pub, &seen), GT_E_POLICY,
                  "bound to another session or another holder identity key");
    // every bit flipped at 64 places spread over the quote: refused, never accepted
    for (size_t k = 0; k < 64; k++) {
        size_t at = k * (ev.len - 1) / 63;
        for (int bit = 0; bit < 8; bit += 3) {
            ev.data[at] ^= (uint8_t)(1u << bit);
            gt_err err = appraise(a, F.binding, &ev, F.pub, &seen);
            if (gt_is_ok(err)) {
                fail_msg("byte %zu bit %d flipped: accepted", at, bit);
            }
            ev.data[at] ^= (uint8_t)(1u << bit);
        }
    }
    GT_ASSERT_OK(appraise(a, F.binding, &ev, F.pub, &seen));  // the flips were undone
    gt_buf_free_nowipe(&ev);

    // the enclave runs under another agreement (its TERMS): refused for this one
    enclave_quote(other->hash, F.identity_key, F.binding, &ev);
    GT_ASSERT_ERR(appraise(a, F.binding, &ev, F.pub, &seen), GT_E_POLICY,
                  "for another agreement");
    GT_ASSERT_OK(appraise(other, F.binding, &ev, F.pub, &seen));  // and fine for its own
    gt_buf_free_nowipe(&ev);

    // bound to another holder's identity key (a co-holder's enclave quote relayed)
    uint8_t other_key[32];
    memcpy(other_key, F.identity_key, 32);
    other_key[0] ^= 0x80;
    enclave_quote(a->hash, other_key, F.binding, &ev);
    GT_ASSERT_ERR(appraise(a, F.binding, &ev, F.pub, &seen), GT_E_POLICY,
                  "another holder identity key");
    gt_buf_free_nowipe(&ev);
    free(a);
    free(other);
}

// The host level: sim host evidence is refused where the agreement does not allow simulation,
// and host evidence under a sim root the trainer does not trust is not authentic.
static void host_level(void **state)
{
    (void)state;
    gt_agreement *a = calloc(1, sizeof *a);
    assert_non_null(a);
    gt_buf ev = {0};
    gt_holder_enclave_seen seen;
    agreement_make(a, "{\"mrsigner\":\"" IDKEY "\"}", true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    gt_buf_free_nowipe(&ev);
    char encl[512];
    by_signer(encl, sizeof encl, F.mrsigner, NULL);
    agreement_make(a, encl, false);  // allow_simulation false
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    GT_ASSERT_ERR(appraise(a, F.binding, &ev, F.pub, &seen), GT_E_POLICY,
                  "allow_simulation and the host TEE's evidence");
    gt_buf_free_nowipe(&ev);
    agreement_make(a, encl, true);
    enclave_quote(a->hash, F.identity_key, F.binding, &ev);
    GT_ASSERT_OK(appraise(a, F.binding, &ev, F.pub, &seen));
    GT_ASSERT_ERR(appraise(a, F.binding, &ev, F.other_pub, &seen), GT_E_POLICY, "invalid");
    gt_buf_free_nowipe(&ev);
    free(a);
}

// ENCLAVE_QUOTE's parser: what is written parses back; other versions, lengths, trailing bytes
// and truncations are refused.
static void message_layout(void **state)
{
    (void)state;
    uint8_t evidence[40];
    memset(evidence, 0xe5, sizeof evidence);
    gt_writer w = gt_writer_init_dynamic();
    GT_ASSERT_OK(gt_hp_enclave_quote_write(&w, (gt_span){evidence, sizeof evidence}));
    gt_span got;
    GT_ASSERT_OK(gt_hp_enclave_quote_parse((gt_span){w.data, w.len}, &got));
    assert_int_equal(got.len, sizeof evidence);
    assert_memory_equal(got.data, evidence, sizeof evidence);
    for (size_t n = 0; n < w.len; n++) {
        assert_false(gt_is_ok(gt_hp_enclave_quote_parse((gt_span){w.data, n}, &got)));
    }
    uint8_t buf[64];
    memcpy(buf, w.data, w.len);
    buf[w.len] = 0;
    assert_false(gt_is_ok(gt_hp_enclave_quote_parse((gt_span){buf, w.len + 1}, &got)));
    buf[0] = 2;
    GT_ASSERT_CODE(gt_hp_enclave_quote_parse((gt_span){buf, w.len}, &got), GT_E_UNSUPPORTED);
    gt_writer_free(&w);
    GT_ASSERT_CODE(gt_hp_enclave_quote_parse((gt_span){(const uint8_t *)"\x01\0\0\0\0", 5}, &got),
                   GT_E_FORMAT);  // empty evidence
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identity_fields),
        cmocka_unit_test(debug_enclave),
        cmocka_unit_test(bound_to_session_agreement_and_key),
        cmocka_unit_test(host_level),
        cmocka_unit_test(message_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
