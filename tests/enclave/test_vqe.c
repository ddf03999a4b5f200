// enclave/ + attest/: remote attestation through the virtual quoting enclave, both levels.
// End to end on sim (insecure-simulation: the sim root stands for the host TEE's hardware
// root): a quote is accepted with both identities reported; every single-byte change of the
// quote is refused, and each part by name (body, signature, attestation key, QE report, its
// signature, host evidence); host evidence that does not bind the key, evidence of another
// platform root spliced in, an untrusted host root, and each SGX policy field. On the real TDX
// and SNP sample layouts (which cannot be re-signed) the binding check itself is exercised:
// genuine AMD-signed evidence that does not bind the key is refused for that reason alone, and
// a sample rewritten to carry the binding passes the binding check but not its signature.
#include "enclave_testlib.h"

#include <stdlib.h>

typedef struct {
    char dir[4096];
    char root_dir[4200], pub[4300], other_root[4200], other_pub[4300];
    char pf_a[4200], pf_b[4200];
    gt_buf pub_pem, other_pem;
    gt_attest_file root;
    gt_sgx_platform a, b;
    gt_vqe *qa, *qb;
    gt_sgx_identity app;
    uint8_t rd[GT_REPORT_DATA_BYTES];
} fixture;

static void open_vqe(gt_vqe **q, const char *pf_dir, gt_sgx_platform *pf, const char *root)
{
    gt_sgx_platform_options o = {.host = GT_TEE_SIM, .sim_root = root};
    GT_ASSERT_OK(gt_sgx_platform_open(pf_dir, &o, pf, NULL));
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = root, .sim_svn = 2};
    GT_ASSERT_OK(gt_vqe_open(q, pf_dir, pf, &host));
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->root_dir, sizeof f->root_dir, "%s/sim", f->dir);
    snprintf(f->other_root, sizeof f->other_root, "%s/sim-other", f->dir);
    snprintf(f->pf_a, sizeof f->pf_a, "%s/pf-a", f->dir);
    snprintf(f->pf_b, sizeof f->pf_b, "%s/pf-b", f->dir);
    gt_pkey *k = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&k, f->pub, sizeof f->pub, f->root_dir, true));
    gt_pkey_free(k);
    GT_ASSERT_OK(gt_sim_root_open(&k, f->other_pub, sizeof f->other_pub, f->other_root, true));
    gt_pkey_free(k);
    GT_ASSERT_OK(gt_file_read_all(f->pub, 1 << 16, &f->pub_pem));
    f->root = (gt_attest_file){.path = f->pub, .data = gt_buf_span(&f->pub_pem)};
    open_vqe(&f->qa, f->pf_a, &f->a, f->root_dir);
    open_vqe(&f->qb, f->pf_b, &f->b, f->root_dir);
    memset(f->app.mrenclave, 0xe1, 32);
    memset(f->app.mrsigner, 0x51, 32);
    f->app.isvprodid = 7;
    f->app.isvsvn = 3;
    f->app.attributes.flags = GT_SGX_ATTR_INIT | GT_SGX_ATTR_MODE64BIT;
    f->app.attributes.xfrm = 3;
    for (int i = 0; i < GT_REPORT_DATA_BYTES; i++) {
        f->rd[i] = (uint8_t)(i * 3);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_vqe_free(f->qa);
    gt_vqe_free(f->qb);
    gt_buf_free_nowipe(&f->pub_pem);
    gt_test_rmtree(f->dir);
    free(f);
    return 0;
}

#define HEX_E1 "e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1"
#define HEX_51 "5151515151515151515151515151515151515151515151515151515151515151"
static const char good_policy[] =
    "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrenclave\": [\"" HEX_E1 "\"], "
    "\"mrsigner\": [\"" HEX_51 "\"], \"isvprodid\": 7, \"min_isvsvn\": 3}}";

static gt_verdict appraise(const fixture *f, const gt_evidence *ev, const char *policy_json,
                           gt_appraisal *a)
{
    gt_policy *p = NULL;
    GT_ASSERT_OK(gt_policy_parse(&p, policy_json, strlen(policy_json)));
    gt_appraise_params prm = {.roots = &f->root, .root_count = 1, .expected_report_data = f->rd};
    GT_ASSERT_OK(gt_attest_appraise(a, ev, p, &prm));
    gt_policy_free(p);
    return a->verdict;
}

static void expect_verdict(const fixture *f, const gt_evidence *ev, const char *policy,
                           gt_verdict want, const char *reason)
{
    gt_appraisal a;
    gt_verdict v = appraise(f, ev, policy, &a);
    if (v != want || (reason != NULL && !gt_appraisal_has_reason(&a, reason))) {
        fail_msg("verdict %s (want %s), first reason: %s; wanted a reason naming '%s'",
                 gt_verdict_name(v), gt_verdict_name(want),
                 a.reason_count ? a.reasons[0] : "-", reason ? reason : "-");
    }
    gt_appraisal_free(&a);
}

static const char *claim(const gt_appraisal *a, const char *outer, const char *name)
{
    const cJSON *o = outer ? cJSON_GetObjectItemCaseSensitive(a->claims, outer) : a->claims;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

// Accepted, with the enclave's identity at the top, the QE's under "qe", the host's under
// "host", and labelled insecure-simulation because the host evidence is sim.
static void sim_end_to_end_accepted_with_both_identities(void **state)
{
    fixture *f = *state;
    gt_evidence ev;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ev));
    assert_int_equal(ev.type, GT_TEE_VSGX);
    gt_appraisal a;
    assert_int_equal(appraise(f, &ev, good_policy, &a), GT_VERDICT_ACCEPTED);
    assert_true(a.signature_valid && a.chain_valid && a.insecure_simulation);
    assert_string_equal(claim(&a, NULL, "mr_enclave"), HEX_E1);
    assert_string_equal(claim(&a, NULL, "mr_signer"), HEX_51);
    char zeros[129];
    memset(zeros, '0', 128);
    zeros[128] = '\0';
    assert_string_equal(claim(&a, NULL, "config_id"), zeros);  // what the enclave does not set
    assert_string_equal(claim(&a, NULL, "attributes"), "05000000000000000300000000000000");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a.claims, "debug")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(a.claims, "isv_svn")->valuedouble, 3);
    assert_string_equal(claim(&a, "host", "tee"), "sim");
    assert_non_null(claim(&a, "host", "measurement"));
    uint8_t mre[32], mrs[32];
    char hex[65];
    GT_ASSERT_OK(gt_vsgx_qe_identity(mre, mrs));
    gt_hex_encode(hex, sizeof hex, mre, 32);
    assert_string_equal(claim(&a, "qe", "mr_enclave"), hex);
    uint8_t id[32];
    GT_ASSERT_OK(gt_sgx_platform_id(&f->a, id));
    gt_hex_encode(hex, sizeof hex, id, 32);
    assert_string_equal(claim(&a, NULL, "platform_id"), hex);
    gt_appraisal_free(&a);
    // The session binding is the enclave's REPORTDATA: another one is refused.
    uint8_t other_rd[GT_REPORT_DATA_BYTES] = {1};
    gt_evidence ev2;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, other_rd, &ev2));
    expect_verdict(f, &ev2, good_policy, GT_VERDICT_REJECTED, "binding: report_data");
    // Envelope round trip: what a file holds appraises the same.
    gt_buf bytes = {0};
    GT_ASSERT_OK(gt_evidence_encode(&ev, &bytes));
    gt_evidence back;
    GT_ASSERT_OK(gt_evidence_parse(&back, bytes.data, bytes.len, GT_TEE_AUTO));
    assert_int_equal(back.type, GT_TEE_VSGX);
    expect_verdict(f, &back, good_policy, GT_VERDICT_ACCEPTED, NULL);
    gt_buf_free_nowipe(&bytes);
    gt_evidence_free(&back);
    gt_evidence_free(&ev);
    gt_evidence_free(&ev2);
}

// The attestation key is sealed on the platform: a reopened QE signs with the same key.
static void attestation_key_survives_a_reopen(void **state)
{
    fixture *f = *state;
    gt_vqe *again = NULL;
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = f->root_dir};
    GT_ASSERT_OK(gt_vqe_open(&again, f->pf_a, &f->a, &host));
    gt_evidence e1, e2, e3;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &e1));
    GT_ASSERT_OK(gt_vqe_quote(again, &f->app, f->rd, &e2));
    GT_ASSERT_OK(gt_vqe_quote(f->qb, &f->app, f->rd, &e3));
    gt_vsgx_quote q1, q2, q3;
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q1, e1.body.data, e1.body.len));
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q2, e2.body.data, e2.body.len));
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q3, e3.body.data, e3.body.len));
    assert_memory_equal(q1.attestation_key, q2.attestation_key, GT_VSGX_KEY_BYTES);
    assert_memory_not_equal(q1.attestation_key, q3.attestation_key, GT_VSGX_KEY_BYTES);
    expect_verdict(f, &e2, good_policy, GT_VERDICT_ACCEPTED, NULL);
    gt_vqe_free(again);
    gt_evidence_free(&e1);
    gt_evidence_free(&e2);
    gt_evidence_free(&e3);
}

// Quote layout offsets (attest.h): body 48, signature 436, key 500, QE report 564, QE report
// signature 948, certification data (platform id) 1052, host evidence 1084.
enum { OFF_BODY = 48, OFF_SIG = 436, OFF_KEY = 500, OFF_QE = 564, OFF_QE_SIG = 948,
       OFF_AUTH = 1014, OFF_PLATFORM = 1052, OFF_HOST = 1084 };

static void flip_and_expect_invalid(const fixture *f, const gt_evidence *ev, size_t at,
                                    const char *reason)
{
    gt_evidence bad = *ev;
    gt_buf copy = {0};
    GT_ASSERT_OK(gt_buf_append(&copy, ev->body.data, ev->body.len));
    assert_true(at < copy.len);
    copy.data[at] ^= 0x01;
    bad.body = copy;
    expect_verdict(f, &bad, good_policy, GT_VERDICT_INVALID, reason);
    gt_buf_free_nowipe(&copy);
}

static void each_part_flipped_refused(void **state)
{
    fixture *f = *state;
    gt_evidence ev;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ev));
    flip_and_expect_invalid(f, &ev, OFF_BODY + 64 + 5, "quote signature");  // MRENCLAVE
    flip_and_expect_invalid(f, &ev, OFF_SIG + 40, "quote signature");
    flip_and_expect_invalid(f, &ev, OFF_KEY + 10, "vsgx");
    flip_and_expect_invalid(f, &ev, OFF_QE + 64 + 1, "vsgx");              // QE MRENCLAVE
    flip_and_expect_invalid(f, &ev, OFF_QE_SIG + 3, "QE report signature");
    flip_and_expect_invalid(f, &ev, OFF_AUTH + 1, "QE report data");
    flip_and_expect_invalid(f, &ev, OFF_PLATFORM, "does not bind");
    flip_and_expect_invalid(f, &ev, ev.body.len - 20, "vsgx host sim");     // sim signature
    gt_evidence_free(&ev);
}

// Exhaustive: every byte of the quote changed in one bit, each refused (never accepted).
static void every_byte_flipped_refused(void **state)
{
    fixture *f = *state;
    gt_evidence ev;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ev));
    gt_policy *p = NULL;
    GT_ASSERT_OK(gt_policy_parse(&p, good_policy, strlen(good_policy)));
    gt_appraise_params prm = {.roots = &f->root, .root_count = 1, .expected_report_data = f->rd};
    for (size_t i = 0; i < ev.body.len; i++) {
        ev.body.data[i] ^= 0x10;
        gt_appraisal a;
        GT_ASSERT_OK(gt_attest_appraise(&a, &ev, p, &prm));
        if (a.verdict == GT_VERDICT_ACCEPTED) {
            fail_msg("byte %zu of %zu changed and the quote was accepted", i, ev.body.len);
        }
        gt_appraisal_free(&a);
        ev.body.data[i] ^= 0x10;
    }
    gt_policy_free(p);
    gt_evidence_free(&ev);
}

// Replaces the quote's host evidence (the quote signature still verifies: it covers header and
// body only, as in DCAP).
static void splice_host(const gt_evidence *ev, const uint8_t *host, size_t len, gt_evidence *out)
{
    gt_vsgx_quote q;
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q, ev->body.data, ev->body.len));
    q.host_evidence = (gt_span){host, len};
    *out = (gt_evidence){.type = GT_TEE_VSGX, .version = 3, .enveloped = true};
    GT_ASSERT_OK(gt_vsgx_quote_encode(&q, &out->body));
}

static void host_span(const gt_evidence *ev, gt_buf *host)
{
    gt_vsgx_quote q;
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q, ev->body.data, ev->body.len));
    GT_ASSERT_OK(gt_buf_append(host, q.host_evidence.data, q.host_evidence.len));
}

// Genuine sim evidence, signed by the trusted root, but whose report_data binds something else.
static void host_evidence_not_binding_the_key_refused(void **state)
{
    fixture *f = *state;
    gt_evidence ev, host = {0}, spliced;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ev));
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, NULL, 0, f->root_dir, false));
    gt_sim_claims c = {.svn = 2};
    memset(c.report_data, 0x77, sizeof c.report_data);
    GT_ASSERT_OK(gt_sim_evidence_create(&host, &c, root));
    gt_buf env = {0};
    GT_ASSERT_OK(gt_evidence_encode(&host, &env));
    splice_host(&ev, env.data, env.len, &spliced);
    gt_appraisal a;
    assert_int_equal(appraise(f, &spliced, good_policy, &a), GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "does not bind"));
    assert_int_equal(a.reason_count, 1);  // the host evidence itself is authentic
    gt_appraisal_free(&a);
    gt_pkey_free(root);
    gt_buf_free_nowipe(&env);
    gt_evidence_free(&host);
    gt_evidence_free(&ev);
    gt_evidence_free(&spliced);
}

// Platform B's host evidence in platform A's quote, and A's quote under B's platform id: both
// refused; a policy pinning platform A refuses B's (valid) quotes.
static void another_platform_root_refused(void **state)
{
    fixture *f = *state;
    gt_evidence ea, eb, spliced;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ea));
    GT_ASSERT_OK(gt_vqe_quote(f->qb, &f->app, f->rd, &eb));
    gt_buf hb = {0};
    host_span(&eb, &hb);
    splice_host(&ea, hb.data, hb.len, &spliced);
    expect_verdict(f, &spliced, good_policy, GT_VERDICT_INVALID, "does not bind");
    gt_evidence_free(&spliced);
    gt_vsgx_quote q;
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q, ea.body.data, ea.body.len));
    GT_ASSERT_OK(gt_sgx_platform_id(&f->b, q.platform_id));
    spliced = (gt_evidence){.type = GT_TEE_VSGX, .version = 3, .enveloped = true};
    GT_ASSERT_OK(gt_vsgx_quote_encode(&q, &spliced.body));
    expect_verdict(f, &spliced, good_policy, GT_VERDICT_INVALID, "does not bind");
    uint8_t id[32];
    char hex[65], pinned[1024];
    GT_ASSERT_OK(gt_sgx_platform_id(&f->a, id));
    gt_hex_encode(hex, sizeof hex, id, 32);
    snprintf(pinned, sizeof pinned, "{\"allow_simulation\": true, \"measurements\": {\"vsgx\": "
             "{\"platform_id\": [\"%s\"]}}}", hex);
    expect_verdict(f, &ea, pinned, GT_VERDICT_ACCEPTED, NULL);
    expect_verdict(f, &eb, pinned, GT_VERDICT_REJECTED, "platform_id");
    gt_buf_free_nowipe(&hb);
    gt_evidence_free(&spliced);
    gt_evidence_free(&ea);
    gt_evidence_free(&eb);
}

// A QE whose host evidence comes from a sim root the verifier does not trust.
static void untrusted_host_root_refused(void **state)
{
    fixture *f = *state;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/pf-c", f->dir);
    gt_sgx_platform pf;
    gt_vqe *qc = NULL;
    open_vqe(&qc, dir, &pf, f->other_root);
    gt_evidence ev;
    GT_ASSERT_OK(gt_vqe_quote(qc, &f->app, f->rd, &ev));
    expect_verdict(f, &ev, good_policy, GT_VERDICT_INVALID, "vsgx host sim: sim: signature");
    gt_evidence_free(&ev);
    gt_vqe_free(qc);
}

// Each SGX policy field refuses a mismatch (on a sim host; the host TEE's own rules apply too).
static void policy_fields_in_sgx_terms(void **state)
{
    fixture *f = *state;
    gt_evidence ev, dbg;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ev));
    expect_verdict(f, &ev, "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrenclave\": [\""
                   HEX_51 "\"]}}", GT_VERDICT_REJECTED, "sgx_enclave.mrenclave");
    expect_verdict(f, &ev, "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrsigner\": [\""
                   HEX_E1 "\"]}}", GT_VERDICT_REJECTED, "sgx_enclave.mrsigner");
    expect_verdict(f, &ev, "{\"allow_simulation\": true, \"sgx_enclave\": {\"isvprodid\": 8}}",
                   GT_VERDICT_REJECTED, "sgx_enclave.isvprodid");
    expect_verdict(f, &ev, "{\"allow_simulation\": true, \"sgx_enclave\": {\"min_isvsvn\": 4}}",
                   GT_VERDICT_REJECTED, "sgx_enclave.min_isvsvn");
    expect_verdict(f, &ev, "{\"sgx_enclave\": {\"min_isvsvn\": 3}}", GT_VERDICT_REJECTED,
                   "host sim: policy: insecure-simulation");
    expect_verdict(f, &ev, "{\"allow_simulation\": true, \"accepted_tee_types\": [\"vsgx\", "
                   "\"snp\"]}", GT_VERDICT_REJECTED, "host sim: policy: TEE type sim");
    gt_sgx_identity d = f->app;
    d.attributes.flags |= GT_SGX_ATTR_DEBUG;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &d, f->rd, &dbg));
    expect_verdict(f, &dbg, good_policy, GT_VERDICT_REJECTED, "debug TEE refused");
    expect_verdict(f, &dbg, "{\"allow_simulation\": true, \"sgx_enclave\": {\"allow_debug\": "
                   "true}}", GT_VERDICT_ACCEPTED, NULL);
    gt_policy *p = NULL;
    GT_ASSERT_CODE(gt_policy_parse(&p, "{\"sgx_enclave\": {\"mrenclave\": [\"e1\"]}}", 39),
                   GT_E_FORMAT);
    GT_ASSERT_CODE(gt_policy_parse(&p, "{\"sgx_enclave\": {\"isvsvn\": 1}}", 30), GT_E_FORMAT);
    gt_evidence_free(&ev);
    gt_evidence_free(&dbg);
}

static void read_evidence(const char *rel, gt_buf *env)
{
    gt_buf raw = {0};
    gt_test_read_data(rel, &raw);
    gt_evidence ev;
    GT_ASSERT_OK(gt_evidence_parse(&ev, raw.data, raw.len, GT_TEE_AUTO));
    GT_ASSERT_OK(gt_evidence_encode(&ev, env));
    gt_evidence_free(&ev);
    gt_buf_free_nowipe(&raw);
}

static void expect_host(const fixture *f, const gt_evidence *quote, const gt_buf *host,
                        const gt_appraise_params *prm, bool bound)
{
    gt_evidence spliced;
    splice_host(quote, host->data, host->len, &spliced);
    gt_appraisal a;
    GT_ASSERT_OK(gt_attest_appraise(&a, &spliced, NULL, prm));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    if (gt_appraisal_has_reason(&a, "does not bind") == bound) {
        fail_msg("binding on a real layout: expected it %s (first reason: %s)",
                 bound ? "to hold" : "to fail", a.reason_count ? a.reasons[0] : "-");
    }
    if (!bound) {  // the genuine sample verifies at the host level: the binding alone refuses
        assert_int_equal(a.reason_count, 1);
    } else {
        assert_true(gt_appraisal_has_reason(&a, "signature"));
    }
    (void)f;
    gt_appraisal_free(&a);
    gt_evidence_free(&spliced);
}

// Real TDX quote / SNP report layouts: not bound (as they are), then rewritten to carry this
// quote's binding in their report_data field (which breaks their signatures: they cannot be
// re-signed here). The binding check reads report_data where each layout has it.
static void binding_on_real_tdx_and_snp_layouts(void **state)
{
    fixture *f = *state;
    gt_evidence ev;
    GT_ASSERT_OK(gt_vqe_quote(f->qa, &f->app, f->rd, &ev));
    gt_vsgx_quote q;
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q, ev.body.data, ev.body.len));
    uint8_t bind[GT_REPORT_DATA_BYTES];
    GT_ASSERT_OK(gt_vsgx_host_report_data(bind, q.platform_id, q.attestation_key,
                                          q.qe_report.data));
    gt_buf vcek = {0}, ca = {0}, intel = {0};
    gt_test_read_data("attestation/snp/go-sev-guest_vcek.der", &vcek);
    gt_test_read_data("attestation/snp/amd_milan_ask_ark.pem", &ca);
    gt_test_read_data("attestation/tdx/intel_sgx_root_ca.pem", &intel);
    gt_attest_file roots[2] = {{.path = "ask_ark", .data = gt_buf_span(&ca)},
                               {.path = "intel_root", .data = gt_buf_span(&intel)}};
    gt_attest_file cert = {.path = "vcek", .data = gt_buf_span(&vcek)};
    // 2026-06-01: inside the validity of both samples' certificates (test_tdx_quote's time).
    gt_appraise_params prm = {.roots = roots, .root_count = 2, .certs = &cert, .cert_count = 1,
                              .at = 1780272000};
    static const struct {
        const char *file;
        size_t report_data_at;  // in the native bytes (the envelope adds 12 in front)
    } samples[] = {{"attestation/snp/go-sev-guest_attestation.bin", 0x50},
                   {"attestation/tdx/dcap-qvl_tdx-quote.bin", 48 + 520}};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        gt_buf env = {0};
        read_evidence(samples[i].file, &env);
        expect_host(f, &ev, &env, &prm, false);
        memcpy(env.data + 12 + samples[i].report_data_at, bind, sizeof bind);
        expect_host(f, &ev, &env, &prm, true);
        gt_buf_free_nowipe(&env);
    }
    gt_buf_free_nowipe(&vcek);
    gt_buf_free_nowipe(&ca);
    gt_buf_free_nowipe(&intel);
    gt_evidence_free(&ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sim_end_to_end_accepted_with_both_identities),
        cmocka_unit_test(attestation_key_survives_a_reopen),
        cmocka_unit_test(each_part_flipped_refused),
        cmocka_unit_test(every_byte_flipped_refused),
        cmocka_unit_test(host_evidence_not_binding_the_key_refused),
        cmocka_unit_test(another_platform_root_refused),
        cmocka_unit_test(untrusted_host_root_refused),
        cmocka_unit_test(policy_fields_in_sgx_terms),
        cmocka_unit_test(binding_on_real_tdx_and_snp_layouts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
