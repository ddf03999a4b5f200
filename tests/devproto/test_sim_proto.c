// The sim device wire protocol on its own: every message at its exact size (one byte more or
// less is refused), handshake messages, IV counters, record replay/reorder/tamper, key agreement.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <string.h>

#include <gputravel/devproto.h>

static size_t write_msg(const gt_sim_msg *m, uint8_t *buf, size_t cap)
{
    gt_writer w = gt_writer_init_fixed(buf, cap);
    GT_ASSERT_OK(gt_sim_msg_write(&w, m));
    return w.len;
}

static void test_every_message_exact_size(void **state)
{
    (void)state;
    gt_sim_msg msgs[] = {
        {.type = GT_SIM_REQ_ALLOC, .len = 123, .flags = 1},
        {.type = GT_SIM_REQ_FREE, .handle = 7},
        {.type = GT_SIM_REQ_SIZE, .handle = 8},
        {.type = GT_SIM_REQ_MEMSET, .handle = 9, .offset = 10, .value = 0xab, .len = 11},
        {.type = GT_SIM_REQ_COPY_IN, .handle = 1, .offset = 2, .len = 3},
        {.type = GT_SIM_REQ_COPY_OUT, .handle = 4, .offset = 5, .len = 6},
        {.type = GT_SIM_REQ_LAUNCH, .op = {.kind = 5, .refs = {{1, 2}, {3, 4}},
                                           .ints = {-1, 2, 3}, .floats = {0.5f, -2.0f}}},
        {.type = GT_SIM_REQ_SYNC},
        {.type = GT_SIM_REQ_BYE},
        {.type = GT_SIM_REQ_STAT},
        {.type = GT_SIM_MSG_CHUNK, .slot = 3, .len = 4096},
        {.type = GT_SIM_MSG_SLOT_FREE, .slot = 1},
        {.type = GT_SIM_REP_STATUS, .status = {.code = GT_E_LIMIT, .msg = "too big"}},
        {.type = GT_SIM_REP_HANDLE, .handle = 99},
        {.type = GT_SIM_REP_SIZE, .len = 1234},
        {.type = GT_SIM_REP_STAT, .stat = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 1, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
    };
    const size_t sizes[] = {14, 10, 10, 30, 26, 26, 2 + GT_SIM_OP_BYTES, 2, 2, 2, 10, 6,
                            8 + 7, 10, 10, 42 + 19 * 8};  // STAT: + the pager's 8 (version 3), the prefetcher's 8 (4), mmap calls and split matmuls (6), discards (7)
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        uint8_t buf[512];
        size_t n = write_msg(&msgs[i], buf, sizeof buf);
        assert_int_equal(n, sizes[i]);
        gt_sim_msg back;
        GT_ASSERT_OK(gt_sim_msg_parse((gt_span){buf, n}, &back));
        assert_int_equal(back.type, msgs[i].type);
        // re-serialising gives the same bytes
        uint8_t again[512];
        assert_int_equal(write_msg(&back, again, sizeof again), n);
        assert_memory_equal(buf, again, n);
        // one byte more, and every shorter length, are refused
        gt_sim_msg junk;
        buf[n] = 0;
        assert_false(gt_is_ok(gt_sim_msg_parse((gt_span){buf, n + 1}, &junk)));
        for (size_t k = 0; k < n; k++) {
            assert_false(gt_is_ok(gt_sim_msg_parse((gt_span){buf, k}, &junk)));
        }
    }
    // field checks
    uint8_t buf[64];
    gt_sim_msg m = {.type = GT_SIM_REQ_MEMSET, .value = 0x100};
    size_t n = write_msg(&m, buf, sizeof buf);
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, n}, &m), GT_E_FORMAT);
    gt_sim_msg c = {.type = GT_SIM_MSG_CHUNK, .slot = GT_SIM_MAX_SLOTS};
    n = write_msg(&c, buf, sizeof buf);
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, n}, &c), GT_E_FORMAT);
    gt_sim_msg st = {.type = GT_SIM_REP_STATUS, .status = {.code = GT_E_COUNT_}};
    n = write_msg(&st, buf, sizeof buf);
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, n}, &st), GT_E_FORMAT);
    uint8_t big[512];  // STAT's prefetch flag is 0 or 1 (version 4)
    gt_sim_msg sr = {.type = GT_SIM_REP_STAT, .stat = {.prefetch = 2}};
    n = write_msg(&sr, big, sizeof big);
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){big, n}, &sr), GT_E_FORMAT);
    buf[0] = 0x99;
    buf[1] = 0x99;
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, 2}, &st), GT_E_FORMAT);
}

// The peer records (issue 16): each at its exact size, every field back, nothing shorter or
// longer, no open mode but add and copy.
static void test_peer_messages(void **state)
{
    (void)state;
    gt_sim_peer hdr = {.run = {1, 2, 3}, .step = 7, .elem_off = 9, .nelem = 10, .bucket = 11,
                       .hop = 12, .src = 1, .dst = 2};
    gt_sim_peer open = hdr;
    open.mode = 2;
    open.chunk = 0x300000004;
    open.chunk_len = 356;
    gt_sim_msg msgs[] = {
        {.type = GT_SIM_REQ_PEER_HELLO, .peer = {.rank = 3, .nranks = 4}},
        {.type = GT_SIM_REQ_PEER_ADMIT, .handle = 5, .len = 900, .peer = {.rank = 1}},
        {.type = GT_SIM_REQ_PEER_RUN_ID},
        {.type = GT_SIM_REP_PEER_RUN, .peer = {.run = {9, 8, 7}}},
        {.type = GT_SIM_REQ_PEER_SEAL, .handle = 6, .peer = hdr},
        {.type = GT_SIM_REQ_PEER_OPEN, .handle = 7, .peer = open},
    };
    const size_t sizes[] = {10, 22, 2, 18, 2 + 56 + 8, 2 + 56 + 28};  // header: 56 bytes
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        uint8_t buf[256];
        size_t n = write_msg(&msgs[i], buf, sizeof buf);
        assert_int_equal(n, sizes[i]);
        gt_sim_msg back;
        GT_ASSERT_OK(gt_sim_msg_parse((gt_span){buf, n}, &back));
        assert_int_equal(back.type, msgs[i].type);
        assert_int_equal(back.handle, msgs[i].handle);
        assert_int_equal(back.len, msgs[i].len);
        assert_memory_equal(&back.peer, &msgs[i].peer, sizeof back.peer);
        gt_sim_msg junk;
        buf[n] = 0;
        assert_false(gt_is_ok(gt_sim_msg_parse((gt_span){buf, n + 1}, &junk)));
        for (size_t k = 0; k < n; k++) {
            assert_false(gt_is_ok(gt_sim_msg_parse((gt_span){buf, k}, &junk)));
        }
    }
    gt_sim_msg bad = {.type = GT_SIM_REQ_PEER_OPEN, .peer = hdr};  // mode 0
    uint8_t buf[256];
    size_t n = write_msg(&bad, buf, sizeof buf);
    GT_ASSERT_ERR(gt_sim_msg_parse((gt_span){buf, n}, &bad), GT_E_FORMAT, "mode");
}

static void test_op_round_trip(void **state)
{
    (void)state;
    gt_op op;
    memset(&op, 0, sizeof op);
    op.kind = 17;
    for (int i = 0; i < GT_OP_MAX_REFS; i++) {
        op.refs[i] = (gt_dref){.buf = 1000u + (uint64_t)i, .offset = (uint64_t)i << 40};
    }
    for (int i = 0; i < GT_OP_MAX_INTS; i++) {
        op.ints[i] = -(int64_t)i * 123456789;
    }
    for (int i = 0; i < GT_OP_MAX_FLOATS; i++) {
        op.floats[i] = (float)i * -0.25f;
    }
    uint8_t buf[GT_SIM_OP_BYTES];
    gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_sim_op_write(&w, &op));
    assert_int_equal(w.len, GT_SIM_OP_BYTES);
    gt_reader r = gt_reader_init(buf, w.len);
    gt_op back;
    GT_ASSERT_OK(gt_sim_op_parse(&r, &back));
    assert_memory_equal(&op, &back, sizeof op);
}

static void test_handshake_messages(void **state)
{
    (void)state;
    gt_sim_client_hello ch;
    memset(&ch, 0, sizeof ch);
    ch.version = GT_SIM_VERSION;
    memset(ch.nonce, 1, sizeof ch.nonce);
    memset(ch.server_nonce, 4, sizeof ch.server_nonce);
    memset(ch.pub, 2, sizeof ch.pub);
    memset(ch.agreement, 3, sizeof ch.agreement);
    ch.evidence = (gt_span){(const uint8_t *)"evidence", 8};
    uint8_t buf[512];
    gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_sim_client_hello_write(&w, &ch));
    assert_int_equal(w.len, GT_SIM_CLIENT_HELLO_FIXED + 8);
    gt_sim_client_hello back;
    GT_ASSERT_OK(gt_sim_client_hello_parse((gt_span){buf, w.len}, &back));
    assert_memory_equal(back.evidence.data, "evidence", 8);
    for (size_t k = 0; k < w.len; k++) {
        assert_false(gt_is_ok(gt_sim_client_hello_parse((gt_span){buf, k}, &back)));
    }
    buf[w.len] = 0;
    GT_ASSERT_CODE(gt_sim_client_hello_parse((gt_span){buf, w.len + 1}, &back), GT_E_FORMAT);
    assert_memory_equal(back.server_nonce, ch.server_nonce, sizeof ch.server_nonce);
    buf[2] = (uint8_t)(GT_SIM_VERSION + 1);  // version
    GT_ASSERT_CODE(gt_sim_client_hello_parse((gt_span){buf, w.len}, &back), GT_E_UNSUPPORTED);

    // devd's challenge: exact size, its version, nothing else parses as one
    uint8_t nonce[GT_SIM_NONCE_BYTES], got[GT_SIM_NONCE_BYTES];
    memset(nonce, 9, sizeof nonce);
    w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_sim_challenge_write(&w, nonce));
    assert_int_equal(w.len, GT_SIM_CHALLENGE_BYTES);
    GT_ASSERT_OK(gt_sim_challenge_parse((gt_span){buf, w.len}, got));
    assert_memory_equal(got, nonce, sizeof nonce);
    for (size_t k = 0; k < w.len; k++) {
        assert_false(gt_is_ok(gt_sim_challenge_parse((gt_span){buf, k}, got)));
    }
    GT_ASSERT_CODE(gt_sim_challenge_parse((gt_span){buf, w.len + 1}, got), GT_E_FORMAT);
    buf[2] = (uint8_t)(GT_SIM_VERSION + 1);
    GT_ASSERT_CODE(gt_sim_challenge_parse((gt_span){buf, w.len}, got), GT_E_UNSUPPORTED);

    gt_sim_server_hello sh;
    memset(&sh, 0, sizeof sh);
    sh.version = GT_SIM_VERSION;
    sh.slot_count = 4;
    sh.slot_bytes = 1u << 20;
    sh.mem_limit = 1u << 30;
    w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_sim_server_hello_write(&w, &sh));
    gt_sim_server_hello sb;
    GT_ASSERT_OK(gt_sim_server_hello_parse((gt_span){buf, w.len}, &sb));
    assert_int_equal(sb.slot_count, 4);
    const uint32_t bad_slots[][2] = {{1, 4096}, {GT_SIM_MAX_SLOTS + 1, 4096}, {2, 4095},
                                     {2, 4097}, {2, GT_SIM_MAX_SLOT_BYTES + 4096}};
    for (size_t i = 0; i < sizeof bad_slots / sizeof bad_slots[0]; i++) {
        sh.slot_count = bad_slots[i][0];
        sh.slot_bytes = bad_slots[i][1];
        w = gt_writer_init_fixed(buf, sizeof buf);
        GT_ASSERT_OK(gt_sim_server_hello_write(&w, &sh));
        GT_ASSERT_CODE(gt_sim_server_hello_parse((gt_span){buf, w.len}, &sb), GT_E_FORMAT);
    }
    // refuse
    w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_sim_refuse_write(&w, gt_errf(GT_E_STATE, "busy\n\x01")));
    gt_sim_status st;
    GT_ASSERT_OK(gt_sim_refuse_parse((gt_span){buf, w.len}, &st));
    assert_int_equal(st.code, GT_E_STATE);
    assert_string_equal(st.msg, "busy??");  // control characters never reach a terminal
    GT_ASSERT_CODE(gt_sim_client_hello_parse((gt_span){buf, w.len}, &back), GT_E_FORMAT);
}

static void make_pair(gt_sim_keys *client, gt_sim_keys *server)
{
    uint8_t cpub[32], csec[32], spub[32], ssec[32], s1[32], s2[32];
    GT_ASSERT_OK(gt_x25519_keypair(cpub, csec));
    GT_ASSERT_OK(gt_x25519_keypair(spub, ssec));
    GT_ASSERT_OK(gt_x25519_shared(s1, spub, csec));
    GT_ASSERT_OK(gt_x25519_shared(s2, cpub, ssec));
    gt_span ch = {(const uint8_t *)"client hello", 12}, sh = {(const uint8_t *)"server hello", 12};
    GT_ASSERT_OK(gt_sim_keys_derive(client, true, s1, ch, sh));
    GT_ASSERT_OK(gt_sim_keys_derive(server, false, s2, ch, sh));
    assert_memory_equal(client->key_c2s, server->key_c2s, 32);
    assert_memory_equal(client->key_s2c, server->key_s2c, 32);
    assert_memory_not_equal(client->key_c2s, client->key_s2c, 32);
}

static void test_records(void **state)
{
    (void)state;
    gt_sim_keys c, s;
    make_pair(&c, &s);
    uint8_t r1[64], r2[64], plain[64];
    size_t l1 = 0, l2 = 0, pl = 0;
    GT_ASSERT_OK(gt_sim_record_seal(&c, r1, sizeof r1, &l1, (const uint8_t *)"first", 5));
    GT_ASSERT_OK(gt_sim_record_seal(&c, r2, sizeof r2, &l2, (const uint8_t *)"second", 6));
    // reordered: the second record does not open at the first counter
    gt_sim_keys s_copy = s;
    GT_ASSERT_CODE(gt_sim_record_open(&s_copy, plain, sizeof plain, &pl, (gt_span){r2, l2}),
                   GT_E_AUTH);
    assert_int_equal(pl, 0);
    // in order: fine
    GT_ASSERT_OK(gt_sim_record_open(&s, plain, sizeof plain, &pl, (gt_span){r1, l1}));
    assert_memory_equal(plain, "first", 5);
    // replayed: refused
    s_copy = s;
    GT_ASSERT_CODE(gt_sim_record_open(&s_copy, plain, sizeof plain, &pl, (gt_span){r1, l1}),
                   GT_E_AUTH);
    GT_ASSERT_OK(gt_sim_record_open(&s, plain, sizeof plain, &pl, (gt_span){r2, l2}));
    assert_memory_equal(plain, "second", 6);
    // tampered, truncated, reflected
    GT_ASSERT_OK(gt_sim_record_seal(&c, r1, sizeof r1, &l1, (const uint8_t *)"third", 5));
    for (size_t i = 0; i < l1; i++) {
        s_copy = s;
        r1[i] ^= 4;
        GT_ASSERT_CODE(gt_sim_record_open(&s_copy, plain, sizeof plain, &pl, (gt_span){r1, l1}),
                       GT_E_AUTH);
        r1[i] ^= 4;
    }
    s_copy = s;
    GT_ASSERT_CODE(gt_sim_record_open(&s_copy, plain, sizeof plain, &pl, (gt_span){r1, 10}),
                   GT_E_AUTH);
    gt_sim_keys c_copy = c;  // the client's own record reflected back to it
    GT_ASSERT_CODE(gt_sim_record_open(&c_copy, plain, sizeof plain, &pl, (gt_span){r1, l1}),
                   GT_E_AUTH);
    GT_ASSERT_OK(gt_sim_record_open(&s, plain, sizeof plain, &pl, (gt_span){r1, l1}));
}

static void test_iv_counters(void **state)
{
    (void)state;
    gt_sim_keys k;
    memset(&k, 0, sizeof k);
    uint8_t iv[GT_AEAD_IV_BYTES], seen[8][GT_AEAD_IV_BYTES];
    int n = 0;
    for (int stream = 1; stream <= 4; stream++) {
        for (int i = 0; i < 2; i++) {
            GT_ASSERT_OK(gt_sim_iv_next(&k, stream, iv));
            assert_int_equal(iv[3], stream);
            assert_int_equal(iv[11], i);
            for (int j = 0; j < n; j++) {
                assert_memory_not_equal(seen[j], iv, sizeof iv);  // never twice
            }
            memcpy(seen[n++], iv, sizeof iv);
        }
    }
    k.counter[GT_SIM_STREAM_BULK_C2S] = UINT64_MAX - 1;
    GT_ASSERT_OK(gt_sim_iv_next(&k, GT_SIM_STREAM_BULK_C2S, iv));
    GT_ASSERT_CODE(gt_sim_iv_next(&k, GT_SIM_STREAM_BULK_C2S, iv), GT_E_LIMIT);  // no wrap
    GT_ASSERT_CODE(gt_sim_iv_next(&k, 0, iv), GT_E_ARG);
    GT_ASSERT_CODE(gt_sim_iv_next(&k, 5, iv), GT_E_ARG);
}

static void test_report_data_binding(void **state)
{
    (void)state;
    gt_sim_client_hello h;
    memset(&h, 0, sizeof h);
    uint8_t a[64], b[64];
    GT_ASSERT_OK(gt_sim_client_report_data(a, &h));
    h.agreement[31] = 1;  // another agreement, another binding
    GT_ASSERT_OK(gt_sim_client_report_data(b, &h));
    assert_memory_not_equal(a, b, 64);
    h.server_nonce[0] = 1;  // another devd challenge (connection), another binding
    GT_ASSERT_OK(gt_sim_client_report_data(a, &h));
    assert_memory_not_equal(a, b, 64);
    gt_sim_server_hello sh;
    memset(&sh, 0, sizeof sh);
    sh.mem_limit = 1u << 20;
    uint8_t nonce[32] = {0};
    gt_span body = {(const uint8_t *)"hello", 5};
    GT_ASSERT_OK(gt_sim_device_report_data(a, nonce, &sh, body));
    sh.mem_limit++;  // the device's parameters are bound too
    GT_ASSERT_OK(gt_sim_device_report_data(b, nonce, &sh, body));
    assert_memory_not_equal(a, b, 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_message_exact_size),
        cmocka_unit_test(test_peer_messages),
        cmocka_unit_test(test_op_round_trip),
        cmocka_unit_test(test_handshake_messages),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_iv_counters),
        cmocka_unit_test(test_report_data_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
