// orchestr/: trip planning, token accounting, and the journal that makes them survive a crash.
#include "testlib.h"

#include <gputravel/orchestr.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Two holders: alice 3 chunks of 100 tokens, 2 uses each, budget 450; bob 1 chunk of 50
// tokens, 1 use, budget 1000.
static void make(gt_agreement *a, gt_schedule **s)
{
    memset(a, 0, sizeof *a);
    a->holder_count = 2;
    snprintf(a->holders[0].name, sizeof a->holders[0].name, "alice");
    a->holders[0].token_budget = 450;
    a->holders[0].max_uses_per_chunk = 2;
    snprintf(a->holders[1].name, sizeof a->holders[1].name, "bob");
    a->holders[1].token_budget = 1000;
    a->holders[1].max_uses_per_chunk = 1;
    static const uint64_t alice[3] = {100, 100, 100}, bob[1] = {50};
    const uint64_t *tokens[2] = {alice, bob};
    const uint32_t counts[2] = {3, 1};
    GT_ASSERT_OK(gt_schedule_create(s, a, counts, tokens));
}

// Runs the schedule to the end, recording every offered chunk fully; returns the plan as text.
static void drain(gt_schedule *s, char *plan, size_t cap)
{
    plan[0] = '\0';
    uint32_t h = 0, c = 0;
    uint64_t allowed = 0;
    gt_err e;
    while (gt_is_ok(e = gt_schedule_next(s, &h, &c, &allowed))) {
        size_t n = strlen(plan);
        snprintf(plan + n, cap - n, "%u.%u:%llu ", h, c, (unsigned long long)allowed);
        GT_ASSERT_OK(gt_schedule_record(s, h, c, allowed));
    }
    assert_int_equal(e.code, GT_E_NOTFOUND);
}

static void plan_respects_uses_and_budgets(void **state)
{
    (void)state;
    gt_agreement a;
    gt_schedule *s = NULL;
    make(&a, &s);
    char plan[512];
    drain(s, plan, sizeof plan);
    // Round robin while bob has chunks; alice's least-used chunk first. The 50 tokens left of
    // her budget of 450 hold none of her 100-token chunks: a budget is a hard cap, and a holder
    // refuses a chunk that would cross it, so none is offered.
    assert_string_equal(plan, "0.0:100 1.0:50 0.1:100 0.2:100 0.0:100 ");
    gt_holder_account acc;
    gt_schedule_account(s, 0, &acc);
    assert_int_equal(acc.tokens_used, 400);
    assert_int_equal(acc.uses, 4);
    gt_schedule_account(s, 1, &acc);
    assert_int_equal(acc.tokens_used, 50);
    assert_int_equal(acc.uses, 1);
    // Nothing may be recorded beyond what the agreement allows.
    GT_ASSERT_CODE(gt_schedule_record(s, 1, 0, 1), GT_E_POLICY);
    GT_ASSERT_CODE(gt_schedule_record(s, 0, 2, 51), GT_E_POLICY);  // 51 > the 50 left
    GT_ASSERT_CODE(gt_schedule_record(s, 2, 0, 1), GT_E_ARG);
    GT_ASSERT_CODE(gt_schedule_record(s, 0, 3, 1), GT_E_ARG);
    gt_schedule_free(s);
}

// A skipped chunk (its transfer failed in this run) is not offered again, a skipped holder's
// chunks none; each holder's limit at the end names what held its chunks back.
static void skips_and_limits(void **state)
{
    (void)state;
    gt_agreement a;
    gt_schedule *s = NULL;
    make(&a, &s);
    assert_int_equal(gt_schedule_why_none(s, 0), GT_SCHEDULE_LEFT_OPEN);
    gt_schedule_skip(s, 0, 0);
    gt_schedule_exclude(s, 1);
    assert_int_equal(gt_schedule_why_none(s, 1), GT_SCHEDULE_LEFT_FAILED);
    char plan[512];
    drain(s, plan, sizeof plan);
    // alice: chunks 1 and 2 twice each (chunk 0 skipped), 400 of her 450 tokens; bob none.
    assert_string_equal(plan, "0.1:100 0.2:100 0.1:100 0.2:100 ");
    assert_int_equal(gt_schedule_why_none(s, 0), GT_SCHEDULE_LEFT_FAILED);  // only chunk 0 left
    assert_int_equal(gt_schedule_uses(s, 0, 0), 0);
    assert_int_equal(gt_schedule_uses(s, 1, 0), 0);
    gt_schedule_free(s);
    // Without failures: alice's budget holds her back, bob's one use is spent.
    make(&a, &s);
    drain(s, plan, sizeof plan);
    assert_int_equal(gt_schedule_why_none(s, 0), GT_SCHEDULE_LEFT_BUDGET);
    assert_int_equal(gt_schedule_why_none(s, 1), GT_SCHEDULE_LEFT_USES);
    gt_schedule_free(s);
}

static void journal_replays_only_committed_uses(void **state)
{
    (void)state;
    char dir[256], path[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "journal"));
    gt_journal *j = NULL;
    GT_ASSERT_OK(gt_journal_open(&j, path));
    GT_ASSERT_OK(gt_journal_append_use(j, 10, 0, 0, 100));
    GT_ASSERT_OK(gt_journal_append_use(j, 20, 1, 0, 50));
    GT_ASSERT_OK(gt_journal_append_use(j, 30, 0, 1, 100));  // after the checkpoint we restore
    gt_journal_close(j);
    FILE *fp = fopen(path, "a");
    fputs("use 40 0 2 1", fp);  // torn by a crash
    fclose(fp);

    gt_agreement a;
    gt_schedule *s = NULL;
    make(&a, &s);
    uint64_t replayed = 0, dropped = 0;
    GT_ASSERT_OK(gt_journal_replay(path, 25, s, &replayed, &dropped));
    assert_int_equal(replayed, 2);
    assert_int_equal(dropped, 1);
    assert_int_equal(gt_schedule_uses(s, 0, 0), 1);
    assert_int_equal(gt_schedule_uses(s, 1, 0), 1);
    assert_int_equal(gt_schedule_uses(s, 0, 1), 0);  // in flight at the crash: offered again
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 4096, &b));
    assert_int_equal(b.len, strlen("use 10 0 0 100\nuse 20 1 0 50\n"));
    gt_buf_free(&b);

    // Resuming continues the same plan an uninterrupted run would have made from here.
    char plan[512];
    drain(s, plan, sizeof plan);
    assert_string_equal(plan, "0.1:100 0.2:100 0.0:100 ");  // the uninterrupted tail
    gt_schedule_free(s);

    // A journal that claims more than the agreement allows is refused, with its line.
    fp = fopen(path, "w");
    fputs("use 1 1 0 50\nuse 2 1 0 50\n", fp);
    fclose(fp);
    make(&a, &s);
    gt_err e = gt_journal_replay(path, 100, s, &replayed, &dropped);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "line 2"));
    gt_schedule_free(s);
    fp = fopen(path, "w");
    fputs("use 1 x 0 50\n", fp);
    fclose(fp);
    make(&a, &s);
    GT_ASSERT_CODE(gt_journal_replay(path, 100, s, &replayed, &dropped), GT_E_FORMAT);
    gt_schedule_free(s);
    unlink(path);
    make(&a, &s);
    GT_ASSERT_OK(gt_journal_replay(path, 100, s, &replayed, &dropped));  // none yet: fresh run
    assert_int_equal(replayed, 0);
    gt_schedule_free(s);
    gt_test_rmtree(dir);
}

// Three holders with chunks to spare: a run resumed from its journal after any number of
// committed uses (the use in flight lost) is offered exactly the chunks, in exactly the order,
// an uninterrupted run is. (The round-robin cursor used to restart at holder 0 on resume.)
static void make3(gt_agreement *a, gt_schedule **s)
{
    memset(a, 0, sizeof *a);
    a->holder_count = 3;
    for (uint32_t h = 0; h < 3; h++) {
        snprintf(a->holders[h].name, sizeof a->holders[h].name, "h%u", h);
        a->holders[h].token_budget = 1000;
        a->holders[h].max_uses_per_chunk = 1;
    }
    static const uint64_t t0[3] = {100, 100, 100}, t1[2] = {100, 100}, t2[4] = {100, 100, 100, 100};
    const uint64_t *tokens[3] = {t0, t1, t2};
    const uint32_t counts[3] = {3, 2, 4};
    GT_ASSERT_OK(gt_schedule_create(s, a, counts, tokens));
}

static void resume_keeps_the_round_robin_order(void **state)
{
    (void)state;
    char dir[256], path[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "journal"));
    gt_agreement a;
    gt_schedule *s = NULL;
    make3(&a, &s);
    char whole[512];
    drain(s, whole, sizeof whole);
    gt_schedule_free(s);
    assert_string_equal(whole, "0.0:100 1.0:100 2.0:100 0.1:100 1.1:100 2.1:100 0.2:100 "
                               "2.2:100 2.3:100 ");
    for (int k = 0; k < 9; k++) {
        // An uninterrupted run up to k committed uses, then a crash with one chunk in flight.
        unlink(path);
        gt_journal *j = NULL;
        GT_ASSERT_OK(gt_journal_open(&j, path));
        make3(&a, &s);
        char head[512] = "";
        for (int i = 0; i <= k; i++) {
            uint32_t h = 0, c = 0;
            uint64_t allowed = 0;
            GT_ASSERT_OK(gt_schedule_next(s, &h, &c, &allowed));
            if (i < k) {  // the k-th offer is in flight at the crash: never recorded
                size_t n = strlen(head);
                snprintf(head + n, sizeof head - n, "%u.%u:%llu ", h, c,
                         (unsigned long long)allowed);
                GT_ASSERT_OK(gt_schedule_record(s, h, c, allowed));
                GT_ASSERT_OK(gt_journal_append_use(j, (uint64_t)i + 1, h, c, allowed));
            }
        }
        gt_journal_close(j);
        gt_schedule_free(s);
        // The resumed run: a fresh schedule, the journal replayed, then planned to the end.
        make3(&a, &s);
        uint64_t replayed = 0, dropped = 0;
        GT_ASSERT_OK(gt_journal_replay(path, 100, s, &replayed, &dropped));
        assert_int_equal(replayed, (uint64_t)k);
        char tail[512], both[1024];
        drain(s, tail, sizeof tail);
        gt_schedule_free(s);
        snprintf(both, sizeof both, "%s%s", head, tail);
        assert_string_equal(both, whole);
    }
    gt_test_rmtree(dir);
}

// Across ranks: a round's chunks are held so that every rank is handed a different one, and
// released again for the next round (a held chunk is not used: it is offered again).
static void held_chunks_go_to_one_rank_each(void **state)
{
    (void)state;
    gt_agreement a;
    gt_schedule *s = NULL;
    make(&a, &s);
    uint32_t h[3], c[3];
    uint64_t allowed = 0;
    for (int i = 0; i < 3; i++) {
        GT_ASSERT_OK(gt_schedule_next(s, &h[i], &c[i], &allowed));
        gt_schedule_hold(s, h[i], c[i]);
    }
    // alice 0, bob 0, alice 1: three different chunks (without the hold: alice 0 twice)
    assert_int_equal(h[0], 0);
    assert_int_equal(c[0], 0);
    assert_int_equal(h[1], 1);
    assert_int_equal(h[2], 0);
    assert_int_equal(c[2], 1);
    gt_schedule_unhold(s);
    uint32_t h2 = 9, c2 = 9;
    GT_ASSERT_OK(gt_schedule_next(s, &h2, &c2, &allowed));
    assert_true(h2 == 1 || (h2 == 0 && c2 == 0));  // released: offered again
    // alice's budget of 450 after 3 uses of 100: 150 left, so one more chunk, not two in a round
    // (the holder would refuse the second as crossing its budget)
    gt_schedule_unhold(s);
    for (int i = 0; i < 3; i++) {
        GT_ASSERT_OK(gt_schedule_record(s, 0, (uint32_t)i, 100));
    }
    int alice = 0;
    for (int i = 0; i < 3; i++) {
        if (!gt_is_ok(gt_schedule_next(s, &h[i], &c[i], &allowed))) {
            break;
        }
        alice += h[i] == 0;
        gt_schedule_hold(s, h[i], c[i]);
    }
    assert_int_equal(alice, 1);
    gt_schedule_free(s);
}

// The common checkpoint step of the ranks: the newest step every rank has sealed.
static void common_step_of_the_ranks(void **state)
{
    (void)state;
    const uint64_t N = UINT64_MAX;
    uint64_t common = 0;
    const uint64_t same[] = {24, 12, 24, 12};
    GT_ASSERT_OK(gt_collab_common_step(same, 2, 2, &common));
    assert_int_equal(common, 24);
    // rank 0 sealed 24, rank 1 was killed before it did: 12
    const uint64_t ahead[] = {24, 12, 12, N};
    GT_ASSERT_OK(gt_collab_common_step(ahead, 2, 2, &common));
    assert_int_equal(common, 12);
    const uint64_t behind[] = {12, 0, 24, 12, 24, 12};
    GT_ASSERT_OK(gt_collab_common_step(behind, 3, 2, &common));
    assert_int_equal(common, 12);
    const uint64_t none[] = {36, 24, 12, N};
    assert_int_equal(gt_collab_common_step(none, 2, 2, &common).code, GT_E_NOTFOUND);
    const uint64_t empty[] = {N, N, N, N};
    assert_int_equal(gt_collab_common_step(empty, 2, 2, &common).code, GT_E_NOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_respects_uses_and_budgets),
        cmocka_unit_test(skips_and_limits),
        cmocka_unit_test(journal_replays_only_committed_uses),
        cmocka_unit_test(resume_keeps_the_round_robin_order),
        cmocka_unit_test(held_chunks_go_to_one_rank_each),
        cmocka_unit_test(common_step_of_the_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
