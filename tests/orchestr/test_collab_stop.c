// orchestr/: a collaborative run asked to stop (the stop flag `gputravel train` points at its
// SIGINT/SIGTERM handler) ends at the next step with the use in progress committed and no final
// output; resumed, it goes on from there to the end, and every holder's ledger agrees.
#include "collab_testlib.h"

#include <string.h>

static gt_tc_fixture F;
static volatile int stop_now;

static int setup(void **state)
{
    (void)state;
    gt_tc_setup(&F, 2, 1600, 800, NULL, NULL);  // 2 chunks of 800 tokens per holder
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_tc_teardown(&F);
    return 0;
}

// Asks to stop once step 3 is done, as a Ctrl-C during step 3 would.
static void stop_after_step_3(void *ctx, const gt_collab_step *s)
{
    (void)ctx;
    if (s->step == 3) {
        stop_now = SIGINT;
    }
}

static void stop_commits_the_use_and_resume_finishes(void **state)
{
    (void)state;
    gt_tc_holder runs[2];
    int ports[2];
    gt_agreement a;
    memset(runs, 0, sizeof runs);
    gt_tc_listen(&F, runs, ports);
    gt_tc_agreement(&F, &a, ports, &(gt_tc_terms){.steps = 12, .token_budget = 100000});
    for (int h = 0; h < 2; h++) {
        gt_tc_serve_thread(&F, &runs[h], h, &a, NULL);
    }
    char sd[512];
    snprintf(sd, sizeof sd, "%s/state", F.dir);
    GT_ASSERT_OK(gt_mkdir_p(sd, 0700));
    gt_tc_train_opts o = {.a = &a, .state_dir = sd,
                          .transfer = GT_TRANSFER_CONVENTIONAL_KEYRELEASE,
                          .on_step = stop_after_step_3, .stop = &stop_now};
    gt_collab_report rep;
    GT_ASSERT_OK(gt_tc_train(&o, &rep, NULL));
    assert_int_equal(rep.interrupted, SIGINT);
    assert_int_equal(rep.steps_done, 3);
    assert_false(rep.sealed);
    uint32_t uses = 0;
    for (int h = 0; h < 2; h++) {
        uses += rep.holders[h].uses;
    }
    assert_int_equal(uses, 1);  // the chunk in progress, committed

    stop_now = 0;
    o.resume = true;
    o.on_step = NULL;
    GT_ASSERT_OK(gt_tc_train(&o, &rep, NULL));
    assert_int_equal(rep.interrupted, 0);
    assert_int_equal(rep.steps_done, 12);
    for (int h = 0; h < 2; h++) {
        gt_tc_stop(&runs[h], false);
    }
    // Every confirmed use in the ledgers is a use the two runs committed, none twice.
    uint32_t ledger_uses = 0, committed = 0;
    for (int h = 0; h < 2; h++) {
        gt_tc_tally t;
        gt_tc_ledger_tally(&F, h, &t);
        for (int c = 0; c < 64; c++) {
            ledger_uses += t.uses[c];
            assert_true(t.uses[c] <= 1);  // max_uses 1
        }
        committed += rep.holders[h].uses;
    }
    assert_int_equal(ledger_uses, committed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_commits_the_use_and_resume_finishes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
