// holder/: the trainer's messages parse at their exact sizes only, and every truncation fails.
#include "testlib.h"

#include <gputravel/holder.h>

#include <string.h>

static void messages_parse_exactly(void **state)
{
    (void)state;
    // agreement hash 32 | signing key 32 | u16le name length | name
    uint8_t hello[32 + 32 + 2 + 9 + 1];
    memset(hello, 0x11, 32);
    for (int i = 0; i < 32; i++) {
        hello[32 + i] = (uint8_t)(0xA0 + i);
    }
    gt_store_u32le(hello + 64, 9);  // u16le 9, then the name overwrites the upper half
    memcpy(hello + 66, "trainer-1", 9);
    const size_t hello_len = sizeof hello - 1;
    gt_hp_hello h;
    GT_ASSERT_OK(gt_hp_hello_parse((gt_span){hello, hello_len}, &h));
    assert_string_equal(h.trainer, "trainer-1");
    assert_memory_equal(h.agreement, hello, 32);
    assert_memory_equal(h.signing_key, hello + 32, 32);
    for (size_t n = 0; n < hello_len; n++) {
        GT_ASSERT_CODE(gt_hp_hello_parse((gt_span){hello, n}, &h), GT_E_TRUNCATED);
        assert_int_equal(h.trainer[0] | h.signing_key[0], 0);  // nothing half-parsed survives
    }
    hello[hello_len] = 'x';  // one byte more than the name length says
    GT_ASSERT_CODE(gt_hp_hello_parse((gt_span){hello, hello_len + 1}, &h), GT_E_FORMAT);
    hello[64] = 0;  // an empty name
    GT_ASSERT_CODE(gt_hp_hello_parse((gt_span){hello, hello_len}, &h), GT_E_FORMAT);
    hello[64] = 9;
    hello[68] = '\n';  // unprintable
    GT_ASSERT_CODE(gt_hp_hello_parse((gt_span){hello, hello_len}, &h), GT_E_FORMAT);

    uint8_t fetch[6] = {GT_FETCH_KEYRELEASE, 7, 0, 0, 0, 0};
    gt_hp_fetch f;
    GT_ASSERT_OK(gt_hp_fetch_parse((gt_span){fetch, 5}, &f));
    assert_int_equal(f.chunk, 7);
    GT_ASSERT_CODE(gt_hp_fetch_parse((gt_span){fetch, 6}, &f), GT_E_FORMAT);  // one byte more
    GT_ASSERT_CODE(gt_hp_fetch_parse((gt_span){fetch, 4}, &f), GT_E_TRUNCATED);
    fetch[0] = GT_FETCH_TRAVEL;  // travel has its own message
    GT_ASSERT_CODE(gt_hp_fetch_parse((gt_span){fetch, 5}, &f), GT_E_FORMAT);

    uint8_t travel[4 + 32 + 2 + 4];
    gt_store_u32le(travel, 3);
    memset(travel + 4, 0x22, 32);
    travel[36] = 4;
    travel[37] = 0;
    memcpy(travel + 38, "/dev", 4);
    gt_hp_travel t;
    GT_ASSERT_OK(gt_hp_travel_parse((gt_span){travel, sizeof travel}, &t));
    assert_string_equal(t.device, "/dev");
    travel[39] = '\0';  // a NUL inside the address
    GT_ASSERT_CODE(gt_hp_travel_parse((gt_span){travel, sizeof travel}, &t), GT_E_FORMAT);
    for (size_t n = 0; n < sizeof travel; n++) {
        assert_int_not_equal(gt_hp_travel_parse((gt_span){travel, n}, &t).code, GT_E_NONE);
    }

    uint8_t used[13] = {0};
    gt_hp_used u;
    GT_ASSERT_OK(gt_hp_used_parse((gt_span){used, 12}, &u));
    GT_ASSERT_CODE(gt_hp_used_parse((gt_span){used, 13}, &u), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_hp_used_parse((gt_span){used, 11}, &u), GT_E_TRUNCATED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(messages_parse_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
