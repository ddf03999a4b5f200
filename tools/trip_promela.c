// gt_trip_promela: writes a Promela model of the trip (docs/trip.md) from the state machine's own
// table (gt_trip_table), for spin to check; or, with --dot, the table as a Graphviz graph.
//
//   gt_trip_promela [--break NAME] > trip.pml      spin -a trip.pml (scripts/spin_check.sh)
//   gt_trip_promela --dot > trip.dot               dot -Tpng trip.dot > docs/trip-states.png
//   gt_trip_promela --list-breaks                  the mutants, one "NAME: what" a line
//
// The model: the table as data (tf/te/tt/tx arrays) and one Device process that receives every
// event, looks it up in the table, carries out the effects on a small abstract device (ticket,
// lease, bound holder, one trip buffer) and answers accepted or refused. Around it: a trainer,
// two holders competing with the live ticket or a wrong one, a lease timer, a device fault, each
// of which may fail or die at any step. Claims are flags the Device raises (safety, one never
// claim each) and one liveness formula checked under weak fairness.
#include <gputravel/travel.h>

#include <stdio.h>
#include <string.h>

// A model-only effect: hand the loaded buffer over readable (no NO_READBACK). No real row has
// it; the return_readable mutant adds it, so that the readback claim is shown to bite.
#define FX_MUT_READABLE (1u << GT_TRIP_FX_COUNT)

enum { MUT_REPLACE, MUT_ADD, MUT_REMOVE };

typedef struct {
    const char *name;
    const char *what;
    int op;
    gt_trip_state from;
    gt_trip_event event;
    gt_trip_state to;
    unsigned effects;
    const char *caught_by;  // the claim that must fail
} mutant;

#define BACK (GT_TRIP_FX_HAND_LOADED | GT_TRIP_FX_WIPE_UNLOADED | GT_TRIP_FX_KILL_TICKET | \
              GT_TRIP_FX_END_HOLDER)

static const mutant k_mutants[] = {
    {"expire_loaded_returns", "lease expiry in loaded returns the device (hands the chunk over)",
     MUT_REPLACE, GT_TRIP_LOADED, GT_TRIP_EV_EXPIRE, GT_TRIP_RETURNED, BACK, "consent"},
    {"second_attach", "a second attach is allowed while a holder has the device", MUT_ADD,
     GT_TRIP_ATTACHED, GT_TRIP_EV_ATTACH, GT_TRIP_ATTACHED, GT_TRIP_FX_BIND_HOLDER, "excl"},
    {"use_while_loaded", "the trainer may use the device while a holder has loaded it", MUT_ADD,
     GT_TRIP_LOADED, GT_TRIP_EV_TRAINER_USE, GT_TRIP_LOADED, 0, "excl"},
    {"expire_keeps_data", "lease expiry in loaded fails the trip without wiping it", MUT_REPLACE,
     GT_TRIP_LOADED, GT_TRIP_EV_EXPIRE, GT_TRIP_FAILED,
     GT_TRIP_FX_KILL_TICKET | GT_TRIP_FX_END_HOLDER, "wiped"},
    {"expire_ignored", "lease expiry in loaded is refused (the lease no longer bounds a load)",
     MUT_REMOVE, GT_TRIP_LOADED, GT_TRIP_EV_EXPIRE, GT_TRIP_LOADED, 0, "back"},
    {"return_readable", "return hands the loaded buffer over without NO_READBACK", MUT_REPLACE,
     GT_TRIP_LOADED, GT_TRIP_EV_RETURN, GT_TRIP_RETURNED, BACK | FX_MUT_READABLE, "readback"},
};
#define NMUT (sizeof k_mutants / sizeof k_mutants[0])

#define MAX_ROWS 64

// The table the model is made of: the real one, with at most one mutant applied.
static size_t build_table(gt_trip_transition *rows, const mutant *m)
{
    size_t n = 0, k = 0;
    const gt_trip_transition *t = gt_trip_table(&n);
    for (size_t i = 0; i < n && k < MAX_ROWS; i++) {
        bool hit = m != NULL && t[i].from == m->from && t[i].event == m->event;
        if (hit && m->op == MUT_REMOVE) {
            continue;
        }
        rows[k] = t[i];
        if (hit && m->op == MUT_REPLACE) {
            rows[k].to = m->to;
            rows[k].effects = m->effects;
        }
        k++;
    }
    if (m != NULL && m->op == MUT_ADD && k < MAX_ROWS) {
        rows[k++] = (gt_trip_transition){m->from, m->event, m->to, m->effects};
    }
    return k;
}

static void upper(char *out, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] != '\0' && i + 1 < cap; i++) {
        out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
    }
    out[i] = '\0';
}

static void print_effects(FILE *f, unsigned fx, const char *sep)
{
    bool first = true;
    for (unsigned b = 0; b < GT_TRIP_FX_COUNT; b++) {
        if (fx & (1u << b)) {
            fprintf(f, "%s%s", first ? "" : sep, gt_trip_effect_name(1u << b));
            first = false;
        }
    }
    if (fx & FX_MUT_READABLE) {
        fprintf(f, "%sMUTANT_readable", first ? "" : sep);
    }
}

static void emit_defines(FILE *f, size_t nrows)
{
    char u[64];
    for (int s = 0; s < GT_TRIP_STATE_COUNT; s++) {
        upper(u, sizeof u, gt_trip_state_name((gt_trip_state)s));
        fprintf(f, "#define S_%s %d\n", u, s);
    }
    for (int e = 0; e < GT_TRIP_EVENT_COUNT; e++) {
        upper(u, sizeof u, gt_trip_event_name((gt_trip_event)e));
        fprintf(f, "#define E_%s %d  /* %s */\n", u, e,
                gt_trip_actor_name(gt_trip_event_actor((gt_trip_event)e)));
    }
    for (unsigned b = 0; b < GT_TRIP_FX_COUNT; b++) {
        upper(u, sizeof u, gt_trip_effect_name(1u << b));
        fprintf(f, "#define FX_%s %u\n", u, 1u << b);
    }
    fprintf(f, "#define FX_MUT_READABLE %u\n#define NTAB %zu\n\n", FX_MUT_READABLE, nrows);
}

static void emit_table(FILE *f, const gt_trip_transition *rows, size_t n)
{
    fprintf(f, "inline load_table() {\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "    tf[%zu] = %d; te[%zu] = %d; tt[%zu] = %d; tx[%zu] = %u;  /* %s --%s--> %s: ",
                i, rows[i].from, i, rows[i].event, i, rows[i].to, i, rows[i].effects,
                gt_trip_state_name(rows[i].from), gt_trip_event_name(rows[i].event),
                gt_trip_state_name(rows[i].to));
        print_effects(f, rows[i].effects, " ");
        fprintf(f, " */\n");
    }
    fprintf(f, "}\n\n");
}

// The fixed part: the abstract device, the environment and the claims. Each request is one
// rendezvous with the Device, whose whole handling is one indivisible step (d_step).
static const char k_model[] =
    "#define TRAINER 0\n#define H1 1\n#define H2 2\n#define TIMER 3\n#define DEV 4\n"
    "#define WRONG 9       /* a ticket nobody was given */\n"
    "#define MAXLEND 2     /* lends per run: tickets 1 and 2 */\n"
    "#ifndef TBUDGET\n#define TBUDGET 4     /* trainer moves before it stops */\n#endif\n"
    "#ifndef HBUDGET\n#define HBUDGET 3     /* holder moves (loading is not counted) */\n#endif\n"
    "#ifndef RBUDGET\n#define RBUDGET 2     /* rival moves */\n#endif\n"
    "#define away (state == S_LENT || state == S_ATTACHED || state == S_LOADED)\n\n"
    "byte tf[NTAB]; byte te[NTAB]; byte tt[NTAB]; short tx[NTAB];\n"
    "chan req = [0] of { byte, byte, byte };  /* event, actor, ticket (TRAINER_USE: 1 = copy_out) */\n\n"
    "byte state = S_AT_TRAINER;\n"
    "byte ticket;        /* the live ticket, 0: none (killed) */\n"
    "byte trips;         /* tickets drawn so far = the current trip's number */\n"
    "byte holder;        /* the session bound to the trip (BIND_HOLDER), 0: none */\n"
    "bool armed;         /* the lease is running and has not fired */\n"
    "byte data;          /* whose chunk is in the trip buffer (or the import), 0: none */\n"
    "byte dtrip;         /* the trip that brought it */\n"
    "bool norb;          /* that buffer is NO_READBACK */\n"
    "byte used[MAXLEND + 1];  /* attaches per ticket */\n"
    "bool bad_excl, bad_ticket, bad_readback, bad_consent, bad_wipe;\n"
    "byte e, who, tk, i, to; short fx; bool ok;  /* the Device's scratch, zero between steps */\n\n"
    "inline apply() {\n"
    "    /* exclusion: the trainer is served while a holder has the device */\n"
    "    if :: e == E_TRAINER_USE && holder != 0 && (state == S_ATTACHED || state == S_LOADED) -> bad_excl = 1\n"
    "       :: else -> skip fi;\n"
    "    if :: e == E_TRAINER_USE && tk == 1 && data != 0 && !norb -> bad_readback = 1\n"
    "       :: else -> skip fi;\n"
    "    /* devd forces NO_READBACK on every buffer a holder allocates on a trip */\n"
    "    if :: fx & FX_MARK_LOADED -> data = who; dtrip = trips; norb = 1 :: else -> skip fi;\n"
    "    if :: fx & FX_HAND_LOADED ->\n"
    "          /* RETURN_IPC brings the holder's own buffer, imported NO_READBACK */\n"
    "          if :: e == E_HAND_OVER -> data = who; dtrip = trips; norb = 1 :: else -> skip fi;\n"
    "          /* consent: only its holder's own return hands a chunk over */\n"
    "          if :: data != 0 && dtrip == trips &&\n"
    "                !(who == data && (e == E_RETURN || e == E_RETURN_STAY || e == E_HAND_OVER)) ->\n"
    "                bad_consent = 1\n"
    "             :: else -> skip fi;\n"
    "          if :: fx & FX_MUT_READABLE -> norb = 0 :: else -> skip fi\n"
    "       :: else -> skip fi;\n"
    "    if :: (fx & (FX_WIPE_TRIP | FX_RELEASE_IMPORT)) && dtrip == trips -> data = 0; dtrip = 0; norb = 0\n"
    "       :: else -> skip fi;\n"
    "    if :: fx & FX_KILL_TICKET -> ticket = 0 :: else -> skip fi;\n"
    "    if :: fx & (FX_END_HOLDER | FX_PARK_HOLDER) -> holder = 0 :: else -> skip fi;\n"
    "    if :: fx & FX_NEW_TICKET -> trips++; ticket = trips :: else -> skip fi;\n"
    "    if :: fx & FX_ARM_LEASE -> armed = 1 :: else -> skip fi;\n"
    "    if :: fx & FX_BIND_HOLDER ->\n"
    "          if :: holder != 0 -> bad_excl = 1 :: else -> skip fi;  /* a second party */\n"
    "          holder = who; used[tk]++;\n"
    "          if :: used[tk] > 1 -> bad_ticket = 1 :: else -> skip fi\n"
    "       :: else -> skip fi;\n"
    "    state = to;\n"
    "    if :: state == S_FAILED && data != 0 && dtrip == trips -> bad_wipe = 1 :: else -> skip fi\n"
    "}\n\n"
    "/* The state machine: every event is looked up in the table; refused ones change nothing. */\n"
    "proctype Device() {\n"
    "end_device:\n"
    "    do\n"
    "    :: atomic {\n"
    "        req?e,who,tk;\n"
    "        d_step {\n"
    "        /* the device's own guards: ATTACH is the live ticket's; a holder's death after the */\n"
    "        /* handoff is what the trainer sees as handoff_lost */\n"
    "        if :: e == E_ATTACH && !(tk != 0 && tk == ticket) -> e = E_ATTACH_REFUSED :: else -> skip fi;\n"
    "        if :: e == E_HOLDER_LOST && state == S_RETURNED -> e = E_HANDOFF_LOST :: else -> skip fi;\n"
    "        /* a holder's other requests reach the trip only on the session bound to it */\n"
    "        ok = (who != H1 && who != H2) || e == E_ATTACH || e == E_ATTACH_REFUSED || who == holder;\n"
    "        if :: e == E_EXPIRE -> armed = 0 :: else -> skip fi;  /* a lease fires once */\n"
    "        if :: ok ->\n"
    "            ok = 0; i = 0;\n"
    "            do\n"
    "            :: i == NTAB -> break\n"
    "            :: i < NTAB && tf[i] == state && te[i] == e -> ok = 1; to = tt[i]; fx = tx[i]; break\n"
    "            :: i < NTAB && !(tf[i] == state && te[i] == e) -> i++\n"
    "            od\n"
    "           :: else -> skip fi;\n"
    "        printf(\"MSC: actor %d: event %d in state %d: %d\\n\", who, e, state, ok);\n"
    "        if :: ok -> apply() :: else -> skip fi;\n"
    "        if :: !away -> armed = 0 :: else -> skip fi;\n"
    "        e = 0; who = 0; tk = 0; i = 0; to = 0; fx = 0; ok = 0\n"
    "        }\n"
    "    }\n"
    "    od\n"
    "}\n\n"
    "proctype Trainer() {\n"
    "    byte budget = TBUDGET;\n"
    "end_trainer:\n"
    "    do\n"
    "    :: budget > 0 && trips < MAXLEND -> budget--; req!E_LEND,TRAINER,0\n"
    "    :: budget > 0 -> budget--; req!E_RECALL,TRAINER,0\n"
    "    :: budget > 0 -> budget--; req!E_TRAINER_USE,TRAINER,1  /* copy_out of the trip's buffer */\n"
    "    :: budget > 0 -> budget--; req!E_RELEASE,TRAINER,0\n"
    "    :: budget > 0 -> budget--; !away  /* waits for the device (polls TRIP_STATUS) */\n"
    "    :: budget > 0 -> req!E_TRAINER_GONE,TRAINER,0; break  /* dies */\n"
    "    :: budget == 0 -> break\n"
    "    od\n"
    "}\n\n"
    "/* The holder the trainer gave the ticket to. Loading may go on for ever: only the lease */\n"
    "/* bounds a trip (weak fairness lets the timer fire). */\n"
    "proctype Holder(byte me) {\n"
    "    byte budget = HBUDGET;\n"
    "end_holder:\n"
    "    do\n"
    "    :: budget > 0 -> budget--; req!E_ATTACH,me,ticket  /* the live ticket, if any */\n"
    "    :: req!E_LOAD,me,0\n"
    "    :: budget > 0 -> budget--; req!E_RETURN,me,0\n"
    "    :: budget > 0 -> budget--; req!E_RETURN_STAY,me,0\n"
    "    :: budget > 0 -> budget--; req!E_HAND_OVER,me,0\n"
    "    :: budget > 0 -> req!E_HOLDER_LOST,me,0; break  /* dies, before or after handing over */\n"
    "    :: budget == 0 -> break\n"
    "    od\n"
    "}\n\n"
    "/* A second holder: it was given the same ticket, or an old or wrong one, and tries too. */\n"
    "proctype Rival(byte me) {\n"
    "    byte budget = RBUDGET;\n"
    "end_rival:\n"
    "    do\n"
    "    :: budget > 0 -> budget--; req!E_ATTACH,me,ticket\n"
    "    :: budget > 0 -> budget--; req!E_ATTACH,me,1  /* the first trip's ticket, live or stale */\n"
    "    :: budget > 0 -> budget--; req!E_ATTACH,me,WRONG\n"
    "    :: budget > 0 -> budget--; req!E_LOAD,me,0\n"
    "    :: budget > 0 -> req!E_HOLDER_LOST,me,0; break\n"
    "    :: budget == 0 -> break\n"
    "    od\n"
    "}\n\n"
    "proctype Timer() {\n"
    "end_timer:\n"
    "    do\n"
    "    :: atomic { armed -> req!E_EXPIRE,TIMER,0 }\n"
    "    od\n"
    "}\n\n"
    "proctype Fault() {  /* devd stopping, or a release that failed: once, at any moment, or never */\n"
    "    if\n"
    "    :: req!E_DEVICE_FAULT,DEV,0\n"
    "    :: skip\n"
    "    fi\n"
    "}\n\n"
    "init {\n"
    "    atomic {\n"
    "        load_table();\n"
    "        run Device(); run Trainer(); run Holder(H1); run Rival(H2); run Timer(); run Fault()\n"
    "    }\n"
    "}\n\n"
    "ltl excl { [] !bad_excl }            /* at most one party has the device */\n"
    "ltl ticket_once { [] !bad_ticket }   /* a ticket attaches at most once */\n"
    "ltl readback { [] !bad_readback }    /* no copy_out ever reads a holder's chunk */\n"
    "ltl consent { [] !bad_consent }      /* a chunk reaches the trainer only by its holder's return */\n"
    "ltl wiped { [] !bad_wipe }           /* nothing of a failed trip survives */\n"
    "ltl back { [] (away -> <> !away) }   /* a lent device always comes back (weak fairness) */\n";

static void emit_promela(FILE *f, const mutant *m)
{
    gt_trip_transition rows[MAX_ROWS];
    size_t n = build_table(rows, m);
    fprintf(f, "/* The trip, generated by gt_trip_promela from gt_trip_table() (src/travel/trip_fsm.c)."
               "\n   Do not edit: regenerate. docs/trip.md explains the model and its claims. */\n");
    if (m != NULL) {
        fprintf(f, "/* MUTANT %s: %s (must break claim %s) */\n", m->name, m->what, m->caught_by);
    }
    fprintf(f, "\n");
    emit_defines(f, n);
    emit_table(f, rows, n);  // an inline: expanded in init, after the arrays are declared
    fputs(k_model, f);
}

static void emit_dot(FILE *f)
{
    size_t n = 0;
    const gt_trip_transition *t = gt_trip_table(&n);
    fprintf(f, "// gt_trip_promela --dot: the trip state machine (src/travel/trip_fsm.c)\n"
               "digraph trip {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
               "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    for (int s = 0; s < GT_TRIP_STATE_COUNT; s++) {
        fprintf(f, "  %s [label=\"%s (%d)\"%s];\n", gt_trip_state_name((gt_trip_state)s),
                gt_trip_state_name((gt_trip_state)s), s,
                s == GT_TRIP_LENT || s == GT_TRIP_ATTACHED || s == GT_TRIP_LOADED
                    ? ", style=\"rounded,filled\", fillcolor=\"#fde9c9\""
                    : "");
    }
    for (size_t i = 0; i < n; i++) {
        gt_trip_actor a = gt_trip_event_actor(t[i].event);
        const char *color = a == GT_TRIP_ACTOR_TRAINER ? "#1f5fa8"
                            : a == GT_TRIP_ACTOR_HOLDER ? "#2e7d32" : "#b23c17";
        fprintf(f, "  %s -> %s [color=\"%s\", fontcolor=\"%s\", label=\"%s\\n", 
                gt_trip_state_name(t[i].from), gt_trip_state_name(t[i].to), color, color,
                gt_trip_event_name(t[i].event));
        print_effects(f, t[i].effects, "\\n");
        fprintf(f, "\"];\n");
    }
    fprintf(f, "  legend [shape=plaintext, label=\"blue: trainer  green: holder  red: device/timer"
               "\\nshaded: the device is away\"];\n}\n");
}

static int usage(void)
{
    fprintf(stderr, "usage: gt_trip_promela [--break NAME | --dot | --list-breaks]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const mutant *m = NULL;
    if (argc == 2 && strcmp(argv[1], "--dot") == 0) {
        emit_dot(stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--list-breaks") == 0) {
        for (size_t i = 0; i < NMUT; i++) {
            printf("%s %s: %s\n", k_mutants[i].name, k_mutants[i].caught_by, k_mutants[i].what);
        }
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--break") == 0) {
        for (size_t i = 0; i < NMUT; i++) {
            if (strcmp(argv[2], k_mutants[i].name) == 0) {
                m = &k_mutants[i];
            }
        }
        if (m == NULL) {
            fprintf(stderr, "gt_trip_promela: no mutant %s (--list-breaks)\n", argv[2]);
            return 2;
        }
    } else if (argc != 1) {
        return usage();
    }
    emit_promela(stdout, m);
    return ferror(stdout) ? 1 : 0;
}
