// gputravel demo, the README's main command, end to end with few steps: it must succeed, leave
// the plots and verifiable ledgers, and leave no process behind.
#include "testlib.h"

#include <gputravel/holder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void demo_runs_end_to_end(void **state)
{
    (void)state;
    char dir[256], out[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "demo"));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"demo", "--out", out, "--steps", "12", NULL});
    if (rc != 0 || strstr((char *)log.data, "demo OK: 12 steps on 3 holders' data") == NULL) {
        char logs[600];
        snprintf(logs, sizeof logs, "%s/logs", out);
        gt_test_fail_log(&log, logs, "demo failed (%d)", rc);
    }
    char first[256];  // "demo OK: ..., final loss X (...)"
    snprintf(first, sizeof first, "%s", strstr((char *)log.data, "demo OK: "));
    // Each holder's ledger head is anchored in a software TPM's counter (swtpm, which the test
    // command installs: a CVM's vTPM in production).
    if (strstr((char *)log.data, "its head anchored in a TPM counter (swtpm)") == NULL) {
        gt_test_fail_log(&log, NULL, "the demo's holders ran without their TPM rollback guard");
    }
    assert_non_null(strstr((char *)log.data, "insecure-simulation"));
    // the trainer's three tries to read a travelled chunk back, each refused, naming its label
    const char *at = (const char *)log.data;
    for (int i = 0; i < 3; i++) {
        at = strstr(at, "REFUSED by the device:");
        assert_non_null(at);
        at++;
    }
    assert_non_null(strstr((char *)log.data, "holds data labelled dataset"));
    assert_null(strstr((char *)log.data, "?!"));
    // The model left the trainer sealed for the three holders, and the sample comes from the
    // copy the first of them opened with its own key.
    assert_non_null(strstr((char *)log.data, "sealed the checkpoint of step 12"));
    assert_non_null(strstr((char *)log.data, "for hospital, bank, lab"));
    assert_non_null(strstr((char *)log.data, "hospital opened"));
    // ... signed by the trainer the hospital appraised (its own ledger's session entry).
    assert_non_null(strstr((char *)log.data, "It was sealed by the trainer hospital appraised"));
    assert_non_null(strstr((char *)log.data, "hospital appraised that trainer as: sim measurement"));
    gt_buf_free(&log);
    // Any recipient can check the same with its own key folder and ledger.
    char sealed[700], keys[700], ledger[700], opened[700];
    snprintf(sealed, sizeof sealed, "%s/model.sealed", out);
    snprintf(keys, sizeof keys, "%s/bank/keys", out);
    snprintf(ledger, sizeof ledger, "%s/bank/ledger.log", out);
    snprintf(opened, sizeof opened, "%s/bank-model.bin", dir);
    rc = gt_test_run_cli(&log, (const char *[]){"open-checkpoint", sealed, "--key", keys,
                                                 "--out", opened, "--ledger", ledger, NULL});
    if (rc != 0 || strstr((char *)log.data, "the trainer 'demo-trainer' this holder served") ==
                       NULL) {
        gt_test_fail_log(&log, NULL, "bank could not open the demo's checkpoint (%d)", rc);
    }
    gt_buf_free(&log);
    const char *names[] = {"hospital", "bank", "lab"};
    for (int i = 0; i < 3; i++) {
        char ledger[700];
        snprintf(ledger, sizeof ledger, "%s/%s/ledger.log", out, names[i]);
        gt_ledger_summary s;
        GT_ASSERT_OK(gt_ledger_verify_file(ledger, NULL, NULL, &s));
        // genesis and the trainer's session, and for the first holder (12 steps fit in its
        // first chunk) grant and use
        assert_true(s.entries >= (i == 0 ? 4u : 2u));
    }
    char p[700];
    // The trainer's state folder holds no plaintext weights: the device sealed its state.
    snprintf(p, sizeof p, "%s/trainer/model.bin", out);
    assert_false(gt_path_exists(p));
    snprintf(p, sizeof p, "%s/trainer/resume.sealed", out);
    assert_true(gt_path_exists(p));
    snprintf(p, sizeof p, "%s/trainer", out);
    rc = gt_test_run_cli(&log, (const char *[]){"inspect", p, NULL});
    if (rc != 0 || strstr((char *)log.data, "device-sealed resume state") == NULL ||
        strstr((char *)log.data, "none is plaintext model data") == NULL) {
        gt_test_fail_log(&log, NULL, "inspect of the trainer's state folder (%d)", rc);
    }
    gt_buf_free(&log);
    snprintf(p, sizeof p, "%s/model.sealed", out);
    assert_true(gt_path_exists(p));
    snprintf(p, sizeof p, "%s/hospital/model.bin", out);
    assert_true(gt_path_exists(p));
    // The demo's policy says what it allows: simulated TEEs, never a debug one.
    char pol[700], simroot[700], rootpub[800], ev[700];
    snprintf(pol, sizeof pol, "%s/policy.json", out);
    snprintf(simroot, sizeof simroot, "%s/sim-root", dir);
    snprintf(rootpub, sizeof rootpub, "%s/root-pub.pem", simroot);
    snprintf(ev, sizeof ev, "%s/debug.gtev", dir);
    for (int debug = 1; debug >= 0; debug--) {
        rc = gt_test_run_cli(NULL, (const char *[]){"attest", "--type", "sim", "--sim-root",
                                                    simroot, "--report-data", "00", "--out", ev,
                                                    debug ? "--debug" : NULL, NULL});
        assert_int_equal(rc, 0);
        rc = gt_test_run_cli(&log, (const char *[]){"verify", "--evidence", ev, "--root", rootpub,
                                                    "--policy", pol, NULL});
        GT_ASSERT_OK(gt_buf_append(&log, "", 1));
        assert_int_equal(rc, debug ? 1 : 0);
        assert_int_equal(strstr((char *)log.data, "debug TEE refused: the policy does not set "
                                                  "allow_debug") != NULL,
                         debug);
        gt_buf_free(&log);
    }
    // Running it again into the same folder starts over cleanly; under a 4 MiB cap, below the
    // model's state and its chunks, devd pages, and the demo says so and ends with the loss
    // it had uncapped (the same bytes: docs/paging.md).
    const char *loss = strstr(first, "final loss ");
    assert_non_null(loss);
    char want[32];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(loss, " (,\n") + 11, loss);
    gt_buf paged = {0};
    rc = gt_test_run_cli(&paged, (const char *[]){"demo", "--out", out, "--steps", "12",
                                                  "--mem-limit", "4MiB", NULL});
    const char *pages = strstr((char *)paged.data, "device memory capped at 4.0 MiB: ");
    if (rc != 0 || pages == NULL || strstr((char *)paged.data, want) == NULL ||
        strstr((char *)paged.data, "Paging: protected memory stayed within 4.0 MiB") == NULL) {
        gt_test_fail_log(&paged, NULL, "the demo under a 4 MiB cap (%d; want '%s')", rc, want);
    }
    assert_true(strtoull(pages + strlen("device memory capped at 4.0 MiB: "), NULL, 10) > 0);
    gt_buf_free(&paged);
    rc = gt_test_run_cli(NULL, (const char *[]){"demo", "--out", out, "--mem-limit", "0",
                                               "--quiet", NULL});
    assert_int_equal(rc, 64);  // a usage error
    // A folder the demo did not make is refused.
    rc = gt_test_run_cli(NULL, (const char *[]){"demo", "--out", dir, "--quiet", NULL});
    assert_int_equal(rc, 1);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demo_runs_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
