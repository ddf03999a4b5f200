// holder/ + orchestr/: a holder agent serves its sealed chunks over an attested channel, by both
// conventional variants, enforces the agreement's uses and budget, and records every decision.
#include "testlib.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

typedef gt_test_toy toy;  // testlib.h

static char dir[256], dsdir[512], keydir[512], ledger_path[512];
static gt_holder_keys keys;
static uint16_t tokens[3000];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    char shard[512];
    GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, "in.bin"));
    GT_ASSERT_OK(gt_path_join(dsdir, sizeof dsdir, dir, "ds"));
    GT_ASSERT_OK(gt_path_join(keydir, sizeof keydir, dir, "keys"));
    GT_ASSERT_OK(gt_path_join(ledger_path, sizeof ledger_path, dir, "ledger.log"));
    char root[600];  // the trips' device identity and vendor root (sim) live here
    GT_ASSERT_OK(gt_path_join(root, sizeof root, dir, "simroot"));
    setenv("GT_SIM_ROOT", root, 1);
    GT_ASSERT_OK(gt_sim_root_set(root));
    for (int i = 0; i < 3000; i++) {
        tokens[i] = (uint16_t)((i * 7) % 256);
    }
    GT_ASSERT_OK(gt_shard_write(shard, tokens, 3000));
    GT_ASSERT_OK(gt_keydir_generate(keydir, false, &keys));
    const char *shards[] = {shard};
    // 3 chunks: 2048 + 2048 + 1904 bytes (1024 + 1024 + 952 tokens).
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = dsdir,
                        .chunk_size = 2048, .vocab_size = 256};
    gt_seal_result res;
    GT_ASSERT_OK(gt_seal(&p, &keys, &res));
    assert_int_equal(res.chunk_count, 3);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_holder_keys_wipe(&keys);
    gt_test_rmtree(dir);
    return 0;
}

// transfer: the agreement's "transfer" value (JSON), or NULL for none (the default list).
// holders[0].enclave for the next agreement_with, as JSON (NULL: alice is not named by enclave).
static const char *alice_enclave;

static void agreement_with(gt_agreement *a, int port, uint64_t budget, uint32_t uses,
                           const char *transfer)
{
    gt_manifest m;
    GT_ASSERT_OK(gt_manifest_load(&m, dsdir));
    char key_hex[65], id_hex[33], doc[2048];
    gt_hex_encode(key_hex, sizeof key_hex, keys.holder_pub, 32);
    gt_hex_encode(id_hex, sizeof id_hex, m.dataset_id, 16);
    gt_manifest_free(&m);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"t\",\"model\":{\"layers\":1,\"channels\":32,\"heads\":2,"
             "\"vocab\":256,\"max_seq\":16,\"init_seed\":1},\"training\":{\"steps\":1,"
             "\"batch\":1,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"alice\","
             "\"identity_key\":\"%s\",\"endpoint\":\"127.0.0.1:%d\",\"dataset_id\":\"%s\","
             "\"token_budget\":%llu,\"max_uses_per_chunk\":%u%s%s}],\"trainer\":{},"
             "\"device\":{},\"allow_simulation\":true,%s%s%s\"output\":{\"kind\":\"loss_only\"}}",
             key_hex, port, id_hex, (unsigned long long)budget, uses,
             alice_enclave ? ",\"enclave\":" : "", alice_enclave ? alice_enclave : "",
             transfer ? "\"transfer\":" : "", transfer ? transfer : "", transfer ? "," : "");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

typedef struct {
    gt_holder_agent *agent;
    gt_listener *l;
    volatile int stop;
} serve_arg;

static void *serve_main(void *p)
{
    serve_arg *s = p;
    gt_err e = gt_holder_agent_serve(s->agent, s->l, &s->stop);
    return gt_is_ok(e) ? NULL : p;
}

static toy holder_toy = {.name = "alice", .accept = "trainer-ok"};

// One agent serving on a fresh port, its ledger, and the trainer's cpu device.
typedef struct {
    serve_arg s;
    pthread_t th;
    gt_agreement a;
    gt_ledger *ledger;
    gt_device *dev;
} agent_run;

// The serving limits the next start_agent uses (handshake deadline and caps; 0: defaults).
static struct {
    int deadline_ms;
    unsigned handshakes, per_address, per_trainer;
} limits;

// Enclave mode for the next start_agent (NULL: plain), and the keys it gets then: the identity
// only, the dataset key zero (an enclave-mode agent must never read it).
static gt_holder_enclave *agent_enclave;
static gt_holder_keys identity_only;

// transfer: the agreement's "transfer" JSON (NULL: none, the default list).
static void start_agent_with(agent_run *r, uint64_t budget, uint32_t uses, const char *transfer)
{
    GT_ASSERT_OK(gt_listener_open(&r->s.l, "127.0.0.1:0"));
    agreement_with(&r->a, gt_listener_port(r->s.l), budget, uses, transfer);
    GT_ASSERT_OK(gt_ledger_open(&r->ledger, ledger_path, keys.holder_sec));
    gt_holder_agent_config cfg = {
        .dataset_dir = dsdir, .keys = agent_enclave ? &identity_only : &keys,
        .agreement = &r->a, .name = "alice", .ledger = r->ledger, .ledger_path = ledger_path,
        .enclave = agent_enclave,
        .attestor = gt_test_toy_attestor(&holder_toy), .idle_timeout_ms = 5000,
        .handshake_deadline_ms = limits.deadline_ms, .max_handshakes = limits.handshakes,
        .max_handshakes_per_address = limits.per_address,
        .max_connections_per_trainer = limits.per_trainer,
    };
    GT_ASSERT_OK(gt_holder_agent_create(&r->s.agent, &cfg));
    r->s.stop = 0;
    pthread_create(&r->th, NULL, serve_main, &r->s);
    if (r->dev == NULL) {
        gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1};
        GT_ASSERT_OK(gt_device_open(&r->dev, &dc));
    }
}

// The agreement most tests serve under: both conventional modes allowed.
static void start_agent(agent_run *r, uint64_t budget, uint32_t uses)
{
    start_agent_with(r, budget, uses, "[\"conventional\",\"conventional-keyrelease\"]");
}

static void stop_agent(agent_run *r)
{
    r->s.stop = 1;
    void *ret = NULL;
    pthread_join(r->th, &ret);
    assert_null(ret);
    gt_holder_agent_free(r->s.agent);
    gt_listener_close(r->s.l);
    gt_ledger_close(r->ledger);
    r->ledger = NULL;
}

static toy trainer_ok = {.name = "trainer-ok", .accept = "alice"};

static void check_chunk(gt_device *dev, gt_dbuf buf, uint32_t chunk, uint64_t n)
{
    uint16_t got[1024];
    GT_ASSERT_OK(gt_device_copy_out(dev, got, buf, 0, n * 2));
    assert_memory_equal(got, tokens + chunk * 1024, n * 2);
}

#define MAX_NOTED 32
typedef struct {
    size_t n;
    char kind[MAX_NOTED][16], mode[MAX_NOTED][32], device[MAX_NOTED][8], reason[MAX_NOTED][200];
} noted;

static void note_entry(void *ctx, const char *kind, const cJSON *detail)
{
    noted *t = ctx;
    if (t->n == MAX_NOTED || strcmp(kind, "genesis") == 0 || strcmp(kind, "session") == 0) {
        return;
    }
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "mode"));
    const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "device"));
    const char *r = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "reason"));
    snprintf(t->kind[t->n], sizeof t->kind[0], "%s", kind);
    snprintf(t->mode[t->n], sizeof t->mode[0], "%s", m ? m : "");
    snprintf(t->device[t->n], sizeof t->device[0], "%s", d ? d : "");
    snprintf(t->reason[t->n], sizeof t->reason[0], "%s", r ? r : "");
    t->n++;
}

// The ledger's decisions after genesis and sessions, verified under the holder's key.
static noted ledger_decisions(void)
{
    noted t;
    memset(&t, 0, sizeof t);
    GT_ASSERT_OK(gt_ledger_replay(ledger_path, keys.holder_pub, note_entry, &t));
    return t;
}

typedef struct {
    uint64_t granted, used, claimed;  // sums of grant/use "tokens" and use "claimed"
} tokens_noted;

static void note_tokens(void *ctx, const char *kind, const cJSON *detail)
{
    tokens_noted *t = ctx;
    uint64_t v = 0;
    bool has = gt_is_ok(gt_json_get_u64(detail, "tokens", &v));
    if (has && strcmp(kind, "grant") == 0) {
        t->granted += v;
    } else if (has && strcmp(kind, "use") == 0) {
        t->used += v;
        if (gt_is_ok(gt_json_get_u64(detail, "claimed", &v))) {
            t->claimed += v;
        }
    }
}

static tokens_noted ledger_tokens(void)
{
    tokens_noted t = {0};
    GT_ASSERT_OK(gt_ledger_replay(ledger_path, keys.holder_pub, note_tokens, &t));
    return t;
}

static void both_variants_deliver_the_chunk(void **state)
{
    (void)state;
    unlink(ledger_path);
    agent_run r = {0};
    start_agent(&r, 1000000, 1);
    gt_device *dev = r.dev;

    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c = NULL;
    uint8_t k1[GT_ED25519_PUBLIC_BYTES], k2[GT_ED25519_PUBLIC_BYTES];
    memset(k1, 0x51, sizeof k1);  // the trainer's signing keys (only recorded here)
    memset(k2, 0x52, sizeof k2);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k1));
    assert_int_equal(gt_holder_conn_manifest(c)->chunk_count, 3);
    gt_dbuf buf = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_holder_fetch(c, 0, GT_FETCH_PLAIN, dev, 0, &buf, &n));
    assert_int_equal(n, 1024);
    check_chunk(dev, buf, 0, n);
    GT_ASSERT_OK(gt_device_free(dev, buf));
    GT_ASSERT_OK(gt_holder_confirm_use(c, 0, n));
    GT_ASSERT_OK(gt_holder_fetch(c, 2, GT_FETCH_KEYRELEASE, dev, GT_DBUF_NO_READBACK, &buf, &n));
    assert_int_equal(n, 952);
    uint16_t probe[4];
    assert_int_not_equal(gt_device_copy_out(dev, probe, buf, 0, sizeof probe).code, GT_E_NONE);
    GT_ASSERT_OK(gt_device_free(dev, buf));
    GT_ASSERT_OK(gt_holder_fetch(c, 1, GT_FETCH_KEYRELEASE, dev, 0, &buf, &n));
    check_chunk(dev, buf, 1, n);
    GT_ASSERT_OK(gt_device_free(dev, buf));

    // max_uses_per_chunk = 1: chunk 0's use is confirmed, so it is refused, with the reason.
    gt_err e = gt_holder_fetch(c, 0, GT_FETCH_PLAIN, dev, 0, &buf, &n);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "already used 1 time"));
    assert_int_equal(buf, 0);
    // Chunk 1 was sent but its use never confirmed (a trainer crash): one resend recovers it,
    // and costs budget like any release; a third send is refused.
    GT_ASSERT_OK(gt_holder_fetch(c, 1, GT_FETCH_PLAIN, dev, 0, &buf, &n));
    check_chunk(dev, buf, 1, n);
    GT_ASSERT_OK(gt_device_free(dev, buf));
    e = gt_holder_fetch(c, 1, GT_FETCH_PLAIN, dev, 0, &buf, &n);
    assert_int_equal(e.code, GT_E_RETRY);  // about this chunk only (travel.h REFUSE)
    assert_non_null(strstr(e.msg, "sent 2 time(s) without a confirmed use"));
    // A use can be confirmed only for a chunk that was sent and not yet counted.
    GT_ASSERT_OK(gt_holder_confirm_use(c, 1, n));
    GT_ASSERT_CODE(gt_holder_fetch(c, 9, GT_FETCH_PLAIN, dev, 0, &buf, &n), GT_E_ARG);
    gt_holder_disconnect(c);

    // A trainer the holder does not accept never gets a manifest. It never attested, so its
    // refusal is logged and counted, not ledgered (a flood of them must not grow the ledger).
    toy intruder = {.name = "trainer-evil", .accept = "alice"};
    att.ctx = &intruder;
    e = gt_holder_connect(&c, &r.a, 0, &att, "trainer-2", k2);
    assert_int_not_equal(e.code, GT_E_NONE);
    assert_null(c);
    usleep(300000);  // let the connection's thread count the refusal
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r.s.agent, &st);
    assert_int_equal(st.grants, 4);
    assert_int_equal(st.refusals, 2);
    assert_int_equal(st.handshake_failures, 1);
    assert_int_equal(st.tokens_released, 3000 + 1024);  // the resend of chunk 1 counted
    stop_agent(&r);

    // The ledger verifies and tells the story: genesis, session (trainer-1 and its signing
    // key), grant, use, grant, grant, refuse, grant, refuse, use (the intruder, refused at the
    // handshake, is not there: no session, its key never recorded).
    gt_ledger_summary sum;
    GT_ASSERT_OK(gt_ledger_verify_file(ledger_path, keys.holder_pub, NULL, &sum));
    assert_int_equal(sum.entries, 10);
    // each grant and refusal names the transfer mode asked for, as the agreement names it
    noted t = ledger_decisions();
    assert_int_equal(t.n, 8);
    const char *kinds[] = {"grant", "use", "grant", "grant", "refuse", "grant", "refuse", "use"};
    const char *modes[] = {"conventional", "", "conventional-keyrelease",
                           "conventional-keyrelease", "conventional", "conventional",
                           "conventional", ""};
    for (size_t i = 0; i < t.n; i++) {
        assert_string_equal(t.kind[i], kinds[i]);
        assert_string_equal(t.mode[i], modes[i]);
        assert_string_equal(t.device[i], "");  // no trip
    }
    gt_ledger_session ses;
    GT_ASSERT_OK(gt_ledger_find_session(ledger_path, keys.holder_pub, k1, &ses));
    assert_int_equal(ses.seq, 1);
    assert_string_equal(ses.trainer, "trainer-1");
    assert_memory_equal(ses.agreement, r.a.hash, GT_SHA256_BYTES);
    assert_string_equal(ses.appraisal, "");  // no peer_summary configured: none recorded
    e = gt_ledger_find_session(ledger_path, keys.holder_pub, k2, &ses);
    assert_int_equal(e.code, GT_E_NOTFOUND);
    assert_int_equal(ses.trainer[0], 0);
    uint8_t other_holder[GT_ED25519_PUBLIC_BYTES];
    memcpy(other_holder, keys.holder_pub, sizeof other_holder);
    other_holder[0] ^= 1;
    GT_ASSERT_CODE(gt_ledger_find_session(ledger_path, other_holder, k1, &ses), GT_E_AUTH);

    // A restarted agent remembers sends and uses from the ledger: chunk 1 is used up, chunk 2
    // (sent once, unconfirmed) may be resent once.
    start_agent(&r, 1000000, 1);
    att.ctx = &trainer_ok;
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k2));
    e = gt_holder_fetch(c, 1, GT_FETCH_PLAIN, dev, 0, &buf, &n);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "already used"));
    GT_ASSERT_OK(gt_holder_fetch(c, 2, GT_FETCH_PLAIN, dev, 0, &buf, &n));
    GT_ASSERT_OK(gt_device_free(dev, buf));
    gt_holder_disconnect(c);
    stop_agent(&r);
    gt_device_close(dev);
}

static void budget_and_agreement_are_enforced(void **state)
{
    (void)state;
    unlink(ledger_path);
    agent_run r = {0};
    // Chunks of 1024, 1024 and 952 tokens; the budget is a hard cap of 2000 tokens.
    start_agent(&r, 2000, 5);
    gt_device *dev = r.dev;
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c = NULL;
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x53, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_holder_fetch(c, 0, GT_FETCH_PLAIN, dev, 0, &buf, &n));
    GT_ASSERT_OK(gt_device_free(dev, buf));
    // 1024 + 1024 would cross 2000: refused whole, never cut.
    gt_err e = gt_holder_fetch(c, 1, GT_FETCH_PLAIN, dev, 0, &buf, &n);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "releasing chunk 1 (1024 tokens) would bring the tokens "
                                  "released to 2048, over the agreement's budget of 2000"));
    // 1024 + 952 = 1976 fits.
    GT_ASSERT_OK(gt_holder_fetch(c, 2, GT_FETCH_PLAIN, dev, 0, &buf, &n));
    GT_ASSERT_OK(gt_device_free(dev, buf));
    // A resend of the unconfirmed chunk 0 costs budget too: 1976 + 1024 > 2000.
    e = gt_holder_fetch(c, 0, GT_FETCH_PLAIN, dev, 0, &buf, &n);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "would bring the tokens released to 3000"));
    // A use is counted by the chunk the holder released, not by the trainer's claim.
    GT_ASSERT_OK(gt_holder_confirm_use(c, 2, 5));
    gt_holder_disconnect(c);
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r.s.agent, &st);
    assert_int_equal(st.tokens_released, 1976);
    assert_int_equal(st.grants, 2);
    assert_int_equal(st.refusals, 2);

    // A trainer under another agreement (one byte differs) is refused at HELLO.
    gt_agreement other = r.a;
    other.hash[0] ^= 1;
    e = gt_holder_connect(&c, &other, 0, &att, "trainer-1", k);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "another agreement"));
    char ours[17], theirs[17];  // both hashes named, so the two sides can compare copies
    gt_hex_encode(ours, sizeof ours, r.a.hash, 8);
    gt_hex_encode(theirs, sizeof theirs, other.hash, 8);
    assert_non_null(strstr(e.msg, ours));
    assert_non_null(strstr(e.msg, theirs));
    stop_agent(&r);
    // The same ledger under another agreement (another budget: another hash): what was released
    // under the first counts here too, and the agent knows there were sessions under another.
    start_agent(&r, 100000, 5);
    gt_holder_agent_stats st_other;
    gt_holder_agent_get_stats(r.s.agent, &st_other);
    assert_int_equal(st_other.sessions_other_agreements, 1);
    stop_agent(&r);
    tokens_noted tn = ledger_tokens();  // every connection thread has finished: all of it is on disk
    assert_int_equal(tn.granted, 1976);
    assert_int_equal(tn.used, 952);
    assert_int_equal(tn.claimed, 5);
    gt_device_close(dev);

    // An agent refuses to start for a dataset the agreement does not name.
    gt_agreement wrong = r.a;
    wrong.holders[0].dataset_id[0] ^= 1;
    GT_ASSERT_OK(gt_ledger_open(&r.ledger, ledger_path, keys.holder_sec));
    gt_holder_agent_config cfg = {.dataset_dir = dsdir, .keys = &keys, .agreement = &wrong,
                                  .name = "alice", .ledger = r.ledger};
    gt_holder_agent *agent = NULL;
    GT_ASSERT_CODE(gt_holder_agent_create(&agent, &cfg), GT_E_POLICY);
    cfg.name = "bob";
    GT_ASSERT_CODE(gt_holder_agent_create(&agent, &cfg), GT_E_ARG);
    gt_ledger_close(r.ledger);
}

// Nothing leaves that the ledger does not hold: when the grant cannot be written (here the
// file-size limit stops the append), the fetch is refused with that reason, no chunk byte is
// sent, and the ledger still verifies without the grant. The next fetch, once the ledger can be
// written again, is served.
static void unrecorded_grant_is_refused(void **state)
{
    (void)state;
    unlink(ledger_path);
    agent_run r = {0};
    start_agent(&r, 100000, 5);
    gt_device *dev = r.dev;
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c = NULL;
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x54, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
    gt_ledger_summary before;
    GT_ASSERT_OK(gt_ledger_verify_file(ledger_path, keys.holder_pub, NULL, &before));
    struct stat st;
    assert_int_equal(stat(ledger_path, &st), 0);
    struct rlimit old, cap;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    cap = old;
    cap.rlim_cur = (rlim_t)st.st_size;  // no file of this process may grow past the ledger now
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &cap), 0);
    gt_dbuf buf = 0;
    uint64_t n = 0;
    gt_err e = gt_holder_fetch(c, 0, GT_FETCH_PLAIN, dev, 0, &buf, &n);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(e.code, GT_E_POLICY);  // a holder's refusal, with its reason
    assert_non_null(strstr(e.msg, "cannot record the grant"));
    gt_holder_agent_stats stats;
    gt_holder_agent_get_stats(r.s.agent, &stats);
    assert_int_equal(stats.bytes_sent, 0);
    gt_ledger_summary after;
    GT_ASSERT_OK(gt_ledger_verify_file(ledger_path, keys.holder_pub, NULL, &after));
    assert_int_equal(after.entries, before.entries);
    GT_ASSERT_OK(gt_holder_fetch(c, 1, GT_FETCH_PLAIN, dev, 0, &buf, &n));
    check_chunk(dev, buf, 1, n);
    GT_ASSERT_OK(gt_device_free(dev, buf));
    gt_holder_disconnect(c);
    stop_agent(&r);
    gt_device_close(dev);
    GT_ASSERT_OK(gt_ledger_verify_file(ledger_path, keys.holder_pub, NULL, &after));
    assert_int_equal(after.entries, before.entries + 1);  // only the served grant
}

// ---- transfer modes: a holder serves only what its agreement lists ------------------------------

// The default list (travel, conventional-keyrelease) has no plain FETCH: it is refused before it
// is decided, with the mode and the list; nothing is sent or counted (the budget is one chunk, and
// the key release of that chunk is still served); the ledger holds the refusal and then the grant
// with the mode used.
static void plain_fetch_outside_the_agreement(void **state)
{
    (void)state;
    unlink(ledger_path);
    agent_run r = {0};
    start_agent_with(&r, 1024, 1, NULL);
    assert_int_equal(r.a.transfers, GT_TRANSFER_DEFAULT);
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c = NULL;
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x55, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    gt_err e = gt_holder_fetch(c, 0, GT_FETCH_PLAIN, r.dev, 0, &buf, &n);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "holder alice refused: FETCH plain: transfer mode "
                                  "'conventional' is not in the agreement's transfer list "
                                  "(conventional-keyrelease, travel)"));
    assert_int_equal(buf, 0);
    assert_int_equal(n, 0);
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r.s.agent, &st);
    assert_int_equal(st.bytes_sent, 0);
    assert_int_equal(st.grants, 0);
    assert_int_equal(st.tokens_released, 0);
    assert_int_equal(st.refusals, 1);
    GT_ASSERT_OK(gt_holder_fetch(c, 0, GT_FETCH_KEYRELEASE, r.dev, GT_DBUF_NO_READBACK, &buf, &n));
    assert_int_equal(n, 1024);
    GT_ASSERT_OK(gt_device_free(r.dev, buf));
    gt_holder_disconnect(c);
    stop_agent(&r);
    gt_device_close(r.dev);
    noted t = ledger_decisions();
    assert_int_equal(t.n, 2);
    assert_string_equal(t.kind[0], "refuse");
    assert_string_equal(t.mode[0], "conventional");
    assert_non_null(strstr(t.reason[0], "not in the agreement's transfer list"));
    assert_string_equal(t.kind[1], "grant");
    assert_string_equal(t.mode[1], "conventional-keyrelease");
    assert_string_equal(t.device[1], "");  // not a trip
}

static void note_enclave(void *ctx, const char *kind, const cJSON *detail)
{
    if (strcmp(kind, "enclave") == 0) {
        const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail,
                                                                              "mrenclave"));
        snprintf(ctx, 65, "%s", m ? m : "");
    }
}

// Enclave mode (docs/holder-enclave.md): the agreement allows both conventional modes, yet the
// agent refuses FETCH plain and FETCH key-release (they would put plaintext or the chunk key
// in its host process), releases nothing, and its ledger names the holder enclave.
static void enclave_mode_refuses_fetch(void **state)
{
    (void)state;
    unlink(ledger_path);
    gt_sgx_platform pf;
    memset(&pf, 0x42, sizeof pf);
    char image[512], sig[512];
    snprintf(image, sizeof image, "%s/holder.bin", GT_ENCLAVE_DIR);
    snprintf(sig, sizeof sig, "%s/holder.sig", GT_ENCLAVE_DIR);
    gt_holder_enclave_config ec = {.image_path = image, .sigstruct_path = sig,
                                   .process_path = GT_ENCLAVE_PROCESS_PATH, .platform = &pf};
    gt_holder_enclave *he = NULL;
    GT_ASSERT_OK(gt_holder_enclave_start(&he, &ec));
    gt_buf sealed = {0};
    GT_ASSERT_OK(gt_holder_enclave_import(he, keys.dataset_key, &sealed));
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, sealed.data, sealed.len));
    identity_only = keys;
    memset(identity_only.dataset_key, 0, sizeof identity_only.dataset_key);
    agent_enclave = he;
    agent_run r = {0};
    start_agent(&r, 1000000, 1);
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c = NULL;
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x56, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    GT_ASSERT_ERR(gt_holder_fetch(c, 0, GT_FETCH_PLAIN, r.dev, 0, &buf, &n), GT_E_POLICY,
                  "enclave mode");
    GT_ASSERT_ERR(gt_holder_fetch(c, 1, GT_FETCH_KEYRELEASE, r.dev, GT_DBUF_NO_READBACK, &buf,
                                  &n),
                  GT_E_POLICY, "enclave mode");
    assert_int_equal(buf, 0);
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r.s.agent, &st);
    assert_int_equal(st.grants, 0);
    assert_int_equal(st.bytes_sent, 0);
    gt_holder_disconnect(c);
    stop_agent(&r);
    gt_device_close(r.dev);
    agent_enclave = NULL;
    char mre[65] = "", want[65];
    GT_ASSERT_OK(gt_ledger_replay(ledger_path, keys.holder_pub, note_enclave, mre));
    gt_hex_encode(want, sizeof want, gt_holder_enclave_identity(he)->mrenclave, 32);
    assert_string_equal(mre, want);
    gt_buf_free(&sealed);
    gt_holder_enclave_stop(he);
    gt_holder_keys_wipe(&identity_only);
}

// A holder the agreement names by enclave, over a real attested channel: a plain agent sends no
// quote and connect refuses it; an enclave-mode agent's quote (bound to the channel binding both
// ends compute) verifies, and before it does nothing is fetched from that holder.
static void named_by_enclave_over_the_channel(void **state)
{
    (void)state;
    unlink(ledger_path);
    gt_sgx_platform pf;
    memset(&pf, 0x43, sizeof pf);
    char image[512], sig[512], vqe[600], simroot[600], pub[700];
    snprintf(image, sizeof image, "%s/holder.bin", GT_ENCLAVE_DIR);
    snprintf(sig, sizeof sig, "%s/holder.sig", GT_ENCLAVE_DIR);
    GT_ASSERT_OK(gt_path_join(vqe, sizeof vqe, dir, "vqe"));
    GT_ASSERT_OK(gt_path_join(simroot, sizeof simroot, dir, "simroot"));
    GT_ASSERT_OK(gt_mkdir_p(vqe, 0700));
    gt_pkey *rk = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&rk, pub, sizeof pub, simroot, true));
    gt_pkey_free(rk);
    gt_collect_params host = {.type = GT_TEE_SIM, .sim_root = simroot};
    gt_holder_enclave_config ec = {.image_path = image, .sigstruct_path = sig,
                                   .process_path = GT_ENCLAVE_PROCESS_PATH, .platform = &pf,
                                   .vqe_dir = vqe, .vqe_host = &host};
    gt_holder_enclave *he = NULL;
    GT_ASSERT_OK(gt_holder_enclave_start(&he, &ec));
    char encl[128], hex[65];
    gt_hex_encode(hex, sizeof hex, gt_holder_enclave_identity(he)->mrsigner, 32);
    snprintf(encl, sizeof encl, "{\"mrsigner\":\"%s\"}", hex);
    alice_enclave = encl;
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x57, sizeof k);
    gt_holder_conn *c = NULL;

    agent_run r = {0};  // plain: no quote
    start_agent(&r, 1000000, 1);
    GT_ASSERT_ERR(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k), GT_E_POLICY,
                  "sent no enclave quote");
    stop_agent(&r);

    gt_buf sealed = {0};
    GT_ASSERT_OK(gt_holder_enclave_import(he, keys.dataset_key, &sealed));
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, sealed.data, sealed.len));
    identity_only = keys;
    memset(identity_only.dataset_key, 0, sizeof identity_only.dataset_key);
    agent_enclave = he;
    unlink(ledger_path);
    start_agent(&r, 1000000, 1);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    GT_ASSERT_ERR(gt_holder_fetch(c, 0, GT_FETCH_KEYRELEASE, r.dev, GT_DBUF_NO_READBACK, &buf,
                                  &n),
                  GT_E_STATE, "not verified");
    assert_null(gt_holder_conn_enclave(c));
    gt_attest_file root = {.path = pub};
    GT_ASSERT_OK(gt_holder_conn_enclave_verify(c, &root, 1));
    const gt_holder_enclave_seen *seen = gt_holder_conn_enclave(c);
    assert_non_null(seen);
    assert_memory_equal(seen->mrsigner, gt_holder_enclave_identity(he)->mrsigner, 32);
    gt_holder_disconnect(c);
    stop_agent(&r);
    gt_device_close(r.dev);
    agent_enclave = NULL;
    alice_enclave = NULL;
    gt_buf_free(&sealed);
    gt_holder_enclave_stop(he);
    gt_holder_keys_wipe(&identity_only);
}

// The host-memory trip (a cpu trainer's ipc-cpu: address) is not travel: under the default
// list it is refused before the holder attaches (the trainer's wait ends at once), recorded with
// its mode; under an agreement listing insecure-host-trip it is served, and the ledger names the
// mode and the device actually used.
static void host_trip_needs_its_own_mode(void **state)
{
    (void)state;
    const char *lists[] = {NULL, "[\"insecure-host-trip\"]"};
    for (int i = 0; i < 2; i++) {
        unlink(ledger_path);
        agent_run r = {0};
        start_agent_with(&r, 1000000, 1, lists[i]);
        gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
        gt_holder_conn *c = NULL;
        uint8_t k[GT_ED25519_PUBLIC_BYTES];
        memset(k, 0x56, sizeof k);
        GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
        char sock[600];
        GT_ASSERT_OK(gt_path_join(sock, sizeof sock, dir, "trip.sock"));
        gt_device_trip *trip = NULL;
        gt_dbuf buf = 0;
        uint64_t n = 0;
        double t0 = gt_now_seconds();
        gt_err e = gt_holder_trip(c, 1, r.dev, sock, r.a.hash, 20000, &trip, &buf, &n);
        gt_holder_agent_stats st;
        gt_holder_agent_get_stats(r.s.agent, &st);
        if (i == 0) {
            GT_ASSERT_CODE(e, GT_E_POLICY);
            assert_non_null(strstr(e.msg, "TRAVEL ipc-cpu: (a trip in the trainer's host "
                                          "memory): transfer mode 'insecure-host-trip' is not in "
                                          "the agreement's transfer list"));
            assert_true(gt_now_seconds() - t0 < 10.0);  // not the lease
            assert_null(trip);
            assert_int_equal(buf, 0);
            assert_int_equal(st.bytes_sent, 0);
            assert_int_equal(st.grants, 0);
        } else {
            GT_ASSERT_OK(e);
            assert_int_equal(n, 1024);
            uint16_t x = 0;
            GT_ASSERT_CODE(gt_device_copy_out(r.dev, &x, buf, 0, 2), GT_E_POLICY);
            GT_ASSERT_OK(gt_holder_trip_end(trip));
            GT_ASSERT_OK(gt_holder_confirm_use(c, 1, n));
            assert_int_equal(st.grants, 1);
        }
        gt_holder_disconnect(c);
        stop_agent(&r);
        gt_device_close(r.dev);
        noted t = ledger_decisions();
        assert_true(t.n >= 1);
        assert_string_equal(t.kind[0], i == 0 ? "refuse" : "grant");
        assert_string_equal(t.mode[0], "insecure-host-trip");
        assert_string_equal(t.device[0], "host");
        if (i == 0) {
            assert_non_null(strstr(t.reason[0], "'insecure-host-trip' is not in the agreement"));
            assert_int_equal(t.n, 1);
        } else {
            assert_string_equal(t.kind[1], "use");
        }
    }
}

// A trainer's session by hand (HELLO, WELCOME), to send TRAVEL messages no honest trainer would.
static gt_channel *raw_session(agent_run *r)
{
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_channel *ch = NULL;
    GT_ASSERT_OK(gt_channel_connect(&ch, r->a.holders[0].endpoint, &att));
    gt_hp_hello h = {0};
    memcpy(h.agreement, r->a.hash, sizeof h.agreement);
    memset(h.signing_key, 0x57, sizeof h.signing_key);
    snprintf(h.trainer, sizeof h.trainer, "trainer-raw");
    uint8_t msg[GT_HP_HELLO_MAX_BYTES];
    gt_writer w = gt_writer_init_fixed(msg, sizeof msg);
    GT_ASSERT_OK(gt_hp_hello_write(&w, &h));
    GT_ASSERT_OK(gt_channel_send(ch, GT_HP_HELLO, w.data, w.len));
    uint32_t type = 0;
    gt_buf body = {0};
    GT_ASSERT_OK(gt_channel_recv(ch, &type, &body, GT_HP_MAX_MANIFEST));
    assert_int_equal(type, GT_HP_WELCOME);
    GT_ASSERT_OK(gt_channel_recv(ch, &type, &body, GT_HP_MAX_CONTROL));
    assert_int_equal(type, GT_HP_HEAD);  // its ledger head, for co-holder witnesses
    gt_buf_free_nowipe(&body);
    return ch;
}

// The trip device is what its evidence says: a cpu trainer's trip (evidence: host memory)
// presented as travel, under an ipc-cuda: address or under devd's plain path, is refused at the
// handshake, before anything is decided or loaded; each refusal is ledgered with the mode and
// device asked for and the claim that refused it.
static void host_trip_posing_as_travel(void **state)
{
    (void)state;
    unlink(ledger_path);
    agent_run r = {0};
    start_agent_with(&r, 1000000, 1, NULL);  // default: travel allowed, the host trip not
    gt_channel *ch = raw_session(&r);
    char sock[600];
    GT_ASSERT_OK(gt_path_join(sock, sizeof sock, dir, "trip.sock"));
    const char *schemes[] = {"ipc-cuda:", ""};  // a cuda trip; devd
    const char *claimed[] = {"cuda", "devd"};
    for (int i = 0; i < 2; i++) {
        gt_device_trip *t = NULL;
        gt_hp_travel m = {.chunk = 0};
        char address[GT_DEVICE_TRIP_ADDRESS_MAX];
        GT_ASSERT_OK(gt_device_trip_lend(&t, r.dev, sock, 10000, gt_channel_fd(ch), r.a.hash,
                                         m.ticket, address, sizeof address));
        assert_non_null(strstr(address, "ipc-cpu:"));  // what it really is
        assert_true(strlen(schemes[i]) + strlen(sock) < sizeof m.device);
        memcpy(m.device, schemes[i], strlen(schemes[i]));
        memcpy(m.device + strlen(schemes[i]), sock, strlen(sock) + 1);
        uint8_t msg[GT_HP_TRAVEL_MAX_BYTES];
        gt_writer w = gt_writer_init_fixed(msg, sizeof msg);
        GT_ASSERT_OK(gt_hp_travel_write(&w, &m));
        GT_ASSERT_OK(gt_channel_send(ch, GT_HP_TRAVEL, w.data, w.len));
        uint8_t aad[GT_SIM_LOAD_AAD_BYTES] = {0};
        gt_dbuf buf = 0;
        double t0 = gt_now_seconds();
        GT_ASSERT_CODE(gt_device_trip_wait(t, aad, 2048, &buf), GT_E_PEER);  // it answered
        assert_true(gt_now_seconds() - t0 < 8.0);
        assert_int_equal(buf, 0);  // nothing was handed over
        uint32_t type = 0;
        gt_buf body = {0};
        GT_ASSERT_OK(gt_channel_recv(ch, &type, &body, GT_HP_MAX_CONTROL));
        assert_int_equal(type, GT_HP_REFUSE);
        gt_err e = gt_hp_refuse_error(gt_buf_span(&body), "alice");
        gt_buf_free_nowipe(&body);
        GT_ASSERT_CODE(e, GT_E_POLICY);
        char want[96];
        snprintf(want, sizeof want, "its memory is 'host', this trip is to '%s'", claimed[i]);
        if (strstr(e.msg, want) == NULL) {
            fail_msg("case %d: expected '%s', got '%s'", i, want, e.msg);
        }
        gt_device_trip_close(t);
    }
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r.s.agent, &st);
    assert_int_equal(st.grants, 0);
    assert_int_equal(st.bytes_sent, 0);
    assert_int_equal(st.refusals, 2);
    GT_ASSERT_OK(gt_channel_send(ch, GT_HP_BYE, NULL, 0));
    gt_channel_close(ch);
    stop_agent(&r);
    gt_device_close(r.dev);
    noted t = ledger_decisions();
    assert_int_equal(t.n, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(t.kind[i], "refuse");
        assert_string_equal(t.mode[i], "travel");
        assert_string_equal(t.device[i], claimed[i]);
        assert_non_null(strstr(t.reason[i], "its memory is 'host'"));
    }
}

// ---- service under abuse -------------------------------------------------------------------

// A TCP connection to the agent from source address src (127.0.0.x: all of 127/8 is loopback,
// so attackers and the legitimate trainer can come from different addresses on one machine).
static int raw_connect(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

// Entries in this process's /proc/self/<what> ("task": threads, "fd": descriptors).
static int proc_count(const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/%s", what);
    return gt_test_count_files(path);
}

// Seconds until the server closes fd (reads return 0 or an error), at most limit_s.
static double seconds_until_closed(int fd, double limit_s)
{
    double t0 = gt_now_seconds();
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t b[256];
    while (gt_now_seconds() - t0 < limit_s) {
        ssize_t n = read(fd, b, sizeof b);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            break;
        }
    }
    return gt_now_seconds() - t0;
}

typedef struct {
    int port;
    volatile int stop;
    int opened;
} flood_arg;

// Connects and closes at once, as fast as it can, from 127.0.0.3.
static void *flood_main(void *p)
{
    flood_arg *f = p;
    while (!f->stop && f->opened < 300) {
        close(raw_connect("127.0.0.3", f->port));
        f->opened++;
    }
    return NULL;
}

// Slowloris (a TLS record header, then a byte a second, from 127.0.0.2, more connections than
// its address may hold) and a connect/close flood run against the holder; a legitimate trainer
// still handshakes and fetches within 5 s, the ledger holds only its decisions, and once the
// attack is over every thread and descriptor of it is gone.
static void slowloris_and_flood_do_not_block_a_trainer(void **state)
{
    (void)state;
    unlink(ledger_path);
    limits.deadline_ms = 2000;
    limits.handshakes = 16;
    limits.per_address = 4;
    agent_run r = {0};
    start_agent(&r, 1000000, 1);
    usleep(100000);
    const int threads0 = proc_count("task"), fds0 = proc_count("fd");
    const int port = gt_listener_port(r.s.l);
    enum { SLOW = 6 };
    int slow[SLOW];
    static const uint8_t record_header[] = {0x16, 0x03, 0x01, 0x02, 0x00};
    for (int i = 0; i < SLOW; i++) {
        slow[i] = raw_connect("127.0.0.2", port);
        assert_int_equal(write(slow[i], record_header, sizeof record_header), 5);
    }
    flood_arg f = {.port = port};
    pthread_t flooder;
    pthread_create(&flooder, NULL, flood_main, &f);

    // The legitimate trainer, during the attack.
    double t0 = gt_now_seconds();
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c = NULL;
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x56, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c, &r.a, 0, &att, "trainer-1", k));
    gt_dbuf buf = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_holder_fetch(c, 0, GT_FETCH_PLAIN, r.dev, 0, &buf, &n));
    double took = gt_now_seconds() - t0;
    print_message("legitimate trainer: handshake + fetch in %.3f s during the attack\n", took);
    assert_true(took < 5.0);
    check_chunk(r.dev, buf, 0, n);
    GT_ASSERT_OK(gt_device_free(r.dev, buf));
    gt_holder_disconnect(c);

    // The slow connections trickle a byte a second; the deadline ends each of them (those over
    // the address's limit were closed at once).
    double closed_at[SLOW];
    for (int i = 0; i < SLOW; i++) {
        closed_at[i] = -1;
    }
    double s0 = gt_now_seconds();
    int open_left = SLOW;
    while (open_left > 0 && gt_now_seconds() - s0 < 6.0) {
        for (int i = 0; i < SLOW; i++) {
            if (closed_at[i] >= 0) {
                continue;
            }
            uint8_t one = 0;
            if (write(slow[i], &one, 1) != 1 || seconds_until_closed(slow[i], 0.15) < 0.15) {
                closed_at[i] = gt_now_seconds() - s0;
                open_left--;
            }
        }
        usleep(850000);
    }
    pthread_join(flooder, NULL);  // all 300 connect/close pairs
    for (int i = 0; i < SLOW; i++) {
        print_message("slow connection %d closed by the holder after %.2f s\n", i, closed_at[i]);
        assert_true(closed_at[i] >= 0);  // none outlived the 2 s deadline by much
        close(slow[i]);
    }
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r.s.agent, &st);
    print_message("flood: %d connect/close pairs; %llu connections refused before attesting\n",
                  f.opened, (unsigned long long)st.handshake_failures);
    assert_int_equal(f.opened, 300);
    assert_true(st.handshake_failures >= (uint64_t)SLOW);
    assert_int_equal(st.grants, 1);

    // Threads are joined as they finish, descriptors closed: back where we started.
    usleep(600000);
    int threads1 = proc_count("task"), fds1 = proc_count("fd");
    print_message("threads %d -> %d, descriptors %d -> %d\n", threads0, threads1, fds0, fds1);
    assert_int_equal(threads1, threads0);
    assert_int_equal(fds1, fds0);
    stop_agent(&r);
    // The ledger holds the trainer's decisions only: genesis, session, grant.
    gt_ledger_summary sum;
    GT_ASSERT_OK(gt_ledger_verify_file(ledger_path, keys.holder_pub, NULL, &sum));
    assert_int_equal(sum.entries, 3);
    gt_device_close(r.dev);
    memset(&limits, 0, sizeof limits);
}

// The handshake deadline is a deadline for the whole exchange, and an address over its limit is
// turned away at once, before any TLS work.
static void handshake_deadline_and_address_limit(void **state)
{
    (void)state;
    unlink(ledger_path);
    limits.deadline_ms = 1000;
    limits.per_address = 2;
    agent_run r = {0};
    start_agent(&r, 1000000, 1);
    const int port = gt_listener_port(r.s.l);
    int a = raw_connect("127.0.0.4", port), b = raw_connect("127.0.0.4", port);
    usleep(200000);  // both admitted to a handshake
    int over = raw_connect("127.0.0.4", port);
    double t_over = seconds_until_closed(over, 3.0);
    print_message("third connection from one address closed after %.3f s\n", t_over);
    assert_true(t_over < 0.5);
    double t_a = seconds_until_closed(a, 4.0);
    print_message("silent handshake closed after %.3f s (deadline 1 s)\n", t_a);
    assert_true(t_a > 0.5 && t_a < 2.5);
    close(a);
    close(b);
    close(over);
    gt_holder_agent_stats st;
    usleep(300000);
    gt_holder_agent_get_stats(r.s.agent, &st);
    assert_int_equal(st.handshake_failures, 3);
    stop_agent(&r);
    gt_ledger_summary sum;
    GT_ASSERT_OK(gt_ledger_verify_file(ledger_path, keys.holder_pub, NULL, &sum));
    assert_int_equal(sum.entries, 1);  // genesis only
    gt_device_close(r.dev);
    memset(&limits, 0, sizeof limits);
}

// One trainer name holds at most max_connections_per_trainer connections at a time.
static void connections_per_trainer_are_capped(void **state)
{
    (void)state;
    unlink(ledger_path);
    limits.per_trainer = 2;
    agent_run r = {0};
    start_agent(&r, 1000000, 1);
    gt_net_attestor att = gt_test_toy_attestor(&trainer_ok);
    gt_holder_conn *c[3] = {0};
    uint8_t k[GT_ED25519_PUBLIC_BYTES];
    memset(k, 0x57, sizeof k);
    GT_ASSERT_OK(gt_holder_connect(&c[0], &r.a, 0, &att, "trainer-1", k));
    GT_ASSERT_OK(gt_holder_connect(&c[1], &r.a, 0, &att, "trainer-1", k));
    gt_err e = gt_holder_connect(&c[2], &r.a, 0, &att, "trainer-1", k);
    GT_ASSERT_CODE(e, GT_E_POLICY);  // a holder's refusal, as the trainer sees it
    assert_non_null(strstr(e.msg, "trainer 'trainer-1' already has 2 connections open"));
    // one prefix, not "holder alice: holder alice refused: ..."
    assert_int_equal(strncmp(e.msg, "holder alice refused: ", 22), 0);
    gt_holder_disconnect(c[1]);
    usleep(200000);  // its thread finishes
    GT_ASSERT_OK(gt_holder_connect(&c[2], &r.a, 0, &att, "trainer-1", k));
    gt_holder_disconnect(c[0]);
    gt_holder_disconnect(c[2]);
    stop_agent(&r);
    gt_device_close(r.dev);
    memset(&limits, 0, sizeof limits);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_variants_deliver_the_chunk),
        cmocka_unit_test(budget_and_agreement_are_enforced),
        cmocka_unit_test(unrecorded_grant_is_refused),
        cmocka_unit_test(plain_fetch_outside_the_agreement),
        cmocka_unit_test(enclave_mode_refuses_fetch),
        cmocka_unit_test(named_by_enclave_over_the_channel),
        cmocka_unit_test(host_trip_needs_its_own_mode),
        cmocka_unit_test(host_trip_posing_as_travel),
        cmocka_unit_test(slowloris_and_flood_do_not_block_a_trainer),
        cmocka_unit_test(handshake_deadline_and_address_limit),
        cmocka_unit_test(connections_per_trainer_are_capped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
