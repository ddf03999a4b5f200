// travel/: attested channels backed by real (simulated) TEE evidence, bound to the agreement.
#include "testlib.h"

#include <gputravel/travel.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static char dir[256], root_pub[600];
static gt_attest_file root_file;
static gt_buf root_bytes;

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    gt_pkey *root = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&root, root_pub, sizeof root_pub, dir, true));
    gt_pkey_free(root);
    GT_ASSERT_OK(gt_file_read_all(root_pub, 1 << 16, &root_bytes));
    root_file = (gt_attest_file){root_pub, gt_buf_span(&root_bytes)};
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_buf_free_nowipe(&root_bytes);
    gt_test_rmtree(dir);
    return 0;
}

// An agreement whose trainer list holds `measurement_hex` (NULL: empty list).
static void make_agreement(gt_agreement *a, const char *measurement_hex, const char *name)
{
    char doc[2048], list[200] = "";
    if (measurement_hex != NULL) {
        snprintf(list, sizeof list, "\"accepted_measurements\":[\"%s\"]", measurement_hex);
    }
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"%s\",\"model\":{\"layers\":1,\"channels\":8,\"heads\":1,"
             "\"vocab\":256,\"max_seq\":8,\"init_seed\":1},\"training\":{\"steps\":1,\"batch\":1,"
             "\"seq\":8,\"learning_rate\":0.1},\"holders\":[{\"name\":\"h\",\"identity_key\":"
             "\"11%062d\",\"endpoint\":\"x:1\",\"dataset_id\":\"%032d\",\"token_budget\":1,"
             "\"max_uses_per_chunk\":1}],\"trainer\":{%s},\"device\":{},"
             "\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}",
             name, 0, 0, list);
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

typedef struct {
    gt_tee_attestor att;
    gt_listener *l;
    gt_err result;
} server_arg;

static void *server_main(void *p)
{
    server_arg *s = p;
    gt_net_attestor na = gt_tee_attestor_bind(&s->att);
    gt_channel *ch = NULL;
    s->result = gt_listener_accept(s->l, &na, 5000, &ch);
    if (gt_is_ok(s->result)) {
        uint32_t type = 0;
        gt_buf b = {0};
        s->result = gt_channel_recv(ch, &type, &b, 16);  // wait for the client's goodbye
        gt_buf_free(&b);
        gt_channel_close(ch);
    }
    return NULL;
}

// Holder (server) appraises a trainer (client) whose agreement is `trainer_a`.
static bool trainer_debug;  // the trainer's simulated TEE runs with debug enabled

static gt_err run_pair(const gt_agreement *holder_a, const gt_agreement *trainer_a,
                       const gt_policy *holder_policy, char *summary, size_t cap)
{
    gt_policy *open = NULL;
    GT_ASSERT_OK(gt_policy_parse(&open, "{\"allow_simulation\":true}", 25));
    server_arg s = {.att = {.collect = {.type = GT_TEE_SIM, .sim_root = dir},
                            .policy = holder_policy, .roots = &root_file, .root_count = 1,
                            .agreement = holder_a, .peer_role = GT_PEER_TRAINER}};
    GT_ASSERT_OK(gt_listener_open(&s.l, "127.0.0.1:0"));
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", gt_listener_port(s.l));
    pthread_t th;
    pthread_create(&th, NULL, server_main, &s);
    gt_tee_attestor trainer = {.collect = {.type = GT_TEE_SIM, .sim_root = dir,
                                           .sim_debug = trainer_debug},
                               .policy = open,
                               .roots = &root_file, .root_count = 1, .agreement = trainer_a,
                               .peer_role = GT_PEER_HOLDER};
    gt_net_attestor na = gt_tee_attestor_bind(&trainer);
    gt_channel *ch = NULL;
    gt_err client = gt_channel_connect(&ch, addr, &na);
    if (gt_is_ok(client)) {
        GT_ASSERT_OK(gt_channel_send(ch, 1, "bye", 3));
        gt_channel_close(ch);
    }
    pthread_join(th, NULL);
    gt_listener_close(s.l);
    gt_policy_free(open);
    snprintf(summary, cap, "%s", s.att.peer_summary);
    return s.result;
}

static void accepted_and_refused_trainers(void **state)
{
    (void)state;
    uint8_t me[GT_MEASUREMENT_BYTES];
    GT_ASSERT_OK(gt_sim_measure_exe(me, NULL));  // both ends run this test binary
    char me_hex[2 * GT_MEASUREMENT_BYTES + 1];
    gt_hex_encode(me_hex, sizeof me_hex, me, sizeof me);
    gt_policy *sim_ok = NULL, *strict = NULL;
    GT_ASSERT_OK(gt_policy_parse(&sim_ok, "{\"allow_simulation\":true}", 25));
    GT_ASSERT_OK(gt_policy_parse(&strict, "{}", 2));
    gt_agreement a, wrong_m, other;
    make_agreement(&a, me_hex, "demo");
    char bogus[97];
    memset(bogus, 'a', 96);
    bogus[96] = '\0';
    make_agreement(&wrong_m, bogus, "demo");
    make_agreement(&other, me_hex, "other");

    char summary[192];
    gt_err first = run_pair(&a, &a, sim_ok, summary, sizeof summary);
    if (!gt_is_ok(first)) {
        fail_msg("%s", first.msg);
    }
    assert_non_null(strstr(summary, "insecure-simulation"));
    assert_non_null(strstr(summary, "sim measurement"));

    gt_err e = run_pair(&wrong_m, &wrong_m, sim_ok, summary, sizeof summary);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "not one the agreement accepts"));

    // A trainer under another agreement binds another hash into its evidence.
    // The holder says so with both hashes (the trainer's evidence names its own in the clear).
    e = run_pair(&a, &other, sim_ok, summary, sizeof summary);
    assert_int_equal(e.code, GT_E_POLICY);
    char ours[17], theirs[17], want[96];
    gt_hex_encode(ours, sizeof ours, a.hash, 8);
    gt_hex_encode(theirs, sizeof theirs, other.hash, 8);
    snprintf(want, sizeof want, "different agreement: ours %s..., yours (the trainer's) %s...",
             ours, theirs);
    if (strstr(e.msg, want) == NULL) {
        fail_msg("expected '%s', got '%s'", want, e.msg);
    }

    // A holder policy without allow_simulation refuses simulated trainers.
    e = run_pair(&a, &a, strict, summary, sizeof summary);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "allow_simulation"));
    // A trainer whose TEE runs in debug mode is refused by default (the demo's policy, and an
    // old policy forbidding debug), and accepted only by a holder policy setting allow_debug.
    gt_policy *no_debug = NULL, *debug_ok = NULL;
    static const char nd[] = "{\"allow_simulation\":true,\"debug_forbidden\":true}";
    static const char dok[] = "{\"allow_simulation\":true,\"allow_debug\":true}";
    GT_ASSERT_OK(gt_policy_parse(&no_debug, nd, sizeof nd - 1));
    GT_ASSERT_OK(gt_policy_parse(&debug_ok, dok, sizeof dok - 1));
    trainer_debug = true;
    const gt_policy *refusing[] = {sim_ok, no_debug};
    for (size_t i = 0; i < 2; i++) {
        e = run_pair(&a, &a, refusing[i], summary, sizeof summary);
        assert_int_equal(e.code, GT_E_POLICY);
        assert_non_null(strstr(e.msg, "debug TEE refused: the policy does not set allow_debug"));
    }
    GT_ASSERT_OK(run_pair(&a, &a, debug_ok, summary, sizeof summary));
    trainer_debug = false;
    GT_ASSERT_OK(run_pair(&a, &a, no_debug, summary, sizeof summary));  // not in debug: accepted
    gt_policy_free(no_debug);
    gt_policy_free(debug_ok);
    gt_policy_free(sim_ok);
    gt_policy_free(strict);
}

// The appraisal callback alone, on evidence collected for a chosen binding: another agreement is
// named as such only when the evidence proves it (authentic, and its report_data is exactly this
// session under the hash the peer names); anything else keeps the honest binding message.
static void different_agreement_or_stale(void **state)
{
    (void)state;
    gt_policy *sim_ok = NULL;
    GT_ASSERT_OK(gt_policy_parse(&sim_ok, "{\"allow_simulation\":true}", 25));
    gt_agreement a, other, third;
    make_agreement(&a, NULL, "demo");
    make_agreement(&other, NULL, "other");
    make_agreement(&third, NULL, "third");
    gt_tee_attestor ta = {.collect = {.type = GT_TEE_SIM, .sim_root = dir}, .policy = sim_ok,
                          .roots = &root_file, .root_count = 1, .agreement = &a,
                          .peer_role = GT_PEER_HOLDER};
    gt_tee_attestor to = ta;
    to.agreement = &other;
    gt_net_attestor us = gt_tee_attestor_bind(&ta), peer = gt_tee_attestor_bind(&to);
    uint8_t session[GT_NET_BINDING_BYTES], earlier[GT_NET_BINDING_BYTES];
    memset(session, 0x51, sizeof session);
    memset(earlier, 0x52, sizeof earlier);

    gt_buf ev = {0};
    GT_ASSERT_OK(peer.collect(peer.ctx, session, &ev));
    assert_memory_equal(ev.data, GT_TLS_EVIDENCE_MAGIC, GT_TLS_EVIDENCE_MAGIC_BYTES);
    assert_memory_equal(ev.data + GT_TLS_EVIDENCE_MAGIC_BYTES, other.hash, GT_SHA256_BYTES);
    gt_err e = us.appraise(us.ctx, ev.data, ev.len, session);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    char ours[17], theirs[17], want[96];
    gt_hex_encode(ours, sizeof ours, a.hash, 8);
    gt_hex_encode(theirs, sizeof theirs, other.hash, 8);
    snprintf(want, sizeof want, "different agreement: ours %s..., yours (the holder's) %s...",
             ours, theirs);
    assert_non_null(strstr(e.msg, want));
    GT_ASSERT_OK(peer.appraise(peer.ctx, ev.data, ev.len, session));  // its own: accepted

    // The other agreement's evidence from an earlier session: not this session, so no claim
    // about agreements can be proved; the message names every possibility.
    e = us.appraise(us.ctx, ev.data, ev.len, earlier);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_null(strstr(e.msg, "different agreement"));
    assert_non_null(strstr(e.msg, "stale or replayed evidence, another session, or another "
                                  "agreement"));

    // A hint that lies (names a third agreement) proves nothing either; nor does no hint.
    memcpy(ev.data + GT_TLS_EVIDENCE_MAGIC_BYTES, third.hash, GT_SHA256_BYTES);
    e = us.appraise(us.ctx, ev.data, ev.len, session);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_null(strstr(e.msg, "different agreement"));
    assert_non_null(strstr(e.msg, "report_data"));
    size_t head = GT_TLS_EVIDENCE_MAGIC_BYTES + GT_SHA256_BYTES;
    e = us.appraise(us.ctx, ev.data + head, ev.len - head, session);  // bare evidence
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "another agreement"));
    // Our own agreement, replayed from an earlier session: stale, and said so.
    gt_buf mine = {0};
    GT_ASSERT_OK(us.collect(us.ctx, earlier, &mine));
    e = us.appraise(us.ctx, mine.data, mine.len, session);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_null(strstr(e.msg, "different agreement"));
    assert_non_null(strstr(e.msg, "stale or replayed"));
    GT_ASSERT_OK(us.appraise(us.ctx, mine.data, mine.len, earlier));

    // The split itself: the hint cut short is refused; bare evidence passes whole.
    gt_span body;
    uint8_t hint[GT_SHA256_BYTES];
    bool has = true;
    GT_ASSERT_CODE(gt_tls_evidence_split(mine.data, GT_TLS_EVIDENCE_MAGIC_BYTES + 5, &body, hint,
                                         &has),
                   GT_E_TRUNCATED);
    GT_ASSERT_OK(gt_tls_evidence_split(mine.data + head, mine.len - head, &body, hint, &has));
    assert_false(has);
    assert_int_equal(body.len, mine.len - head);
    GT_ASSERT_OK(gt_tls_evidence_split(mine.data, mine.len, &body, hint, &has));
    assert_true(has);
    assert_memory_equal(hint, a.hash, GT_SHA256_BYTES);
    assert_ptr_equal(body.data, mine.data + head);
    // Every cut: refused only while the hint itself is incomplete, else split at the same place.
    for (size_t cut = 0; cut <= mine.len; cut++) {
        gt_err s = gt_tls_evidence_split(mine.data, cut, &body, hint, &has);
        bool hinted = cut >= head;
        if (cut >= GT_TLS_EVIDENCE_MAGIC_BYTES && cut < head) {
            GT_ASSERT_CODE(s, GT_E_TRUNCATED);
            continue;
        }
        GT_ASSERT_OK(s);
        assert_int_equal(has, hinted);
        assert_ptr_equal(body.data, mine.data + (hinted ? head : 0));
        assert_int_equal(body.len, cut - (hinted ? head : 0));
    }
    gt_buf_free_nowipe(&ev);
    gt_buf_free_nowipe(&mine);
    gt_policy_free(sim_ok);
}

int main(void)

{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepted_and_refused_trainers),
        cmocka_unit_test(different_agreement_or_stale),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
