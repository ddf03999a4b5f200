// device/: the buffer table itself (device.h "the buffer table"), below every backend: handles
// that never resolve again, the limit counted in 64-byte spans, the buffer count, overflow-safe
// ranges, the copy_out door, foreign entries, iteration while releasing. The same rules seen
// through each backend are in test_device_conformance.c.
#include "testlib.h"

#include <gputravel/device.h>

#include <stdint.h>
#include <string.h>

static gt_buftab *table(uint64_t limit, uint32_t max_buffers)
{
    gt_buftab *t = NULL;
    gt_buftab_config cfg = {.mem_limit = limit, .max_buffers = max_buffers, .limit_hint = "hint"};
    GT_ASSERT_OK(gt_buftab_new(&t, &cfg));
    return t;
}

static gt_dbuf alloc(gt_buftab *t, uint64_t bytes, uint32_t flags, uint64_t owner)
{
    gt_dbuf h = 0;
    gt_buftab_entry *e = NULL;
    GT_ASSERT_OK(gt_buftab_alloc(t, bytes, flags, owner, &h, &e));
    assert_true(h != 0);
    assert_int_equal(e->bytes, bytes);
    return h;
}

static void handles_never_resolve_again(void **state)
{
    (void)state;
    gt_buftab *t = table(0, 0);
    gt_buftab_entry *e = NULL;
    gt_dbuf a = alloc(t, 10, 0, 7), b = alloc(t, 20, 0, 7);
    assert_true(a != b);
    GT_ASSERT_OK(gt_buftab_find(t, a, 7, &e));
    assert_int_equal(e->bytes, 10);
    GT_ASSERT_CODE(gt_buftab_find(t, a, 8, &e), GT_E_NOTFOUND);  // another owner's
    GT_ASSERT_CODE(gt_buftab_find(t, 0, 7, &e), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_buftab_find(t, a + 1000, 7, &e), GT_E_NOTFOUND);     // no such slot
    GT_ASSERT_CODE(gt_buftab_find(t, a + (1ull << 32), 7, &e), GT_E_NOTFOUND);  // other gen
    GT_ASSERT_CODE(gt_buftab_find(t, a & 0xffffffffu, 7, &e), GT_E_NOTFOUND);   // gen 0
    // the slot's next entry: same low half, another generation; the old handle stays dead
    GT_ASSERT_OK(gt_buftab_find(t, a, 7, &e));
    e->ext.devd.trip = 99;
    e->at.offset = 4096;
    gt_buftab_release(t, a);
    GT_ASSERT_CODE(gt_buftab_find(t, a, 7, &e), GT_E_NOTFOUND);
    gt_dbuf c = alloc(t, 30, 0, 7);
    assert_int_equal(c & 0xffffffffu, a & 0xffffffffu);
    assert_true(c != a);
    GT_ASSERT_CODE(gt_buftab_find(t, a, 7, &e), GT_E_NOTFOUND);
    GT_ASSERT_OK(gt_buftab_find(t, c, 7, &e));
    assert_int_equal(e->bytes, 30);
    assert_int_equal(e->ext.devd.trip, 0);  // a reused slot starts clean
    assert_int_equal(e->at.offset, 0);
    GT_ASSERT_OK(gt_buftab_find(t, b, 7, &e));
    assert_int_equal(gt_buftab_live(t), 2);
    gt_buftab_free(t);
}

static void limit_counts_spans(void **state)
{
    (void)state;
    gt_buftab *t = table(256, 0);
    assert_int_equal(gt_buftab_limit(t), 256);
    gt_dbuf h = 1;
    gt_buftab_entry dummy, *e = &dummy;  // both are cleared on failure
    GT_ASSERT_CODE(gt_buftab_alloc(t, 0, 0, 0, &h, &e), GT_E_ARG);
    assert_int_equal(h, 0);
    assert_null(e);
    GT_ASSERT_CODE(gt_buftab_alloc(t, 8, 0x2, 0, &h, &e), GT_E_ARG);  // unknown flag
    GT_ASSERT_CODE(gt_buftab_alloc(t, 257, 0, 0, &h, &e), GT_E_LIMIT);
    GT_ASSERT_CODE(gt_buftab_alloc(t, UINT64_MAX, 0, 0, &h, &e), GT_E_LIMIT);
    gt_dbuf a = alloc(t, 65, 0, 0);  // span 128
    GT_ASSERT_OK(gt_buftab_find(t, a, 0, &e));
    assert_int_equal(e->span, 128);
    assert_int_equal(gt_buftab_used(t), 128);
    gt_dbuf b = alloc(t, 64, GT_DBUF_NO_READBACK, 0);
    gt_err err = gt_buftab_alloc(t, 65, 0, 0, &h, &e);  // 128 more would be 320
    GT_ASSERT_CODE(err, GT_E_LIMIT);
    assert_non_null(strstr(err.msg, "exhausted"));
    assert_non_null(strstr(err.msg, "hint"));
    gt_dbuf c = alloc(t, 64, 0, 0);
    assert_int_equal(gt_buftab_used(t), 256);
    GT_ASSERT_CODE(gt_buftab_alloc(t, 1, 0, 0, &h, &e), GT_E_LIMIT);
    gt_buftab_release(t, a);
    assert_int_equal(gt_buftab_used(t), 128);
    gt_dbuf d = alloc(t, 128, 0, 0);
    assert_int_equal(gt_buftab_used(t), 256);
    gt_buftab_release(t, b);
    gt_buftab_release(t, c);
    gt_buftab_release(t, d);
    assert_int_equal(gt_buftab_used(t), 0);
    assert_int_equal(gt_buftab_live(t), 0);
    gt_buftab_free(t);
    t = table(0, 0);  // no limit given: the table's own
    assert_int_equal(gt_buftab_limit(t), GT_BUFTAB_MAX_BYTES);
    GT_ASSERT_CODE(gt_buftab_alloc(t, GT_BUFTAB_MAX_BYTES + 1, 0, 0, &h, &e), GT_E_LIMIT);
    gt_buftab_free(t);
}

static void buffer_count_limit(void **state)
{
    (void)state;
    gt_buftab *t = table(0, 3);
    gt_dbuf h[3], x = 0;
    gt_buftab_entry *e = NULL;
    for (int i = 0; i < 3; i++) {
        h[i] = alloc(t, 1, 0, 0);
    }
    GT_ASSERT_CODE(gt_buftab_alloc(t, 1, 0, 0, &x, &e), GT_E_LIMIT);
    GT_ASSERT_CODE(gt_buftab_import(t, 1, 0, 0, &x, &e), GT_E_LIMIT);  // foreign ones count
    gt_buftab_release(t, h[1]);
    h[1] = alloc(t, 1, 0, 0);
    for (int i = 0; i < 3; i++) {
        gt_buftab_release(t, h[i]);
    }
    gt_buftab_free(t);
}

static void ranges_never_wrap(void **state)
{
    (void)state;
    gt_buftab *t = table(0, 0);
    gt_dbuf a = alloc(t, 100, 0, 0);
    gt_buftab_entry *e = NULL;
    GT_ASSERT_OK(gt_buftab_find(t, a, 0, &e));
    GT_ASSERT_OK(gt_buftab_range(e, a, 0, 100, "x"));
    GT_ASSERT_OK(gt_buftab_range(e, a, 100, 0, "x"));  // empty, at the end
    GT_ASSERT_OK(gt_buftab_range(e, a, 99, 1, "x"));
    GT_ASSERT_CODE(gt_buftab_range(e, a, 0, 101, "x"), GT_E_ARG);
    GT_ASSERT_CODE(gt_buftab_range(e, a, 99, 2, "x"), GT_E_ARG);
    GT_ASSERT_CODE(gt_buftab_range(e, a, 101, 0, "x"), GT_E_ARG);
    GT_ASSERT_CODE(gt_buftab_range(e, a, 1, UINT64_MAX, "x"), GT_E_ARG);      // 1 + len wraps
    GT_ASSERT_CODE(gt_buftab_range(e, a, UINT64_MAX, 2, "x"), GT_E_ARG);      // so does this
    GT_ASSERT_CODE(gt_buftab_range(e, a, 64, UINT64_MAX - 63, "x"), GT_E_ARG);  // sum is 0
    gt_buftab_entry *got = NULL;
    GT_ASSERT_OK(gt_buftab_access(t, a, 0, 10, 90, "x", &got));
    assert_ptr_equal(got, e);
    got = NULL;
    GT_ASSERT_CODE(gt_buftab_access(t, a, 0, 10, 91, "x", &got), GT_E_ARG);
    assert_null(got);
    GT_ASSERT_CODE(gt_buftab_access(t, a, 1, 0, 1, "x", &got), GT_E_NOTFOUND);  // owner first
    gt_buftab_free(t);
}

static void read_out_is_the_door(void **state)
{
    (void)state;
    gt_buftab *t = table(0, 0);
    gt_dbuf plain = alloc(t, 16, 0, 0), secret = alloc(t, 16, GT_DBUF_NO_READBACK, 0);
    gt_buftab_entry *e = NULL;
    GT_ASSERT_OK(gt_buftab_read_out(t, plain, 0, 0, 16, &e));
    GT_ASSERT_CODE(gt_buftab_read_out(t, plain, 0, 0, 17, &e), GT_E_ARG);
    GT_ASSERT_CODE(gt_buftab_read_out(t, secret, 0, 0, 16, &e), GT_E_POLICY);
    GT_ASSERT_CODE(gt_buftab_read_out(t, secret, 0, 0, 0, &e), GT_E_POLICY);
    GT_ASSERT_CODE(gt_buftab_read_out(t, secret, 0, 1000, 1, &e), GT_E_POLICY);  // before range
    GT_ASSERT_OK(gt_buftab_access(t, secret, 0, 0, 16, "write", &e));  // writes are fine
    gt_buftab_release(t, secret);
    GT_ASSERT_CODE(gt_buftab_read_out(t, secret, 0, 0, 16, &e), GT_E_NOTFOUND);
    gt_buftab_free(t);
}

static void foreign_entries_do_not_count(void **state)
{
    (void)state;
    gt_buftab *t = table(128, 0);
    gt_dbuf own = alloc(t, 128, 0, 0), imp = 0;
    gt_buftab_entry *e = NULL;
    GT_ASSERT_OK(gt_buftab_import(t, 1u << 20, GT_DBUF_NO_READBACK, 0, &imp, &e));
    assert_true(e->foreign);
    assert_int_equal(gt_buftab_used(t), 128);
    assert_int_equal(gt_buftab_live(t), 2);
    GT_ASSERT_CODE(gt_buftab_read_out(t, imp, 0, 0, 1, &e), GT_E_POLICY);
    GT_ASSERT_CODE(gt_buftab_import(t, 0, 0, 0, &imp, &e), GT_E_ARG);
    GT_ASSERT_CODE(gt_buftab_import(t, 1, 0x4, 0, &imp, &e), GT_E_ARG);
    GT_ASSERT_CODE(gt_buftab_import(t, UINT64_MAX, 0, 0, &imp, &e), GT_E_ARG);  // span wraps
    gt_buftab_release(t, own);
    assert_int_equal(gt_buftab_used(t), 0);
    size_t cursor = 0;
    gt_dbuf h = 0;
    e = gt_buftab_next(t, &cursor, &h);
    assert_non_null(e);
    assert_true(e->foreign);
    gt_buftab_release(t, h);
    assert_int_equal(gt_buftab_used(t), 0);
    gt_buftab_free(t);
}

static void iteration_while_releasing(void **state)
{
    (void)state;
    gt_buftab *t = table(0, 0);
    gt_dbuf h[10];
    for (int i = 0; i < 10; i++) {
        h[i] = alloc(t, (uint64_t)i + 1, 0, (uint64_t)(i % 2));
    }
    gt_buftab_release(t, h[3]);
    size_t cursor = 0, seen = 0;
    gt_dbuf x = 0;
    for (gt_buftab_entry *e; (e = gt_buftab_next(t, &cursor, &x)) != NULL;) {
        gt_buftab_entry *again = NULL;
        GT_ASSERT_OK(gt_buftab_find(t, x, e->owner, &again));  // the handle it gives resolves
        assert_ptr_equal(again, e);
        seen++;
        if (e->owner == 1) {
            gt_buftab_release(t, x);  // the one just returned: allowed
        }
    }
    assert_int_equal(seen, 9);
    assert_int_equal(gt_buftab_live(t), 5);  // the five of owner 0
    cursor = 0;
    for (gt_buftab_entry *e; (e = gt_buftab_next(t, &cursor, &x)) != NULL;) {
        assert_int_equal(e->owner, 0);
        gt_buftab_release(t, x);
    }
    assert_int_equal(gt_buftab_live(t), 0);
    assert_null(gt_buftab_next(t, &cursor, &x));
    assert_int_equal(x, 0);
    gt_buftab_free(t);
    gt_buftab_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handles_never_resolve_again),
        cmocka_unit_test(limit_counts_spans),
        cmocka_unit_test(buffer_count_limit),
        cmocka_unit_test(ranges_never_wrap),
        cmocka_unit_test(read_out_is_the_door),
        cmocka_unit_test(foreign_entries_do_not_count),
        cmocka_unit_test(iteration_while_releasing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
