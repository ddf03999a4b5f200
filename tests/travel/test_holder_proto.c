// travel/: the holder protocol's writers and parsers (travel.h). Each message a writer makes
// parses back to the same fields; each parser refuses a body one byte short or long, and the
// field checks (names, modes, addresses) hold on both ends.
#include "testlib.h"

#include <gputravel/travel.h>

#include <string.h>

static gt_span written(gt_writer *w) { return (gt_span){w->data, w->len}; }

static void hello_round_trip(void **state)
{
    (void)state;
    gt_hp_hello m = {0}, back;
    memset(m.agreement, 0xa5, sizeof m.agreement);
    memset(m.signing_key, 0x3c, sizeof m.signing_key);
    strcpy(m.trainer, "trainer-1");
    uint8_t buf[GT_HP_HELLO_MAX_BYTES + 1];
    gt_writer w = gt_writer_init_fixed(buf, GT_HP_HELLO_MAX_BYTES);
    GT_ASSERT_OK(gt_hp_hello_write(&w, &m));
    GT_ASSERT_OK(gt_hp_hello_parse(written(&w), &back));
    assert_memory_equal(&m, &back, sizeof m);
    // One byte short, one byte long: refused, and nothing half-parsed is left.
    GT_ASSERT_CODE(gt_hp_hello_parse((gt_span){buf, w.len - 1}, &back), GT_E_TRUNCATED);
    assert_true(back.trainer[0] == 0);
    buf[w.len] = 'x';
    GT_ASSERT_CODE(gt_hp_hello_parse((gt_span){buf, w.len + 1}, &back), GT_E_FORMAT);
    // The longest name fits the declared maximum; a name of 64 bytes cannot be written.
    memset(m.trainer, 'n', 63);
    m.trainer[63] = 0;
    w = gt_writer_init_fixed(buf, GT_HP_HELLO_MAX_BYTES);
    GT_ASSERT_OK(gt_hp_hello_write(&w, &m));
    assert_int_equal(w.len, GT_HP_HELLO_MAX_BYTES);
    m.trainer[0] = 0;
    w = gt_writer_init_fixed(buf, GT_HP_HELLO_MAX_BYTES);
    GT_ASSERT_CODE(gt_hp_hello_write(&w, &m), GT_E_ARG);
}

static void fetch_travel_used_round_trip(void **state)
{
    (void)state;
    uint8_t buf[GT_HP_TRAVEL_MAX_BYTES];
    gt_writer w = gt_writer_init_fixed(buf, GT_HP_FETCH_BYTES);
    GT_ASSERT_OK(gt_hp_fetch_write(&w, &(gt_hp_fetch){.mode = GT_FETCH_KEYRELEASE, .chunk = 7}));
    gt_hp_fetch f;
    GT_ASSERT_OK(gt_hp_fetch_parse(written(&w), &f));
    assert_int_equal(f.mode, GT_FETCH_KEYRELEASE);
    assert_int_equal(f.chunk, 7);
    // TRAVEL is not a FETCH mode: a trainer asks for a trip with the TRAVEL message.
    w = gt_writer_init_fixed(buf, GT_HP_FETCH_BYTES);
    GT_ASSERT_OK(gt_hp_fetch_write(&w, &(gt_hp_fetch){.mode = GT_FETCH_TRAVEL, .chunk = 7}));
    GT_ASSERT_CODE(gt_hp_fetch_parse(written(&w), &f), GT_E_FORMAT);

    gt_hp_travel t = {.chunk = 3}, tb;
    memset(t.ticket, 0x77, sizeof t.ticket);
    memset(t.device, 'a', sizeof t.device - 1);  // the longest address
    w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_hp_travel_write(&w, &t));
    assert_int_equal(w.len, GT_HP_TRAVEL_MAX_BYTES);
    GT_ASSERT_OK(gt_hp_travel_parse(written(&w), &tb));
    assert_memory_equal(&t, &tb, sizeof t);
    // A NUL inside the address is refused by the parser (a writer cannot make one).
    buf[4 + 32 + 2 + 5] = 0;
    GT_ASSERT_CODE(gt_hp_travel_parse(written(&w), &tb), GT_E_FORMAT);

    w = gt_writer_init_fixed(buf, GT_HP_USED_BYTES);
    GT_ASSERT_OK(gt_hp_used_write(&w, &(gt_hp_used){.chunk = 9, .tokens = 1ull << 40}));
    gt_hp_used u;
    GT_ASSERT_OK(gt_hp_used_parse(written(&w), &u));
    assert_int_equal(u.chunk, 9);
    assert_true(u.tokens == 1ull << 40);
    GT_ASSERT_CODE(gt_hp_used_parse((gt_span){buf, w.len - 1}, &u), GT_E_TRUNCATED);
}

static void refuse_and_travelled(void **state)
{
    (void)state;
    uint8_t buf[GT_HP_MAX_CONTROL];
    gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_hp_refuse_write(&w, gt_errf(GT_E_LIMIT, "budget spent")));
    gt_err e = gt_hp_refuse_error(written(&w), "bank");
    assert_int_equal(e.code, GT_E_POLICY);
    assert_string_equal(e.msg, "holder bank refused: budget spent");
    GT_ASSERT_CODE(gt_hp_refuse_error((gt_span){buf, 3}, "bank"), GT_E_TRUNCATED);

    // The refusal's scope is its code, never its wording: a verdict worded like an interruption
    // stays a verdict, and GT_E_RETRY (this chunk only) survives whatever the text says.
    w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_hp_refuse_write(&w, gt_errf(GT_E_POLICY, "trip failed: or so it says")));
    assert_int_equal(gt_hp_refuse_error(written(&w), "bank").code, GT_E_POLICY);
    w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_hp_refuse_write(&w, gt_errf(GT_E_RETRY, "chunk 3 already sent 2 time(s)")));
    e = gt_hp_refuse_error(written(&w), "bank");
    assert_int_equal(e.code, GT_E_RETRY);
    assert_string_equal(e.msg, "holder bank refused: chunk 3 already sent 2 time(s)");

    w = gt_writer_init_fixed(buf, 8);
    GT_ASSERT_OK(gt_hp_travelled_write(&w, 123456));
    uint64_t n = 0;
    GT_ASSERT_OK(gt_hp_travelled_parse(written(&w), &n));
    assert_true(n == 123456);
    GT_ASSERT_CODE(gt_hp_travelled_parse((gt_span){buf, 7}, &n), GT_E_TRUNCATED);
    assert_true(n == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hello_round_trip),
        cmocka_unit_test(fetch_travel_used_round_trip),
        cmocka_unit_test(refuse_and_travelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
