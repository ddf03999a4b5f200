// enclave/ + attest/: the two halves joined (INSECURE SIMULATION, host sim). The running
// enclave's platform is the one sealed to the host TEE (gt_sgx_platform_open), and a running
// enclave is remotely attested from its own EREPORT: the example enclave makes a REPORT for the
// virtual QE's TARGETINFO, the vQE checks its MAC before quoting it, and gputravel's verifier
// accepts the quote only under a policy naming the example's MRENCLAVE and MRSIGNER. Attacks:
// a changed sealed platform, another host root, every bit of the REPORT flipped, a REPORT for
// another target, a REPORT made on another platform, the wrong policy or nonce. And sealing
// inside the enclave (the runtime's seal leaves): a blob survives a restart, opens for the same
// identity on the host side too (one format, one key), and is refused to another MRENCLAVE
// (MRENCLAVE policy), another platform, and with any byte changed.
#include "enclave_testlib.h"

#include "../../src/enclave/sdk_abi.h"

#include <stdlib.h>

enum { ECALL_EGETKEY = 3, ECALL_EREPORT = 4, ECALL_QUOTE_REPORT = 7, ECALL_SEAL = 8,
       ECALL_UNSEAL = 9 };

static const char label[32] = "gputravel example enclave quote";

typedef struct {
    char dir[4096];
    char sim[4200], pub[4300], other_sim[4200], pf_a[4200], pf_b[4200];
    gt_buf pub_pem, image, sig;
    gt_attest_file root;
    gt_sgx_platform_options opt;
    gt_sgx_platform a;      // what gt_sgx_platform_open gives for pf_a (for the checks)
    gt_vqe *qe;             // the virtual QE on pf_a
    uint8_t nonce[32];
} fixture;

static void read_enclave(const char *name, gt_buf *image, gt_buf *sig)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", GT_ENCLAVE_DIR, name);
    GT_ASSERT_OK(gt_file_read_all(path, GT_ENCLAVE_IMAGE_MAX_BYTES, image));
    snprintf(path, sizeof path, "%s/%s.sig", GT_ENCLAVE_DIR, name);
    GT_ASSERT_OK(gt_file_read_all(path, GT_SGX_SIGSTRUCT_BYTES, sig));
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->sim, sizeof f->sim, "%s/sim", f->dir);
    snprintf(f->other_sim, sizeof f->other_sim, "%s/sim-other", f->dir);
    snprintf(f->pf_a, sizeof f->pf_a, "%s/pf-a", f->dir);
    snprintf(f->pf_b, sizeof f->pf_b, "%s/pf-b", f->dir);
    gt_pkey *k = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&k, f->pub, sizeof f->pub, f->sim, true));
    gt_pkey_free(k);
    GT_ASSERT_OK(gt_sim_root_open(&k, NULL, 0, f->other_sim, true));
    gt_pkey_free(k);
    GT_ASSERT_OK(gt_file_read_all(f->pub, 1 << 16, &f->pub_pem));
    f->root = (gt_attest_file){.path = f->pub, .data = gt_buf_span(&f->pub_pem)};
    f->opt = (gt_sgx_platform_options){.host = GT_TEE_SIM, .sim_root = f->sim};
    GT_ASSERT_OK(gt_sgx_platform_open(f->pf_a, &f->opt, &f->a, NULL));
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = f->sim, .sim_svn = 2};
    GT_ASSERT_OK(gt_vqe_open(&f->qe, f->pf_a, &f->a, &host));
    read_enclave("example", &f->image, &f->sig);
    for (int i = 0; i < 32; i++) {
        f->nonce[i] = (uint8_t)(0x90 + i);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_vqe_free(f->qe);
    gt_secure_zero(&f->a, sizeof f->a);
    gt_buf_free_nowipe(&f->pub_pem);
    gt_buf_free(&f->image);
    gt_buf_free(&f->sig);
    gt_test_rmtree(f->dir);
    free(f);
    return 0;
}

static gt_enclave_spec spec_on(const fixture *f, const char *pf_dir,
                               const gt_sgx_platform_options *o)
{
    return (gt_enclave_spec){.process_path = GT_ENCLAVE_PROCESS_PATH, .image = f->image.data,
                             .image_len = f->image.len, .sigstruct = f->sig.data,
                             .platform_dir = pf_dir, .platform_options = o};
}

static gt_enclave *start_on(const fixture *f, const char *pf_dir)
{
    gt_enclave_spec spec = spec_on(f, pf_dir, &f->opt);
    gt_enclave *e = NULL;
    GT_ASSERT_OK(gt_enclave_start(&e, &spec));
    return e;
}

static void ecall_ok(gt_enclave *e, uint64_t n, const void *in, size_t len, gt_buf *out)
{
    int64_t status = -1;
    GT_ASSERT_OK(gt_enclave_ecall(e, n, in, len, out, &status));
    assert_int_equal(status, 0);
}

// The REPORT the enclave makes, through ECALL 7, for target ti with the fixture's nonce.
static void enclave_report(const fixture *f, gt_enclave *e, const gt_sgx_targetinfo *ti,
                           uint8_t report[GT_SGX_REPORT_BYTES])
{
    uint8_t in[GT_SGX_TARGETINFO_BYTES + 32];
    gt_sgx_targetinfo_encode(ti, in);
    memcpy(in + GT_SGX_TARGETINFO_BYTES, f->nonce, 32);
    gt_buf out = {0};
    ecall_ok(e, ECALL_QUOTE_REPORT, in, sizeof in, &out);
    assert_int_equal(out.len, GT_SGX_REPORT_BYTES);
    memcpy(report, out.data, GT_SGX_REPORT_BYTES);
    gt_buf_free(&out);
}

// The key ENCLU[EGETKEY] gives inside the enclave equals gt_sgx_egetkey on the platform that
// gt_sgx_platform_open unseals: the enclave process runs on the sealed root.
static void test_enclave_runs_on_the_sealed_platform(void **state)
{
    fixture *f = *state;
    gt_enclave *e = start_on(f, f->pf_a);
    const gt_sgx_identity *id = gt_enclave_identity(e);
    gt_sgx_secs_identity secs;
    memset(&secs, 0, sizeof secs);
    memcpy(secs.mrenclave, id->mrenclave, 32);
    memcpy(secs.mrsigner, id->mrsigner, 32);
    secs.isvprodid = id->isvprodid;
    secs.isvsvn = id->isvsvn;
    secs.attributes = id->attributes;
    secs.miscselect = id->miscselect;
    gt_sgx_keyrequest req;
    memset(&req, 0, sizeof req);
    req.keyname = GT_SGX_KEYNAME_SEAL;
    req.keypolicy = GT_SGX_KEYPOLICY_MRENCLAVE;
    memcpy(req.cpusvn, f->a.cpusvn, 16);
    memset(req.keyid, 0x3c, 32);
    uint8_t raw[GT_SGX_KEYREQUEST_BYTES], want[16];
    gt_sgx_keyrequest_encode(&req, raw);
    gt_buf out = {0};
    ecall_ok(e, ECALL_EGETKEY, raw, sizeof raw, &out);
    assert_int_equal(out.len, 24);
    static const uint8_t rax_zero[8];
    assert_memory_equal(out.data, rax_zero, 8);   // RAX = 0: EGETKEY succeeded
    GT_ASSERT_OK(gt_sgx_egetkey(want, &f->a, &secs, &req));
    assert_memory_equal(out.data + 8, want, 16);
    gt_buf_free(&out);
    gt_enclave_stop(e);
}

// A platform file changed by one byte, or opened under another sim root (another host TEE
// instance), never reaches an enclave process; a spec naming both or neither platform is refused.
static void test_unsealable_platform_refused(void **state)
{
    fixture *f = *state;
    gt_sgx_platform_options other = {.host = GT_TEE_SIM, .sim_root = f->other_sim};
    gt_enclave_spec spec = spec_on(f, f->pf_a, &other);
    gt_enclave *e = NULL;
    GT_ASSERT_CODE(gt_enclave_start(&e, &spec), GT_E_AUTH);
    assert_null(e);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", f->pf_a, GT_SGX_PLATFORM_FILE);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 4096, &b));
    b.data[110] ^= 0x01;  // in the sealed root
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    spec = spec_on(f, f->pf_a, &f->opt);
    GT_ASSERT_CODE(gt_enclave_start(&e, &spec), GT_E_AUTH);
    b.data[110] ^= 0x01;
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    gt_buf_free(&b);
    spec.platform = &f->a;
    GT_ASSERT_CODE(gt_enclave_start(&e, &spec), GT_E_ARG);
    spec.platform = NULL;
    spec.platform_dir = NULL;
    GT_ASSERT_CODE(gt_enclave_start(&e, &spec), GT_E_ARG);
}

static gt_verdict appraise(const fixture *f, const gt_evidence *ev, const char *policy_json,
                           const uint8_t rd[64])
{
    gt_policy *p = NULL;
    GT_ASSERT_OK(gt_policy_parse(&p, policy_json, strlen(policy_json)));
    gt_appraise_params prm = {.roots = &f->root, .root_count = 1, .expected_report_data = rd};
    gt_appraisal a;
    GT_ASSERT_OK(gt_attest_appraise(&a, ev, p, &prm));
    gt_verdict v = a.verdict;
    gt_appraisal_free(&a);
    gt_policy_free(p);
    return v;
}

static void policy_for(char *out, size_t cap, const uint8_t mre[32], const uint8_t mrs[32])
{
    char e[65], s[65];
    gt_hex_encode(e, sizeof e, mre, 32);
    gt_hex_encode(s, sizeof s, mrs, 32);
    snprintf(out, cap, "{\"allow_simulation\": true, \"sgx_enclave\": {\"mrenclave\": [\"%s\"], "
                       "\"mrsigner\": [\"%s\"]}}", e, s);
}

// End to end: the REPORT for the vQE is quoted with its body unchanged; the quote verifies at
// both levels under a policy naming the example, and under no policy naming another enclave or
// signer, nor against another nonce.
static void test_running_enclave_quoted_end_to_end(void **state)
{
    fixture *f = *state;
    gt_enclave *e = start_on(f, f->pf_a);
    gt_sgx_identity id = *gt_enclave_identity(e);
    gt_sgx_targetinfo ti;
    gt_vqe_targetinfo(f->qe, &ti);
    uint8_t report[GT_SGX_REPORT_BYTES];
    enclave_report(f, e, &ti, report);
    gt_enclave_stop(e);
    gt_evidence ev;
    GT_ASSERT_OK(gt_vqe_quote_report(f->qe, report, sizeof report, &ev));
    gt_vsgx_quote q;
    GT_ASSERT_OK(gt_vsgx_quote_parse(&q, ev.body.data, ev.body.len));
    assert_int_equal(q.body.len, GT_SGX_REPORTBODY_BYTES);
    assert_memory_equal(q.body.data, report, GT_SGX_REPORTBODY_BYTES);
    uint8_t rd[64], other[32];
    memcpy(rd, f->nonce, 32);
    memcpy(rd + 32, label, 32);
    char good[512], bad[512];
    policy_for(good, sizeof good, id.mrenclave, id.mrsigner);
    assert_int_equal(appraise(f, &ev, good, rd), GT_VERDICT_ACCEPTED);
    memset(other, 0x77, sizeof other);
    policy_for(bad, sizeof bad, other, id.mrsigner);
    assert_int_equal(appraise(f, &ev, bad, rd), GT_VERDICT_REJECTED);
    policy_for(bad, sizeof bad, id.mrenclave, other);
    assert_int_equal(appraise(f, &ev, bad, rd), GT_VERDICT_REJECTED);
    rd[0] ^= 1;
    assert_int_not_equal(appraise(f, &ev, good, rd), GT_VERDICT_ACCEPTED);
    gt_evidence_free(&ev);
}

// Every single-bit flip of the enclave's REPORT (body, KEYID, MAC) is refused by the vQE: it
// quotes nothing it cannot authenticate as EREPORT's.
static void test_flipped_report_refused(void **state)
{
    fixture *f = *state;
    gt_enclave *e = start_on(f, f->pf_a);
    gt_sgx_targetinfo ti;
    gt_vqe_targetinfo(f->qe, &ti);
    uint8_t report[GT_SGX_REPORT_BYTES];
    enclave_report(f, e, &ti, report);
    gt_enclave_stop(e);
    for (size_t bit = 0; bit < 8 * GT_SGX_REPORT_BYTES; bit++) {
        uint8_t flipped[GT_SGX_REPORT_BYTES];
        memcpy(flipped, report, sizeof flipped);
        flipped[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        gt_evidence ev;
        gt_err err = gt_vqe_quote_report(f->qe, flipped, sizeof flipped, &ev);
        if (gt_is_ok(err)) {
            fail_msg("the vQE quoted a REPORT with bit %zu flipped", bit);
        }
        assert_true(err.code == GT_E_AUTH || err.code == GT_E_FORMAT);
    }
    GT_ASSERT_CODE(gt_vqe_quote_report(f->qe, report, sizeof report - 1, &(gt_evidence){0}),
                   GT_E_FORMAT);
}

// A genuine REPORT the enclave made for another target (the host's session target, the enclave
// itself) or on another platform root (pf_b) is refused: its MAC is not under the vQE's key.
static void test_report_for_another_target_refused(void **state)
{
    fixture *f = *state;
    gt_enclave *e = start_on(f, f->pf_a);
    gt_sgx_secs_identity host, self;
    GT_ASSERT_OK(gt_enclave_host_target(&host));
    memset(&self, 0, sizeof self);
    memcpy(self.mrenclave, gt_enclave_identity(e)->mrenclave, 32);
    self.attributes = gt_enclave_identity(e)->attributes;
    gt_sgx_targetinfo ti;
    uint8_t report[GT_SGX_REPORT_BYTES];
    gt_evidence ev;
    gt_sgx_targetinfo_of(&ti, &host);
    enclave_report(f, e, &ti, report);
    GT_ASSERT_CODE(gt_vqe_quote_report(f->qe, report, sizeof report, &ev), GT_E_AUTH);
    gt_sgx_targetinfo_of(&ti, &self);
    enclave_report(f, e, &ti, report);
    GT_ASSERT_CODE(gt_vqe_quote_report(f->qe, report, sizeof report, &ev), GT_E_AUTH);
    gt_enclave_stop(e);
    e = start_on(f, f->pf_b);
    gt_vqe_targetinfo(f->qe, &ti);  // the right target, the wrong platform
    enclave_report(f, e, &ti, report);
    gt_enclave_stop(e);
    GT_ASSERT_CODE(gt_vqe_quote_report(f->qe, report, sizeof report, &ev), GT_E_AUTH);
}

static gt_enclave *start_named(const fixture *f, const char *name, const char *pf_dir,
                               gt_buf *image, gt_buf *sig)
{
    read_enclave(name, image, sig);
    gt_enclave_spec spec = spec_on(f, pf_dir, &f->opt);
    spec.image = image->data;
    spec.image_len = image->len;
    spec.sigstruct = sig->data;
    gt_enclave *e = NULL;
    GT_ASSERT_OK(gt_enclave_start(&e, &spec));
    return e;
}

// ECALL 8 (seal, policy) or 9 (unseal): the leaf's RAX; out the blob or the plaintext.
static int64_t enclave_seal(gt_enclave *e, bool unseal, uint16_t policy, const uint8_t *in,
                            size_t len, gt_buf *out)
{
    gt_buf req = {0};
    uint8_t p[2] = {(uint8_t)policy, (uint8_t)(policy >> 8)};
    if (!unseal) {
        GT_ASSERT_OK(gt_buf_append(&req, p, 2));
    }
    GT_ASSERT_OK(gt_buf_append(&req, in, len));
    int64_t status = -1;
    GT_ASSERT_OK(gt_enclave_ecall(e, unseal ? ECALL_UNSEAL : ECALL_SEAL, req.data, req.len, out,
                                  &status));
    gt_buf_free(&req);
    return status;
}

static void test_sealing_inside_the_enclave(void **state)
{
    fixture *f = *state;
    static const uint8_t secret[] = "dataset key, sealed inside the enclave";
    gt_buf blob = {0}, signer_blob = {0}, pt = {0}, img_b = {0}, sig_b = {0};
    gt_enclave *e = start_on(f, f->pf_a);
    assert_int_equal(enclave_seal(e, false, GT_SGX_KEYPOLICY_MRENCLAVE, secret, sizeof secret,
                                  &blob), 0);
    assert_int_equal(enclave_seal(e, false, GT_SGX_KEYPOLICY_MRSIGNER, secret, sizeof secret,
                                  &signer_blob), 0);
    assert_null(memmem(blob.data, blob.len, secret, sizeof secret - 1));
    const gt_sgx_identity *id = gt_enclave_identity(e);
    gt_sgx_secs_identity secs;
    memset(&secs, 0, sizeof secs);
    memcpy(secs.mrenclave, id->mrenclave, 32);
    memcpy(secs.mrsigner, id->mrsigner, 32);
    secs.isvprodid = id->isvprodid;
    secs.isvsvn = id->isvsvn;
    secs.attributes = id->attributes;
    secs.miscselect = id->miscselect;
    gt_enclave_stop(e);
    GT_ASSERT_OK(gt_sgx_unseal(&pt, NULL, &f->a, &secs, blob.data, blob.len));
    assert_int_equal(pt.len, sizeof secret);
    assert_memory_equal(pt.data, secret, sizeof secret);
    // A restarted enclave process (a new "boot") opens it; every changed byte is refused.
    e = start_on(f, f->pf_a);
    assert_int_equal(enclave_seal(e, true, 0, blob.data, blob.len, &pt), 0);
    assert_int_equal(pt.len, sizeof secret);
    assert_memory_equal(pt.data, secret, sizeof secret);
    for (size_t i = 0; i < blob.len; i++) {
        blob.data[i] ^= 0x10;
        assert_int_equal(enclave_seal(e, true, 0, blob.data, blob.len, &pt), GTSDK_SEAL_E_REFUSED);
        assert_int_equal(pt.len, 0);
        blob.data[i] ^= 0x10;
    }
    gt_enclave_stop(e);
    // Another MRENCLAVE by the same signer: refused under MRENCLAVE, opened under MRSIGNER.
    e = start_named(f, "example_b", f->pf_a, &img_b, &sig_b);
    assert_int_equal(enclave_seal(e, true, 0, blob.data, blob.len, &pt), GTSDK_SEAL_E_REFUSED);
    assert_int_equal(enclave_seal(e, true, 0, signer_blob.data, signer_blob.len, &pt), 0);
    assert_memory_equal(pt.data, secret, sizeof secret);
    gt_enclave_stop(e);
    // The same enclave on another platform root: refused.
    e = start_on(f, f->pf_b);
    assert_int_equal(enclave_seal(e, true, 0, blob.data, blob.len, &pt), GTSDK_SEAL_E_REFUSED);
    gt_enclave_stop(e);
    gt_buf_free(&blob);
    gt_buf_free(&signer_blob);
    gt_buf_free(&pt);
    gt_buf_free(&img_b);
    gt_buf_free(&sig_b);
}

// The seal leaves' request as the enclave process reads it: every field at its offset, the
// reserved bytes must be zero, exactly 64 bytes.
static void test_seal_request_layout(void **state)
{
    (void)state;
    gt_enclave_seal_request q = {.keypolicy = 2, .in = 0x200000001000, .in_len = 7,
                                 .out = 0x200000002000, .out_cap = 4096, .out_len = 9};
    uint8_t raw[GT_ENCLAVE_SEAL_REQUEST_BYTES];
    gt_enclave_seal_request_encode(&q, raw);
    assert_int_equal(raw[0], 2);
    assert_int_equal(raw[GT_ENCLAVE_SEAL_REQUEST_OUT_LEN], 9);
    gt_enclave_seal_request back;
    GT_ASSERT_OK(gt_enclave_seal_request_parse(raw, sizeof raw, &back));
    assert_true(back.in == q.in && back.in_len == 7 && back.out == q.out &&
                back.out_cap == 4096 && back.out_len == 9 && back.keypolicy == 2);
    const size_t reserved[] = {2, 7, 48, 63};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        raw[reserved[i]] = 1;
        GT_ASSERT_CODE(gt_enclave_seal_request_parse(raw, sizeof raw, &back), GT_E_FORMAT);
        raw[reserved[i]] = 0;
    }
    GT_ASSERT_CODE(gt_enclave_seal_request_parse(raw, sizeof raw - 1, &back), GT_E_FORMAT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_enclave_runs_on_the_sealed_platform, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unsealable_platform_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_running_enclave_quoted_end_to_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_report_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_for_another_target_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sealing_inside_the_enclave, setup, teardown),
        cmocka_unit_test(test_seal_request_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
