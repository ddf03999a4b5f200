// orchestr/: the attack-and-fault matrix of collaborative training, end to end through
// gt_collab_train against real holder agents (threads, or child processes a test SIGKILLs) and,
// for travelling, a real devd process. For each attack or fault: the trainer's error (code and
// reason), the holder's reason in its ledger, a ledger that verifies (hashes, signatures, pinned
// key), and exact token accounting (the trainer's per-holder tokens == the ledger's confirmed
// uses; a refused trainer got nothing). docs/collaboration.md "Attacks and faults, as tested".
#include "collab_testlib.h"

#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// Every dataset carries this canary, as tokens (one token per character), every 200 tokens.
static const char canary[] = "GPUTRAVEL-CANARY-7f3e9a";
#define CANARY_LEN (sizeof canary - 1)
#define CANARY_EVERY 200

static uint16_t canary_token(void *ctx, int h, uint32_t i)
{
    (void)ctx;
    if (i % CANARY_EVERY < CANARY_LEN) {
        return (uint16_t)(uint8_t)canary[i % CANARY_EVERY];
    }
    return (uint16_t)((i * (uint32_t)(h + 3) + (uint32_t)h) % 97);
}

static gt_tc_fixture F;

static int setup(void **state)
{
    (void)state;
    // Two holders, 4 chunks of 1000 tokens each; B=2, T=16 gives 31 steps per chunk.
    gt_tc_setup(&F, 2, 4000, 1000, canary_token, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_tc_teardown(&F);
    return 0;
}

static void fresh_ledgers(void)
{
    for (int h = 0; h < F.holders; h++) {
        unlink(F.ledgers[h]);
    }
}

static void state_dir(char *out, size_t cap, const char *name)
{
    GT_ASSERT_OK(gt_path_join(out, cap, F.dir, name));
    gt_test_rmtree(out);
    GT_ASSERT_OK(gt_mkdir_p(out, 0700));
}

// The trainer's and the ledgers' token accounts agree exactly; no chunk is used twice.
static uint64_t check_accounts(const gt_collab_report *rep)
{
    uint64_t total = 0;
    for (int h = 0; h < F.holders; h++) {
        gt_tc_tally t;
        gt_tc_ledger_tally(&F, h, &t);
        for (int c = 0; c < 64; c++) {
            assert_true(t.uses[c] <= 1);
        }
        assert_int_equal(t.use_tokens, rep->holders[h].tokens_used);
        total += t.use_tokens;
    }
    return total;
}

static void measurement_hex(char out[97], const char *exe)
{
    uint8_t m[GT_MEASUREMENT_BYTES];
    GT_ASSERT_OK(gt_sim_measure_exe(m, exe));
    gt_hex_encode(out, 97, m, sizeof m);
}

// ---- attestation attacks --------------------------------------------------------------------

// Records the first evidence it collects and hands that same evidence to every later session:
// evidence from an earlier session (an old nonce) replayed.
typedef struct {
    gt_net_attestor inner;
    gt_buf recorded;
    int calls;
} replayer;

static gt_err replay_collect(void *ctx, const uint8_t b[GT_NET_BINDING_BYTES], gt_buf *ev)
{
    replayer *r = ctx;
    if (r->calls++ == 0) {
        GT_TRY(r->inner.collect(r->inner.ctx, b, &r->recorded));
    }
    return gt_buf_append(ev, r->recorded.data, r->recorded.len);
}

static gt_err replay_appraise(void *ctx, const uint8_t *ev, size_t len,
                              const uint8_t b[GT_NET_BINDING_BYTES])
{
    replayer *r = ctx;
    return r->inner.appraise(r->inner.ctx, ev, len, b);
}

typedef struct {
    const char *what;
    bool listed;              // the agreement lists this binary's measurement for the trainer
    const char *trainer_json; // else this trainer section (NULL: none)
    const char *holder_policy;  // NULL: {"allow_simulation":true}
    bool debug;               // the trainer's TEE runs in debug mode
    bool other_agreement;     // the trainer runs under another agreement (other hash)
    bool replay;              // the trainer replays its first session's evidence
    bool toy;                 // toy attestors (no TEE): the agreement check of HELLO itself
    int refusing;             // the holder that refuses (-1: none)
    const char *reason;       // in the trainer's error and the holder's ledger
} attack;

static void run_attack(const attack *at)
{
    fresh_ledgers();
    char me[97], trainer_json[160], sd[600];
    measurement_hex(me, NULL);  // both ends run this test binary
    snprintf(trainer_json, sizeof trainer_json, "\"accepted_measurements\":[\"%s\"]", me);
    gt_tc_holder runs[GT_TC_MAX_HOLDERS];
    int ports[GT_TC_MAX_HOLDERS];
    gt_tc_listen(&F, runs, ports);
    gt_tc_terms terms = {.steps = 20,
                         .trainer_json = at->listed ? trainer_json : at->trainer_json};
    gt_agreement a, other;
    gt_tc_agreement(&F, &a, ports, &terms);
    terms.name = "other";  // the same parties and terms under another name: another hash
    gt_tc_agreement(&F, &other, ports, &terms);
    const gt_agreement *trainer_a = at->other_agreement ? &other : &a;
    gt_policy *policy = NULL;
    if (at->holder_policy != NULL) {
        GT_ASSERT_OK(gt_policy_parse(&policy, at->holder_policy, strlen(at->holder_policy)));
    }
    gt_tee_attestor holder_tee[GT_TC_MAX_HOLDERS], trainer_tee;
    for (int h = 0; h < F.holders; h++) {
        gt_tc_tee(&F, &holder_tee[h], &a, GT_PEER_TRAINER, policy, false);
        gt_tc_holder_opts o = {.attestor = gt_tee_attestor_bind(&holder_tee[h])};
        if (at->toy) {
            o.attestor = gt_tc_toy_holder();
        }
        gt_tc_serve_thread(&F, &runs[h], h, &a, &o);
    }
    gt_tc_tee(&F, &trainer_tee, trainer_a, GT_PEER_HOLDER, NULL, at->debug);
    replayer rp = {.inner = gt_tee_attestor_bind(&trainer_tee)};
    gt_tc_train_opts o = {.a = trainer_a, .transfer = GT_TRANSFER_CONVENTIONAL_KEYRELEASE,
                          .attestor = at->replay ? (gt_net_attestor){replay_collect,
                                                                     replay_appraise, &rp}
                                                 : gt_tee_attestor_bind(&trainer_tee)};
    if (at->toy) {
        o.attestor = gt_tc_toy_trainer();
    }
    state_dir(sd, sizeof sd, "attack");
    o.state_dir = sd;
    gt_collab_report rep;
    gt_err e = gt_tc_train(&o, &rep, NULL);
    for (int h = 0; h < F.holders; h++) {
        gt_tc_stop(&runs[h], false);
    }
    gt_buf_free_nowipe(&rp.recorded);
    gt_policy_free(policy);
    print_message("%-28s trainer: %s\n", at->what, gt_is_ok(e) ? "trained" : e.msg);
    // Holders are asked in order: each one before the refusing holder (all of them when none
    // refuses) recorded this run's signing key in a session entry; from the refusing holder on,
    // no ledger holds a key of a trainer it did not accept.
    for (int h = 0; h < F.holders; h++) {
        gt_tc_tally t;
        gt_tc_ledger_tally(&F, h, &t);
        bool asked = at->refusing < 0 || h < at->refusing;
        assert_int_equal(t.sessions, asked ? 1 : 0);
        if (asked) {
            assert_memory_equal(t.last_session_key, rep.signing_key, 32);
        }
    }
    if (at->refusing < 0) {
        GT_ASSERT_OK(e);
        assert_int_equal(rep.steps_done, 20);
        assert_int_equal(check_accounts(&rep), 1000);  // one chunk: 20 steps of its 31
        return;
    }
    // The trainer stops before training anything, with the refusing holder's reason.
    assert_int_equal(e.code, GT_E_POLICY);
    char who[32];
    snprintf(who, sizeof who, "holder h%d", at->refusing);
    assert_non_null(strstr(e.msg, who));
    assert_non_null(strstr(e.msg, at->reason));
    assert_int_equal(rep.steps_done, 0);
    for (int h = 0; h < F.holders; h++) {
        assert_int_equal(rep.holders[h].tokens_used, 0);
        gt_tc_tally t;
        gt_tc_ledger_tally(&F, h, &t);  // verifies
        assert_int_equal(t.grants, 0);  // nothing released to anyone
        assert_int_equal(t.use_tokens, 0);
        // A trainer refused at the handshake never attested: the holder logs it (rate-limited)
        // and its ledger, which holds decisions about attested peers only, does not grow. A
        // refusal after attesting (HELLO under another agreement) is a ledgered decision.
        bool ledgered = h == at->refusing && at->toy;
        assert_int_equal(t.refusals, ledgered ? 1 : 0);
        if (ledgered) {
            print_message("%-28s holder h%d ledger: refuse \"%s\"\n", "", h, t.last_refusal);
            assert_non_null(strstr(t.last_refusal, at->reason));
        }
    }
    assert_int_equal(gt_test_count_files(sd), 0);  // no checkpoint, no journal
}

static void attested_attacks_are_refused_on_both_sides(void **state)
{
    (void)state;
    static const char bogus[] =
        "\"accepted_measurements\":[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]";
    const attack attacks[] = {
        {.what = "accepted trainer (control)", .listed = true, .refusing = -1},
        {.what = "unapproved measurement", .trainer_json = bogus, .refusing = 0,
         .reason = "is not one the agreement accepts"},
        // The demo's policy ({"allow_simulation":true}) refuses a debug TEE by default.
        {.what = "debug TEE", .listed = true, .debug = true, .refusing = 0,
         .reason = "debug TEE refused: the policy does not set allow_debug"},
        {.what = "simulation forbidden", .listed = true, .holder_policy = "{}", .refusing = 0,
         .reason = "allow_simulation"},
        {.what = "wrong agreement (evidence)", .listed = true, .other_agreement = true,
         .refusing = 0, .reason = "different agreement: ours "},
        {.what = "wrong agreement (HELLO)", .toy = true, .other_agreement = true, .refusing = 0,
         .reason = "trainer runs under another agreement than this holder's"},
        {.what = "replayed evidence", .listed = true, .replay = true, .refusing = 1,
         .reason = "report_data"},
    };
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++) {
        run_attack(&attacks[i]);
    }
}

// ---- device evidence that fails ---------------------------------------------------------------

// A trainer that does not check its device at all (its own loss: the holders still do). Its
// evidence goes to devd as the default hook would make it.
static gt_err trust_any_device(void *ctx, gt_span evidence,
                               const uint8_t rd[GT_REPORT_DATA_BYTES])
{
    (void)ctx;
    (void)evidence;
    (void)rd;
    return GT_OK;
}

static gt_err sim_produce(void *ctx, const uint8_t rd[GT_REPORT_DATA_BYTES], gt_buf *out)
{
    (void)ctx;
    gt_collect_params p = {.type = GT_TEE_SIM};
    gt_evidence ev;
    GT_TRY(gt_attest_collect(&ev, &p, rd));
    gt_err err = gt_evidence_encode(&ev, out);
    gt_evidence_free(&ev);
    return err;
}

typedef enum {
    DEV_HONEST_TRAINER,    // the agreement lists another device measurement
    DEV_CARELESS_TRAINER,  // the same, the trainer does not check its device
    DEV_ACCEPTED,          // the agreement lists devd's measurement
    DEV_UNCERTIFIED,       // devd's identity is certified by another vendor root; no list
} device_case;

// The agreement accepts one device measurement: devd's own (DEV_ACCEPTED) or another one. An
// honest trainer refuses a device the agreement does not accept before contacting anyone; a
// trainer that does not check is stopped by the holder, which appraises the device when it
// attaches and refuses to load: nothing is released, nothing loaded, the device comes back.
static void run_device_case(const char *sock, device_case dc)
{
    char sd[600], devd_m[97], device_json[160];
    if (dc == DEV_ACCEPTED) {
        measurement_hex(devd_m, GT_CLI_PATH);  // devd measures its own executable
    } else {
        memset(devd_m, 'b', 96);
        devd_m[96] = '\0';
    }
    snprintf(device_json, sizeof device_json, "\"accepted_measurements\":[\"%s\"]", devd_m);
    if (dc == DEV_UNCERTIFIED) {
        device_json[0] = '\0';
    }
    fresh_ledgers();
    gt_tc_holder runs[GT_TC_MAX_HOLDERS];
    int ports[GT_TC_MAX_HOLDERS];
    gt_tc_listen(&F, runs, ports);
    gt_tc_terms terms = {.steps = 20, .device_json = device_json};
    gt_agreement a;
    gt_tc_agreement(&F, &a, ports, &terms);
    for (int h = 0; h < F.holders; h++) {
        gt_tc_serve_thread(&F, &runs[h], h, &a, NULL);
    }
    state_dir(sd, sizeof sd, "device");
    gt_tc_train_opts o = {.a = &a, .state_dir = sd, .devd_socket = sock};
    if (dc == DEV_CARELESS_TRAINER || dc == DEV_UNCERTIFIED) {
        o.device_attester = (gt_device_attester){.produce = sim_produce,
                                                 .appraise = trust_any_device};
    }
    gt_collab_report rep;
    gt_device_sim_stat st;
    memset(&st, 0, sizeof st);
    double t0 = gt_now_seconds();
    gt_err e = gt_tc_train(&o, &rep, &st);
    double secs = gt_now_seconds() - t0;
    for (int h = 0; h < F.holders; h++) {
        gt_tc_stop(&runs[h], false);
    }
    if (dc == DEV_ACCEPTED) {
        GT_ASSERT_OK(e);
        assert_int_equal(check_accounts(&rep), 1000);
        return;
    }
    print_message("%s: trainer: %s (%.2f s)\n",
                  dc == DEV_HONEST_TRAINER     ? "device not in the agreement, honest trainer"
                  : dc == DEV_CARELESS_TRAINER ? "device not in the agreement, careless trainer"
                                               : "device not certified by the vendor root",
                  e.msg, secs);
    assert_int_equal(e.code, GT_E_POLICY);
    gt_tc_tally t;
    gt_tc_ledger_tally(&F, 0, &t);
    assert_int_equal(t.grants, 0);
    assert_int_equal(check_accounts(&rep), 0);
    if (dc == DEV_UNCERTIFIED) {
        // The holder's handshake appraisal fails, so it refuses without ever attaching; the
        // trainer recalls its device at once instead of waiting out the 60 s lease.
        assert_non_null(strstr(e.msg, "holder h0 refused: travelling device: "));
        assert_non_null(strstr(e.msg, "not certified by the vendor root"));
        assert_true(secs < 30.0);
        print_message("holder h0 ledger: refuse \"%s\"\n", t.last_refusal);
        assert_int_equal(t.refusals, 1);
        assert_non_null(strstr(t.last_refusal, "not certified by the vendor root"));
        assert_int_equal(st.buffers_live, 0);
        assert_int_equal(st.bytes_in_use, 0);
        return;
    }
    assert_non_null(strstr(e.msg, "is not one the agreement accepts"));
    if (dc == DEV_HONEST_TRAINER) {
        assert_non_null(strstr(e.msg, "the device's measurement"));
        assert_int_equal(t.entries, 1);  // genesis only: no holder was even asked
        return;
    }
    assert_non_null(strstr(e.msg, "holder h0 refused: travelling device: measurement "));
    // The holder closed the device unreturned: the trip failed at once (not at lease end).
    assert_true(secs < 30.0);
    print_message("holder h0 ledger: refuse \"%s\"\n", t.last_refusal);
    assert_int_equal(t.refusals, 1);
    assert_non_null(strstr(t.last_refusal, "travelling device: measurement "));
    assert_non_null(strstr(t.last_refusal, "is not one the agreement accepts"));
    // Nothing loaded, nothing left: every buffer of the session (the model's too) is gone.
    assert_int_equal(st.buffers_live, 0);
    assert_int_equal(st.bytes_in_use, 0);
}

static void rejected_device_is_never_loaded(void **state)
{
    (void)state;
    char sock[600], log[600];
    GT_ASSERT_OK(gt_path_join(log, sizeof log, F.dir, "devd-device.log"));
    pid_t devd = gt_test_devd_start_logged(sock, sizeof sock, F.dir, log);
    run_device_case(sock, DEV_HONEST_TRAINER);
    run_device_case(sock, DEV_CARELESS_TRAINER);
    run_device_case(sock, DEV_ACCEPTED);
    gt_test_devd_stop(devd);
    // A device whose identity another vendor root certified (a device of another make, or a
    // forged one): devd with its own identity and vendor root.
    char dir2[600], vendor[700], ident[700];
    GT_ASSERT_OK(gt_path_join(dir2, sizeof dir2, F.dir, "other-device"));
    GT_ASSERT_OK(gt_mkdir_p(dir2, 0700));
    GT_ASSERT_OK(gt_path_join(vendor, sizeof vendor, dir2, "vendor"));
    GT_ASSERT_OK(gt_path_join(ident, sizeof ident, dir2, "identity"));
    const char *extra[] = {"--vendor-root", vendor, "--identity", ident, NULL};
    devd = gt_test_devd_start(sock, sizeof sock, dir2, extra);
    run_device_case(sock, DEV_UNCERTIFIED);
    gt_test_devd_stop(devd);
}

// ---- a holder killed mid-trip -----------------------------------------------------------------

static const char *die_stage;

// "attached": the device is attached and accepted, nothing decided or loaded yet; "loaded": the
// chunk is in the device, the device not yet returned.
static void die_at_stage(void *ctx, const char *stage, uint32_t chunk)
{
    (void)ctx;
    (void)chunk;
    if (strcmp(stage, die_stage) == 0) {
        kill(getpid(), SIGKILL);
    }
}

static bool file_contains(const char *path, const char *needle)
{
    gt_buf b = {0};
    bool found = false;
    if (gt_is_ok(gt_file_read_all(path, 64u << 20, &b))) {
        size_t n = strlen(needle);
        for (size_t i = 0; i + n <= b.len && !found; i++) {
            found = memcmp(b.data + i, needle, n) == 0;
        }
    }
    gt_buf_free_nowipe(&b);
    return found;
}

// A holder died mid-trip: the trainer skips it for the rest of the run and trains on the other
// holder's chunks, then stops without sealing and says which chunks it skipped and why.
static void assert_skipped_holder(gt_err e, const gt_collab_report *rep,
                                  const gt_device_sim_stat *st, bool loaded, uint32_t steps)
{
    print_message("holder killed mid-trip: trainer: %s; %s\n", e.msg, rep->stop_message);
    GT_ASSERT_OK(e);
    assert_int_equal(rep->stop, GT_COLLAB_STOP_FAILURES);
    assert_int_equal(rep->steps_done, steps);
    assert_int_equal(rep->holders[0].skipped, 1);
    assert_true(rep->holders[0].gone);
    assert_int_equal(rep->holders[0].left, GT_SCHEDULE_LEFT_FAILED);
    assert_non_null(strstr(rep->holders[0].failure, "holder h0 went away during the trip"));
    assert_non_null(strstr(rep->holders[0].failure, "the trip's buffers wiped"));
    assert_int_equal(rep->holders[1].uses, 3);  // all h1's budget of 3000 tokens allows
    assert_int_equal(rep->holders[1].left, GT_SCHEDULE_LEFT_BUDGET);
    assert_non_null(strstr(rep->stop_message, "no chunk left to use but ones that failed in "
                                              "this run"));
    assert_non_null(strstr(rep->stop_message, "holder h0: 1 chunk(s) skipped after a failure "
                                              "(travel for chunk 0: holder h0 went away"));
    assert_non_null(strstr(rep->stop_message, "holder h1: budget (3000 of 3000 tokens released, "
                                              "no unused chunk fits in the rest)"));
    assert_false(rep->sealed);
    // devd wiped the loaded chunk; nothing of the run is left in the device.
    assert_int_equal(st->buffers_live, 0);
    assert_int_equal(st->bytes_in_use, 0);
    if (loaded) {
        assert_true(st->bytes_wiped >= 2000);
    }
}

static void kill_holder_at(const char *stage)
{
    die_stage = stage;
    const bool loaded = strcmp(stage, "loaded") == 0;
    fresh_ledgers();
    char sock[600], log[600], sd[600];
    char log_name[64];
    snprintf(log_name, sizeof log_name, "devd-kill-%s.log", stage);
    GT_ASSERT_OK(gt_path_join(log, sizeof log, F.dir, log_name));
    pid_t devd = gt_test_devd_start_logged(sock, sizeof sock, F.dir, log);
    gt_tc_holder runs[GT_TC_MAX_HOLDERS];
    int ports[GT_TC_MAX_HOLDERS];
    gt_tc_listen(&F, runs, ports);
    gt_tc_terms terms = {.steps = 100};
    gt_agreement a;
    gt_tc_agreement(&F, &a, ports, &terms);
    gt_tc_holder_opts dying = {.trip_hook = die_at_stage};
    gt_tc_serve_process(&F, &runs[0], 0, &a, &dying);  // h0 is served first: chunk 0
    gt_tc_serve_process(&F, &runs[1], 1, &a, NULL);
    state_dir(sd, sizeof sd, "holder-killed");
    gt_tc_train_opts o = {.a = &a, .state_dir = sd, .devd_socket = sock};
    gt_collab_report rep;
    gt_device_sim_stat st;
    memset(&st, 0, sizeof st);
    gt_err e = gt_tc_train(&o, &rep, &st);
    int status = gt_tc_stop(&runs[0], true);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_skipped_holder(e, &rep, &st, loaded, 93);  // h1's three chunks of 31 steps
    if (!file_contains(log, "devd: trip failed")) {
        gt_buf b = {0};
        GT_ASSERT_OK(gt_file_read_all(log, 1 << 20, &b));
        fail_msg("devd's log has no failed trip:\n%.*s", (int)b.len, (const char *)b.data);
    }
    // The killed holder's ledger verifies: the grant it wrote before loading (none when it died
    // before deciding), no use.
    gt_tc_tally t;
    gt_tc_ledger_tally(&F, 0, &t);
    assert_int_equal(t.grants, loaded ? 1 : 0);
    assert_int_equal(t.travels, loaded ? 1 : 0);
    assert_int_equal(t.use_tokens, 0);
    o.resume = true;
    if (loaded) {
        // The same chunk interrupted a second time (its resend): skipped again. Then the holder
        // refuses it (sent twice, never used: the most it may be), which skips that chunk only;
        // the run goes on with the holder's other chunks and trains its steps.
        gt_tc_serve_process(&F, &runs[0], 0, &a, &dying);
        GT_ASSERT_OK(gt_tc_train(&o, &rep, &st));
        status = gt_tc_stop(&runs[0], true);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        assert_int_equal(rep.stop, GT_COLLAB_STOP_FAILURES);
        assert_int_equal(rep.holders[0].skipped, 1);
        assert_int_equal(rep.steps_done, 93);  // nothing left to train on but h0's
        gt_tc_serve_process(&F, &runs[0], 0, &a, NULL);
        GT_ASSERT_OK(gt_tc_train(&o, &rep, &st));
        print_message("after two interruptions of chunk 0: %s\n", rep.stop_message);
        assert_int_equal(rep.stop, GT_COLLAB_STOP_STEPS);
        assert_int_equal(rep.holders[0].skipped, 1);
        assert_false(rep.holders[0].gone);
        assert_int_equal(rep.holders[0].uses, 1);
        assert_non_null(strstr(rep.holders[0].failure, "holder h0 refused: chunk 0 already sent "
                                                       "2 time(s) without a confirmed use"));
    } else {
        // The holder comes back (same ledger, same port); the trainer resumes. The chunk whose
        // trip failed is offered again and the holder resends it once (no budget spent twice).
        gt_tc_serve_process(&F, &runs[0], 0, &a, NULL);
        GT_ASSERT_OK(gt_tc_train(&o, &rep, &st));
        assert_int_equal(rep.stop, GT_COLLAB_STOP_STEPS);
        assert_int_equal(rep.holders[0].skipped, 0);
    }
    for (int h = 0; h < F.holders; h++) {
        status = gt_tc_stop(&runs[h], false);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    gt_test_devd_stop(devd);
    assert_int_equal(rep.steps_done, 100);
    assert_int_equal(check_accounts(&rep), 4000);  // 100 steps: four chunks, the last cut short
}

static void killed_holder_mid_trip(void **state)
{
    (void)state;
    kill_holder_at("attached");
    kill_holder_at("loaded");
}

// ---- devd killed mid-trip ---------------------------------------------------------------------

static void kill_devd_once(void *ctx, const char *stage, uint32_t chunk)
{
    (void)chunk;
    pid_t *devd = ctx;
    if (strcmp(stage, "attached") == 0 && *devd > 0) {
        kill(*devd, SIGKILL);  // the device dies while a holder has it
        waitpid(*devd, NULL, 0);
        *devd = 0;
    }
}

// devd dies while the holder is attached: the holder records the failed trip with its reason
// and tells the trainer, which stops with it; nothing was used, the ledgers verify.
static void devd_killed_mid_trip(void **state)
{
    (void)state;
    fresh_ledgers();
    char sock[600], sd[600];
    pid_t devd = gt_test_devd_start(sock, sizeof sock, F.dir, NULL);
    gt_tc_holder runs[GT_TC_MAX_HOLDERS];
    int ports[GT_TC_MAX_HOLDERS];
    gt_tc_listen(&F, runs, ports);
    gt_tc_terms terms = {.steps = 40};
    gt_agreement a;
    gt_tc_agreement(&F, &a, ports, &terms);
    gt_tc_holder_opts killer = {.trip_hook = kill_devd_once, .trip_hook_ctx = &devd};
    for (int h = 0; h < F.holders; h++) {
        gt_tc_serve_thread(&F, &runs[h], h, &a, &killer);
    }
    state_dir(sd, sizeof sd, "devd-killed");
    gt_tc_train_opts o = {.a = &a, .state_dir = sd, .devd_socket = sock};
    gt_collab_report rep;
    gt_err e = gt_tc_train(&o, &rep, NULL);
    for (int h = 0; h < F.holders; h++) {
        gt_tc_stop(&runs[h], false);
    }
    assert_int_equal(devd, 0);  // it was killed
    unlink(sock);               // its socket stays behind; the next devd must not see it
    print_message("devd killed mid-trip: trainer: %s (%s)\n", e.msg, rep.stop_message);
    // The holder's refusal is about this attempt (GT_E_RETRY); the run ends because the
    // trainer found its own device dead, not because of the refusal.
    assert_int_equal(e.code, GT_E_RETRY);
    assert_non_null(strstr(e.msg, "holder h0 refused: trip failed: "));
    assert_non_null(strstr(e.msg, "travelling device"));
    gt_tc_tally t;
    gt_tc_ledger_tally(&F, 0, &t);
    print_message("holder h0 ledger: trip-failed \"%s\"\n", t.last_trip_failure);
    assert_int_equal(t.grants, 1);
    assert_int_equal(t.trip_failures, 1);
    assert_non_null(strstr(t.last_trip_failure, "travelling device"));
    assert_int_equal(check_accounts(&rep), 0);
}

// ---- the trainer killed: resumed == uninterrupted ---------------------------------------------

static uint32_t kill_at_step;
static float step_loss[101];  // the losses this process saw, by step (NaN: not trained here)
static void die_at_step(void *ctx, const gt_collab_step *s)
{
    (void)ctx;
    if (s->step <= 100) {
        step_loss[s->step] = s->loss;
    }
    if (s->step == kill_at_step) {
        kill(getpid(), SIGKILL);  // mid-chunk: after some steps, before the commit
    }
}

// No file of the state folder is plaintext model data: none parses as an llm.c checkpoint
// (magic 20240326 first), none holds any 64-byte run of the parameters (params: may be NULL).
static void assert_no_plaintext_model(const char *sd, const gt_buf *params)
{
    DIR *d = opendir(sd);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char p[1200];
        GT_ASSERT_OK(gt_path_join(p, sizeof p, sd, e->d_name));
        gt_buf b = {0};
        GT_ASSERT_OK(gt_file_read_all(p, 256u << 20, &b));
        files++;
        if (b.len >= 4) {
            uint32_t magic = (uint32_t)b.data[0] | (uint32_t)b.data[1] << 8 |
                             (uint32_t)b.data[2] << 16 | (uint32_t)b.data[3] << 24;
            if (magic == GT_SCKPT_LLMC_MAGIC) {
                fail_msg("%s is a plaintext llm.c checkpoint", p);
            }
        }
        for (size_t at = 0; params != NULL && at + 64 <= params->len; at += 4096) {
            if (memmem(b.data, b.len, params->data + at, 64) != NULL) {
                fail_msg("%s holds the parameters' bytes at %zu", p, at);
            }
        }
        gt_buf_free(&b);
    }
    closedir(d);
    assert_true(files >= 2);  // the journal and the sealed resume state at least
}

// Trains 100 steps in state dir `name`, killed at step kill (0: never) and resumed; returns the
// losses of the steps the last process trained, the journal, and - on cpu, where the resume key
// is the trainer's own (state_dir/resume.key) - the final resume state opened: params | m | v.
static void run_trainer(const char *name, uint32_t kill, const char *devd_socket,
                        float losses[101], gt_buf *state_body, gt_buf *journal)
{
    fresh_ledgers();
    gt_tc_holder runs[GT_TC_MAX_HOLDERS];
    int ports[GT_TC_MAX_HOLDERS];
    gt_tc_listen(&F, runs, ports);
    gt_tc_terms terms = {.steps = 100};
    gt_agreement a;
    gt_tc_agreement(&F, &a, ports, &terms);
    // Holders in child processes: the trainer forked below must come from a process with no
    // other thread (a fork while a holder thread holds a lock - malloc's, OpenSSL's,
    // ASan's - can leave the child stuck).
    for (int h = 0; h < F.holders; h++) {
        gt_tc_serve_process(&F, &runs[h], h, &a, NULL);
    }
    char sd[600], path[700];
    state_dir(sd, sizeof sd, name);
    gt_tc_train_opts o = {.a = &a, .state_dir = sd, .devd_socket = devd_socket,
                          .transfer = GT_TRANSFER_CONVENTIONAL_KEYRELEASE,
                          .on_step = die_at_step};
    gt_collab_report rep;
    if (kill > 0) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            kill_at_step = kill;
            gt_err e = gt_tc_train(&o, &rep, NULL);
            _exit(gt_is_ok(e) ? 0 : 3);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        o.resume = true;
    }
    kill_at_step = 0;
    for (int i = 0; i <= 100; i++) {
        step_loss[i] = NAN;
    }
    GT_ASSERT_OK(gt_tc_train(&o, &rep, NULL));
    for (int h = 0; h < F.holders; h++) {
        gt_tc_stop(&runs[h], false);
    }
    assert_int_equal(rep.steps_done, 100);
    assert_int_equal(check_accounts(&rep), 4000);
    memcpy(losses, step_loss, sizeof step_loss);
    GT_ASSERT_OK(gt_path_join(path, sizeof path, sd, "model.bin"));
    assert_false(gt_path_exists(path));  // no plaintext weights: the device keeps them
    GT_ASSERT_OK(gt_path_join(path, sizeof path, sd, "journal"));
    GT_ASSERT_OK(gt_file_read_all(path, 1u << 20, journal));
    GT_ASSERT_OK(gt_path_join(path, sizeof path, sd, "resume.sealed"));
    gt_buf st = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 256u << 20, &st));
    if (devd_socket == NULL) {
        gt_resume_device rd;
        gt_resume_header h;
        GT_ASSERT_OK(gt_resume_device_load(sd, &rd));
        GT_ASSERT_OK(gt_resume_open(gt_buf_span(&st), rd.secret, rd.id, a.hash, &h,
                                    state_body));
        assert_int_equal(h.step, 100);
        assert_int_equal(h.label_count, (uint32_t)F.holders);  // every dataset trained on
        gt_secure_zero(&rd, sizeof rd);
        gt_buf params = {.data = state_body->data, .len = (size_t)h.params_bytes};
        assert_no_plaintext_model(sd, &params);
    } else {
        assert_no_plaintext_model(sd, NULL);
    }
    gt_buf_free_nowipe(&st);
}

// The resumed run trained the steps after its last commit: each of their losses is the
// uninterrupted run's, bit for bit.
static void assert_same_losses(const float *got, const float *want, uint32_t kill)
{
    int compared = 0;
    for (int s = 1; s <= 100; s++) {
        if (!isnan(got[s])) {
            assert_memory_equal(&got[s], &want[s], sizeof got[s]);
            compared++;
        }
    }
    assert_true(compared >= (int)(100 - kill));
}

static void killed_trainer_resumes_like_uninterrupted(void **state)
{
    (void)state;
    gt_buf s0 = {0}, j0 = {0}, s1 = {0}, j1 = {0}, s2 = {0}, j2 = {0};
    float l0[101], l1[101], l2[101];
    run_trainer("uninterrupted", 0, NULL, l0, &s0, &j0);
    // Killed at step 40: in the second chunk (h1's chunk 0); the resume state holds h0's
    // chunk 0.
    run_trainer("killed", 40, NULL, l1, &s1, &j1);
    // The same by travelling, killed at step 70 (in the third chunk, h0's chunk 1): devd loses
    // the trainer's session mid-training and the resumed trainer opens a new one. devd sealed
    // its resume state to itself: only the losses show it resumed exactly.
    char sock[600];
    pid_t devd = gt_test_devd_start(sock, sizeof sock, F.dir, NULL);
    run_trainer("killed-travel", 70, sock, l2, &s2, &j2);
    gt_test_devd_stop(devd);
    print_message("journal of the uninterrupted run:\n%.*s", (int)j0.len, (const char *)j0.data);
    // The same (step, holder, chunk, tokens) sequence, the same losses after the resume, and
    // (cpu) the same final params, m and v bit for bit.
    assert_int_equal(j1.len, j0.len);
    assert_memory_equal(j1.data, j0.data, j0.len);
    assert_int_equal(j2.len, j0.len);
    assert_memory_equal(j2.data, j0.data, j0.len);
    assert_same_losses(l1, l0, 40);
    assert_same_losses(l2, l0, 70);
    assert_int_equal(s1.len, s0.len);
    assert_true(memcmp(s1.data, s0.data, s0.len) == 0);
    // The sim run trained the same model: its weights' bytes are in none of its files either.
    char sd2[600];
    GT_ASSERT_OK(gt_path_join(sd2, sizeof sd2, F.dir, "killed-travel"));
    gt_buf params0 = {.data = s0.data, .len = s0.len / 3};
    assert_no_plaintext_model(sd2, &params0);
    gt_buf_free(&s0);
    gt_buf_free_nowipe(&j0);
    gt_buf_free(&s1);
    gt_buf_free_nowipe(&j1);
    gt_buf_free(&s2);
    gt_buf_free_nowipe(&j2);
}

// ---- no plaintext outside devd ----------------------------------------------------------------
// What this shows: after training by travelling on datasets that carry a canary every 200
// tokens, the canary - as u16 little-endian tokens and as text - is in no file that the trainer,
// the holders or devd wrote (state folder: checkpoint, journal; ledgers; devd's log; the sim
// root), in no file of /dev/shm, and in no memfd still open in devd or in this process (the
// bounce slots); also not as the int32 inputs/targets the loader gathers on the device (launch
// outputs are the trainer's by design, docs/device-sim.md: the trainer computes on the data, it
// must not store it). And the trainer cannot read a travelled buffer back. What it cannot show:
// process memory (devd's arena legitimately holds the plaintext; the holder and trainer
// processes are not scanned), swap, or what the kernel's socket buffers held.

typedef struct {
    uint8_t u16[2 * CANARY_LEN];
    uint8_t i32[4 * CANARY_LEN];
    int files;
    char hit[600];
} scan;
static scan S;

static void scan_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return;  // not ours to read
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
        close(fd);
        return;
    }
    uint8_t *b = malloc((size_t)st.st_size + 1);
    assert_non_null(b);
    size_t len = 0;
    ssize_t n;
    while (len < (size_t)st.st_size && (n = pread(fd, b + len, (size_t)st.st_size - len,
                                                    (off_t)len)) > 0) {
        len += (size_t)n;
    }
    close(fd);
    S.files++;
    for (size_t i = 0; i < len && S.hit[0] == '\0'; i++) {
        if ((i + sizeof S.u16 <= len && memcmp(b + i, S.u16, sizeof S.u16) == 0) ||
            (i + sizeof S.i32 <= len && memcmp(b + i, S.i32, sizeof S.i32) == 0) ||
            (i + CANARY_LEN <= len && memcmp(b + i, canary, CANARY_LEN) == 0)) {
            snprintf(S.hit, sizeof S.hit, "%s at byte %zu", path, i);
        }
    }
    free(b);
}

static int scan_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_F) {
        scan_file(path);
    }
    return 0;
}

// The memfd files (and anything under /dev/shm) a process still has open.
static void scan_memfds(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char fd_path[320], target[512];
        snprintf(fd_path, sizeof fd_path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(fd_path, target, sizeof target - 1);
        if (n <= 0) {
            continue;
        }
        target[n] = '\0';
        if (strncmp(target, "/memfd:", 7) == 0 || strncmp(target, "/dev/shm/", 9) == 0) {
            scan_file(fd_path);
        }
    }
    closedir(d);
}

static void no_plaintext_outside_devd(void **state)
{
    (void)state;
    for (size_t i = 0; i < CANARY_LEN; i++) {
        S.u16[2 * i] = (uint8_t)canary[i];
        S.u16[2 * i + 1] = 0;
        gt_store_u32le(S.i32 + 4 * i, (uint8_t)canary[i]);
    }
    fresh_ledgers();
    char sock[600], log[600], sd[600], trainer_log[600];
    GT_ASSERT_OK(gt_path_join(log, sizeof log, F.dir, "devd-canary.log"));
    GT_ASSERT_OK(gt_path_join(trainer_log, sizeof trainer_log, F.dir, "trainer-holders.log"));
    // This process's own log (trainer and holder threads) goes to a file that is scanned too.
    FILE *lf = fopen(trainer_log, "w");
    assert_non_null(lf);
    gt_log_level saved_level = gt_log_get_level();
    gt_log_set_stream(lf);
    gt_log_set_level(GT_LOG_DEBUG);
    pid_t devd = gt_test_devd_start_logged(sock, sizeof sock, F.dir, log);
    gt_tc_holder runs[GT_TC_MAX_HOLDERS];
    int ports[GT_TC_MAX_HOLDERS];
    gt_tc_listen(&F, runs, ports);
    gt_tc_terms terms = {.steps = 60};
    gt_agreement a;
    gt_tc_agreement(&F, &a, ports, &terms);
    for (int h = 0; h < F.holders; h++) {
        gt_tc_serve_thread(&F, &runs[h], h, &a, NULL);
    }
    state_dir(sd, sizeof sd, "canary");
    gt_tc_train_opts o = {.a = &a, .state_dir = sd, .devd_socket = sock};
    gt_collab_report rep;
    GT_ASSERT_OK(gt_tc_train(&o, &rep, NULL));
    assert_int_equal(rep.steps_done, 60);
    assert_int_equal(check_accounts(&rep), 2000);

    // One more trip by hand: the chunk is the trainer's buffer now, and it cannot read it.
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    gt_device_sim_options so = {.timeout_ms = 0};
    memcpy(so.agreement_hash, a.hash, sizeof so.agreement_hash);
    GT_ASSERT_OK(gt_device_open_sim(&dev, &dc, &so));
    gt_holder_conn *conn = NULL;
    gt_net_attestor toy = gt_tc_toy_trainer();
    uint8_t signing_pub[GT_ED25519_PUBLIC_BYTES], signing_sec[GT_ED25519_SECRET_BYTES];
    GT_ASSERT_OK(gt_ed25519_keypair(signing_pub, signing_sec));
    gt_secure_zero(signing_sec, sizeof signing_sec);  // nothing is sealed by hand here
    GT_ASSERT_OK(gt_holder_connect(&conn, &a, 0, &toy, "trainer", signing_pub));
    gt_dbuf buf = 0;
    uint64_t ntok = 0;
    GT_ASSERT_OK(gt_holder_travel(conn, 1, dev, sock, 10000, &buf, &ntok));
    assert_int_equal(ntok, 1000);
    uint8_t back[64];
    memset(back, 0xee, sizeof back);
    GT_ASSERT_CODE(gt_device_copy_out(dev, back, buf, 0, sizeof back), GT_E_POLICY);
    for (size_t i = 0; i < sizeof back; i++) {
        assert_int_equal(back[i], 0xee);  // not one byte came back
    }
    scan_memfds(getpid());  // while the session (and its bounce slots) is open
    scan_memfds(devd);
    GT_ASSERT_OK(gt_device_free(dev, buf));
    gt_holder_disconnect(conn);
    gt_device_close(dev);
    for (int h = 0; h < F.holders; h++) {
        gt_tc_stop(&runs[h], false);
    }
    gt_test_devd_stop(devd);
    gt_log_set_stream(stderr);
    gt_log_set_level(saved_level);
    fclose(lf);

    // Every file under the test folder (state folders of every test so far, ledgers, logs, key
    // folders, sealed datasets, the sim root) and under /dev/shm.
    nftw(F.dir, scan_one, 16, FTW_PHYS);
    nftw("/dev/shm", scan_one, 16, FTW_PHYS);
    print_message("canary: %d files scanned, %s\n", S.files, S.hit[0] ? S.hit : "not found");
    assert_true(S.files > 10);
    if (S.hit[0] != '\0') {
        fail_msg("plaintext canary found: %s", S.hit);
    }
    // The scan can see plaintext: a file that holds it in any of the three forms is found.
    char probe[600];
    GT_ASSERT_OK(gt_path_join(probe, sizeof probe, F.dir, "probe"));
    const gt_span forms[] = {{S.u16, sizeof S.u16}, {S.i32, sizeof S.i32},
                             {(const uint8_t *)canary, CANARY_LEN}};
    for (size_t i = 0; i < 3; i++) {
        S.hit[0] = '\0';
        GT_ASSERT_OK(gt_file_write_atomic(probe, forms[i].data, forms[i].len, 0600));
        scan_file(probe);
        assert_true(S.hit[0] != '\0');
    }
    unlink(probe);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attested_attacks_are_refused_on_both_sides),
        cmocka_unit_test(rejected_device_is_never_loaded),
        cmocka_unit_test(killed_holder_mid_trip),
        cmocka_unit_test(devd_killed_mid_trip),
        cmocka_unit_test(killed_trainer_resumes_like_uninterrupted),
        cmocka_unit_test(no_plaintext_outside_devd),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
