// A ledger path in a fresh temporary folder and a holder key pair, per test (test_ledger.c and
// test_ledger_faults.c). Header-only: each includes it once.
#ifndef GT_TESTLIB_LEDGER_FIXTURE_H
#define GT_TESTLIB_LEDGER_FIXTURE_H

#include "testlib.h"

#include <gputravel/holder.h>

static char dir[256], path[512];
static uint8_t secret[GT_ED25519_SECRET_BYTES], pub[GT_ED25519_PUBLIC_BYTES];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "ledger.log"));
    GT_ASSERT_OK(gt_ed25519_keypair(pub, secret));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

#endif
