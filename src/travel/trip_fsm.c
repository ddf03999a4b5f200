// The trip as one pure state machine (travel.h "the trip state machine", docs/trip.md): one
// transition table, one step function. devd.c and trip_ipc.c make every state change through
// gt_trip_step; tests/travel/test_trip_fsm.c walks the table pair by pair and tools/trip_promela.c
// turns the same table into a Promela model for spin.
#include <gputravel/travel.h>

#include <gputravel/devproto.h>  // the wire numbers of REP_TRIP

#include <stdio.h>

// The FSM's states are the numbers REP_TRIP carries: a renumbering here would change the wire.
_Static_assert(GT_TRIP_AT_TRAINER == (int)GT_SIM_TRIP_AT_TRAINER, "wire number of at_trainer");
_Static_assert(GT_TRIP_LENT == (int)GT_SIM_TRIP_LENT, "wire number of lent");
_Static_assert(GT_TRIP_ATTACHED == (int)GT_SIM_TRIP_ATTACHED, "wire number of attached");
_Static_assert(GT_TRIP_LOADED == (int)GT_SIM_TRIP_LOADED, "wire number of loaded");
_Static_assert(GT_TRIP_RETURNED == (int)GT_SIM_TRIP_RETURNED, "wire number of returned");
_Static_assert(GT_TRIP_FAILED == (int)GT_SIM_TRIP_FAILED, "wire number of failed");
_Static_assert(GT_TRIP_STATE_COUNT == (int)GT_SIM_TRIP_FAILED + 1, "one FSM state per wire state");
_Static_assert(GT_TRIP_FX_RELEASE_IMPORT == 1u << (GT_TRIP_FX_COUNT - 1), "effect count");

#define AT GT_TRIP_AT_TRAINER
#define LENT GT_TRIP_LENT
#define ATT GT_TRIP_ATTACHED
#define LOAD GT_TRIP_LOADED
#define RET GT_TRIP_RETURNED
#define FAIL GT_TRIP_FAILED

// A trip that ends badly: nothing of it survives, and nobody can attach with its ticket again.
#define FX_FAIL (GT_TRIP_FX_WIPE_TRIP | GT_TRIP_FX_KILL_TICKET)
// The same once a holder is attached: its session ends too.
#define FX_FAIL_HELD (FX_FAIL | GT_TRIP_FX_END_HOLDER)
// The holder gives the device back: what it loaded is the trainer's (never readable), the rest
// of its buffers are wiped, the ticket dies.
#define FX_BACK (GT_TRIP_FX_HAND_LOADED | GT_TRIP_FX_WIPE_UNLOADED | GT_TRIP_FX_KILL_TICKET)
#define FX_LEND (GT_TRIP_FX_NEW_TICKET | GT_TRIP_FX_ARM_LEASE)

// Grouped by state. Why each row is right: docs/trip.md "Transitions".
static const gt_trip_transition k_table[] = {
    {AT, GT_TRIP_EV_LEND, LENT, FX_LEND},
    {AT, GT_TRIP_EV_TRAINER_USE, AT, 0},

    {LENT, GT_TRIP_EV_RECALL, FAIL, FX_FAIL},
    {LENT, GT_TRIP_EV_TRAINER_GONE, FAIL, FX_FAIL},
    {LENT, GT_TRIP_EV_ATTACH, ATT, GT_TRIP_FX_BIND_HOLDER},
    {LENT, GT_TRIP_EV_ATTACH_REFUSED, LENT, GT_TRIP_FX_DROP_CONN},
    {LENT, GT_TRIP_EV_EXPIRE, FAIL, FX_FAIL},
    {LENT, GT_TRIP_EV_DEVICE_FAULT, FAIL, FX_FAIL},

    {ATT, GT_TRIP_EV_TRAINER_GONE, FAIL, FX_FAIL_HELD},
    {ATT, GT_TRIP_EV_LOAD, LOAD, GT_TRIP_FX_MARK_LOADED},
    {ATT, GT_TRIP_EV_RETURN, RET, FX_BACK | GT_TRIP_FX_END_HOLDER},
    {ATT, GT_TRIP_EV_RETURN_STAY, RET, FX_BACK | GT_TRIP_FX_PARK_HOLDER},
    // the holder stays connected until RELEASED (freeing an exported buffer first is undefined)
    {ATT, GT_TRIP_EV_HAND_OVER, RET, GT_TRIP_FX_HAND_LOADED | GT_TRIP_FX_KILL_TICKET},
    {ATT, GT_TRIP_EV_HOLDER_LOST, FAIL, FX_FAIL_HELD},
    {ATT, GT_TRIP_EV_EXPIRE, FAIL, FX_FAIL_HELD},
    {ATT, GT_TRIP_EV_DEVICE_FAULT, FAIL, FX_FAIL_HELD},

    {LOAD, GT_TRIP_EV_TRAINER_GONE, FAIL, FX_FAIL_HELD},
    {LOAD, GT_TRIP_EV_LOAD, LOAD, GT_TRIP_FX_MARK_LOADED},
    {LOAD, GT_TRIP_EV_RETURN, RET, FX_BACK | GT_TRIP_FX_END_HOLDER},
    {LOAD, GT_TRIP_EV_RETURN_STAY, RET, FX_BACK | GT_TRIP_FX_PARK_HOLDER},
    {LOAD, GT_TRIP_EV_HOLDER_LOST, FAIL, FX_FAIL_HELD},
    {LOAD, GT_TRIP_EV_EXPIRE, FAIL, FX_FAIL_HELD},
    {LOAD, GT_TRIP_EV_DEVICE_FAULT, FAIL, FX_FAIL_HELD},

    // a new lend first ends what the last trip still holds (an import, its holder's session)
    {RET, GT_TRIP_EV_LEND, LENT, FX_LEND | GT_TRIP_FX_RELEASE_IMPORT | GT_TRIP_FX_END_HOLDER},
    {RET, GT_TRIP_EV_TRAINER_USE, RET, 0},
    {RET, GT_TRIP_EV_RELEASE, AT, GT_TRIP_FX_RELEASE_IMPORT | GT_TRIP_FX_END_HOLDER},
    {RET, GT_TRIP_EV_HANDOFF_LOST, FAIL, GT_TRIP_FX_WIPE_TRIP | GT_TRIP_FX_END_HOLDER},
    {RET, GT_TRIP_EV_TRAINER_GONE, FAIL, GT_TRIP_FX_WIPE_TRIP | GT_TRIP_FX_END_HOLDER},
    {RET, GT_TRIP_EV_DEVICE_FAULT, FAIL, GT_TRIP_FX_WIPE_TRIP | GT_TRIP_FX_END_HOLDER},

    {FAIL, GT_TRIP_EV_LEND, LENT, FX_LEND},
    {FAIL, GT_TRIP_EV_TRAINER_USE, FAIL, 0},
};

const gt_trip_transition *gt_trip_table(size_t *n)
{
    *n = sizeof k_table / sizeof k_table[0];
    return k_table;
}

static const char *const k_state_names[GT_TRIP_STATE_COUNT] = {
    [AT] = "at_trainer", [LENT] = "lent", [ATT] = "attached",
    [LOAD] = "loaded", [RET] = "returned", [FAIL] = "failed",
};

static const struct {
    const char *name;
    gt_trip_actor actor;
} k_events[GT_TRIP_EVENT_COUNT] = {
    [GT_TRIP_EV_LEND] = {"lend", GT_TRIP_ACTOR_TRAINER},
    [GT_TRIP_EV_TRAINER_USE] = {"trainer_use", GT_TRIP_ACTOR_TRAINER},
    [GT_TRIP_EV_RECALL] = {"recall", GT_TRIP_ACTOR_TRAINER},
    [GT_TRIP_EV_RELEASE] = {"release", GT_TRIP_ACTOR_TRAINER},
    [GT_TRIP_EV_TRAINER_GONE] = {"trainer_gone", GT_TRIP_ACTOR_TRAINER},
    [GT_TRIP_EV_ATTACH] = {"attach", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_ATTACH_REFUSED] = {"attach_refused", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_LOAD] = {"load", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_RETURN] = {"return", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_RETURN_STAY] = {"return_stay", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_HAND_OVER] = {"hand_over", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_HOLDER_LOST] = {"holder_lost", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_HANDOFF_LOST] = {"handoff_lost", GT_TRIP_ACTOR_HOLDER},
    [GT_TRIP_EV_EXPIRE] = {"expire", GT_TRIP_ACTOR_DEVICE},
    [GT_TRIP_EV_DEVICE_FAULT] = {"device_fault", GT_TRIP_ACTOR_DEVICE},
};

static const char *const k_effect_names[GT_TRIP_FX_COUNT] = {
    "new_ticket", "arm_lease", "bind_holder", "drop_conn", "mark_loaded", "hand_loaded",
    "wipe_unloaded", "wipe_trip", "kill_ticket", "end_holder", "park_holder", "release_import",
};

const char *gt_trip_state_name(gt_trip_state s)
{
    return (unsigned)s < GT_TRIP_STATE_COUNT ? k_state_names[s] : "unknown";
}

const char *gt_trip_event_name(gt_trip_event ev)
{
    return (unsigned)ev < GT_TRIP_EVENT_COUNT ? k_events[ev].name : "unknown";
}

gt_trip_actor gt_trip_event_actor(gt_trip_event ev)
{
    return (unsigned)ev < GT_TRIP_EVENT_COUNT ? k_events[ev].actor : GT_TRIP_ACTOR_DEVICE;
}

const char *gt_trip_actor_name(gt_trip_actor a)
{
    switch (a) {
    case GT_TRIP_ACTOR_TRAINER: return "trainer";
    case GT_TRIP_ACTOR_HOLDER: return "holder";
    case GT_TRIP_ACTOR_DEVICE: return "device";
    default: return "unknown";
    }
}

const char *gt_trip_effect_name(unsigned bit)
{
    for (unsigned i = 0; i < GT_TRIP_FX_COUNT; i++) {
        if (bit == 1u << i) {
            return k_effect_names[i];
        }
    }
    return "unknown";
}

gt_err gt_trip_step(gt_trip_state from, gt_trip_event ev, gt_trip_state *to, unsigned *effects)
{
    *to = from;
    *effects = 0;
    GT_ENSURE((unsigned)from < GT_TRIP_STATE_COUNT && (unsigned)ev < GT_TRIP_EVENT_COUNT, GT_E_ARG,
              "trip: no state %u or no event %u", (unsigned)from, (unsigned)ev);
    char allowed[96] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof k_table / sizeof k_table[0]; i++) {
        if (k_table[i].event != ev) {
            continue;
        }
        if (k_table[i].from == from) {
            *to = k_table[i].to;
            *effects = k_table[i].effects;
            return GT_OK;
        }
        int w = snprintf(allowed + used, sizeof allowed - used, "%s%s", used ? ", " : "",
                         k_state_names[k_table[i].from]);
        if (w > 0 && (size_t)w < sizeof allowed - used) {
            used += (size_t)w;
        }
    }
    return gt_errf(GT_E_STATE, "trip: %s (%s) refused in state %s (allowed in: %s)",
                   k_events[ev].name, gt_trip_actor_name(k_events[ev].actor),
                   k_state_names[from], used ? allowed : "none");
}
