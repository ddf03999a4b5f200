// cli/: gputravel holder enclave-keys import (docs/holder-enclave.md), INSECURE SIMULATION: the
// dataset key moves into the holder enclave, sealed under its MRSIGNER policy; the plain key
// file is gone and the sealed one does not contain it; a second import has nothing to import;
// enclave-mode options without a platform are a usage error.
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int run(const char *const *args, gt_buf *out)
{
    gt_buf o = {0};
    int rc = gt_test_run_cli(&o, args);
    if (out != NULL) {
        *out = o;
    } else {
        gt_buf_free(&o);
    }
    return rc;
}

static bool holds(const gt_buf *hay, const uint8_t *needle, size_t n)
{
    for (size_t i = 0; i + n <= hay->len; i++) {
        if (memcmp(hay->data + i, needle, n) == 0) {
            return true;
        }
    }
    return false;
}

static void import_seals_and_deletes(void **state)
{
    (void)state;
    char dir[4096], keys[4200], pf[4200], sim[4200], plain[4300], sealed[4300];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(keys, sizeof keys, "%s/keys", dir);
    snprintf(pf, sizeof pf, "%s/pf", dir);
    snprintf(sim, sizeof sim, "%s/sim-root", dir);
    snprintf(plain, sizeof plain, "%s/dataset.key", keys);
    snprintf(sealed, sizeof sealed, "%s/dataset.key.sealed", keys);
    setenv("GT_SIM_ROOT", sim, 1);
    assert_int_equal(run((const char *[]){"keygen", "--out", keys, NULL}, NULL), 0);
    gt_buf key = {0};
    GT_ASSERT_OK(gt_file_read_all(plain, 4096, &key));
    assert_int_equal(key.len, 8 + 32);
    gt_buf out = {0};
    assert_int_equal(run((const char *[]){"holder", "enclave-keys", "import", "--key", keys,
                                          "--enclave-platform", pf, "--enclave", GT_ENCLAVE_DIR,
                                          "--sim-root", sim, NULL}, &out), 0);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    assert_non_null(strstr((char *)out.data, "MRENCLAVE"));
    assert_non_null(strstr((char *)out.data, "INSECURE SIMULATION"));
    gt_buf_free(&out);
    assert_int_equal(access(plain, F_OK), -1);
    gt_buf blob = {0};
    GT_ASSERT_OK(gt_file_read_all(sealed, 4096, &blob));
    assert_true(blob.len > 32);
    assert_false(holds(&blob, key.data + 8, 32));
    // nothing left to import: refused, the sealed key untouched
    assert_int_equal(run((const char *[]){"holder", "enclave-keys", "import", "--key", keys,
                                          "--enclave-platform", pf, "--enclave", GT_ENCLAVE_DIR,
                                          "--sim-root", sim, NULL}, NULL), 1);
    gt_buf again = {0};
    GT_ASSERT_OK(gt_file_read_all(sealed, 4096, &again));
    assert_int_equal(again.len, blob.len);
    assert_memory_equal(again.data, blob.data, blob.len);
    assert_int_equal(run((const char *[]){"holder", "enclave-keys", "import", "--key", keys,
                                          NULL}, NULL), 64);
    assert_int_equal(run((const char *[]){"holder", "--dataset", dir, "--key", keys,
                                          "--agreement", "a.json", "--enclave", GT_ENCLAVE_DIR,
                                          NULL}, NULL), 64);
    gt_buf_free(&again);
    gt_buf_free(&blob);
    gt_buf_free(&key);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(import_seals_and_deletes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
