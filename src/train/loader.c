// The data loader over token buffers in device memory (train.h). The host never reads a token:
// it only decides offsets, and the device gathers (and range-checks) each batch.
#include "train_internal.h"

#include <gputravel/data.h>
#include <stdlib.h>
#include <string.h>

struct gt_loader {
    gt_device *dev;  // borrowed
    size_t nbufs;
    gt_dbuf *bufs;         // borrowed handles
    uint64_t *nsamples;    // per buffer
    int B, T, V;
    bool shuffle;
    uint64_t seed;
    gt_loader_pos pos;
    size_t *order;         // this epoch's buffer order
    uint64_t *samples;     // the current buffer's sample order (shuffle only)
    uint64_t samples_for;  // which buffer `samples` was built for (+1; 0: none)
    uint64_t max_samples;
    gt_dbuf inputs, targets;
};

static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t n)  // n >= 1; bias < 2^-32 for n < 2^32
{
    uint64_t hi = gt_rng_u32(state), lo = gt_rng_u32(state);
    return ((hi << 32) | lo) % n;
}

static void build_order(gt_loader *l)
{
    for (size_t i = 0; i < l->nbufs; i++) {
        l->order[i] = i;
    }
    if (l->shuffle) {
        uint64_t st = splitmix(l->seed ^ splitmix(l->pos.epoch)) | 1;
        for (size_t i = l->nbufs; i > 1; i--) {
            size_t j = (size_t)rng_below(&st, i);
            size_t t = l->order[i - 1];
            l->order[i - 1] = l->order[j];
            l->order[j] = t;
        }
    }
    l->samples_for = 0;
}

static void build_samples(gt_loader *l, size_t buf)
{
    uint64_t n = l->nsamples[buf];
    for (uint64_t i = 0; i < n; i++) {
        l->samples[i] = i;
    }
    uint64_t st = splitmix(l->seed ^ splitmix(l->pos.epoch * 0x100000001ull + buf + 1)) | 1;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rng_below(&st, i);
        uint64_t t = l->samples[i - 1];
        l->samples[i - 1] = l->samples[j];
        l->samples[j] = t;
    }
    l->samples_for = buf + 1;
}

void gt_loader_free(gt_loader *l)
{
    if (l == NULL) {
        return;
    }
    if (l->inputs != 0) {
        gt_err e = gt_device_free(l->dev, l->inputs);
        (void)e;
    }
    if (l->targets != 0) {
        gt_err e = gt_device_free(l->dev, l->targets);
        (void)e;
    }
    free(l->bufs);
    free(l->nsamples);
    free(l->order);
    free(l->samples);
    free(l);
}

gt_err gt_loader_create(gt_loader **out, gt_device *dev, const gt_dbuf *bufs,
                        const uint64_t *ntokens, size_t nbufs, int B, int T, int V, bool shuffle,
                        uint64_t seed)
{
    *out = NULL;
    GT_ENSURE(nbufs >= 1 && nbufs <= 1u << 20, GT_E_ARG, "loader: %zu token buffers", nbufs);
    GT_ENSURE(B >= 1 && T >= 1 && (uint64_t)B * (uint64_t)T <= (1u << 30), GT_E_ARG,
              "loader: batch %d x %d", B, T);
    GT_ENSURE(V >= 1 && V <= 65536, GT_E_ARG, "loader: vocab %d", V);
    gt_loader *l = calloc(1, sizeof *l);
    GT_ENSURE(l != NULL, GT_E_NOMEM, "loader: out of memory");
    gt_err err = GT_OK;
    l->dev = dev;
    l->nbufs = nbufs;
    l->B = B;
    l->T = T;
    l->V = V;
    l->shuffle = shuffle;
    l->seed = seed;
    l->bufs = calloc(nbufs, sizeof *l->bufs);
    l->nsamples = calloc(nbufs, sizeof *l->nsamples);
    l->order = calloc(nbufs, sizeof *l->order);
    GT_ENSURE_GOTO(err, l->bufs && l->nsamples && l->order, fail, GT_E_NOMEM,
                   "loader: out of memory");
    uint64_t bt = (uint64_t)B * (uint64_t)T, total = 0;
    for (size_t i = 0; i < nbufs; i++) {
        l->bufs[i] = bufs[i];
        uint64_t have = 0;
        GT_TRY_GOTO(err, gt_device_buf_size(dev, bufs[i], &have), fail);
        GT_ENSURE_GOTO(err, ntokens[i] <= have / 2, fail, GT_E_ARG,
                       "loader: buffer %zu holds %llu bytes, not %llu tokens", i,
                       (unsigned long long)have, (unsigned long long)ntokens[i]);
        if (ntokens[i] > 0) {
            gt_op check = gt_op_tokens_check((gt_dref){bufs[i], 0}, (int64_t)ntokens[i], V);
            gt_err e = gt_device_launch(dev, &check);
            GT_ENSURE_GOTO(err, e.code == GT_E_NONE, fail, e.code,
                           "token buffer %zu: a token is outside the model's vocabulary %d: %s", i, V,
                           e.msg);
        }
        l->nsamples[i] = ntokens[i] >= 1 ? (ntokens[i] - 1) / bt : 0;
        total += l->nsamples[i];
        l->max_samples = l->nsamples[i] > l->max_samples ? l->nsamples[i] : l->max_samples;
    }
    GT_ENSURE_GOTO(err, total > 0, fail, GT_E_ARG,
                   "loader: no data holds a batch of B*T+1 = %llu tokens",
                   (unsigned long long)(bt + 1));
    if (shuffle) {
        l->samples = calloc((size_t)l->max_samples, sizeof *l->samples);
        GT_ENSURE_GOTO(err, l->samples != NULL, fail, GT_E_NOMEM, "loader: out of memory");
    }
    GT_TRY_GOTO(err, gt_device_alloc(dev, bt * 4, GT_DBUF_NO_READBACK, &l->inputs), fail);
    GT_TRY_GOTO(err, gt_device_alloc(dev, bt * 4, GT_DBUF_NO_READBACK, &l->targets), fail);
    build_order(l);
    *out = l;
    return GT_OK;
fail:
    gt_loader_free(l);
    return err;
}

gt_dbuf gt_loader_inputs(const gt_loader *l) { return l->inputs; }
gt_dbuf gt_loader_targets(const gt_loader *l) { return l->targets; }
gt_loader_pos gt_loader_tell(const gt_loader *l)
{
    gt_loader_pos p = l->pos;
    p.sample_tokens = (uint64_t)l->B * (uint64_t)l->T;
    p.seed = l->seed;
    p.shuffle = l->shuffle ? 1 : 0;
    return p;
}

uint64_t gt_loader_num_samples(const gt_loader *l)
{
    uint64_t n = 0;
    for (size_t i = 0; i < l->nbufs; i++) {
        n += l->nsamples[i];
    }
    return n;
}

gt_err gt_loader_seek(gt_loader *l, gt_loader_pos pos)
{
    uint64_t bt = (uint64_t)l->B * (uint64_t)l->T;
    GT_ENSURE(pos.sample_tokens == 0 || pos.sample_tokens == bt, GT_E_ARG,
              "loader: the position counts samples of %llu tokens, this loader's are B*T = %llu",
              (unsigned long long)pos.sample_tokens, (unsigned long long)bt);
    GT_ENSURE(pos.sample_tokens == 0 || ((pos.shuffle != 0) == l->shuffle &&
                                         (!l->shuffle || pos.seed == l->seed)),
              GT_E_ARG, "loader: the position was saved with shuffle %s seed %llu, not %s %llu",
              pos.shuffle ? "on" : "off", (unsigned long long)pos.seed,
              l->shuffle ? "on" : "off", (unsigned long long)l->seed);
    GT_ENSURE(pos.shard < l->nbufs, GT_E_FORMAT, "loader: position shard %llu of %zu",
              (unsigned long long)pos.shard, l->nbufs);
    gt_loader_pos old = l->pos;
    l->pos = (gt_loader_pos){.epoch = pos.epoch, .shard = pos.shard, .sample = pos.sample};
    build_order(l);
    uint64_t have = l->nsamples[l->order[pos.shard]];
    if (pos.sample > have) {  // refused: the loader stays where it was
        l->pos = old;
        build_order(l);
        return gt_errf(GT_E_FORMAT, "loader: position sample %llu beyond %llu",
                       (unsigned long long)pos.sample, (unsigned long long)have);
    }
    return GT_OK;
}

gt_err gt_loader_next(gt_loader *l)
{
    // Skip exhausted (or too small) buffers; a new epoch starts after the last one.
    for (size_t guard = 0; l->pos.sample >= l->nsamples[l->order[l->pos.shard]]; guard++) {
        GT_ENSURE(guard <= l->nbufs + 1, GT_E_STATE, "loader: no samples");
        l->pos.sample = 0;
        l->pos.shard++;
        if (l->pos.shard == l->nbufs) {
            l->pos.shard = 0;
            l->pos.epoch++;
            build_order(l);
        }
    }
    size_t buf = l->order[l->pos.shard];
    uint64_t idx = l->pos.sample;
    if (l->shuffle) {
        if (l->samples_for != buf + 1) {
            build_samples(l, buf);
        }
        idx = l->samples[idx];
    }
    uint64_t bt = (uint64_t)l->B * (uint64_t)l->T;
    gt_op op = gt_op_tokens_gather((gt_dref){l->inputs, 0}, (gt_dref){l->targets, 0},
                                   (gt_dref){l->bufs[buf], 0}, (int64_t)bt, (int64_t)(idx * bt),
                                   l->V);
    GT_TRY(gt_device_launch(l->dev, &op));
    l->pos.sample++;
    return GT_OK;
}

gt_err gt_shard_to_device(gt_device *dev, const char *path, uint32_t flags, gt_dbuf *buf,
                          uint64_t *ntokens)
{
    *buf = 0;
    *ntokens = 0;
    gt_shard_reader r;
    GT_TRY(gt_shard_reader_open(&r, path));
    gt_err err = GT_OK;
    gt_dbuf b = 0;
    uint64_t n = r.token_count;
    uint16_t *piece = malloc((size_t)1 << 21);
    GT_ENSURE_GOTO(err, piece != NULL, out, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, gt_device_alloc(dev, n > 0 ? n * 2 : 2, flags, &b), out);
    for (uint64_t at = 0; at < n;) {
        size_t got = 0;
        GT_TRY_GOTO(err, gt_shard_reader_read(&r, piece, (size_t)1 << 20, &got), out);
        GT_ENSURE_GOTO(err, got > 0, out, GT_E_TRUNCATED, "%s: ends early", path);
        GT_TRY_GOTO(err, gt_device_copy_in(dev, b, at * 2, piece, got * 2), out);
        at += got;
    }
    *buf = b;
    *ntokens = n;
    b = 0;
out:
    if (piece != NULL) {
        gt_secure_zero(piece, (size_t)1 << 21);  // plaintext staging
    }
    free(piece);
    if (b != 0) {
        gt_err e = gt_device_free(dev, b);
        (void)e;
    }
    gt_shard_reader_close(&r);
    return err;
}
