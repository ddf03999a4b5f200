// enclave/: the host <-> enclave process channel attacked on the wire: a frame replayed, cut,
// grown or with one bit flipped, and a channel whose transcript differs (another REPORT) never
// opens; a good frame does, in order.
#include "enclave_testlib.h"

#include "enclave/run.h"

#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int sv[2];
    gt_enclave_channel host, encl;
} pair;

static void make_pair(pair *p, uint8_t report_fill)
{
    uint8_t shared[32], nonce[32], hpub[32], epub[32], report[GT_SGX_REPORT_BYTES],
        other[GT_SGX_REPORT_BYTES];
    memset(shared, 1, 32);
    memset(nonce, 2, 32);
    memset(hpub, 3, 32);
    memset(epub, 4, 32);
    memset(report, 5, sizeof report);
    memset(other, report_fill, sizeof other);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->sv), 0);
    GT_ASSERT_OK(gt_enclave_channel_init(&p->host, p->sv[0], true, shared, nonce, hpub, epub,
                                         report));
    GT_ASSERT_OK(gt_enclave_channel_init(&p->encl, p->sv[1], false, shared, nonce, hpub, epub,
                                         other));
}

static void close_pair(pair *p)
{
    close(p->sv[0]);
    close(p->sv[1]);
    gt_enclave_channel_wipe(&p->host);
    gt_enclave_channel_wipe(&p->encl);
}

// Sends one message from the host and captures the raw frame the enclave side would read.
static void capture(pair *p, const char *text, gt_buf *raw)
{
    gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_ECALL, .code = 9,
                        .payload = {(const uint8_t *)text, strlen(text)}};
    GT_ASSERT_OK(gt_enclave_channel_send(&p->host, &m));
    uint8_t buf[256];
    ssize_t n = recv(p->sv[1], buf, sizeof buf, 0);
    assert_true(n > 4);
    raw->len = 0;
    GT_ASSERT_OK(gt_buf_append(raw, buf, (size_t)n));
}

static gt_err deliver(pair *p, const gt_buf *raw, gt_enclave_msg *m, gt_buf *frame,
                      gt_buf *plain)
{
    assert_int_equal(send(p->sv[0], raw->data, raw->len, 0), (ssize_t)raw->len);
    return gt_enclave_channel_recv(&p->encl, frame, plain, m);
}

static void test_good_frames_open_in_order(void **state)
{
    (void)state;
    pair p;
    make_pair(&p, 5);
    gt_buf raw = {0}, frame = {0}, plain = {0};
    gt_enclave_msg m;
    for (int i = 0; i < 3; i++) {
        capture(&p, "first", &raw);
        GT_ASSERT_OK(deliver(&p, &raw, &m, &frame, &plain));
        assert_int_equal(m.type, GT_ENCLAVE_MSG_ECALL);
        assert_int_equal(m.code, 9);
        assert_int_equal(m.payload.len, 5);
    }
    gt_buf_free(&raw);
    gt_buf_free(&frame);
    gt_buf_free(&plain);
    close_pair(&p);
}

static void test_replayed_frame_refused(void **state)
{
    (void)state;
    pair p;
    make_pair(&p, 5);
    gt_buf raw = {0}, frame = {0}, plain = {0};
    gt_enclave_msg m;
    capture(&p, "pay 1", &raw);
    GT_ASSERT_OK(deliver(&p, &raw, &m, &frame, &plain));
    GT_ASSERT_CODE(deliver(&p, &raw, &m, &frame, &plain), GT_E_AUTH);
    gt_buf_free(&raw);
    gt_buf_free(&frame);
    gt_buf_free(&plain);
    close_pair(&p);
}

static void test_flipped_bits_refused(void **state)
{
    (void)state;
    gt_buf raw = {0}, frame = {0}, plain = {0};
    gt_enclave_msg m;
    for (size_t bit = 32; bit < 8 * 30; bit += 7) {  // past the length prefix: body and tag
        pair p;
        make_pair(&p, 5);
        capture(&p, "secret ecall input", &raw);
        if (bit / 8 >= raw.len) {
            close_pair(&p);
            break;
        }
        raw.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        GT_ASSERT_CODE(deliver(&p, &raw, &m, &frame, &plain), GT_E_AUTH);
        close_pair(&p);
    }
    // The length prefix changed (a frame cut short, with the bytes it claims): refused too.
    pair p;
    make_pair(&p, 5);
    capture(&p, "secret ecall input", &raw);
    gt_store_u32le(raw.data, (uint32_t)(raw.len - 4 - 1));
    raw.len--;
    GT_ASSERT_CODE(deliver(&p, &raw, &m, &frame, &plain), GT_E_AUTH);
    close_pair(&p);
    gt_buf_free(&raw);
    gt_buf_free(&frame);
    gt_buf_free(&plain);
}

static void test_other_transcript_refused(void **state)
{
    (void)state;
    pair p;
    make_pair(&p, 6);  // the enclave side saw another REPORT: other keys
    gt_buf raw = {0}, frame = {0}, plain = {0};
    gt_enclave_msg m;
    capture(&p, "hello", &raw);
    GT_ASSERT_CODE(deliver(&p, &raw, &m, &frame, &plain), GT_E_AUTH);
    gt_buf_free(&raw);
    gt_buf_free(&frame);
    gt_buf_free(&plain);
    close_pair(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_frames_open_in_order),
        cmocka_unit_test(test_replayed_frame_refused),
        cmocka_unit_test(test_flipped_bits_refused),
        cmocka_unit_test(test_other_transcript_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
