// travel/: the trip state machine. Every (state, event) pair against a specification written
// out here by hand (not read from the table under test), the table's own consistency, and trips
// walked event by event: a full trip, lease expiry in every state, a ticket used once.
#include "testlib.h"

#include <gputravel/travel.h>

#include <string.h>

enum { S_AT, S_LENT, S_ATT, S_LOAD, S_RET, S_FAIL, NS = GT_TRIP_STATE_COUNT };
#define NE GT_TRIP_EVENT_COUNT
#define NO (-1)  // refused

#define FX_FAIL (GT_TRIP_FX_WIPE_TRIP | GT_TRIP_FX_KILL_TICKET)
#define FX_HELD (FX_FAIL | GT_TRIP_FX_END_HOLDER)
#define FX_BACK (GT_TRIP_FX_HAND_LOADED | GT_TRIP_FX_WIPE_UNLOADED | GT_TRIP_FX_KILL_TICKET)
#define FX_LEND (GT_TRIP_FX_NEW_TICKET | GT_TRIP_FX_ARM_LEASE)
#define FX_AFTER (GT_TRIP_FX_WIPE_TRIP | GT_TRIP_FX_END_HOLDER)

typedef struct {
    int to;
    unsigned fx;
} want;

// spec[event][state]: docs/trip.md's table, typed in independently of src/travel/trip_fsm.c.
static const want spec[NE][NS] = {
    //                             AT_TRAINER         LENT                 ATTACHED
    //                             LOADED             RETURNED             FAILED
    [GT_TRIP_EV_LEND] = {{S_LENT, FX_LEND}, {NO, 0}, {NO, 0}, {NO, 0},
                         {S_LENT, FX_LEND | GT_TRIP_FX_RELEASE_IMPORT | GT_TRIP_FX_END_HOLDER},
                         {S_LENT, FX_LEND}},
    [GT_TRIP_EV_TRAINER_USE] = {{S_AT, 0}, {NO, 0}, {NO, 0}, {NO, 0}, {S_RET, 0}, {S_FAIL, 0}},
    [GT_TRIP_EV_RECALL] = {{NO, 0}, {S_FAIL, FX_FAIL}, {NO, 0}, {NO, 0}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_RELEASE] = {{NO, 0}, {NO, 0}, {NO, 0}, {NO, 0},
                            {S_AT, GT_TRIP_FX_RELEASE_IMPORT | GT_TRIP_FX_END_HOLDER}, {NO, 0}},
    [GT_TRIP_EV_TRAINER_GONE] = {{NO, 0}, {S_FAIL, FX_FAIL}, {S_FAIL, FX_HELD},
                                 {S_FAIL, FX_HELD}, {S_FAIL, FX_AFTER}, {NO, 0}},
    [GT_TRIP_EV_ATTACH] = {{NO, 0}, {S_ATT, GT_TRIP_FX_BIND_HOLDER}, {NO, 0},
                           {NO, 0}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_ATTACH_REFUSED] = {{NO, 0}, {S_LENT, GT_TRIP_FX_DROP_CONN}, {NO, 0},
                                   {NO, 0}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_LOAD] = {{NO, 0}, {NO, 0}, {S_LOAD, GT_TRIP_FX_MARK_LOADED},
                         {S_LOAD, GT_TRIP_FX_MARK_LOADED}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_RETURN] = {{NO, 0}, {NO, 0}, {S_RET, FX_BACK | GT_TRIP_FX_END_HOLDER},
                           {S_RET, FX_BACK | GT_TRIP_FX_END_HOLDER}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_RETURN_STAY] = {{NO, 0}, {NO, 0}, {S_RET, FX_BACK | GT_TRIP_FX_PARK_HOLDER},
                                {S_RET, FX_BACK | GT_TRIP_FX_PARK_HOLDER}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_HAND_OVER] = {{NO, 0}, {NO, 0},
                              {S_RET, GT_TRIP_FX_HAND_LOADED | GT_TRIP_FX_KILL_TICKET},
                              {NO, 0}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_HOLDER_LOST] = {{NO, 0}, {NO, 0}, {S_FAIL, FX_HELD},
                                {S_FAIL, FX_HELD}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_HANDOFF_LOST] = {{NO, 0}, {NO, 0}, {NO, 0}, {NO, 0}, {S_FAIL, FX_AFTER}, {NO, 0}},
    [GT_TRIP_EV_EXPIRE] = {{NO, 0}, {S_FAIL, FX_FAIL}, {S_FAIL, FX_HELD},
                           {S_FAIL, FX_HELD}, {NO, 0}, {NO, 0}},
    [GT_TRIP_EV_DEVICE_FAULT] = {{NO, 0}, {S_FAIL, FX_FAIL}, {S_FAIL, FX_HELD},
                                 {S_FAIL, FX_HELD}, {S_FAIL, FX_AFTER}, {NO, 0}},
};

// The table row for (from, ev), or NULL; fails the test on a duplicate pair.
static const gt_trip_transition *row(gt_trip_state from, gt_trip_event ev)
{
    size_t n = 0;
    const gt_trip_transition *t = gt_trip_table(&n), *found = NULL;
    for (size_t i = 0; i < n; i++) {
        if (t[i].from == from && t[i].event == ev) {
            assert_null(found);
            found = &t[i];
        }
    }
    return found;
}

static void every_pair(void **state)
{
    (void)state;
    size_t allowed = 0;
    for (int s = 0; s < NS; s++) {
        for (int e = 0; e < NE; e++) {
            gt_trip_state to = (gt_trip_state)99;
            unsigned fx = 0xffff;
            gt_err err = gt_trip_step((gt_trip_state)s, (gt_trip_event)e, &to, &fx);
            const gt_trip_transition *r = row((gt_trip_state)s, (gt_trip_event)e);
            const want *w = &spec[e][s];
            if (w->to == NO) {
                if (err.code != GT_E_STATE) {
                    fail_msg("%s in %s: expected GT_E_STATE, got %s", gt_trip_event_name(e),
                             gt_trip_state_name(s), gt_code_name(err.code));
                }
                assert_null(r);
                assert_int_equal(to, s);  // a refusal leaves the state alone
                assert_int_equal(fx, 0);
                continue;
            }
            if (!gt_is_ok(err) || (int)to != w->to || fx != w->fx) {
                fail_msg("%s in %s: got %s -> %s fx 0x%x, want %s fx 0x%x",
                         gt_trip_event_name(e), gt_trip_state_name(s), gt_code_name(err.code),
                         gt_trip_state_name(to), fx, gt_trip_state_name(w->to), w->fx);
            }
            assert_non_null(r);  // the step runs the exported table, not a copy
            assert_int_equal(r->to, to);
            assert_int_equal(r->effects, fx);
            allowed++;
        }
    }
    size_t n = 0;
    (void)gt_trip_table(&n);
    assert_int_equal(n, allowed);  // no row outside the spec
}

static void refusal_names_everything(void **state)
{
    (void)state;
    gt_trip_state to;
    unsigned fx;
    gt_err e = gt_trip_step(GT_TRIP_ATTACHED, GT_TRIP_EV_RECALL, &to, &fx);
    GT_ASSERT_CODE(e, GT_E_STATE);
    assert_string_equal(e.msg, "trip: recall (trainer) refused in state attached (allowed in: lent)");
    e = gt_trip_step(GT_TRIP_LENT, GT_TRIP_EV_LEND, &to, &fx);
    assert_string_equal(e.msg, "trip: lend (trainer) refused in state lent "
                        "(allowed in: at_trainer, returned, failed)");
    e = gt_trip_step(GT_TRIP_RETURNED, GT_TRIP_EV_EXPIRE, &to, &fx);
    assert_string_equal(e.msg, "trip: expire (device) refused in state returned "
                        "(allowed in: lent, attached, loaded)");
    GT_ASSERT_CODE(gt_trip_step(GT_TRIP_STATE_COUNT, GT_TRIP_EV_LEND, &to, &fx), GT_E_ARG);
    GT_ASSERT_CODE(gt_trip_step(GT_TRIP_LENT, GT_TRIP_EVENT_COUNT, &to, &fx), GT_E_ARG);
    assert_int_equal(to, GT_TRIP_LENT);
    assert_string_equal(gt_trip_state_name(GT_TRIP_STATE_COUNT), "unknown");
    assert_string_equal(gt_trip_effect_name(GT_TRIP_FX_WIPE_TRIP), "wipe_trip");
    assert_string_equal(gt_trip_effect_name(3), "unknown");  // two bits are not one effect
}

// Every event has an actor and a row; every state is reachable from at_trainer.
static void table_shape(void **state)
{
    (void)state;
    size_t n = 0;
    const gt_trip_transition *t = gt_trip_table(&n);
    for (int e = 0; e < NE; e++) {
        bool used = false;
        for (size_t i = 0; i < n; i++) {
            used |= t[i].event == (gt_trip_event)e;
        }
        assert_true(used);
        assert_string_not_equal(gt_trip_event_name(e), "unknown");
    }
    assert_int_equal(gt_trip_event_actor(GT_TRIP_EV_EXPIRE), GT_TRIP_ACTOR_DEVICE);
    assert_int_equal(gt_trip_event_actor(GT_TRIP_EV_RETURN_STAY), GT_TRIP_ACTOR_HOLDER);
    assert_int_equal(gt_trip_event_actor(GT_TRIP_EV_RECALL), GT_TRIP_ACTOR_TRAINER);
    bool seen[NS] = {[S_AT] = true};
    for (int round = 0; round < NS; round++) {
        for (size_t i = 0; i < n; i++) {
            seen[t[i].to] |= seen[t[i].from];
        }
    }
    for (int s = 0; s < NS; s++) {
        assert_true(seen[s]);
    }
}

// Applies ev to *s (must be allowed); returns the effects.
static unsigned go(gt_trip_state *s, gt_trip_event ev)
{
    unsigned fx = 0;
    GT_ASSERT_OK(gt_trip_step(*s, ev, s, &fx));
    return fx;
}

static void full_trip(void **state)
{
    (void)state;
    gt_trip_state s = GT_TRIP_AT_TRAINER;
    assert_true(go(&s, GT_TRIP_EV_LEND) & GT_TRIP_FX_NEW_TICKET);
    assert_int_equal(s, GT_TRIP_LENT);
    assert_int_equal(go(&s, GT_TRIP_EV_ATTACH_REFUSED), GT_TRIP_FX_DROP_CONN);  // lend stands
    assert_int_equal(s, GT_TRIP_LENT);
    assert_true(go(&s, GT_TRIP_EV_ATTACH) & GT_TRIP_FX_BIND_HOLDER);
    go(&s, GT_TRIP_EV_LOAD);
    assert_true(go(&s, GT_TRIP_EV_LOAD) & GT_TRIP_FX_MARK_LOADED);
    assert_int_equal(s, GT_TRIP_LOADED);
    unsigned fx = go(&s, GT_TRIP_EV_RETURN);
    assert_int_equal(s, GT_TRIP_RETURNED);
    assert_true(fx & GT_TRIP_FX_HAND_LOADED);
    assert_false(fx & GT_TRIP_FX_WIPE_TRIP);  // the loaded chunk survives the return
    assert_true(fx & GT_TRIP_FX_KILL_TICKET);
    go(&s, GT_TRIP_EV_TRAINER_USE);  // the trainer trains on it
    assert_int_equal(s, GT_TRIP_RETURNED);
    GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_EXPIRE, &s, &fx), GT_E_STATE);  // lease is over
    go(&s, GT_TRIP_EV_LEND);  // and lends again
    assert_int_equal(s, GT_TRIP_LENT);
}

// While the device is away the lease bounds everything: expiry fails the trip and wipes every
// trip buffer; back at the trainer there is no lease and nothing to wipe.
static void lease_expiry_everywhere(void **state)
{
    (void)state;
    const gt_trip_event path[] = {GT_TRIP_EV_LEND, GT_TRIP_EV_ATTACH, GT_TRIP_EV_LOAD,
                                  GT_TRIP_EV_RETURN};
    for (size_t k = 0; k <= 4; k++) {
        gt_trip_state s = GT_TRIP_AT_TRAINER;
        for (size_t i = 0; i < k; i++) {
            go(&s, path[i]);
        }
        gt_trip_state to;
        unsigned fx = 0;
        gt_err e = gt_trip_step(s, GT_TRIP_EV_EXPIRE, &to, &fx);
        bool away = s == GT_TRIP_LENT || s == GT_TRIP_ATTACHED || s == GT_TRIP_LOADED;
        if (away) {
            GT_ASSERT_OK(e);
            assert_int_equal(to, GT_TRIP_FAILED);
            assert_true(fx & GT_TRIP_FX_WIPE_TRIP);
            assert_true(fx & GT_TRIP_FX_KILL_TICKET);
            assert_false(fx & GT_TRIP_FX_HAND_LOADED);
            assert_int_equal(!!(fx & GT_TRIP_FX_END_HOLDER), s != GT_TRIP_LENT);
        } else {
            GT_ASSERT_CODE(e, GT_E_STATE);
            assert_int_equal(to, s);
        }
    }
    gt_trip_state s = GT_TRIP_FAILED;  // an expired trip stays failed until the next lend
    gt_trip_state to;
    unsigned fx;
    GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_EXPIRE, &to, &fx), GT_E_STATE);
}

// A ticket attaches once: never while a holder has the device, never after the trip ended; only
// a new lend (a new ticket) opens the device again.
static void ticket_used_once(void **state)
{
    (void)state;
    const gt_trip_event ends[] = {GT_TRIP_EV_RETURN, GT_TRIP_EV_RETURN_STAY,
                                  GT_TRIP_EV_HAND_OVER, GT_TRIP_EV_HOLDER_LOST,
                                  GT_TRIP_EV_EXPIRE, GT_TRIP_EV_TRAINER_GONE};
    for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) {
        gt_trip_state s = GT_TRIP_AT_TRAINER, to;
        unsigned fx;
        go(&s, GT_TRIP_EV_LEND);
        go(&s, GT_TRIP_EV_ATTACH);
        GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_ATTACH, &to, &fx), GT_E_STATE);  // busy
        assert_true(go(&s, ends[k]) & GT_TRIP_FX_KILL_TICKET);
        GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_ATTACH, &to, &fx), GT_E_STATE);
        GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_ATTACH_REFUSED, &to, &fx), GT_E_STATE);
        if (s == GT_TRIP_RETURNED) {
            go(&s, GT_TRIP_EV_RELEASE);
            GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_ATTACH, &to, &fx), GT_E_STATE);
        }
        assert_true(go(&s, GT_TRIP_EV_LEND) & GT_TRIP_FX_NEW_TICKET);
        go(&s, GT_TRIP_EV_ATTACH);
        assert_int_equal(s, GT_TRIP_ATTACHED);
    }
    // recalled before anyone attached: the ticket dies with the lend
    gt_trip_state s = GT_TRIP_AT_TRAINER, to;
    unsigned fx;
    go(&s, GT_TRIP_EV_LEND);
    assert_true(go(&s, GT_TRIP_EV_RECALL) & GT_TRIP_FX_KILL_TICKET);
    GT_ASSERT_CODE(gt_trip_step(s, GT_TRIP_EV_ATTACH, &to, &fx), GT_E_STATE);
}

// The trainer may not touch the device while it is away, nor recall it from a holder.
static void trainer_waits_while_away(void **state)
{
    (void)state;
    gt_trip_state away[] = {GT_TRIP_LENT, GT_TRIP_ATTACHED, GT_TRIP_LOADED};
    for (size_t i = 0; i < 3; i++) {
        gt_trip_state to;
        unsigned fx;
        GT_ASSERT_CODE(gt_trip_step(away[i], GT_TRIP_EV_TRAINER_USE, &to, &fx), GT_E_STATE);
        GT_ASSERT_CODE(gt_trip_step(away[i], GT_TRIP_EV_LEND, &to, &fx), GT_E_STATE);
        GT_ASSERT_CODE(gt_trip_step(away[i], GT_TRIP_EV_RELEASE, &to, &fx), GT_E_STATE);
        gt_err e = gt_trip_step(away[i], GT_TRIP_EV_RECALL, &to, &fx);
        assert_int_equal(e.code, away[i] == GT_TRIP_LENT ? GT_E_NONE : GT_E_STATE);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_pair),
        cmocka_unit_test(refusal_names_everything),
        cmocka_unit_test(table_shape),
        cmocka_unit_test(full_trip),
        cmocka_unit_test(lease_expiry_everywhere),
        cmocka_unit_test(ticket_used_once),
        cmocka_unit_test(trainer_waits_while_away),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
