// Collaborative-training fixtures (collab_testlib.h).
#include "collab_testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint16_t default_token(void *ctx, int h, uint32_t i)
{
    (void)ctx;
    return (uint16_t)((i * (uint32_t)(h + 3) + (uint32_t)h) % 97);
}

void gt_tc_setup(gt_tc_fixture *f, int holders, uint32_t tokens, uint32_t chunk_tokens,
                 gt_tc_token_fn gen, void *gen_ctx)
{
    memset(f, 0, sizeof *f);
    assert_true(holders > 0 && holders <= GT_TC_MAX_HOLDERS);
    f->holders = holders;
    gt_test_tmpdir(f->dir, sizeof f->dir);
    GT_ASSERT_OK(gt_path_join(f->sim_root, sizeof f->sim_root, f->dir, "sim-root"));
    setenv("GT_SIM_ROOT", f->sim_root, 1);  // devd, holders and trainer share it
    GT_ASSERT_OK(gt_sim_root_set(f->sim_root));  // and this process
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, f->sim_root_pub, sizeof f->sim_root_pub, f->sim_root,
                                  true));
    gt_pkey_free(root);
    GT_ASSERT_OK(gt_file_read_all(f->sim_root_pub, 1 << 16, &f->sim_root_bytes));
    f->root = (gt_attest_file){f->sim_root_pub, gt_buf_span(&f->sim_root_bytes)};
    if (gen == NULL) {
        gen = default_token;
    }
    uint16_t *t = malloc((size_t)tokens * sizeof *t);
    assert_non_null(t);
    for (int h = 0; h < holders; h++) {
        char shard[600], keydir[600], name[32];
        snprintf(name, sizeof name, "in%d.bin", h);
        GT_ASSERT_OK(gt_path_join(shard, sizeof shard, f->dir, name));
        snprintf(name, sizeof name, "keys%d", h);
        GT_ASSERT_OK(gt_path_join(keydir, sizeof keydir, f->dir, name));
        snprintf(name, sizeof name, "ds%d", h);
        GT_ASSERT_OK(gt_path_join(f->ds[h], sizeof f->ds[h], f->dir, name));
        snprintf(name, sizeof name, "ledger%d", h);
        GT_ASSERT_OK(gt_path_join(f->ledgers[h], sizeof f->ledgers[h], f->dir, name));
        for (uint32_t i = 0; i < tokens; i++) {
            t[i] = gen(gen_ctx, h, i);
        }
        GT_ASSERT_OK(gt_shard_write(shard, t, tokens));
        GT_ASSERT_OK(gt_keydir_generate(keydir, false, &f->keys[h]));
        const char *shards[] = {shard};
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = f->ds[h],
                            .chunk_size = 2ull * chunk_tokens, .vocab_size = 256};
        gt_seal_result res;
        GT_ASSERT_OK(gt_seal(&p, &f->keys[h], &res));
        memcpy(f->ds_id[h], res.dataset_id, GT_DATASET_ID_BYTES);
        unlink(shard);  // only the sealed dataset stays
    }
    gt_secure_zero(t, (size_t)tokens * sizeof *t);
    free(t);
}

static gt_policy *sim_policy;

const gt_policy *gt_tc_sim_policy(void)
{
    if (sim_policy == NULL) {
        static const char doc[] = "{\"allow_simulation\":true}";
        GT_ASSERT_OK(gt_policy_parse(&sim_policy, doc, sizeof doc - 1));
    }
    return sim_policy;
}

void gt_tc_teardown(gt_tc_fixture *f)
{
    for (int h = 0; h < f->holders; h++) {
        gt_holder_keys_wipe(&f->keys[h]);
    }
    gt_buf_free_nowipe(&f->sim_root_bytes);
    gt_policy_free(sim_policy);
    sim_policy = NULL;
    gt_test_rmtree(f->dir);
}

void gt_tc_agreement(const gt_tc_fixture *f, gt_agreement *a, const int *ports,
                     const gt_tc_terms *t)
{
    char doc[8192], holders_json[4096] = "";
    for (int h = 0; h < f->holders; h++) {
        char key[65], id[33], one[600];
        gt_hex_encode(key, sizeof key, f->keys[h].holder_pub, 32);
        gt_hex_encode(id, sizeof id, f->ds_id[h], 16);
        snprintf(one, sizeof one,
                 "%s{\"name\":\"h%d\",\"identity_key\":\"%s\",\"endpoint\":\"127.0.0.1:%d\","
                 "\"dataset_id\":\"%s\",\"token_budget\":%llu,\"max_uses_per_chunk\":%u}",
                 h ? "," : "", h, key, ports[h], id,
                 (unsigned long long)(t->token_budget ? t->token_budget : 3000),
                 t->max_uses ? t->max_uses : 1);
        strcat(holders_json, one);
    }
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"%s\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":256,\"max_seq\":16,\"init_seed\":5},\"training\":{\"steps\":%u,"
             "\"batch\":2,\"seq\":16,\"learning_rate\":0.001},\"holders\":[%s],\"trainer\":{%s},"
             "\"device\":{%s},\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}",
             t->name ? t->name : "collab", t->steps, holders_json,
             t->trainer_json ? t->trainer_json : "", t->device_json ? t->device_json : "");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

// ---- toy attestors (no TEE: a name and the binding) -------------------------------------------

gt_net_attestor gt_tc_toy_trainer(void)
{
    static gt_test_toy trainer = {.name = "trainer", .accept = "h*"};
    return gt_test_toy_attestor(&trainer);
}

gt_net_attestor gt_tc_toy_holder(void)
{
    static gt_test_toy holder = {.name = "h", .accept = "trainer"};
    return gt_test_toy_attestor(&holder);
}

void gt_tc_tee(const gt_tc_fixture *f, gt_tee_attestor *t, const gt_agreement *a,
               gt_peer_role role, const gt_policy *policy, bool debug)
{
    memset(t, 0, sizeof *t);
    t->collect.type = GT_TEE_SIM;
    t->collect.sim_root = f->sim_root;
    t->collect.sim_debug = debug;
    t->policy = policy ? policy : gt_tc_sim_policy();
    t->roots = &f->root;
    t->root_count = 1;
    t->agreement = a;
    t->peer_role = role;
}

// ---- holders --------------------------------------------------------------------------------

void gt_tc_listen(const gt_tc_fixture *f, gt_tc_holder *runs, int *ports)
{
    for (int h = 0; h < f->holders; h++) {
        memset(&runs[h], 0, sizeof runs[h]);
        GT_ASSERT_OK(gt_listener_open(&runs[h].l, "127.0.0.1:0"));
        runs[h].port = gt_listener_port(runs[h].l);
        ports[h] = runs[h].port;
    }
}

static gt_err open_agent(const gt_tc_fixture *f, gt_tc_holder *run, int h, const gt_agreement *a,
                         const gt_tc_holder_opts *o)
{
    char name[8];
    snprintf(name, sizeof name, "h%d", h);
    GT_TRY(gt_ledger_open(&run->ledger, f->ledgers[h], f->keys[h].holder_sec));
    gt_holder_agent_config cfg = {
        .dataset_dir = f->ds[h], .keys = &f->keys[h], .agreement = a, .name = name,
        .ledger = run->ledger, .ledger_path = f->ledgers[h],
        .attestor = o && o->attestor.collect ? o->attestor : gt_tc_toy_holder(),
        .idle_timeout_ms = 20000,
        .trip_hook = o ? o->trip_hook : NULL, .trip_hook_ctx = o ? o->trip_hook_ctx : NULL,
        .require_witnesses = o ? o->require_witnesses : false,
    };
    return gt_holder_agent_create(&run->agent, &cfg);
}

static void *serve_main(void *p)
{
    gt_tc_holder *r = p;
    gt_err e = gt_holder_agent_serve(r->agent, r->l, &r->stop);
    return gt_is_ok(e) ? NULL : p;
}

void gt_tc_serve_thread(const gt_tc_fixture *f, gt_tc_holder *run, int h, const gt_agreement *a,
                        const gt_tc_holder_opts *o)
{
    GT_ASSERT_OK(open_agent(f, run, h, a, o));
    run->stop = 0;
    run->threaded = true;
    assert_int_equal(pthread_create(&run->th, NULL, serve_main, run), 0);
}

static volatile int child_stop;
static void on_term(int sig)
{
    (void)sig;
    child_stop = 1;
}

void gt_tc_serve_process(const gt_tc_fixture *f, gt_tc_holder *run, int h, const gt_agreement *a,
                         const gt_tc_holder_opts *o)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that dies takes its holders with it
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        if (!gt_is_ok(open_agent(f, run, h, a, o))) {
            _exit(3);
        }
        gt_err e = gt_holder_agent_serve(run->agent, run->l, &child_stop);
        gt_holder_agent_free(run->agent);
        gt_ledger_close(run->ledger);
        gt_listener_close(run->l);
        _exit(gt_is_ok(e) ? 0 : 4);
    }
    run->pid = pid;
    run->threaded = false;
}

int gt_tc_stop(gt_tc_holder *run, bool keep_listener)
{
    int status = 0;
    if (run->threaded) {
        run->stop = 1;
        pthread_join(run->th, NULL);
        gt_holder_agent_free(run->agent);
        gt_ledger_close(run->ledger);
        run->agent = NULL;
        run->ledger = NULL;
        run->threaded = false;
    } else if (run->pid > 0) {
        kill(run->pid, SIGTERM);  // no-op on a child already killed (not yet reaped)
        waitpid(run->pid, &status, 0);
        run->pid = 0;
    }
    if (!keep_listener) {
        gt_listener_close(run->l);
        run->l = NULL;
    }
    return status;
}

// ---- trainer --------------------------------------------------------------------------------

gt_err gt_tc_train(const gt_tc_train_opts *o, gt_collab_report *rep, gt_device_sim_stat *stat)
{
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = o->devd_socket ? GT_DEVICE_SIM : GT_DEVICE_CPU, .threads = 1,
                           .socket_path = o->devd_socket};
    if (o->devd_socket != NULL) {
        // A trainer resumed right after a crash may find devd still ending the dead session
        // ("device busy"): the device layer waits for it, as `gputravel train` does.
        gt_device_sim_options so = {.timeout_ms = 0, .attester = o->device_attester,
                                    .busy_wait_ms = 5000};
        memcpy(so.agreement_hash, o->a->hash, sizeof so.agreement_hash);
        GT_TRY(gt_device_open_sim(&dev, &dc, &so));
    } else {
        GT_TRY(gt_device_open(&dev, &dc));
    }
    gt_collab_config cfg = {
        .agreement = o->a, .dev = dev, .device_address = o->devd_socket,
        .transfer = o->devd_socket ? GT_TRANSFER_TRAVEL : o->transfer,
        .attestor = o->attestor.collect ? o->attestor : gt_tc_toy_trainer(),
        .trainer_name = "trainer", .state_dir = o->state_dir, .resume = o->resume,
        .on_step = o->on_step, .ctx = o->ctx,
    };
    gt_err err = gt_collab_train(&cfg, rep);
    if (stat != NULL && o->devd_socket != NULL) {
        gt_err s = gt_device_sim_stat_get(dev, stat);
        if (gt_is_ok(err) && !gt_is_ok(s)) {
            err = s;
        }
    }
    gt_device_close(dev);
    return err;
}

// ---- ledgers --------------------------------------------------------------------------------

static void tally_one(void *ctx, const char *kind, const cJSON *detail)
{
    gt_tc_tally *t = ctx;
    t->entries++;
    uint64_t chunk = 0, tokens = 0;
    const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "mode"));
    const char *reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "reason"));
    if (strcmp(kind, "grant") == 0) {
        t->grants++;
        t->travels += mode != NULL && strcmp(mode, "travel") == 0;
    } else if (strcmp(kind, "refuse") == 0) {
        t->refusals++;
        snprintf(t->last_refusal, sizeof t->last_refusal, "%s", reason ? reason : "");
    } else if (strcmp(kind, "session") == 0) {
        t->sessions++;
        GT_ASSERT_OK(gt_json_get_hex(detail, "signing_key", t->last_session_key, 32));
    } else if (strcmp(kind, "witness") == 0) {
        t->witnesses++;
    } else if (strcmp(kind, "trip-failed") == 0) {
        t->trip_failures++;
        snprintf(t->last_trip_failure, sizeof t->last_trip_failure, "%s", reason ? reason : "");
    } else if (strcmp(kind, "use") == 0 && gt_is_ok(gt_json_get_u64(detail, "chunk", &chunk)) &&
               gt_is_ok(gt_json_get_u64(detail, "tokens", &tokens)) && chunk < 64) {
        t->uses[chunk]++;
        t->use_tokens += tokens;
    }
}

void gt_tc_ledger_tally(const gt_tc_fixture *f, int h, gt_tc_tally *t)
{
    memset(t, 0, sizeof *t);
    gt_ledger_summary sum;
    // The whole chain first (hashes, signatures, the pinned holder key), then the tally.
    GT_ASSERT_OK(gt_ledger_verify_file(f->ledgers[h], f->keys[h].holder_pub, NULL, &sum));
    GT_ASSERT_OK(gt_ledger_replay(f->ledgers[h], f->keys[h].holder_pub, tally_one, t));
    assert_int_equal(t->entries, sum.entries);
}
