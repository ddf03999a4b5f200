// The rollback-guard scenarios, run once per guard: test_rollback.c (sim) and
// test_rollback_tpm.c (a TPM: swtpm started by the test) include this header once and set
// rb_use_tpm before running the group. Each test gets a fresh folder, holder key and, for the
// TPM, a fresh swtpm on a state folder of its own.
#ifndef GT_TESTLIB_ROLLBACK_FIXTURE_H
#define GT_TESTLIB_ROLLBACK_FIXTURE_H

#include "testlib.h"
#include "swtpm.h"

#include <gputravel/holder.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char dir[256];
    char ledger[512];
    char counter[512];    // sim: the counter file
    char tpm_state[512];  // tpm: swtpm's state folder
    char sim_spec[600];
    gt_test_swtpm sw;
    uint8_t secret[GT_ED25519_SECRET_BYTES], pub[GT_ED25519_PUBLIC_BYTES];
} rb_env;

static rb_env env;
static bool rb_use_tpm;
static gt_test_swtpm rb_found;  // gt_test_swtpm_find's answer, copied into each test's env

static int rb_setup(void **state)
{
    (void)state;
    memset(&env, 0, sizeof env);
    if (rb_use_tpm && rb_found.exe[0] == '\0') {
        return 0;  // no swtpm: each test skips (rb_require); the caller exits 77
    }
    gt_test_tmpdir(env.dir, sizeof env.dir);
    GT_ASSERT_OK(gt_path_join(env.ledger, sizeof env.ledger, env.dir, "ledger.log"));
    GT_ASSERT_OK(gt_path_join(env.counter, sizeof env.counter, env.dir, "rollback.counter"));
    GT_ASSERT_OK(gt_path_join(env.tpm_state, sizeof env.tpm_state, env.dir, "tpm-state"));
    snprintf(env.sim_spec, sizeof env.sim_spec, "sim:%s", env.counter);
    GT_ASSERT_OK(gt_ed25519_keypair(env.pub, env.secret));
    if (rb_use_tpm) {
        env.sw = rb_found;
        gt_test_swtpm_start(&env.sw, env.tpm_state);
    }
    return 0;
}

// Every test's first line: skipped (counted so by cmocka, and the executable exits 77) without
// swtpm. cmocka counts a skip in a setup function as an error, so it is done here.
static void rb_require(void)
{
    if (rb_use_tpm && rb_found.exe[0] == '\0') {
        skip();
    }
}

static int rb_teardown(void **state)
{
    (void)state;
    if (env.dir[0] == '\0') {
        return 0;
    }
    gt_test_swtpm_stop(&env.sw);
    gt_test_rmtree(env.dir);
    gt_secure_zero(env.secret, sizeof env.secret);
    return 0;
}

static const char *rb_spec(void)
{
    return rb_use_tpm ? env.sw.spec : env.sim_spec;
}

// A fresh guard each time: a restarted swtpm listens on new ports.
static gt_err rb_open_at(const char *ledger, gt_rollback_guard **g, gt_ledger **l)
{
    *l = NULL;
    GT_TRY(gt_rollback_guard_open(g, rb_spec()));
    gt_err err = gt_ledger_open_guarded(l, ledger, env.secret, *g);
    if (!gt_is_ok(err)) {
        gt_rollback_guard_close(*g);
        *g = NULL;
    }
    return err;
}

static gt_err rb_open(gt_rollback_guard **g, gt_ledger **l)
{
    return rb_open_at(env.ledger, g, l);
}

static void rb_close(gt_rollback_guard *g, gt_ledger *l)
{
    gt_ledger_close(l);
    gt_rollback_guard_close(g);
}

static uint64_t rb_counter(void)
{
    gt_rollback_guard *g = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g, rb_spec()));
    uint64_t v = 0;
    bool written = false;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &written));
    gt_rollback_guard_close(g);
    assert_true(written);
    return v;
}

static void rb_grant(gt_ledger *l, int chunk, bool durable)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "chunk", chunk);
    cJSON_AddStringToObject(d, "trainer", "t1");
    if (durable) {
        GT_ASSERT_OK(gt_ledger_append(l, "grant", d));
    } else {
        GT_ASSERT_OK(gt_ledger_append_lazy(l, "use", d));
    }
    cJSON_Delete(d);
}

// A ledger of genesis plus n durable grants, closed.
static void rb_ledger_with(int n)
{
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    for (int i = 0; i < n; i++) {
        rb_grant(l, i, true);
    }
    rb_close(g, l);
}

static void rb_copy_file(const char *from, const char *to)
{
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(from, 1 << 26, &b));
    GT_ASSERT_OK(gt_file_write_atomic(to, b.data, b.len, 0600));
    gt_buf_free_nowipe(&b);
}

// Copies every regular file of a flat folder (swtpm's state) into another, created if missing.
static void rb_copy_dir(const char *from, const char *to)
{
    GT_ASSERT_OK(gt_mkdir_p(to, 0700));
    DIR *d = opendir(from);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_type != DT_REG) {
            continue;
        }
        char a[1024], b[1024];
        GT_ASSERT_OK(gt_path_join(a, sizeof a, from, e->d_name));
        GT_ASSERT_OK(gt_path_join(b, sizeof b, to, e->d_name));
        rb_copy_file(a, b);
    }
    closedir(d);
}

static void rb_path(char *out, size_t cap, const char *name)
{
    GT_ASSERT_OK(gt_path_join(out, cap, env.dir, name));
}

static void rb_expect_refused(const char *needle)
{
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    gt_err e = rb_open(&g, &l);
    if (e.code == GT_E_NONE) {
        rb_close(g, l);
        fail_msg("the ledger opened; expected a refusal naming '%s'", needle);
    }
    if (strstr(e.msg, needle) == NULL) {
        fail_msg("expected a refusal naming '%s', got %s: %s", needle, gt_code_name(e.code),
                 e.msg);
    }
    assert_null(l);
    assert_null(g);
}

// ---- the scenarios ------------------------------------------------------------------------------

// Each durable append is one batch: +1 on the counter; lazy entries join the next durable
// append's batch (or the sync's, or the close's); every entry carries its batch's value.
static void increments_are_exact(void **state)
{
    (void)state;
    rb_require();
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));  // a new ledger: the counter's first value, then genesis + 1
    uint64_t t0 = 0, v = 0;
    bool w = false;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &t0, &w));
    assert_true(w);
    for (int i = 0; i < 3; i++) {
        rb_grant(l, i, true);
        GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
        assert_int_equal(v, t0 + 1 + (uint64_t)i);
    }
    rb_grant(l, 3, false);
    rb_grant(l, 4, false);
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, t0 + 3);  // lazy: written, not yet a batch of its own
    rb_grant(l, 5, true);
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, t0 + 4);  // one increment for the three
    rb_grant(l, 6, false);
    rb_grant(l, 7, false);
    GT_ASSERT_OK(gt_ledger_sync(l));
    GT_ASSERT_OK(gt_ledger_sync(l));  // nothing open: no increment
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, t0 + 5);
    rb_close(g, l);
    assert_int_equal(rb_counter(), t0 + 5);  // a close with nothing open adds nothing
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_grant(l, 8, false);
    rb_close(g, l);
    assert_int_equal(rb_counter(), t0 + 6);  // the close makes the lazy batch durable

    // The counters the entries carry, read from the file's bodies.
    const uint64_t want[] = {t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4, t0 + 4, t0 + 4, t0 + 5, t0 + 5,
                             t0 + 6};
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(env.ledger, 1 << 20, &b));
    size_t at = 0, n = 0;
    while (at < b.len) {
        const uint8_t *nl = memchr(b.data + at, '\n', b.len - at);
        assert_non_null(nl);
        size_t body_len = (size_t)(nl - (b.data + at)) - (1 + 64 + 1 + 128);
        cJSON *doc = NULL;
        GT_ASSERT_OK(gt_json_parse((const char *)b.data + at, body_len, &doc));
        uint64_t c = 0;
        GT_ASSERT_OK(gt_json_get_u64(doc, "counter", &c));
        cJSON_Delete(doc);
        assert_true(n < sizeof want / sizeof want[0]);
        assert_int_equal(c, want[n]);
        n++;
        at = (size_t)(nl - b.data) + 1;
    }
    assert_int_equal(n, sizeof want / sizeof want[0]);
    gt_buf_free_nowipe(&b);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_true(s.anchored);
    assert_int_equal(s.counter, t0 + 6);
}

// Cut back to before its last entry (a line boundary: the prefix verifies on its own).
static void cut_back_is_refused(void **state)
{
    (void)state;
    rb_require();
    rb_ledger_with(3);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(env.ledger, 1 << 20, &b));
    size_t keep = b.len - 1;
    while (keep > 0 && b.data[keep - 1] != '\n') {
        keep--;
    }
    GT_ASSERT_OK(gt_file_write_atomic(env.ledger, b.data, keep, 0600));
    gt_buf_free_nowipe(&b);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));  // still a valid chain
    assert_int_equal(s.entries, 3);
    rb_expect_refused("is behind the guard's");
}

static void deleted_or_emptied_ledger_is_refused(void **state)
{
    (void)state;
    rb_require();
    rb_ledger_with(2);
    uint64_t before = rb_counter();
    assert_int_equal(unlink(env.ledger), 0);
    rb_expect_refused("no ledger (missing or empty)");
    GT_ASSERT_OK(gt_file_write_atomic(env.ledger, "", 0, 0600));
    rb_expect_refused("no ledger (missing or empty)");
    assert_int_equal(rb_counter(), before);  // a refusal moves nothing
}

// Another holder's ledger; and another ledger of this holder, anchored elsewhere.
static void replaced_ledger_is_refused(void **state)
{
    (void)state;
    rb_require();
    rb_ledger_with(2);
    char other[600];
    rb_path(other, sizeof other, "other.log");
    uint8_t opub[GT_ED25519_PUBLIC_BYTES], osec[GT_ED25519_SECRET_BYTES];
    GT_ASSERT_OK(gt_ed25519_keypair(opub, osec));
    gt_ledger *ol = NULL;
    GT_ASSERT_OK(gt_ledger_open(&ol, other, osec));
    gt_ledger_close(ol);
    gt_secure_zero(osec, sizeof osec);
    rb_copy_file(other, env.ledger);
    rb_expect_refused("another holder key");

    // The same holder's key, a ledger anchored to a counter of its own (a second counter file;
    // on the TPM, a second NV index): its counter values mean nothing to this one.
    char second[600], spec[700];
    rb_path(second, sizeof second, "second.log");
    if (rb_use_tpm) {
        snprintf(spec, sizeof spec, "tpm@0x01806775:%s", env.sw.spec + strlen("tpm:"));
    } else {
        snprintf(spec, sizeof spec, "sim:%s.second", env.counter);
    }
    gt_rollback_guard *g2 = NULL;
    GT_ASSERT_OK(gt_rollback_guard_open(&g2, spec));
    GT_ASSERT_OK(gt_ledger_open_guarded(&ol, second, env.secret, g2));
    for (int i = 0; i < 5; i++) {
        rb_grant(ol, i, true);
    }
    rb_close(g2, ol);
    rb_copy_file(second, env.ledger);
    rb_expect_refused("rollback: the ledger's counter");
    // And an old ledger of this holder that was never anchored.
    unlink(second);
    GT_ASSERT_OK(gt_ledger_open(&ol, second, env.secret));
    gt_ledger_close(ol);
    rb_copy_file(second, env.ledger);
    rb_expect_refused("carries no counter");
}

// An old copy of the ledger alone: behind the counter.
static void old_ledger_copy_is_refused(void **state)
{
    (void)state;
    rb_require();
    char old[600];
    rb_path(old, sizeof old, "ledger.old");
    rb_ledger_with(1);
    rb_copy_file(env.ledger, old);
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_grant(l, 7, true);
    rb_close(g, l);
    rb_copy_file(old, env.ledger);
    rb_expect_refused("is behind the guard's");
}

// An old copy of the ledger together with the anchor's own state (the sim counter file; swtpm's
// state folder) is a consistent old world: no guard that lives in a file can tell. A real TPM's
// counter cannot be copied back; this documents what swtpm and sim do not protect.
static void old_ledger_and_anchor_state_restored_is_not_caught(void **state)
{
    (void)state;
    rb_require();
    char old[600], old_anchor[600];
    rb_path(old, sizeof old, "ledger.old");
    rb_path(old_anchor, sizeof old_anchor, "anchor.old");
    rb_ledger_with(1);
    rb_copy_file(env.ledger, old);
    if (rb_use_tpm) {
        gt_test_swtpm_stop(&env.sw);  // its state is complete on disk once stopped
        rb_copy_dir(env.tpm_state, old_anchor);
        gt_test_swtpm_start(&env.sw, env.tpm_state);
    } else {
        rb_copy_file(env.counter, old_anchor);
    }
    uint64_t then = rb_counter();
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_grant(l, 7, true);  // the grant an attacker wants to undo
    rb_close(g, l);
    assert_int_equal(rb_counter(), then + 1);
    rb_copy_file(old, env.ledger);
    if (rb_use_tpm) {
        gt_test_swtpm_stop(&env.sw);
        rb_copy_dir(old_anchor, env.tpm_state);
        gt_test_swtpm_start(&env.sw, env.tpm_state);
    } else {
        rb_copy_file(old_anchor, env.counter);
    }
    assert_int_equal(rb_counter(), then);
    GT_ASSERT_OK(rb_open(&g, &l));  // opens: the rollback goes unnoticed
    rb_close(g, l);
}

static void crash_in_hook(void *ctx)
{
    (void)ctx;
    _exit(0);
}

// A real crash (the process exits) after an entry is durable and before its increment.
static void crash_between_write_and_increment_starts(void **state)
{
    (void)state;
    rb_require();
    rb_ledger_with(1);
    uint64_t before = rb_counter();
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gt_rollback_guard *g = NULL;
        gt_ledger *l = NULL;
        if (!gt_is_ok(rb_open(&g, &l))) {
            _exit(2);
        }
        gt_rollback_guard_set_test_hook(g, crash_in_hook, NULL);
        cJSON *d = cJSON_CreateObject();
        gt_err e = gt_ledger_append(l, "grant", d);  // the hook exits inside
        (void)e;
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_int_equal(s.entries, 3);
    assert_int_equal(s.counter, before + 1);  // the entry is there ...
    assert_int_equal(rb_counter(), before);   // ... its increment is not

    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));  // completes the batch
    uint64_t v = 0;
    bool w = false;
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, before + 1);
    rb_grant(l, 1, true);
    GT_ASSERT_OK(gt_rollback_guard_read(g, &v, &w));
    assert_int_equal(v, before + 2);
    rb_close(g, l);
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_int_equal(s.entries, 4);
    assert_int_equal(s.counter, before + 2);
}

// A torn last entry (a crash mid-write) never reached its increment: set aside, and the ledger
// matches its counter.
static void torn_entry_never_incremented(void **state)
{
    (void)state;
    rb_require();
    rb_ledger_with(2);
    uint64_t before = rb_counter();
    FILE *f = fopen(env.ledger, "ab");
    assert_non_null(f);
    fputs("{\"seq\":3,\"time\":1,\"prev\":\"00", f);
    fclose(f);
    gt_rollback_guard *g = NULL;
    gt_ledger *l = NULL;
    GT_ASSERT_OK(rb_open(&g, &l));
    rb_close(g, l);
    assert_int_equal(rb_counter(), before);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(env.ledger, env.pub, NULL, &s));
    assert_int_equal(s.entries, 3);
}

#define RB_SCENARIOS                                                                            \
    cmocka_unit_test_setup_teardown(increments_are_exact, rb_setup, rb_teardown),               \
    cmocka_unit_test_setup_teardown(cut_back_is_refused, rb_setup, rb_teardown),                \
    cmocka_unit_test_setup_teardown(deleted_or_emptied_ledger_is_refused, rb_setup,             \
                                    rb_teardown),                                               \
    cmocka_unit_test_setup_teardown(replaced_ledger_is_refused, rb_setup, rb_teardown),         \
    cmocka_unit_test_setup_teardown(old_ledger_copy_is_refused, rb_setup, rb_teardown),         \
    cmocka_unit_test_setup_teardown(old_ledger_and_anchor_state_restored_is_not_caught,         \
                                    rb_setup, rb_teardown),                                     \
    cmocka_unit_test_setup_teardown(crash_between_write_and_increment_starts, rb_setup,         \
                                    rb_teardown),                                               \
    cmocka_unit_test_setup_teardown(torn_entry_never_incremented, rb_setup, rb_teardown)

#endif
