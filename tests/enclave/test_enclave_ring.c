// enclave/: the shared-memory ring between the host and the enclave process, attacked from the
// side that can write the mapping (the host, or whoever shares it): a frame tampered with in the
// ring, a frame written again (replay), a later frame delivered before an earlier one (reorder),
// a length word larger than the ring, a memfd that could be resized under the reader, and the
// other side gone while this side waits. Good frames open in order; no bad one opens.
#include "enclave_testlib.h"

#include "enclave/run.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int sv[2];       // the socket pair: liveness only, once the ring is attached
    int memfd;
    uint8_t *host_map, *encl_map;   // two mappings of one memfd, as in two processes
    gt_enclave_channel host, encl;
    gt_buf frame, plain;
} ring_pair;

static void make_ring_pair(ring_pair *p)
{
    memset(p, 0, sizeof *p);
    uint8_t shared[32], nonce[32], hpub[32], epub[32], report[GT_SGX_REPORT_BYTES];
    memset(shared, 1, 32);
    memset(nonce, 2, 32);
    memset(hpub, 3, 32);
    memset(epub, 4, 32);
    memset(report, 5, sizeof report);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->sv), 0);
    GT_ASSERT_OK(gt_enclave_channel_init(&p->host, p->sv[0], true, shared, nonce, hpub, epub,
                                         report));
    GT_ASSERT_OK(gt_enclave_channel_init(&p->encl, p->sv[1], false, shared, nonce, hpub, epub,
                                         report));
    GT_ASSERT_OK(gt_enclave_ring_create(&p->memfd, &p->host_map));
    GT_ASSERT_OK(gt_enclave_ring_map(p->memfd, &p->encl_map));
    gt_enclave_channel_use_ring(&p->host, p->host_map, true, 10);
    gt_enclave_channel_use_ring(&p->encl, p->encl_map, false, 10);
}

static void close_ring_pair(ring_pair *p)
{
    if (p->sv[0] >= 0) {
        close(p->sv[0]);
    }
    close(p->sv[1]);
    close(p->memfd);
    gt_enclave_ring_unmap(p->host_map);
    gt_enclave_ring_unmap(p->encl_map);
    gt_enclave_channel_wipe(&p->host);
    gt_enclave_channel_wipe(&p->encl);
    gt_buf_free(&p->frame);
    gt_buf_free(&p->plain);
}

static void host_sends(ring_pair *p, const char *text)
{
    gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_ECALL, .code = 9,
                        .payload = {(const uint8_t *)text, strlen(text)}};
    GT_ASSERT_OK(gt_enclave_channel_send(&p->host, &m));
}

static gt_err enclave_receives(ring_pair *p, gt_enclave_msg *m)
{
    return gt_enclave_channel_recv(&p->encl, &p->frame, &p->plain, m);
}

// The host -> enclave slot as the host's mapping shows it (what an attacker there writes).
static uint8_t *h2e_slot(ring_pair *p)
{
    return p->host_map;
}

static uint32_t load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void bump_seq(uint8_t *slot)
{
    gt_store_u32le(slot, load_u32le(slot) + 1);
}

static void test_ring_frames_open_in_order(void **state)
{
    (void)state;
    ring_pair p;
    make_ring_pair(&p);
    gt_enclave_msg m;
    const char *texts[] = {"first", "second one", "3"};
    for (int i = 0; i < 3; i++) {
        host_sends(&p, texts[i]);
        GT_ASSERT_OK(enclave_receives(&p, &m));
        assert_int_equal(m.type, GT_ENCLAVE_MSG_ECALL);
        assert_int_equal(m.payload.len, strlen(texts[i]));
        assert_memory_equal(m.payload.data, texts[i], m.payload.len);
        // and back the other way, through the other slot
        gt_enclave_msg r = {.type = GT_ENCLAVE_MSG_ERET, .code = (uint64_t)i};
        GT_ASSERT_OK(gt_enclave_channel_send(&p.encl, &r));
        GT_ASSERT_OK(gt_enclave_channel_recv(&p.host, &p.frame, &p.plain, &r));
        assert_int_equal(r.type, GT_ENCLAVE_MSG_ERET);
        assert_int_equal(r.code, (uint64_t)i);
    }
    close_ring_pair(&p);
}

// Every bit of the frame in the ring (body and tag) flipped after the host wrote it: none opens.
static void test_ring_tampered_frame_refused(void **state)
{
    (void)state;
    gt_enclave_msg m;
    for (size_t bit = 0;; bit += 5) {
        ring_pair p;
        make_ring_pair(&p);
        host_sends(&p, "secret ecall input");
        uint32_t len = load_u32le(h2e_slot(&p) + 8);
        if (bit / 8 >= len) {
            close_ring_pair(&p);
            break;
        }
        h2e_slot(&p)[GT_ENCLAVE_RING_HEAD_BYTES + bit / 8] ^= (uint8_t)(1u << (bit % 8));
        GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_AUTH);
        close_ring_pair(&p);
    }
    // The length word changed (the frame cut short by one byte): it is the AAD, so refused too.
    ring_pair p;
    make_ring_pair(&p);
    host_sends(&p, "secret ecall input");
    gt_store_u32le(h2e_slot(&p) + 8, load_u32le(h2e_slot(&p) + 8) - 1);
    GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_AUTH);
    close_ring_pair(&p);
}

// A frame the enclave side already took, written into the ring again with seq bumped.
static void test_ring_replayed_frame_refused(void **state)
{
    (void)state;
    ring_pair p;
    make_ring_pair(&p);
    gt_enclave_msg m;
    host_sends(&p, "pay 1");
    uint8_t copy[GT_ENCLAVE_RING_HEAD_BYTES + 128];
    memcpy(copy, h2e_slot(&p), sizeof copy);
    GT_ASSERT_OK(enclave_receives(&p, &m));
    memcpy(h2e_slot(&p), copy, sizeof copy);
    bump_seq(h2e_slot(&p));
    GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_AUTH);
    close_ring_pair(&p);
}

// The second frame delivered first (the first one held back): refused, and so is the first when
// it is put back after it.
static void test_ring_reordered_frames_refused(void **state)
{
    (void)state;
    ring_pair p;
    make_ring_pair(&p);
    gt_enclave_msg m;
    host_sends(&p, "first");
    uint8_t first[GT_ENCLAVE_RING_HEAD_BYTES + 128];
    memcpy(first, h2e_slot(&p), sizeof first);
    host_sends(&p, "second");  // overwrites the slot: the enclave side sees only the second
    GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_AUTH);
    close_ring_pair(&p);

    // Control: the same two frames in order open.
    make_ring_pair(&p);
    host_sends(&p, "first");
    GT_ASSERT_OK(enclave_receives(&p, &m));
    host_sends(&p, "second");
    GT_ASSERT_OK(enclave_receives(&p, &m));
    assert_memory_equal(m.payload.data, "second", 6);
    close_ring_pair(&p);
}

// A length word larger than the slot (or than the largest frame), or too short for a tag, or
// reserved head bytes set: refused before a byte of the frame is read.
static void test_ring_length_beyond_ring_refused(void **state)
{
    (void)state;
    const uint32_t lens[] = {GT_ENCLAVE_RING_SLOT_BYTES, GT_ENCLAVE_RING_BYTES, UINT32_MAX,
                             GT_ENCLAVE_RING_FRAME_MAX + 1};
    gt_enclave_msg m;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        ring_pair p;
        make_ring_pair(&p);
        host_sends(&p, "x");
        gt_store_u32le(h2e_slot(&p) + 8, lens[i]);
        GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_LIMIT);
        close_ring_pair(&p);
    }
    ring_pair p;
    make_ring_pair(&p);
    host_sends(&p, "x");
    gt_store_u32le(h2e_slot(&p) + 8, GT_AEAD_TAG_BYTES - 1);
    GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_FORMAT);
    close_ring_pair(&p);
    make_ring_pair(&p);
    host_sends(&p, "x");
    h2e_slot(&p)[40] = 1;  // a reserved head byte
    GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_FORMAT);
    close_ring_pair(&p);
}

// The enclave process maps only a memfd of the ring's size sealed against shrinking and
// growing: one the host could truncate would make the reader fault (SIGBUS) mid-copy.
static void test_ring_unsealed_memfd_refused(void **state)
{
    (void)state;
    uint8_t *map = NULL;
    int fd = memfd_create("unsealed", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, GT_ENCLAVE_RING_BYTES), 0);
    GT_ASSERT_ERR(gt_enclave_ring_map(fd, &map), GT_E_FORMAT, "not sealed");
    assert_null(map);
    close(fd);
    fd = memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_int_equal(ftruncate(fd, 4096), 0);
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    GT_ASSERT_CODE(gt_enclave_ring_map(fd, &map), GT_E_FORMAT);
    close(fd);
    // Control: the host's own memfd maps.
    uint8_t *host = NULL;
    GT_ASSERT_OK(gt_enclave_ring_create(&fd, &host));
    GT_ASSERT_OK(gt_enclave_ring_map(fd, &map));
    gt_enclave_ring_unmap(map);
    gt_enclave_ring_unmap(host);
    close(fd);
}

// Waiting on the ring while the other side's socket closes (its process gone): GT_E_PEER within
// a few liveness checks, not a hang.
static void test_ring_peer_gone_while_waiting(void **state)
{
    (void)state;
    ring_pair p;
    make_ring_pair(&p);
    close(p.sv[0]);  // the host side goes away without writing
    p.sv[0] = -1;
    gt_enclave_msg m;
    double t0 = gt_now_seconds();
    GT_ASSERT_CODE(enclave_receives(&p, &m), GT_E_PEER);
    assert_true(gt_now_seconds() - t0 < 1.0);
    close_ring_pair(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_frames_open_in_order),
        cmocka_unit_test(test_ring_tampered_frame_refused),
        cmocka_unit_test(test_ring_replayed_frame_refused),
        cmocka_unit_test(test_ring_reordered_frames_refused),
        cmocka_unit_test(test_ring_length_beyond_ring_refused),
        cmocka_unit_test(test_ring_unsealed_memfd_refused),
        cmocka_unit_test(test_ring_peer_gone_while_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
