// holder/: the hash-chained ledger survives reopening and concurrent appends, and every kind of
// tampering (edit, removal, reorder, truncation, another key) is detected with its reason.
#include "testlib.h"
#include "ledger_fixture.h"

#include <gputravel/holder.h>

#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static void append_n(gt_ledger *l, int n, const char *kind)
{
    for (int i = 0; i < n; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "chunk", i);
        cJSON_AddStringToObject(d, "trainer", "t1");
        GT_ASSERT_OK(gt_ledger_append(l, kind, d));
        cJSON_Delete(d);
    }
}

static void write_ledger(int entries)
{
    unlink(path);
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, secret));
    append_n(l, entries, "grant");
    gt_ledger_close(l);
}

static void chain_survives_reopen(void **state)
{
    (void)state;
    write_ledger(3);
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, secret));
    append_n(l, 2, "refuse");
    gt_ledger_close(l);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(path, pub, NULL, &s));
    assert_int_equal(s.entries, 6);
    assert_memory_equal(s.holder_key, pub, sizeof pub);

    // Another holder's key can neither verify as expected nor append.
    uint8_t other_pub[32], other_sec[32];
    GT_ASSERT_OK(gt_ed25519_keypair(other_pub, other_sec));
    GT_ASSERT_CODE(gt_ledger_verify_file(path, other_pub, NULL, &s), GT_E_AUTH);
    GT_ASSERT_CODE(gt_ledger_open(&l, path, other_sec), GT_E_AUTH);
}

typedef struct {
    gt_ledger *l;
    int n;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    for (int i = 0; i < a->n; i++) {
        if (!gt_is_ok(gt_ledger_append(a->l, "grant", NULL))) {
            return p;
        }
    }
    return NULL;
}

static void concurrent_appends_keep_the_chain(void **state)
{
    (void)state;
    unlink(path);
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, secret));
    pthread_t t[4];
    worker_arg a = {l, 25};
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, worker, &a);
    }
    for (int i = 0; i < 4; i++) {
        void *ret = NULL;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    // A second writer on the same file is refused while the first holds it.
    gt_ledger *second = NULL;
    GT_ASSERT_CODE(gt_ledger_open(&second, path, secret), GT_E_STATE);
    gt_ledger_close(l);
    gt_ledger_summary s;
    GT_ASSERT_OK(gt_ledger_verify_file(path, pub, NULL, &s));
    assert_int_equal(s.entries, 101);
}

// Applies `edit` to the ledger bytes and expects verification to fail with code and message.
static void expect_tamper(void (*edit)(gt_buf *), gt_code code, const char *says)
{
    write_ledger(4);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &b));
    edit(&b);
    gt_ledger_summary s;
    gt_err e = gt_ledger_verify_bytes(b.data, b.len, pub, NULL, &s);
    if (e.code != code || strstr(e.msg, says) == NULL) {
        fail_msg("expected %s '%s', got %s '%s'", gt_code_name(code), says, gt_code_name(e.code),
                 e.msg);
    }
    gt_buf_free(&b);
}

static size_t line_start(const gt_buf *b, int line)
{
    size_t at = 0;
    for (int i = 0; i < line; i++) {
        at = (size_t)((uint8_t *)memchr(b->data + at, '\n', b->len - at) - b->data) + 1;
    }
    return at;
}

static void edit_detail(gt_buf *b)
{
    char *p = strstr((char *)b->data + line_start(b, 2), "\"chunk\":1");
    p[8] = '7';
}
static void remove_line(gt_buf *b)
{
    size_t s = line_start(b, 2), e = line_start(b, 3);
    memmove(b->data + s, b->data + e, b->len - e);
    b->len -= e - s;
}
static void swap_lines(gt_buf *b)
{
    size_t s2 = line_start(b, 2), s3 = line_start(b, 3), s4 = line_start(b, 4);
    gt_buf tmp = {0};
    GT_ASSERT_OK(gt_buf_append(&tmp, b->data + s3, s4 - s3));
    GT_ASSERT_OK(gt_buf_append(&tmp, b->data + s2, s3 - s2));
    memcpy(b->data + s2, tmp.data, tmp.len);
    gt_buf_free(&tmp);
}
static void truncate_tail(gt_buf *b) { b->len -= 10; }
static void flip_signature(gt_buf *b)
{
    size_t e = line_start(b, 3) - 2;  // last hex digit of line 3's signature
    b->data[e] = b->data[e] == '0' ? '1' : '0';
}
static void drop_genesis(gt_buf *b)
{
    size_t e = line_start(b, 1);
    memmove(b->data, b->data + e, b->len - e);
    b->len -= e;
}

static void tampering_is_detected(void **state)
{
    (void)state;
    expect_tamper(edit_detail, GT_E_AUTH, "line 3: entry hash does not match");
    expect_tamper(remove_line, GT_E_FORMAT, "line 3: sequence number 3 where 2");
    expect_tamper(swap_lines, GT_E_FORMAT, "line 3: sequence number 3 where 2");
    expect_tamper(truncate_tail, GT_E_TRUNCATED, "incomplete last entry");
    expect_tamper(flip_signature, GT_E_AUTH, "line 3: entry signature does not verify");
    expect_tamper(drop_genesis, GT_E_FORMAT, "line 1: sequence number 1 where 0");
}

static void cli_verify_and_show(void **state)
{
    (void)state;
    write_ledger(2);
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"ledger", "show", path, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)out.data, "genesis"));
    assert_non_null(strstr((char *)out.data, "\"chunk\":1"));
    gt_buf_free(&out);
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", path, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)out.data, "3 entries"));
    gt_buf_free(&out);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &b));
    edit_detail(&b);
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    gt_buf_free(&b);
    rc = gt_test_run_cli(&out, (const char *[]){"ledger", "verify", path, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)out.data, "does not match"));
    gt_buf_free(&out);
    rc = gt_test_run_cli(NULL, (const char *[]){"ledger", "frobnicate", path, NULL});
    assert_int_equal(rc, 64);
}

// A crash mid-append: the ledger ends in a prefix of an entry. Opening sets it aside (kept, not
// replayed), keeps every complete entry and continues the chain; other damage still refuses.
static void torn_entry_set_aside(void **state)
{
    (void)state;
    write_ledger(3);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 20, &b));
    size_t full = b.len, last = line_start(&b, 3);
    size_t torn = (full - last) / 2;  // half of the last entry survived the crash
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, last + torn, 0600));
    gt_ledger_summary s;
    GT_ASSERT_CODE(gt_ledger_verify_file(path, pub, NULL, &s), GT_E_TRUNCATED);
    gt_ledger *l = NULL;
    GT_ASSERT_OK(gt_ledger_open(&l, path, secret));
    append_n(l, 1, "refuse");
    gt_ledger_close(l);
    GT_ASSERT_OK(gt_ledger_verify_file(path, pub, NULL, &s));
    assert_int_equal(s.entries, 4);  // genesis, 2 grants kept, the new entry
    // the torn bytes are beside the ledger, exactly
    char dir[600], pattern[1000];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    int found = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strstr(e->d_name, ".torn-") != NULL) {
            snprintf(pattern, sizeof pattern, "%s/%s", dir, e->d_name);
            gt_buf t = {0};
            GT_ASSERT_OK(gt_file_read_all(pattern, 1 << 20, &t));
            assert_int_equal(t.len, torn);
            assert_memory_equal(t.data, b.data + last, torn);
            gt_buf_free(&t);
            unlink(pattern);
            found++;
        }
    }
    closedir(d);
    assert_int_equal(found, 1);
    // ... and `ledger verify` names it (put back for the CLI to find)
    snprintf(pattern, sizeof pattern, "%s.torn-1", path);
    GT_ASSERT_OK(gt_file_write_atomic(pattern, b.data + last, torn, 0600));
    gt_buf out = {0};
    assert_int_equal(gt_test_run_cli(&out, (const char *[]){"ledger", "verify", path, NULL}), 0);
    assert_non_null(strstr((char *)out.data, "a torn last entry was set aside"));
    gt_buf_free(&out);
    unlink(pattern);
    // a complete but altered entry is tampering, not a crash: the ledger does not open
    edit_detail(&b);
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    GT_ASSERT_CODE(gt_ledger_open(&l, path, secret), GT_E_AUTH);
    gt_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chain_survives_reopen),
        cmocka_unit_test(concurrent_appends_keep_the_chain),
        cmocka_unit_test(tampering_is_detected),
        cmocka_unit_test(cli_verify_and_show),
        cmocka_unit_test(torn_entry_set_aside),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
