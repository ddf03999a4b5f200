// holder/: the ledger under injected write failures (testlib/faults.h). A failed append leaves
// the ledger exactly as it was (the torn entry removed, the chain intact) and the next append
// works; a lazy append (a confirmed use) is written but not fsynced until the next durable
// append or gt_ledger_sync, whose own failure is reported.
#include "testlib.h"
#include "faults.h"
#include "ledger_fixture.h"

#include <gputravel/holder.h>

#include <string.h>
#include <unistd.h>

static uint64_t entries(void)
{
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(path, pub, NULL, &s));
    return s.entries;
}

typedef struct {
    gt_ledger *l;
    uint64_t before;  // entries before the operation
} sweep_ctx;

static gt_err append_grant(void *p)
{
    sweep_ctx *c = p;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "chunk", 7);
    gt_err e = gt_ledger_append(c->l, "grant", d);
    cJSON_Delete(d);
    return e;
}

static void unchanged(void *p, uint64_t n)
{
    sweep_ctx *c = p;
    (void)n;
    assert_int_equal(entries(), c->before);
}

static void failed_append_leaves_the_chain(void **state)
{
    (void)state;
    sweep_ctx c = {0};
    GT_ASSERT_OK(gt_ledger_open(&c.l, path, secret));
    GT_ASSERT_OK(append_grant(&c));
    c.before = entries();
    uint64_t failures = gt_fault_sweep(GT_FAULT_WRITE, GT_E_IO, append_grant, unchanged, &c);
    assert_true(failures >= 2);  // the write and the fsync
    assert_int_equal(entries(), c.before + 1);  // the run that passed, chained on the intact head
    GT_ASSERT_OK(append_grant(&c));
    gt_ledger_close(c.l);
    assert_int_equal(entries(), c.before + 2);
}

static void lazy_append_defers_only_the_fsync(void **state)
{
    (void)state;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, secret));
    uint64_t before = entries();
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "chunk", 1);
    // a lazy append makes one write-side call (the write), no fsync
    gt_fault_arm(GT_FAULT_WRITE, 2);
    GT_ASSERT_OK(gt_ledger_append_lazy(l, "use", d));
    assert_int_equal(gt_fault_calls(), 1);
    assert_false(gt_fault_disarm());
    assert_int_equal(entries(), before + 1);  // in the file at once: a crash loses nothing
    // the deferred fsync fails: reported, and tried again by the next sync
    gt_fault_arm(GT_FAULT_WRITE, 1);
    GT_ASSERT_CODE(gt_ledger_sync(l), GT_E_IO);
    assert_true(gt_fault_disarm());
    gt_fault_arm(GT_FAULT_WRITE, 1);
    GT_ASSERT_CODE(gt_ledger_sync(l), GT_E_IO);  // still owed
    gt_fault_disarm();
    GT_ASSERT_OK(gt_ledger_sync(l));
    gt_fault_arm(GT_FAULT_WRITE, 1);
    GT_ASSERT_OK(gt_ledger_sync(l));  // nothing owed: no fsync at all
    assert_int_equal(gt_fault_calls(), 0);
    gt_fault_disarm();
    // a durable append after a lazy one: one write and one fsync, covering both
    GT_ASSERT_OK(gt_ledger_append_lazy(l, "use", d));
    gt_fault_arm(GT_FAULT_WRITE, 3);
    GT_ASSERT_OK(gt_ledger_append(l, "grant", d));
    assert_int_equal(gt_fault_calls(), 2);
    gt_fault_disarm();
    gt_fault_arm(GT_FAULT_WRITE, 1);
    GT_ASSERT_OK(gt_ledger_sync(l));
    assert_int_equal(gt_fault_calls(), 0);
    gt_fault_disarm();
    cJSON_Delete(d);
    gt_ledger_close(l);
    assert_int_equal(entries(), before + 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(failed_append_leaves_the_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(lazy_append_defers_only_the_fsync, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
