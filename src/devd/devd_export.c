// devd's device-sealed exports (devproto.h EXPORT_*, IMPORT_RESUME; docs/device-sim.md
// "Exports"): the only way labelled weights and optimizer state leave the emulated device. devd
// builds the plaintext from its own arena, seals it with keys derived from its persistent
// identity (the checkpoint to the declared agreement's recipients and signed with its
// export-signing key, the resume state to itself), and hands back a new unlabelled buffer that
// holds only ciphertext. A resume state comes back the same way: devd opens it, and the labels
// the restored buffers get are the ones the authenticated state names, never the request's.
#include "devd_export.h"

#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>

#define PURPOSE_SIGNING "export signing v1"
#define PURPOSE_RESUME "resume v1"

static gt_err identity_of(const devd_export_env *env, const char *what)
{
    GT_ENSURE(env->identity != NULL, GT_E_UNSUPPORTED,
              "device: %s needs devd's own identity (this devd runs with a custom evidence "
              "hook)", what);
    return GT_OK;
}

// The session must have declared outputs allowing this export (device.h declared outputs).
static gt_err allowed(const devd_export_env *env, bool resume, const char *what)
{
    GT_TRY(identity_of(env, what));
    GT_ENSURE(env->rules != NULL && env->declared != NULL, GT_E_POLICY,
              "device: %s refused: this session declared no outputs", what);
    GT_ENSURE(resume ? env->rules->resume : env->rules->checkpoint, GT_E_POLICY,
              "device: %s refused: agreement '%s' does not declare a %s output", what,
              env->declared->name, resume ? "resume" : "checkpoint");
    return GT_OK;
}

// Model state is computed (flags 0); a NO_READBACK buffer holds what a holder loaded as it came:
// never sealed out as if it were weights, whoever the recipients are.
static gt_err model_state(const gt_buftab_entry *e, uint64_t h, const char *what)
{
    GT_ENSURE(!(e->flags & GT_DBUF_NO_READBACK), GT_E_POLICY,
              "device: %s refused: buffer 0x%llx holds a holder's data as loaded (NO_READBACK), "
              "not model state", what, (unsigned long long)h);
    return GT_OK;
}

static gt_sckpt_model model_of(const uint32_t c[6])
{
    return (gt_sckpt_model){.max_seq_len = c[0], .vocab_size = c[1], .num_layers = c[2],
                            .num_heads = c[3], .channels = c[4], .padded_vocab_size = c[5]};
}

// Buffer h's offset in the arena, looked up again.
static gt_err buf_offset(const devd_export_env *env, uint64_t h, uint64_t *at)
{
    gt_buftab_entry *e = NULL;
    GT_TRY(env->access(env->ctx, h, 0, 0, "import_resume", &e));
    *at = e->at.offset;
    return GT_OK;
}

// The sealed bytes into a new unlabelled buffer of the session: what the client may copy out.
static gt_err hand_over(const devd_export_env *env, const gt_buf *sealed, gt_sim_msg *rep)
{
    uint64_t h = 0;
    gt_buftab_entry *e = NULL;
    GT_TRY(env->alloc(env->ctx, sealed->len, &h));
    gt_err err = env->access(env->ctx, h, 0, sealed->len, "export", &e);
    if (!gt_is_ok(err)) {
        gt_err f = env->free(env->ctx, h);
        (void)f;  // the allocation just made: freeing it cannot fail in a way that matters
        return err;
    }
    err = env->write(env->ctx, e->at.offset, sealed->data, sealed->len);
    if (!gt_is_ok(err)) {
        gt_err f = env->free(env->ctx, h);
        (void)f;
        return err;
    }
    rep->type = GT_SIM_REP_EXPORTED;
    rep->handle = h;
    rep->len = sealed->len;
    return GT_OK;
}

// What a seal reads, in order: parts of the arena (through env->read, so a paged buffer comes
// in a page at a time) or of memory (mem != NULL: a header). Offsets, not entry pointers: entries
// move when the table grows.
typedef struct {
    const uint8_t *mem;
    uint64_t at, len;
} export_part;

typedef struct {
    const devd_export_env *env;
    export_part parts[3];
    size_t count, i;
    uint64_t off;  // within parts[i]
} export_source;

static gt_err export_source_read(void *ctx, uint8_t *out, size_t n)
{
    export_source *s = ctx;
    for (size_t done = 0; done < n;) {
        GT_ENSURE(s->i < s->count, GT_E_TRUNCATED, "device: the state ends %zu bytes early",
                  n - done);
        const export_part *p = &s->parts[s->i];
        uint64_t k = p->len - s->off < n - done ? p->len - s->off : n - done;
        if (p->mem != NULL) {
            memcpy(out + done, p->mem + s->off, (size_t)k);
        } else {
            GT_TRY(s->env->read(s->env->ctx, p->at + s->off, out + done, k));
        }
        done += (size_t)k;
        s->off += k;
        if (s->off == p->len) {
            s->i++;
            s->off = 0;
        }
    }
    return GT_OK;
}

static gt_seal_source export_source_of(export_source *s)
{
    uint64_t len = 0;
    for (size_t i = 0; i < s->count; i++) {
        len += s->parts[i].len;
    }
    return (gt_seal_source){.len = len, .read = export_source_read, .ctx = s};
}

static gt_err export_checkpoint(const devd_export_env *env, const gt_sim_msg *req,
                                gt_sim_msg *rep)
{
    GT_TRY(allowed(env, false, "export_checkpoint"));
    gt_buftab_entry *e = NULL;
    GT_TRY(env->access(env->ctx, req->handle, req->offset, req->len, "export_checkpoint", &e));
    GT_TRY(model_state(e, req->handle, "export_checkpoint"));
    GT_ENSURE(req->len > 0 && req->len % 4 == 0, GT_E_ARG,
              "device: export_checkpoint of %llu bytes (whole fp32 parameters)",
              (unsigned long long)req->len);
    gt_sckpt_recipient *r = calloc(GT_SCKPT_MAX_RECIPIENTS, sizeof *r);
    GT_ENSURE(r != NULL, GT_E_NOMEM, "devd: out of memory");
    uint8_t secret[32] = {0}, head[GT_SCKPT_LLMC_HEADER_BYTES];
    gt_sckpt_seal_params p = {.step = req->step, .model = model_of(req->config),
                              .recipients = r, .signing_secret = secret};
    memcpy(p.agreement_hash, env->declared->hash, sizeof p.agreement_hash);
    gt_sckpt_llmc_header(head, &p.model);
    export_source es = {.env = env, .count = 2,
                        .parts = {{head, 0, sizeof head}, {NULL, e->at.offset + req->offset,
                                                           req->len}}};
    gt_seal_source src = export_source_of(&es);
    gt_buf sealed = {0};
    gt_seal_sink sink = gt_seal_buf_sink(&sealed);
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_agreement_recipients(env->declared, r, &p.recipient_count), out);
    GT_TRY_GOTO(err, gt_sim_identity_derive(env->identity, PURPOSE_SIGNING, secret), out);
    GT_TRY_GOTO(err, gt_buf_reserve(&sealed, (size_t)(src.len + GT_SCKPT_MAX_HEADER_BYTES + 80)),
                out);
    GT_TRY_GOTO(err, gt_sckpt_seal_to(&p, &src, &sink, NULL), out);
    GT_TRY_GOTO(err, hand_over(env, &sealed, rep), out);
out:
    gt_secure_zero(secret, sizeof secret);
    gt_buf_free_nowipe(&sealed);  // ciphertext
    free(r);
    return gt_err_wrap(err, "device: export_checkpoint");
}

static gt_err export_signer(const devd_export_env *env, gt_sim_msg *rep)
{
    GT_TRY(identity_of(env, "export_signer"));
    uint8_t secret[32] = {0};
    gt_err err = gt_sim_identity_derive(env->identity, PURPOSE_SIGNING, secret);
    if (gt_is_ok(err)) {
        err = gt_ed25519_public(rep->export_key, secret);
    }
    gt_secure_zero(secret, sizeof secret);
    if (gt_is_ok(err)) {
        rep->type = GT_SIM_REP_SIGNER;
    }
    return err;
}

// params, m, v of the request: params always, m and v both or neither, distinct, len bytes
// each. *n: how many; the entries in e.
static gt_err state_buffers(const devd_export_env *env, const uint64_t bufs[3], uint64_t len,
                            const char *what, gt_buftab_entry *e[3], size_t *n)
{
    GT_ENSURE(bufs[0] != 0 && (bufs[1] == 0) == (bufs[2] == 0), GT_E_ARG,
              "device: %s needs params, and m and v both or neither", what);
    *n = bufs[1] != 0 ? 3 : 1;
    GT_ENSURE(*n == 1 || (bufs[0] != bufs[1] && bufs[0] != bufs[2] && bufs[1] != bufs[2]),
              GT_E_ARG, "device: %s: params, m and v must be three buffers", what);
    for (size_t i = 0; i < *n; i++) {
        GT_TRY(env->access(env->ctx, bufs[i], 0, len, what, &e[i]));
        GT_ENSURE(e[i]->bytes == len, GT_E_ARG, "device: %s: buffer %zu holds %llu bytes, the "
                  "state %llu", what, i, (unsigned long long)e[i]->bytes,
                  (unsigned long long)len);
        GT_TRY(model_state(e[i], bufs[i], what));
    }
    return GT_OK;
}

// The state's header from the request and the device's own table (labels, identity).
static gt_err resume_header(const devd_export_env *env, const gt_sim_msg *req,
                            gt_buftab_entry *const e[3], size_t n, gt_resume_header *h)
{
    memset(h, 0, sizeof *h);
    GT_TRY(gt_sim_identity_id(env->identity, h->device_id));
    memcpy(h->agreement_hash, env->agreement_hash, sizeof h->agreement_hash);
    h->step = req->step;
    h->loader = (gt_resume_loader){.epoch = req->loader.epoch, .shard = req->loader.shard,
                                   .sample = req->loader.sample,
                                   .sample_tokens = req->loader.sample_tokens,
                                   .seed = req->loader.seed, .shuffle = req->loader.shuffle};
    h->model = model_of(req->config);
    h->params_bytes = req->len;
    h->m_bytes = h->v_bytes = n == 3 ? req->len : 0;
    gt_label all = 0;
    for (size_t i = 0; i < n; i++) {
        all |= e[i]->label;
    }
    h->label_count = (uint32_t)gt_buftab_label_ids(env->tab, all, h->labels,
                                                   GT_RESUME_MAX_LABELS);
    return GT_OK;
}

static gt_err export_resume(const devd_export_env *env, const gt_sim_msg *req, gt_sim_msg *rep)
{
    GT_TRY(allowed(env, true, "export_resume"));
    gt_buftab_entry *e[3] = {0};
    size_t n = 0;
    GT_TRY(state_buffers(env, req->bufs, req->len, "export_resume", e, &n));
    gt_resume_header *h = malloc(sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "devd: out of memory");
    uint8_t secret[32] = {0};
    export_source es = {.env = env, .count = n};
    for (size_t i = 0; i < n; i++) {
        es.parts[i] = (export_part){NULL, e[i]->at.offset, req->len};
    }
    gt_seal_source src = export_source_of(&es);
    gt_buf state = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, resume_header(env, req, e, n, h), out);
    GT_TRY_GOTO(err, gt_sim_identity_derive(env->identity, PURPOSE_RESUME, secret), out);
    GT_TRY_GOTO(err, gt_resume_seal(h, secret, &src, &state), out);
    GT_TRY_GOTO(err, hand_over(env, &state, rep), out);
out:
    gt_secure_zero(secret, sizeof secret);
    gt_buf_free_nowipe(&state);  // ciphertext
    free(h);
    return gt_err_wrap(err, "device: export_resume");
}

// Where the opened body goes: params | m | v, each into its buffer at these arena offsets.
typedef struct {
    const devd_export_env *env;
    uint64_t at[3], part;  // part: params_bytes
} restore_sink;

static gt_err restore_put(void *ctx, uint64_t at, const uint8_t *data, size_t n)
{
    restore_sink *r = ctx;
    for (size_t done = 0; done < n;) {
        uint64_t o = at + done, i = o / r->part, k = r->part - o % r->part;
        k = k < n - done ? k : n - done;
        GT_TRY(r->env->write(r->env->ctx, r->at[i] + o % r->part, data + done, k));
        done += (size_t)k;
    }
    return GT_OK;
}

// The verified state into the destination buffers: labels first (they only grow, so a failure
// leaves them more restrictive, never less), then the bytes, decrypted a second time straight
// into the buffers (a page at a time when paging: no whole plaintext copy); moments the state
// lacks are zeroed.
static gt_err restore(const devd_export_env *env, const gt_sim_msg *req,
                      const gt_resume_header *h, gt_span file, const uint8_t *secret)
{
    gt_buftab_entry *e[3] = {0};
    size_t n = 0;
    GT_TRY(state_buffers(env, req->bufs, h->params_bytes, "import_resume", e, &n));
    GT_ENSURE(h->m_bytes == 0 || n == 3, GT_E_ARG,
              "device: import_resume: the state has optimizer moments: name m and v buffers");
    for (size_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < h->label_count; k++) {
            GT_TRY(gt_buftab_label_add(env->tab, req->bufs[i], h->labels[k]));
        }
    }
    restore_sink r = {.env = env, .part = h->params_bytes};
    for (size_t i = 0; i < n; i++) {
        GT_TRY(buf_offset(env, req->bufs[i], &r.at[i]));  // entry pointers are not kept
    }
    GT_TRY(gt_resume_decrypt_to(file, secret, h, restore_put, &r));
    for (size_t i = 1; i < n && h->m_bytes == 0; i++) {
        GT_TRY(env->fill(env->ctx, r.at[i], 0, h->params_bytes));
    }
    return GT_OK;
}

static gt_err import_resume(const devd_export_env *env, const gt_sim_msg *req, gt_sim_msg *rep)
{
    GT_TRY(allowed(env, true, "import_resume"));
    gt_buftab_entry *se = NULL;
    GT_TRY(env->access(env->ctx, req->handle, 0, req->len, "import_resume", &se));
    gt_resume_header *h = malloc(sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "devd: out of memory");
    uint8_t secret[32] = {0}, id[GT_RESUME_DEVICE_ID_BYTES];
    gt_buf file = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_sim_identity_id(env->identity, id), out);
    GT_TRY_GOTO(err, gt_sim_identity_derive(env->identity, PURPOSE_RESUME, secret), out);
    // The state (ciphertext) copied out of the arena into devd's own memory, a page at a time
    // when paging, where it cannot change between the pass that checks it and the one that
    // decrypts it into the buffers.
    GT_TRY_GOTO(err, gt_buf_reserve(&file, (size_t)req->len), out);
    GT_TRY_GOTO(err, env->read(env->ctx, se->at.offset, file.data, req->len), out);
    file.len = (size_t)req->len;
    GT_TRY_GOTO(err, gt_resume_verify(gt_buf_span(&file), secret, id, env->agreement_hash, h),
                out);
    GT_TRY_GOTO(err, restore(env, req, h, gt_buf_span(&file), secret), out);
    rep->type = GT_SIM_REP_RESUMED;
    rep->step = h->step;
    rep->loader = (gt_sim_loader){.epoch = h->loader.epoch, .shard = h->loader.shard,
                                  .sample = h->loader.sample,
                                  .sample_tokens = h->loader.sample_tokens,
                                  .seed = h->loader.seed, .shuffle = h->loader.shuffle};
out:
    gt_secure_zero(secret, sizeof secret);
    gt_buf_free_nowipe(&file);  // ciphertext
    free(h);
    return gt_err_wrap(err, "device: import_resume");
}

gt_err devd_export_serve(const devd_export_env *env, const gt_sim_msg *req, gt_sim_msg *rep)
{
    memset(rep, 0, sizeof *rep);
    switch (req->type) {
    case GT_SIM_REQ_EXPORT_CHECKPOINT:
        return export_checkpoint(env, req, rep);
    case GT_SIM_REQ_EXPORT_SIGNER:
        return export_signer(env, rep);
    case GT_SIM_REQ_EXPORT_RESUME:
        return export_resume(env, req, rep);
    case GT_SIM_REQ_IMPORT_RESUME:
        return import_resume(env, req, rep);
    default:
        return gt_errf(GT_E_ARG, "devd: %s is not an export", gt_sim_msg_name(req->type));
    }
}
