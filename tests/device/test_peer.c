// device/: peers (device.h "peers"; issue 16). Devices of a data-parallel run admit each other
// by attestation and move labelled gradient chunks sealed by the device: cpu + cpu in this
// process; sim + sim with two (three) devd processes this test starts; with a GPU (cuda builds),
// cuda + cpu both ways in this process: a chunk the GPU sealed opens on a cpu peer and the
// reverse, so the two backends' wire bytes interoperate. Each attack is one case
// and asserts the refusal and that nothing was added: the destination holds what it held, and
// the honest chunk still opens afterwards (the receiver's sequence did not move).
#include "testlib.h"

#include <gputravel/attest.h>
#include <gputravel/device.h>
#include <gputravel/travel.h>
#ifdef GT_HAVE_CUDA
#include <gputravel/device_cuda.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 96          // floats in a test buffer
#define CHUNK 64      // floats in a chunk (elements [OFF, OFF + CHUNK))
#define OFF 16
#define MAX_DEV 3

static const uint8_t DATASET[GT_LABEL_ID_BYTES] = {0xd5, 0x7a, 0x5e, 0x70, 0x11, 0x22, 0x33, 0x44,
                                                   0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc};
#define DATASET_HEX "d57a5e70112233445566778899aabbcc"

typedef struct {
    gt_device_kind kind;
    gt_device_kind kinds[MAX_DEV];  // each device's backend (mixed worlds: cuda and cpu)
    char dir[512];
    char sock[MAX_DEV][600];
    pid_t devd[MAX_DEV];
    gt_device *dev[MAX_DEV];
    gt_agreement a;
    uint8_t run[16];
    bool paged;              // devices that page beyond a 2 MiB cap (docs/paging.md)
    char pages[MAX_DEV][700];
} world;

// ---- fixtures ------------------------------------------------------------------------------------

static void hex48(char out[97], const uint8_t m[GT_MEASUREMENT_BYTES])
{
    gt_hex_encode(out, 97, m, GT_MEASUREMENT_BYTES);
}

// An agreement for `ranks` trainer ranks accepting this test's process as the trainer and as a
// cpu device, and this build's devd as a sim device; `name` makes it another agreement.
static void agreement_make_devices(gt_agreement *a, const char *name, uint32_t ranks,
                                   bool cpu_device, bool sim_device);

static void agreement_make(gt_agreement *a, const char *name, uint32_t ranks)
{
    agreement_make_devices(a, name, ranks, true, true);
}

// The same with only the cpu device (this process) or only the sim device (devd) accepted.
static void agreement_make_devices(gt_agreement *a, const char *name, uint32_t ranks,
                                   bool cpu_device, bool sim_device)
{
    uint8_t self[GT_MEASUREMENT_BYTES], cli[GT_MEASUREMENT_BYTES];
    GT_ASSERT_OK(gt_sim_measure_exe(self, NULL));
    GT_ASSERT_OK(gt_sim_measure_exe(cli, GT_CLI_PATH));
    char hs[97], hc[97], doc[4096];
    hex48(hs, self);
    hex48(hc, cli);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"%s\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":64,\"max_seq\":8,\"init_seed\":5},\"training\":{\"steps\":4,"
             "\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h0\","
             "\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%s\","
             "\"token_budget\":100000,\"max_uses_per_chunk\":1}],"
             "\"trainer\":{\"accepted_measurements\":[\"%s\"],\"ranks\":%u},"
             "\"device\":{\"accepted_measurements\":[\"%s\"%s%s%s]},"
             "\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}",
             name, 0, DATASET_HEX, hs, ranks, cpu_device ? hs : hc, cpu_device && sim_device
             ? ",\"" : "", cpu_device && sim_device ? hc : "", cpu_device && sim_device ? "\""
             : "");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

// Sim evidence of another executable (the gputravel CLI): a trainer the agreement does not list.
static gt_err produce_other(void *ctx, const uint8_t rd[GT_REPORT_DATA_BYTES], gt_buf *evidence)
{
    (void)ctx;
    gt_collect_params p = {.type = GT_TEE_SIM, .sim_exe = GT_CLI_PATH};
    gt_evidence ev;
    GT_TRY(gt_attest_collect(&ev, &p, rd));
    gt_err err = gt_evidence_encode(&ev, evidence);
    gt_evidence_free(&ev);
    return err;
}

static const gt_device_attester other_trainer = {.produce = produce_other};

// Device i of the world, declared with agreement a (its outputs and peer rules).
static gt_device *open_dev(world *w, int i, const gt_agreement *a, const gt_device_attester *att)
{
    gt_device_config cfg = {.kind = w->kinds[i], .threads = 1, .mem_limit = 16u << 20,
                            .socket_path = w->sock[i], .attester = att};
    if (w->paged && w->kind == GT_DEVICE_CPU) {  // sim: devd's own flags (setup_sim_paged)
        snprintf(w->pages[i], sizeof w->pages[i], "%s/pages%d", w->dir, i);
        assert_int_equal(gt_mkdir_p(w->pages[i], 0700).code, GT_E_NONE);
        cfg.mem_limit = 2u << 20;
        cfg.paging_store = w->pages[i];
        cfg.page_bytes = 4096;
    }
    gt_device *dev = NULL;
    if (w->kind == GT_DEVICE_SIM) {
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        if (att != NULL) {
            opt.attester.produce = att->produce;
        }
        memcpy(opt.agreement_hash, a->hash, GT_SHA256_BYTES);
        GT_ASSERT_OK(gt_device_open_sim(&dev, &cfg, &opt));
    } else {
        GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    }
    gt_device_outputs o;
    gt_agreement_device_outputs(a, &o);
    GT_ASSERT_OK(gt_device_declare_outputs(dev, &o, (gt_span){a->doc, a->doc_len}));
    w->dev[i] = dev;
    return dev;
}

static void close_all(world *w)
{
    for (int i = 0; i < MAX_DEV; i++) {
        gt_device_close(w->dev[i]);
        w->dev[i] = NULL;
    }
}

static int setup_kind_paged(void **state, gt_device_kind kind, bool paged)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->kind = kind;
    for (int i = 0; i < MAX_DEV; i++) {
        w->kinds[i] = kind;
    }
    w->paged = paged;
    gt_test_tmpdir(w->dir, sizeof w->dir);
    char root[700];
    snprintf(root, sizeof root, "%s/sim-root", w->dir);
    setenv("GT_SIM_ROOT", root, 1);
    GT_ASSERT_OK(gt_sim_root_set(root));
    if (kind == GT_DEVICE_SIM) {
        for (int i = 0; i < MAX_DEV; i++) {
            char d[600];
            snprintf(d, sizeof d, "%s/devd%d", w->dir, i);
            assert_int_equal(gt_mkdir_p(d, 0700).code, GT_E_NONE);
            const char *args[] = {"--mem-limit", "16MiB", NULL};
            snprintf(w->pages[i], sizeof w->pages[i], "%s/pages", d);
            assert_int_equal(gt_mkdir_p(w->pages[i], 0700).code, GT_E_NONE);
            const char *paged_args[] = {"--mem-limit", "2MiB", "--paging-store", w->pages[i],
                                        "--page-size", "4096", NULL};
            w->devd[i] = gt_test_devd_start(w->sock[i], sizeof w->sock[i], d,
                                            paged ? paged_args : args);
        }
    }
    *state = w;
    return 0;
}

static int setup_cpu(void **state) { return setup_kind_paged(state, GT_DEVICE_CPU, false); }
static int setup_cpu_paged(void **state) { return setup_kind_paged(state, GT_DEVICE_CPU, true); }
static int setup_sim(void **state) { return setup_kind_paged(state, GT_DEVICE_SIM, false); }
static int setup_sim_paged(void **state) { return setup_kind_paged(state, GT_DEVICE_SIM, true); }

#ifdef GT_HAVE_CUDA
// Ranks alternate between the GPU and the cpu backend, starting with `first` (rank 0).
static int setup_mixed(void **state, gt_device_kind first)
{
    setup_kind_paged(state, GT_DEVICE_CPU, false);
    world *w = *state;
    for (int i = 0; i < MAX_DEV; i++) {
        w->kinds[i] = i % 2 == 0 ? first : (first == GT_DEVICE_CUDA ? GT_DEVICE_CPU
                                                                     : GT_DEVICE_CUDA);
    }
    return 0;
}
static int setup_cuda_cpu(void **state) { return setup_mixed(state, GT_DEVICE_CUDA); }
static int setup_cpu_cuda(void **state) { return setup_mixed(state, GT_DEVICE_CPU); }
#endif

static int teardown(void **state)
{
    world *w = *state;
    close_all(w);
    for (int i = 0; i < MAX_DEV; i++) {
        if (w->devd[i] > 0) {
            gt_test_devd_stop(w->devd[i]);
        }
    }
    gt_test_rmtree(w->dir);
    free(w);
    return 0;
}

static int case_teardown(void **state)
{
    close_all(*state);
    return 0;
}

// Hellos of devices 0..n-1 (their buffers in hello[i]).
typedef struct {
    uint8_t b[GT_PEER_HELLO_MAX];
    size_t len;
} hello_buf;

static void hellos(world *w, int n, hello_buf *h)
{
    for (int i = 0; i < n; i++) {
        GT_ASSERT_OK(gt_device_peer_hello(w->dev[i], (uint32_t)i, (uint32_t)n, h[i].b,
                                          sizeof h[i].b, &h[i].len));
    }
}

// n devices under w->a (ranks n), every one admitting every other; w->run is the run id.
static void admit_all(world *w, int n)
{
    agreement_make(&w->a, "peers", (uint32_t)n);
    for (int i = 0; i < n; i++) {
        open_dev(w, i, &w->a, NULL);
    }
    static hello_buf h[MAX_DEV];
    hellos(w, n, h);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            if (i != j) {
                GT_ASSERT_OK(gt_device_peer_admit(w->dev[i], (uint32_t)j, h[j].b, h[j].len));
            }
        }
    }
    gt_peer_hello_msg m;  // who made it: devd on sim, the trainer's process on cpu
    GT_ASSERT_OK(gt_peer_hello_parse((gt_span){h[0].b, h[0].len}, &m));
    assert_int_equal(m.kind, w->kind == GT_DEVICE_SIM ? GT_PEER_KIND_DEVD : GT_PEER_KIND_INPROC);
    assert_int_equal(m.trainer.len > 0, w->kind == GT_DEVICE_SIM);
    GT_ASSERT_OK(gt_device_peer_run_id(w->dev[0], w->run));
    for (int i = 1; i < n; i++) {
        uint8_t run[16];
        GT_ASSERT_OK(gt_device_peer_run_id(w->dev[i], run));
        assert_memory_equal(run, w->run, sizeof run);
    }
}

static gt_peer_hdr hdr(const world *w, uint64_t step, uint32_t bucket, uint32_t src, uint32_t dst)
{
    gt_peer_hdr h = {.step = step, .bucket = bucket, .hop = 0, .src = src, .dst = dst,
                     .elem_off = OFF, .nelem = CHUNK};
    memcpy(h.run, w->run, sizeof h.run);
    return h;
}

// A buffer of N floats on dev: value(i, seed) each, small integers (sums are exact), labelled
// with DATASET when asked.
static float value(int i, int seed) { return (float)((i * 7 + seed * 13) % 41 - 20); }

static gt_dbuf floats(gt_device *dev, int seed, bool labelled)
{
    float v[N];
    for (int i = 0; i < N; i++) {
        v[i] = value(i, seed);
    }
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof v, 0, &b));
    GT_ASSERT_OK(gt_device_copy_in(dev, b, 0, v, sizeof v));
    if (labelled) {
        GT_ASSERT_OK(gt_device_label_add(dev, b, DATASET));
    }
    return b;
}

// The receiver's buffer still holds value(i, seed) everywhere: nothing was added. Read while it
// is unlabelled (an attack must not have labelled it either: labels come only with an opened
// chunk).
static void assert_unchanged(gt_device *dev, gt_dbuf b, int seed)
{
    float v[N];
    GT_ASSERT_OK(gt_device_copy_out(dev, v, b, 0, sizeof v));
    for (int i = 0; i < N; i++) {
        assert_true(v[i] == value(i, seed));
    }
}

typedef struct {
    uint8_t b[CHUNK * 4 + 2048];
    size_t len;
} chunk_buf;

static void seal(world *w, int from, const gt_peer_hdr *h, gt_dbuf buf, chunk_buf *c)
{
    assert_true(gt_peer_chunk_bytes(h->nelem) <= sizeof c->b);
    GT_ASSERT_OK(gt_device_peer_seal(w->dev[from], h, buf, c->b, sizeof c->b, &c->len));
}

// ---- the honest path -----------------------------------------------------------------------------

static void assert_sum(gt_device *dev, gt_dbuf b, int seed, int added)
{
    float v[N];
    GT_ASSERT_OK(gt_device_copy_out(dev, v, b, 0, sizeof v));
    for (int i = 0; i < N; i++) {  // checked against integer arithmetic
        int want = (int)value(i, seed) + (i >= OFF && i < OFF + CHUNK ? (int)value(i, added) : 0);
        assert_true(v[i] == (float)want);
    }
}

// Rank 0 seals a gradient chunk, rank 1 adds it into its own: the sum is exact and the rest of
// the buffer untouched; rank 1 copies a chunk back over rank 0's (all-gather). A labelled chunk
// takes the same path and its label joins the destination's.
static void test_pair_moves_labelled_chunk(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr h = hdr(w, 3, 0, 0, 1);
    chunk_buf c;
    seal(w, 0, &h, g0, &c);
    assert_int_equal(c.len, GT_PEER_HDR_BYTES + 4 + CHUNK * 4 + 16);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, c.b, c.len, g1, GT_PEER_ADD));
    assert_sum(w->dev[1], g1, 2, 1);
    gt_peer_hdr hb = hdr(w, 3, 0, 1, 0);
    seal(w, 1, &hb, g1, &c);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[0], &hb, c.b, c.len, g0, GT_PEER_COPY));
    float v[N];
    GT_ASSERT_OK(gt_device_copy_out(w->dev[0], v, g0, 0, sizeof v));
    for (int i = 0; i < N; i++) {
        bool in = i >= OFF && i < OFF + CHUNK;
        assert_true(v[i] == (in ? value(i, 2) + value(i, 1) : value(i, 1)));
    }
    // Labelled: rank 0's gradient carries DATASET, and so does rank 1's buffer once it is in.
    gt_dbuf l0 = floats(w->dev[0], 4, true), l1 = floats(w->dev[1], 5, false);
    gt_peer_hdr hl = hdr(w, 3, 1, 0, 1);
    seal(w, 0, &hl, l0, &c);
    assert_int_equal(c.len, GT_PEER_HDR_BYTES + 4 + 16 + CHUNK * 4 + 16);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &hl, c.b, c.len, l1, GT_PEER_ADD));
    size_t count = 0;
    uint8_t ids[2][GT_LABEL_ID_BYTES];
    GT_ASSERT_OK(gt_device_label_get(w->dev[1], l1, &count, ids, 2));
    assert_int_equal(count, 1);
    assert_memory_equal(ids[0], DATASET, GT_LABEL_ID_BYTES);
    if (w->kind != GT_DEVICE_SIM) {  // the sum there too (sim never hands labelled bytes out)
        GT_ASSERT_OK(gt_device_inproc_read(w->dev[1], v, l1, 0, sizeof v));
        for (int i = 0; i < N; i++) {
            int want = (int)value(i, 5) + (i >= OFF && i < OFF + CHUNK ? (int)value(i, 4) : 0);
            assert_true(v[i] == (float)want);
        }
    }
}

// A 4 MiB chunk (a gradient bucket's worth): on sim it crosses the bounce slots in pieces both
// ways; the sum is still exact.
static void test_large_chunk_sum_exact(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    const uint64_t n = 1u << 20;
    float *a = malloc(n * 4), *b = malloc(n * 4);
    size_t cap = gt_peer_chunk_bytes(n), len = 0;
    uint8_t *c = malloc(cap);
    assert_true(a != NULL && b != NULL && c != NULL);
    for (uint64_t i = 0; i < n; i++) {
        a[i] = (float)((int)(i % 1021) - 510);
        b[i] = (float)((int)(i % 997) - 498);
    }
    gt_dbuf g0 = 0, g1 = 0;
    GT_ASSERT_OK(gt_device_alloc(w->dev[0], n * 4, 0, &g0));
    GT_ASSERT_OK(gt_device_alloc(w->dev[1], n * 4, 0, &g1));
    GT_ASSERT_OK(gt_device_copy_in(w->dev[0], g0, 0, a, n * 4));
    GT_ASSERT_OK(gt_device_copy_in(w->dev[1], g1, 0, b, n * 4));
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    h.elem_off = 0;
    h.nelem = n;
    GT_ASSERT_OK(gt_device_peer_seal(w->dev[0], &h, g0, c, cap, &len));
    assert_int_equal(len, GT_PEER_HDR_BYTES + 4 + n * 4 + 16);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, c, len, g1, GT_PEER_ADD));
    GT_ASSERT_OK(gt_device_copy_out(w->dev[1], b, g1, 0, n * 4));
    for (uint64_t i = 0; i < n; i++) {
        assert_true(b[i] == (float)((int)(i % 1021) - 510 + (int)(i % 997) - 498));
    }
    free(a);
    free(b);
    free(c);
}

// Device d's paging counters: the cpu backend's, or devd's STAT.
static void paging_stats(world *w, int d, gt_pager_stats *st)
{
    if (w->kind == GT_DEVICE_CPU) {
        GT_ASSERT_OK(gt_device_paging_stats(w->dev[d], st));
        return;
    }
    gt_device_sim_stat s;
    GT_ASSERT_OK(gt_device_sim_stat_get(w->dev[d], &s));
    *st = s.paging;
}

// On a device that pages (cpu, or devd --paging-store; 2 MiB resident), the buffers a chunk is sealed from and opened
// into have been evicted to the store: seal and open bring exactly their ranges back first.
static void test_paged_out_buffers_seal_and_open(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    const uint64_t n = 256u << 10;  // 1 MiB of floats
    gt_dbuf g[2] = {0}, filler[2] = {0};
    float *x = malloc(n * 4);
    assert_non_null(x);
    for (int d = 0; d < 2; d++) {
        for (uint64_t i = 0; i < n; i++) {
            x[i] = (float)((int)(i % 1021) - 510) * (float)(d + 1);
        }
        GT_ASSERT_OK(gt_device_alloc(w->dev[d], n * 4, 0, &g[d]));
        GT_ASSERT_OK(gt_device_copy_in(w->dev[d], g[d], 0, x, n * 4));
        // 2 MiB written after it: g's pages go to the store to make room.
        GT_ASSERT_OK(gt_device_alloc(w->dev[d], 2u << 20, 0, &filler[d]));
        GT_ASSERT_OK(gt_device_memset(w->dev[d], filler[d], 0, 0x5a, 2u << 20));
        gt_pager_stats st;
        paging_stats(w, d, &st);
        assert_true(st.page_outs > 0 && st.evicted_bytes >= n * 4 / 2);
    }
    size_t cap = gt_peer_chunk_bytes(n), len = 0;
    uint8_t *c = malloc(cap);
    assert_non_null(c);
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    h.elem_off = 0;
    h.nelem = n;
    GT_ASSERT_OK(gt_device_peer_seal(w->dev[0], &h, g[0], c, cap, &len));
    GT_ASSERT_OK(gt_device_memset(w->dev[1], filler[1], 0, 0x33, 2u << 20));  // g[1] out again
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, c, len, g[1], GT_PEER_ADD));
    GT_ASSERT_OK(gt_device_copy_out(w->dev[1], x, g[1], 0, n * 4));
    for (uint64_t i = 0; i < n; i++) {
        assert_true(x[i] == (float)((int)(i % 1021) - 510) * 3.0f);
    }
    free(x);
    free(c);
}

// Under a 2 MiB cap a 4 MiB range cannot be resident at once: the seal and the open are refused
// naming the limit, and nothing moved: the honest small chunk that follows seals and opens with
// the sequence numbers it would have had anyway.
static void test_range_over_cap_refused(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    const uint64_t n = 1u << 20;  // 4 MiB of floats
    gt_dbuf big[2] = {0};
    for (int d = 0; d < 2; d++) {
        GT_ASSERT_OK(gt_device_alloc(w->dev[d], n * 4, 0, &big[d]));
        GT_ASSERT_OK(gt_device_memset(w->dev[d], big[d], 0, 0, n * 4));
    }
    size_t cap = gt_peer_chunk_bytes(n), len = 0;
    uint8_t *c = malloc(cap);
    assert_non_null(c);
    gt_peer_hdr hb = hdr(w, 0, 0, 0, 1);
    hb.elem_off = 0;
    hb.nelem = n;
    GT_ASSERT_ERR(gt_device_peer_seal(w->dev[0], &hb, big[0], c, cap, &len), GT_E_LIMIT,
                  "resident at once");
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    chunk_buf small;
    seal(w, 0, &h, g0, &small);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, small.b, small.len, g1, GT_PEER_ADD));
    assert_sum(w->dev[1], g1, 2, 1);
    free(c);
}

// ---- attacks -------------------------------------------------------------------------------------

// Every bit of a sealed chunk (header, labels, ciphertext, tag) flipped in turn: each is refused,
// the destination is unchanged, and the honest chunk opens afterwards.
static void test_bit_flip_anywhere_rejected(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, true), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    static chunk_buf c, t;
    seal(w, 0, &h, g0, &c);
    size_t rejected = 0, tried = 0;
    // Every bit of the header and label block, every 7th of the ciphertext, every bit of the tag.
    for (size_t bit = 0; bit < c.len * 8; bit++) {
        size_t byte = bit / 8;
        bool sampled = byte < GT_PEER_HDR_BYTES + 20 || byte >= c.len - 16 || bit % 7 == 0;
        if (!sampled) {
            continue;
        }
        t = c;
        t.b[byte] ^= (uint8_t)(1u << (bit % 8));
        tried++;
        gt_err e = gt_device_peer_open(w->dev[1], &h, t.b, t.len, g1, GT_PEER_ADD);
        rejected += !gt_is_ok(e);
    }
    assert_int_equal(rejected, tried);
    assert_true(tried > 600);
    assert_unchanged(w->dev[1], g1, 2);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, c.b, c.len, g1, GT_PEER_ADD));
}

static void test_replayed_chunk_rejected(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    gt_dbuf other = floats(w->dev[1], 3, false);
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    chunk_buf c;
    seal(w, 0, &h, g0, &c);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, c.b, c.len, g1, GT_PEER_ADD));
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &h, c.b, c.len, other, GT_PEER_ADD), GT_E_AUTH,
                  "replayed");
    assert_unchanged(w->dev[1], other, 3);
}

// Two chunks with the same header: the second (sequence 1) first is refused; then both open in
// order. And a chunk of bucket 1 where bucket 0 is expected is refused by its header.
static void test_reordered_chunks_rejected(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr h0 = hdr(w, 0, 0, 0, 1), h1 = hdr(w, 0, 1, 0, 1);
    chunk_buf a, b, c;
    seal(w, 0, &h0, g0, &a);
    seal(w, 0, &h0, g0, &b);
    seal(w, 0, &h1, g0, &c);
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &h0, b.b, b.len, g1, GT_PEER_ADD), GT_E_AUTH,
                  "sequence");
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &h0, c.b, c.len, g1, GT_PEER_ADD), GT_E_AUTH,
                  "header");
    assert_unchanged(w->dev[1], g1, 2);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h0, a.b, a.len, g1, GT_PEER_COPY));
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h0, b.b, b.len, g1, GT_PEER_COPY));
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h1, c.b, c.len, g1, GT_PEER_COPY));
}

// Three ranks: rank 0's chunk for rank 1 handed to rank 2 (dst != me), and rank 2's chunk for
// rank 1 handed to rank 1 as rank 0's (src mismatch): both refused, nothing added.
static void test_misrouted_chunk_rejected(void **state)
{
    world *w = *state;
    admit_all(w, 3);
    gt_dbuf g0 = floats(w->dev[0], 1, false), g2 = floats(w->dev[2], 3, false);
    gt_dbuf r1 = floats(w->dev[1], 4, false), r2 = floats(w->dev[2], 5, false);
    gt_peer_hdr to1 = hdr(w, 0, 0, 0, 1), as2 = hdr(w, 0, 0, 0, 2), from2 = hdr(w, 0, 0, 2, 1);
    chunk_buf c, d;
    seal(w, 0, &to1, g0, &c);
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[2], &as2, c.b, c.len, r2, GT_PEER_ADD), GT_E_AUTH,
                  "header");
    seal(w, 2, &from2, g2, &d);
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &to1, d.b, d.len, r1, GT_PEER_ADD), GT_E_AUTH,
                  "header");
    // The wire header rewritten to the receiver's expectation: the tag (AAD, key) refuses it.
    memcpy(d.b + 16 + 8 + 4 + 4, "\0\0\0\0", 4);  // src = 0
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &to1, d.b, d.len, r1, GT_PEER_ADD), GT_E_AUTH,
                  "authentication");
    assert_unchanged(w->dev[1], r1, 4);
    assert_unchanged(w->dev[2], r2, 5);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &to1, c.b, c.len, r1, GT_PEER_ADD));
}

static void test_chunk_from_earlier_step_rejected(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr old = hdr(w, 4, 0, 0, 1), now = hdr(w, 5, 0, 0, 1);
    chunk_buf c;
    seal(w, 0, &old, g0, &c);
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &now, c.b, c.len, g1, GT_PEER_ADD), GT_E_AUTH,
                  "another step");
    assert_unchanged(w->dev[1], g1, 2);
}

// ZeRO-1's phases (collective.h: the hop field's high bits): a chunk sealed as an all-gather's
// (phase 2) opened where a reduce-scatter's (phase 1) is expected, with the same step, bucket,
// hop within the pass, range and the very sequence number expected: refused by the phase alone,
// nothing added; the same chunk then opens where it belongs (sequence unspent).
static void test_chunk_of_another_phase_rejected(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr gather = hdr(w, 3, 0, 0, 1), scatter = gather;
    gather.hop = 2u << 16 | 1;
    scatter.hop = 1u << 16 | 1;
    chunk_buf c;
    seal(w, 0, &gather, g0, &c);
    GT_ASSERT_ERR(gt_device_peer_open(w->dev[1], &scatter, c.b, c.len, g1, GT_PEER_ADD),
                  GT_E_AUTH, "header");
    assert_unchanged(w->dev[1], g1, 2);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &gather, c.b, c.len, g1, GT_PEER_COPY));
}

// Rank 1's trainer runs an executable the agreement does not list: refused, naming why.
static void test_unapproved_measurement_refused(void **state)
{
    world *w = *state;
    agreement_make(&w->a, "peers", 2);
    open_dev(w, 0, &w->a, NULL);
    open_dev(w, 1, &w->a, &other_trainer);
    hello_buf h[2];
    hellos(w, 2, h);
    GT_ASSERT_ERR(gt_device_peer_admit(w->dev[0], 1, h[1].b, h[1].len), GT_E_POLICY,
                  "trainer measurement");
    GT_ASSERT_ERR(gt_device_peer_admit(w->dev[0], 1, h[1].b, h[1].len), GT_E_POLICY,
                  "not one the agreement accepts");
    GT_ASSERT_CODE(gt_device_peer_run_id(w->dev[0], w->run), GT_E_STATE);
}

// The agreement accepts the trainer but not the peer's device (on cpu the trainer's process,
// on sim devd): refused, naming the device measurement.
static void test_unapproved_device_refused(void **state)
{
    world *w = *state;
    bool cpu = w->kind == GT_DEVICE_CPU;
    agreement_make_devices(&w->a, "peers", 2, !cpu, cpu);
    open_dev(w, 0, &w->a, NULL);
    open_dev(w, 1, &w->a, NULL);
    hello_buf h[2];
    hellos(w, 2, h);
    GT_ASSERT_ERR(gt_device_peer_admit(w->dev[0], 1, h[1].b, h[1].len), GT_E_POLICY,
                  "device measurement");
}

// A device declared with another agreement makes a hello naming that one: refused. Rewriting the
// agreement bytes in its hello to ours breaks its evidence's binding: refused too.
static void test_hello_of_another_agreement_refused(void **state)
{
    world *w = *state;
    gt_agreement *other = malloc(sizeof *other);
    assert_non_null(other);
    agreement_make(&w->a, "peers", 2);
    agreement_make(other, "other-peers", 2);
    open_dev(w, 0, &w->a, NULL);
    open_dev(w, 1, other, NULL);
    hello_buf h[2];
    hellos(w, 2, h);
    GT_ASSERT_ERR(gt_device_peer_admit(w->dev[0], 1, h[1].b, h[1].len), GT_E_POLICY,
                  "another agreement");
    memcpy(h[1].b + 8 + 2 + 2 + 4 + 4, w->a.hash, GT_SHA256_BYTES);
    gt_err e = gt_device_peer_admit(w->dev[0], 1, h[1].b, h[1].len);
    assert_true(e.code == GT_E_AUTH || e.code == GT_E_POLICY);
    assert_non_null(strstr(e.msg, "evidence"));
    free(other);
}

// Run A's rank-1 hello replayed into run B: its key is run A's, so it is admitted only as a
// stranger no device holds the secret of (run A's devices made new keys since). Rank 0's run id
// is then not run B's, and nothing passes between the two: every chunk is refused.
static void test_hello_from_another_run_opens_nothing(void **state)
{
    world *w = *state;
    admit_all(w, 2);  // run A
    hello_buf a[2], b[2];
    hellos(w, 2, a);  // run A's hellos as recorded (each device starts a fresh run with them)
    hellos(w, 2, b);  // run B
    GT_ASSERT_OK(gt_device_peer_admit(w->dev[1], 0, b[0].b, b[0].len));
    GT_ASSERT_OK(gt_device_peer_admit(w->dev[0], 1, a[1].b, a[1].len));  // the replay
    uint8_t run0[16], run1[16];
    GT_ASSERT_OK(gt_device_peer_run_id(w->dev[0], run0));
    GT_ASSERT_OK(gt_device_peer_run_id(w->dev[1], run1));
    assert_memory_not_equal(run0, run1, sizeof run0);
    // Rank 1's honest chunk to rank 0, and rank 0's chunk to "rank 1", each refused.
    gt_dbuf g0 = floats(w->dev[0], 1, false), g1 = floats(w->dev[1], 2, false);
    memcpy(w->run, run1, sizeof w->run);
    gt_peer_hdr h10 = hdr(w, 0, 0, 1, 0);
    chunk_buf c;
    seal(w, 1, &h10, g1, &c);
    GT_ASSERT_CODE(gt_device_peer_open(w->dev[0], &h10, c.b, c.len, g0, GT_PEER_ADD), GT_E_ARG);
    memcpy(w->run, run0, sizeof w->run);
    h10 = hdr(w, 0, 0, 1, 0);
    GT_ASSERT_CODE(gt_device_peer_open(w->dev[0], &h10, c.b, c.len, g0, GT_PEER_ADD), GT_E_AUTH);
    gt_peer_hdr h01 = hdr(w, 0, 0, 0, 1);
    seal(w, 0, &h01, g0, &c);
    GT_ASSERT_CODE(gt_device_peer_open(w->dev[1], &h01, c.b, c.len, g1, GT_PEER_ADD), GT_E_ARG);
    memcpy(w->run, run1, sizeof w->run);
    h01 = hdr(w, 0, 0, 0, 1);
    GT_ASSERT_CODE(gt_device_peer_open(w->dev[1], &h01, c.b, c.len, g1, GT_PEER_ADD), GT_E_AUTH);
    assert_unchanged(w->dev[0], g0, 1);
    assert_unchanged(w->dev[1], g1, 2);
}

// Three ranks, rank 0 admits only rank 1: nothing is sealed to rank 2, labelled or not, and no
// rank outside the run.
static void test_seal_to_non_admitted_peer_refused(void **state)
{
    world *w = *state;
    agreement_make(&w->a, "peers", 3);
    for (int i = 0; i < 3; i++) {
        open_dev(w, i, &w->a, NULL);
    }
    hello_buf h[3];
    hellos(w, 3, h);
    GT_ASSERT_OK(gt_device_peer_admit(w->dev[0], 1, h[1].b, h[1].len));
    gt_dbuf lab = floats(w->dev[0], 1, true), plain = floats(w->dev[0], 2, false);
    gt_peer_hdr to2 = hdr(w, 0, 0, 0, 2), to7 = hdr(w, 0, 0, 0, 7);
    chunk_buf c;
    GT_ASSERT_ERR(gt_device_peer_seal(w->dev[0], &to2, lab, c.b, sizeof c.b, &c.len), GT_E_POLICY,
                  "not an admitted peer");
    GT_ASSERT_CODE(gt_device_peer_seal(w->dev[0], &to2, plain, c.b, sizeof c.b, &c.len),
                   GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_peer_seal(w->dev[0], &to7, lab, c.b, sizeof c.b, &c.len),
                   GT_E_POLICY);
    assert_int_equal(c.len, 0);
}

// The receiver's buffer, once a labelled chunk was added, carries the label: copy_out refused.
static void test_received_buffer_copy_out_refused(void **state)
{
    world *w = *state;
    admit_all(w, 2);
    gt_dbuf g0 = floats(w->dev[0], 1, true), g1 = floats(w->dev[1], 2, false);
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    chunk_buf c;
    seal(w, 0, &h, g0, &c);
    GT_ASSERT_OK(gt_device_peer_open(w->dev[1], &h, c.b, c.len, g1, GT_PEER_ADD));
    float v[N];
    memset(v, 0x5a, sizeof v);
    GT_ASSERT_ERR(gt_device_copy_out(w->dev[1], v, g1, 0, sizeof v), GT_E_POLICY, "d57a5e70");
    for (size_t i = 0; i < sizeof v; i++) {
        assert_int_equal(((uint8_t *)v)[i], 0x5a);
    }
}

// ---- the core's contract with a backend's range (gt_peer_range: cpu, devd and cuda give one) -----

// A range as a backend would give it: OpenSSL into its own staging, and a record of what the
// core asked, when. fail_seal / fail_open: the backend's primitive fails (a GPU error, a tag
// mismatch).
typedef struct {
    bool fail_seal, fail_open;
    const uint8_t *src;
    uint8_t stage[CHUNK * 4], dst[CHUNK * 4];
    int opens, applies;
    size_t labels_at_apply;
    const gt_buftab *tab;
    gt_dbuf h_dst;
} fake_range;

static gt_err fake_seal(void *ctx, uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                        size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                        const uint8_t key[GT_AEAD_KEY_BYTES])
{
    fake_range *f = ctx;
    size_t n = 0;
    GT_ENSURE(!f->fail_seal, GT_E_IO, "fake: the backend's encryption failed");
    return gt_aead_seal(ct_tag, (size_t)len + 16, &n, f->src, (size_t)len, aad, aad_len, iv, key);
}

static gt_err fake_open(void *ctx, const uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                        size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                        const uint8_t key[GT_AEAD_KEY_BYTES])
{
    fake_range *f = ctx;
    f->opens++;
    size_t n = 0;
    GT_ENSURE(!f->fail_open, GT_E_AUTH, "fake: tag mismatch");
    return gt_aead_open(f->stage, sizeof f->stage, &n, ct_tag, (size_t)len + 16, aad, aad_len, iv,
                        key);
}

static size_t label_count(const gt_buftab *tab, gt_dbuf h)
{
    gt_buftab_entry *e = NULL;
    GT_ASSERT_OK(gt_buftab_find(tab, h, 0, &e));
    uint8_t ids[4][GT_LABEL_ID_BYTES];
    return gt_buftab_label_ids(tab, e->label, ids, 4);
}

static gt_err fake_apply(void *ctx, int mode)
{
    fake_range *f = ctx;
    f->applies++;
    f->labels_at_apply = label_count(f->tab, f->h_dst);
    assert_int_equal(mode, GT_PEER_COPY);
    memcpy(f->dst, f->stage, sizeof f->dst);
    return GT_OK;
}

// Two cores driven directly, as device.c drives them for cpu and cuda. A range whose open fails
// (the GPU's tag compare) gets no apply: no labels join, the sequence is unspent and the chunk
// then opens through another range; apply comes after the labels joined. A range whose seal
// fails still spends its sequence number (an IV the backend may have used is never offered
// again): the receiver then refuses the next chunk as out of sequence.
static void test_core_drives_ranges_in_order(void **state)
{
    world *w = *state;
    if (w->kind != GT_DEVICE_CPU) {
        return;  // no device involved: once is enough
    }
    agreement_make(&w->a, "peers", 2);
    gt_device_outputs o;
    gt_agreement_device_outputs(&w->a, &o);
    gt_peer_identity id = {.kind = GT_PEER_KIND_INPROC, .produce = gt_sim_default_client_produce};
    gt_peer_core *pc[2] = {NULL, NULL};
    gt_buftab *tab[2] = {NULL, NULL};
    gt_dbuf hb[2];
    gt_buftab_entry *e[2];
    static hello_buf hl[2];
    gt_buftab_config tc = {0};
    for (uint32_t r = 0; r < 2; r++) {
        GT_ASSERT_OK(gt_peer_core_new(&pc[r]));
        GT_ASSERT_OK(gt_peer_core_hello(pc[r], &o.peers, &id, r, 2, hl[r].b, sizeof hl[r].b,
                                        &hl[r].len));
        GT_ASSERT_OK(gt_buftab_new(&tab[r], &tc));
        GT_ASSERT_OK(gt_buftab_alloc(tab[r], N * 4, 0, 0, &hb[r], &e[r]));
    }
    GT_ASSERT_OK(gt_peer_core_admit(pc[0], 1, (gt_span){hl[1].b, hl[1].len}));
    GT_ASSERT_OK(gt_peer_core_admit(pc[1], 0, (gt_span){hl[0].b, hl[0].len}));
    GT_ASSERT_OK(gt_peer_core_run_id(pc[0], w->run));
    GT_ASSERT_OK(gt_buftab_label_add(tab[0], hb[0], DATASET));
    float plain[CHUNK];
    for (int i = 0; i < CHUNK; i++) {
        plain[i] = value(i, 1);
    }
    gt_peer_hdr h = hdr(w, 0, 0, 0, 1);
    static chunk_buf c0, c1, c2;
    fake_range fs = {.src = (const uint8_t *)plain};
    gt_peer_range rs = {.seal = fake_seal, .ctx = &fs};
    GT_ASSERT_OK(gt_peer_core_seal_range(pc[0], tab[0], e[0]->label, &h, &rs, c0.b, sizeof c0.b,
                                         &c0.len));
    fs.fail_seal = true;
    GT_ASSERT_ERR(gt_peer_core_seal_range(pc[0], tab[0], e[0]->label, &h, &rs, c1.b,
                                          sizeof c1.b, &c1.len), GT_E_IO, "encryption failed");
    GT_ASSERT_OK(gt_peer_core_seal(pc[0], tab[0], e[0]->label, &h, (const uint8_t *)plain, c2.b,
                                   sizeof c2.b, &c2.len));
    gt_peer_chunk_msg m;
    GT_ASSERT_OK(gt_peer_chunk_parse((gt_span){c2.b, c2.len}, &m));
    assert_int_equal(m.seq, 2);  // sequence 1 went to the failed seal
    // The fake's seal and the host range's frame the same way: header, one label, ct, tag.
    assert_int_equal(c0.len, c2.len);
    assert_memory_equal(c0.b + 16, c2.b + 16, GT_PEER_HDR_BYTES - 16 - 8);
    assert_memory_equal(c0.b + GT_PEER_HDR_BYTES, c2.b + GT_PEER_HDR_BYTES, 4 + 16);

    fake_range fo = {.fail_open = true, .tab = tab[1], .h_dst = hb[1]};
    gt_peer_range ro = {.open = fake_open, .apply = fake_apply, .ctx = &fo};
    GT_ASSERT_ERR(gt_peer_core_open_range(pc[1], tab[1], hb[1], &h, (gt_span){c0.b, c0.len}, &ro,
                                          GT_PEER_COPY), GT_E_AUTH, "authentication failed");
    assert_int_equal(fo.opens, 1);
    assert_int_equal(fo.applies, 0);
    assert_int_equal(label_count(tab[1], hb[1]), 0);
    fo.fail_open = false;
    GT_ASSERT_OK(gt_peer_core_open_range(pc[1], tab[1], hb[1], &h, (gt_span){c0.b, c0.len}, &ro,
                                         GT_PEER_COPY));
    assert_int_equal(fo.applies, 1);
    assert_int_equal(fo.labels_at_apply, 1);
    assert_memory_equal(fo.dst, plain, sizeof plain);
    GT_ASSERT_ERR(gt_peer_core_open_range(pc[1], tab[1], hb[1], &h, (gt_span){c2.b, c2.len}, &ro,
                                          GT_PEER_COPY), GT_E_AUTH, "sequence 2, expected 1");
    assert_int_equal(fo.applies, 1);
    for (int r = 0; r < 2; r++) {
        gt_buftab_release(tab[r], hb[r]);
        gt_buftab_free(tab[r]);
        gt_peer_core_free(pc[r]);
    }
}

// sim only: devd takes its peer rules from its own parse of the declared agreement, never from
// the client. A client that declares forged rules (3 ranks, any measurement) gets neither: devd
// holds it to the agreement's 2 ranks and still refuses a trainer the agreement does not list.
static void test_devd_ignores_the_clients_rules(void **state)
{
    world *w = *state;
    if (w->kind != GT_DEVICE_SIM) {
        skip();  // on cpu the trainer's own reading is the rule (its code is the trusted base)
    }
    agreement_make(&w->a, "peers", 2);
    gt_device_outputs forged;
    gt_agreement_device_outputs(&w->a, &forged);
    forged.peers.ranks = 3;
    forged.peers.trainer_count = 0;
    forged.peers.device_count = 0;
    gt_device *dev[2];
    for (int i = 0; i < 2; i++) {
        gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = w->sock[i]};
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        opt.attester.produce = i == 1 ? produce_other : NULL;
        memcpy(opt.agreement_hash, w->a.hash, GT_SHA256_BYTES);
        GT_ASSERT_OK(gt_device_open_sim(&dev[i], &cfg, &opt));
        w->dev[i] = dev[i];
        GT_ASSERT_OK(gt_device_declare_outputs(dev[i], &forged, (gt_span){w->a.doc,
                                                                          w->a.doc_len}));
    }
    hello_buf h[2];
    GT_ASSERT_ERR(gt_device_peer_hello(dev[0], 0, 3, h[0].b, sizeof h[0].b, &h[0].len),
                  GT_E_POLICY, "admits 2");
    hellos(w, 2, h);
    GT_ASSERT_ERR(gt_device_peer_admit(dev[0], 1, h[1].b, h[1].len), GT_E_POLICY,
                  "trainer measurement");
}

#define CASE(f) cmocka_unit_test_teardown(f, case_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_pair_moves_labelled_chunk),
        CASE(test_large_chunk_sum_exact),
        CASE(test_bit_flip_anywhere_rejected),
        CASE(test_replayed_chunk_rejected),
        CASE(test_reordered_chunks_rejected),
        CASE(test_misrouted_chunk_rejected),
        CASE(test_chunk_from_earlier_step_rejected),
        CASE(test_chunk_of_another_phase_rejected),
        CASE(test_unapproved_measurement_refused),
        CASE(test_unapproved_device_refused),
        CASE(test_hello_of_another_agreement_refused),
        CASE(test_hello_from_another_run_opens_nothing),
        CASE(test_seal_to_non_admitted_peer_refused),
        CASE(test_received_buffer_copy_out_refused),
        CASE(test_devd_ignores_the_clients_rules),
        CASE(test_core_drives_ranges_in_order),
    };
    const struct CMUnitTest paged[] = {
        CASE(test_pair_moves_labelled_chunk),
        CASE(test_paged_out_buffers_seal_and_open),
        CASE(test_range_over_cap_refused),
        CASE(test_replayed_chunk_rejected),
        CASE(test_misrouted_chunk_rejected),
    };
    // GT_TEST_PEER_CUDA_ONLY (scripts/gpu_check.sh): only the cuda groups; 77 without a GPU.
    bool cuda_only = getenv("GT_TEST_PEER_CUDA_ONLY") != NULL;
    int failed = 0;
    if (!cuda_only) {
        failed += cmocka_run_group_tests_name("cpu", tests, setup_cpu, teardown);
        failed += cmocka_run_group_tests_name("cpu-paged", paged, setup_cpu_paged, teardown);
    }
#ifdef GT_HAVE_CUDA
    // cuda ranks next to cpu ranks (both kinds are the trainer's process: the same agreement).
    // Compile-checked only where no GPU was ever present: without one, said and skipped.
    char why[256];
    if (gt_cuda_probe(why, sizeof why)) {
        const struct CMUnitTest mixed[] = {
            CASE(test_pair_moves_labelled_chunk),
            CASE(test_large_chunk_sum_exact),
            CASE(test_bit_flip_anywhere_rejected),
            CASE(test_replayed_chunk_rejected),
            CASE(test_reordered_chunks_rejected),
            CASE(test_misrouted_chunk_rejected),
            CASE(test_chunk_from_earlier_step_rejected),
            CASE(test_chunk_of_another_phase_rejected),
            CASE(test_seal_to_non_admitted_peer_refused),
            CASE(test_received_buffer_copy_out_refused),
        };
        failed += cmocka_run_group_tests_name("cuda-cpu", mixed, setup_cuda_cpu, teardown);
        failed += cmocka_run_group_tests_name("cpu-cuda", mixed, setup_cpu_cuda, teardown);
    } else {
        printf("device/peer: cuda-cpu and cpu-cuda groups skipped: %s\n", why);
        if (cuda_only) {
            return 77;
        }
    }
#else
    if (cuda_only) {
        printf("device/peer: not a cuda build: no cuda groups\n");
        return 77;
    }
#endif
    if (getenv("GT_TEST_PEER_CPU_ONLY") == NULL && !cuda_only) {
        failed += cmocka_run_group_tests_name("sim", tests, setup_sim, teardown);
        failed += cmocka_run_group_tests_name("sim-paged", paged, setup_sim_paged, teardown);
    }
    return failed;
}
