// cli/: `gputravel keys show`, `agreement init|check` and `holder status` through the binary:
// the keys and ids they print are the key folders' and manifests' own, each problem is named,
// and the exit code says whether a run could start.
#include "testlib.h"

#include <gputravel/holder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[256], g_ka[600], g_kb[600], g_dsa[600], g_dsb[600], g_agr[600], g_sim[600];
static gt_holder_keys g_keys_a, g_keys_b;
static uint8_t g_id_a[GT_DATASET_ID_BYTES], g_id_b[GT_DATASET_ID_BYTES];

// A dataset of `tokens` tokens in chunks of chunk_tokens, sealed with keys.
static void make_dataset(const char *name, const char *out, const gt_holder_keys *keys,
                         uint32_t tokens, uint32_t chunk_tokens, uint8_t id[GT_DATASET_ID_BYTES])
{
    char shard[700];
    snprintf(shard, sizeof shard, "%s/%s.bin", g_dir, name);
    uint16_t *t = calloc(tokens, sizeof *t);
    assert_non_null(t);
    for (uint32_t i = 0; i < tokens; i++) {
        t[i] = (uint16_t)(i % 251);
    }
    GT_ASSERT_OK(gt_shard_write(shard, t, tokens));
    free(t);
    const char *shards[] = {shard};
    gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = out,
                         .chunk_size = 2ull * chunk_tokens, .vocab_size = 256};
    gt_seal_result res;
    GT_ASSERT_OK(gt_seal(&sp, keys, &res));
    memcpy(id, res.dataset_id, GT_DATASET_ID_BYTES);
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_ka, sizeof g_ka, "%s/ka", g_dir);
    snprintf(g_kb, sizeof g_kb, "%s/kb", g_dir);
    snprintf(g_dsa, sizeof g_dsa, "%s/dsa", g_dir);
    snprintf(g_dsb, sizeof g_dsb, "%s/dsb", g_dir);
    snprintf(g_agr, sizeof g_agr, "%s/a.json", g_dir);
    snprintf(g_sim, sizeof g_sim, "%s/sim", g_dir);
    GT_ASSERT_OK(gt_keydir_generate(g_ka, false, &g_keys_a));
    GT_ASSERT_OK(gt_keydir_generate(g_kb, false, &g_keys_b));
    make_dataset("a", g_dsa, &g_keys_a, 6000, 2000, g_id_a);  // 3 chunks of 2000 tokens
    make_dataset("b", g_dsb, &g_keys_b, 3000, 3000, g_id_b);  // 1 chunk of 3000 tokens
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, NULL, 0, g_sim, true));
    gt_pkey_free(root);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_holder_keys_wipe(&g_keys_a);
    gt_holder_keys_wipe(&g_keys_b);
    gt_test_rmtree(g_dir);
    return 0;
}

// Runs the CLI; out (NUL-terminated stdout + stderr) stays in *text for the caller to free.
static int run(char **text, const char *const *args)
{
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, args);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    *text = (char *)out.data;
    return rc;
}

static void expect(int rc_want, const char *needle, const char *const *args)
{
    char *text = NULL;
    int rc = run(&text, args);
    if (rc != rc_want || (needle != NULL && strstr(text, needle) == NULL)) {
        fail_msg("%s ...: exit %d (want %d), output lacks '%s':\n%s", args[0], rc, rc_want,
                 needle ? needle : "", text);
    }
    free(text);
}

static cJSON *json_of(const char *text)
{
    const char *start = text[0] == '{' ? text : strstr(text, "\n{");
    assert_non_null(start);
    cJSON *j = cJSON_Parse(start[0] == '\n' ? start + 1 : start);
    assert_non_null(j);
    return j;
}

static void write_text(const char *path, const char *text)
{
    GT_ASSERT_OK(gt_file_write_atomic(path, text, strlen(text), 0644));
}

// Replaces the first `from` in the file with `to`.
static void edit(const char *path, const char *out, const char *from, const char *to)
{
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 16, &b));
    GT_ASSERT_OK(gt_buf_append(&b, "", 1));
    char *at = strstr((char *)b.data, from);
    assert_non_null(at);
    char doc[1 << 16];
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - (char *)b.data), (char *)b.data, to,
             at + strlen(from));
    write_text(out, doc);
    gt_buf_free_nowipe(&b);
}

static void keys_show(void **state)
{
    (void)state;
    char id[65], rk[65], want[100];
    uint8_t rpub[GT_X25519_BYTES];
    GT_ASSERT_OK(gt_recipient_pub_load(g_ka, rpub));
    gt_hex_encode(id, sizeof id, g_keys_a.holder_pub, 32);
    gt_hex_encode(rk, sizeof rk, rpub, 32);
    snprintf(want, sizeof want, "\"identity_key\": \"%s\"", id);
    expect(0, want, (const char *[]){"keys", "show", g_ka, NULL});
    snprintf(want, sizeof want, "\"recipient_key\": \"%s\"", rk);
    expect(0, want, (const char *[]){"keys", "show", g_ka, NULL});
    char *text = NULL;
    assert_int_equal(run(&text, (const char *[]){"keys", "show", g_ka, "--json", NULL}), 0);
    cJSON *j = json_of(text);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "identity_key")), id);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "recipient_key")), rk);
    cJSON_Delete(j);
    free(text);

    // A folder made before recipient keys: says how to add one; JSON null.
    char old[700], path[800];
    snprintf(old, sizeof old, "%s/kold", g_dir);
    GT_ASSERT_OK(gt_keydir_generate(old, false, NULL));
    snprintf(path, sizeof path, "%s/%s", old, GT_KEYDIR_RECIPIENT_PUBLIC);
    assert_int_equal(unlink(path), 0);
    expect(0, "recipient_key: none (add one with 'gputravel keygen --out",
           (const char *[]){"keys", "show", old, NULL});
    expect(0, "\"recipient_key\": null", (const char *[]){"keys", "show", old, "--json", NULL});
    expect(1, "is not a folder", (const char *[]){"keys", "show", g_agr, NULL});
    expect(1, "is no key folder", (const char *[]){"keys", "show", g_dsa, NULL});
    expect(64, "show needs the key folder", (const char *[]){"keys", "show", NULL});
    expect(64, "unknown subcommand", (const char *[]){"keys", "list", g_ka, NULL});
}

static void init_writes_what_the_folders_say(void **state)
{
    (void)state;
    char ha[1400], hb[1400];
    snprintf(ha, sizeof ha, "alice=%s,%s,127.0.0.1:7001", g_ka, g_dsa);
    snprintf(hb, sizeof hb, "bob=%s,%s,localhost:7002", g_kb, g_dsb);
    expect(0, "wrote ", (const char *[]){"agreement", "init", "--holder", ha, "--holder", hb,
                                         "--out", g_agr, "--steps", "10", NULL});
    gt_agreement *a = calloc(1, sizeof *a);
    GT_ASSERT_OK(gt_agreement_load(a, g_agr));
    assert_int_equal(a->holder_count, 2);
    assert_string_equal(a->holders[0].name, "alice");
    assert_memory_equal(a->holders[0].identity_key, g_keys_a.holder_pub, 32);
    assert_memory_equal(a->holders[1].identity_key, g_keys_b.holder_pub, 32);
    assert_memory_equal(a->holders[0].dataset_id, g_id_a, GT_DATASET_ID_BYTES);
    assert_memory_equal(a->holders[1].dataset_id, g_id_b, GT_DATASET_ID_BYTES);
    assert_int_equal(a->holders[0].token_budget, 6000);  // the whole dataset
    assert_int_equal(a->holders[1].token_budget, 3000);
    uint8_t rpub[GT_X25519_BYTES];
    GT_ASSERT_OK(gt_recipient_pub_load(g_kb, rpub));
    assert_memory_equal(a->holders[1].recipient_key, rpub, sizeof rpub);
    assert_int_equal(a->vocab, 256);  // the manifests' vocabulary
    assert_int_equal(a->steps, 10);
    assert_int_equal(a->output, GT_OUTPUT_SEALED_CHECKPOINT);
    assert_int_equal(a->recipient_count, 2);
    assert_true(a->allow_simulation);
    assert_int_equal(a->transfers, GT_TRANSFER_DEFAULT);
    assert_int_equal(a->ranks, 1);  // one trainer unless --ranks
    uint8_t m[GT_MEASUREMENT_BYTES];  // this build's: the binary that wrote it
    GT_ASSERT_OK(gt_sim_measure_exe(m, GT_CLI_PATH));
    assert_int_equal(a->trainer_measurements.count, 1);
    assert_memory_equal(a->trainer_measurements.values[0], m, sizeof m);
    assert_memory_equal(a->device_measurements.values[0], m, sizeof m);
    char hash[65], want[120];
    gt_hex_encode(hash, sizeof hash, a->hash, 32);

    // check prints the full hash and passes, at each holder.
    snprintf(want, sizeof want, "sha256 %s", hash);
    expect(0, want, (const char *[]){"agreement", "check", g_agr, NULL});
    expect(0, "OK: a run could start", (const char *[]){"agreement", "check", g_agr, "--key",
                                                         g_ka, "--dataset", g_dsa, NULL});
    expect(0, "OK: a run could start", (const char *[]){"agreement", "check", g_agr, "--key",
                                                         g_kb, "--dataset", g_dsb, NULL});

    // An existing file is kept; bad holder specs and foreign datasets are named.
    uint8_t before[GT_SHA256_BYTES];
    memcpy(before, a->hash, sizeof before);
    expect(1, "exists: refusing to replace it",
           (const char *[]){"agreement", "init", "--holder", ha, "--out", g_agr, NULL});
    GT_ASSERT_OK(gt_agreement_load(a, g_agr));
    assert_memory_equal(a->hash, before, sizeof before);
    char other[700], bad[1400];
    snprintf(other, sizeof other, "%s/other.json", g_dir);
    snprintf(bad, sizeof bad, "alice=%s,%s,127.0.0.1:7001", g_ka, g_dsb);
    expect(1, "is signed by another key than key folder",
           (const char *[]){"agreement", "init", "--holder", bad, "--out", other, NULL});
    expect(1, "expected NAME=KEYDIR,DATASET,HOST:PORT",
           (const char *[]){"agreement", "init", "--holder", "alice", "--out", other, NULL});
    snprintf(bad, sizeof bad, "alice=%s,%s,127.0.0.1:0", g_ka, g_dsa);
    expect(1, "port 1..65535",
           (const char *[]){"agreement", "init", "--holder", bad, "--out", other, NULL});
    // What init writes is parsed first: two holders of one name, or of one dataset, are refused.
    snprintf(bad, sizeof bad, "alice=%s,%s,127.0.0.1:7003", g_kb, g_dsb);
    expect(1, "holder name 'alice' appears twice",
           (const char *[]){"agreement", "init", "--holder", ha, "--holder", bad, "--out", other,
                            NULL});
    snprintf(bad, sizeof bad, "carol=%s,%s,127.0.0.1:7003", g_ka, g_dsa);
    expect(1, "holders 'alice' and 'carol' name the same dataset",
           (const char *[]){"agreement", "init", "--holder", ha, "--holder", bad, "--out", other,
                            NULL});
    assert_false(gt_path_exists(other));
    expect(64, "--holder", (const char *[]){"agreement", "init", "--out", other, NULL});
    expect(64, "unknown transfer mode", (const char *[]){"agreement", "init", "--holder", ha,
                                                          "--out", other, "--transfer", "fax",
                                                          NULL});
    // To stdout, a plain transfer list, losses only.
    char *text = NULL;
    assert_int_equal(run(&text, (const char *[]){"-q", "agreement", "init", "--holder", ha,
                                                 "--out", "-", "--transfer", "conventional",
                                                 "--loss-only", "--any-measurement",
                                                 "--ranks", "3", NULL}),
                     0);
    const char *doc = strstr(text, "{\n  \"version\": 1");
    assert_non_null(doc);
    const char *end = strstr(doc, "\n}\n");
    assert_non_null(end);
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, (size_t)(end + 3 - doc)));
    assert_int_equal(a->output, GT_OUTPUT_LOSS_ONLY);
    assert_int_equal(a->transfers, GT_TRANSFER_BIT(GT_TRANSFER_CONVENTIONAL));
    assert_int_equal(a->trainer_measurements.count, 0);
    assert_int_equal(a->ranks, 3);
    free(text);
    free(a);
}

// Every shape problem at once, then each cross-check against the key folder, the dataset and
// the policy; exit 1 whenever one stands in a run's way.
static void check_names_every_problem(void **state)
{
    (void)state;
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad.json", g_dir);
    edit(g_agr, bad, "\"layers\": 4", "\"layers\": \"4\"");
    edit(bad, bad, "\"allow_simulation\"", "\"allow_simulaton\"");
    edit(bad, bad, "\"steps\": 10,", "\"steps\": 10, \"warmup\": 5,");
    char *text = NULL;
    assert_int_equal(run(&text, (const char *[]){"agreement", "check", bad, NULL}), 1);
    const char *want[] = {"problem: model.layers: expected an integer, got a string",
                          "problem: training.warmup: unknown field",
                          "problem: allow_simulaton: unknown field (did you mean "
                          "allow_simulation?)",
                          "3 problem(s): no run can start"};
    for (size_t i = 0; i < 4; i++) {
        if (strstr(text, want[i]) == NULL) {
            fail_msg("lacks '%s':\n%s", want[i], text);
        }
    }
    free(text);
    edit(g_agr, bad, "\"channels\": 128", "\"channels\": 130");  // a rule, not the shape
    expect(1, "problem: agreement: model: channels (130) must be a multiple of heads",
           (const char *[]){"agreement", "check", bad, NULL});

    // Against the key folder and the dataset.
    expect(1, "problem: holder alice: identity_key is not key folder",
           (const char *[]){"agreement", "check", g_agr, "--key", g_kb, "--name", "alice", NULL});
    expect(1, "problem: holder alice: dataset_id is not dataset",
           (const char *[]){"agreement", "check", g_agr, "--dataset", g_dsb, "--name", "alice",
                            NULL});
    char ko[700];
    snprintf(ko, sizeof ko, "%s/kother", g_dir);
    GT_ASSERT_OK(gt_keydir_generate(ko, false, NULL));
    expect(1, "problem: no holder in the agreement has identity_key",
           (const char *[]){"agreement", "check", g_agr, "--key", ko, NULL});
    expect(1, "problem: --name carol: no holder of that name",
           (const char *[]){"agreement", "check", g_agr, "--name", "carol", NULL});
    uint8_t rpub[GT_X25519_BYTES];
    GT_ASSERT_OK(gt_recipient_pub_load(ko, rpub));
    char rk_other[65], rk_a[65];
    gt_hex_encode(rk_other, sizeof rk_other, rpub, 32);
    GT_ASSERT_OK(gt_recipient_pub_load(g_ka, rpub));
    gt_hex_encode(rk_a, sizeof rk_a, rpub, 32);
    edit(g_agr, bad, rk_a, rk_other);
    expect(1, "problem: holder alice: recipient_key is not key folder",
           (const char *[]){"agreement", "check", bad, "--key", g_ka, NULL});

    // The budget is a hard cap: below every chunk nothing is ever released (a problem), below
    // some of them those are lost (a warning).
    edit(g_agr, bad, "\"token_budget\": 6000", "\"token_budget\": 1500");
    expect(1, "problem: holder alice: token_budget 1500 is smaller than every chunk (the "
              "smallest holds 2000 tokens)",
           (const char *[]){"agreement", "check", bad, "--dataset", g_dsa, NULL});
    edit(g_agr, bad, "\"token_budget\": 3000", "\"token_budget\": 2999");
    expect(1, "token_budget 2999 is smaller than every chunk",
           (const char *[]){"agreement", "check", bad, "--key", g_kb, "--dataset", g_dsb, NULL});
    edit(g_agr, bad, "\"vocab\": 256", "\"vocab\": 200");
    expect(1, "problem: dataset", (const char *[]){"agreement", "check", bad, "--dataset",
                                                   g_dsa, NULL});
    expect(1, "vocabulary 256 exceeds model.vocab 200",
           (const char *[]){"agreement", "check", bad, "--dataset", g_dsa, NULL});
    edit(g_agr, bad, "127.0.0.1:7001", "127.0.0.1:70000");
    expect(1, "problem: holder alice: endpoint 127.0.0.1:70000: the port must be 1..65535",
           (const char *[]){"agreement", "check", bad, NULL});
    edit(g_agr, bad, "\"output\":", "\"transfer\": [\"insecure-host-trip\"],\n  \"output\":");
    expect(0, "warning: transfer lists insecure-host-trip",
           (const char *[]){"agreement", "check", bad, NULL});
    // A trainer list without this build: allowed, and said (a trainer of this build is refused).
    uint8_t m[GT_MEASUREMENT_BYTES];
    char m_hex[2 * GT_MEASUREMENT_BYTES + 1], other_m[2 * GT_MEASUREMENT_BYTES + 1];
    GT_ASSERT_OK(gt_sim_measure_exe(m, GT_CLI_PATH));
    gt_hex_encode(m_hex, sizeof m_hex, m, sizeof m);
    memset(other_m, 'a', 2 * GT_MEASUREMENT_BYTES);
    other_m[2 * GT_MEASUREMENT_BYTES] = '\0';
    edit(g_agr, bad, m_hex, other_m);  // the first: the trainer's
    expect(0, "warning: trainer.accepted_measurements does not list this build",
           (const char *[]){"agreement", "check", bad, NULL});

    // Against the holder's policy: the real appraisal of this build's simulated evidence.
    char strict[700], open_p[700];
    snprintf(strict, sizeof strict, "%s/strict.json", g_dir);
    snprintf(open_p, sizeof open_p, "%s/open.json", g_dir);
    write_text(strict, "{}");
    write_text(open_p, "{\"allow_simulation\": true}");
    expect(1, "refuses a simulated trainer of this build: policy: insecure-simulation evidence "
              "refused", (const char *[]){"agreement", "check", g_agr, "--policy", strict,
                                          "--sim-root", g_sim, NULL});
    expect(0, "OK: a run could start", (const char *[]){"agreement", "check", g_agr, "--policy",
                                                         open_p, "--sim-root", g_sim, NULL});
    write_text(strict, "{\"allow_simulation\": true, \"bogus\": 1}");
    expect(1, "unknown field", (const char *[]){"agreement", "check", g_agr, "--policy", strict,
                                                "--sim-root", g_sim, NULL});
    expect(64, "check needs the agreement file", (const char *[]){"agreement", "check", NULL});
    expect(64, "init or check", (const char *[]){"agreement", NULL});
}

// A ledger written through the holder's own ledger API, with known entries: what status counts.
static void append(gt_ledger *l, const char *kind, const char *detail_json)
{
    cJSON *d = cJSON_Parse(detail_json);
    assert_non_null(d);
    GT_ASSERT_OK(gt_ledger_append(l, kind, d));
    cJSON_Delete(d);
}

static void holder_status(void **state)
{
    (void)state;
    char ledger[700], id[33], other_id[33], hash[65], d[512];
    snprintf(ledger, sizeof ledger, "%s/ledger.log", g_dir);
    gt_hex_encode(id, sizeof id, g_id_a, sizeof g_id_a);
    memset(other_id, 'c', 32);
    other_id[32] = '\0';
    gt_agreement *a = calloc(1, sizeof *a);
    GT_ASSERT_OK(gt_agreement_load(a, g_agr));
    gt_hex_encode(hash, sizeof hash, a->hash, 32);
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, ledger, g_keys_a.holder_sec));
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t1\",\"signing_key\":\"%064d\","
                          "\"agreement\":\"%s\",\"appraisal\":\"sim measurement ab12...\"}",
             id, 0, hash);
    append(l, "session", d);
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t1\",\"chunk\":0,\"mode\":\"travel\","
                          "\"tokens\":2000,\"bytes\":4000}", id);
    append(l, "grant", d);
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t1\",\"chunk\":0,\"tokens\":2000}",
             id);
    append(l, "use", d);
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t1\",\"chunk\":2,\"mode\":\"travel\","
                          "\"tokens\":2000,\"bytes\":4000}", id);
    append(l, "grant", d);  // released, never confirmed
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t1\",\"chunk\":0,"
                          "\"reason\":\"chunk 0 has its 1 use(s)\"}", id);
    append(l, "refuse", d);
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t2\",\"signing_key\":\"%064d\","
                          "\"agreement\":\"%064d\"}", other_id, 1, 7);
    append(l, "session", d);
    gt_ledger_close(l);

    char *text = NULL;
    assert_int_equal(run(&text, (const char *[]){"holder", "status", "--ledger", ledger,
                                                 "--agreement", g_agr, "--dataset", g_dsa,
                                                 "--json", NULL}),
                     0);
    cJSON *j = json_of(text);
    free(text);
    assert_int_equal(cJSON_GetObjectItem(j, "entries")->valuedouble, 7);  // genesis + 6
    assert_int_equal(cJSON_GetObjectItem(j, "sessions")->valuedouble, 2);
    const cJSON *ds = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "datasets"), 0);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ds, "dataset")), id);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ds, "holder")), "alice");
    struct { const char *k; double v; } want[] = {
        {"grants", 2}, {"uses", 1}, {"chunks_released", 2}, {"chunks_used", 1},
        {"tokens_released", 4000}, {"tokens_confirmed", 2000}, {"refusals", 1},
        {"token_budget", 6000}, {"budget_left", 2000}, {"chunks_total", 3},
        {"chunks_remaining", 2},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cJSON *v = cJSON_GetObjectItem(ds, want[i].k);
        if (v == NULL || v->valuedouble != want[i].v) {
            fail_msg("%s: %g, want %g", want[i].k, v ? v->valuedouble : -1, want[i].v);
        }
    }
    // A dataset a session names is listed even with nothing released (no holder names it).
    const cJSON *ds2 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "datasets"), 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ds2, "dataset")), other_id);
    assert_int_equal(cJSON_GetObjectItem(ds2, "grants")->valuedouble, 0);
    assert_null(cJSON_GetObjectItem(ds2, "holder"));
    const cJSON *ses = cJSON_GetObjectItem(j, "last_sessions");
    assert_int_equal(cJSON_GetArraySize(ses), 2);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ses, 0),
                                                                 "agreement")), hash);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ses, 1),
                                                                 "trainer")), "t2");
    const cJSON *ags = cJSON_GetObjectItem(j, "agreements");  // one session under each
    assert_int_equal(cJSON_GetArraySize(ags), 2);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ags, 0),
                                                                 "agreement")), hash);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ags, 1), "sessions")->valuedouble, 1);
    cJSON_Delete(j);
    snprintf(d, sizeof d, "agreement %.16s... (this one): 1 session(s)", hash);
    expect(0, d, (const char *[]){"holder", "status", "--ledger", ledger, "--agreement", g_agr,
                                  NULL});
    expect(0, "agreement 0000000000000000... (another): 1 session(s)",
           (const char *[]){"holder", "status", "--ledger", ledger, "--agreement", g_agr, NULL});

    expect(0, "budget 6000, left 2000; max 1 use(s) per chunk",
           (const char *[]){"holder", "status", "--ledger", ledger, "--agreement", g_agr, NULL});
    expect(0, "chunks released 2, used 1, remaining 2 of 3",
           (const char *[]){"holder", "status", "--ledger", ledger, "--dataset", g_dsa, NULL});
    expect(0, "trainer t1, agreement ", (const char *[]){"holder", "status", "--ledger", ledger,
                                                         "--agreement", g_agr, NULL});
    expect(0, "(this one)", (const char *[]){"holder", "status", "--ledger", ledger,
                                             "--agreement", g_agr, NULL});
    expect(0, "tokens released 4000, confirmed 2000",
           (const char *[]){"holder", "status", "--ledger", ledger, NULL});

    // A ledger anchored to a rollback counter: status says what its head names (checking it
    // against the counter is `ledger verify --rollback-guard`'s job).
    char anchored[700], counter[700];
    snprintf(anchored, sizeof anchored, "%s/anchored.log", g_dir);
    snprintf(counter, sizeof counter, "sim:%s/counter", g_dir);
    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, counter));
    GT_ASSERT_OK(gt_ledger_open_guarded(&l, anchored, g_keys_a.holder_sec, g));
    snprintf(d, sizeof d, "{\"dataset\":\"%s\",\"trainer\":\"t1\",\"chunk\":1,"
                          "\"mode\":\"travel\",\"tokens\":2000,\"bytes\":4000}", id);
    append(l, "grant", d);
    gt_ledger_close(l);
    uint64_t value = 0;
    bool written = false;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &value, &written));
    gt_rollback_guard_close(g);
    assert_true(written);
    snprintf(d, sizeof d, "its head names rollback counter %llu", (unsigned long long)value);
    expect(0, d, (const char *[]){"holder", "status", "--ledger", anchored, NULL});
    snprintf(d, sizeof d, "\"rollback_counter\":\t%llu", (unsigned long long)value);
    expect(0, d, (const char *[]){"holder", "status", "--ledger", anchored, "--json", NULL});

    // A tampered ledger is refused, naming the line; no key is needed for any of this.
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(ledger, 1 << 20, &b));
    char *at = strstr((char *)b.data, "\"tokens\":2000");
    assert_non_null(at);
    at[10] = '9';
    GT_ASSERT_OK(gt_file_write_atomic(ledger, b.data, b.len, 0600));
    gt_buf_free_nowipe(&b);
    expect(1, "gputravel holder status: error: ",
           (const char *[]){"holder", "status", "--ledger", ledger, NULL});
    expect(64, "--ledger FILE is required", (const char *[]){"holder", "status", NULL});
    expect(0, "usage: gputravel holder status", (const char *[]){"holder", "status", "--help",
                                                                  NULL});
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keys_show),
        cmocka_unit_test(init_writes_what_the_folders_say),
        cmocka_unit_test(check_names_every_problem),
        cmocka_unit_test(holder_status),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
