// attest/: configfs-tsm collection against a fake tree in a temp dir. The test plays the kernel
// through the collector's step hook: on mkdir it creates the attribute files, on the inblob
// write it bumps generation and produces an outblob (a real quote / report from the test data),
// and in the race cases another "writer" bumps generation at the wrong moment.
#include "testlib.h"

#include <gputravel/attest.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *provider;     // what the fake kernel reports
    const char *outblob_rel;  // test data file served as outblob
    const char *aux;          // auxblob content, or NULL for none
    const gt_buf *aux_bin;    // binary auxblob, or NULL
    int extra_bump_at_inblob; // a concurrent writer also wrote inblob: generation += 1 more
    int bump_after_outblob;   // a concurrent writer wrote between outblob and the final read
    uint8_t seen_inblob[GT_REPORT_DATA_BYTES];
    size_t seen_inblob_len;
    int steps;
    char entry[4096];
} fake_kernel;

static void put(const char *entry, const char *attr, const void *data, size_t len)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", entry, attr);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

static void put_str(const char *entry, const char *attr, const char *s)
{
    put(entry, attr, s, strlen(s));
}

static void kernel(void *ctx, gt_tsm_step step, const char *entry)
{
    fake_kernel *k = ctx;
    k->steps++;
    snprintf(k->entry, sizeof k->entry, "%s", entry);
    switch (step) {
    case GT_TSM_STEP_MKDIR:
        put_str(entry, "inblob", "");
        put_str(entry, "outblob", "");
        put_str(entry, "generation", "0\n");
        put_str(entry, "provider", k->provider);
        if (k->aux != NULL) {
            put_str(entry, "auxblob", k->aux);
        }
        if (k->aux_bin != NULL) {
            put(entry, "auxblob", k->aux_bin->data, k->aux_bin->len);
        }
        break;
    case GT_TSM_STEP_INBLOB_WRITTEN: {
        gt_buf in = {0};
        char path[4300];
        snprintf(path, sizeof path, "%s/inblob", entry);
        GT_ASSERT_OK(gt_file_read_all(path, 4096, &in));
        k->seen_inblob_len = in.len;
        memcpy(k->seen_inblob, in.data, in.len < 64 ? in.len : 64);
        gt_buf_free(&in);
        char gen[16];
        snprintf(gen, sizeof gen, "%d\n", 1 + k->extra_bump_at_inblob);
        put_str(entry, "generation", gen);
        gt_buf blob = {0};
        gt_test_read_data(k->outblob_rel, &blob);
        put(entry, "outblob", blob.data, blob.len);
        gt_buf_free(&blob);
        break;
    }
    case GT_TSM_STEP_OUTBLOB_READ:
        if (k->bump_after_outblob) {
            put_str(entry, "generation", "2\n");
        }
        break;
    case GT_TSM_STEP_BEFORE_RMDIR: {
        // The real configfs removes the attributes with the directory.
        static const char *const attrs[] = {"inblob", "outblob", "generation", "provider",
                                            "auxblob"};
        for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
            char path[4300];
            snprintf(path, sizeof path, "%s/%s", entry, attrs[i]);
            unlink(path);
        }
        break;
    }
    default:
        fail_msg("unknown step %d", (int)step);
    }
}

static void rd_fill(uint8_t rd[GT_REPORT_DATA_BYTES])
{
    for (int i = 0; i < GT_REPORT_DATA_BYTES; i++) {
        rd[i] = (uint8_t)(0x40 + i);
    }
}

static void collects_a_tdx_quote(void **state)
{
    (void)state;
    char root[4096];
    gt_test_tmpdir(root, sizeof root);
    fake_kernel k = {.provider = "tdx_guest\n",
                     .outblob_rel = "attestation/tdx/go-tdx-guest_quote_v5_sample.dat"};
    gt_tsm_params tp = {.root = root, .hook = kernel, .hook_ctx = &k};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);

    gt_tsm_report rep;
    GT_ASSERT_OK(gt_tsm_report_collect(&rep, &tp, rd));
    assert_int_equal(k.seen_inblob_len, 64);  // the kernel got exactly our report_data
    assert_memory_equal(k.seen_inblob, rd, 64);
    assert_string_equal(rep.provider, "tdx_guest");
    assert_int_equal(rep.generation, 1);
    assert_int_equal(rep.outblob.len, 5006);
    assert_int_equal(rep.auxblob.len, 0);
    assert_int_equal(k.steps, 4);
    assert_non_null(strstr(k.entry, "/gputravel-"));  // a unique entry name was made
    assert_int_equal(gt_test_count_files(root), 0);   // and removed again
    gt_tsm_report_free(&rep);

    // Through gt_attest_collect: evidence of type tdx, version 5, ready to envelope.
    gt_collect_params cp = {.type = GT_TEE_TDX, .tsm = &tp};
    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_attest_collect(&ev, &cp, rd));
    assert_int_equal(ev.type, GT_TEE_TDX);
    assert_int_equal(ev.version, 5);
    assert_true(ev.enveloped);
    gt_buf enc = {0};
    GT_ASSERT_OK(gt_evidence_encode(&ev, &enc));
    gt_evidence back = {0};
    GT_ASSERT_OK(gt_evidence_parse(&back, enc.data, enc.len, GT_TEE_AUTO));
    assert_int_equal(back.type, GT_TEE_TDX);
    assert_int_equal(back.body.len, 5006);
    gt_evidence_free(&back);
    gt_buf_free(&enc);
    gt_evidence_free(&ev);
    gt_test_rmtree(root);
}

static void collects_an_snp_report_with_auxblob(void **state)
{
    (void)state;
    char root[4096];
    gt_test_tmpdir(root, sizeof root);
    fake_kernel k = {.provider = "sev_guest\n",
                     .outblob_rel = "attestation/snp/go-sev-guest_attestation.bin",
                     .aux = "certificate table"};
    gt_tsm_params tp = {.root = root, .entry = "mine", .hook = kernel, .hook_ctx = &k};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);
    gt_collect_params cp = {.type = GT_TEE_AUTO, .tsm = &tp};  // the provider decides
    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_attest_collect(&ev, &cp, rd));
    assert_int_equal(ev.type, GT_TEE_SNP);
    assert_int_equal(ev.version, 2);
    assert_int_equal(ev.aux.len, strlen("certificate table"));
    assert_memory_equal(ev.aux.data, "certificate table", ev.aux.len);
    char want[4200];
    snprintf(want, sizeof want, "%s/mine", root);
    assert_string_equal(k.entry, want);
    gt_evidence_free(&ev);

    // Asking for tdx from an SNP guest: a clear error, no evidence.
    cp.type = GT_TEE_TDX;
    gt_err e = gt_attest_collect(&ev, &cp, rd);
    assert_int_equal(e.code, GT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "provider 'sev_guest'"));
    assert_null(ev.body.data);
    assert_int_equal(gt_test_count_files(root), 0);
    gt_test_rmtree(root);
}

static void generation_race_after_outblob_fails(void **state)
{
    (void)state;
    char root[4096];
    gt_test_tmpdir(root, sizeof root);
    fake_kernel k = {.provider = "tdx_guest", .bump_after_outblob = 1,
                     .outblob_rel = "attestation/tdx/go-tdx-guest_quote_v5_sample.dat"};
    gt_tsm_params tp = {.root = root, .hook = kernel, .hook_ctx = &k};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);
    gt_tsm_report rep;
    gt_err e = gt_tsm_report_collect(&rep, &tp, rd);
    assert_int_equal(e.code, GT_E_STATE);
    assert_non_null(strstr(e.msg, "generation changed from 1 to 2"));
    assert_int_equal(rep.outblob.len, 0);  // nothing of the raced report is handed out
    assert_null(rep.outblob.data);
    assert_int_equal(gt_test_count_files(root), 0);
    gt_test_rmtree(root);
}

static void generation_race_at_inblob_fails(void **state)
{
    (void)state;
    char root[4096];
    gt_test_tmpdir(root, sizeof root);
    fake_kernel k = {.provider = "tdx_guest", .extra_bump_at_inblob = 1,
                     .outblob_rel = "attestation/tdx/go-tdx-guest_quote_v5_sample.dat"};
    gt_tsm_params tp = {.root = root, .hook = kernel, .hook_ctx = &k};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);
    gt_collect_params cp = {.type = GT_TEE_TDX, .tsm = &tp};
    gt_evidence ev = {0};
    gt_err e = gt_attest_collect(&ev, &cp, rd);
    assert_int_equal(e.code, GT_E_STATE);
    assert_non_null(strstr(e.msg, "another writer"));
    assert_null(ev.body.data);
    gt_test_rmtree(root);
}

static void bad_kernel_output_is_an_error(void **state)
{
    (void)state;
    char root[4096];
    gt_test_tmpdir(root, sizeof root);
    // An outblob that is no quote at all.
    fake_kernel k = {.provider = "tdx_guest", .outblob_rel = "attestation/README.md"};
    gt_tsm_params tp = {.root = root, .hook = kernel, .hook_ctx = &k};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);
    gt_collect_params cp = {.type = GT_TEE_TDX, .tsm = &tp};
    gt_evidence ev = {0};
    gt_err e = gt_attest_collect(&ev, &cp, rd);
    assert_true(e.code == GT_E_UNSUPPORTED || e.code == GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "configfs-tsm outblob"));
    assert_null(ev.body.data);
    // An unknown provider.
    k.provider = "arm_cca_guest";
    k.outblob_rel = "attestation/tdx/go-tdx-guest_quote_v5_sample.dat";
    cp.type = GT_TEE_AUTO;
    e = gt_attest_collect(&ev, &cp, rd);
    assert_int_equal(e.code, GT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "arm_cca_guest"));
    gt_test_rmtree(root);
}

static void no_configfs_falls_back_to_the_device(void **state)
{
    (void)state;
    char root[4096], missing[4200], dev[4200];
    gt_test_tmpdir(root, sizeof root);
    snprintf(missing, sizeof missing, "%s/no-tsm", root);
    snprintf(dev, sizeof dev, "%s/no-device", root);
    gt_tsm_params tp = {.root = missing};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);
    gt_tsm_report rep;
    GT_ASSERT_CODE(gt_tsm_report_collect(&rep, &tp, rd), GT_E_NOTFOUND);
    // Neither configfs-tsm nor the guest device exists here: NOTFOUND from the device open.
    gt_collect_params cp = {.type = GT_TEE_SNP, .tsm = &tp, .dev_path = dev};
    gt_evidence ev = {0};
    gt_err e = gt_attest_collect(&ev, &cp, rd);
    assert_int_equal(e.code, GT_E_NOTFOUND);
    assert_non_null(strstr(e.msg, "no-device"));
    cp.type = GT_TEE_TDX;
    e = gt_attest_collect(&ev, &cp, rd);
    assert_int_equal(e.code, GT_E_NOTFOUND);
    // A file that is not the guest device: the ioctl fails cleanly.
    put_str(root, "not-a-device", "x");
    snprintf(dev, sizeof dev, "%s/not-a-device", root);
    uint8_t tdreport[GT_TDX_TDREPORT_BYTES];
    GT_ASSERT_CODE(gt_tdx_guest_get_report0(tdreport, dev, rd), GT_E_IO);
    gt_buf rep_buf = {0};
    GT_ASSERT_CODE(gt_sev_guest_get_report(&rep_buf, dev, 0, rd), GT_E_IO);
    assert_int_equal(rep_buf.len, 0);
    GT_ASSERT_CODE(gt_sev_guest_get_report(&rep_buf, dev, 4, rd), GT_E_ARG);
    // Entry names cannot escape the root.
    gt_tsm_params bad = {.root = root, .entry = "../x"};
    GT_ASSERT_CODE(gt_tsm_report_collect(&rep, &bad, rd), GT_E_ARG);
    gt_test_rmtree(root);
}

// DER of the n-th certificate of a PEM file under tests/data (test fixture: OpenSSL directly).
static void pem_nth_der(const char *rel, int n, gt_buf *der, gt_buf *pem_out)
{
    gt_buf pem = {0};
    gt_test_read_data(rel, &pem);
    BIO *bio = BIO_new_mem_buf(pem.data, (int)pem.len);
    X509 *x = NULL;
    for (int i = 0; i <= n; i++) {
        X509_free(x);
        x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        assert_non_null(x);
    }
    unsigned char *p = NULL;
    int len = i2d_X509(x, &p);
    assert_true(len > 0);
    GT_ASSERT_OK(gt_buf_append(der, p, (size_t)len));
    if (pem_out != NULL) {
        BIO *w = BIO_new(BIO_s_mem());
        PEM_write_bio_X509(w, x);
        char *d = NULL;
        long wl = BIO_get_mem_data(w, &d);
        GT_ASSERT_OK(gt_buf_append(pem_out, d, (size_t)wl));
        BIO_free(w);
    }
    OPENSSL_free(p);
    X509_free(x);
    BIO_free(bio);
    gt_buf_free(&pem);
}

static void table_entry(gt_buf *t, const uint8_t guid[16], uint32_t off, uint32_t len)
{
    uint8_t e[24];
    memcpy(e, guid, 16);
    gt_store_u32le(e + 16, off);
    gt_store_u32le(e + 20, len);
    GT_ASSERT_OK(gt_buf_append(t, e, sizeof e));
}

// An SNP guest's evidence carries its certificate table (VCEK, ASK, ARK): a verifier then needs
// only the ARK it trusts; the table's own ARK is never trusted.
static void snp_certificate_table_verifies_with_the_ark_only(void **state)
{
    (void)state;
    static const uint8_t vcek_guid[16] = {0x63, 0xda, 0x75, 0x8d, 0xe6, 0x64, 0x45, 0x64,
                                          0xad, 0xc5, 0xf4, 0xb9, 0x3b, 0xe8, 0xac, 0xcd};
    static const uint8_t ask_guid[16] = {0x4a, 0xb7, 0xb3, 0x79, 0xbb, 0xac, 0x4f, 0xe4,
                                         0xa0, 0x2f, 0x05, 0xae, 0xf3, 0x27, 0xc7, 0x82};
    static const uint8_t ark_guid[16] = {0xc0, 0xb4, 0x06, 0xa4, 0xa8, 0x03, 0x49, 0x52,
                                         0x97, 0x43, 0x3f, 0xb6, 0x01, 0x4c, 0xd0, 0xae};
    gt_buf vcek = {0}, ask = {0}, ark = {0}, ark_pem = {0}, table = {0};
    gt_test_read_data("attestation/snp/go-sev-guest_vcek.der", &vcek);
    pem_nth_der("attestation/snp/amd_milan_ask_ark.pem", 0, &ask, NULL);
    pem_nth_der("attestation/snp/amd_milan_ask_ark.pem", 1, &ark, &ark_pem);
    uint32_t off = 4 * 24;  // three entries and the terminator
    table_entry(&table, vcek_guid, off, (uint32_t)vcek.len);
    table_entry(&table, ask_guid, off + (uint32_t)vcek.len, (uint32_t)ask.len);
    table_entry(&table, ark_guid, off + (uint32_t)(vcek.len + ask.len), (uint32_t)ark.len);
    static const uint8_t zero[24];
    GT_ASSERT_OK(gt_buf_append(&table, zero, sizeof zero));
    GT_ASSERT_OK(gt_buf_append(&table, vcek.data, vcek.len));
    GT_ASSERT_OK(gt_buf_append(&table, ask.data, ask.len));
    GT_ASSERT_OK(gt_buf_append(&table, ark.data, ark.len));

    char root[4096];
    gt_test_tmpdir(root, sizeof root);
    fake_kernel k = {.provider = "sev_guest", .aux_bin = &table,
                     .outblob_rel = "attestation/snp/go-sev-guest_attestation.bin"};
    gt_tsm_params tp = {.root = root, .hook = kernel, .hook_ctx = &k};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    rd_fill(rd);
    gt_collect_params cp = {.type = GT_TEE_SNP, .tsm = &tp};
    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_attest_collect(&ev, &cp, rd));
    assert_int_equal(ev.aux.len, table.len);

    gt_attest_file ark_file = {.path = "ark.pem", .data = gt_buf_span(&ark_pem)};
    gt_appraise_params p = {.roots = &ark_file, .root_count = 1};
    gt_appraisal a;
    // This report's guest policy allows debug (MANIFEST: policy 0xb0000, debug=True): the
    // default policy refuses it, a policy stating allow_debug accepts it.
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, NULL, &p));
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_true(a.signature_valid && a.chain_valid);
    assert_int_equal(a.reason_count, 1);
    assert_true(gt_appraisal_has_reason(&a, "debug TEE refused: the policy does not set "
                                            "allow_debug (the snp evidence has debug enabled)"));
    gt_appraisal_free(&a);
    static const char debug_ok[] = "{\"allow_debug\": true}";
    gt_policy *pol = NULL;
    GT_ASSERT_OK(gt_policy_parse(&pol, debug_ok, sizeof debug_ok - 1));
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, pol, &p));
    gt_policy_free(pol);
    if (a.verdict != GT_VERDICT_ACCEPTED) {
        fail_msg("verdict %s: %s", gt_verdict_name(a.verdict), a.reason_count ? a.reasons[0] : "");
    }
    assert_true(a.signature_valid && a.chain_valid);
    gt_appraisal_free(&a);

    // Without a trusted root the table's ARK does not help: invalid.
    gt_appraise_params none = {0};
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, NULL, &none));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "no trusted root given"));
    gt_appraisal_free(&a);

    // A table entry pointing past the end: a clear reason, invalid.
    gt_store_u32le(ev.aux.data + 16, 1u << 30);
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, NULL, &p));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "snp certificate table: entry 0"));
    gt_appraisal_free(&a);

    gt_evidence_free(&ev);
    gt_buf_free(&vcek);
    gt_buf_free(&ask);
    gt_buf_free(&ark);
    gt_buf_free(&ark_pem);
    gt_buf_free(&table);
    gt_test_rmtree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collects_a_tdx_quote),
        cmocka_unit_test(collects_an_snp_report_with_auxblob),
        cmocka_unit_test(generation_race_after_outblob_fails),
        cmocka_unit_test(generation_race_at_inblob_fails),
        cmocka_unit_test(bad_kernel_output_is_an_error),
        cmocka_unit_test(no_configfs_falls_back_to_the_device),
        cmocka_unit_test(snp_certificate_table_verifies_with_the_ark_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
