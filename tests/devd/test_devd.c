// devd's robustness: one owner at a time, a client that dies mid-transfer, tampered bounce-slot
// ciphertext, replayed / reordered / malformed control records, the memory limit from the command
// line, and a fuzzed control channel. Each case checks that the session ended (devd closed it),
// that the session's memory was zeroized, and that devd still serves the next client.
#include "testlib.h"

#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <signal.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/sim_client.h"
#include <gputravel/devproto.h>

#define SLOT_BYTES (64u * 1024)
#define CHUNK (SLOT_BYTES - 16)
#define MEM_LIMIT (16u << 20)

typedef gt_test_devd fixture;

static int setup(void **state)
{
    static const char *const args[] = {"--mem-limit", "16MiB", "--slot-size", "64KiB", "--slots",
                                       "2", "--threads", "1", NULL};
    return gt_test_devd_setup(state, args);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

// Opens a device; while devd is still ending the previous session (a client that just died),
// it may answer "busy" for a moment.
static gt_device *open_dev(fixture *f)
{
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.busy_wait_ms = 2000;
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open_sim(&dev, &cfg, &opt));
    return dev;
}

static void open_conn(fixture *f, gt_sim_conn *c)
{
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    gt_err e = GT_OK;
    for (int i = 0; i < 200; i++) {
        e = gt_sim_conn_open(c, f->sock, &opt);
        if (e.code != GT_E_STATE) {
            break;
        }
        sleep_ms(10);
    }
    GT_ASSERT_OK(e);
}

// The device is alive, holds nothing, and every byte of it reads back as zero.
static void assert_device_clean(fixture *f, uint64_t min_wiped)
{
    int status = 0;
    assert_int_equal(waitpid(f->pid, &status, WNOHANG), 0);  // devd did not die
    gt_device *dev = open_dev(f);
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &st));
    assert_int_equal(st.bytes_in_use, 0);
    assert_int_equal(st.buffers_live, 0);
    assert_true(st.bytes_wiped >= min_wiped);
    gt_dbuf all = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, MEM_LIMIT, 0, &all));
    uint8_t *back = malloc(MEM_LIMIT);
    memset(back, 0xff, MEM_LIMIT);
    GT_ASSERT_OK(gt_device_copy_out(dev, back, all, 0, MEM_LIMIT));
    for (size_t i = 0; i < MEM_LIMIT; i++) {
        if (back[i] != 0) {
            fail_msg("device byte %zu is 0x%02x after its owner's session ended", i, back[i]);
        }
    }
    free(back);
    gt_device_close(dev);
}

static uint64_t wiped_so_far(fixture *f)
{
    gt_device *dev = open_dev(f);
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &st));
    gt_device_close(dev);
    return st.bytes_wiped;
}

// ---- raw protocol helpers --------------------------------------------------------------------

static uint64_t raw_alloc(gt_sim_conn *c, uint64_t bytes, uint32_t flags)
{
    gt_sim_msg m = {.type = GT_SIM_REQ_ALLOC, .len = bytes, .flags = flags};
    GT_ASSERT_OK(gt_sim_conn_send(c, &m));
    GT_ASSERT_OK(gt_sim_conn_recv(c, &m));
    assert_int_equal(m.type, GT_SIM_REP_HANDLE);
    return m.handle;
}

// Starts a copy_in and sends `send` chunks of it (sealed honestly unless tamper_at names a byte of
// the first chunk's slot to flip after sealing).
static void raw_copy_in(gt_sim_conn *c, uint64_t h, const uint8_t *data, uint64_t len, int send,
                        long tamper_at)
{
    gt_sim_msg m = {.type = GT_SIM_REQ_COPY_IN, .handle = h, .offset = 0, .len = len};
    GT_ASSERT_OK(gt_sim_conn_send(c, &m));
    GT_ASSERT_OK(gt_sim_conn_recv(c, &m));
    assert_int_equal(m.type, GT_SIM_REP_STATUS);
    assert_int_equal(m.status.code, GT_E_NONE);
    for (int i = 0; i < send; i++) {
        uint32_t slot = (uint32_t)i % c->slot_count;
        if ((uint32_t)i >= c->slot_count) {  // devd frees slot i % S after opening chunk i - S
            GT_ASSERT_OK(gt_sim_conn_recv(c, &m));
            assert_int_equal(m.type, GT_SIM_MSG_SLOT_FREE);
            assert_int_equal(m.slot, slot);
        }
        uint64_t n = len - (uint64_t)i * CHUNK < CHUNK ? len - (uint64_t)i * CHUNK : CHUNK;
        uint8_t aad[GT_SIM_BULK_AAD_BYTES], iv[GT_AEAD_IV_BYTES];
        size_t ct_len = 0;
        gt_sim_bulk_aad(aad, h, (uint64_t)i * CHUNK, (uint32_t)n);
        GT_ASSERT_OK(gt_sim_iv_next(&c->keys, GT_SIM_STREAM_BULK_C2S, iv));
        uint8_t *ct = c->bounce + (size_t)slot * c->slot_bytes;
        GT_ASSERT_OK(gt_aead_seal(ct, c->slot_bytes, &ct_len, data + (size_t)i * CHUNK, n, aad,
                                  sizeof aad, iv,
                                  gt_sim_stream_key(&c->keys, GT_SIM_STREAM_BULK_C2S)));
        if (i == 0 && tamper_at >= 0) {
            ct[tamper_at] ^= 0x20;
        }
        gt_sim_msg ready = {.type = GT_SIM_MSG_CHUNK, .slot = slot, .len = n};
        GT_ASSERT_OK(gt_sim_conn_send(c, &ready));
    }
}

// The next thing devd does is close the session.
static void assert_session_ended(gt_sim_conn *c)
{
    gt_sim_msg m;
    gt_err e = gt_sim_conn_recv(c, &m);
    if (e.code != GT_E_PEER) {
        fail_msg("expected devd to end the session, got %s (%s), message %s",
                 gt_code_name(e.code), e.msg, gt_sim_msg_name(m.type));
    }
    gt_sim_conn_close(c);
}

static gt_err try_send_sealed(gt_sim_conn *c, const uint8_t *plain, size_t n)
{
    uint8_t body[1024];
    size_t len = 0;
    GT_TRY(gt_sim_record_seal(&c->keys, body, sizeof body, &len, plain, n));
    return gt_sim_frame_send(c->fd, body, len, -1);
}

static void send_sealed(gt_sim_conn *c, const uint8_t *plain, size_t n)
{
    GT_ASSERT_OK(try_send_sealed(c, plain, n));
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)(x >> 24);
    }
}

// ---- tests ------------------------------------------------------------------------------------

static void *close_later(void *dev)
{
    sleep_ms(200);
    gt_device_close(dev);
    return NULL;
}

static void test_second_client_refused(void **state)
{
    fixture *f = *state;
    gt_device *a = open_dev(f), *b = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_err e = gt_device_open(&b, &cfg);
    assert_int_equal(e.code, GT_E_STATE);
    assert_non_null(strstr(e.msg, "busy"));
    assert_null(b);
    // the owner is not disturbed
    gt_dbuf h = 0;
    uint8_t data[100], back[100];
    fill(data, sizeof data, 1);
    GT_ASSERT_OK(gt_device_alloc(a, sizeof data, 0, &h));
    GT_ASSERT_OK(gt_device_copy_in(a, h, 0, data, sizeof data));
    GT_ASSERT_CODE(gt_device_open(&b, &cfg), GT_E_STATE);
    GT_ASSERT_OK(gt_device_copy_out(a, back, h, 0, sizeof back));
    assert_memory_equal(data, back, sizeof data);
    gt_device_close(a);
    // once it left, the next client attaches
    GT_ASSERT_OK(gt_device_open(&b, &cfg));
    // busy_wait_ms: a client that may wait gives up only after that long ...
    gt_device_sim_options wait;
    memset(&wait, 0, sizeof wait);
    wait.busy_wait_ms = 300;
    double t0 = gt_now_seconds();
    GT_ASSERT_CODE(gt_device_open_sim(&a, &cfg, &wait), GT_E_STATE);
    assert_true(gt_now_seconds() - t0 >= 0.3);
    assert_null(a);
    // ... and gets the device as soon as the owner has left
    pthread_t closer;
    pthread_create(&closer, NULL, close_later, b);
    wait.busy_wait_ms = 10000;
    t0 = gt_now_seconds();
    GT_ASSERT_OK(gt_device_open_sim(&a, &cfg, &wait));
    double waited = gt_now_seconds() - t0;
    pthread_join(closer, NULL);
    assert_true(waited >= 0.2 && waited < 5.0);
    gt_device_close(a);
}

static void test_client_killed_mid_transfer(void **state)
{
    fixture *f = *state;
    uint64_t wiped0 = wiped_so_far(f);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(pfd[0]);
        gt_sim_conn c;
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        if (!gt_is_ok(gt_sim_conn_open(&c, f->sock, &opt))) {
            _exit(2);
        }
        size_t n = 8u << 20;
        uint8_t *data = malloc(n);
        fill(data, n, 42);
        uint64_t h1 = raw_alloc(&c, n, GT_DBUF_NO_READBACK);
        uint64_t chunks = (n + CHUNK - 1) / CHUNK;
        raw_copy_in(&c, h1, data, n, (int)chunks, -1);  // complete: the pattern is on the device
        gt_sim_msg m;
        if (!gt_is_ok(gt_sim_conn_recv(&c, &m)) || m.type != GT_SIM_REP_STATUS) {
            _exit(3);
        }
        uint64_t h2 = raw_alloc(&c, n, 0);
        raw_copy_in(&c, h2, data, n, 1, -1);  // then stop after the first chunk
        if (write(pfd[1], "r", 1) != 1) {
            _exit(4);
        }
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char r = 0;
    assert_int_equal(read(pfd[0], &r, 1), 1);
    close(pfd[0]);
    sleep_ms(20);  // devd is now waiting for chunk 2 of the second transfer
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    assert_true(WIFSIGNALED(status));
    assert_device_clean(f, wiped0 + (16u << 20));
}

static void test_tampered_ciphertext(void **state)
{
    fixture *f = *state;
    const long where[] = {0, 100, CHUNK - 1, CHUNK, CHUNK + 15};  // data and tag bytes
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        uint64_t wiped0 = wiped_so_far(f);
        gt_sim_conn c;
        open_conn(f, &c);
        uint8_t *data = malloc(3 * CHUNK);
        fill(data, 3 * CHUNK, 5);
        uint64_t good = raw_alloc(&c, 3 * CHUNK, 0);
        raw_copy_in(&c, good, data, 3 * CHUNK, 3, -1);
        gt_sim_msg m;
        GT_ASSERT_OK(gt_sim_conn_recv(&c, &m));
        assert_int_equal(m.type, GT_SIM_REP_STATUS);
        uint64_t h = raw_alloc(&c, 3 * CHUNK, 0);
        raw_copy_in(&c, h, data, 3 * CHUNK, 1, where[k]);
        assert_session_ended(&c);
        free(data);
        assert_device_clean(f, wiped0 + 6 * CHUNK);
    }
}

static void test_wrong_chunk_metadata(void **state)
{
    fixture *f = *state;
    // a CHUNK naming the wrong slot / length, or a CHUNK outside any transfer
    for (int k = 0; k < 3; k++) {
        gt_sim_conn c;
        open_conn(f, &c);
        uint64_t h = raw_alloc(&c, 1000, 0);
        gt_sim_msg m = {.type = GT_SIM_REQ_COPY_IN, .handle = h, .len = 1000};
        if (k < 2) {
            GT_ASSERT_OK(gt_sim_conn_send(&c, &m));
            GT_ASSERT_OK(gt_sim_conn_recv(&c, &m));
            assert_int_equal(m.status.code, GT_E_NONE);
        }
        gt_sim_msg ch = {.type = GT_SIM_MSG_CHUNK, .slot = k == 0 ? 1 : 0,
                         .len = k == 1 ? 999 : 1000};
        GT_ASSERT_OK(gt_sim_conn_send(&c, &ch));
        assert_session_ended(&c);
    }
    assert_device_clean(f, 0);
}

static void test_replayed_record(void **state)
{
    fixture *f = *state;
    gt_sim_conn c;
    open_conn(f, &c);
    uint8_t plain[64], body[128];
    gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
    gt_sim_msg m = {.type = GT_SIM_REQ_ALLOC, .len = 4096};
    GT_ASSERT_OK(gt_sim_msg_write(&w, &m));
    size_t len = 0;
    GT_ASSERT_OK(gt_sim_record_seal(&c.keys, body, sizeof body, &len, plain, w.len));
    GT_ASSERT_OK(gt_sim_frame_send(c.fd, body, len, -1));
    GT_ASSERT_OK(gt_sim_conn_recv(&c, &m));
    assert_int_equal(m.type, GT_SIM_REP_HANDLE);
    GT_ASSERT_OK(gt_sim_frame_send(c.fd, body, len, -1));  // the same record again
    assert_session_ended(&c);
    assert_device_clean(f, 4096);
}

static void test_reordered_records(void **state)
{
    fixture *f = *state;
    gt_sim_conn c;
    open_conn(f, &c);
    raw_alloc(&c, 4096, 0);
    uint8_t p1[16], p2[16], b1[64], b2[64];
    gt_writer w1 = gt_writer_init_fixed(p1, sizeof p1), w2 = gt_writer_init_fixed(p2, sizeof p2);
    gt_sim_msg sync = {.type = GT_SIM_REQ_SYNC}, stat = {.type = GT_SIM_REQ_STAT};
    GT_ASSERT_OK(gt_sim_msg_write(&w1, &sync));
    GT_ASSERT_OK(gt_sim_msg_write(&w2, &stat));
    size_t l1 = 0, l2 = 0;
    GT_ASSERT_OK(gt_sim_record_seal(&c.keys, b1, sizeof b1, &l1, p1, w1.len));
    GT_ASSERT_OK(gt_sim_record_seal(&c.keys, b2, sizeof b2, &l2, p2, w2.len));
    GT_ASSERT_OK(gt_sim_frame_send(c.fd, b2, l2, -1));  // second first
    gt_err e = gt_sim_frame_send(c.fd, b1, l1, -1);  // devd may have closed already
    (void)e;
    assert_session_ended(&c);
    assert_device_clean(f, 4096);
}

static void test_malformed_records(void **state)
{
    fixture *f = *state;
    for (int k = 0; k < 7; k++) {
        gt_sim_conn c;
        open_conn(f, &c);
        uint8_t plain[64] = {0};
        switch (k) {
        case 0:  // unknown type
            plain[0] = 0x77;
            plain[1] = 0x77;
            send_sealed(&c, plain, 10);
            break;
        case 1: {  // ALLOC one byte too long
            gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
            gt_sim_msg m = {.type = GT_SIM_REQ_ALLOC, .len = 64};
            GT_ASSERT_OK(gt_sim_msg_write(&w, &m));
            send_sealed(&c, plain, w.len + 1);
            break;
        }
        case 2: {  // FREE one byte short
            gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
            gt_sim_msg m = {.type = GT_SIM_REQ_FREE, .handle = 1};
            GT_ASSERT_OK(gt_sim_msg_write(&w, &m));
            send_sealed(&c, plain, w.len - 1);
            break;
        }
        case 3: {  // a record shorter than a tag
            uint8_t junk[5] = {1, 2, 3, 4, 5};
            GT_ASSERT_OK(gt_sim_frame_send(c.fd, junk, sizeof junk, -1));
            break;
        }
        case 4: {  // a frame length beyond the limit
            uint8_t hdr[4];
            gt_store_u32le(hdr, 1u << 30);
            assert_int_equal(write(c.fd, hdr, 4), 4);
            break;
        }
        case 5: {  // a reply type sent by the client
            gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
            gt_sim_msg m = {.type = GT_SIM_REP_HANDLE, .handle = 1};
            GT_ASSERT_OK(gt_sim_msg_write(&w, &m));
            send_sealed(&c, plain, w.len);
            break;
        }
        default: {  // a record sealed with devd's direction (reflected)
            gt_sim_keys k2 = c.keys;
            k2.is_client = false;
            uint8_t body[64];
            size_t len = 0;
            gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
            gt_sim_msg m = {.type = GT_SIM_REQ_SYNC};
            GT_ASSERT_OK(gt_sim_msg_write(&w, &m));
            GT_ASSERT_OK(gt_sim_record_seal(&k2, body, sizeof body, &len, plain, w.len));
            GT_ASSERT_OK(gt_sim_frame_send(c.fd, body, len, -1));
            break;
        }
        }
        assert_session_ended(&c);
    }
    assert_device_clean(f, 0);
}

// The PEER_* requests (issue 16) as a hostile trainer sends them: before any declaration, with
// a chunk length beyond its buffer, a chunk opened over itself, another session's handle: each
// refused with a STATUS and the session goes on; a malformed PEER record or a PEER reply sent by
// the client ends the session. devd stays clean.
static gt_err peer_rpc(gt_sim_conn *c, gt_sim_msg *m)
{
    gt_sim_msg rep;
    return gt_sim_conn_rpc(c, m, m->type == GT_SIM_REQ_PEER_RUN_ID ? GT_SIM_REP_PEER_RUN
                                                                   : GT_SIM_REP_STATUS, &rep);
}

static void test_peer_requests_checked(void **state)
{
    fixture *f = *state;
    gt_sim_conn c;
    open_conn(f, &c);
    uint64_t chunk = raw_alloc(&c, 256, 0), dst = raw_alloc(&c, 256, 0);
    gt_sim_msg hello = {.type = GT_SIM_REQ_PEER_HELLO, .peer = {.rank = 0, .nranks = 2}};
    GT_ASSERT_ERR(peer_rpc(&c, &hello), GT_E_STATE, "declare");
    gt_sim_msg admit = {.type = GT_SIM_REQ_PEER_ADMIT, .handle = chunk, .len = 256,
                        .peer = {.rank = 1}};
    GT_ASSERT_ERR(peer_rpc(&c, &admit), GT_E_STATE, "declare");
    gt_sim_msg run = {.type = GT_SIM_REQ_PEER_RUN_ID};
    GT_ASSERT_CODE(peer_rpc(&c, &run), GT_E_STATE);
    gt_sim_msg seal = {.type = GT_SIM_REQ_PEER_SEAL, .handle = dst,
                       .peer = {.src = 0, .dst = 1, .nelem = 8}};
    GT_ASSERT_CODE(peer_rpc(&c, &seal), GT_E_STATE);
    gt_sim_msg open = {.type = GT_SIM_REQ_PEER_OPEN, .handle = dst,
                       .peer = {.src = 1, .dst = 0, .nelem = 8, .mode = 1, .chunk = chunk,
                                .chunk_len = 257}};
    GT_ASSERT_CODE(peer_rpc(&c, &open), GT_E_STATE);
    open.peer.chunk = 0x7700000001ull;  // never issued
    GT_ASSERT_CODE(peer_rpc(&c, &open), GT_E_STATE);
    GT_ASSERT_OK(gt_sim_conn_rpc(&c, &(gt_sim_msg){.type = GT_SIM_REQ_SYNC}, GT_SIM_REP_STATUS,
                                 &(gt_sim_msg){0}));  // the session goes on
    assert_int_equal(c.broken, false);
    gt_sim_conn_close(&c);
    // Declared (devd parsed the agreement): the ranges and handles are checked next.
    static const char doc[] =
        "{\"version\":1,\"name\":\"peer-requests\",\"model\":{\"layers\":1,\"channels\":16,"
        "\"heads\":2,\"vocab\":64,\"max_seq\":8,\"init_seed\":5},\"training\":{\"steps\":4,"
        "\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h0\","
        "\"identity_key\":\"1111111111111111111111111111111111111111111111111111111111111111\","
        "\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"00000000000000000000000000000000\","
        "\"token_budget\":1,\"max_uses_per_chunk\":1}],\"trainer\":{\"ranks\":2},"
        "\"device\":{},\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}";
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.busy_wait_ms = 2000;
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, opt.agreement_hash, doc, sizeof doc - 1));
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open_sim(&dev, &cfg, &opt));
    gt_device_outputs none = {0};
    GT_ASSERT_OK(gt_device_declare_outputs(dev, &none, (gt_span){(const uint8_t *)doc,
                                                                  sizeof doc - 1}));
    gt_sim_conn *dc = gt_device_backend_impl(dev, GT_DEVICE_SIM);
    GT_ASSERT_OK(gt_device_alloc(dev, 256, 0, &chunk));
    GT_ASSERT_OK(gt_device_alloc(dev, 256, 0, &dst));
    open.handle = dst;
    open.peer.chunk = chunk;
    open.peer.chunk_len = 257;  // beyond its buffer
    GT_ASSERT_ERR(peer_rpc(dc, &open), GT_E_ARG, "peer_open chunk");
    open.peer.chunk_len = 256;
    open.peer.chunk = dst;  // opened over itself
    GT_ASSERT_ERR(peer_rpc(dc, &open), GT_E_ARG, "over itself");
    open.peer.chunk = chunk;
    open.peer.nelem = 65;  // 260 bytes of a 256-byte destination
    GT_ASSERT_CODE(peer_rpc(dc, &open), GT_E_ARG);
    open.peer.nelem = 8;
    GT_ASSERT_ERR(peer_rpc(dc, &open), GT_E_STATE, "no peer run");  // no hello yet
    seal.handle = chunk;
    seal.peer.nelem = 0;
    GT_ASSERT_CODE(peer_rpc(dc, &seal), GT_E_ARG);
    hello.peer.nranks = 3;  // the agreement says 2
    GT_ASSERT_ERR(peer_rpc(dc, &hello), GT_E_POLICY, "admits 2");
    gt_device_close(dev);
    // A PEER_OPEN whose mode is neither add nor copy does not parse: the session ends.
    open_conn(f, &c);
    uint8_t plain[128];
    gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
    open.peer.mode = 3;
    GT_ASSERT_OK(gt_sim_msg_write(&w, &open));
    send_sealed(&c, plain, w.len);
    assert_session_ended(&c);
    // A peer reply sent by the client: the session ends.
    open_conn(f, &c);
    w = gt_writer_init_fixed(plain, sizeof plain);
    GT_ASSERT_OK(gt_sim_msg_write(&w, &(gt_sim_msg){.type = GT_SIM_REP_PEER_RUN}));
    send_sealed(&c, plain, w.len);
    assert_session_ended(&c);
    assert_device_clean(f, 0);
}

static int raw_connect(const char *path)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    assert_true(strlen(path) < sizeof a.sun_path);
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    for (int i = 0; i < 200; i++) {
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            return fd;
        }
        sleep_ms(5);
    }
    fail_msg("cannot connect to devd");
    return -1;
}

static uint32_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

// A client hello for the connection fd (devd's challenge read first), with real sim evidence
// bound to it; its bytes in hello (cap bytes), their length returned.
static size_t hello_for(int fd, uint8_t *hello, size_t cap)
{
    uint8_t rx[4096];
    size_t n = 0;
    gt_sim_watch w = {.fd = -1, .timeout_ms = 5000};
    GT_ASSERT_OK(gt_sim_frame_recv(fd, rx, sizeof rx, &n, NULL, &w));
    gt_sim_client_hello ch;
    memset(&ch, 0, sizeof ch);
    ch.version = GT_SIM_VERSION;
    GT_ASSERT_OK(gt_sim_challenge_parse((gt_span){rx, n}, ch.server_nonce));
    GT_ASSERT_OK(gt_random_bytes(ch.nonce, sizeof ch.nonce));
    uint8_t sec[GT_X25519_BYTES], rd[GT_REPORT_DATA_BYTES];
    GT_ASSERT_OK(gt_x25519_keypair(ch.pub, sec));
    GT_ASSERT_OK(gt_sim_client_report_data(rd, &ch));
    gt_buf ev = {0};
    GT_ASSERT_OK(gt_sim_default_client_produce(NULL, rd, &ev));
    ch.evidence = gt_buf_span(&ev);
    gt_writer hw = gt_writer_init_fixed(hello, cap);
    GT_ASSERT_OK(gt_sim_client_hello_write(&hw, &ch));
    gt_buf_free(&ev);
    return hw.len;
}

// The first frame devd answers a hello with: its type (SERVER_HELLO or REFUSE) and, for a
// refusal, the reason in why.
static uint16_t answer_to(int fd, char *why, size_t cap)
{
    static uint8_t rx[GT_SIM_MAX_FRAME];
    size_t n = 0;
    int bounce = -1;
    gt_sim_watch w = {.fd = -1, .timeout_ms = 5000};
    GT_ASSERT_OK(gt_sim_frame_recv(fd, rx, sizeof rx, &n, &bounce, &w));
    if (bounce >= 0) {
        close(bounce);
    }
    uint16_t type = 0;
    GT_ASSERT_OK(gt_sim_peek_type((gt_span){rx, n}, &type));
    gt_sim_status st;
    if (type == GT_SIM_MSG_REFUSE) {
        GT_ASSERT_OK(gt_sim_refuse_parse((gt_span){rx, n}, &st));
        snprintf(why, cap, "%s", st.msg);
    }
    return type;
}

// A client hello recorded on one connection and replayed on another is refused before its
// evidence is appraised: it answers the other connection's challenge. The recorder's own hello
// is accepted (the evidence is real).
static void test_replayed_hello_refused(void **state)
{
    fixture *f = *state;
    uint8_t hello[8192];
    char why[256] = "";
    int first = raw_connect(f->sock);
    size_t n = hello_for(first, hello, sizeof hello);
    GT_ASSERT_OK(gt_sim_frame_send(first, hello, n, -1));
    assert_int_equal(answer_to(first, why, sizeof why), GT_SIM_MSG_SERVER_HELLO);
    close(first);
    sleep_ms(100);  // devd ends that session
    int replay = -1;
    for (int i = 0; i < 100; i++) {  // devd may still be ending the first session: "busy"
        replay = raw_connect(f->sock);
        uint8_t rx[4096];
        size_t len = 0;
        gt_sim_watch w = {.fd = -1, .timeout_ms = 5000};
        GT_ASSERT_OK(gt_sim_frame_recv(replay, rx, sizeof rx, &len, NULL, &w));
        uint8_t nonce[GT_SIM_NONCE_BYTES];
        if (gt_is_ok(gt_sim_challenge_parse((gt_span){rx, len}, nonce))) {
            break;
        }
        close(replay);
        replay = -1;
        sleep_ms(20);
    }
    assert_true(replay >= 0);
    GT_ASSERT_OK(gt_sim_frame_send(replay, hello, n, -1));
    assert_int_equal(answer_to(replay, why, sizeof why), GT_SIM_MSG_REFUSE);
    assert_non_null(strstr(why, "another challenge"));
    close(replay);
    assert_device_clean(f, 0);
}

// A client that trickles its hello a byte a second is cut off by the handshake's deadline
// (10 s in all), not kept by a per-read timeout for ever.
static void test_trickling_hello_cut_off(void **state)
{
    fixture *f = *state;
    signal(SIGPIPE, SIG_IGN);
    int fd = raw_connect(f->sock);
    uint8_t hello[8192];
    size_t n = hello_for(fd, hello + 4, sizeof hello - 4);
    gt_store_u32le(hello, (uint32_t)n);  // the frame: u32le length, then the body
    n += 4;
    double t0 = gt_now_seconds();
    size_t sent = 0;
    while (sent < n && gt_now_seconds() - t0 < 20) {
        if (write(fd, hello + sent, 1) != 1) {
            break;  // devd closed the connection
        }
        sent++;
        sleep_ms(700);
    }
    double took = gt_now_seconds() - t0;
    print_message("trickled %zu of %zu bytes; devd closed the connection after %.1f s\n", sent,
                  n, took);
    assert_true(sent < n);
    assert_true(took >= 9.0 && took < 14.0);
    close(fd);
    assert_device_clean(f, 0);
}

static void test_fuzzed_control_channel(void **state)
{
    fixture *f = *state;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint8_t buf[4096];
    // a valid client hello to mutate
    gt_sim_client_hello ch;
    memset(&ch, 0, sizeof ch);
    ch.version = GT_SIM_VERSION;
    uint8_t fake_ev[72];
    memset(fake_ev, 'x', sizeof fake_ev);
    ch.evidence = (gt_span){fake_ev, sizeof fake_ev};
    uint8_t hello[512];
    gt_writer hw = gt_writer_init_fixed(hello, sizeof hello);
    GT_ASSERT_OK(gt_sim_client_hello_write(&hw, &ch));
    signal(SIGPIPE, SIG_IGN);
    for (int it = 0; it < 600; it++) {
        int mode = it % 4;
        if (mode == 3) {  // an attested session, then random records / frames
            gt_sim_conn c;
            open_conn(f, &c);
            int n = 1 + (int)(rnd(&seed) % 4);
            for (int j = 0; j < n; j++) {
                size_t len = rnd(&seed) % 300;
                for (size_t i = 0; i < len; i++) {
                    buf[i] = (uint8_t)rnd(&seed);
                }
                if (rnd(&seed) % 2 && len >= 2) {
                    // plausible plaintext: a real type with random body, properly sealed
                    // (type, exact size): half of them at the size devd accepts
                    static const uint16_t types[][2] = {
                        {0x0101, 14}, {0x0102, 10}, {0x0103, 10}, {0x0104, 30}, {0x0105, 26},
                        {0x0106, 26}, {0x0108, 2},  {0x010a, 2},  {0x0201, 10}, {0x0202, 6},
                        {0x0301, 8}};
                    size_t pick = rnd(&seed) % (sizeof types / sizeof types[0]);
                    uint16_t t = types[pick][0];
                    if (rnd(&seed) % 2) {
                        len = types[pick][1];
                    }
                    buf[0] = (uint8_t)t;
                    buf[1] = (uint8_t)(t >> 8);
                    gt_err e = try_send_sealed(&c, buf, len);  // devd may have closed already
                    (void)e;
                } else {
                    gt_err e = gt_sim_frame_send(c.fd, buf, len, -1);
                    (void)e;
                }
            }
            c.broken = true;  // no BYE: just drop
            gt_sim_conn_close(&c);
            continue;
        }
        int fd = raw_connect(f->sock);
        size_t len;
        if (mode == 0) {  // raw bytes, no framing
            len = rnd(&seed) % 200;
            for (size_t i = 0; i < len; i++) {
                buf[i] = (uint8_t)rnd(&seed);
            }
            ssize_t w = write(fd, buf, len);
            (void)w;
        } else if (mode == 1) {  // a frame of random bytes
            len = rnd(&seed) % 600;
            for (size_t i = 0; i < len; i++) {
                buf[i] = (uint8_t)rnd(&seed);
            }
            gt_err e = gt_sim_frame_send(fd, buf, len, -1);
            (void)e;
        } else {  // a mutated client hello
            memcpy(buf, hello, hw.len);
            len = hw.len;
            int flips = 1 + (int)(rnd(&seed) % 4);
            for (int j = 0; j < flips; j++) {
                buf[rnd(&seed) % len] ^= (uint8_t)(1u << (rnd(&seed) % 8));
            }
            if (rnd(&seed) % 4 == 0) {
                len = rnd(&seed) % len;
            }
            gt_err e = gt_sim_frame_send(fd, buf, len, -1);
            (void)e;
        }
        close(fd);
    }
    assert_device_clean(f, 0);
}

static void test_admission_policy(void **state)
{
    fixture *f = *state;
    char sub[700], pol[800], sock[900];
    snprintf(sub, sizeof sub, "%s/strict", f->dir);
    GT_ASSERT_OK(gt_mkdir_p(sub, 0700));
    snprintf(pol, sizeof pol, "%s/policy.json", sub);
    const char *json = "{\"accepted_tee_types\": [\"tdx\", \"snp\"]}";
    GT_ASSERT_OK(gt_file_write_atomic(pol, json, strlen(json), 0600));
    const char *args[] = {"--mem-limit", "1MiB", "--admit-policy", pol, NULL};
    pid_t pid = gt_test_devd_start(sock, sizeof sock, sub, args);
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    gt_device *dev = NULL;
    gt_err e = gt_device_open(&dev, &cfg);
    gt_test_devd_stop(pid);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "refused"));
    assert_non_null(strstr(e.msg, "sim"));
    assert_null(dev);
}

static void test_cli_memory_limit(void **state)
{
    (void)state;
    char dir[512], sock[600];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    gt_buf out = {0};
    const char *huge[] = {"devd", "--socket", sock, "--mem-limit", "64TiB", NULL};
    assert_int_equal(gt_test_run_cli(&out, huge), 1);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    assert_non_null(strstr((char *)out.data, "--mem-limit"));
    gt_buf_free(&out);
    const char *bad[] = {"devd", "--socket", sock, "--mem-limit", "lots", NULL};
    assert_int_equal(gt_test_run_cli(NULL, bad), 64);
    const char *none[] = {"devd", NULL};
    assert_int_equal(gt_test_run_cli(NULL, none), 64);
    const char *help[] = {"devd", "--help", NULL};
    assert_int_equal(gt_test_run_cli(NULL, help), 0);
    gt_test_rmtree(dir);
}

// devd checks its socket path before it reserves (and touches) its memory: a path it cannot
// serve on fails at once, naming the path, even with a --mem-limit it could not reserve; a
// file that is not a socket is left as it was.
static void test_cli_socket_checked_first(void **state)
{
    (void)state;
    char dir[512], sock[600], file[600], ro[600], ro_sock[700];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(sock, sizeof sock, "%s/no-such-folder/d.sock", dir);
    snprintf(file, sizeof file, "%s/plain-file", dir);
    snprintf(ro, sizeof ro, "%s/read-only", dir);
    snprintf(ro_sock, sizeof ro_sock, "%s/d.sock", ro);
    GT_ASSERT_OK(gt_file_write_atomic(file, "keep", 4, 0600));
    GT_ASSERT_OK(gt_mkdir_p(ro, 0500));
    assert_int_equal(chmod(ro, 0500), 0);
    const char *paths[] = {sock, file, ro_sock};
    const char *says[] = {"cannot listen on", "exists and is not a socket", "cannot listen on"};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && geteuid() == 0) {
            continue;  // root writes into a read-only folder
        }
        gt_buf out = {0};
        const char *args[] = {"devd", "--socket", paths[i], "--mem-limit", "64TiB", NULL};
        assert_int_equal(gt_test_run_cli(&out, args), 1);
        GT_ASSERT_OK(gt_buf_append(&out, "", 1));
        const char *said = (const char *)out.data;
        if (strstr(said, says[i]) == NULL || strstr(said, paths[i]) == NULL ||
            strstr(said, "--mem-limit") != NULL) {
            fail_msg("devd --socket %s: %s", paths[i], said);
        }
        gt_buf_free(&out);
    }
    gt_buf kept = {0};
    GT_ASSERT_OK(gt_file_read_all(file, 64, &kept));
    assert_int_equal(kept.len, 4);
    assert_memory_equal(kept.data, "keep", 4);
    gt_buf_free_nowipe(&kept);
    assert_false(gt_path_exists(ro_sock));
    assert_int_equal(chmod(ro, 0700), 0);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_client_refused),
        cmocka_unit_test(test_client_killed_mid_transfer),
        cmocka_unit_test(test_tampered_ciphertext),
        cmocka_unit_test(test_wrong_chunk_metadata),
        cmocka_unit_test(test_replayed_record),
        cmocka_unit_test(test_replayed_hello_refused),
        cmocka_unit_test(test_trickling_hello_cut_off),
        cmocka_unit_test(test_reordered_records),
        cmocka_unit_test(test_malformed_records),
        cmocka_unit_test(test_peer_requests_checked),
        cmocka_unit_test(test_fuzzed_control_channel),
        cmocka_unit_test(test_admission_policy),
        cmocka_unit_test(test_cli_memory_limit),
        cmocka_unit_test(test_cli_socket_checked_first),
    };
    return cmocka_run_group_tests(tests, setup, gt_test_devd_teardown);
}
