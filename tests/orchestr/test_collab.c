// orchestr/: collaborative training end to end on the cpu device with two holder agents; a
// trainer killed mid-training resumes without losing or double-using a chunk, and the token
// accounting of the trainer and of the holders' ledgers agree exactly.
#include "testlib.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef gt_test_toy toy;  // testlib.h

#define HOLDERS 2
static char dir[256];
static char ds[HOLDERS][512], ledgers[HOLDERS][512];
static gt_holder_keys keys[HOLDERS];
static uint8_t ds_id[HOLDERS][16];
static toy holder_toys[HOLDERS] = {{.name = "h0", .accept = "trainer"},
                                   {.name = "h1", .accept = "trainer"}};
static toy trainer_toy = {.name = "trainer", .accept = "h*"};  // either holder

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    for (int h = 0; h < HOLDERS; h++) {
        char shard[600], keydir[600], name[32];
        snprintf(name, sizeof name, "in%d.bin", h);
        GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, name));
        snprintf(name, sizeof name, "keys%d", h);
        GT_ASSERT_OK(gt_path_join(keydir, sizeof keydir, dir, name));
        snprintf(name, sizeof name, "ds%d", h);
        GT_ASSERT_OK(gt_path_join(ds[h], sizeof ds[h], dir, name));
        snprintf(name, sizeof name, "ledger%d", h);
        GT_ASSERT_OK(gt_path_join(ledgers[h], sizeof ledgers[h], dir, name));
        uint16_t tokens[4000];
        for (int i = 0; i < 4000; i++) {
            tokens[i] = (uint16_t)((i * (h + 3) + h) % 97);
        }
        GT_ASSERT_OK(gt_shard_write(shard, tokens, 4000));
        GT_ASSERT_OK(gt_keydir_generate(keydir, false, &keys[h]));
        const char *shards[] = {shard};
        // 4 chunks of 1000 tokens; B=2, T=16 gives 31 steps per chunk.
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = ds[h],
                            .chunk_size = 2000, .vocab_size = 256};
        gt_seal_result res;
        GT_ASSERT_OK(gt_seal(&p, &keys[h], &res));
        memcpy(ds_id[h], res.dataset_id, 16);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int h = 0; h < HOLDERS; h++) {
        gt_holder_keys_wipe(&keys[h]);
    }
    gt_test_rmtree(dir);
    return 0;
}

typedef struct {
    gt_holder_agent *agent;
    gt_listener *l;
    gt_ledger *ledger;
    pthread_t th;
    volatile int stop;
} holder_run;

static void *serve_main(void *p)
{
    holder_run *r = p;
    gt_err e = gt_holder_agent_serve(r->agent, r->l, &r->stop);
    return gt_is_ok(e) ? NULL : p;
}

static const char *agreement_extra = "";  // more top-level members of the next agreements

static void make_agreement(gt_agreement *a, const int ports[HOLDERS], uint32_t steps)
{
    char doc[4096], holders_json[2048] = "";
    for (int h = 0; h < HOLDERS; h++) {
        char key[65], id[33], one[512];
        gt_hex_encode(key, sizeof key, keys[h].holder_pub, 32);
        gt_hex_encode(id, sizeof id, ds_id[h], 16);
        snprintf(one, sizeof one,
                 "%s{\"name\":\"h%d\",\"identity_key\":\"%s\",\"endpoint\":\"127.0.0.1:%d\","
                 "\"dataset_id\":\"%s\",\"token_budget\":3000,\"max_uses_per_chunk\":1}",
                 h ? "," : "", h, key, ports[h], id);
        strcat(holders_json, one);
    }
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"collab\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":256,\"max_seq\":16,\"init_seed\":5},\"training\":{\"steps\":%u,"
             "\"batch\":2,\"seq\":16,\"learning_rate\":0.001},\"holders\":[%s],\"trainer\":{},"
             "\"device\":{},\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}%s}",
             steps, holders_json, agreement_extra);
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

// Listeners, agreement and agents, without their threads yet (a trainer forked from this
// process must not inherit a holder thread mid-lock).
static void open_holders(holder_run runs[HOLDERS], gt_agreement *a, uint32_t steps)
{
    int ports[HOLDERS];
    for (int h = 0; h < HOLDERS; h++) {
        GT_ASSERT_OK(gt_listener_open(&runs[h].l, "127.0.0.1:0"));
        ports[h] = gt_listener_port(runs[h].l);
    }
    make_agreement(a, ports, steps);
    for (int h = 0; h < HOLDERS; h++) {
        char name[8];
        snprintf(name, sizeof name, "h%d", h);
        GT_ASSERT_OK(gt_ledger_open(&runs[h].ledger, ledgers[h], keys[h].holder_sec));
        gt_holder_agent_config cfg = {
            .dataset_dir = ds[h], .keys = &keys[h], .agreement = a, .name = name,
            .ledger = runs[h].ledger, .ledger_path = ledgers[h],
            .attestor = gt_test_toy_attestor(&holder_toys[h]), .idle_timeout_ms = 10000,
        };
        GT_ASSERT_OK(gt_holder_agent_create(&runs[h].agent, &cfg));
    }
}

static void run_holders(holder_run runs[HOLDERS])
{
    for (int h = 0; h < HOLDERS; h++) {
        runs[h].stop = 0;
        pthread_create(&runs[h].th, NULL, serve_main, &runs[h]);
    }
}

static void start_holders(holder_run runs[HOLDERS], gt_agreement *a, uint32_t steps)
{
    open_holders(runs, a, steps);
    run_holders(runs);
}

static void stop_holders(holder_run runs[HOLDERS])
{
    for (int h = 0; h < HOLDERS; h++) {
        runs[h].stop = 1;
        pthread_join(runs[h].th, NULL);
        gt_holder_agent_free(runs[h].agent);
        gt_listener_close(runs[h].l);
        gt_ledger_close(runs[h].ledger);
    }
}

static uint32_t kill_at_step, kill_devd_at_step;
static pid_t devd_pid;

static float step_loss[64];  // the loss each step reported (NaN: the device kept it)

static void maybe_die(void *ctx, const gt_collab_step *s)
{
    (void)ctx;
    if (s->step >= 1 && s->step <= 64) {
        step_loss[s->step - 1] = s->loss;
    }
    if (s->step == kill_at_step) {
        kill(getpid(), SIGKILL);  // a crash mid-chunk: after some steps, before the commit
    }
    if (s->step == kill_devd_at_step && devd_pid > 0) {
        kill(devd_pid, SIGKILL);  // the device dies under the trainer
    }
}

static gt_err train_on(const gt_agreement *a, const char *state_dir, bool resume,
                       gt_collab_report *rep, const char *devd_socket)
{
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = devd_socket ? GT_DEVICE_SIM : GT_DEVICE_CPU, .threads = 1,
                           .socket_path = devd_socket};
    if (devd_socket != NULL) {
        gt_device_sim_options so = {.timeout_ms = 0};
        memcpy(so.agreement_hash, a->hash, sizeof so.agreement_hash);
        GT_TRY(gt_device_open_sim(&dev, &dc, &so));
    } else {
        GT_TRY(gt_device_open(&dev, &dc));
    }
    gt_collab_config cfg = {
        .agreement = a, .dev = dev, .device_address = devd_socket,
        .transfer = devd_socket ? GT_TRANSFER_TRAVEL : GT_TRANSFER_CONVENTIONAL_KEYRELEASE,
        .attestor = gt_test_toy_attestor(&trainer_toy), .trainer_name = "trainer",
        .state_dir = state_dir, .resume = resume, .on_step = maybe_die,
    };
    gt_err err = gt_collab_train(&cfg, rep);
    gt_device_close(dev);
    return err;
}

static gt_err train(const gt_agreement *a, const char *state_dir, bool resume,
                    gt_collab_report *rep)
{
    return train_on(a, state_dir, resume, rep, NULL);
}

// Sums the ledger's confirmed-use tokens and counts uses per chunk (fails on a double use).
typedef struct {
    uint64_t tokens;
    uint32_t uses[16];
    uint32_t grants;
    uint32_t travels;
} ledger_tally;
static void tally(void *ctx, const char *kind, const cJSON *detail)
{
    ledger_tally *t = ctx;
    uint64_t chunk = 0, tokens = 0;
    if (strcmp(kind, "grant") == 0) {
        t->grants++;
        const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "mode"));
        const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "device"));
        // a devd trip: the ledger names the mode and the device actually used
        t->travels += mode != NULL && strcmp(mode, "travel") == 0 && dev != NULL &&
                      strcmp(dev, "devd") == 0;
    }
    if (strcmp(kind, "use") == 0 && gt_is_ok(gt_json_get_u64(detail, "chunk", &chunk)) &&
        gt_is_ok(gt_json_get_u64(detail, "tokens", &tokens)) && chunk < 16) {
        t->uses[chunk]++;
        t->tokens += tokens;
    }
}

static void killed_trainer_resumes_exactly(void **state)
{
    (void)state;
    holder_run runs[HOLDERS];
    gt_agreement a;
    open_holders(runs, &a, 100);
    char state_dir[600];
    GT_ASSERT_OK(gt_path_join(state_dir, sizeof state_dir, dir, "trainer"));
    GT_ASSERT_OK(gt_mkdir_p(state_dir, 0700));

    // First run: killed at step 40, in the middle of its second chunk (31 steps each). Forked
    // before the holders' threads start; it connects once they serve.
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        kill_at_step = 40;
        gt_collab_report rep;
        gt_err e = train(&a, state_dir, false, &rep);
        _exit(gt_is_ok(e) ? 0 : 3);
    }
    run_holders(runs);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    // The state folder holds the device-sealed resume state, no plaintext weights. Tampered
    // with, or carried to another device (another folder: another resume key), it is refused
    // before anything is restored or any holder is contacted.
    kill_at_step = 0;
    gt_collab_report rep;
    char p[700], other[700], op[800];
    GT_ASSERT_OK(gt_path_join(p, sizeof p, state_dir, "model.bin"));
    assert_false(gt_path_exists(p));
    GT_ASSERT_OK(gt_path_join(p, sizeof p, state_dir, "resume.sealed"));
    gt_buf st = {0};
    GT_ASSERT_OK(gt_file_read_all(p, 64u << 20, &st));
    st.data[st.len / 2] ^= 0x04;
    GT_ASSERT_OK(gt_file_write_atomic(p, st.data, st.len, 0600));
    gt_err e = train(&a, state_dir, true, &rep);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "refused"));
    assert_non_null(strstr(e.msg, "does not authenticate"));
    st.data[st.len / 2] ^= 0x04;
    GT_ASSERT_OK(gt_file_write_atomic(p, st.data, st.len, 0600));
    GT_ASSERT_OK(gt_path_join(other, sizeof other, dir, "elsewhere"));
    GT_ASSERT_OK(gt_mkdir_p(other, 0700));
    GT_ASSERT_OK(gt_path_join(op, sizeof op, other, "resume.sealed"));
    GT_ASSERT_OK(gt_file_write_atomic(op, st.data, st.len, 0600));
    e = train(&a, other, true, &rep);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "sealed by another device"));
    gt_buf_free_nowipe(&st);

    // Resume: the sealed state holds 31 steps (chunk 0 of h0); chunk 0 of h1 was sent but its
    // use never confirmed, so the holder resends it once.
    GT_ASSERT_OK(train(&a, state_dir, true, &rep));
    // Budgets of 3000 tokens: three 1000-token chunks from each holder, 31 steps each.
    assert_int_equal(rep.steps_done, 100);
    stop_holders(runs);
    uint64_t trainer_tokens = 0;
    for (int h = 0; h < HOLDERS; h++) {
        ledger_tally t;
        memset(&t, 0, sizeof t);
        GT_ASSERT_OK(gt_ledger_replay(ledgers[h], keys[h].holder_pub, tally, &t));
        for (int c = 0; c < 16; c++) {
            assert_true(t.uses[c] <= 1);  // never a chunk used twice
        }
        assert_int_equal(t.tokens, rep.holders[h].tokens_used);  // the two accounts agree
        trainer_tokens += rep.holders[h].tokens_used;
        print_message("holder h%d: %u grants, %llu tokens used\n", h, t.grants,
                      (unsigned long long)t.tokens);
    }
    // 100 steps take four chunks (31 steps each, the last cut short), whatever the crash.
    assert_int_equal(trainer_tokens, 4000);
}

// The device travels to each holder: chunks arrive by lend / attach / load / return, training
// on them gives the same losses as fetching them conventionally onto the cpu device.
static void travelling_matches_conventional(void **state)
{
    (void)state;
    for (int h = 0; h < HOLDERS; h++) {
        unlink(ledgers[h]);
    }
    holder_run runs[HOLDERS];
    gt_agreement a;
    start_holders(runs, &a, 100);
    char sock[600], conv_dir[600], travel_dir[600];
    pid_t devd = gt_test_devd_start(sock, sizeof sock, dir, NULL);
    assert_true(devd > 0);
    GT_ASSERT_OK(gt_path_join(conv_dir, sizeof conv_dir, dir, "conv"));
    GT_ASSERT_OK(gt_path_join(travel_dir, sizeof travel_dir, dir, "travel"));
    GT_ASSERT_OK(gt_mkdir_p(conv_dir, 0700));
    GT_ASSERT_OK(gt_mkdir_p(travel_dir, 0700));
    kill_at_step = 0;
    gt_collab_report by_travel, by_conv;
    GT_ASSERT_OK(train_on(&a, travel_dir, false, &by_travel, sock));
    // Each holder made one attested devd session and kept it for all its trips: devd counts
    // the trainer's session, one per holder, and this one.
    gt_device *probe = NULL;
    gt_device_config pc = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    GT_ASSERT_OK(gt_device_open(&probe, &pc));
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(probe, &st));
    gt_device_close(probe);
    stop_holders(runs);
    uint32_t trips = 0;
    for (int h = 0; h < HOLDERS; h++) {
        ledger_tally t;
        memset(&t, 0, sizeof t);
        GT_ASSERT_OK(gt_ledger_replay(ledgers[h], keys[h].holder_pub, tally, &t));
        assert_int_equal(t.travels, t.grants);  // every release was a trip of the device
        assert_true(t.grants >= 2);
        trips += t.travels;
        unlink(ledgers[h]);
    }
    assert_int_equal(st.sessions, 1 + HOLDERS + 1);
    assert_true(trips > HOLDERS);
    start_holders(runs, &a, 100);
    GT_ASSERT_OK(train_on(&a, conv_dir, false, &by_conv, NULL));
    stop_holders(runs);
    gt_test_devd_stop(devd);
    assert_int_equal(by_travel.steps_done, 100);
    assert_int_equal(by_conv.steps_done, 100);
    // Same data, same order, same kernels: the same model (devd runs the cpu kernels).
    assert_true(by_travel.final_loss == by_conv.final_loss);
}

// devd killed during training: the trainer stops with a clear reason, nothing more is counted
// than what was committed, and every holder's ledger still verifies; resumed on a new devd, the
// run completes.
static void device_death_stops_training_cleanly(void **state)
{
    (void)state;
    for (int h = 0; h < HOLDERS; h++) {
        unlink(ledgers[h]);
    }
    holder_run runs[HOLDERS];
    gt_agreement a;
    start_holders(runs, &a, 100);
    char sock[600], state_dir[600];
    devd_pid = gt_test_devd_start(sock, sizeof sock, dir, NULL);
    assert_true(devd_pid > 0);
    GT_ASSERT_OK(gt_path_join(state_dir, sizeof state_dir, dir, "devd-death"));
    GT_ASSERT_OK(gt_mkdir_p(state_dir, 0700));
    kill_at_step = 0;
    kill_devd_at_step = 40;  // in the second chunk
    gt_collab_report rep;
    gt_err e = train_on(&a, state_dir, false, &rep, sock);
    kill_devd_at_step = 0;
    print_message("training stopped: %s\n", e.msg);
    assert_int_not_equal(e.code, GT_E_NONE);
    assert_true(strstr(e.msg, "devd") != NULL || strstr(e.msg, "device") != NULL ||
                e.code == GT_E_PEER);
    uint64_t used = 0;
    for (int h = 0; h < HOLDERS; h++) {
        ledger_tally t;
        memset(&t, 0, sizeof t);
        GT_ASSERT_OK(gt_ledger_replay(ledgers[h], keys[h].holder_pub, tally, &t));
        used += t.tokens;
    }
    assert_int_equal(used, 1000);  // only the first chunk's use was committed and confirmed
    // A new devd on the same socket; the same holder agents, whose kept sessions died with the
    // old one, attach afresh, and the resumed run completes with exact accounting.
    gt_test_devd_stop(devd_pid);
    unlink(sock);  // the killed devd's socket file: the new one's appears once it listens
    devd_pid = gt_test_devd_start(sock, sizeof sock, dir, NULL);
    assert_true(devd_pid > 0);
    GT_ASSERT_OK(train_on(&a, state_dir, true, &rep, sock));
    assert_int_equal(rep.steps_done, 100);
    stop_holders(runs);
    gt_test_devd_stop(devd_pid);
    devd_pid = 0;
    used = 0;
    uint64_t trained = 0;
    for (int h = 0; h < HOLDERS; h++) {
        ledger_tally t;
        memset(&t, 0, sizeof t);
        GT_ASSERT_OK(gt_ledger_replay(ledgers[h], keys[h].holder_pub, tally, &t));
        assert_int_equal(t.travels, t.grants);
        used += t.tokens;
        trained += rep.holders[h].tokens_used;
    }
    assert_int_equal(used, trained);
}

// What the trainer checks before it contacts anyone: the mode is listed, and it is what the
// device does (travel on a cpu device is the host trip; the host trip is the cpu device's only).
static void transfer_mode_checks(void **state)
{
    (void)state;
    gt_agreement *a = calloc(1, sizeof *a);
    assert_non_null(a);
    a->transfers = GT_TRANSFER_DEFAULT;
    GT_ASSERT_OK(gt_collab_transfer_check(a, GT_TRANSFER_TRAVEL, GT_DEVICE_SIM));
    GT_ASSERT_OK(gt_collab_transfer_check(a, GT_TRANSFER_TRAVEL, GT_DEVICE_CUDA));
    GT_ASSERT_OK(gt_collab_transfer_check(a, GT_TRANSFER_CONVENTIONAL_KEYRELEASE, GT_DEVICE_CPU));
    gt_err e = gt_collab_transfer_check(a, GT_TRANSFER_CONVENTIONAL, GT_DEVICE_CPU);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "'conventional' is not in the agreement's transfer list"));
    e = gt_collab_transfer_check(a, GT_TRANSFER_TRAVEL, GT_DEVICE_CPU);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "that is --transfer insecure-host-trip"));
    e = gt_collab_transfer_check(a, GT_TRANSFER_INSECURE_HOST_TRIP, GT_DEVICE_CPU);
    GT_ASSERT_CODE(e, GT_E_POLICY);  // not listed by default
    a->transfers |= GT_TRANSFER_BIT(GT_TRANSFER_INSECURE_HOST_TRIP);
    GT_ASSERT_OK(gt_collab_transfer_check(a, GT_TRANSFER_INSECURE_HOST_TRIP, GT_DEVICE_CPU));
    e = gt_collab_transfer_check(a, GT_TRANSFER_INSECURE_HOST_TRIP, GT_DEVICE_CUDA);
    GT_ASSERT_CODE(e, GT_E_ARG);
    assert_non_null(strstr(e.msg, "the cuda device travels with --transfer travel"));
    free(a);
}

// outputs.loss every 4: the device lets the mean loss out on steps 0, 4, 8, ... only (the
// budget is ceil(steps/4) releases), and the run still trains every step to the end.
static void loss_released_every_k_steps(void **state)
{
    (void)state;
    for (int h = 0; h < HOLDERS; h++) {
        unlink(ledgers[h]);
    }
    agreement_extra = ",\"outputs\":{\"loss\":{\"every\":4}}";
    holder_run runs[HOLDERS];
    gt_agreement a;
    start_holders(runs, &a, 10);
    agreement_extra = "";
    char sdir[600];
    GT_ASSERT_OK(gt_path_join(sdir, sizeof sdir, dir, "every4"));
    GT_ASSERT_OK(gt_mkdir_p(sdir, 0700));
    kill_at_step = 0;
    for (int i = 0; i < 64; i++) {
        step_loss[i] = -1.0f;
    }
    gt_collab_report rep;
    GT_ASSERT_OK(train(&a, sdir, false, &rep));
    stop_holders(runs);
    assert_int_equal(rep.steps_done, 10);
    for (int i = 0; i < 10; i++) {
        if (i % 4 == 0) {
            assert_true(isfinite(step_loss[i]) && step_loss[i] > 0.0f);
        } else {
            assert_true(isnan(step_loss[i]));
        }
    }
    assert_true(rep.final_loss == step_loss[8]);  // the last loss that left
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transfer_mode_checks),
        cmocka_unit_test(killed_trainer_resumes_exactly),
        cmocka_unit_test(travelling_matches_conventional),
        cmocka_unit_test(device_death_stops_training_cleanly),
        cmocka_unit_test(loss_released_every_k_steps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
