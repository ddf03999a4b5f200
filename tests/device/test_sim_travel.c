// GPU travelling on the sim device: the trainer lends devd to a holder, which attaches with the
// ticket, loads real sealed chunks (gt_seal) that devd opens with the chunk key, and returns the
// device; the trainer then runs ops on buffers it can never read back. Against a real devd.
#include "testlib.h"

#include <gputravel/crypto.h>
#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/device.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gputravel/kernels.h>
#include "device/sim_client.h"
#include <gputravel/devproto.h>
#include <gputravel/travel.h>

#define SLOT_BYTES (64u * 1024)
#define NTOK 300000u
#define VOCAB 50257u
#define CHUNK_BYTES 400000u  // two chunks: 400000 and 200000 plaintext bytes

static char g_dir[512];
static char g_ds[600];
static uint16_t *g_tokens;
static gt_holder_keys g_keys;

typedef struct {
    gt_manifest m;
    gt_buf file[2];  // chunk files: header (magic || AAD) || ciphertext || tag
    uint8_t key[2][GT_AEAD_KEY_BYTES];
} sealed;
static sealed g_sealed;
// `test_sim_travel v2` (CTest device/sim_travel_v2): every trip below on GTCHUNK2 chunks of
// 64 KiB segments (7 and 4 of them), which devd opens on two threads from a file.
static int g_format = 1;
#define V2_SEG (64u << 10)

typedef gt_test_devd fixture;

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int group_setup(void **state)
{
    (void)state;
    gt_test_tmpdir(g_dir, sizeof g_dir);
    char shard[600], keydir[600];
    snprintf(shard, sizeof shard, "%s/a.bin", g_dir);
    snprintf(keydir, sizeof keydir, "%s/keys", g_dir);
    snprintf(g_ds, sizeof g_ds, "%s/ds", g_dir);
    g_tokens = malloc(NTOK * sizeof *g_tokens);
    uint32_t x = 7;
    for (uint32_t i = 0; i < NTOK; i++) {
        x = x * 1664525u + 1013904223u;
        g_tokens[i] = (uint16_t)((x >> 8) % VOCAB);
    }
    GT_ASSERT_OK(gt_shard_write(shard, g_tokens, NTOK));
    GT_ASSERT_OK(gt_keydir_generate(keydir, false, &g_keys));
    const char *shards[] = {shard};
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = g_ds,
                        .chunk_size = CHUNK_BYTES, .vocab_size = VOCAB, .format = g_format,
                        .segment_bytes = g_format == 2 ? V2_SEG : 0};
    gt_seal_result r;
    GT_ASSERT_OK(gt_seal(&p, &g_keys, &r));
    assert_int_equal(r.chunk_count, 2);
    GT_ASSERT_OK(gt_manifest_load(&g_sealed.m, g_ds));
    for (uint32_t i = 0; i < 2; i++) {
        char path[700];
        GT_ASSERT_OK(gt_chunk_path(path, sizeof path, g_ds, i));
        GT_ASSERT_OK(gt_file_read_all(path, 1u << 24, &g_sealed.file[i]));
        GT_ASSERT_OK(gt_chunk_key_derive(g_sealed.key[i], g_keys.dataset_key, &g_sealed.m, i));
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        gt_buf_free_nowipe(&g_sealed.file[i]);
    }
    gt_secure_zero(g_sealed.key, sizeof g_sealed.key);
    gt_manifest_free(&g_sealed.m);
    gt_holder_keys_wipe(&g_keys);
    free(g_tokens);
    gt_test_rmtree(g_dir);
    return 0;
}

static int setup(void **state)
{
    static const char *const args[] = {"--mem-limit", "32MiB", "--slot-size", "64KiB", "--slots",
                                       "3", "--threads", "1", NULL};
    return gt_test_devd_setup(state, args);
}

// The same devd paging (docs/paging.md): 512 KiB resident at most in 4 KiB pages, less than
// the two chunks of a trip, and just more than an op over the larger chunk needs.
static int setup_paged(void **state)
{
    gt_test_devd *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    char store[600];
    snprintf(store, sizeof store, "%s/pages", f->dir);
    assert_int_equal(mkdir(store, 0700), 0);
    const char *const args[] = {"--mem-limit", "512KiB", "--paging-store", store, "--page-size",
                                "4KiB", "--slot-size", "64KiB", "--slots", "3", "--threads",
                                "1", NULL};
    f->pid = gt_test_devd_start(f->sock, sizeof f->sock, f->dir, args);
    *state = f;
    return 0;
}

// After a trip on the paged devd: its pager did page (the chunks do not fit at once).
static void assert_paged(fixture *f)
{
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &st));
    gt_device_close(dev);
    assert_true(st.paging.page_outs > 0 && st.paging.peak_resident <= (512u << 10));
}


static gt_device *open_trainer(fixture *f)
{
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    return dev;
}

static gt_err attach(fixture *f, const uint8_t ticket[GT_SIM_TICKET_BYTES], gt_device **holder)
{
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.timeout_ms = 10000;
    return gt_device_sim_attach(holder, &cfg, &opt, ticket);
}

// The usual start of a trip: the trainer's session, a lend of lease_ms, the holder attached.
static gt_device *trip_start(fixture *f, gt_device **tr, uint32_t lease_ms,
                             uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    *tr = open_trainer(f);
    GT_ASSERT_OK(gt_device_sim_lend(*tr, lease_ms, ticket));
    gt_device *h = NULL;
    GT_ASSERT_OK(attach(f, ticket, &h));
    return h;
}

static uint64_t chunk_plain(uint32_t i) { return g_sealed.m.chunks[i].plaintext_len; }

// Loads sealed chunk i as stored (the file minus its 40-byte header) into dst.
static gt_err load_chunk(gt_device *holder, gt_dbuf dst, uint32_t i, const uint8_t *ct_and_tag)
{
    const gt_buf *file = &g_sealed.file[i];
    const uint8_t *aad = file->data + 8;  // header = magic(8) || AAD(32)
    if (ct_and_tag == NULL) {
        ct_and_tag = file->data + GT_CHUNK_HEADER_BYTES;
    }
    return gt_device_sim_load_sealed(holder, dst, 0, ct_and_tag,
                                     file->len - GT_CHUNK_HEADER_BYTES, g_sealed.m.chunks[i].iv,
                                     aad, g_sealed.key[i], g_sealed.m.segment_bytes);
}

static gt_device_sim_stat stat_of(gt_device *dev)
{
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &st));
    return st;
}

static gt_op tokens_check(gt_dbuf data, int64_t n, int64_t v)
{
    gt_op op;
    memset(&op, 0, sizeof op);
    op.kind = GT_OP_TOKENS_CHECK;
    op.refs[0] = (gt_dref){data, 0};
    op.ints[0] = n;
    op.ints[1] = v;
    return op;
}

static void test_full_trip(void **state)
{
    fixture *f = *state;
    gt_device *tr = open_trainer(f);
    // the trainer's own buffer survives the trip
    uint8_t mine[1000], back[1000];
    for (size_t i = 0; i < sizeof mine; i++) {
        mine[i] = (uint8_t)(i * 7);
    }
    gt_dbuf own = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, sizeof mine, 0, &own));
    GT_ASSERT_OK(gt_device_copy_in(tr, own, 0, mine, sizeof mine));
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0}, zero[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    assert_memory_not_equal(ticket, zero, sizeof ticket);

    gt_device *h = NULL;
    GT_ASSERT_OK(attach(f, ticket, &h));
    gt_dbuf b[2] = {0, 0};
    for (uint32_t i = 0; i < 2; i++) {
        GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(i), 0, &b[i]));
        GT_ASSERT_OK(load_chunk(h, b[i], i, NULL));
    }
    // the holder can neither read nor compute, nor see the trainer's buffers
    uint8_t tmp[64];
    GT_ASSERT_CODE(gt_device_copy_out(h, tmp, b[0], 0, sizeof tmp), GT_E_POLICY);
    gt_op chk = tokens_check(b[0], 100, VOCAB);
    GT_ASSERT_CODE(gt_device_launch(h, &chk), GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_copy_in(h, b[0], 0, tmp, sizeof tmp), GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_memset(h, b[0], 0, 0, 16), GT_E_POLICY);
    uint64_t sz = 0;
    GT_ASSERT_CODE(gt_device_buf_size(h, own, &sz), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_free(h, own), GT_E_NOTFOUND);
    GT_ASSERT_OK(gt_device_buf_size(h, b[1], &sz));
    assert_int_equal(sz, chunk_plain(1));
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_dbuf late = 0;
    GT_ASSERT_CODE(gt_device_alloc(h, 64, 0, &late), GT_E_STATE);  // the holder's session is over
    gt_device_close(h);

    gt_device_sim_loaded loaded[4];
    size_t n = 0;
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 4, &n));
    assert_int_equal(n, 2);
    for (uint32_t i = 0; i < 2; i++) {
        assert_int_equal(loaded[i].buf, b[i]);
        assert_int_equal(loaded[i].bytes, chunk_plain(i));
    }
    // the trainer owns them now, but can never read them back
    GT_ASSERT_CODE(gt_device_copy_out(tr, tmp, b[0], 0, sizeof tmp), GT_E_POLICY);
    GT_ASSERT_OK(gt_device_copy_out(tr, back, own, 0, sizeof back));
    assert_memory_equal(back, mine, sizeof mine);
    // it can run ops on them: every token < V, and a gathered batch equals the original tokens
    for (uint32_t i = 0; i < 2; i++) {
        chk = tokens_check(b[i], (int64_t)(chunk_plain(i) / 2), VOCAB);
        GT_ASSERT_OK(gt_device_launch(tr, &chk));
    }
    const int64_t N = 4096, OFF = 1234;
    gt_dbuf inp = 0, tgt = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, N * 4, 0, &inp));
    GT_ASSERT_OK(gt_device_alloc(tr, N * 4, 0, &tgt));
    uint64_t base = chunk_plain(0) / 2;  // chunk 1 starts at this token
    gt_op g;
    memset(&g, 0, sizeof g);
    g.kind = GT_OP_TOKENS_GATHER;
    g.refs[0] = (gt_dref){inp, 0};
    g.refs[1] = (gt_dref){tgt, 0};
    g.refs[2] = (gt_dref){b[1], 0};
    g.ints[0] = N;
    g.ints[1] = OFF;
    g.ints[2] = VOCAB;
    GT_ASSERT_OK(gt_device_launch(tr, &g));
    // The gathered tokens are the holder's text: they carry the chunk's dataset, so the
    // trainer's own buffers they landed in cannot be read back (issue 13: read back through an op).
    int32_t *gi = calloc(N, 4);
    gt_err e = gt_device_copy_out(tr, gi, inp, 0, N * 4);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "labelled dataset"));
    GT_ASSERT_CODE(gt_device_copy_out(tr, gi, tgt, 0, N * 4), GT_E_POLICY);
    for (int64_t i = 0; i < N; i++) {
        assert_int_equal(gi[i], 0);  // nothing came back
    }
    free(gi);
    size_t nlab = 0;
    uint8_t ids[2][GT_LABEL_ID_BYTES];
    GT_ASSERT_OK(gt_device_label_get(tr, inp, &nlab, ids, 2));
    assert_int_equal(nlab, 1);
    assert_memory_equal(ids[0], g_sealed.file[1].data + 8, GT_LABEL_ID_BYTES);  // its AAD's id
    (void)base;
    // A check that fails on the holder's data tells the trainer one bit about it; after that the
    // session runs nothing more on labelled data, so the bits cannot be had one at a time.
    chk = tokens_check(b[0], (int64_t)(chunk_plain(0) / 2), 5);
    GT_ASSERT_CODE(gt_device_launch(tr, &chk), GT_E_FORMAT);
    chk = tokens_check(b[0], (int64_t)(chunk_plain(0) / 2), VOCAB);
    GT_ASSERT_CODE(gt_device_launch(tr, &chk), GT_E_STATE);
    GT_ASSERT_CODE(gt_device_launch(tr, &g), GT_E_STATE);
    // the ticket is dead: a new connection is refused while the trainer holds the device ...
    gt_device *h2 = NULL;
    GT_ASSERT_CODE(attach(f, ticket, &h2), GT_E_STATE);
    assert_null(h2);
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 100, loaded, 4, &n), GT_E_NONE);
    gt_device_close(tr);
    // ... and, once the device is free, attaching with it is refused as well
    GT_ASSERT_CODE(attach(f, ticket, &h2), GT_E_STATE);
    assert_null(h2);
    // the trainer's session ended: every buffer (loaded ones too) wiped
    gt_device *t2 = open_trainer(f);
    gt_device_sim_stat st = stat_of(t2);
    assert_int_equal(st.buffers_live, 0);
    assert_int_equal(st.bytes_in_use, 0);
    GT_ASSERT_CODE(gt_device_sim_wait_return(t2, 100, loaded, 4, &n), GT_E_STATE);
    gt_device_close(t2);
}

static void test_trainer_refused_while_lent(void **state)
{
    fixture *f = *state;
    gt_device *tr = open_trainer(f);
    gt_dbuf own = 0;
    uint8_t buf[256] = {1, 2, 3};
    GT_ASSERT_OK(gt_device_alloc(tr, sizeof buf, 0, &own));
    GT_ASSERT_OK(gt_device_copy_in(tr, own, 0, buf, sizeof buf));
    GT_ASSERT_CODE(gt_device_sim_lend(tr, 0, (uint8_t[32]){0}), GT_E_ARG);
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0}, t2[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    gt_dbuf x = 0;
    GT_ASSERT_CODE(gt_device_alloc(tr, 64, 0, &x), GT_E_STATE);
    GT_ASSERT_CODE(gt_device_copy_out(tr, buf, own, 0, sizeof buf), GT_E_STATE);
    GT_ASSERT_CODE(gt_device_copy_in(tr, own, 0, buf, sizeof buf), GT_E_STATE);
    gt_op chk = tokens_check(own, 8, VOCAB);
    GT_ASSERT_CODE(gt_device_launch(tr, &chk), GT_E_STATE);
    GT_ASSERT_CODE(gt_device_free(tr, own), GT_E_STATE);
    GT_ASSERT_CODE(gt_device_sim_lend(tr, 1000, t2), GT_E_STATE);
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 50, loaded, 2, &n), GT_E_TIMEOUT);
    // a holder comes and returns with nothing loaded
    gt_device *h = NULL;
    GT_ASSERT_OK(attach(f, ticket, &h));
    GT_ASSERT_CODE(gt_device_alloc(tr, 64, 0, &x), GT_E_STATE);  // still away while attached
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 50, loaded, 2, &n), GT_E_TIMEOUT);
    gt_dbuf hb = 0;
    GT_ASSERT_OK(gt_device_alloc(h, 4096, 0, &hb));  // allocated, never loaded: wiped at return
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 0);
    // everything works again, the trainer's data intact
    uint8_t back[256];
    GT_ASSERT_OK(gt_device_copy_out(tr, back, own, 0, sizeof back));
    assert_int_equal(back[2], 3);
    GT_ASSERT_OK(gt_device_alloc(tr, 64, 0, &x));
    gt_device_sim_stat st = stat_of(tr);
    assert_int_equal(st.buffers_live, 2);
    GT_ASSERT_CODE(gt_device_buf_size(tr, hb, &(uint64_t){0}), GT_E_NOTFOUND);
    gt_device_close(tr);
}

static void test_wrong_ticket_and_second_attach(void **state)
{
    fixture *f = *state;
    gt_device *tr = open_trainer(f);
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    uint8_t wrong[GT_SIM_TICKET_BYTES];
    memcpy(wrong, ticket, sizeof wrong);
    wrong[31] ^= 1;
    gt_device *h = NULL, *h2 = NULL;
    GT_ASSERT_CODE(attach(f, wrong, &h), GT_E_AUTH);
    assert_null(h);
    GT_ASSERT_CODE(attach(f, wrong, &h), GT_E_AUTH);
    // another agreement hash: refused too
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.agreement_hash[0] = 1;
    GT_ASSERT_CODE(gt_device_sim_attach(&h, &cfg, &opt, ticket), GT_E_POLICY);
    // the lend stands: the right ticket attaches
    GT_ASSERT_OK(attach(f, ticket, &h));
    // a second attach, even with the right ticket, is refused (device busy)
    GT_ASSERT_CODE(attach(f, ticket, &h2), GT_E_STATE);
    assert_null(h2);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
    GT_ASSERT_OK(load_chunk(h, b, 1, NULL));
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 1);
    gt_device_close(tr);
}

static void test_tampered_chunk(void **state)
{
    fixture *f = *state;
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    size_t len = g_sealed.file[1].len - GT_CHUNK_HEADER_BYTES;
    uint8_t *bad = malloc(len);
    const size_t where[] = {0, SLOT_BYTES - 1, SLOT_BYTES, len - 17, len - 16, len - 1};
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        memcpy(bad, g_sealed.file[1].data + GT_CHUNK_HEADER_BYTES, len);
        bad[where[k]] ^= 0x40;
        gt_dbuf b = 0;
        GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
        gt_device_sim_stat before = stat_of(h);
        GT_ASSERT_CODE(load_chunk(h, b, 1, bad), GT_E_AUTH);
        gt_device_sim_stat after = stat_of(h);
        // the buffer was wiped and freed: its handle is dead
        assert_int_equal(after.buffers_live, before.buffers_live - 1);
        assert_true(after.bytes_wiped >= before.bytes_wiped + chunk_plain(1));
        assert_int_equal(after.bytes_in_use, before.bytes_in_use - ((chunk_plain(1) + 63) & ~63ull));
        GT_ASSERT_CODE(load_chunk(h, b, 1, NULL), GT_E_NOTFOUND);
    }
    // another chunk's key or AAD does not open it either
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b));
    GT_ASSERT_CODE(gt_device_sim_load_sealed(h, b, 0, g_sealed.file[0].data + 40,
                                             g_sealed.file[0].len - 40, g_sealed.m.chunks[0].iv,
                                             g_sealed.file[0].data + 8, g_sealed.key[1],
                                             g_sealed.m.segment_bytes),
                   GT_E_AUTH);
    // the session goes on: the genuine chunk loads
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
    GT_ASSERT_OK(load_chunk(h, b, 1, NULL));
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 1);
    assert_int_equal(loaded[0].buf, b);
    free(bad);
    gt_device_close(tr);
}

static void test_holder_killed_mid_load(void **state)
{
    fixture *f = *state;
    gt_device *tr = open_trainer(f);
    gt_device_sim_stat st0 = stat_of(tr);
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(pfd[0]);
        gt_device *h = NULL;
        if (!gt_is_ok(attach(f, ticket, &h))) {
            _exit(2);
        }
        gt_dbuf done = 0;  // one chunk fully loaded, then a second load cut short
        if (!gt_is_ok(gt_device_alloc(h, chunk_plain(1), 0, &done)) ||
            !gt_is_ok(load_chunk(h, done, 1, NULL))) {
            _exit(3);
        }
        gt_sim_conn *c = gt_device_backend_impl(h, GT_DEVICE_SIM);
        gt_dbuf b = 0;
        if (!gt_is_ok(gt_device_alloc(h, chunk_plain(0), 0, &b))) {
            _exit(4);
        }
        gt_sim_msg req = {.type = GT_SIM_REQ_LOAD_SEALED, .handle = b,
                          .len = chunk_plain(0)}, m;
        memcpy(req.iv, g_sealed.m.chunks[0].iv, 12);
        memcpy(req.aad, g_sealed.file[0].data + 8, 32);
        memcpy(req.key, g_sealed.key[0], 32);
        if (!gt_is_ok(gt_sim_conn_send(c, &req)) || !gt_is_ok(gt_sim_conn_recv(c, &m)) ||
            m.type != GT_SIM_REP_STATUS || m.status.code != 0) {
            _exit(5);
        }
        memcpy(c->bounce, g_sealed.file[0].data + 40, SLOT_BYTES);
        gt_sim_msg ch = {.type = GT_SIM_MSG_CHUNK, .slot = 0, .len = SLOT_BYTES};
        if (!gt_is_ok(gt_sim_conn_send(c, &ch)) || write(pfd[1], "r", 1) != 1) {
            _exit(6);
        }
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char r = 0;
    assert_int_equal(read(pfd[0], &r, 1), 1);
    close(pfd[0]);
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 50, loaded, 2, &n), GT_E_TIMEOUT);  // loaded
    sleep_ms(20);
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    assert_true(WIFSIGNALED(status));
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n), GT_E_PEER);
    assert_int_equal(n, 0);
    // both trip buffers (the complete one too) wiped; the device is the trainer's again
    gt_device_sim_stat st = stat_of(tr);
    assert_int_equal(st.buffers_live, st0.buffers_live);
    assert_int_equal(st.bytes_in_use, st0.bytes_in_use);
    assert_true(st.bytes_wiped >= st0.bytes_wiped + chunk_plain(0) + chunk_plain(1));
    gt_dbuf x = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, 64, 0, &x));
    gt_device_close(tr);
}

static void test_lease_timeout(void **state)
{
    fixture *f = *state;
    gt_device *tr = open_trainer(f);
    gt_device_sim_stat st0 = stat_of(tr);
    // nobody comes
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 200, ticket));
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n), GT_E_TIMEOUT);
    gt_dbuf x = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, 64, 0, &x));  // back at the trainer
    GT_ASSERT_OK(gt_device_free(tr, x));
    gt_device *h = NULL;
    GT_ASSERT_CODE(attach(f, ticket, &h), GT_E_STATE);  // the expired ticket is dead
    // a holder that overstays: loads, then the lease ends before its RETURN
    GT_ASSERT_OK(gt_device_sim_lend(tr, 1500, ticket));
    GT_ASSERT_OK(attach(f, ticket, &h));
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
    GT_ASSERT_OK(load_chunk(h, b, 1, NULL));
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n), GT_E_TIMEOUT);
    gt_err e = gt_device_sim_return(h);
    assert_int_not_equal(e.code, GT_E_NONE);  // too late: devd ended the holder's session
    gt_device_close(h);
    gt_device_sim_stat st = stat_of(tr);
    assert_int_equal(st.buffers_live, st0.buffers_live);
    assert_int_equal(st.bytes_in_use, st0.bytes_in_use);
    gt_device_close(tr);
}

static gt_op gather(gt_dbuf inp, gt_dbuf tgt, gt_dbuf data, int64_t n, int64_t off)
{
    gt_op g;
    memset(&g, 0, sizeof g);
    g.kind = GT_OP_TOKENS_GATHER;
    g.refs[0] = (gt_dref){inp, 0};
    g.refs[1] = (gt_dref){tgt, 0};
    g.refs[2] = (gt_dref){data, 0};
    g.ints[0] = n;
    g.ints[1] = off;
    g.ints[2] = VOCAB;
    return g;
}

// LOAD_SEALED_FD: devd reads the chunk file itself (the descriptor travels with the record).
static void test_load_from_file(void **state)
{
    fixture *f = *state;
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    char path[700], badpath[700];
    GT_ASSERT_OK(gt_chunk_path(path, sizeof path, g_ds, 0));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    uint64_t flen = g_sealed.file[0].len - GT_CHUNK_HEADER_BYTES;
    const uint8_t *aad = g_sealed.file[0].data + 8;
    gt_dbuf b = 0, x = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b));
    // a file too short for the claimed length, and a pipe: refused, nothing loaded, session goes on
    GT_ASSERT_CODE(gt_device_sim_load_sealed_fd(h, b, 0, fd, GT_CHUNK_HEADER_BYTES + 1, flen,
                                                g_sealed.m.chunks[0].iv, aad, g_sealed.key[0],
                                                g_sealed.m.segment_bytes),
                   GT_E_ARG);
    int pp[2];
    assert_int_equal(pipe(pp), 0);
    GT_ASSERT_CODE(gt_device_sim_load_sealed_fd(h, b, 0, pp[0], 0, flen, g_sealed.m.chunks[0].iv,
                                                aad, g_sealed.key[0], g_sealed.m.segment_bytes),
                   GT_E_ARG);
    close(pp[0]);
    close(pp[1]);
    GT_ASSERT_OK(gt_device_sim_load_sealed_fd(h, b, 0, fd, GT_CHUNK_HEADER_BYTES, flen,
                                              g_sealed.m.chunks[0].iv, aad, g_sealed.key[0],
                                              g_sealed.m.segment_bytes));
    close(fd);
    // a tampered copy of the file: GT_E_AUTH, the buffer wiped and freed
    snprintf(badpath, sizeof badpath, "%s/bad.gtc", f->dir);
    uint8_t *bad = malloc(g_sealed.file[0].len);
    memcpy(bad, g_sealed.file[0].data, g_sealed.file[0].len);
    bad[GT_CHUNK_HEADER_BYTES + 70000] ^= 1;
    GT_ASSERT_OK(gt_file_write_atomic(badpath, bad, g_sealed.file[0].len, 0600));
    free(bad);
    fd = open(badpath, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &x));
    uint64_t live = stat_of(h).buffers_live;
    GT_ASSERT_CODE(gt_device_sim_load_sealed_fd(h, x, 0, fd, GT_CHUNK_HEADER_BYTES, flen,
                                                g_sealed.m.chunks[0].iv, aad, g_sealed.key[0],
                                                g_sealed.m.segment_bytes),
                   GT_E_AUTH);
    close(fd);
    assert_int_equal(stat_of(h).buffers_live, live - 1);
    GT_ASSERT_CODE(gt_device_buf_size(h, x, &(uint64_t){0}), GT_E_NOTFOUND);
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 1);
    assert_int_equal(loaded[0].buf, b);
    assert_int_equal(loaded[0].bytes, chunk_plain(0));
    const int64_t N = 2048, OFF = 99;
    gt_dbuf inp = 0, tgt = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, N * 4, 0, &inp));
    GT_ASSERT_OK(gt_device_alloc(tr, N * 4, 0, &tgt));
    // The loaded text can no longer be read back (it carries the holder's label); what the
    // device decrypted from the file is checked through what an op may say about it: gather
    // accepts the window under a vocabulary of its largest token + 1 and refuses it under its
    // largest token, so the window holds that token exactly where the plaintext has it.
    uint16_t top = 0;
    for (int64_t i = 0; i <= N; i++) {
        top = g_tokens[OFF + i] > top ? g_tokens[OFF + i] : top;
    }
    gt_op g = gather(inp, tgt, b, N, OFF);
    g.ints[2] = (int64_t)top + 1;
    GT_ASSERT_OK(gt_device_launch(tr, &g));
    g.ints[2] = top;
    GT_ASSERT_CODE(gt_device_launch(tr, &g), GT_E_FORMAT);
    int32_t *gi = calloc(N, 4);
    GT_ASSERT_CODE(gt_device_copy_out(tr, gi, inp, 0, N * 4), GT_E_POLICY);
    free(gi);
    gt_device_close(tr);
}

// A chunk key wrapped to devd (a holder in enclave mode, docs/holder-enclave.md; the test plays
// the holder enclave): loads only under the binding devd itself knows. Wrapped to another devd
// key, for another trip, chunk or agreement, or with one bit flipped: GT_E_AUTH, nothing loaded,
// the session goes on; the right one loads. The same wrapped key on the next trip: refused.
static gt_err wrapped_load(gt_device *h, gt_dbuf b, int fd, const uint8_t wrapped[92])
{
    return gt_device_sim_load_sealed_wrapped(h, b, 0, fd, GT_CHUNK_HEADER_BYTES,
                                             g_sealed.file[0].len - GT_CHUNK_HEADER_BYTES,
                                             g_sealed.m.chunks[0].iv, g_sealed.file[0].data + 8,
                                             wrapped, g_sealed.m.segment_bytes);
}

static void wrap_for(uint8_t out[GT_KEYWRAP_BYTES], const uint8_t pub[32],
                     const uint8_t agreement[32], uint32_t chunk, const uint8_t trip[32],
                     const uint8_t hello[32])
{
    uint8_t aad[GT_RELEASE_AAD_BYTES];
    gt_release_aad_build(aad, agreement, g_sealed.m.dataset_id, chunk, trip, hello);
    GT_ASSERT_OK(gt_x25519_wrap(out, g_sealed.key[0], pub, aad, sizeof aad));
}

static void test_load_wrapped_key(void **state)
{
    fixture *f = *state;
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    uint8_t pub[32], hello[32], trip[32], agreement[32] = {0}, w[GT_KEYWRAP_BYTES];
    GT_ASSERT_OK(gt_device_sim_session_binding(h, pub, hello));
    GT_ASSERT_OK(gt_release_trip_id(trip, ticket));
    char path[700];
    GT_ASSERT_OK(gt_chunk_path(path, sizeof path, g_ds, 0));
    gt_dbuf b = 0;
    uint64_t live = stat_of(h).buffers_live;
    uint8_t other_pub[32], other_sec[32], other[32];
    GT_ASSERT_OK(gt_x25519_keypair(other_pub, other_sec));
    for (int attack = 0; attack < 6; attack++) {
        memcpy(other, trip, sizeof other);
        other[0] ^= 1;
        uint8_t bad_agreement[32] = {1};
        switch (attack) {
        case 0: wrap_for(w, other_pub, agreement, 0, trip, hello); break;      // another devd
        case 1: wrap_for(w, pub, agreement, 0, other, hello); break;           // another trip
        case 2: wrap_for(w, pub, agreement, 1, trip, hello); break;            // another chunk
        case 3: wrap_for(w, pub, bad_agreement, 0, trip, hello); break;        // another agreement
        case 4: wrap_for(w, pub, agreement, 0, trip, other); break;            // another session
        default: wrap_for(w, pub, agreement, 0, trip, hello); w[50] ^= 0x10;   // a flipped bit
        }
        GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b));
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        gt_err e = wrapped_load(h, b, fd, w);
        close(fd);
        if (e.code != GT_E_AUTH) {
            fail_msg("attack %d: %s", attack, e.msg);
        }
        gt_err freed = gt_device_free(h, b);  // the failed load wiped and freed it (or not)
        (void)freed;
    }
    assert_int_equal(stat_of(h).buffers_live, live);
    wrap_for(w, pub, agreement, 0, trip, hello);
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    GT_ASSERT_OK(wrapped_load(h, b, fd, w));
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 1);
    assert_int_equal(loaded[0].bytes, chunk_plain(0));
    // the next trip: a new ticket and session; the old wrapped key is refused
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    GT_ASSERT_OK(attach(f, ticket, &h));
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b));
    GT_ASSERT_CODE(wrapped_load(h, b, fd, w), GT_E_AUTH);
    close(fd);
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 0);
    gt_device_close(tr);
}

// The full trip and the load from a file, on the paged devd: loads, ops and refusals as
// unpaged, with the chunks going through the store.
static void test_full_trip_paged(void **state)
{
    test_full_trip(state);
    assert_paged(*state);
}

static void test_load_from_file_paged(void **state)
{
    test_load_from_file(state);
    assert_paged(*state);
}

static void test_holder_close_without_return(void **state)
{
    fixture *f = *state;
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
    GT_ASSERT_OK(load_chunk(h, b, 1, NULL));
    gt_device_close(h);  // BYE, not RETURN: the trip fails
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n), GT_E_PEER);
    GT_ASSERT_CODE(gt_device_buf_size(tr, b, &(uint64_t){0}), GT_E_NOTFOUND);
    assert_int_equal(stat_of(tr).buffers_live, 0);
    gt_device_close(tr);
}

// A holder that refuses before attaching never returns the device: the trainer recalls it and
// has it back at once, not at the lease's end; a recalled ticket is dead. Once a holder is
// attached the recall is refused (its RETURN or departure ends the trip).
static void test_recall_before_attach(void **state)
{
    fixture *f = *state;
    gt_device *tr = open_trainer(f);
    GT_ASSERT_CODE(gt_device_sim_recall(tr), GT_E_STATE);  // not lent
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 60000, ticket));
    double t0 = gt_now_seconds();
    GT_ASSERT_OK(gt_device_sim_recall(tr));
    gt_device_sim_loaded loaded[2];
    size_t n = 0;
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n), GT_E_STATE);
    assert_true(gt_now_seconds() - t0 < 5.0);
    gt_dbuf x = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, 64, 0, &x));  // back at the trainer
    GT_ASSERT_OK(gt_device_free(tr, x));
    gt_device *h = NULL;
    GT_ASSERT_CODE(attach(f, ticket, &h), GT_E_STATE);  // the recalled ticket is dead
    assert_null(h);
    // Attached: the recall is refused, the holder's trip goes on and returns as usual.
    GT_ASSERT_OK(gt_device_sim_lend(tr, 60000, ticket));
    GT_ASSERT_OK(attach(f, ticket, &h));
    GT_ASSERT_CODE(gt_device_sim_recall(tr), GT_E_STATE);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
    GT_ASSERT_OK(load_chunk(h, b, 1, NULL));
    GT_ASSERT_CODE(gt_device_sim_recall(h), GT_E_POLICY);  // not the holder's to recall
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, 2, &n));
    assert_int_equal(n, 1);
    gt_device_close(tr);
}

// Waits for the trip to end; returns how many buffers it loaded.
static size_t trip_back(gt_device *tr, gt_device_sim_loaded *loaded, size_t cap)
{
    size_t n = 0;
    GT_ASSERT_OK(gt_device_sim_wait_return(tr, 5000, loaded, cap, &n));
    return n;
}

// RETURN_STAY parks the holder's attested session: the next trip attaches it with the new ticket
// and no handshake (devd counts no new session), loads, and the trainer gets exactly that
// trip's buffer. Parked, the session can do nothing but reattach; a wrong ticket ends it and
// leaves the lend standing.
static void test_parked_session_next_trip(void **state)
{
    fixture *f = *state;
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    gt_dbuf b[2] = {0, 0};
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b[0]));
    GT_ASSERT_OK(load_chunk(h, b[0], 0, NULL));
    GT_ASSERT_OK(gt_device_sim_return_stay(h));
    gt_device_sim_loaded loaded[2];
    assert_int_equal(trip_back(tr, loaded, 2), 1);
    assert_int_equal(loaded[0].buf, b[0]);
    const uint64_t sessions = stat_of(tr).sessions;
    // parked: nothing but a reattach (and the old ticket is dead)
    gt_dbuf x = 0;
    GT_ASSERT_CODE(gt_device_alloc(h, 64, 0, &x), GT_E_STATE);
    GT_ASSERT_CODE(gt_device_sim_return(h), GT_E_STATE);

    uint8_t ticket2[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket2));
    GT_ASSERT_OK(gt_device_sim_reattach(h, ticket2));
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b[1]));
    GT_ASSERT_OK(load_chunk(h, b[1], 1, NULL));
    uint64_t sz = 0;
    GT_ASSERT_CODE(gt_device_buf_size(h, b[0], &sz), GT_E_NOTFOUND);  // not this trip's
    GT_ASSERT_OK(gt_device_sim_return_stay(h));
    assert_int_equal(trip_back(tr, loaded, 2), 1);
    assert_int_equal(loaded[0].buf, b[1]);
    assert_int_equal(loaded[0].bytes, chunk_plain(1));
    assert_int_equal(stat_of(tr).sessions, sessions);  // no new handshake
    for (uint32_t i = 0; i < 2; i++) {
        gt_op chk = tokens_check(b[i], (int64_t)(chunk_plain(i) / 2), VOCAB);
        GT_ASSERT_OK(gt_device_launch(tr, &chk));
    }

    // a wrong ticket on the parked session: refused and the session ends; the lend stands
    uint8_t ticket3[GT_SIM_TICKET_BYTES] = {0};
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket3));
    GT_ASSERT_CODE(gt_device_sim_reattach(h, ticket2), GT_E_AUTH);
    GT_ASSERT_CODE(gt_device_sim_reattach(h, ticket3), GT_E_STATE);
    gt_device_close(h);
    GT_ASSERT_OK(attach(f, ticket3, &h));
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    assert_int_equal(trip_back(tr, loaded, 2), 0);
    assert_int_equal(stat_of(tr).buffers_live, 2);
    gt_device_close(tr);
}

// A parked session is tied to the agreement of its handshake; one whose holder went away is
// cleaned up at the next lend; a reattach when no lend is on (devd idle) is refused at once.
static void test_parked_session_refusals(void **state)
{
    fixture *f = *state;
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device_sim_options other;
    memset(&other, 0, sizeof other);
    other.timeout_ms = 10000;
    other.agreement_hash[0] = 1;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device_sim_loaded loaded[2];
    // a session parked under another agreement cannot attach to this trainer's lend
    gt_device *tb = NULL, *h = NULL, *h2 = NULL;
    GT_ASSERT_OK(gt_device_open_sim(&tb, &cfg, &other));
    GT_ASSERT_OK(gt_device_sim_lend(tb, 10000, ticket));
    GT_ASSERT_OK(gt_device_sim_attach(&h, &cfg, &other, ticket));
    GT_ASSERT_OK(gt_device_sim_return_stay(h));
    assert_int_equal(trip_back(tb, loaded, 2), 0);
    gt_device_close(tb);
    gt_device *tr = open_trainer(f);
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    GT_ASSERT_CODE(gt_device_sim_reattach(h, ticket), GT_E_POLICY);
    gt_device_close(h);
    // the lend stands; this holder parks, then goes away while parked
    GT_ASSERT_OK(attach(f, ticket, &h));
    GT_ASSERT_OK(gt_device_sim_return_stay(h));
    assert_int_equal(trip_back(tr, loaded, 2), 0);
    gt_device_close(h);  // no BYE wait: devd is not reading a parked session now
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    GT_ASSERT_OK(attach(f, ticket, &h2));
    GT_ASSERT_OK(gt_device_sim_return_stay(h2));
    assert_int_equal(trip_back(tr, loaded, 2), 0);
    // the lease runs out and the trainer has its device again: a late reattach gives up soon
    GT_ASSERT_OK(gt_device_sim_lend(tr, 200, ticket));
    GT_ASSERT_CODE(gt_device_sim_wait_return(tr, 5000, loaded, 2, &(size_t){0}), GT_E_TIMEOUT);
    gt_dbuf own = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, 64, 0, &own));  // the trainer's session is being served
    double t1 = gt_now_seconds();
    GT_ASSERT_CODE(gt_device_sim_reattach(h2, ticket), GT_E_TIMEOUT);
    assert_true(gt_now_seconds() - t1 < 4.0);
    GT_ASSERT_OK(gt_device_free(tr, own));
    gt_device_close(h2);
    // the next lend ends that session; another holder parks, and the trainer leaves: devd is
    // idle, and a late reattach is answered at once
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    GT_ASSERT_OK(attach(f, ticket, &h2));
    GT_ASSERT_OK(gt_device_sim_return_stay(h2));
    assert_int_equal(trip_back(tr, loaded, 2), 0);
    gt_device_close(tr);
    double t0 = gt_now_seconds();
    GT_ASSERT_CODE(gt_device_sim_reattach(h2, ticket), GT_E_STATE);
    assert_true(gt_now_seconds() - t0 < 3.0);
    gt_device_close(h2);
    tr = open_trainer(f);  // and devd serves on
    assert_int_equal(stat_of(tr).buffers_live, 0);
    gt_device_close(tr);
}

static void test_trainer_dies_while_lent(void **state)
{
    fixture *f = *state;
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(1), 0, &b));
    gt_device_close(tr);  // its session ends: the trip fails, the holder is cut off
    GT_ASSERT_CODE(load_chunk(h, b, 1, NULL), GT_E_PEER);
    gt_device_close(h);
    gt_device *t2 = NULL;
    for (int i = 0; i < 100; i++) {  // devd is free again
        gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
        if (gt_is_ok(gt_device_open(&t2, &cfg))) {
            break;
        }
        sleep_ms(20);
    }
    assert_non_null(t2);
    gt_device_sim_stat st = stat_of(t2);
    assert_int_equal(st.buffers_live, 0);
    gt_device_close(t2);
}

// Each travel record round-trips and is accepted only at its exact size.
static void test_messages_exact_sizes(void **state)
{
    (void)state;
    gt_sim_msg in[11];
    memset(in, 0, sizeof in);
    in[0].type = GT_SIM_REQ_LEND;
    in[0].ms = 1234;
    in[1].type = GT_SIM_REQ_TRIP_STATUS;
    in[2].type = GT_SIM_REQ_ATTACH;
    memset(in[2].ticket, 0xa5, sizeof in[2].ticket);
    in[3].type = GT_SIM_REQ_LOAD_SEALED;
    in[3].handle = 7;
    in[3].offset = 64;
    in[3].len = 1000;
    memset(in[3].iv, 1, sizeof in[3].iv);
    memset(in[3].aad, 2, sizeof in[3].aad);
    memset(in[3].key, 3, sizeof in[3].key);
    in[4].type = GT_SIM_REQ_RETURN;
    in[5].type = GT_SIM_REP_TICKET;
    memset(in[5].ticket, 0x5a, sizeof in[5].ticket);
    in[6].type = GT_SIM_REP_TRIP;
    in[6].state = GT_SIM_TRIP_RETURNED;
    in[6].code = 0;
    in[6].count = 3;
    in[7].type = GT_SIM_REP_LOADED;
    in[7].handle = 9;
    in[7].len = 4096;
    in[8] = in[3];
    in[8].type = GT_SIM_REQ_LOAD_SEALED_FD;
    in[8].file_offset = 40;
    in[9].type = GT_SIM_REQ_RECALL;
    in[10].type = GT_SIM_REQ_RETURN_STAY;
    const size_t sizes[11] = {6, 2, 34, 106, 2, 34, 14, 18, 114, 2, 2};  // loads: + u32 seg_bytes
    for (int i = 0; i < 11; i++) {
        uint8_t buf[256];
        gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
        GT_ASSERT_OK(gt_sim_msg_write(&w, &in[i]));
        assert_int_equal(w.len, sizes[i]);
        gt_sim_msg out;
        GT_ASSERT_OK(gt_sim_msg_parse((gt_span){buf, w.len}, &out));
        assert_int_equal(out.type, in[i].type);
        assert_int_equal(out.ms, in[i].ms);
        assert_int_equal(out.handle, in[i].handle);
        assert_int_equal(out.offset, in[i].offset);
        assert_int_equal(out.file_offset, in[i].file_offset);
        assert_int_equal(out.len, in[i].len);
        assert_int_equal(out.state, in[i].state);
        assert_int_equal(out.count, in[i].count);
        assert_memory_equal(out.ticket, in[i].ticket, sizeof out.ticket);
        assert_memory_equal(out.iv, in[i].iv, sizeof out.iv);
        assert_memory_equal(out.aad, in[i].aad, sizeof out.aad);
        assert_memory_equal(out.key, in[i].key, sizeof out.key);
        assert_string_not_equal(gt_sim_msg_name(in[i].type), "unknown");
        gt_sim_msg junk;
        memset(&junk, 0x77, sizeof junk);
        GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, w.len - 1}, &junk),
                       GT_E_TRUNCATED);
        assert_int_equal(junk.type, 0x7777);  // untouched on failure
        buf[w.len] = 0;
        GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, w.len + 1}, &junk), GT_E_FORMAT);
    }
    // a trip report with an impossible state or count
    uint8_t bad[14] = {0x06, 0x03, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    gt_sim_msg out;
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){bad, sizeof bad}, &out), GT_E_FORMAT);
    bad[2] = GT_SIM_TRIP_RETURNED;
    bad[12] = 1;  // count 65536
    GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){bad, sizeof bad}, &out), GT_E_FORMAT);
}

// GTCHUNK2 through devd's two-thread file path: segments 1 and 2 of chunk 0 swapped (same
// sizes, so only the per-segment nonce and AAD can tell), then the last segment's tag flipped
// (the worker thread's half): GT_E_AUTH each time, the buffer wiped and freed, the session on.
static void test_segments_attacked_in_file(void **state)
{
    fixture *f = *state;
    if (g_format != 2) {
        skip();
    }
    gt_device *tr = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES] = {0};
    gt_device *h = trip_start(f, &tr, 10000, ticket);
    const gt_buf *file = &g_sealed.file[0];
    const size_t step = V2_SEG + GT_AEAD_TAG_BYTES;
    uint64_t body = file->len - GT_CHUNK_HEADER_BYTES;
    char badpath[700];
    snprintf(badpath, sizeof badpath, "%s/bad.gtc", f->dir);
    uint8_t *bad = malloc(file->len);
    for (int attack = 0; attack < 2; attack++) {
        memcpy(bad, file->data, file->len);
        if (attack == 0) {
            memcpy(bad + GT_CHUNK_HEADER_BYTES + step, file->data + GT_CHUNK_HEADER_BYTES + 2 * step,
                   step);
            memcpy(bad + GT_CHUNK_HEADER_BYTES + 2 * step, file->data + GT_CHUNK_HEADER_BYTES + step,
                   step);
        } else {
            bad[file->len - 1] ^= 0x40;
        }
        GT_ASSERT_OK(gt_file_write_atomic(badpath, bad, file->len, 0600));
        int fd = open(badpath, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        gt_dbuf x = 0;
        GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &x));
        uint64_t live = stat_of(h).buffers_live;
        GT_ASSERT_ERR(gt_device_sim_load_sealed_fd(h, x, 0, fd, GT_CHUNK_HEADER_BYTES, body,
                                                   g_sealed.m.chunks[0].iv, file->data + 8,
                                                   g_sealed.key[0], V2_SEG),
                      GT_E_AUTH, "wiped and freed");
        close(fd);
        assert_int_equal(stat_of(h).buffers_live, live - 1);
        GT_ASSERT_CODE(gt_device_buf_size(h, x, &(uint64_t){0}), GT_E_NOTFOUND);
    }
    free(bad);
    // the genuine file still loads in the same session
    char path[700];
    GT_ASSERT_OK(gt_chunk_path(path, sizeof path, g_ds, 0));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(h, chunk_plain(0), 0, &b));
    GT_ASSERT_OK(gt_device_sim_load_sealed_fd(h, b, 0, fd, GT_CHUNK_HEADER_BYTES, body,
                                              g_sealed.m.chunks[0].iv, file->data + 8,
                                              g_sealed.key[0], V2_SEG));
    close(fd);
    GT_ASSERT_OK(gt_device_sim_return(h));
    gt_device_close(h);
    gt_device_close(tr);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "v2") == 0) {
        g_format = 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_exact_sizes),
        cmocka_unit_test_setup_teardown(test_full_trip, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_trainer_refused_while_lent, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_ticket_and_second_attach, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_tampered_chunk, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_holder_killed_mid_load, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_lease_timeout, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_holder_close_without_return, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_recall_before_attach, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_load_from_file, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_load_wrapped_key, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_segments_attacked_in_file, setup,
                                        gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_trainer_dies_while_lent, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_parked_session_next_trip, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_parked_session_refusals, setup, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_full_trip_paged, setup_paged, gt_test_devd_teardown),
        cmocka_unit_test_setup_teardown(test_load_from_file_paged, setup_paged,
                                        gt_test_devd_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
