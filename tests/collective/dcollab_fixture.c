// The world of dcollab_cli.sh (docs/collaboration.md "Across ranks"): two holders' keys and sealed
// datasets, an agreement for RANKS trainer ranks accepting EXE, the appraisal policy and the sim
// root (GT_SIM_ROOT, which must be set). Usage:
//   gt_dcollab_fixture DIR RANKS STEPS EXE   DIR/agreement.json, DIR/policy.json, DIR/keys{0,1},
//                                            DIR/ds{0,1}, and DIR/holders.txt: one line per
//                                            holder, "NAME PORT HOLDER_KEY_HEX DATASET_ID_HEX"
//   gt_dcollab_fixture sent-twice DIR H C LEDGER   holder H's ledger says chunk C was sent twice
//                                            and never confirmed (two crashed runs before): the
//                                            holder refuses to send it again
#include <gputravel/attest.h>
#include <gputravel/data.h>
#include <gputravel/holder.h>
#include <gputravel/net.h>
#include <gputravel/seal.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOLDERS 2
// Chunks of 200 tokens (12 steps of 2x8 each): h0 has 10, h1 3, so after three rounds both
// ranks take h0's chunks.
static const int TOKENS[HOLDERS] = {2000, 600};

static gt_err holder_make(const char *dir, int h, char *json, size_t cap, FILE *list)
{
    char name[32], keydir[600], ds[600], shard[600];
    snprintf(name, sizeof name, "keys%d", h);
    GT_TRY(gt_path_join(keydir, sizeof keydir, dir, name));
    snprintf(name, sizeof name, "ds%d", h);
    GT_TRY(gt_path_join(ds, sizeof ds, dir, name));
    snprintf(name, sizeof name, "in%d.bin", h);
    GT_TRY(gt_path_join(shard, sizeof shard, dir, name));
    uint16_t tokens[2000];
    uint64_t rng = 11 + (uint64_t)h;
    for (int i = 0; i < TOKENS[h]; i++) {
        tokens[i] = (uint16_t)(gt_rng_u32(&rng) % 200);
    }
    GT_TRY(gt_shard_write(shard, tokens, (size_t)TOKENS[h]));
    gt_holder_keys keys;
    GT_TRY(gt_keydir_generate(keydir, false, &keys));
    const char *shards[] = {shard};
    gt_seal_params sp = {.shards = shards, .shard_count = 1, .out_dir = ds, .chunk_size = 400,
                         .vocab_size = 256};
    gt_seal_result res;
    gt_err err = gt_seal(&sp, &keys, &res);
    gt_listener *probe = NULL;  // a free port: bind, read it, release it
    if (gt_is_ok(err)) {
        err = gt_listener_open(&probe, "127.0.0.1:0");
    }
    int port = gt_is_ok(err) ? gt_listener_port(probe) : 0;
    gt_listener_close(probe);
    uint8_t rk[GT_X25519_BYTES];
    if (gt_is_ok(err)) {
        err = gt_recipient_pub_load(keydir, rk);
    }
    char id_hex[33], rk_hex[65], key_hex[65];
    gt_hex_encode(rk_hex, sizeof rk_hex, rk, sizeof rk);
    gt_hex_encode(key_hex, sizeof key_hex, keys.holder_pub, 32);
    gt_hex_encode(id_hex, sizeof id_hex, res.dataset_id, 16);
    gt_holder_keys_wipe(&keys);
    GT_TRY(err);
    size_t used = strlen(json);
    snprintf(json + used, cap - used,
             "%s{\"name\":\"h%d\",\"identity_key\":\"%s\",\"endpoint\":\"127.0.0.1:%d\","
             "\"dataset_id\":\"%s\",\"token_budget\":100000,\"max_uses_per_chunk\":1,"
             "\"recipient_key\":\"%s\"}",
             h ? "," : "", h, key_hex, port, id_hex, rk_hex);
    fprintf(list, "h%d %d %s %s\n", h, port, key_hex, id_hex);
    return GT_OK;
}

static gt_err make(const char *dir, unsigned ranks, unsigned steps, const char *exe)
{
    const char *sim = getenv("GT_SIM_ROOT");
    GT_ENSURE(sim != NULL, GT_E_ARG, "GT_SIM_ROOT is not set");
    GT_TRY(gt_mkdir_p(dir, 0700));
    GT_TRY(gt_sim_root_set(sim));
    gt_pkey *root = NULL;
    GT_TRY(gt_sim_root_open(&root, NULL, 0, sim, true));
    gt_pkey_free(root);
    char path[700];
    GT_TRY(gt_path_join(path, sizeof path, dir, "policy.json"));
    GT_TRY(gt_file_write_atomic(path, "{\"allow_simulation\":true}", 25, 0644));
    GT_TRY(gt_path_join(path, sizeof path, dir, "holders.txt"));
    FILE *list = fopen(path, "w");
    GT_ENSURE(list != NULL, GT_E_IO, "%s: cannot write", path);
    char holders[4096] = "";
    gt_err err = GT_OK;
    for (int h = 0; h < HOLDERS && gt_is_ok(err); h++) {
        err = holder_make(dir, h, holders, sizeof holders, list);
    }
    fclose(list);
    GT_TRY(err);
    uint8_t m[GT_MEASUREMENT_BYTES];
    GT_TRY(gt_sim_measure_exe(m, exe));
    char hex[2 * GT_MEASUREMENT_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, m, sizeof m);
    char doc[8192];
    int n = snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"dcollab\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":256,\"max_seq\":8,\"init_seed\":3},\"training\":{\"steps\":%u,"
             "\"batch\":2,\"seq\":8,\"learning_rate\":0.01},\"holders\":[%s],\"trainer\":{"
             "\"accepted_measurements\":[\"%s\"],\"ranks\":%u},\"device\":{"
             "\"accepted_measurements\":[\"%s\"]},\"allow_simulation\":true,\"transfer\":["
             "\"travel\",\"conventional-keyrelease\",\"insecure-host-trip\"],\"output\":{\"kind\":"
             "\"sealed_checkpoint\",\"recipients\":[\"h0\",\"h1\"]}}",
             steps, holders, hex, ranks, hex);
    GT_ENSURE(n > 0 && (size_t)n < sizeof doc, GT_E_LIMIT, "agreement too long");
    GT_TRY(gt_path_join(path, sizeof path, dir, "agreement.json"));
    return gt_file_write_atomic(path, doc, (size_t)n, 0644);
}

// Two signed grant entries of chunk c of holder h's dataset, with no use after them.
static gt_err sent_twice(const char *dir, int h, unsigned c, const char *ledger_path,
                         const char *dataset_hex)
{
    char name[32], keydir[600];
    snprintf(name, sizeof name, "keys%d", h);
    GT_TRY(gt_path_join(keydir, sizeof keydir, dir, name));
    gt_holder_keys keys;
    GT_TRY(gt_keydir_load(keydir, &keys));
    gt_ledger *l = NULL;
    gt_err err = gt_ledger_open(&l, ledger_path, keys.holder_sec);
    gt_holder_keys_wipe(&keys);
    for (int i = 0; i < 2 && gt_is_ok(err); i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "dataset", dataset_hex);
        cJSON_AddStringToObject(d, "trainer", "crashed");
        cJSON_AddNumberToObject(d, "chunk", c);
        cJSON_AddStringToObject(d, "mode", "conventional-keyrelease");
        cJSON_AddNumberToObject(d, "tokens", 200);
        cJSON_AddNumberToObject(d, "bytes", 456);
        err = gt_ledger_append(l, "grant", d);
        cJSON_Delete(d);
    }
    gt_ledger_close(l);
    return err;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "sent-twice") == 0) {
        gt_err e = sent_twice(argv[2], atoi(argv[3]), (unsigned)atoi(argv[4]), argv[5], argv[6]);
        if (!gt_is_ok(e)) {
            fprintf(stderr, "gt_dcollab_fixture: %s\n", e.msg);
            return 1;
        }
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: gt_dcollab_fixture DIR RANKS STEPS EXE\n");
        return 2;
    }
    gt_err e = make(argv[1], (unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), argv[4]);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "gt_dcollab_fixture: %s\n", e.msg);
        return 1;
    }
    return 0;
}
