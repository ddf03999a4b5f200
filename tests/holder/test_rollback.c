// holder/: the ledger's rollback guard on the sim counter file (the TPM's run of the same
// scenarios is test_rollback_tpm.c), the check of a ledger against a counter as a table, the
// counter file's format, guard specs, and anchoring a ledger written before the guard existed.
#include "testlib.h"
#include "rollback_fixture.h"

#include "holder/rollback_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

// gt_rollback_check, every row: ledger (none / unanchored / last counter L), counter (unwritten
// / T), and the verdict or the refusal's words.
static void check_table(void **state)
{
    (void)state;
    gt_ledger_summary plain = {.entries = 3}, at5 = {.entries = 4, .anchored = true, .counter = 5};
    const struct {
        const gt_ledger_summary *s;
        uint64_t t;
        bool written;
        int verdict;  // -1: refused
        const char *says;
    } rows[] = {
        {NULL, 0, false, GT_ROLLBACK_NEW, NULL},
        {&plain, 0, false, GT_ROLLBACK_UNANCHORED, NULL},
        {&at5, 0, false, -1, "guard has no counter"},
        {NULL, 1, true, -1, "no ledger (missing or empty) while the guard's counter is at 1"},
        {&plain, 9, true, -1, "carries no counter while the guard's is at 9"},
        {&at5, 5, true, GT_ROLLBACK_MATCH, NULL},
        {&at5, 4, true, GT_ROLLBACK_PENDING, NULL},
        {&at5, 6, true, -1, "counter 5 is behind the guard's 6"},
        {&at5, 3, true, -1, "counter 5 is ahead of the guard's 3"},
        {&at5, 0, true, -1, "counter 5 is ahead of the guard's 0"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gt_rollback_verdict v = GT_ROLLBACK_MATCH;
        gt_err e = gt_rollback_check(rows[i].s, rows[i].t, rows[i].written, "sim X", &v);
        if (rows[i].verdict >= 0) {
            if (!gt_is_ok(e) || (int)v != rows[i].verdict) {
                fail_msg("row %zu: verdict %d (%s), expected %d", i, (int)v, e.msg,
                         rows[i].verdict);
            }
        } else if (e.code != GT_E_STATE || strstr(e.msg, rows[i].says) == NULL ||
                   strstr(e.msg, "guard sim X") == NULL || v != GT_ROLLBACK_REFUSE) {
            fail_msg("row %zu: expected a refusal saying '%s', got %s: %s", i, rows[i].says,
                     gt_code_name(e.code), e.msg);
        }
    }
    // An empty ledger (no entries) reads as none.
    gt_ledger_summary empty = {0};
    gt_rollback_verdict v = GT_ROLLBACK_MATCH;
    GT_ASSERT_ERR(gt_rollback_check(&empty, 2, true, "x", &v), GT_E_STATE, "no ledger");
}

static void counter_file_format(void **state)
{
    (void)state;
    const char *p = GT_SIM_COUNTER_PREFIX;
    char text[256];
    uint64_t v = 7;
    snprintf(text, sizeof text, "%s0\n", p);
    GT_ASSERT_OK(gt_sim_counter_parse((const uint8_t *)text, strlen(text), &v));
    assert_int_equal(v, 0);
    snprintf(text, sizeof text, "%s18446744073709551615\n", p);
    GT_ASSERT_OK(gt_sim_counter_parse((const uint8_t *)text, strlen(text), &v));
    assert_true(v == UINT64_MAX);
    const struct {
        const char *value;
        gt_code code;
    } bad[] = {
        {"18446744073709551616\n", GT_E_LIMIT}, {"05\n", GT_E_FORMAT}, {"\n", GT_E_FORMAT},
        {"5", GT_E_TRUNCATED}, {"5\nx", GT_E_FORMAT}, {"-5\n", GT_E_FORMAT},
        {" 5\n", GT_E_FORMAT}, {"5 \n", GT_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", p, bad[i].value);
        v = 7;
        gt_err e = gt_sim_counter_parse((const uint8_t *)text, strlen(text), &v);
        if (e.code != bad[i].code || v != 0) {
            fail_msg("'%s': expected %s, got %s (%s)", bad[i].value, gt_code_name(bad[i].code),
                     gt_code_name(e.code), e.msg);
        }
    }
    GT_ASSERT_CODE(gt_sim_counter_parse((const uint8_t *)"gputravel 5\n", 12, &v), GT_E_TRUNCATED);
    snprintf(text, sizeof text, "gputravel insecure-simulation rollback COUNTER 5\n");
    GT_ASSERT_CODE(gt_sim_counter_parse((const uint8_t *)text, strlen(text), &v), GT_E_FORMAT);

    // Through the guard: a damaged file is an error (never a fresh counter), and at its maximum
    // an increment refuses.
    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, env.sim_spec));
    bool w = true;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_false(w);
    GT_ASSERT_OK(gt_rollback_guard_increment(g, &v));
    assert_int_equal(v, 1);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(env.counter, 256, &b));
    snprintf(text, sizeof text, "%s1\n", p);
    assert_int_equal(b.len, strlen(text));
    assert_memory_equal(b.data, text, b.len);
    gt_buf_free_nowipe(&b);
    GT_ASSERT_OK(gt_file_write_atomic(env.counter, "junk\n", 5, 0600));
    GT_ASSERT_CODE(gt_rollback_guard_read(g, &v, &w), GT_E_TRUNCATED);
    snprintf(text, sizeof text, "%s18446744073709551615\n", p);
    GT_ASSERT_OK(gt_file_write_atomic(env.counter, text, strlen(text), 0600));
    GT_ASSERT_CODE(gt_rollback_guard_increment(g, &v), GT_E_LIMIT);
    gt_rollback_guard_close(g);
}

static void guard_specs(void **state)
{
    (void)state;
    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, "none"));
    assert_int_equal(gt_rollback_guard_kind(g), GT_ROLLBACK_NONE);
    assert_string_equal(gt_rollback_guard_name(g), "none");
    uint64_t v = 1;
    bool w = true;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_false(w);
    GT_ASSERT_CODE(gt_rollback_guard_increment(g, &v), GT_E_STATE);
    gt_rollback_guard_close(g);
    assert_string_equal(gt_rollback_guard_name(NULL), "none");
    GT_ASSERT_OK(gt_rollback_guard_open(&g, env.sim_spec));
    assert_int_equal(gt_rollback_guard_kind(g), GT_ROLLBACK_SIM);
    assert_non_null(strstr(gt_rollback_guard_name(g), "(insecure-simulation)"));
    gt_rollback_guard_close(g);
    const char *bad[] = {"", "sim:", "tpm", "tpm:", "tpm@0x123:device:/dev/tpmrm0",
                         "tpm@0x02000000:device:/x", "tpm@zz:device:/x", "tpm@0x01800000",
                         "tpmx:device:/x", "bogus", "None"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = (gt_rollback_guard *)&v;
        gt_err e = gt_rollback_guard_open(&g, bad[i]);
        if (e.code != GT_E_ARG || g != NULL) {
            fail_msg("'%s': expected ARG, got %s (%s)", bad[i], gt_code_name(e.code), e.msg);
        }
    }
    // A TPM that is not there: a clear error, nothing left open.
    GT_ASSERT_ERR(gt_rollback_guard_open(&g, "tpm:device:/nonexistent/tpmrm0"), GT_E_IO, "TCTI");
    assert_null(g);
}

// A ledger written before the guard: the first guarded open anchors it (an "anchor" entry
// carrying the counter); opened unguarded afterwards, it refuses.
static void old_ledger_is_anchored_once(void **state)
{
    (void)state;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, env.ledger, env.secret));
    rb_grant(l, 0, true);
    gt_ledger_close(l);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_false(s.anchored);
    assert_int_equal(s.entries, 2);

    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_close(g, l);
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_int_equal(s.entries, 3);
    assert_true(s.anchored);
    assert_int_equal(s.counter, 2);  // the sim counter's first value 1, the anchor batch 2
    assert_int_equal(rb_counter(), 2);
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_close(g, l);
    assert_int_equal(rb_counter(), 2);

    GT_ASSERT_ERR(gt_ledger_open(&l, env.ledger, env.secret), GT_E_STATE,
                  "open it with its guard");
    assert_null(l);
    // A none guard is no guard.
    GT_ASSERT_OK(gt_rollback_guard_open(&g, "none"));
    GT_ASSERT_ERR(gt_ledger_open_guarded(&l, env.ledger, env.secret, g), GT_E_STATE,
                  "open it with its guard");
    gt_rollback_guard_close(g);
}

// A second writer moving the same counter (another ledger anchored to it) is caught at the next
// batch and every one after it; the ledger is then refused at open.
static void shared_counter_is_fail_stop(void **state)
{
    (void)state;
    gt_rollback_guard *g = NULL, *other = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    GT_ASSERT_OK(gt_rollback_guard_open(&other, env.sim_spec));
    uint64_t v = 0;
    GT_ASSERT_OK(gt_rollback_guard_increment(other, &v));
    gt_rollback_guard_close(other);
    cJSON *d = cJSON_CreateObject();
    GT_ASSERT_ERR(gt_ledger_append(l, "grant", d), GT_E_STATE, "uses the same counter");
    GT_ASSERT_ERR(gt_ledger_append(l, "grant", d), GT_E_STATE, "uses the same counter");
    cJSON_Delete(d);
    rb_close(g, l);
    rb_expect_refused("is behind the guard's");
}

// The hook of lost_increment_response: the counter moves (as a TPM that did the increment), and
// then the increment fails (as a response lost on the way back): the counter file is moved aside
// and a folder put in its place.
static char aside[600];
static void increment_then_fail(void *ctx)
{
    (void)ctx;
    gt_rollback_guard *g = NULL;
    uint64_t v = 0;
    if (!gt_is_ok(gt_rollback_guard_open(&g, env.sim_spec)) ||
        !gt_is_ok(gt_rollback_guard_increment(g, &v)) || rename(env.counter, aside) != 0 ||
        mkdir(env.counter, 0700) != 0) {
        fail_msg("could not stage the lost increment");
    }
    gt_rollback_guard_close(g);
}

// A failed increment fails the append and leaves its entry; the next batch reads the counter
// first, so when the failed increment did happen after all it is not done twice.
static void lost_increment_response(void **state)
{
    (void)state;
    rb_path(aside, sizeof aside, "counter.aside");
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    uint64_t t = 0, v = 0;
    bool w = false;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &t, &w));
    gt_rollback_guard_set_test_hook(g, increment_then_fail, NULL);
    cJSON *d = cJSON_CreateObject();
    GT_ASSERT_ERR(gt_ledger_append(l, "grant", d), GT_E_IO, "counter not incremented");
    gt_rollback_guard_set_test_hook(g, NULL, NULL);
    assert_int_equal(rmdir(env.counter), 0);
    assert_int_equal(rename(aside, env.counter), 0);
    GT_ASSERT_OK(gt_ledger_append(l, "refuse", d));  // the batch of both: counter already there
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, t + 1);
    GT_ASSERT_OK(gt_ledger_append(l, "refuse", d));
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, t + 2);
    cJSON_Delete(d);
    rb_close(g, l);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_int_equal(s.entries, 4);  // genesis, the grant whose append failed, two refusals
    assert_int_equal(s.counter, t + 2);
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_close(g, l);
}

int main(void)
{
    rb_use_tpm = false;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(check_table),
        cmocka_unit_test_setup_teardown(counter_file_format, rb_setup, rb_teardown),
        cmocka_unit_test_setup_teardown(guard_specs, rb_setup, rb_teardown),
        cmocka_unit_test_setup_teardown(old_ledger_is_anchored_once, rb_setup, rb_teardown),
        cmocka_unit_test_setup_teardown(shared_counter_is_fail_stop, rb_setup, rb_teardown),
        cmocka_unit_test_setup_teardown(lost_increment_response, rb_setup, rb_teardown),
        RB_SCENARIOS,
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
