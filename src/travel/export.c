// Device-sealed exports, one function per export whatever the device (travel.h): sim asks devd
// (which seals with its own keys, device.h); cpu and cuda read the weights in-process
// (gt_device_inproc_read: the trainer's code is the trusted base there) and seal them here with
// the same seal core devd uses.
#include <gputravel/travel.h>

#include <stdlib.h>
#include <string.h>

#define RESUME_KEY_MAGIC GT_RESUME_KEY_MAGIC
#define RESUME_KEY_FILE_BYTES (8 + GT_RESUME_SECRET_BYTES)
#define PIECE_BYTES ((uint64_t)4 << 20)

gt_err gt_agreement_recipients(const gt_agreement *a, gt_sckpt_recipient *r, uint32_t *n)
{
    *n = 0;
    GT_ENSURE(a->recipient_count >= 1 && a->recipient_count <= GT_SCKPT_MAX_RECIPIENTS,
              GT_E_FORMAT, "output: %u recipients (expected 1..%d)", a->recipient_count,
              GT_SCKPT_MAX_RECIPIENTS);
    for (uint32_t i = 0; i < a->recipient_count; i++) {
        const gt_agreement_holder *h = gt_agreement_find_holder(a, a->recipients[i]);
        GT_ENSURE(h != NULL && h->has_recipient_key, GT_E_FORMAT,
                  "output: recipient '%s' has no recipient_key", a->recipients[i]);
        memset(&r[i], 0, sizeof r[i]);
        snprintf(r[i].name, sizeof r[i].name, "%s", h->name);
        memcpy(r[i].pub, h->recipient_key, sizeof r[i].pub);
    }
    *n = a->recipient_count;
    return GT_OK;
}

static gt_err resume_id(gt_resume_device *rd)
{
    return gt_hkdf(GT_HASH_SHA256, rd->id, sizeof rd->id, rd->secret, sizeof rd->secret, NULL, 0,
                   (const uint8_t *)"gputravel cpu resume device id v1", 33);
}

gt_err gt_resume_device_load(const char *dir, gt_resume_device *rd)
{
    memset(rd, 0, sizeof *rd);
    char path[4200];
    GT_TRY(gt_path_join(path, sizeof path, dir, GT_RESUME_KEY_FILE));
    uint8_t raw[RESUME_KEY_FILE_BYTES];
    gt_err err = GT_OK;
    if (!gt_path_exists(path)) {
        memcpy(raw, RESUME_KEY_MAGIC, 8);
        GT_TRY_GOTO(err, gt_random_bytes(raw + 8, GT_RESUME_SECRET_BYTES), out);
        GT_TRY_GOTO(err, gt_file_write_atomic(path, raw, sizeof raw, 0600), out);
    }
    gt_buf b = {0};
    GT_TRY_GOTO(err, gt_file_read_all(path, 4096, &b), out);
    if (b.len != sizeof raw || memcmp(b.data, RESUME_KEY_MAGIC, 8) != 0) {
        err = gt_errf(GT_E_FORMAT, "%s: not a resume key (%zu bytes)", path, b.len);
    } else {
        memcpy(rd->secret, b.data + 8, GT_RESUME_SECRET_BYTES);
        err = resume_id(rd);
    }
    gt_buf_free(&b);
out:
    gt_secure_zero(raw, sizeof raw);
    if (!gt_is_ok(err)) {
        gt_secure_zero(rd, sizeof *rd);
    }
    return err;
}

static void config_of(const gt_sckpt_model *m, uint32_t c[6])
{
    const uint32_t v[6] = {m->max_seq_len, m->vocab_size, m->num_layers, m->num_heads,
                           m->channels, m->padded_vocab_size};
    memcpy(c, v, sizeof v);
}

static bool in_process(gt_device *dev) { return gt_device_get_kind(dev) != GT_DEVICE_SIM; }

// A source over device buffers read in-process, in pieces (cpu, cuda).
typedef struct {
    gt_device *dev;
    const uint8_t *head;  // bytes before the buffers (the llm.c header), may be NULL
    size_t head_len;
    gt_dbuf bufs[3];
    size_t nbufs;
    uint64_t each;        // bytes per buffer
    uint64_t at;          // bytes handed out so far
} inproc_source;

static gt_err inproc_read(void *ctx, uint8_t *out, size_t n)
{
    inproc_source *s = ctx;
    for (size_t done = 0; done < n;) {
        size_t k = 0;
        if (s->at < s->head_len) {
            k = s->head_len - (size_t)s->at < n - done ? s->head_len - (size_t)s->at : n - done;
            memcpy(out + done, s->head + s->at, k);
        } else {
            uint64_t rel = s->at - s->head_len, i = rel / s->each, off = rel % s->each;
            GT_ENSURE(i < s->nbufs, GT_E_TRUNCATED, "in-process read: past the last buffer");
            uint64_t left = s->each - off;
            k = (size_t)(left < n - done ? left : n - done);
            GT_TRY(gt_device_inproc_read(s->dev, out + done, s->bufs[i], off, k));
        }
        done += k;
        s->at += k;
    }
    return GT_OK;
}

// The in-process backends keep the same rule devd does: only what the session declared leaves.
static gt_err local_check(gt_device *dev, const gt_export_local *local, bool resume)
{
    gt_device_outputs now;
    gt_err e = gt_device_outputs_get(dev, &now);
    GT_ENSURE(gt_is_ok(e), GT_E_POLICY, "device: %s export refused: this session declared no "
              "outputs", resume ? "resume" : "checkpoint");
    GT_ENSURE(resume ? now.resume : now.checkpoint, GT_E_POLICY,
              "device: %s export refused: the agreement does not declare a %s output",
              resume ? "resume" : "checkpoint", resume ? "resume" : "checkpoint");
    GT_ENSURE(local != NULL && local->agreement != NULL, GT_E_ARG,
              "in-process export needs the agreement");
    GT_ENSURE(!resume || local->resume != NULL, GT_E_ARG,
              "in-process resume export needs the resume key (gt_resume_device_load)");
    GT_ENSURE(resume || local->signing_secret != NULL, GT_E_ARG,
              "in-process checkpoint export needs the signing key");
    return GT_OK;
}

gt_err gt_travel_export_checkpoint(gt_device *dev, const gt_export_model *x,
                                   const gt_export_local *local, gt_buf *sealed)
{
    sealed->len = 0;
    if (!in_process(dev)) {
        uint32_t c[6];
        config_of(&x->model, c);
        return gt_device_export_checkpoint(dev, x->params, x->params_bytes, x->step, c, sealed);
    }
    GT_TRY(local_check(dev, local, false));
    gt_sckpt_recipient *r = calloc(GT_SCKPT_MAX_RECIPIENTS, sizeof *r);
    GT_ENSURE(r != NULL, GT_E_NOMEM, "out of memory");
    gt_sckpt_seal_params p = {.step = x->step, .model = x->model, .recipients = r,
                              .signing_secret = local->signing_secret};
    memcpy(p.agreement_hash, local->agreement->hash, sizeof p.agreement_hash);
    uint8_t head[GT_SCKPT_LLMC_HEADER_BYTES];
    gt_sckpt_llmc_header(head, &x->model);
    inproc_source is = {.dev = dev, .head = head, .head_len = sizeof head,
                        .bufs = {x->params}, .nbufs = 1, .each = x->params_bytes};
    gt_seal_source src = {.len = sizeof head + x->params_bytes, .read = inproc_read, .ctx = &is};
    gt_seal_sink sink = gt_seal_buf_sink(sealed);
    gt_err err = gt_agreement_recipients(local->agreement, r, &p.recipient_count);
    if (gt_is_ok(err)) {
        err = gt_buf_reserve(sealed, (size_t)(src.len + GT_SCKPT_MAX_HEADER_BYTES + 80));
    }
    if (gt_is_ok(err)) {
        err = gt_sckpt_seal_to(&p, &src, &sink, NULL);
    }
    if (!gt_is_ok(err)) {
        sealed->len = 0;
    }
    free(r);
    return err;
}

gt_err gt_travel_export_signer(gt_device *dev, const gt_export_local *local,
                               uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    if (!in_process(dev)) {
        return gt_device_export_signer(dev, pub);
    }
    GT_ENSURE(local != NULL && local->signing_secret != NULL, GT_E_ARG,
              "in-process export needs the signing key");
    return gt_ed25519_public(pub, local->signing_secret);
}

static gt_resume_loader loader_from_sim(const gt_sim_loader *l)
{
    return (gt_resume_loader){.epoch = l->epoch, .shard = l->shard, .sample = l->sample,
                              .sample_tokens = l->sample_tokens, .seed = l->seed,
                              .shuffle = l->shuffle};
}

static gt_sim_loader loader_to_sim(const gt_resume_loader *l)
{
    return (gt_sim_loader){.epoch = l->epoch, .shard = l->shard, .sample = l->sample,
                           .sample_tokens = l->sample_tokens, .seed = l->seed,
                           .shuffle = l->shuffle};
}

// The header's labels: the union of what the device says params, m and v carry.
static gt_err labels_of(gt_device *dev, const gt_dbuf *bufs, size_t n, gt_resume_header *h)
{
    h->label_count = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ids[GT_RESUME_MAX_LABELS][GT_LABEL_ID_BYTES];
        size_t count = 0;
        GT_TRY(gt_device_label_get(dev, bufs[i], &count, ids, GT_RESUME_MAX_LABELS));
        GT_ENSURE(count <= GT_RESUME_MAX_LABELS, GT_E_LIMIT, "resume state: %zu labels (at "
                  "most %d)", count, GT_RESUME_MAX_LABELS);
        for (size_t k = 0; k < count; k++) {
            bool seen = false;
            for (uint32_t j = 0; j < h->label_count && !seen; j++) {
                seen = memcmp(h->labels[j], ids[k], GT_RESUME_LABEL_BYTES) == 0;
            }
            GT_ENSURE(seen || h->label_count < GT_RESUME_MAX_LABELS, GT_E_LIMIT,
                      "resume state: more than %d labels", GT_RESUME_MAX_LABELS);
            if (!seen) {
                memcpy(h->labels[h->label_count++], ids[k], GT_RESUME_LABEL_BYTES);
            }
        }
    }
    return GT_OK;
}

gt_err gt_travel_export_resume(gt_device *dev, const gt_export_model *x,
                               const gt_export_local *local, gt_buf *state)
{
    state->len = 0;
    const gt_dbuf bufs[3] = {x->params, x->m, x->v};
    if (!in_process(dev)) {
        uint32_t c[6];
        config_of(&x->model, c);
        gt_sim_loader pos = loader_to_sim(&x->loader);
        return gt_device_export_resume(dev, bufs, x->params_bytes, x->step, &pos, c, state);
    }
    GT_TRY(local_check(dev, local, true));
    const bool moments = x->m != 0 && x->v != 0;
    gt_resume_header *h = calloc(1, sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "out of memory");
    memcpy(h->device_id, local->resume->id, sizeof h->device_id);
    memcpy(h->agreement_hash, local->agreement->hash, sizeof h->agreement_hash);
    h->step = x->step;
    h->loader = x->loader;
    h->model = x->model;
    h->params_bytes = x->params_bytes;
    h->m_bytes = h->v_bytes = moments ? x->params_bytes : 0;
    inproc_source is = {.dev = dev, .bufs = {x->params, x->m, x->v}, .nbufs = moments ? 3 : 1,
                        .each = x->params_bytes};
    gt_seal_source src = {.len = x->params_bytes * is.nbufs, .read = inproc_read, .ctx = &is};
    gt_err err = labels_of(dev, bufs, is.nbufs, h);
    if (gt_is_ok(err)) {
        err = gt_resume_seal(h, local->resume->secret, &src, state);
    }
    free(h);
    return err;
}

// Writes the opened body into x's buffers and labels them as the authenticated header says.
static gt_err restore_local(gt_device *dev, const gt_resume_header *h, const gt_buf *body,
                            const gt_export_model *x)
{
    const gt_dbuf bufs[3] = {x->params, x->m, x->v};
    const bool moments = h->m_bytes != 0;
    GT_ENSURE(h->params_bytes == x->params_bytes, GT_E_FORMAT,
              "resume state: %llu bytes of parameters, the model has %llu",
              (unsigned long long)h->params_bytes, (unsigned long long)x->params_bytes);
    GT_ENSURE(!moments || (x->m != 0 && x->v != 0), GT_E_ARG,
              "resume state has optimizer moments: allocate m and v first");
    for (int i = 0; i < 3; i++) {  // every size first: a refusal writes nothing
        uint64_t have = 0;
        if (bufs[i] != 0) {
            GT_TRY(gt_device_buf_size(dev, bufs[i], &have));
            GT_ENSURE(have == h->params_bytes, GT_E_ARG, "resume state: buffer %d holds %llu "
                      "bytes, the state %llu", i, (unsigned long long)have,
                      (unsigned long long)h->params_bytes);
        }
    }
    for (int i = 0; i < 3; i++) {
        if (bufs[i] == 0) {
            continue;
        }
        if (i == 0 || moments) {
            GT_TRY(gt_device_copy_in(dev, bufs[i], 0, body->data + (size_t)i * h->params_bytes,
                                     h->params_bytes));
        } else {
            GT_TRY(gt_device_memset(dev, bufs[i], 0, 0, h->params_bytes));
        }
        for (uint32_t k = 0; k < h->label_count; k++) {
            GT_TRY(gt_device_label_add(dev, bufs[i], h->labels[k]));
        }
    }
    return GT_OK;
}

gt_err gt_travel_import_resume(gt_device *dev, gt_span state, gt_export_model *x,
                               const gt_export_local *local)
{
    const gt_dbuf bufs[3] = {x->params, x->m, x->v};
    if (!in_process(dev)) {
        gt_sim_loader pos = {0};
        GT_TRY(gt_device_import_resume(dev, state, bufs, &x->step, &pos));
        x->loader = loader_from_sim(&pos);
        return GT_OK;
    }
    GT_TRY(local_check(dev, local, true));
    gt_resume_header *h = calloc(1, sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "out of memory");
    gt_buf body = {0};
    gt_err err = gt_resume_open(state, local->resume->secret, local->resume->id,
                                local->agreement->hash, h, &body);
    if (gt_is_ok(err)) {
        err = restore_local(dev, h, &body, x);
    }
    if (gt_is_ok(err)) {
        x->step = h->step;
        x->loader = h->loader;
    }
    gt_buf_free(&body);  // wipes the plaintext
    free(h);
    return err;
}
