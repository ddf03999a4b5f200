// holder/: the ledger's rollback guard on a TPM 2.0 NV counter, through tpm2-tss ESAPI, against
// a real software TPM (swtpm, started per test on its own state folder): the scenarios of
// rollback_fixture.h, plus the index's life. Without swtpm every case is skipped and the
// executable exits 77 (CTest: skipped, never passed); CI installs it (scripts/deps.sh).
#include "testlib.h"
#include "rollback_fixture.h"

#include <stdio.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>

static char why[256];

// The index is defined by the first increment, and from then on reads and increments by one.
static void counter_defined_on_first_increment(void **state)
{
    (void)state;
    rb_require();
    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, env.sw.spec));
    assert_int_equal(gt_rollback_guard_kind(g), GT_ROLLBACK_TPM);
    assert_non_null(strstr(gt_rollback_guard_name(g), "nv 0x01806774"));
    uint64_t v = 0, first = 0;
    bool w = true;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_false(w);  // no index yet
    GT_ASSERT_OK(gt_rollback_guard_increment(g, &first));
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_true(w);
    assert_int_equal(v, first);
    for (uint64_t i = 1; i <= 3; i++) {
        GT_ASSERT_OK(gt_rollback_guard_increment(g, &v));
        assert_int_equal(v, first + i);
    }
    gt_rollback_guard_close(g);
    // The value survives the TPM's restart (it is in the TPM's NV, not in this process).
    gt_test_swtpm_stop(&env.sw);
    gt_test_swtpm_start(&env.sw, env.tpm_state);
    assert_int_equal(rb_counter(), first + 3);
}

// An index that exists but is no counter (here an ordinary 8-byte index, defined directly
// through ESAPI) is refused, never written.
static void index_of_another_kind_is_refused(void **state)
{
    (void)state;
    rb_require();
    const char *tcti_conf = env.sw.spec + strlen("tpm:");
    TSS2_TCTI_CONTEXT *tcti = NULL;
    ESYS_CONTEXT *esys = NULL;
    assert_int_equal(Tss2_TctiLdr_Initialize(tcti_conf, &tcti), TSS2_RC_SUCCESS);
    assert_int_equal(Esys_Initialize(&esys, tcti, NULL), TSS2_RC_SUCCESS);
    TPM2B_AUTH auth = {.size = 0};
    TPM2B_NV_PUBLIC pub = {.nvPublic = {.nvIndex = 0x01806776, .nameAlg = TPM2_ALG_SHA256,
                                        .attributes = TPMA_NV_AUTHWRITE | TPMA_NV_AUTHREAD,
                                        .dataSize = 8}};
    ESYS_TR nv = ESYS_TR_NONE;
    assert_int_equal(Esys_NV_DefineSpace(esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                         ESYS_TR_NONE, &auth, &pub, &nv),
                     TSS2_RC_SUCCESS);
    Esys_TR_Close(esys, &nv);
    Esys_Finalize(&esys);
    Tss2_TctiLdr_Finalize(&tcti);

    char spec[300];
    snprintf(spec, sizeof spec, "tpm@0x01806776:%s", tcti_conf);
    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, spec));
    uint64_t v = 0;
    bool w = false;
    GT_ASSERT_ERR(gt_rollback_guard_read(g, &v, &w), GT_E_STATE, "is not a counter");
    GT_ASSERT_ERR(gt_rollback_guard_increment(g, &v), GT_E_STATE, "is not a counter");
    gt_ledger *l = NULL;
    GT_ASSERT_ERR(gt_ledger_open_guarded(&l, env.ledger, env.secret, g), GT_E_STATE,
                  "is not a counter");
    gt_rollback_guard_close(g);
}

int main(void)
{
    rb_use_tpm = true;
    bool have = gt_test_swtpm_find(&rb_found, why, sizeof why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(counter_defined_on_first_increment, rb_setup,
                                        rb_teardown),
        cmocka_unit_test_setup_teardown(index_of_another_kind_is_refused, rb_setup, rb_teardown),
        RB_SCENARIOS,
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!have) {
        printf("SKIPPED: %s\n", why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
