// collective/: the sealed chunk's header without MPI: its layout byte for byte, the parser's limits,
// the comparison a receiver makes (each field, and the sequence number, on its own), and the
// ring's segment arithmetic that the summation order rests on.
#include "testlib.h"

#include <gputravel/collective.h>

#include <string.h>

static gt_peer_hdr sample(void)
{
    gt_peer_hdr h = {.step = 0x1122334455667788ull, .bucket = 0xa1a2a3a4u, .hop = 5,
                     .src = 2, .dst = 3, .elem_off = 4096, .nelem = 1024};
    for (int i = 0; i < 16; i++) {
        h.run[i] = (uint8_t)(0xc0 + i);
    }
    return h;
}

// The layout docs/collective.md gives: little endian, fields in order, seq last, 64 bytes.
static void header_layout_is_the_documented_one(void **state)
{
    (void)state;
    gt_peer_hdr h = sample();
    uint8_t b[GT_PEER_HDR_BYTES];
    gt_ring_hdr_encode(b, &h, 0x0102030405060708ull);
    assert_int_equal(b[0], 0xc0);
    assert_int_equal(b[15], 0xcf);
    assert_int_equal(b[16], 0x88);  // step, least significant byte first
    assert_int_equal(b[23], 0x11);
    assert_int_equal(b[24], 0xa4);  // bucket
    assert_int_equal(b[28], 5);     // hop
    assert_int_equal(b[32], 2);     // src
    assert_int_equal(b[36], 3);     // dst
    assert_int_equal(b[41], 0x10);  // elem_off 4096 = 0x1000
    assert_int_equal(b[49], 0x04);  // nelem 1024 = 0x400
    assert_int_equal(b[56], 0x08);  // seq
    assert_int_equal(b[63], 0x01);
    assert_int_equal(GT_PEER_HDR_BYTES, 64);
}

static void header_round_trips_and_truncation_consumes_nothing(void **state)
{
    (void)state;
    gt_peer_hdr h = sample(), got;
    uint8_t b[GT_PEER_HDR_BYTES + 3];
    gt_ring_hdr_encode(b, &h, 77);
    gt_reader r = gt_reader_init(b, sizeof b);
    uint64_t seq = 0;
    GT_ASSERT_OK(gt_ring_hdr_parse(&r, &got, &seq));
    assert_int_equal(r.pos, GT_PEER_HDR_BYTES);
    assert_true(seq == 77);
    assert_memory_equal(&got, &h, sizeof h);
    for (size_t n = 0; n < GT_PEER_HDR_BYTES; n++) {
        gt_reader t = gt_reader_init(b, n);
        GT_ASSERT_CODE(gt_ring_hdr_parse(&t, &got, &seq), GT_E_TRUNCATED);
        assert_int_equal(t.pos, 0);
    }
}

static void header_refuses_chunks_over_the_limit(void **state)
{
    (void)state;
    gt_peer_hdr h = sample(), got;
    h.nelem = GT_PEER_MAX_CHUNK_ELEMS + 1;
    uint8_t b[GT_PEER_HDR_BYTES];
    gt_ring_hdr_encode(b, &h, 0);
    gt_reader r = gt_reader_init(b, sizeof b);
    uint64_t seq = 0;
    GT_ASSERT_CODE(gt_ring_hdr_parse(&r, &got, &seq), GT_E_LIMIT);
    h.nelem = 0;  // the device's rule too: an empty chunk is never sent
    gt_ring_hdr_encode(b, &h, 0);
    r = gt_reader_init(b, sizeof b);
    GT_ASSERT_CODE(gt_ring_hdr_parse(&r, &got, &seq), GT_E_LIMIT);
}

// Each field differing on its own is rejected and named, and so is the sequence number.
static void expect_names_each_differing_field(void **state)
{
    (void)state;
    const gt_peer_hdr want = sample();
    GT_ASSERT_OK(gt_ring_hdr_expect(&want, 9, &want, 9));
    static const char *const names[] = {"another run", "step", "bucket", "hop", "src", "dst",
                                        "elem_off", "nelem"};
    for (int f = 0; f < 8; f++) {
        gt_peer_hdr got = want;
        switch (f) {
        case 0: got.run[7] ^= 1; break;
        case 1: got.step++; break;
        case 2: got.bucket++; break;
        case 3: got.hop++; break;
        case 4: got.src++; break;
        case 5: got.dst++; break;
        case 6: got.elem_off++; break;
        default: got.nelem--; break;
        }
        gt_err e = gt_ring_hdr_expect(&got, 9, &want, 9);
        GT_ASSERT_CODE(e, GT_E_AUTH);
        assert_non_null(strstr(e.msg, names[f]));
    }
    gt_err e = gt_ring_hdr_expect(&want, 8, &want, 9);  // a replay: one behind
    GT_ASSERT_CODE(e, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "sequence number 8, expected 9"));
    GT_ASSERT_CODE(gt_ring_hdr_expect(&want, 10, &want, 9), GT_E_AUTH);  // one skipped
}

// Segments tile a bucket exactly, in order, the first len % N one float longer.
static void segments_tile_the_bucket(void **state)
{
    (void)state;
    const uint64_t lens[] = {0, 1, 3, 4, 1000, 1001, 1023};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (uint32_t n = 1; n <= 5; n++) {
            uint64_t next = 100;
            for (uint32_t k = 0; k < n; k++) {
                uint64_t off = 0, len = 0;
                gt_ring_segment(100, lens[i], n, k, &off, &len);
                assert_true(off == next);
                assert_true(len == lens[i] / n + (k < lens[i] % n ? 1 : 0));
                next = off + len;
            }
            assert_true(next == 100 + lens[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_layout_is_the_documented_one),
        cmocka_unit_test(header_round_trips_and_truncation_consumes_nothing),
        cmocka_unit_test(header_refuses_chunks_over_the_limit),
        cmocka_unit_test(expect_names_each_differing_field),
        cmocka_unit_test(segments_tile_the_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
