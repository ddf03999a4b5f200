// llm.c fp32 checkpoints (256 x int32 header, then the 16 tensors in llm.c order) and the
// training-state file beside them (train.h). Headers are parsed through gt_reader; the file size
// must match the header exactly before any parameter is read; writes are atomic.
#include "train_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PIECE_BYTES ((uint64_t)4 << 20)

gt_err gt_train_file_to_device(FILE *fp, const char *path, gt_device *dev, gt_dbuf buf,
                               uint64_t offset, uint64_t len, gt_hash_ctx *h)
{
    uint8_t *piece = malloc(PIECE_BYTES);
    GT_ENSURE(piece != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = GT_OK;
    for (uint64_t at = 0; at < len; at += PIECE_BYTES) {
        size_t k = (size_t)(len - at < PIECE_BYTES ? len - at : PIECE_BYTES);
        size_t got = fread(piece, 1, k, fp);
        GT_ENSURE_GOTO(err, got == k, out, GT_E_TRUNCATED, "%s: ends early (%s)", path,
                       ferror(fp) ? strerror(errno) : "short read");
        if (h != NULL) {
            GT_TRY_GOTO(err, gt_hash_update(h, piece, k), out);
        }
        GT_TRY_GOTO(err, gt_device_copy_in(dev, buf, offset + at, piece, k), out);
    }
out:
    free(piece);
    return err;
}

uint16_t gt_bf16_from_f32(float f)
{
    uint32_t u = 0;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x0040u);  // NaN: keep it one (quiet), whatever its payload
    }
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even; overflow gives inf
    return (uint16_t)(u >> 16);
}

float gt_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f = 0.0f;
    memcpy(&f, &u, 4);
    return f;
}

// fp32 values in place -> the fp32 values of their bf16 rounding (n floats).
static void round_to_bf16(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = gt_bf16_to_f32(gt_bf16_from_f32(v[i]));
    }
}

gt_err gt_train_device_to_file(gt_atomic_file *f, gt_device *dev, gt_dbuf buf, uint64_t offset,
                               uint64_t len, gt_hash_ctx *h, bool hash_bf16)
{
    uint8_t *piece = malloc(PIECE_BYTES);
    float *rounded = hash_bf16 ? malloc(PIECE_BYTES) : NULL;
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, piece != NULL && (!hash_bf16 || rounded != NULL), out, GT_E_NOMEM,
                   "out of memory");
    for (uint64_t at = 0; at < len; at += PIECE_BYTES) {
        size_t k = (size_t)(len - at < PIECE_BYTES ? len - at : PIECE_BYTES);
        GT_TRY_GOTO(err, gt_device_copy_out(dev, piece, buf, offset + at, k), out);
        if (h != NULL && hash_bf16) {
            memcpy(rounded, piece, k);
            round_to_bf16(rounded, k / 4);
            GT_TRY_GOTO(err, gt_hash_update(h, rounded, k), out);
        } else if (h != NULL) {
            GT_TRY_GOTO(err, gt_hash_update(h, piece, k), out);
        }
        GT_TRY_GOTO(err, gt_atomic_file_write(f, piece, k), out);
    }
out:
    free(piece);
    free(rounded);
    return err;
}

// A bf16 payload of n parameters -> fp32 on the device; h gets the fp32 values.
static gt_err bf16_file_to_device(FILE *fp, const char *path, gt_device *dev, gt_dbuf buf,
                                  uint64_t n, gt_hash_ctx *h)
{
    enum { PIECE_PARAMS = 1 << 20 };
    uint8_t *raw = malloc((size_t)PIECE_PARAMS * 2);
    float *f = malloc((size_t)PIECE_PARAMS * 4);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, raw != NULL && f != NULL, out, GT_E_NOMEM, "out of memory");
    for (uint64_t at = 0; at < n; at += PIECE_PARAMS) {
        size_t k = (size_t)(n - at < PIECE_PARAMS ? n - at : PIECE_PARAMS);
        size_t got = fread(raw, 2, k, fp);
        GT_ENSURE_GOTO(err, got == k, out, GT_E_TRUNCATED, "%s: ends early (%s)", path,
                       ferror(fp) ? strerror(errno) : "short read");
        for (size_t i = 0; i < k; i++) {
            f[i] = gt_bf16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
        }
        GT_TRY_GOTO(err, gt_hash_update(h, f, k * 4), out);
        GT_TRY_GOTO(err, gt_device_copy_in(dev, buf, at * 4, f, k * 4), out);
    }
out:
    free(raw);
    free(f);
    return err;
}

// The parameters as bf16 into f; h gets the fp32 values of the bf16 written.
static gt_err device_to_bf16_file(gt_atomic_file *af, gt_device *dev, gt_dbuf buf, uint64_t n,
                                  gt_hash_ctx *h)
{
    enum { PIECE_PARAMS = 1 << 20 };
    uint8_t *raw = malloc((size_t)PIECE_PARAMS * 2);
    float *f = malloc((size_t)PIECE_PARAMS * 4);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, raw != NULL && f != NULL, out, GT_E_NOMEM, "out of memory");
    for (uint64_t at = 0; at < n; at += PIECE_PARAMS) {
        size_t k = (size_t)(n - at < PIECE_PARAMS ? n - at : PIECE_PARAMS);
        GT_TRY_GOTO(err, gt_device_copy_out(dev, f, buf, at * 4, k * 4), out);
        for (size_t i = 0; i < k; i++) {
            uint16_t b = gt_bf16_from_f32(f[i]);
            raw[2 * i] = (uint8_t)b;
            raw[2 * i + 1] = (uint8_t)(b >> 8);
            f[i] = gt_bf16_to_f32(b);
        }
        GT_TRY_GOTO(err, gt_hash_update(h, f, k * 4), out);
        GT_TRY_GOTO(err, gt_atomic_file_write(af, raw, k * 2), out);
    }
out:
    free(raw);
    free(f);
    return err;
}

gt_err gt_gpt2_ckpt_header_parse(const uint8_t *hdr, size_t len, gt_gpt2_config *cfg,
                                  int *version)
{
    gt_reader r = gt_reader_init(hdr, len);
    int32_t h[8] = {0};
    for (int i = 0; i < 8; i++) {
        GT_TRY(gt_reader_i32le(&r, &h[i]));
    }
    GT_TRY(gt_reader_skip(&r, GT_GPT2_CKPT_HEADER_BYTES - 32));
    GT_ENSURE(h[0] == GT_GPT2_CKPT_MAGIC, GT_E_FORMAT, "bad magic %d (expected %d)", h[0],
              GT_GPT2_CKPT_MAGIC);
    GT_ENSURE(h[1] == GT_GPT2_CKPT_VERSION || h[1] == GT_GPT2_CKPT_VERSION_BF16,
              GT_E_UNSUPPORTED, "version %d (expected %d: fp32, or %d: bf16)", h[1],
              GT_GPT2_CKPT_VERSION, GT_GPT2_CKPT_VERSION_BF16);
    *version = h[1];
    cfg->max_seq_len = h[2];
    cfg->vocab_size = h[3];
    cfg->num_layers = h[4];
    cfg->num_heads = h[5];
    cfg->channels = h[6];
    cfg->padded_vocab_size = h[7];
    return gt_gpt2_config_check(cfg);
}

gt_err gt_gpt2_load(gt_gpt2 **out, gt_device *dev, const char *path)
{
    *out = NULL;
    FILE *fp = NULL;
    uint64_t size = 0;
    GT_TRY(gt_file_open_regular(path, &fp, &size));
    gt_err err = GT_OK;
    gt_gpt2 *m = NULL;
    gt_hash_ctx *h = NULL;
    uint8_t hdr[GT_GPT2_CKPT_HEADER_BYTES];
    size_t got = fread(hdr, 1, sizeof hdr, fp);
    gt_gpt2_config cfg = {0};
    int version = 0;
    GT_TRY_GOTO(err, gt_gpt2_ckpt_header_parse(hdr, got, &cfg, &version), fail);
    size_t sizes[GT_GPT2_NUM_TENSORS];
    uint64_t nparams = gt_gpt2_param_sizes(&cfg, sizes);
    uint64_t want = GT_GPT2_CKPT_HEADER_BYTES +
                    nparams * (version == GT_GPT2_CKPT_VERSION_BF16 ? 2 : 4);
    GT_ENSURE_GOTO(err, size >= want, fail, GT_E_TRUNCATED,
                   "%llu bytes, but the header's config needs %llu", (unsigned long long)size,
                   (unsigned long long)want);
    GT_ENSURE_GOTO(err, size == want, fail, GT_E_FORMAT,
                   "%llu bytes, but the header's config needs exactly %llu",
                   (unsigned long long)size, (unsigned long long)want);
    GT_TRY_GOTO(err, gt_gpt2_create(&m, dev, &cfg), fail);
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA256), fail);
    if (version == GT_GPT2_CKPT_VERSION_BF16) {
        GT_TRY_GOTO(err, bf16_file_to_device(fp, path, dev, gt_gpt2_internal_params(m), nparams,
                                             h),
                    fail);
    } else {
        GT_TRY_GOTO(err, gt_train_file_to_device(fp, path, dev, gt_gpt2_internal_params(m), 0,
                                                 nparams * 4, h),
                    fail);
    }
    uint8_t sha[GT_WEIGHTS_SHA_BYTES];
    GT_TRY_GOTO(err, gt_hash_final(h, sha), fail);
    gt_gpt2_internal_set_file_sha(m, sha);
    gt_hash_free(h);
    fclose(fp);
    *out = m;
    return GT_OK;
fail:
    gt_hash_free(h);
    fclose(fp);
    gt_gpt2_free(m);
    return gt_err_wrap(err, "checkpoint %s", path);
}

static gt_err save_as(gt_gpt2 *m, const char *path, int version)
{
    const gt_gpt2_config *c = gt_gpt2_get_config(m);
    uint8_t hdr[GT_GPT2_CKPT_HEADER_BYTES] = {0};
    gt_writer w = gt_writer_init_fixed(hdr, sizeof hdr);
    int32_t h[8] = {GT_GPT2_CKPT_MAGIC, version, c->max_seq_len, c->vocab_size,
                    c->num_layers, c->num_heads, c->channels, c->padded_vocab_size};
    for (int i = 0; i < 8; i++) {
        GT_TRY(gt_writer_i32le(&w, h[i]));
    }
    gt_atomic_file f;
    gt_hash_ctx *hc = NULL;
    GT_TRY(gt_hash_new(&hc, GT_HASH_SHA256));
    gt_err err = gt_atomic_file_open(&f, path, 0600);
    if (!gt_is_ok(err)) {
        gt_hash_free(hc);
        return err;
    }
    uint8_t sha[GT_WEIGHTS_SHA_BYTES];
    gt_device *dev = gt_gpt2_internal_device(m);
    uint64_t n = gt_gpt2_num_params(m);
    GT_TRY_GOTO(err, gt_atomic_file_write(&f, hdr, sizeof hdr), fail);
    if (version == GT_GPT2_CKPT_VERSION_BF16) {
        GT_TRY_GOTO(err, device_to_bf16_file(&f, dev, gt_gpt2_internal_params(m), n, hc), fail);
    } else {
        GT_TRY_GOTO(err, gt_train_device_to_file(&f, dev, gt_gpt2_internal_params(m), 0, n * 4,
                                                 hc, false),
                    fail);
    }
    GT_TRY_GOTO(err, gt_hash_final(hc, sha), fail);
    gt_hash_free(hc);
    GT_TRY(gt_atomic_file_commit(&f));
    gt_gpt2_internal_set_file_sha(m, sha);
    return GT_OK;
fail:
    gt_hash_free(hc);
    gt_atomic_file_abort(&f);
    return gt_err_wrap(err, "checkpoint %s", path);
}

gt_err gt_gpt2_save(gt_gpt2 *m, const char *path)
{
    return save_as(m, path, GT_GPT2_CKPT_VERSION);
}

gt_err gt_gpt2_save_bf16(gt_gpt2 *m, const char *path)
{
    return save_as(m, path, GT_GPT2_CKPT_VERSION_BF16);
}

// ---- training state ---------------------------------------------------------------------------

#define STATE_V1_HEADER_BYTES (4 + 4 + 6 * 4 + 6 * 8 + 4 + 8 + 4)
#define STATE_HEADER_BYTES (STATE_V1_HEADER_BYTES + 2 * GT_WEIGHTS_SHA_BYTES)

static gt_err state_header_build(gt_gpt2 *m, gt_loader_pos pos, bool has_moments,
                                 const uint8_t *weights, const uint8_t *prev,
                                 uint8_t hdr[STATE_HEADER_BYTES])
{
    const gt_gpt2_config *c = gt_gpt2_get_config(m);
    gt_writer w = gt_writer_init_fixed(hdr, STATE_HEADER_BYTES);
    GT_TRY(gt_writer_u32le(&w, GT_TRAIN_STATE_MAGIC));
    GT_TRY(gt_writer_u32le(&w, GT_TRAIN_STATE_VERSION));
    int32_t cf[6] = {c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers,
                     c->num_heads, c->channels};
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_writer_i32le(&w, cf[i]));
    }
    GT_TRY(gt_writer_u64le(&w, gt_gpt2_step(m)));
    GT_TRY(gt_writer_u64le(&w, pos.epoch));
    GT_TRY(gt_writer_u64le(&w, pos.shard));
    GT_TRY(gt_writer_u64le(&w, pos.sample));
    GT_TRY(gt_writer_u64le(&w, pos.sample_tokens));
    GT_TRY(gt_writer_u64le(&w, pos.seed));
    GT_TRY(gt_writer_u32le(&w, pos.shuffle));
    GT_TRY(gt_writer_u64le(&w, gt_gpt2_num_params(m)));
    GT_TRY(gt_writer_u32le(&w, has_moments ? 1 : 0));
    GT_TRY(gt_writer_bytes(&w, weights, GT_WEIGHTS_SHA_BYTES));
    return gt_writer_bytes(&w, prev, GT_WEIGHTS_SHA_BYTES);
}

static gt_err state_save(gt_gpt2 *m, gt_loader_pos pos, const char *path, bool bf16)
{
    GT_ENSURE(!gt_gpt2_zero_sharded(m), GT_E_STATE,
              "%s: the AdamW state is sharded across ranks (ZeRO-1): this rank holds 1/N of "
              "it, which no state file describes (resume across ranks is not done)", path);
    gt_dbuf mb = 0, vb = 0;
    GT_TRY(gt_gpt2_internal_moments(m, &mb, &vb, false));
    uint64_t n = gt_gpt2_num_params(m);
    uint8_t zero[GT_WEIGHTS_SHA_BYTES] = {0}, prev[GT_WEIGHTS_SHA_BYTES] = {0};
    uint8_t weights[GT_WEIGHTS_SHA_BYTES] = {0}, hdr[STATE_HEADER_BYTES];
    (void)gt_gpt2_internal_file_sha(m, prev);  // zero when the weights came from no file
    // The hashes are known only once the parameters went by: a placeholder header first.
    GT_TRY(state_header_build(m, pos, mb != 0, zero, zero, hdr));
    gt_hash_ctx *h = NULL;
    GT_TRY(gt_hash_new(&h, GT_HASH_SHA256));
    gt_atomic_file f;
    gt_err err = gt_atomic_file_open(&f, path, 0600);
    if (!gt_is_ok(err)) {
        gt_hash_free(h);
        return gt_err_wrap(err, "training state %s", path);
    }
    gt_device *dev = gt_gpt2_internal_device(m);
    GT_TRY_GOTO(err, gt_atomic_file_write(&f, hdr, sizeof hdr), fail);
    GT_TRY_GOTO(err, gt_train_device_to_file(&f, dev, gt_gpt2_internal_params(m), 0, n * 4, h,
                                             bf16),
                fail);
    if (mb != 0) {
        GT_TRY_GOTO(err, gt_train_device_to_file(&f, dev, mb, 0, n * 4, NULL, false), fail);
        GT_TRY_GOTO(err, gt_train_device_to_file(&f, dev, vb, 0, n * 4, NULL, false), fail);
    }
    GT_TRY_GOTO(err, gt_hash_final(h, weights), fail);
    GT_TRY_GOTO(err, state_header_build(m, pos, mb != 0, weights, prev, hdr), fail);
    GT_ENSURE_GOTO(err, fflush(f.fp) == 0 && fseek(f.fp, 0, SEEK_SET) == 0, fail, GT_E_IO,
                   "%s: %s", f.path, strerror(errno));
    GT_TRY_GOTO(err, gt_atomic_file_write(&f, hdr, sizeof hdr), fail);
    gt_hash_free(h);
    return gt_err_wrap(gt_atomic_file_commit(&f), "training state %s", path);
fail:
    gt_hash_free(h);
    gt_atomic_file_abort(&f);
    return gt_err_wrap(err, "training state %s", path);
}

gt_err gt_train_state_save(gt_gpt2 *m, gt_loader_pos pos, const char *path)
{
    return state_save(m, pos, path, false);
}

gt_err gt_train_state_save_bf16(gt_gpt2 *m, gt_loader_pos pos, const char *path)
{
    return state_save(m, pos, path, true);
}

typedef struct {
    uint32_t version;
    uint64_t step;
    gt_loader_pos pos;
    uint32_t has_moments;
    uint8_t weights[GT_WEIGHTS_SHA_BYTES], prev[GT_WEIGHTS_SHA_BYTES];  // version 2
    size_t header_bytes;
} state_header;

static gt_err state_header_parse(const uint8_t *hdr, size_t len, const gt_gpt2_config *c,
                                 uint64_t nparams, state_header *sh)
{
    gt_reader r = gt_reader_init(hdr, len);
    uint32_t magic = 0;
    GT_TRY(gt_reader_u32le(&r, &magic));
    GT_TRY(gt_reader_u32le(&r, &sh->version));
    GT_ENSURE(magic == GT_TRAIN_STATE_MAGIC, GT_E_FORMAT, "bad magic %#x", magic);
    GT_ENSURE(sh->version == 1 || sh->version == GT_TRAIN_STATE_VERSION, GT_E_UNSUPPORTED,
              "version %u (expected 1 or %u)", sh->version, GT_TRAIN_STATE_VERSION);
    int32_t cf[6] = {0};
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_reader_i32le(&r, &cf[i]));
    }
    GT_ENSURE(cf[0] == c->max_seq_len && cf[1] == c->vocab_size &&
                  cf[2] == c->padded_vocab_size && cf[3] == c->num_layers &&
                  cf[4] == c->num_heads && cf[5] == c->channels,
              GT_E_FORMAT, "written for another model config (L=%d C=%d V=%d)", cf[3], cf[5],
              cf[1]);
    uint64_t n = 0;
    gt_loader_pos *pos = &sh->pos;
    GT_TRY(gt_reader_u64le(&r, &sh->step));
    GT_TRY(gt_reader_u64le(&r, &pos->epoch));
    GT_TRY(gt_reader_u64le(&r, &pos->shard));
    GT_TRY(gt_reader_u64le(&r, &pos->sample));
    GT_TRY(gt_reader_u64le(&r, &pos->sample_tokens));
    GT_TRY(gt_reader_u64le(&r, &pos->seed));
    GT_TRY(gt_reader_u32le(&r, &pos->shuffle));
    GT_TRY(gt_reader_u64le(&r, &n));
    GT_TRY(gt_reader_u32le(&r, &sh->has_moments));
    if (sh->version >= 2) {
        GT_TRY(gt_reader_bytes(&r, sh->weights, GT_WEIGHTS_SHA_BYTES));
        GT_TRY(gt_reader_bytes(&r, sh->prev, GT_WEIGHTS_SHA_BYTES));
    }
    sh->header_bytes = r.pos;
    GT_ENSURE(n == nparams, GT_E_FORMAT, "%llu parameters (model has %llu)",
              (unsigned long long)n, (unsigned long long)nparams);
    GT_ENSURE(sh->has_moments <= 1, GT_E_FORMAT, "has_moments %u", sh->has_moments);
    GT_ENSURE(pos->shuffle <= 1, GT_E_FORMAT, "shuffle %u", pos->shuffle);
    GT_ENSURE(sh->has_moments == 1 || sh->step == 0, GT_E_FORMAT, "step %llu without moments",
              (unsigned long long)sh->step);
    return GT_OK;
}

gt_err gt_train_state_describe_header(const uint8_t *hdr, size_t len, uint64_t file_size,
                                      gt_train_state_summary *out)
{
    memset(out, 0, sizeof *out);
    // The config is in the header: read it once for itself, then the rest against it.
    gt_reader r = gt_reader_init(hdr, len);
    uint32_t magic = 0;
    int32_t cf[6] = {0};
    GT_TRY(gt_reader_u32le(&r, &magic));
    GT_TRY(gt_reader_u32le(&r, &out->version));
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_reader_i32le(&r, &cf[i]));
    }
    out->cfg = (gt_gpt2_config){.max_seq_len = cf[0], .vocab_size = cf[1],
                                .padded_vocab_size = cf[2], .num_layers = cf[3],
                                .num_heads = cf[4], .channels = cf[5]};
    GT_ENSURE(magic == GT_TRAIN_STATE_MAGIC, GT_E_FORMAT, "bad magic %#x", magic);
    GT_TRY(gt_gpt2_config_check(&out->cfg));
    size_t sizes[GT_GPT2_NUM_TENSORS];
    out->nparams = gt_gpt2_param_sizes(&out->cfg, sizes);
    state_header sh = {0};
    GT_TRY(state_header_parse(hdr, len, &out->cfg, out->nparams, &sh));
    out->step = sh.step;
    out->pos = sh.pos;
    out->has_moments = sh.has_moments != 0;
    memcpy(out->weights_sha, sh.weights, GT_WEIGHTS_SHA_BYTES);
    memcpy(out->prev_sha, sh.prev, GT_WEIGHTS_SHA_BYTES);
    // nparams <= 2^50 (config limits), so the product cannot wrap
    out->size_ok = file_size == sh.header_bytes + out->nparams * 4 * (out->has_moments ? 3 : 1);
    return GT_OK;
}

gt_err gt_train_state_describe(const char *path, gt_train_state_summary *out)
{
    memset(out, 0, sizeof *out);
    FILE *fp = NULL;
    uint64_t size = 0;
    GT_TRY(gt_file_open_regular(path, &fp, &size));
    uint8_t hdr[STATE_HEADER_BYTES];
    size_t got = fread(hdr, 1, sizeof hdr, fp);
    fclose(fp);
    return gt_err_wrap(gt_train_state_describe_header(hdr, got, size, out), "%s", path);
}

// Opens a state file and checks its header and size against m (nothing of m changes).
static gt_err state_open(gt_gpt2 *m, const char *path, FILE **fp, state_header *sh)
{
    uint64_t size = 0;
    GT_TRY(gt_file_open_regular(path, fp, &size));
    uint8_t hdr[STATE_HEADER_BYTES];
    size_t got = fread(hdr, 1, sizeof hdr, *fp);
    uint64_t n = gt_gpt2_num_params(m);
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, state_header_parse(hdr, got, gt_gpt2_get_config(m), n, sh), fail);
    uint64_t want = sh->header_bytes + n * 4 + (sh->has_moments ? 2 * n * 4 : 0);
    GT_ENSURE_GOTO(err, size >= want, fail, GT_E_TRUNCATED, "%llu bytes, expected %llu",
                   (unsigned long long)size, (unsigned long long)want);
    GT_ENSURE_GOTO(err, size == want, fail, GT_E_FORMAT, "%llu bytes, expected exactly %llu",
                   (unsigned long long)size, (unsigned long long)want);
    GT_ENSURE_GOTO(err, fseek(*fp, (long)sh->header_bytes, SEEK_SET) == 0, fail, GT_E_IO,
                   "%s: %s", path, strerror(errno));
    return GT_OK;
fail:
    fclose(*fp);
    *fp = NULL;
    return err;
}

// Reads the state's body into m: its parameters (or skips them), moments (or zeroes them).
static gt_err state_read_body(gt_gpt2 *m, FILE *fp, const char *path, const state_header *sh,
                              bool params, bool moments)
{
    uint64_t n = gt_gpt2_num_params(m);
    gt_device *dev = gt_gpt2_internal_device(m);
    gt_dbuf mb = 0, vb = 0;
    GT_TRY(gt_gpt2_internal_moments(m, &mb, &vb, sh->has_moments != 0 && moments));
    // Past this point a read error leaves the model half-loaded; the caller discards it.
    if (params) {
        GT_TRY(gt_train_file_to_device(fp, path, dev, gt_gpt2_internal_params(m), 0, n * 4, NULL));
    } else {
        GT_ENSURE(fseek(fp, (long)(n * 4), SEEK_CUR) == 0, GT_E_IO, "%s: %s", path,
                  strerror(errno));
    }
    if (sh->has_moments && moments) {
        GT_TRY(gt_train_file_to_device(fp, path, dev, mb, 0, n * 4, NULL));
        GT_TRY(gt_train_file_to_device(fp, path, dev, vb, 0, n * 4, NULL));
    } else if (mb != 0) {
        GT_TRY(gt_device_memset(dev, mb, 0, 0, n * 4));
        GT_TRY(gt_device_memset(dev, vb, 0, 0, n * 4));
    }
    gt_gpt2_internal_set_step(m, sh->step);
    return GT_OK;
}

gt_err gt_train_state_load(gt_gpt2 *m, gt_loader_pos *pos, const char *path)
{
    FILE *fp = NULL;
    state_header sh = {0};
    GT_TRY(gt_err_wrap(state_open(m, path, &fp, &sh), "training state %s", path));
    gt_err err = state_read_body(m, fp, path, &sh, true, true);
    fclose(fp);
    if (gt_is_ok(err)) {
        *pos = sh.pos;
    }
    return gt_err_wrap(err, "training state %s", path);
}

static void sha_prefix(char out[17], const uint8_t *sha) { gt_hex_encode(out, 17, sha, 8); }

gt_err gt_train_resume(gt_gpt2 *m, gt_loader_pos *pos, const char *path, gt_resume_mode mode,
                       gt_resume_info *info)
{
    memset(info, 0, sizeof *info);
    GT_ENSURE(gt_gpt2_internal_file_sha(m, info->ckpt_sha), GT_E_ARG,
              "resume: the model was not loaded from a checkpoint file");
    FILE *fp = NULL;
    state_header sh = {0};
    GT_TRY(gt_err_wrap(state_open(m, path, &fp, &sh), "training state %s", path));
    memcpy(info->state_sha, sh.weights, GT_WEIGHTS_SHA_BYTES);
    info->step = sh.step;
    bool params = true, moments = true;
    static const uint8_t zero[GT_WEIGHTS_SHA_BYTES] = {0};
    gt_err err = GT_OK;
    if (sh.version < 2) {
        info->outcome = GT_RESUME_LEGACY;
    } else if (gt_ct_equal(sh.weights, info->ckpt_sha, GT_WEIGHTS_SHA_BYTES)) {
        // The state's own parameters: the same as CKPT's, or (bf16 CKPT) their exact values.
        info->outcome = GT_RESUME_MATCHED;
    } else if (!gt_ct_equal(sh.prev, zero, GT_WEIGHTS_SHA_BYTES) &&
               gt_ct_equal(sh.prev, info->ckpt_sha, GT_WEIGHTS_SHA_BYTES)) {
        info->outcome = GT_RESUME_STATE_AHEAD;
    } else if (mode == GT_RESUME_RESET_OPTIMIZER) {
        info->outcome = GT_RESUME_OPTIMIZER_RESET;
        params = false;
        moments = false;
    } else {
        char a[17], b[17];
        sha_prefix(a, info->ckpt_sha);
        sha_prefix(b, sh.weights);
        err = gt_errf(GT_E_STATE, "checkpoint weights (sha256 %s...) are not those the state of "
                                  "step %llu was saved with (%s...)",
                      a, (unsigned long long)sh.step, b);
        goto out;
    }
    GT_TRY_GOTO(err, state_read_body(m, fp, path, &sh, params, moments), out);
    *pos = sh.pos;
out:
    fclose(fp);
    return gt_err_wrap(err, "training state %s", path);
}

gt_err gt_gpt2_state_bufs_get(gt_gpt2 *m, bool alloc_moments, gt_gpt2_state_bufs *out)
{
    memset(out, 0, sizeof *out);
    GT_TRY(gt_gpt2_internal_moments(m, &out->m, &out->v, alloc_moments));
    out->params = gt_gpt2_internal_params(m);
    out->params_bytes = (uint64_t)gt_gpt2_num_params(m) * 4;
    return GT_OK;
}

void gt_gpt2_step_set(gt_gpt2 *m, uint64_t step) { gt_gpt2_internal_set_step(m, step); }
