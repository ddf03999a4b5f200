// travel/: device-sealed exports (travel.h gt_travel_export_*; issue 13 `checkpoint`, `resume`),
// on cpu, on sim against devds this test starts, and on cuda where built and a GPU is present.
// A toy GPT-2 trained a step on a labelled chunk: its weights leave only sealed. The sealed
// checkpoint opens for the recipient to exactly the weights an unlabelled twin computed, under
// the device's signer; any flipped bit is refused and nothing is opened. The resume state
// round-trips to the same next loss and restores the labels; one from another device, another
// agreement, or tampered with is refused naming why, and the destination is untouched.
#include "testlib.h"
#include "toy_model.h"

#include <gputravel/device.h>
#include <gputravel/seal.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GT_HAVE_CUDA
#include <gputravel/device_cuda.h>
#endif

#define LIMIT (64u << 20)
#define PAGED_CAP (40u << 10)  // less than the toy's params + m + v: a resume state is paged
#define NTOK 4096
#define VOCAB GT_TOY_VOCAB
static const uint8_t DATASET[GT_LABEL_ID_BYTES] = {0xd5, 0x7a, 0x5e, 0x70, 0x01, 0x02, 0x03, 0x04,
                                                   0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c};
#define DATASET_HEX "d57a5e700102030405060708090a0b0c"

typedef struct {
    gt_device_kind kind;
    bool skip;
    char why[256];
    char dir[512], sock[600], sock2[600];
    pid_t devd, devd2;  // sim: two devds with two identities (two devices)
    bool paged;         // sim: both devds capped at PAGED_CAP and paging (docs/paging.md)
    gt_device *dev;
    gt_resume_device rd, rd2;  // cpu / cuda: two resume keys (two devices)
} backend;

static gt_agreement *A, *B, *NORESUME;
static gt_recipient_keys rk;
static uint8_t run_sec[GT_ED25519_SECRET_BYTES], run_pub[GT_ED25519_PUBLIC_BYTES];
static uint16_t g_tokens[NTOK];

// A one-holder agreement whose output is the checkpoint sealed for that holder; name changes
// the hash, outputs the declared outputs.
static void agreement_make(gt_agreement *a, const char *name, const char *outputs)
{
    char key[2 * GT_X25519_BYTES + 1], doc[3072];
    gt_hex_encode(key, sizeof key, rk.pub, sizeof rk.pub);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"%s\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":%d,\"max_seq\":8,\"init_seed\":5},\"training\":{\"steps\":8,"
             "\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h0\","
             "\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%s\","
             "\"recipient_key\":\"%s\",\"token_budget\":100000,\"max_uses_per_chunk\":1}],"
             "\"trainer\":{},\"device\":{},\"allow_simulation\":true,"
             "\"output\":{\"kind\":\"sealed_checkpoint\",\"recipients\":[\"h0\"]},"
             "\"outputs\":{%s}}",
             name, VOCAB, 0, DATASET_HEX, key, outputs);
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

// A devd in dir (with --identity ident when not NULL), capped and paging into dir/pages when
// paged.
static pid_t devd_start(char *sock, size_t cap, const char *dir, const char *ident, bool paged)
{
    char pages[700];
    snprintf(pages, sizeof pages, "%s/pages", dir);
    const char *args[12] = {"--threads", "1", "--mem-limit", paged ? "40KiB" : "64MiB"};
    int n = 4;
    if (paged) {
        GT_ASSERT_OK(gt_mkdir_p(pages, 0700));
        args[n++] = "--page-size";
        args[n++] = "4KiB";
        args[n++] = "--paging-store";
        args[n++] = pages;
    }
    if (ident != NULL) {
        args[n++] = "--identity";
        args[n++] = ident;
    }
    return gt_test_devd_start(sock, cap, dir, args);
}

static int group_setup_paged(void **state, gt_device_kind kind, bool paged)
{
    backend *b = calloc(1, sizeof *b);
    b->kind = kind;
    b->paged = paged;
    b->devd = b->devd2 = -1;
    gt_test_tmpdir(b->dir, sizeof b->dir);
    if (kind == GT_DEVICE_SIM) {
        b->devd = devd_start(b->sock, sizeof b->sock, b->dir, NULL, paged);
        char d2[600], ident[700];
        snprintf(d2, sizeof d2, "%s/second", b->dir);
        snprintf(ident, sizeof ident, "%s/identity", d2);
        GT_ASSERT_OK(gt_mkdir_p(d2, 0700));
        b->devd2 = devd_start(b->sock2, sizeof b->sock2, d2, ident, paged);
    } else {
        char d1[600], d2[600];
        snprintf(d1, sizeof d1, "%s/one", b->dir);
        snprintf(d2, sizeof d2, "%s/two", b->dir);
        GT_ASSERT_OK(gt_mkdir_p(d1, 0700));
        GT_ASSERT_OK(gt_mkdir_p(d2, 0700));
        GT_ASSERT_OK(gt_resume_device_load(d1, &b->rd));
        GT_ASSERT_OK(gt_resume_device_load(d2, &b->rd2));
    }
#ifdef GT_HAVE_CUDA
    if (kind == GT_DEVICE_CUDA) {
        b->skip = !gt_cuda_probe(b->why, sizeof b->why);
    }
#endif
    *state = b;
    return 0;
}

static int group_setup(void **state, gt_device_kind kind)
{
    return group_setup_paged(state, kind, false);
}

static int setup_cpu(void **state) { return group_setup(state, GT_DEVICE_CPU); }
static int setup_sim(void **state) { return group_setup(state, GT_DEVICE_SIM); }
static int setup_sim_paged(void **state) { return group_setup_paged(state, GT_DEVICE_SIM, true); }
#ifdef GT_HAVE_CUDA
static int setup_cuda(void **state) { return group_setup(state, GT_DEVICE_CUDA); }
#endif

static int teardown(void **state)
{
    backend *b = *state;
    if (b->devd > 0) {
        gt_test_devd_stop(b->devd);
    }
    if (b->devd2 > 0) {
        gt_test_devd_stop(b->devd2);
    }
    gt_test_rmtree(b->dir);
    free(b);
    return 0;
}

static int case_teardown(void **state)
{
    backend *b = *state;
    gt_device_close(b->dev);
    b->dev = NULL;
    return 0;
}

// This case's device (closing the one before: devd serves one session at a time), attested on
// sim under a, its outputs declared unless declare is false. second: the other device.
static gt_device *open_dev(void **state, const gt_agreement *a, bool declare, bool second)
{
    backend *b = *state;
    if (b->skip) {
        print_message("SKIPPED: %s\n", b->why);
        skip();
    }
    gt_device_close(b->dev);
    b->dev = NULL;
    gt_device_config cfg = {.kind = b->kind, .threads = 1, .mem_limit = LIMIT,
                            .socket_path = second ? b->sock2 : b->sock};
    if (b->kind == GT_DEVICE_SIM) {
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        memcpy(opt.agreement_hash, a->hash, GT_SHA256_BYTES);
        GT_ASSERT_OK(gt_device_open_sim(&b->dev, &cfg, &opt));
    } else {
        GT_ASSERT_OK(gt_device_open(&b->dev, &cfg));
    }
    if (declare) {
        gt_device_outputs o;
        gt_agreement_device_outputs(a, &o);
        GT_ASSERT_OK(gt_device_declare_outputs(b->dev, &o, (gt_span){a->doc, a->doc_len}));
    }
    return b->dev;
}

static gt_export_local local_for(void **state, const gt_agreement *a, bool second)
{
    backend *b = *state;
    return (gt_export_local){.agreement = a, .signing_secret = run_sec,
                             .resume = second ? &b->rd2 : &b->rd};
}

static gt_dbuf chunk_make(gt_device *dev, bool labelled)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NTOK; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        g_tokens[i] = (uint16_t)(x % VOCAB);
    }
    gt_dbuf h = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof g_tokens, labelled ? GT_DBUF_NO_READBACK : 0, &h));
    if (labelled) {
        GT_ASSERT_OK(gt_device_label_add(dev, h, DATASET));
    }
    GT_ASSERT_OK(gt_device_copy_in(dev, h, 0, g_tokens, sizeof g_tokens));
    return h;
}

// One toy step that must succeed: its released loss.
static float toy_step(gt_toy *t)
{
    float loss = 0;
    GT_ASSERT_OK(gt_toy_step(t, &loss));
    return loss;
}

static gt_export_model model_of(gt_gpt2 *m, bool alloc_moments)
{
    gt_gpt2_state_bufs b;
    GT_ASSERT_OK(gt_gpt2_state_bufs_get(m, alloc_moments, &b));
    const gt_gpt2_config *c = gt_gpt2_get_config(m);
    return (gt_export_model){
        .params = b.params, .m = b.m, .v = b.v, .params_bytes = b.params_bytes,
        .step = gt_gpt2_step(m),
        .model = {.max_seq_len = (uint32_t)c->max_seq_len, .vocab_size = (uint32_t)c->vocab_size,
                  .num_layers = (uint32_t)c->num_layers, .num_heads = (uint32_t)c->num_heads,
                  .channels = (uint32_t)c->channels,
                  .padded_vocab_size = (uint32_t)c->padded_vocab_size},
        .loader = {.sample = 1, .sample_tokens = 16}};
}

static int global_setup(void)
{
    GT_ASSERT_OK(gt_x25519_keypair(rk.pub, rk.sec));
    GT_ASSERT_OK(gt_ed25519_keypair(run_pub, run_sec));
    A = calloc(1, sizeof *A);
    B = calloc(1, sizeof *B);
    NORESUME = calloc(1, sizeof *NORESUME);
    agreement_make(A, "export-a", "\"loss\":true,\"checkpoint\":true,\"resume\":true");
    agreement_make(B, "export-b", "\"loss\":true,\"checkpoint\":true,\"resume\":true");
    agreement_make(NORESUME, "export-c", "\"loss\":true,\"resume\":false");
    return 0;
}

// ---- the checkpoint ------------------------------------------------------------------------------

static void opened_is(const char *sealed_path, const uint8_t *signer, const float *want,
                      size_t n, const char *out)
{
    gt_sckpt_header h;
    GT_ASSERT_OK(gt_sckpt_open(sealed_path, &rk, signer, out, &h, NULL));
    gt_buf got = {0};
    GT_ASSERT_OK(gt_file_read_all(out, 1u << 24, &got));
    assert_int_equal(got.len, GT_SCKPT_LLMC_HEADER_BYTES + 4 * n);
    assert_memory_equal(got.data + GT_SCKPT_LLMC_HEADER_BYTES, want, 4 * n);
    assert_int_equal(h.step, 1);
    gt_buf_free(&got);
    unlink(out);
}

static void sealed_checkpoint_opens_and_flips_are_refused(void **state)
{
    backend *b = *state;
    gt_device *dev = open_dev(state, A, true, false);
    gt_toy t, twin;
    gt_toy_open(dev, chunk_make(dev, true), NTOK, &t);
    gt_toy_open(dev, chunk_make(dev, false), NTOK, &twin);  // the same training on unlabelled data
    assert_true(toy_step(&t) == toy_step(&twin));
    size_t n = gt_gpt2_num_params(twin.m);
    float *want = malloc(4 * n);
    GT_ASSERT_OK(gt_gpt2_params_read(twin.m, want, n));
    gt_export_local local = local_for(state, A, false);
    gt_export_model x = model_of(t.m, false);
    GT_ASSERT_CODE(gt_device_copy_out(dev, want, x.params, 0, 4), GT_E_POLICY);  // labelled
    gt_buf sealed = {0};
    GT_ASSERT_OK(gt_travel_export_checkpoint(dev, &x, &local, &sealed));
    assert_null(memmem(sealed.data, sealed.len, want + 100, 64));  // ciphertext only
    uint8_t signer[GT_ED25519_PUBLIC_BYTES];
    GT_ASSERT_OK(gt_travel_export_signer(dev, &local, signer));
    if (b->kind == GT_DEVICE_SIM) {
        assert_memory_not_equal(signer, run_pub, sizeof signer);  // devd's key, not the run's
    } else {
        assert_memory_equal(signer, run_pub, sizeof signer);
    }
    char path[700], out[700];
    snprintf(path, sizeof path, "%s/model.sealed", b->dir);
    snprintf(out, sizeof out, "%s/opened.bin", b->dir);
    GT_ASSERT_OK(gt_file_write_atomic(path, sealed.data, sealed.len, 0644));
    opened_is(path, signer, want, n, out);
    // Pinned to another signer: refused before anything is decrypted.
    GT_ASSERT_ERR(gt_sckpt_open(path, &rk, b->kind == GT_DEVICE_SIM ? run_pub : rk.pub, out,
                                NULL, NULL),
                  GT_E_POLICY, "not the expected");
    // Every byte of header and trailer, a sample of the body: one flipped bit is refused and
    // nothing is opened.
    gt_sckpt_header h;
    GT_ASSERT_OK(gt_sckpt_header_parse(&h, sealed.data, sealed.len));
    size_t body_end = sealed.len - GT_AEAD_TAG_BYTES - GT_SCKPT_SIG_BYTES;
    for (size_t at = 0; at < sealed.len; at++) {
        if (at >= h.header_len && at < body_end && at % 509 != 0) {
            continue;
        }
        sealed.data[at] ^= (uint8_t)(1u << (at % 8));
        GT_ASSERT_OK(gt_file_write_atomic(path, sealed.data, sealed.len, 0644));
        sealed.data[at] ^= (uint8_t)(1u << (at % 8));
        gt_err e = gt_sckpt_open(path, &rk, signer, out, NULL, NULL);
        if (gt_is_ok(e) || gt_path_exists(out)) {
            fail_msg("byte %zu flipped: opened (%s)", at, e.msg);
        }
    }
    gt_buf_free_nowipe(&sealed);
    free(want);
    gt_toy_close(&t);
    gt_toy_close(&twin);
}

// ---- the resume state ----------------------------------------------------------------------------

static void resume_round_trip_same_next_loss(void **state)
{
    gt_device *dev = open_dev(state, A, true, false);
    gt_dbuf chunk = chunk_make(dev, true);
    gt_toy t, r;
    gt_toy_open(dev, chunk, NTOK, &t);
    (void)toy_step(&t);
    gt_export_local local = local_for(state, A, false);
    gt_export_model x = model_of(t.m, false);
    gt_buf st = {0};
    GT_ASSERT_OK(gt_travel_export_resume(dev, &x, &local, &st));
    const float next = toy_step(&t);  // the uninterrupted run's next loss
    // A fresh model (its own init) takes the state: the same next loss, bit for bit.
    gt_toy_open(dev, chunk, NTOK, &r);
    GT_ASSERT_OK(gt_gpt2_init_random(r.m, 99));
    gt_export_model y = model_of(r.m, true);
    GT_ASSERT_OK(gt_travel_import_resume(dev, gt_buf_span(&st), &y, &local));
    assert_int_equal(y.step, 1);
    assert_int_equal(y.loader.sample, 1);
    assert_int_equal(y.loader.sample_tokens, 16);
    gt_gpt2_step_set(r.m, y.step);
    GT_ASSERT_OK(gt_loader_next(r.l));  // the batch the state's step consumed
    assert_true(toy_step(&r) == next);
    // The restored buffers carry the state's label: they do not come back out.
    uint8_t ids[2][GT_LABEL_ID_BYTES];
    size_t nl = 0;
    GT_ASSERT_OK(gt_device_label_get(dev, y.params, &nl, ids, 2));
    assert_int_equal(nl, 1);
    assert_memory_equal(ids[0], DATASET, GT_LABEL_ID_BYTES);
    GT_ASSERT_OK(gt_device_label_get(dev, y.v, &nl, ids, 2));
    assert_int_equal(nl, 1);
    float f = 0;
    GT_ASSERT_ERR(gt_device_copy_out(dev, &f, y.params, 0, 4), GT_E_POLICY, DATASET_HEX);
    gt_buf_free_nowipe(&st);
    gt_toy_close(&t);
    gt_toy_close(&r);
}

// An import that must be refused: into a fresh, unlabelled model whose weights must not change.
static void import_refused(void **state, gt_device *dev, gt_span st, const gt_agreement *a,
                           bool second, gt_code code, const char *why)
{
    gt_toy r;
    gt_toy_open(dev, chunk_make(dev, false), NTOK, &r);
    size_t n = gt_gpt2_num_params(r.m);
    float *before = malloc(4 * n), *after = malloc(4 * n);
    GT_ASSERT_OK(gt_gpt2_params_read(r.m, before, n));
    gt_export_local local = local_for(state, a, second);
    gt_export_model y = model_of(r.m, true);
    GT_ASSERT_ERR(gt_travel_import_resume(dev, st, &y, &local), code, why);
    GT_ASSERT_OK(gt_gpt2_params_read(r.m, after, n));  // still unlabelled, still the same
    assert_memory_equal(before, after, 4 * n);
    size_t nl = 9;
    uint8_t ids[1][GT_LABEL_ID_BYTES];
    GT_ASSERT_OK(gt_device_label_get(dev, y.params, &nl, ids, 1));
    assert_int_equal(nl, 0);
    free(before);
    free(after);
    gt_toy_close(&r);
}

static void foreign_and_tampered_states_refused(void **state)
{
    gt_device *dev = open_dev(state, A, true, false);
    gt_toy t;
    gt_toy_open(dev, chunk_make(dev, true), NTOK, &t);
    (void)toy_step(&t);
    gt_export_local local = local_for(state, A, false);
    gt_export_model x = model_of(t.m, false);
    gt_buf st = {0};
    GT_ASSERT_OK(gt_travel_export_resume(dev, &x, &local, &st));
    gt_toy_close(&t);
    const size_t at[] = {20, 60, 100, 140, st.len / 2, st.len - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        st.data[at[i]] ^= 0x10;
        import_refused(state, dev, gt_buf_span(&st), A, false, GT_E_AUTH,
                       at[i] == 20 ? "another device" : at[i] == 60 ? "another agreement"
                                                                    : "does not authenticate");
        st.data[at[i]] ^= 0x10;
    }
    import_refused(state, dev, (gt_span){st.data, st.len - 3}, A, false, GT_E_TRUNCATED,
                   "ends early");
    // The same device under another agreement.
    dev = open_dev(state, B, true, false);
    import_refused(state, dev, gt_buf_span(&st), B, false, GT_E_AUTH, "another agreement");
    // Another device (sim: a devd with another identity; cpu: another resume key), same
    // agreement.
    dev = open_dev(state, A, true, true);
    import_refused(state, dev, gt_buf_span(&st), A, true, GT_E_AUTH, "another device");
    gt_buf_free_nowipe(&st);
}

// What the session did not declare does not leave: no declaration, an agreement without a
// resume output.
static void undeclared_exports_refused(void **state)
{
    gt_device *dev = open_dev(state, A, false, false);
    gt_toy t;
    gt_toy_open(dev, chunk_make(dev, true), NTOK, &t);
    gt_export_local local = local_for(state, A, false);
    gt_export_model x = model_of(t.m, true);
    gt_buf out = {0};
    GT_ASSERT_ERR(gt_travel_export_checkpoint(dev, &x, &local, &out), GT_E_POLICY,
                  "declared no outputs");
    GT_ASSERT_ERR(gt_travel_export_resume(dev, &x, &local, &out), GT_E_POLICY,
                  "declared no outputs");
    assert_int_equal(out.len, 0);
    gt_toy_close(&t);
    backend *b = *state;
    if (b->kind == GT_DEVICE_SIM) {  // devd: a holder's chunk as loaded is not model state
        dev = open_dev(state, A, true, false);
        gt_dbuf chunk = chunk_make(dev, true);
        gt_export_model c = {.params = chunk, .params_bytes = sizeof g_tokens, .step = 1,
                             .model = {.max_seq_len = 8, .vocab_size = VOCAB, .num_layers = 1,
                                       .num_heads = 2, .channels = 16,
                                       .padded_vocab_size = VOCAB}};
        GT_ASSERT_ERR(gt_travel_export_checkpoint(dev, &c, &local, &out), GT_E_POLICY,
                      "NO_READBACK");
        GT_ASSERT_ERR(gt_travel_export_resume(dev, &c, &local, &out), GT_E_POLICY,
                      "NO_READBACK");
        assert_int_equal(out.len, 0);
    }
    dev = open_dev(state, NORESUME, true, false);
    gt_toy_open(dev, chunk_make(dev, true), NTOK, &t);
    local = local_for(state, NORESUME, false);
    x = model_of(t.m, true);
    GT_ASSERT_ERR(gt_travel_export_resume(dev, &x, &local, &out), GT_E_POLICY,
                  "resume output");
    assert_int_equal(out.len, 0);
    gt_buf_free(&out);
    gt_toy_close(&t);
}

// ---- under a memory cap (devd --paging-store) ----------------------------------------------------

// devd's paging counters now.
static gt_pager_stats paging_now(gt_device *dev)
{
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &st));
    return st.paging;
}

// On a devd capped below the resume state's size: the sealed checkpoint opens to exactly the
// weights an uncapped cpu device computes for the same step, the resume state (params, m and v:
// more than the cap, so it can only have been read a page at a time) takes a fresh model to the
// uninterrupted run's next loss, and both exports fault pages in from the store.
static void paged_exports_match_uncapped(void **state)
{
    backend *b = *state;
    gt_device *dev = open_dev(state, A, true, false);
    gt_device *cpu = NULL;
    gt_device_config cc = {.kind = GT_DEVICE_CPU, .threads = 1, .mem_limit = LIMIT};
    GT_ASSERT_OK(gt_device_open(&cpu, &cc));
    gt_toy t, twin, r;
    gt_dbuf chunk = chunk_make(dev, true);
    gt_toy_open(dev, chunk, NTOK, &t);
    gt_toy_open(cpu, chunk_make(cpu, false), NTOK, &twin);
    assert_true(toy_step(&t) == toy_step(&twin));
    size_t n = gt_gpt2_num_params(twin.m);
    float *want = malloc(4 * n);
    GT_ASSERT_OK(gt_gpt2_params_read(twin.m, want, n));
    gt_export_local local = local_for(state, A, false);
    gt_export_model x = model_of(t.m, true);
    assert_true(3 * x.params_bytes > PAGED_CAP);
    gt_pager_stats before = paging_now(dev);
    gt_buf sealed = {0}, st = {0};
    GT_ASSERT_OK(gt_travel_export_checkpoint(dev, &x, &local, &sealed));
    GT_ASSERT_OK(gt_travel_export_resume(dev, &x, &local, &st));
    gt_pager_stats after = paging_now(dev);
    assert_true(after.fault_ins > before.fault_ins && after.page_outs > before.page_outs);
    assert_true(after.peak_resident <= PAGED_CAP);
    uint8_t signer[GT_ED25519_PUBLIC_BYTES];
    GT_ASSERT_OK(gt_travel_export_signer(dev, &local, signer));
    char path[700], out[700];
    snprintf(path, sizeof path, "%s/paged.sealed", b->dir);
    snprintf(out, sizeof out, "%s/paged.bin", b->dir);
    GT_ASSERT_OK(gt_file_write_atomic(path, sealed.data, sealed.len, 0644));
    opened_is(path, signer, want, n, out);
    const float next = toy_step(&twin);  // the uninterrupted (uncapped) run's next loss
    gt_toy_open(dev, chunk, NTOK, &r);
    GT_ASSERT_OK(gt_gpt2_init_random(r.m, 99));
    gt_export_model y = model_of(r.m, true);
    GT_ASSERT_OK(gt_travel_import_resume(dev, gt_buf_span(&st), &y, &local));
    gt_gpt2_step_set(r.m, y.step);
    GT_ASSERT_OK(gt_loader_next(r.l));
    assert_true(toy_step(&r) == next);
    gt_buf_free_nowipe(&sealed);
    gt_buf_free_nowipe(&st);
    free(want);
    gt_toy_close(&r);
    gt_toy_close(&t);
    gt_toy_close(&twin);
    gt_device_close(cpu);
}

int main(void)
{
    global_setup();
    const struct CMUnitTest cases[] = {
        cmocka_unit_test_teardown(sealed_checkpoint_opens_and_flips_are_refused, case_teardown),
        cmocka_unit_test_teardown(resume_round_trip_same_next_loss, case_teardown),
        cmocka_unit_test_teardown(foreign_and_tampered_states_refused, case_teardown),
        cmocka_unit_test_teardown(undeclared_exports_refused, case_teardown),
    };
    int rc = cmocka_run_group_tests_name("cpu", cases, setup_cpu, teardown);
    rc |= cmocka_run_group_tests_name("sim", cases, setup_sim, teardown);
    const struct CMUnitTest paged[] = {
        cmocka_unit_test_teardown(paged_exports_match_uncapped, case_teardown),
        cmocka_unit_test_teardown(sealed_checkpoint_opens_and_flips_are_refused, case_teardown),
        cmocka_unit_test_teardown(resume_round_trip_same_next_loss, case_teardown),
        cmocka_unit_test_teardown(foreign_and_tampered_states_refused, case_teardown),
        cmocka_unit_test_teardown(undeclared_exports_refused, case_teardown),
    };
    rc |= cmocka_run_group_tests_name("sim-paged", paged, setup_sim_paged, teardown);
#ifdef GT_HAVE_CUDA
    rc |= cmocka_run_group_tests_name("cuda", cases, setup_cuda, teardown);
#endif
    gt_recipient_keys_wipe(&rk);
    free(A);
    free(B);
    free(NORESUME);
    return rc;
}
