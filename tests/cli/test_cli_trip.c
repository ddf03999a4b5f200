// `gputravel train --agreement A --device cpu --transfer insecure-host-trip` end to end against two real
// `gputravel holder` processes, no devd: the trainer serves each trip itself, every holder
// decrypts its chunk in its own process and hands it over in host memory (a sealed memfd over
// the trip socket). Checks: the same model, bit for bit, as --transfer conventional-keyrelease
// under the same agreement; the trainer's token accounting equals the holders' ledgers; every
// ledger verifies; a holder killed while its chunk is in use stops training with a clear error
// and no use is counted; the sealed checkpoint a run leaves opens with a recipient's key and
// its ledger (the signer is the trainer that holder served), and not with the ledger of another
// run. (The cpu device protects nothing: this shows protocol and accounting.)
#include "testlib.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>
#include <gputravel/train.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOLDERS 2
#define STEPS 40

static char dir[256], simroot[600], policy[600], rootpem[600], agreement[600];
static char agreement_m[600];  // the same with a device measurement no trainer has
static char ds[HOLDERS][600], keydir[HOLDERS][600];
static char key_hex[HOLDERS][65];
static gt_proc holders[HOLDERS];  // gputravel holder processes

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(simroot, sizeof simroot, dir, "simroot"));
    GT_ASSERT_OK(gt_path_join(policy, sizeof policy, dir, "policy.json"));
    GT_ASSERT_OK(gt_path_join(rootpem, sizeof rootpem, simroot, "root-pub.pem"));
    GT_ASSERT_OK(gt_path_join(agreement, sizeof agreement, dir, "agreement.json"));
    setenv("GT_SIM_ROOT", simroot, 1);  // holders, trainer and its trip identity share it
    GT_ASSERT_OK(gt_sim_root_set(simroot));  // and this process
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, NULL, 0, simroot, true));
    gt_pkey_free(root);
    GT_ASSERT_OK(gt_file_write_atomic(policy, "{\"allow_simulation\":true}", 25, 0644));
    char holders_json[2048] = "";
    for (int h = 0; h < HOLDERS; h++) {
        char name[32], shard[600];
        snprintf(name, sizeof name, "keys%d", h);
        GT_ASSERT_OK(gt_path_join(keydir[h], sizeof keydir[h], dir, name));
        snprintf(name, sizeof name, "ds%d", h);
        GT_ASSERT_OK(gt_path_join(ds[h], sizeof ds[h], dir, name));
        snprintf(name, sizeof name, "in%d.bin", h);
        GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, name));
        uint16_t tokens[2000];
        uint64_t rng = 7 + (uint64_t)h;
        for (int i = 0; i < 2000; i++) {
            tokens[i] = (uint16_t)(gt_rng_u32(&rng) % 200);
        }
        GT_ASSERT_OK(gt_shard_write(shard, tokens, 2000));
        gt_holder_keys keys;
        GT_ASSERT_OK(gt_keydir_generate(keydir[h], false, &keys));
        const char *shards[] = {shard};
        gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = ds[h],
                             .chunk_size = 400, .vocab_size = 256};
        gt_seal_result res;
        GT_ASSERT_OK(gt_seal(&sp, &keys, &res));
        int port = gt_test_free_port();
        char id_hex[33], rk_hex[65];
        uint8_t rk[GT_X25519_BYTES];
        GT_ASSERT_OK(gt_recipient_pub_load(keydir[h], rk));
        gt_hex_encode(rk_hex, sizeof rk_hex, rk, sizeof rk);
        gt_hex_encode(key_hex[h], sizeof key_hex[h], keys.holder_pub, 32);
        gt_hex_encode(id_hex, sizeof id_hex, res.dataset_id, 16);
        size_t used = strlen(holders_json);
        snprintf(holders_json + used, sizeof holders_json - used,
                 "%s{\"name\":\"h%d\",\"identity_key\":\"%s\",\"endpoint\":\"127.0.0.1:%d\","
                 "\"dataset_id\":\"%s\",\"token_budget\":100000,\"max_uses_per_chunk\":1,"
                 "\"recipient_key\":\"%s\"}",
                 h ? "," : "", h, key_hex[h], port, id_hex, rk_hex);
        gt_holder_keys_wipe(&keys);
    }
    char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"trip\",\"model\":{\"layers\":1,\"channels\":16,\"heads\":2,"
             "\"vocab\":256,\"max_seq\":8,\"init_seed\":3},\"training\":{\"steps\":%d,\"batch\":2,"
             "\"seq\":8,\"learning_rate\":0.01},\"holders\":[%s],\"trainer\":{},\"device\":{},"
             "\"allow_simulation\":true,\"transfer\":[\"travel\",\"conventional-keyrelease\","
             "\"insecure-host-trip\"],\"output\":{\"kind\":\"sealed_checkpoint\","
             "\"recipients\":[\"h0\",\"h1\"]}}",
             STEPS, holders_json);
    GT_ASSERT_OK(gt_file_write_atomic(agreement, doc, strlen(doc), 0644));
    char *dev = strstr(doc, "\"device\":{}");
    assert_non_null(dev);
    char doc_m[4300];
    char aa[97];
    memset(aa, 'a', 96);
    aa[96] = '\0';
    snprintf(doc_m, sizeof doc_m, "%.*s\"device\":{\"accepted_measurements\":[\"%s\"]}%s",
             (int)(dev - doc), doc, aa, dev + strlen("\"device\":{}"));
    GT_ASSERT_OK(gt_path_join(agreement_m, sizeof agreement_m, dir, "agreement-m.json"));
    GT_ASSERT_OK(gt_file_write_atomic(agreement_m, doc_m, strlen(doc_m), 0644));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

static void ledger_path(char *out, size_t cap, const char *run, int h)
{
    char name[64];
    snprintf(name, sizeof name, "ledger-%s-%d", run, h);
    GT_ASSERT_OK(gt_path_join(out, cap, dir, name));
}

static void holders_start_under(const char *run, const char *agreement_path)
{
    for (int h = 0; h < HOLDERS; h++) {
        char ledger[700], log[700], name[64];
        ledger_path(ledger, sizeof ledger, run, h);
        snprintf(name, sizeof name, "holder-%s-%d.log", run, h);
        GT_ASSERT_OK(gt_path_join(log, sizeof log, dir, name));
        const char *args[] = {"--dataset", ds[h], "--key", keydir[h], "--agreement",
                              agreement_path, "--ledger", ledger, "--policy", policy,
                              "--sim-root", simroot, "--root", rootpem, NULL};
        gt_test_holder_start(&holders[h], log, args);
    }
}

static void holders_start(const char *run)
{
    holders_start_under(run, agreement);
}

static void holders_stop(void)
{
    for (int h = 0; h < HOLDERS; h++) {
        char what[32];
        snprintf(what, sizeof what, "holder h%d", h);
        gt_test_holder_stop(&holders[h], what);
    }
}

typedef struct {
    uint64_t grants, travels, host_trips, uses, use_tokens;
    uint64_t devices[3];  // grants naming device "host", "cuda", "devd"
} tally_t;

static void tally(void *ctx, const char *kind, const cJSON *detail)
{
    tally_t *t = ctx;
    const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "mode"));
    uint64_t tokens = 0;
    if (strcmp(kind, "grant") == 0) {
        t->grants++;
        t->travels += mode != NULL && strcmp(mode, "travel") == 0;
        t->host_trips += mode != NULL && strcmp(mode, "insecure-host-trip") == 0;
        const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "device"));
        const char *names[3] = {"host", "cuda", "devd"};
        for (int i = 0; i < 3; i++) {
            t->devices[i] += dev != NULL && strcmp(dev, names[i]) == 0;
        }
    } else if (strcmp(kind, "use") == 0 && gt_is_ok(gt_json_get_u64(detail, "tokens", &tokens))) {
        t->uses++;
        t->use_tokens += tokens;
    }
}

// The ledger verifies (gputravel ledger verify) and its entries are tallied.
static tally_t ledger_check(const char *run, int h)
{
    char ledger[700];
    ledger_path(ledger, sizeof ledger, run, h);
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", ledger, "--holder-key",
                                                     key_hex[h], NULL});
    if (rc != 0) {
        fail_msg("ledger %s: %s", ledger, (char *)out.data);
    }
    gt_buf_free(&out);
    uint8_t pub[32];
    size_t n = 0;
    GT_ASSERT_OK(gt_hex_decode(pub, sizeof pub, &n, key_hex[h]));
    tally_t t = {0};
    GT_ASSERT_OK(gt_ledger_replay(ledger, pub, tally, &t));
    return t;
}

// The checkpoint the run in state_dir sealed, opened with holder h's recipient key into
// out_path (removed after), its bytes in b.
static void opened_by(int h, const char *state_dir, const char *out_path, gt_buf *b)
{
    char sealed[800];
    GT_ASSERT_OK(gt_path_join(sealed, sizeof sealed, state_dir, "model.sealed"));
    gt_recipient_keys k;
    GT_ASSERT_OK(gt_keydir_recipient_load(keydir[h], &k));
    GT_ASSERT_OK(gt_sckpt_open(sealed, &k, NULL, out_path, NULL, NULL));
    gt_recipient_keys_wipe(&k);
    GT_ASSERT_OK(gt_file_read_all(out_path, 64 << 20, b));
    unlink(out_path);
}

// Runs the trainer CLI; returns its output (caller frees).
static void train_cli_on(gt_buf *out, const char *device, const char *transfer,
                         const char *state_dir)
{
    int rc = -1;
    for (int tries = 0; tries < 20; tries++) {
        gt_buf_free(out);
        rc = gt_test_run_cli(out, (const char *[]){
            "train", "--agreement", agreement, "--state", state_dir, "--device", device,
            "--transfer", transfer, "--threads", "1", "--plot", "none", "--sim-root", simroot,
            "--policy", policy, "--root", rootpem, "--json", NULL});
        if (rc == 0 || strstr((char *)out->data, "onnect") == NULL) {
            break;  // only "cannot connect" (a holder not listening yet) is retried
        }
        usleep(200000);
    }
    if (rc != 0) {
        fail_msg("train --transfer %s: rc %d\n%s", transfer, rc, (char *)out->data);
    }
    // --json: the summary as one object on the last line, saying what the table says
    const char *last = strstr((char *)out->data, "{\"steps_done\":");
    assert_non_null(last);
    cJSON *j = cJSON_Parse(last);
    assert_non_null(j);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "steps_done")) > 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "holders")), HOLDERS);
    // which limit ended the run, in both: the table's "stopped:" line is the JSON's message
    const char *stop = cJSON_GetStringValue(cJSON_GetObjectItem(j, "stop"));
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(j, "stop_message"));
    assert_non_null(stop);
    assert_non_null(why);
    assert_true(strcmp(stop, "steps") == 0 || strcmp(stop, "no-chunks") == 0);
    char line[1100];
    snprintf(line, sizeof line, "\nstopped: %s\n", why);
    assert_non_null(strstr((char *)out->data, line));
    cJSON *h0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "holders"), 0);
    assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(h0, "skipped")), 0);
    assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(h0, "left")));
    cJSON_Delete(j);
}

static void train_cli(gt_buf *out, const char *transfer, const char *state_dir)
{
    train_cli_on(out, "cpu", transfer, state_dir);
}

static int losses(const char *out, float *l, int cap)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, "step ")) != NULL; p++) {
        int s = 0, m = 0;
        float x = 0.0f;
        if ((p == out || p[-1] == '\n') && sscanf(p, "step %d/%d | loss %f |", &s, &m, &x) == 3 &&
            n < cap) {
            l[n++] = x;
        }
    }
    return n;
}

// The trainer's "tokens used" column for holder h.
static uint64_t tokens_used(const char *out, int h)
{
    char name[24];
    snprintf(name, sizeof name, "\nh%d ", h);
    const char *p = strstr(out, name);
    assert_non_null(p);
    char who[16];
    unsigned long long used = 0;
    assert_int_equal(sscanf(p + 1, "%15s %llu", who, &used), 2);
    return used;
}

static void travel_matches_keyrelease(void **state)
{
    (void)state;
    char s_travel[700], s_conv[700];
    GT_ASSERT_OK(gt_path_join(s_travel, sizeof s_travel, dir, "state-travel"));
    GT_ASSERT_OK(gt_path_join(s_conv, sizeof s_conv, dir, "state-conv"));
    gt_buf travel = {0}, conv = {0};
    holders_start("travel");
    train_cli(&travel, "insecure-host-trip", s_travel);
    holders_stop();
    const char *tout = (const char *)travel.data;
    assert_non_null(strstr(tout, "this trainer serves each trip"));
    assert_non_null(strstr(tout, "no confidentiality"));
    uint64_t total = 0;
    for (int h = 0; h < HOLDERS; h++) {
        tally_t t = ledger_check("travel", h);
        assert_true(t.grants > 0);
        // every release was a trip in the trainer's host memory, and the ledger says so
        assert_int_equal(t.host_trips, t.grants);
        assert_int_equal(t.devices[0], t.grants);
        assert_int_equal(t.travels, 0);
        assert_int_equal(t.uses, t.grants);     // and every trip a committed use
        assert_int_equal(t.use_tokens, tokens_used(tout, h));
        total += t.use_tokens;
    }
    assert_true(total >= STEPS * 16);  // every step's tokens were released and counted

    // The same holders again (their ledgers count every use): the first chunk is refused on the
    // channel, and the trainer stops waiting for the trip at once and prints the reason.
    holders_start("travel");
    char s_again[700];
    GT_ASSERT_OK(gt_path_join(s_again, sizeof s_again, dir, "state-again"));
    gt_buf again = {0};
    double t0 = gt_now_seconds();
    int rc = 0;
    for (int tries = 0; tries < 20; tries++) {
        gt_buf_free(&again);
        rc = gt_test_run_cli(&again, (const char *[]){
            "train", "--agreement", agreement, "--state", s_again, "--device", "cpu",
            "--transfer", "insecure-host-trip", "--plot", "none", "--sim-root", simroot, "--policy", policy,
            "--root", rootpem, NULL});
        if (strstr((char *)again.data, "onnect") == NULL) {
            break;
        }
        usleep(200000);
    }
    holders_stop();
    assert_int_not_equal(rc, 0);
    if (strstr((char *)again.data, "refused: chunk") == NULL ||
        strstr((char *)again.data, "already used") == NULL) {
        fail_msg("%s", (char *)again.data);
    }
    assert_true(gt_now_seconds() - t0 < 20.0);  // not the 60 s lease
    gt_buf_free(&again);

    holders_start("conv");
    train_cli(&conv, "conventional-keyrelease", s_conv);
    holders_stop();
    // the trainer's table (tokens, bytes, transfer seconds) of both runs, for the record
    for (int h = 0; h < HOLDERS; h++) {
        char name[24];
        snprintf(name, sizeof name, "\nh%d ", h);
        const char *a = strstr(tout, name), *b = strstr((const char *)conv.data, name);
        printf("travel  : %.*s\nkeyrel. : %.*s\n", (int)strcspn(a + 1, "\n"), a + 1,
               (int)strcspn(b + 1, "\n"), b + 1);
    }
    float lt[STEPS + 1], lc[STEPS + 1];
    assert_int_equal(losses(tout, lt, STEPS + 1), STEPS);
    assert_int_equal(losses((const char *)conv.data, lc, STEPS + 1), STEPS);
    assert_memory_equal(lt, lc, sizeof(float) * STEPS);
    for (int h = 0; h < HOLDERS; h++) {
        tally_t t = ledger_check("conv", h);
        assert_int_equal(t.use_tokens, tokens_used((const char *)conv.data, h));
        assert_int_equal(t.use_tokens, tokens_used(tout, h));
    }
    // the same weights, bit for bit: neither state folder holds them in plaintext; the sealed
    // checkpoints, opened by h0, do
    char mt[800], mc[800];
    GT_ASSERT_OK(gt_path_join(mt, sizeof mt, s_travel, "model.bin"));
    GT_ASSERT_OK(gt_path_join(mc, sizeof mc, s_conv, "model.bin"));
    assert_false(gt_path_exists(mt));
    assert_false(gt_path_exists(mc));
    gt_buf bt = {0}, bc = {0};
    opened_by(0, s_travel, mt, &bt);
    opened_by(0, s_conv, mc, &bc);
    assert_int_equal(bt.len, bc.len);
    assert_memory_equal(bt.data, bc.data, bt.len);
    gt_buf_free(&bt);

    // Who sealed it: each run sealed its final weights for h0 and h1, signed by that run's own
    // signing key. h1 opens the conventional run's file with its key folder and its ledger of
    // that run: the signer is the trainer h1 served (and appraised) then. Its ledger of the
    // travel run records another trainer process, so it does not vouch for this file.
    assert_non_null(strstr((const char *)conv.data, "signed it with this run's signing key"));
    char sealed[800], opened[800], l_conv[700], l_travel[700], l_h0[700];
    GT_ASSERT_OK(gt_path_join(sealed, sizeof sealed, s_conv, "model.sealed"));
    GT_ASSERT_OK(gt_path_join(opened, sizeof opened, dir, "opened-by-h1.bin"));
    ledger_path(l_conv, sizeof l_conv, "conv", 1);
    ledger_path(l_travel, sizeof l_travel, "travel", 1);
    ledger_path(l_h0, sizeof l_h0, "conv", 0);
    gt_buf o = {0};
    int orc = gt_test_run_cli(&o, (const char *[]){"open-checkpoint", sealed, "--key", keydir[1],
                                                    "--out", opened, "--agreement", agreement,
                                                    "--ledger", l_travel, NULL});
    if (orc != 1 || strstr((char *)o.data, "is not a trainer this holder served") == NULL ||
        gt_path_exists(opened)) {
        fail_msg("opened with another run's ledger (%d):\n%s", orc, (char *)o.data);
    }
    gt_buf_free(&o);
    orc = gt_test_run_cli(&o, (const char *[]){"open-checkpoint", sealed, "--key", keydir[1],
                                                "--out", opened, "--ledger", l_h0, NULL});
    if (orc != 1 || strstr((char *)o.data, "is not this holder's ledger") == NULL) {
        fail_msg("opened with h0's ledger (%d):\n%s", orc, (char *)o.data);
    }
    gt_buf_free(&o);
    orc = gt_test_run_cli(&o, (const char *[]){"open-checkpoint", sealed, "--key", keydir[1],
                                                "--out", opened, "--agreement", agreement,
                                                "--ledger", l_conv, NULL});
    if (orc != 0 || strstr((char *)o.data, "this holder served (ledger") == NULL ||
        strstr((char *)o.data, "appraised: sim measurement") == NULL) {
        fail_msg("h1 could not open the conventional run's checkpoint (%d):\n%s", orc,
                 (char *)o.data);
    }
    gt_buf_free(&o);
    gt_buf bo = {0};  // h1 opened the weights h0 did, byte for byte
    GT_ASSERT_OK(gt_file_read_all(opened, 64 << 20, &bo));
    assert_int_equal(bo.len, bc.len);
    assert_memory_equal(bo.data, bc.data, bc.len);
    gt_buf_free(&bo);
    gt_buf_free(&bc);
    gt_buf_free(&travel);
    gt_buf_free(&conv);
}

// The agreement accepts one device measurement, not this trainer's trip device: each holder
// attaches, checks it, refuses before any release decision, and the trainer prints why.
static void trip_device_measurement_refused(void **state)
{
    (void)state;
    holders_start_under("measure", agreement_m);
    char s_m[700];
    GT_ASSERT_OK(gt_path_join(s_m, sizeof s_m, dir, "state-measure"));
    gt_buf out = {0};
    int rc = 0;
    for (int tries = 0; tries < 20; tries++) {
        gt_buf_free(&out);
        rc = gt_test_run_cli(&out, (const char *[]){
            "train", "--agreement", agreement_m, "--state", s_m, "--device", "cpu",
            "--transfer", "insecure-host-trip", "--plot", "none", "--sim-root", simroot, "--policy", policy,
            "--root", rootpem, NULL});
        if (strstr((char *)out.data, "onnect") == NULL) {
            break;
        }
        usleep(200000);
    }
    holders_stop();
    assert_int_not_equal(rc, 0);
    if (strstr((char *)out.data, "is not one the agreement accepts") == NULL) {
        fail_msg("%s", (char *)out.data);
    }
    gt_buf_free(&out);
    for (int h = 0; h < HOLDERS; h++) {
        tally_t t = ledger_check("measure", h);
        assert_int_equal(t.grants, 0);  // nothing released
    }
}

// ---- a holder killed while its chunk is in use (the library, so the kill lands mid-trip) ----

static int kill_holder = -1;

static void kill_on_step(void *ctx, const gt_collab_step *s)
{
    (void)ctx;
    if (kill_holder < 0 && s->holder == 1 && holders[1].pid > 0) {
        kill_holder = 1;
        kill(holders[1].pid, SIGKILL);
        int status = 0;
        waitpid(holders[1].pid, &status, 0);  // gone (its trip socket closed) before the next step
        holders[1] = (gt_proc){0};
    }
}

static void killed_holder_voids_the_trip(void **state)
{
    (void)state;
    holders_start("kill");
    gt_agreement a;
    GT_ASSERT_OK(gt_agreement_load(&a, agreement));
    gt_policy *pol = NULL;
    GT_ASSERT_OK(gt_policy_load_file(&pol, policy));
    gt_buf root_pub = {0};
    GT_ASSERT_OK(gt_file_read_all(rootpem, 1 << 16, &root_pub));
    gt_attest_file rf = {rootpem, gt_buf_span(&root_pub)};
    gt_tee_attestor att = {.collect = {.type = GT_TEE_SIM, .sim_root = simroot}, .policy = pol,
                           .roots = &rf, .root_count = 1, .agreement = &a,
                           .peer_role = GT_PEER_HOLDER};
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&dev, &dc));
    char state_dir[700], sock[800];
    GT_ASSERT_OK(gt_path_join(state_dir, sizeof state_dir, dir, "state-kill"));
    GT_ASSERT_OK(gt_mkdir_p(state_dir, 0700));
    GT_ASSERT_OK(gt_path_join(sock, sizeof sock, state_dir, "trip.sock"));
    gt_collab_config cfg = {.agreement = &a, .dev = dev,
                            .transfer = GT_TRANSFER_INSECURE_HOST_TRIP,
                            .attestor = gt_tee_attestor_bind(&att), .trainer_name = "trainer",
                            .state_dir = state_dir, .device_address = sock,
                            .on_step = kill_on_step};
    gt_collab_report rep;
    gt_err e = GT_OK;
    for (int tries = 0; tries < 20; tries++) {
        e = gt_collab_train(&cfg, &rep);
        if (kill_holder >= 0 || strstr(e.msg, "onnect") == NULL) {
            break;
        }
        usleep(200000);
    }
    assert_int_equal(kill_holder, 1);
    GT_ASSERT_CODE(e, GT_E_PEER);
    assert_non_null(strstr(e.msg, "went away while its chunk was in use"));
    assert_non_null(strstr(e.msg, "no use is counted"));
    holders_stop();
    // The killed holder's ledger verifies; its last grant has no use; the trainer's journal
    // counts exactly the uses the holders' ledgers confirm.
    tally_t t1 = ledger_check("kill", 1);
    assert_int_equal(t1.grants, t1.uses + 1);
    tally_t t0 = ledger_check("kill", 0);
    assert_int_equal(t0.grants, t0.uses);
    gt_device_close(dev);
    gt_buf_free_nowipe(&root_pub);
    gt_policy_free(pol);

}

// With a GPU (a build with CUDA on a machine that has one; scripts/gpu_check.sh): the same
// agreement trained with --device cuda --transfer travel: each holder decrypts its chunk on its
// own GPU context and hands it over by CUDA IPC. Accounting equals the ledgers; the losses
// follow the cpu run's (another backend: close, not bit-identical).
static void cuda_travel(void **state)
{
    (void)state;
    gt_device *probe = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CUDA};
    gt_err e = gt_device_open(&probe, &dc);
    if (!gt_is_ok(e)) {
        printf("no usable cuda device (%s): skipped\n", e.msg);
        skip();
    }
    gt_device_close(probe);
    char s_cuda[700], s_cpu[700];
    GT_ASSERT_OK(gt_path_join(s_cuda, sizeof s_cuda, dir, "state-cuda"));
    GT_ASSERT_OK(gt_path_join(s_cpu, sizeof s_cpu, dir, "state-cpu-ref"));
    gt_buf cuda = {0}, ref = {0};
    double t0 = gt_now_seconds();
    holders_start("cuda");
    train_cli_on(&cuda, "cuda", "travel", s_cuda);
    holders_stop();
    double secs = gt_now_seconds() - t0;
    holders_start("cpuref");
    train_cli(&ref, "conventional-keyrelease", s_cpu);
    holders_stop();
    const char *out = (const char *)cuda.data;
    assert_non_null(strstr(out, "this trainer serves each trip"));
    for (int h = 0; h < HOLDERS; h++) {
        tally_t t = ledger_check("cuda", h);
        assert_true(t.grants > 0);
        assert_int_equal(t.travels, t.grants);
        assert_int_equal(t.devices[1], t.grants);  // the ledger names the cuda trip
        assert_int_equal(t.uses, t.grants);
        assert_int_equal(t.use_tokens, tokens_used(out, h));
        assert_int_equal(t.use_tokens, tokens_used((const char *)ref.data, h));
    }
    float lg[STEPS + 1], lc[STEPS + 1];
    assert_int_equal(losses(out, lg, STEPS + 1), STEPS);
    assert_int_equal(losses((const char *)ref.data, lc, STEPS + 1), STEPS);
    float worst = 0.0f;
    for (int i = 0; i < STEPS; i++) {
        float d = lg[i] > lc[i] ? lg[i] - lc[i] : lc[i] - lg[i];
        worst = d > worst ? d : worst;
    }
    printf("cuda travel: %d steps, %.2f s with the holders' start; loss %.4f (cpu "
           "key-release %.4f), max |diff| over the steps %.2e\n", STEPS, secs,
           (double)lg[STEPS - 1], (double)lc[STEPS - 1], (double)worst);
    assert_true(worst < 0.05f);
    gt_buf_free(&cuda);
    gt_buf_free(&ref);
}

// A --transfer the agreement does not list, or travel asked of the cpu device (whose trip is in
// host memory), is refused before anyone is contacted: no holder runs here, and nothing, not even
// the state folder, is made.
static void transfer_refused_before_contact(void **state)
{
    (void)state;
    gt_buf file = {0};
    GT_ASSERT_OK(gt_file_read_all(agreement, 1 << 16, &file));
    char doc[8192];  // the file's bytes as a string (the buffer has no NUL)
    assert_true(file.len < sizeof doc);
    memcpy(doc, file.data, file.len);
    doc[file.len] = '\0';
    gt_buf_free_nowipe(&file);
    const char *host = ",\"insecure-host-trip\"";
    char *cut = strstr(doc, host);
    assert_non_null(cut);
    memmove(cut, cut + strlen(host), strlen(cut + strlen(host)) + 1);
    char nohost[700], st[700];
    GT_ASSERT_OK(gt_path_join(nohost, sizeof nohost, dir, "agreement-nohost.json"));
    GT_ASSERT_OK(gt_file_write_atomic(nohost, doc, strlen(doc), 0644));
    GT_ASSERT_OK(gt_path_join(st, sizeof st, dir, "state-refused"));
    struct { const char *agreement, *transfer, *says; } rows[] = {
        {agreement, "travel", "--transfer travel on a cpu device"},
        {agreement, "travel", "that is --transfer insecure-host-trip"},
        {nohost, "insecure-host-trip", "--transfer: transfer mode 'insecure-host-trip' is not in "
                                       "the agreement's transfer list (conventional-keyrelease, "
                                       "travel)"},
        {agreement, "conventional", "transfer mode 'conventional' is not in the agreement's "
                                    "transfer list (conventional-keyrelease, travel, "
                                    "insecure-host-trip)"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gt_buf out = {0};
        int rc = gt_test_run_cli(&out, (const char *[]){
            "train", "--agreement", rows[i].agreement, "--state", st, "--device", "cpu",
            "--transfer", rows[i].transfer, "--plot", "none", "--sim-root", simroot, "--policy",
            policy, "--root", rootpem, NULL});
        assert_int_not_equal(rc, 0);
        if (strstr((char *)out.data, rows[i].says) == NULL ||
            strstr((char *)out.data, "onnect") != NULL) {
            fail_msg("row %zu: expected '%s', got: %s", i, rows[i].says, (char *)out.data);
        }
        gt_buf_free(&out);
        assert_int_not_equal(access(st, F_OK), 0);  // nothing was started
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (getenv("GT_TRIP_CUDA_ONLY") != NULL) {  // scripts/gpu_check.sh: the cuda run alone
        gt_device *probe = NULL;
        gt_device_config dc = {.kind = GT_DEVICE_CUDA};
        gt_err e = gt_device_open(&probe, &dc);
        if (!gt_is_ok(e)) {
            printf("no usable cuda device: %s\n", e.msg);
            return 77;
        }
        gt_device_close(probe);
        const struct CMUnitTest only[] = {cmocka_unit_test(cuda_travel)};
        return cmocka_run_group_tests(only, setup, teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transfer_refused_before_contact),
        cmocka_unit_test(travel_matches_keyrelease),
        cmocka_unit_test(killed_holder_voids_the_trip),
        cmocka_unit_test(trip_device_measurement_refused),
        cmocka_unit_test(cuda_travel),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
