// attest/: configfs-tsm collection against a fake tree in a temp dir. The test plays the kernel
// through the collector's step hook: on mkdir it creates the attribute files, on the inblob
// write it bumps generation and produces an outblob (a real quote / report from the test data),
// and in the race cases another "writer" bumps generation at the wrong moment.
#include "testlib.h"

#include <gputravel/attest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *provider;     // what the fake kernel reports
    const char *outblob_rel;  // test data file served as outblob
    const char *aux;          // auxblob content, or NULL for none
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collects_a_tdx_quote),
        cmocka_unit_test(collects_an_snp_report_with_auxblob),
        cmocka_unit_test(generation_race_after_outblob_fails),
        cmocka_unit_test(generation_race_at_inblob_fails),
        cmocka_unit_test(bad_kernel_output_is_an_error),
        cmocka_unit_test(no_configfs_falls_back_to_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
