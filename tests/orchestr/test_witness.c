// holder/ + orchestr/: co-holder witnesses (travel.h). Holders that require them serve only after
// their co-holders countersigned their ledger heads through the trainer; a holder whose ledger
// was cut back, deleted or replaced behind a head a co-holder witnessed refuses to serve, with no
// TPM; a trainer that withholds the witnesses gets nothing.
#include "collab_testlib.h"

#include <string.h>
#include <unistd.h>

static gt_tc_fixture F;

static int setup(void **state)
{
    (void)state;
    gt_tc_setup(&F, 2, 1200, 400, NULL, NULL);  // 3 chunks of 400 tokens per holder
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_tc_teardown(&F);
    return 0;
}

typedef struct {
    gt_tc_holder runs[2];
    int ports[2];
    gt_agreement a;
} world;

static void start(world *w, bool require)
{
    memset(w, 0, sizeof *w);
    gt_tc_listen(&F, w->runs, w->ports);
    gt_tc_agreement(&F, &w->a, w->ports,
                    &(gt_tc_terms){.steps = 4, .token_budget = 100000, .max_uses = 20});
    for (int h = 0; h < 2; h++) {
        gt_tc_holder_opts o = {.require_witnesses = require};
        gt_tc_serve_thread(&F, &w->runs[h], h, &w->a, &o);
    }
}

static void stop(world *w)
{
    for (int h = 0; h < 2; h++) {
        gt_tc_stop(&w->runs[h], false);
    }
}

static gt_err train(world *w, const char *name)
{
    static int runs;
    char sd[512];
    snprintf(sd, sizeof sd, "%s/state-%d", F.dir, runs++);
    GT_ASSERT_OK(gt_mkdir_p(sd, 0700));
    gt_tc_train_opts o = {.a = &w->a, .state_dir = sd,
                          .transfer = GT_TRANSFER_CONVENTIONAL_KEYRELEASE};
    gt_collab_report rep;
    gt_err e = gt_tc_train(&o, &rep, NULL);
    print_message("%-34s %s\n", name, gt_is_ok(e) ? "trained" : e.msg);
    return e;
}

static void copy_file(const char *from, const char *to)
{
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(from, 1 << 26, &b));
    GT_ASSERT_OK(gt_file_write_atomic(to, b.data, b.len, 0600));
    gt_buf_free_nowipe(&b);
}

// Two runs witnessed; then h0's ledger is restored to its copy from after the first run (a
// rollback: the disk's attacker wants h0's chunks granted again), deleted, or replaced.
static void rolled_back_ledger_is_caught_by_co_holders(void **state)
{
    (void)state;
    world w;
    char saved[600], other[600];
    snprintf(saved, sizeof saved, "%s/h0-ledger-after-run-1", F.dir);
    snprintf(other, sizeof other, "%s/h0-ledger-other", F.dir);
    for (int h = 0; h < 2; h++) {
        unlink(F.ledgers[h]);
    }
    start(&w, true);
    GT_ASSERT_OK(train(&w, "first run (witnessed)"));
    stop(&w);
    copy_file(F.ledgers[0], saved);
    start(&w, true);
    GT_ASSERT_OK(train(&w, "second run (witnessed)"));
    stop(&w);
    gt_tc_tally t;
    gt_tc_ledger_tally(&F, 1, &t);
    assert_int_equal(t.witnesses, 2);  // h1 witnessed (and h0 confirmed) h0's head in each run
    gt_tc_ledger_tally(&F, 0, &t);
    assert_int_equal(t.witnesses, 2);

    // Restored to the older copy: the head h1 witnessed in run 2 is not in it.
    copy_file(saved, F.ledgers[0]);
    start(&w, true);
    gt_err e = train(&w, "h0 restored to an old copy");
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "holder h0 refused"));
    assert_non_null(strstr(e.msg, "holder h1 witnessed it at"));
    assert_non_null(strstr(e.msg, "rolled back or replaced"));
    stop(&w);
    gt_tc_tally restored;
    gt_tc_ledger_tally(&F, 0, &restored);  // it still verifies: a real ledger, just an old one
    assert_true(restored.refusals >= 1);    // the refusal is on record
    // Restarted, still refused: h1 records a head only once its holder confirmed it, and a
    // rolled-back h0 never confirms its forked head, so h1 still holds run 2's.
    start(&w, true);
    e = train(&w, "h0 restored, restarted");
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "rolled back or replaced"));
    stop(&w);
    gt_tc_ledger_tally(&F, 1, &t);
    assert_int_equal(t.witnesses, 2);  // nothing of the forked history was recorded

    // Deleted: a new genesis, behind what h1 witnessed.
    unlink(F.ledgers[0]);
    start(&w, true);
    e = train(&w, "h0 ledger deleted");
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "rolled back or replaced"));
    stop(&w);

    // Replaced by a ledger of the same length but another history: the head differs.
    copy_file(saved, other);
    copy_file(saved, F.ledgers[0]);
    start(&w, false);  // h0 unguarded for a while: its ledger grows apart from what h1 saw
    GT_ASSERT_OK(train(&w, "h0 unwitnessed meanwhile"));
    stop(&w);
    start(&w, true);
    e = train(&w, "h0 with a forked history");
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "rolled back or replaced"));
    stop(&w);
}

// A trainer that connects but never runs the witness round is refused every chunk by a holder
// that requires witnesses; a holder that does not require them serves as before.
static void withheld_witnesses_get_nothing(void **state)
{
    (void)state;
    for (int h = 0; h < 2; h++) {
        unlink(F.ledgers[h]);
    }
    world w;
    start(&w, true);
    gt_net_attestor att = gt_tc_toy_trainer();
    gt_holder_conn *c = NULL;
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x61, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c, &w.a, 0, &att, "trainer", k));
    assert_true(gt_holder_conn_head(c)->flags & GT_HP_HEAD_WITNESSES_REQUIRED);
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&dev, &dc));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    gt_err e = gt_holder_fetch(c, 0, GT_FETCH_KEYRELEASE, dev, GT_DBUF_NO_READBACK, &buf, &n);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "only after its co-holders witnessed its ledger head"));
    // Witnesses of another session (a replay) do not count either: run the round on two fresh
    // connections, then offer this connection nothing new. Its nonce was never witnessed.
    gt_holder_disconnect(c);
    gt_device_close(dev);
    stop(&w);
    gt_tc_tally t;
    gt_tc_ledger_tally(&F, 0, &t);
    assert_int_equal(t.grants, 0);
    assert_int_equal(t.refusals, 1);

    // Not required: the same trainer is served without the round.
    start(&w, false);
    GT_ASSERT_OK(gt_holder_connect(&c, &w.a, 0, &att, "trainer", k));
    assert_false(gt_holder_conn_head(c)->flags & GT_HP_HEAD_WITNESSES_REQUIRED);
    GT_ASSERT_OK(gt_device_open(&dev, &dc));
    GT_ASSERT_OK(gt_holder_fetch(c, 0, GT_FETCH_KEYRELEASE, dev, GT_DBUF_NO_READBACK, &buf, &n));
    GT_ASSERT_OK(gt_device_free(dev, buf));
    gt_holder_disconnect(c);
    gt_device_close(dev);
    stop(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rolled_back_ledger_is_caught_by_co_holders),
        cmocka_unit_test(withheld_witnesses_get_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
