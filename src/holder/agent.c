// The holder agent: appraises trainers (through the attested channel), decides what to release,
// serves chunks, and records every decision in its ledger. Protocol in holder.h.
#include <gputravel/holder.h>

#include "holder_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TRAINER_NAME_BYTES sizeof(((gt_hp_hello *)0)->trainer)  // NUL included

typedef struct holder_conn_slot conn_slot;

struct gt_holder_agent {
    pthread_mutex_t lock;  // guards releases, uses, tokens_released, stats, conns, unauth_*
    conn_slot *conns;      // every connection thread not yet joined (serving loop)
    double unauth_log_at;  // the last unauthenticated-failure log line
    unsigned long long unauth_quiet;  // failures since, not logged
    gt_holder_agent_config cfg;
    const gt_agreement_holder *me;
    gt_manifest manifest;
    gt_buf manifest_bytes;
    uint32_t *releases;  // per chunk: times sent
    uint32_t *uses;      // per chunk: uses the trainer confirmed (USED)
    uint64_t tokens_released;  // budget: tokens of every release, resends included
    gt_holder_agent_stats stats;
    // The attested devd session kept after the last trip (RETURN_STAY), for the next trip to
    // the same devd: no new handshake. Taken out while a trip uses it (guarded by lock).
    gt_device *kept;
    char kept_address[GT_DEVICE_TRIP_ADDRESS_MAX];
    double kept_since;  // its handshake
    // Co-holder witnesses (travel.h): per agreement holder, the longest head of its ledger this
    // holder has witnessed (entries 0: none), restored from "witness" entries at create.
    struct {
        uint64_t entries;
        uint8_t head[GT_SHA256_BYTES];
    } witnessed[GT_AGREEMENT_MAX_HOLDERS];
    // Set once co-holders' witnesses showed this holder's ledger was rolled back: it then serves
    // no one (until an operator restores the ledger they witnessed).
    bool rolled_back;
    char rolled_back_why[256];
    uint64_t sessions_other_agreements;  // ledger replay: sessions under another agreement
    bool releases_any;                   // ledger replay: some chunk of this dataset was sent
};

// The agreement's index of the holder with identity key k, or -1.
static int holder_index(const gt_agreement *ag, const uint8_t k[GT_ED25519_PUBLIC_BYTES])
{
    for (uint32_t i = 0; i < ag->holder_count; i++) {
        if (gt_ct_equal(ag->holders[i].identity_key, k, GT_ED25519_PUBLIC_BYTES)) {
            return (int)i;
        }
    }
    return -1;
}

// Ledger replay: a "witness" entry is a co-holder's head this holder has seen.
static void count_witness(gt_holder_agent *a, const cJSON *detail)
{
    uint8_t k[GT_ED25519_PUBLIC_BYTES], head[GT_SHA256_BYTES];
    uint64_t entries = 0;
    if (!gt_is_ok(gt_json_get_hex(detail, "holder", k, sizeof k)) ||
        !gt_is_ok(gt_json_get_hex(detail, "head", head, sizeof head)) ||
        !gt_is_ok(gt_json_get_u64(detail, "entries", &entries))) {
        return;
    }
    int i = holder_index(a->cfg.agreement, k);
    if (i >= 0 && entries > a->witnessed[i].entries) {
        a->witnessed[i].entries = entries;
        memcpy(a->witnessed[i].head, head, sizeof head);
    }
}

static gt_err trainer_admit(gt_holder_agent *a, conn_slot *self, const char *trainer);

#define KEPT_SESSION_MAX_S 300.0  // re-attest the device at least this often

static uint64_t chunk_tokens(const gt_manifest *m, uint32_t c)
{
    return m->chunks[c].plaintext_len / 2;  // uint16 tokens
}

// Ledger replay: every earlier grant of this dataset counts against uses and budget.
static void count_grant(void *ctx, const char *kind, const cJSON *detail)
{
    gt_holder_agent *a = ctx;
    bool grant = kind != NULL && strcmp(kind, "grant") == 0;
    bool use = kind != NULL && strcmp(kind, "use") == 0;
    if (kind != NULL && strcmp(kind, "witness") == 0) {
        count_witness(a, detail);
        return;
    }
    if (kind != NULL && strcmp(kind, "session") == 0) {
        uint8_t h[GT_SHA256_BYTES];
        if (gt_is_ok(gt_json_get_hex(detail, "agreement", h, sizeof h)) &&
            !gt_ct_equal(h, a->cfg.agreement->hash, sizeof h)) {
            a->sessions_other_agreements++;
        }
        return;
    }
    if (!grant && !use) {
        return;
    }
    char id_hex[2 * GT_DATASET_ID_BYTES + 1];
    gt_hex_encode(id_hex, sizeof id_hex, a->manifest.dataset_id, GT_DATASET_ID_BYTES);
    const char *ds = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "dataset"));
    uint64_t chunk = 0, tokens = 0;
    if (ds == NULL || strcmp(ds, id_hex) != 0 ||
        !gt_is_ok(gt_json_get_u64(detail, "chunk", &chunk)) ||
        !gt_is_ok(gt_json_get_u64(detail, "tokens", &tokens)) ||
        chunk >= a->manifest.chunk_count) {
        return;
    }
    if (use) {
        a->uses[chunk]++;
        return;
    }
    // Every release costs budget, a resend of an unconfirmed one too: the bytes left either way.
    a->tokens_released += tokens;
    a->releases[chunk]++;
    a->releases_any = true;
}

// Enclave mode: the agreement's terms for this holder and the counts the ledger replay
// restored, fixed in the holder enclave once (it refuses new ones for the rest of its run).
static gt_err enclave_terms(gt_holder_agent *a)
{
    const uint32_t n = a->manifest.chunk_count;
    uint64_t *tokens = calloc(n ? n : 1, sizeof *tokens);
    GT_ENSURE(tokens != NULL, GT_E_NOMEM, "holder: out of memory");
    for (uint32_t c = 0; c < n; c++) {
        tokens[c] = chunk_tokens(&a->manifest, c);
    }
    gt_holder_enclave_terms t = {.max_uses_per_chunk = a->me->max_uses_per_chunk,
                                 .token_budget = a->me->token_budget, .chunk_count = n,
                                 .tokens = tokens, .releases = a->releases, .uses = a->uses,
                                 .tokens_released = a->tokens_released};
    memcpy(t.agreement_hash, a->cfg.agreement->hash, sizeof t.agreement_hash);
    memcpy(t.dataset_id, a->manifest.dataset_id, sizeof t.dataset_id);
    gt_err err = gt_holder_enclave_set_terms(a->cfg.enclave, &t);
    free(tokens);
    return err;
}

// Enclave mode: the holder enclave's identity goes into the ledger at every start ("enclave"
// entry), so the ledger says which enclave made the decisions that follow.
static gt_err ledger_enclave(gt_holder_agent *a)
{
    if (a->cfg.ledger == NULL) {
        return GT_OK;
    }
    const gt_sgx_identity *id = gt_holder_enclave_identity(a->cfg.enclave);
    char mre[65], mrs[65];
    gt_hex_encode(mre, sizeof mre, id->mrenclave, 32);
    gt_hex_encode(mrs, sizeof mrs, id->mrsigner, 32);
    cJSON *d = cJSON_CreateObject();
    GT_ENSURE(d != NULL, GT_E_NOMEM, "holder: out of memory");
    cJSON_AddStringToObject(d, "mrenclave", mre);
    cJSON_AddStringToObject(d, "mrsigner", mrs);
    cJSON_AddNumberToObject(d, "isvprodid", id->isvprodid);
    cJSON_AddNumberToObject(d, "isvsvn", id->isvsvn);
    cJSON_AddStringToObject(d, "security", "insecure-simulation");
    gt_err err = gt_ledger_append(a->cfg.ledger, "enclave", d);
    cJSON_Delete(d);
    return gt_err_wrap(err, "ledger: the holder enclave's identity");
}

gt_err gt_holder_agent_create(gt_holder_agent **out, const gt_holder_agent_config *cfg)
{
    *out = NULL;
    gt_holder_agent *a = calloc(1, sizeof *a);
    GT_ENSURE(a != NULL, GT_E_NOMEM, "holder: out of memory");
    pthread_mutex_init(&a->lock, NULL);
    a->cfg = *cfg;
    gt_err err = GT_OK;
    a->me = gt_agreement_find_holder(cfg->agreement, cfg->name);
    GT_ENSURE_GOTO(err, a->me != NULL, fail, GT_E_ARG, "holder '%s' is not in the agreement",
                   cfg->name);
    GT_ENSURE_GOTO(err, gt_ct_equal(a->me->identity_key, cfg->keys->holder_pub,
                                    GT_ED25519_PUBLIC_BYTES),
                   fail, GT_E_POLICY,
                   "the agreement names another identity key for holder '%s' than this key "
                   "folder's", cfg->name);
    char path[4200];
    GT_TRY_GOTO(err, gt_path_join(path, sizeof path, cfg->dataset_dir, GT_MANIFEST_FILE), fail);
    GT_TRY_GOTO(err, gt_file_read_all(path, GT_HP_MAX_MANIFEST, &a->manifest_bytes), fail);
    // Keyless check of everything on disk before serving any of it.
    GT_TRY_GOTO(err, gt_dataset_verify(cfg->dataset_dir, cfg->keys->holder_pub, false,
                                       &a->manifest),
                fail);
    GT_ENSURE_GOTO(err, gt_ct_equal(a->manifest.dataset_id, a->me->dataset_id,
                                    GT_DATASET_ID_BYTES),
                   fail, GT_E_POLICY, "dataset %s is not the one the agreement names for '%s'",
                   cfg->dataset_dir, cfg->name);
    a->releases = calloc(a->manifest.chunk_count ? a->manifest.chunk_count : 1,
                         sizeof *a->releases);
    a->uses = calloc(a->manifest.chunk_count ? a->manifest.chunk_count : 1, sizeof *a->uses);
    GT_ENSURE_GOTO(err, a->releases != NULL && a->uses != NULL, fail, GT_E_NOMEM,
                   "holder: out of memory");
    if (cfg->ledger_path != NULL) {
        GT_TRY_GOTO(err, gt_ledger_replay(cfg->ledger_path, cfg->keys->holder_pub, count_grant,
                                          a),
                    fail);
    }
    uint32_t too_big = 0;
    for (uint32_t c = 0; c < a->manifest.chunk_count; c++) {
        too_big += chunk_tokens(&a->manifest, c) > a->me->token_budget;
    }
    if (too_big > 0) {
        gt_log_warn("holder %s: token_budget %llu is smaller than %u of the %u chunks (the budget "
                    "is a hard cap: such a chunk is never released)", cfg->name,
                    (unsigned long long)a->me->token_budget, too_big, a->manifest.chunk_count);
    }
    if (cfg->enclave != NULL) {
        GT_TRY_GOTO(err, enclave_terms(a), fail);
        GT_TRY_GOTO(err, ledger_enclave(a), fail);
    }
    a->stats.sessions_other_agreements = a->sessions_other_agreements;
    if (a->sessions_other_agreements > 0 && (a->tokens_released > 0 || a->releases_any)) {
        // Uses and budget are the dataset's, over its whole ledger: say so once, at start.
        gt_log_warn("holder %s: this ledger holds %llu session(s) under other agreements; what "
                    "was released to them counts against this agreement's token_budget and "
                    "max_uses_per_chunk too (%llu tokens released so far; a fresh budget needs "
                    "a new ledger, --ledger)", cfg->name,
                    (unsigned long long)a->sessions_other_agreements,
                    (unsigned long long)a->tokens_released);
    }
    *out = a;
    return GT_OK;
fail:
    gt_holder_agent_free(a);
    return err;
}

void gt_holder_agent_free(gt_holder_agent *a)
{
    if (a == NULL) {
        return;
    }
    gt_manifest_free(&a->manifest);
    gt_buf_free_nowipe(&a->manifest_bytes);
    free(a->releases);
    free(a->uses);
    gt_device_close(a->kept);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void gt_holder_agent_get_stats(gt_holder_agent *a, gt_holder_agent_stats *out)
{
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
}

// What one ledger entry says besides its kind (docs/ledger.md).
typedef struct {
    const char *trainer;  // NULL: "(unidentified)"
    int64_t chunk;        // -1: none
    const char *mode;     // the transfer mode asked for or used (gt_transfer_mode_name), or NULL
    const char *device;   // a trip's device: "devd", "cuda" or "host" (NULL: not a trip)
    uint64_t tokens, bytes;
    uint64_t claimed;     // a use: the tokens the trainer claimed (recorded when not `tokens`)
    const char *reason;   // refusals and failures
} ledger_detail;

// Appends one decision. A confirmed use is written lazily (fsynced with the next decision: the
// release cap, counted on durable grants, holds without it); everything else is durable before
// this returns. Failures are logged; a grant's caller must refuse on one (nothing is released
// that the ledger does not hold).
static gt_err ledger_note(gt_holder_agent *a, const char *kind, const ledger_detail *n)
{
    if (a->cfg.ledger == NULL) {
        return GT_OK;
    }
    cJSON *d = cJSON_CreateObject();
    char id_hex[2 * GT_DATASET_ID_BYTES + 1];
    gt_hex_encode(id_hex, sizeof id_hex, a->manifest.dataset_id, GT_DATASET_ID_BYTES);
    cJSON_AddStringToObject(d, "dataset", id_hex);
    cJSON_AddStringToObject(d, "trainer", n->trainer ? n->trainer : "(unidentified)");
    if (n->chunk >= 0) {
        cJSON_AddNumberToObject(d, "chunk", (double)n->chunk);
    }
    if (n->mode != NULL) {
        cJSON_AddStringToObject(d, "mode", n->mode);
    }
    if (n->device != NULL) {
        cJSON_AddStringToObject(d, "device", n->device);
    }
    if (strcmp(kind, "grant") == 0 || strcmp(kind, "use") == 0) {
        cJSON_AddNumberToObject(d, "tokens", (double)n->tokens);
    }
    if (strcmp(kind, "grant") == 0) {
        cJSON_AddNumberToObject(d, "bytes", (double)n->bytes);
    }
    if (strcmp(kind, "use") == 0 && n->claimed != n->tokens) {
        cJSON_AddNumberToObject(d, "claimed", (double)n->claimed);
    }
    if (n->reason != NULL) {
        cJSON_AddStringToObject(d, "reason", n->reason);
    }
    gt_err err = strcmp(kind, "use") == 0 ? gt_ledger_append_lazy(a->cfg.ledger, kind, d)
                                           : gt_ledger_append(a->cfg.ledger, kind, d);
    cJSON_Delete(d);
    if (!gt_is_ok(err)) {
        gt_log_error("holder %s: ledger: %s", a->me->name, err.msg);
    }
    return err;
}

// The trainer this connection serves, as its HELLO presented it inside the attested channel:
// its name and the key its sealed checkpoint will be signed with (holder.h, HELLO). Unlike the
// other notes this entry is required: it is what a recipient checks a checkpoint's signer
// against, so a holder that cannot write it serves nothing.
static gt_err ledger_session(gt_holder_agent *a, const gt_hp_hello *hello, const char *appraisal)
{
    if (a->cfg.ledger == NULL) {
        return GT_OK;
    }
    cJSON *d = cJSON_CreateObject();
    GT_ENSURE(d != NULL, GT_E_NOMEM, "out of memory");
    char id_hex[2 * GT_DATASET_ID_BYTES + 1], key_hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    char agreement_hex[2 * sizeof hello->agreement + 1];
    gt_hex_encode(id_hex, sizeof id_hex, a->manifest.dataset_id, GT_DATASET_ID_BYTES);
    gt_hex_encode(key_hex, sizeof key_hex, hello->signing_key, sizeof hello->signing_key);
    gt_hex_encode(agreement_hex, sizeof agreement_hex, hello->agreement,
                  sizeof hello->agreement);
    cJSON_AddStringToObject(d, "dataset", id_hex);
    cJSON_AddStringToObject(d, "trainer", hello->trainer);
    cJSON_AddStringToObject(d, "signing_key", key_hex);
    cJSON_AddStringToObject(d, "agreement", agreement_hex);
    if (appraisal != NULL && appraisal[0] != '\0') {
        cJSON_AddStringToObject(d, "appraisal", appraisal);
    }
    gt_err err = gt_ledger_append(a->cfg.ledger, "session", d);
    cJSON_Delete(d);
    return gt_err_wrap(err, "ledger: the trainer's session");
}

static gt_err send_refuse(gt_channel *ch, gt_err why)
{
    uint8_t body[4 + sizeof why.msg];
    gt_writer w = gt_writer_init_fixed(body, sizeof body);
    GT_TRY(gt_hp_refuse_write(&w, why));
    return gt_channel_send(ch, GT_HP_REFUSE, w.data, w.len);
}

// Decides a FETCH under the lock; on a grant the release is counted before any byte leaves.
static gt_err decide(gt_holder_agent *a, uint32_t chunk, uint64_t *tokens)
{
    GT_ENSURE(chunk < a->manifest.chunk_count, GT_E_ARG, "chunk %u does not exist (%u chunks)",
              chunk, a->manifest.chunk_count);
    pthread_mutex_lock(&a->lock);
    gt_err err = GT_OK;
    // A release not yet confirmed as used (the trainer crashed before committing it) may be
    // sent once more to recover, at the budget's cost; beyond that, and beyond max uses, the
    // chunk is refused.
    if (a->uses[chunk] >= a->me->max_uses_per_chunk) {
        err = gt_errf(GT_E_POLICY, "chunk %u already used %u time(s); the agreement allows %u",
                      chunk, a->uses[chunk], a->me->max_uses_per_chunk);
    } else if (a->releases[chunk] >= a->me->max_uses_per_chunk + 1u) {
        // GT_E_RETRY: a refusal of this chunk's resend, not a verdict on the trainer (travel.h).
        err = gt_errf(GT_E_RETRY, "chunk %u already sent %u time(s) without a confirmed use",
                      chunk, a->releases[chunk]);
    } else if (a->tokens_released + chunk_tokens(&a->manifest, chunk) > a->me->token_budget) {
        // A hard cap: a chunk that would cross the budget is refused whole (it is never cut).
        err = gt_errf(GT_E_POLICY, "token budget: releasing chunk %u (%llu tokens) would bring "
                      "the tokens released to %llu, over the agreement's budget of %llu",
                      chunk, (unsigned long long)chunk_tokens(&a->manifest, chunk),
                      (unsigned long long)(a->tokens_released + chunk_tokens(&a->manifest, chunk)),
                      (unsigned long long)a->me->token_budget);
    } else {
        a->tokens_released += chunk_tokens(&a->manifest, chunk);
        a->stats.tokens_released += chunk_tokens(&a->manifest, chunk);
        a->releases[chunk]++;
        a->stats.grants++;
    }
    if (!gt_is_ok(err)) {
        a->stats.refusals++;
    }
    pthread_mutex_unlock(&a->lock);
    *tokens = chunk_tokens(&a->manifest, chunk);
    return err;
}

static gt_err serve_chunk(gt_holder_agent *a, gt_channel *ch, uint32_t chunk, gt_fetch_mode mode,
                          uint64_t *bytes_sent)
{
    char path[4200];
    GT_TRY(gt_chunk_path(path, sizeof path, a->cfg.dataset_dir, chunk));
    gt_buf file = {0};
    gt_buf pt = {0};
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_file_read_all(path, gt_manifest_chunk_file_bytes(&a->manifest, chunk),
                                      &file),
                out);
    GT_TRY_GOTO(err, gt_chunk_key_derive(key, a->cfg.keys->dataset_key, &a->manifest, chunk),
                out);
    if (mode == GT_FETCH_PLAIN) {
        // Decrypt and verify the whole chunk before any plaintext leaves; TLS re-encrypts it.
        size_t len = (size_t)a->manifest.chunks[chunk].plaintext_len;
        GT_TRY_GOTO(err, gt_buf_reserve(&pt, len ? len : 1), out);
        GT_TRY_GOTO(err, gt_chunk_open(pt.data, pt.cap, &pt.len, file.data, file.len,
                                       &a->manifest, chunk, key),
                    out);
        GT_TRY_GOTO(err, gt_channel_send(ch, GT_HP_CHUNK_PLAIN, pt.data, pt.len), out);
        *bytes_sent = pt.len;
    } else {
        // The sealed chunk goes as stored; only its key is released, to this attested peer.
        GT_TRY_GOTO(err, gt_channel_send(ch, GT_HP_CHUNK_SEALED, file.data, file.len), out);
        GT_TRY_GOTO(err, gt_channel_send(ch, GT_HP_CHUNK_KEY, key, sizeof key), out);
        *bytes_sent = file.len;
    }
out:
    gt_secure_zero(key, sizeof key);
    gt_buf_free(&pt);
    gt_buf_free_nowipe(&file);
    return err;
}

// The trainer confirms one committed use of a chunk it was sent.
static gt_err record_use(gt_holder_agent *a, const gt_buf *body, const char *trainer)
{
    gt_hp_used m;
    GT_TRY(gt_hp_used_parse(gt_buf_span(body), &m));
    const uint32_t chunk = m.chunk;
    GT_ENSURE(chunk < a->manifest.chunk_count, GT_E_FORMAT, "used: chunk %u does not exist",
              chunk);
    // The holder counts a use by the chunk it released, whatever the trainer claims.
    const uint64_t tokens = chunk_tokens(&a->manifest, chunk);
    if (m.tokens != tokens) {
        gt_log_warn("holder %s: %s confirmed chunk %u as %llu tokens; it holds %llu, which is "
                    "what is counted", a->me->name, trainer, chunk,
                    (unsigned long long)m.tokens, (unsigned long long)tokens);
    }
    pthread_mutex_lock(&a->lock);
    bool sent = a->releases[chunk] > a->uses[chunk];
    if (sent) {
        a->uses[chunk]++;
    }
    pthread_mutex_unlock(&a->lock);
    GT_ENSURE(sent, GT_E_POLICY, "used: chunk %u was not sent, or its use is already counted",
              chunk);
    if (a->cfg.enclave != NULL) {
        GT_TRY(gt_holder_enclave_used(a->cfg.enclave, chunk));
    }
    ledger_note(a, "use", &(ledger_detail){.trainer = trainer, .chunk = chunk, .tokens = tokens,
                                           .claimed = m.tokens});
    return GT_OK;
}

static void trip_hook(gt_holder_agent *a, const char *stage, uint32_t chunk)
{
    if (a->cfg.trip_hook != NULL) {
        a->cfg.trip_hook(a->cfg.trip_hook_ctx, stage, chunk);
    }
}

// The kept devd session for address, taken out of the agent (NULL: none, or too old: closed).
static gt_device *kept_take(gt_holder_agent *a, const char *address, double *since)
{
    pthread_mutex_lock(&a->lock);
    gt_device *dev = NULL;
    if (a->kept != NULL && strcmp(a->kept_address, address) == 0) {
        dev = a->kept;
        *since = a->kept_since;
        a->kept = NULL;
    }
    pthread_mutex_unlock(&a->lock);
    if (dev != NULL && gt_now_seconds() - *since > KEPT_SESSION_MAX_S) {
        gt_device_close(dev);  // attested too long ago: the next attach appraises the device anew
        dev = NULL;
    }
    return dev;
}

// Keeps a parked session for the next trip (replacing an older one).
static void kept_put(gt_holder_agent *a, gt_device *dev, const char *address, double since)
{
    gt_device *old = NULL;
    pthread_mutex_lock(&a->lock);
    old = a->kept;
    a->kept = dev;
    snprintf(a->kept_address, sizeof a->kept_address, "%s", address);
    a->kept_since = since;
    pthread_mutex_unlock(&a->lock);
    gt_device_close(old);
}

// The device travelled here: attach with the ticket (the handshake appraises the device's
// evidence) and check its measurement is one the agreement accepts, before anything is decided
// or loaded. A session kept from this holder's previous trip to the same devd attaches without
// a new handshake: its evidence and measurement were checked when it was made.
static gt_err travel_attach(gt_holder_agent *a, const uint8_t ticket[32], const char *socket,
                            gt_device **out, double *attested_at,
                            gt_device_trip_carrier **carrier)
{
    // "ipc-cuda:" / "ipc-cpu:": a trip the trainer serves itself (src/holder/trip_carry.c)
    GT_TRY(gt_holder_trip_attach(a->cfg.agreement, ticket, socket, carrier));
    if (*carrier != NULL) {
        trip_hook(a, "attached", UINT32_MAX);
        return GT_OK;
    }
    gt_device *kept = kept_take(a, socket, attested_at);
    if (kept != NULL) {
        gt_err e = gt_device_sim_reattach(kept, ticket);
        if (gt_is_ok(e)) {
            *out = kept;
            trip_hook(a, "attached", UINT32_MAX);
            return GT_OK;
        }
        gt_log_info("holder %s: the kept device session did not reattach (%s); attaching afresh",
                    a->me->name, e.msg);
        gt_device_close(kept);
    }
    gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = socket};
    // devd's address: the evidence must say devd (a trainer's own trip on that socket, in host
    // memory or on its GPU, is refused at the handshake)
    gt_device_sim_options opt = {.timeout_ms = 60000, .expect_memory = GT_SIM_MEMORY_DEVD};
    memcpy(opt.agreement_hash, a->cfg.agreement->hash, sizeof opt.agreement_hash);
    GT_TRY(gt_err_wrap(gt_device_sim_attach(out, &dc, &opt, ticket), "travelling device"));
    *attested_at = gt_now_seconds();
    uint8_t m[GT_MEASUREMENT_BYTES] = {0};
    gt_err err = gt_holder_device_check(a->cfg.agreement, gt_device_sim_measurement(*out, m), m);
    if (!gt_is_ok(err)) {
        gt_device_close(*out);  // attached, never returned: the trip fails, nothing loaded
        *out = NULL;
        return err;
    }
    trip_hook(a, "attached", UINT32_MAX);
    return GT_OK;
}

// Enclave mode: the holder enclave decides and wraps K_chunk to this attested devd session (its
// X25519 key, which devd's appraised evidence binds, and its server hello), for this trip and
// chunk under this agreement; devd unwraps it. This process never has K_chunk.
static gt_err enclave_load(gt_holder_agent *a, gt_device *dev,
                           const uint8_t trip_id[GT_SHA256_BYTES],
                           uint32_t chunk, gt_dbuf buf, int fd, uint64_t file_len,
                           const uint8_t header[GT_CHUNK_HEADER_BYTES])
{
    uint8_t devd_pub[GT_X25519_BYTES], hello_hash[GT_SHA256_BYTES];
    uint8_t wrapped[GT_KEYWRAP_BYTES];
    gt_holder_enclave_appraisal ap = {
        .agreement = {a->cfg.agreement->doc, a->cfg.agreement->doc_len}};
    GT_TRY(gt_device_sim_session_binding(dev, devd_pub, hello_hash));
    GT_TRY(gt_device_sim_session_hellos(dev, &ap.client_hello, &ap.server_hello));
    GT_TRY(gt_holder_enclave_release(a->cfg.enclave, chunk, devd_pub, trip_id, hello_hash, &ap,
                                     wrapped));
    return gt_device_sim_load_sealed_wrapped(dev, buf, 0, fd, GT_CHUNK_HEADER_BYTES,
                                             file_len - GT_CHUNK_HEADER_BYTES,
                                             a->manifest.chunks[chunk].iv, header + 8, wrapped,
                                             a->manifest.segment_bytes);
}

// Loads the sealed chunk as stored (devd decrypts it once with the chunk key, the only secret
// that leaves) into the attached device, and returns the device: its session is kept for the
// next trip, or closed on any failure (a close without return fails the trip).
static gt_err travel_load(gt_holder_agent *a, gt_device *dev, const char *address,
                          const uint8_t trip_id[GT_SHA256_BYTES], double attested_at,
                          uint32_t chunk,
                          uint64_t *loaded)
{
    char path[4200];
    uint8_t header[GT_CHUNK_HEADER_BYTES];
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    int fd = -1;
    const uint64_t file_len = gt_manifest_chunk_file_bytes(&a->manifest, chunk);
    GT_TRY_GOTO(err, gt_chunk_path(path, sizeof path, a->cfg.dataset_dir, chunk), out);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    GT_ENSURE_GOTO(err, fd >= 0, out, GT_E_IO, "%s: %s", path, strerror(errno));
    GT_ENSURE_GOTO(err, pread(fd, header, sizeof header, 0) == (ssize_t)sizeof header, out,
                   GT_E_TRUNCATED, "%s: shorter than a chunk header", path);
    GT_TRY_GOTO(err, gt_chunk_header_check(header, sizeof header, &a->manifest, chunk), out);
    if (a->cfg.enclave == NULL) {
        GT_TRY_GOTO(err, gt_chunk_key_derive(key, a->cfg.keys->dataset_key, &a->manifest, chunk),
                    out);
    }
    const uint64_t pt_len = a->manifest.chunks[chunk].plaintext_len;
    gt_dbuf buf = 0;
    GT_TRY_GOTO(err, gt_device_alloc(dev, pt_len ? pt_len : 2, GT_DBUF_NO_READBACK, &buf),
                device_failed);
    // The chunk file: 8-byte magic, the 32-byte AAD, then its body: ciphertext || tag, or for
    // GTCHUNK2 each segment's ciphertext || tag, whose size the signed manifest gives (seal.h).
    // devd reads the body from the file itself and decrypts it once (GTCHUNK2: on two
    // threads); the tags (checked in devd) catch a file changed since the header check.
    if (a->cfg.enclave != NULL) {
        GT_TRY_GOTO(err, enclave_load(a, dev, trip_id, chunk, buf, fd, file_len, header),
                    device_failed);
    } else {
        GT_TRY_GOTO(err, gt_device_sim_load_sealed_fd(dev, buf, 0, fd, GT_CHUNK_HEADER_BYTES,
                                                      file_len - GT_CHUNK_HEADER_BYTES,
                                                      a->manifest.chunks[chunk].iv, header + 8,
                                                      key, a->manifest.segment_bytes),
                    device_failed);
    }
    gt_secure_zero(key, sizeof key);
    trip_hook(a, "loaded", chunk);
    GT_TRY_GOTO(err, gt_device_sim_return_stay(dev), device_failed);
    kept_put(a, dev, address, attested_at);
    dev = NULL;
    *loaded = pt_len;
    goto out;
device_failed:
    err = gt_err_wrap(err, "travelling device");
out:
    gt_device_close(dev);  // without a return (any failure) the trip fails and devd wipes it
    gt_secure_zero(key, sizeof key);
    if (fd >= 0) {
        close(fd);
    }
    return err;
}

static void count_refusal(gt_holder_agent *a)
{
    pthread_mutex_lock(&a->lock);
    a->stats.refusals++;
    pthread_mutex_unlock(&a->lock);
}

// The chunk is in the travelling device: TRAVELLED, and for a trip the trainer serves, its
// RELEASED before the next message.
static gt_err travel_done(gt_holder_agent *a, gt_channel *ch, gt_device_trip_carrier *carrier,
                          const char *trainer, uint32_t chunk, uint64_t tokens, uint64_t loaded)
{
    gt_log_info("holder %s: loaded chunk %u (%llu tokens) into the travelling device for %s",
                a->me->name, chunk, (unsigned long long)tokens, trainer);
    pthread_mutex_lock(&a->lock);
    a->stats.bytes_sent += gt_manifest_chunk_file_bytes(&a->manifest, chunk);
    pthread_mutex_unlock(&a->lock);
    uint8_t reply[8];
    gt_writer w = gt_writer_init_fixed(reply, sizeof reply);
    gt_err sent = gt_hp_travelled_write(&w, loaded);
    if (gt_is_ok(sent)) {
        sent = gt_channel_send(ch, GT_HP_TRAVELLED, w.data, w.len);
    }
    return carrier ? gt_holder_trip_finish(carrier, sent, a->me->name, chunk) : sent;
}

// What a TRAVEL asks for, read from its device address (travel.h): devd's socket path or a
// trip a cuda trainer serves is `travel`; the trip a cpu trainer serves in its host memory is
// `insecure-host-trip`, never `travel`.
typedef struct {
    gt_transfer_mode mode;
    const char *device;  // for the ledger: "devd", "cuda" or "host"
    const char *what;    // for refusals: the request as the agreement check names it
} trip_kind;

static gt_err trip_kind_of(const char *address, trip_kind *k)
{
    gt_device_kind kind = GT_DEVICE_SIM;
    char path[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_TRY(gt_err_wrap(gt_device_trip_address_parse(address, &kind, path, sizeof path),
                       "travelling device"));
    switch (kind) {
    case GT_DEVICE_SIM:
        *k = (trip_kind){GT_TRANSFER_TRAVEL, "devd", "TRAVEL to devd"};
        return GT_OK;
    case GT_DEVICE_CUDA:
        *k = (trip_kind){GT_TRANSFER_TRAVEL, "cuda", "TRAVEL ipc-cuda: (a cuda trip)"};
        return GT_OK;
    case GT_DEVICE_CPU:
        *k = (trip_kind){GT_TRANSFER_INSECURE_HOST_TRIP, "host",
                         "TRAVEL ipc-cpu: (a trip in the trainer's host memory)"};
        return GT_OK;
    default:
        return gt_errf(GT_E_FORMAT, "travelling device: unknown kind");
    }
}

// Checks a TRAVEL before anything is attached: the chunk exists, and the agreement lists the
// mode its address asks for. *k is set when the address parsed (k->mode valid).
static gt_err travel_admit(gt_holder_agent *a, const gt_hp_travel *m, trip_kind *k)
{
    GT_ENSURE(m->chunk < a->manifest.chunk_count, GT_E_ARG, "chunk %u does not exist (%u chunks)",
              m->chunk, a->manifest.chunk_count);
    GT_TRY(trip_kind_of(m->device, k));
    GT_ENSURE(a->cfg.enclave == NULL || strcmp(k->device, "devd") == 0, GT_E_POLICY,
              "this holder runs in enclave mode: it releases chunk keys only wrapped to an "
              "attested devd (%s would put the chunk key in a trainer's process)", k->what);
    return gt_agreement_transfer_check(a->cfg.agreement, k->mode, k->what);
}

static gt_err serve_travel(gt_holder_agent *a, gt_channel *ch, const gt_buf *body,
                           const char *trainer)
{
    gt_hp_travel m;
    GT_TRY(gt_hp_travel_parse(gt_buf_span(body), &m));
    const uint32_t chunk = m.chunk;
    uint64_t tokens = 0;
    gt_device *dev = NULL;
    double attested_at = 0;
    gt_device_trip_carrier *carrier = NULL;  // a trip the trainer serves (ipc-cpu:, ipc-cuda:)
    trip_kind k = {0};
    // The mode, then the device, then the release decision. A refusal after attaching closes the
    // device without a return: the trip fails at once, the trainer has its device back, nothing
    // loaded.
    gt_err verdict = travel_admit(a, &m, &k);
    if (gt_is_ok(verdict)) {
        verdict = travel_attach(a, m.ticket, m.device, &dev, &attested_at, &carrier);
    }
    uint8_t trip_id[GT_SHA256_BYTES];  // what a wrapped key is bound to (enclave mode)
    gt_err idt = gt_release_trip_id(trip_id, m.ticket);
    if (gt_is_ok(verdict)) {
        verdict = idt;
    }
    gt_secure_zero(m.ticket, sizeof m.ticket);
    if (gt_is_ok(verdict)) {
        verdict = decide(a, chunk, &tokens);
    } else {
        count_refusal(a);
    }
    const char *mode = k.device ? gt_transfer_mode_name(k.mode) : NULL;
    if (!gt_is_ok(verdict)) {
        gt_device_close(dev);
        gt_device_trip_carrier_close(carrier);
        gt_log_warn("holder %s: refused a trip for chunk %u: %s", a->me->name, chunk,
                    verdict.msg);
        ledger_note(a, "refuse", &(ledger_detail){.trainer = trainer, .chunk = chunk,
                                                  .mode = mode, .device = k.device,
                                                  .reason = verdict.msg});
        return send_refuse(ch, verdict);
    }
    gt_err noted = ledger_note(a, "grant", &(ledger_detail){
        .trainer = trainer, .chunk = chunk, .mode = mode, .device = k.device, .tokens = tokens,
        .bytes = gt_manifest_chunk_file_bytes(&a->manifest, chunk)});
    if (!gt_is_ok(noted)) {  // the release stays counted: stricter, never looser
        gt_device_close(dev);
        gt_device_trip_carrier_close(carrier);
        return send_refuse(ch, gt_err_wrap(noted, "the holder cannot record the grant"));
    }
    uint64_t loaded = 0;
    gt_err err = carrier ? gt_holder_trip_load(&carrier, a->cfg.dataset_dir, &a->manifest,
                                               a->cfg.keys->dataset_key, chunk, &loaded)
                         : travel_load(a, dev, m.device, trip_id, attested_at, chunk, &loaded);
    if (!gt_is_ok(err)) {
        gt_log_warn("holder %s: trip for chunk %u failed: %s", a->me->name, chunk, err.msg);
        ledger_note(a, "trip-failed", &(ledger_detail){.trainer = trainer, .chunk = chunk,
                                                       .mode = mode, .device = k.device,
                                                       .reason = err.msg});
        return send_refuse(ch, gt_errf(GT_E_RETRY, "trip failed: %s", err.msg));
    }
    return travel_done(a, ch, carrier, trainer, chunk, tokens, loaded);
}

// The agreement's transfer mode a FETCH asks for (the parser admits only these two).
static gt_transfer_mode fetch_transfer(uint8_t mode)
{
    return mode == GT_FETCH_PLAIN ? GT_TRANSFER_CONVENTIONAL
                                  : GT_TRANSFER_CONVENTIONAL_KEYRELEASE;
}

// One FETCH: its mode checked against the agreement's transfer list, decided, noted in the
// ledger, then served or refused. A refusal sent is not an error: the session goes on.
static gt_err serve_fetch(gt_holder_agent *a, gt_channel *ch, const gt_buf *body,
                          const char *trainer)
{
    gt_hp_fetch f;
    GT_TRY(gt_hp_fetch_parse(gt_buf_span(body), &f));
    const uint8_t mode = f.mode;
    const uint32_t chunk = f.chunk;
    const gt_transfer_mode transfer = fetch_transfer(mode);
    const char *mode_name = gt_transfer_mode_name(transfer);
    // The mode first: a request the agreement does not allow is refused before it is decided
    // (it costs no release, no budget) and nothing of the chunk is read.
    char what[48];
    snprintf(what, sizeof what, "FETCH %s", gt_fetch_mode_name((gt_fetch_mode)mode));
    gt_err allowed = a->cfg.enclave != NULL
        ? gt_errf(GT_E_POLICY, "this holder runs in enclave mode: %s would put the chunk key or "
                  "plaintext in its host process; it releases only by TRAVEL to an attested "
                  "devd", what)
        : gt_agreement_transfer_check(a->cfg.agreement, transfer, what);
    if (!gt_is_ok(allowed)) {
        count_refusal(a);
        gt_log_warn("holder %s: refused chunk %u: %s", a->me->name, chunk, allowed.msg);
        ledger_note(a, "refuse", &(ledger_detail){.trainer = trainer, .chunk = chunk,
                                                  .mode = mode_name, .reason = allowed.msg});
        return send_refuse(ch, allowed);
    }
    uint64_t tokens = 0;
    gt_err verdict = decide(a, chunk, &tokens);
    if (!gt_is_ok(verdict)) {
        ledger_note(a, "refuse", &(ledger_detail){.trainer = trainer, .chunk = chunk,
                                                  .mode = mode_name, .reason = verdict.msg});
        return send_refuse(ch, verdict);
    }
    uint64_t bytes = mode == GT_FETCH_PLAIN ? a->manifest.chunks[chunk].plaintext_len
                                            : gt_manifest_chunk_file_bytes(&a->manifest, chunk);
    gt_err noted = ledger_note(a, "grant", &(ledger_detail){.trainer = trainer, .chunk = chunk,
                                                            .mode = mode_name, .tokens = tokens,
                                                            .bytes = bytes});
    if (!gt_is_ok(noted)) {  // the release stays counted: stricter, never looser
        return send_refuse(ch, gt_err_wrap(noted, "the holder cannot record the grant"));
    }
    uint64_t sent = 0;
    GT_TRY(serve_chunk(a, ch, chunk, (gt_fetch_mode)mode, &sent));
    pthread_mutex_lock(&a->lock);
    a->stats.bytes_sent += sent;
    pthread_mutex_unlock(&a->lock);
    gt_log_info("holder %s: released chunk %u (%s, %llu tokens) to %s", a->me->name, chunk,
                mode_name, (unsigned long long)tokens, trainer);
    return GT_OK;
}

// ---- co-holder witnesses (travel.h) ----------------------------------------------------------

// One connection's part in the witness round.
typedef struct {
    gt_hp_head mine;     // the HEAD this holder sent on this connection
    bool witnessed;      // its co-holders' witnesses checked out (WITNESSES)
    // Co-holders' HEADs witnessed on this connection, recorded once they confirm them.
    gt_hp_head pending[GT_AGREEMENT_MAX_HOLDERS];
    bool has_pending[GT_AGREEMENT_MAX_HOLDERS];
} witness_session;

// A holder the agreement names by enclave proves it in every session (travel.h), when it runs
// in enclave mode; a plain one cannot, and the trainer refuses it.
static bool quotes_enclave(const gt_holder_agent *a)
{
    return a->cfg.enclave != NULL && a->me->enclave.present;
}

// ENCLAVE_QUOTE, after HEAD: the holder enclave's quote bound to this agreement (the enclave's
// TERMS), this holder's identity key and this connection (its binding for our evidence). A
// quote that cannot be made is a REFUSE in its place.
static gt_err send_enclave_quote(gt_holder_agent *a, gt_channel *ch)
{
    uint8_t binding[GT_NET_BINDING_BYTES], session[GT_SHA256_BYTES];
    gt_buf ev = {0};
    gt_writer w = gt_writer_init_dynamic();
    gt_err err = gt_channel_binding(ch, GT_NET_ROLE_SERVER, binding);
    if (gt_is_ok(err)) {
        err = gt_holder_quote_session(session, a->cfg.keys->holder_pub, binding);
    }
    if (gt_is_ok(err)) {
        err = gt_holder_enclave_quote(a->cfg.enclave, session, &ev);
    }
    if (gt_is_ok(err)) {
        err = gt_hp_enclave_quote_write(&w, gt_buf_span(&ev));
    }
    if (gt_is_ok(err)) {
        err = gt_channel_send(ch, GT_HP_ENCLAVE_QUOTE, w.data, w.len);
    } else {
        gt_log_error("holder %s: no enclave quote for this session: %s", a->me->name, err.msg);
        gt_err ignored = send_refuse(ch, gt_errf(err.code, "the holder could not quote its "
                                                           "enclave: %s", err.msg));
        (void)ignored;
    }
    gt_writer_free(&w);
    gt_buf_free_nowipe(&ev);
    return err;
}

// This connection's HEAD: the ledger's head now, a fresh nonce, signed with the identity key;
// then, for a holder named by enclave, its ENCLAVE_QUOTE.
static gt_err send_head(gt_holder_agent *a, gt_channel *ch, gt_hp_head *h)
{
    memset(h, 0, sizeof *h);
    h->flags = a->cfg.require_witnesses ? GT_HP_HEAD_WITNESSES_REQUIRED : 0;
    if (quotes_enclave(a)) {
        h->flags |= GT_HP_HEAD_ENCLAVE_QUOTE;
    }
    memcpy(h->holder_key, a->cfg.keys->holder_pub, sizeof h->holder_key);
    memcpy(h->agreement, a->cfg.agreement->hash, sizeof h->agreement);
    GT_TRY(gt_random_bytes(h->nonce, sizeof h->nonce));
    if (a->cfg.ledger != NULL) {
        gt_ledger_head(a->cfg.ledger, &h->entries, h->head);
    }
    GT_TRY(gt_hp_head_sign(h, a->cfg.keys->holder_sec, false));
    uint8_t body[GT_HP_HEAD_BYTES];
    gt_writer w = gt_writer_init_fixed(body, sizeof body);
    GT_TRY(gt_hp_head_write(&w, h));
    GT_TRY(gt_channel_send(ch, GT_HP_HEAD, w.data, w.len));
    return quotes_enclave(a) ? send_enclave_quote(a, ch) : GT_OK;
}

// WITNESS_REQ: another holder's HEAD. Answers what this holder had witnessed of it, bound to
// that HEAD's nonce; the new head waits (pending) for that holder's confirmation.
static gt_err serve_witness_req(gt_holder_agent *a, gt_channel *ch, const gt_buf *body,
                                witness_session *ws)
{
    gt_hp_head h;
    GT_TRY(gt_hp_head_parse(gt_buf_span(body), &h));
    int i = holder_index(a->cfg.agreement, h.holder_key);
    GT_ENSURE(i >= 0 && &a->cfg.agreement->holders[i] != a->me, GT_E_POLICY,
              "witness: the head is not a co-holder's of this agreement");
    GT_ENSURE(gt_ct_equal(h.agreement, a->cfg.agreement->hash, sizeof h.agreement), GT_E_POLICY,
              "witness: the head is under another agreement");
    GT_TRY(gt_hp_head_verify(&h, false));
    gt_hp_witness wit;
    memset(&wit, 0, sizeof wit);
    memcpy(wit.witness_key, a->cfg.keys->holder_pub, sizeof wit.witness_key);
    memcpy(wit.subject_key, h.holder_key, sizeof wit.subject_key);
    memcpy(wit.agreement, h.agreement, sizeof wit.agreement);
    memcpy(wit.nonce, h.nonce, sizeof wit.nonce);
    pthread_mutex_lock(&a->lock);
    wit.entries = a->witnessed[i].entries;
    memcpy(wit.head, a->witnessed[i].head, sizeof wit.head);
    pthread_mutex_unlock(&a->lock);
    if (h.entries < wit.entries) {
        gt_log_warn("holder %s: holder %s shows a ledger of %llu entries; this holder witnessed "
                    "%llu (rolled back?): it will say so", a->me->name,
                    a->cfg.agreement->holders[i].name, (unsigned long long)h.entries,
                    (unsigned long long)wit.entries);
    }
    ws->pending[i] = h;
    ws->has_pending[i] = true;
    GT_TRY(gt_hp_witness_sign(&wit, a->cfg.keys->holder_sec));
    uint8_t out[GT_HP_WITNESS_BYTES];
    gt_writer w = gt_writer_init_fixed(out, sizeof out);
    GT_TRY(gt_hp_witness_write(&w, &wit));
    return gt_channel_send(ch, GT_HP_WITNESS, w.data, w.len);
}

// WITNESS_CONFIRM: a co-holder confirmed the HEAD this holder witnessed on this connection (its
// own check against every witness passed): now it is recorded, durably, when it is longer.
static gt_err serve_witness_confirm(gt_holder_agent *a, const gt_buf *body, witness_session *ws)
{
    gt_hp_head h;
    GT_TRY(gt_hp_head_parse(gt_buf_span(body), &h));
    int i = holder_index(a->cfg.agreement, h.holder_key);
    GT_ENSURE(i >= 0 && ws->has_pending[i], GT_E_POLICY,
              "witness confirmation of a head not witnessed on this connection");
    const gt_hp_head *p = &ws->pending[i];
    GT_ENSURE(gt_ct_equal(h.nonce, p->nonce, sizeof h.nonce) && h.entries == p->entries &&
                  gt_ct_equal(h.head, p->head, sizeof h.head) &&
                  gt_ct_equal(h.agreement, p->agreement, sizeof h.agreement),
              GT_E_POLICY, "witness confirmation of another head than the one witnessed");
    GT_TRY(gt_hp_head_verify(&h, true));
    ws->has_pending[i] = false;
    const char *who = a->cfg.agreement->holders[i].name;
    pthread_mutex_lock(&a->lock);
    bool longer = h.entries > a->witnessed[i].entries;
    if (longer) {
        a->witnessed[i].entries = h.entries;
        memcpy(a->witnessed[i].head, h.head, sizeof h.head);
    }
    pthread_mutex_unlock(&a->lock);
    if (!longer || a->cfg.ledger == NULL) {
        return GT_OK;
    }
    cJSON *d = cJSON_CreateObject();
    char k_hex[2 * GT_ED25519_PUBLIC_BYTES + 1], h_hex[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(k_hex, sizeof k_hex, h.holder_key, sizeof h.holder_key);
    gt_hex_encode(h_hex, sizeof h_hex, h.head, sizeof h.head);
    cJSON_AddStringToObject(d, "holder", k_hex);
    cJSON_AddStringToObject(d, "name", who);
    cJSON_AddNumberToObject(d, "entries", (double)h.entries);
    cJSON_AddStringToObject(d, "head", h_hex);
    gt_err e = gt_ledger_append(a->cfg.ledger, "witness", d);
    cJSON_Delete(d);
    return gt_err_wrap(e, "ledger: the witnessed head of %s", who);
}

// One co-holder's witness of this holder's head (`mine`, this connection's HEAD): signed by a
// co-holder, for this session's nonce, and a prefix of this ledger. *from: its holder index.
static gt_err witness_check(gt_holder_agent *a, const gt_hp_head *mine, const gt_hp_witness *w,
                            int *from, bool *rolled_back)
{
    *rolled_back = false;
    int i = holder_index(a->cfg.agreement, w->witness_key);
    GT_ENSURE(i >= 0 && &a->cfg.agreement->holders[i] != a->me, GT_E_POLICY,
              "a witness that is not a co-holder of this agreement");
    GT_TRY(gt_hp_witness_verify(w));
    GT_ENSURE(gt_ct_equal(w->subject_key, mine->holder_key, sizeof w->subject_key) &&
                  gt_ct_equal(w->agreement, mine->agreement, sizeof w->agreement) &&
                  gt_ct_equal(w->nonce, mine->nonce, sizeof w->nonce),
              GT_E_POLICY, "holder %s's witness is of another head or session (replayed?)",
              a->cfg.agreement->holders[i].name);
    *from = i;
    if (w->entries == 0) {
        return GT_OK;  // it had witnessed nothing of this holder yet
    }
    uint8_t ours[GT_SHA256_BYTES];
    gt_err e = w->entries <= mine->entries
                   ? gt_ledger_prefix_head(a->cfg.ledger_path, a->cfg.keys->holder_pub,
                                           w->entries, ours)
                   : gt_errf(GT_E_NOTFOUND, "shorter");
    if (!gt_is_ok(e) || !gt_ct_equal(ours, w->head, sizeof ours)) {
        char hex[2 * GT_SHA256_BYTES + 1];
        gt_hex_encode(hex, sizeof hex, w->head, sizeof w->head);
        *rolled_back = true;
        return gt_errf(GT_E_POLICY, "ledger rolled back or replaced: holder %s witnessed it at "
                       "%llu entries (head %.16s...), which this ledger of %llu entries does not "
                       "hold", a->cfg.agreement->holders[i].name,
                       (unsigned long long)w->entries, hex, (unsigned long long)mine->entries);
    }
    return GT_OK;
}

// WITNESSES for this connection's HEAD: every one must check out, and with require_witnesses
// every co-holder must have answered. A witnessed head this ledger lacks is sticky: the holder
// serves no one from then on.
static gt_err serve_witnesses(gt_holder_agent *a, gt_channel *ch, const gt_buf *body,
                              witness_session *session, const char *trainer)
{
    const gt_hp_head *mine = &session->mine;
    gt_hp_witness *ws = calloc(GT_AGREEMENT_MAX_HOLDERS, sizeof *ws);
    GT_ENSURE(ws != NULL, GT_E_NOMEM, "out of memory");
    size_t n = 0;
    bool seen[GT_AGREEMENT_MAX_HOLDERS] = {0};
    gt_err verdict = gt_hp_witnesses_parse(gt_buf_span(body), ws, GT_AGREEMENT_MAX_HOLDERS, &n);
    for (size_t k = 0; k < n && gt_is_ok(verdict); k++) {
        int from = -1;
        bool rolled = false;
        verdict = witness_check(a, mine, &ws[k], &from, &rolled);
        if (gt_is_ok(verdict)) {
            seen[from] = true;
        } else if (rolled) {
            pthread_mutex_lock(&a->lock);
            a->rolled_back = true;
            snprintf(a->rolled_back_why, sizeof a->rolled_back_why, "%s", verdict.msg);
            pthread_mutex_unlock(&a->lock);
            gt_log_error("holder %s: %s; serving no one until the ledger its co-holders "
                         "witnessed is restored", a->me->name, verdict.msg);
        }
    }
    free(ws);
    for (uint32_t i = 0; i < a->cfg.agreement->holder_count && gt_is_ok(verdict); i++) {
        if (a->cfg.require_witnesses && &a->cfg.agreement->holders[i] != a->me && !seen[i]) {
            verdict = gt_errf(GT_E_POLICY, "no witness of this holder's ledger head from holder "
                              "%s", a->cfg.agreement->holders[i].name);
        }
    }
    if (!gt_is_ok(verdict)) {
        ledger_note(a, "refuse", &(ledger_detail){.trainer = trainer, .chunk = -1,
                                                  .reason = verdict.msg});
        return send_refuse(ch, verdict);
    }
    session->witnessed = true;
    gt_hp_head confirmed = *mine;
    GT_TRY(gt_hp_head_sign(&confirmed, a->cfg.keys->holder_sec, true));
    uint8_t out[GT_HP_HEAD_BYTES];
    gt_writer w = gt_writer_init_fixed(out, sizeof out);
    GT_TRY(gt_hp_head_write(&w, &confirmed));
    return gt_channel_send(ch, GT_HP_WITNESS_OK, w.data, w.len);
}

// A FETCH or TRAVEL is served only by a holder not rolled back, and (require_witnesses) only in
// a session whose witnesses checked out.
static gt_err witnesses_admit(gt_holder_agent *a, bool witnessed)
{
    pthread_mutex_lock(&a->lock);
    gt_err e = a->rolled_back ? gt_errf(GT_E_POLICY, "this holder's ledger was rolled back: %s",
                                        a->rolled_back_why)
                              : GT_OK;
    pthread_mutex_unlock(&a->lock);
    GT_TRY(e);
    GT_ENSURE(!a->cfg.require_witnesses || witnessed, GT_E_POLICY,
              "this holder serves only after its co-holders witnessed its ledger head in this "
              "session (the trainer sends WITNESSES)");
    return GT_OK;
}

// The connection's opening: the trainer's HELLO under this holder's agreement, the trainer
// admitted, the session in the ledger. A refusal is sent to the trainer (and returned).
static gt_err conn_open(gt_holder_agent *a, gt_channel *ch, const char *appraisal,
                        conn_slot *self, gt_buf *body, char trainer[TRAINER_NAME_BYTES])
{
    uint32_t type = 0;
    uint8_t agreement[32];
    GT_TRY(gt_channel_recv(ch, &type, body, GT_HP_MAX_CONTROL));
    GT_ENSURE(type == GT_HP_HELLO, GT_E_FORMAT, "expected HELLO, got %#x", type);
    gt_hp_hello hello;
    GT_TRY(gt_hp_hello_parse(gt_buf_span(body), &hello));
    memcpy(agreement, hello.agreement, sizeof agreement);
    memcpy(trainer, hello.trainer, TRAINER_NAME_BYTES);
    if (!gt_ct_equal(agreement, a->cfg.agreement->hash, sizeof agreement)) {
        char ours[2 * GT_SHA256_BYTES + 1], theirs[2 * GT_SHA256_BYTES + 1];
        gt_hex_encode(ours, sizeof ours, a->cfg.agreement->hash, GT_SHA256_BYTES);
        gt_hex_encode(theirs, sizeof theirs, agreement, GT_SHA256_BYTES);
        gt_err err = gt_errf(GT_E_POLICY,
                             "trainer runs under another agreement than this holder's "
                             "(different agreement: ours %.16s..., the trainer's %.16s...)",
                             ours, theirs);
        ledger_note(a, "refuse", &(ledger_detail){.trainer = trainer, .chunk = -1,
                                                  .reason = err.msg});
        gt_err ignored = send_refuse(ch, err);
        (void)ignored;
        return err;
    }
    gt_err err = trainer_admit(a, self, trainer);
    if (!gt_is_ok(err)) {
        gt_log_warn("holder %s: %s", a->me->name, err.msg);
        gt_err ignored = send_refuse(ch, err);
        (void)ignored;
        return err;
    }
    err = ledger_session(a, &hello, appraisal);
    if (!gt_is_ok(err)) {
        gt_log_error("holder %s: %s", a->me->name, err.msg);
        gt_err ignored = send_refuse(ch, gt_errf(err.code, "the holder cannot record this "
                                                           "session in its ledger"));
        (void)ignored;
        return err;
    }
    return GT_OK;
}

// appraisal: what the attestor said of this trainer when it accepted it (may be NULL); self:
// this connection's slot in the serving loop (NULL for gt_holder_agent_handle).
static gt_err handle_conn(gt_holder_agent *a, gt_channel *ch, const char *appraisal,
                          conn_slot *self)
{
    GT_TRY(gt_channel_set_timeout(ch, a->cfg.idle_timeout_ms > 0 ? a->cfg.idle_timeout_ms
                                                                  : 300000));
    gt_buf body = {0};
    uint32_t type = 0;
    char trainer[TRAINER_NAME_BYTES] = "";
    witness_session *ws = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, conn_open(a, ch, appraisal, self, &body, trainer), out);
    GT_TRY_GOTO(err, gt_channel_send(ch, GT_HP_WELCOME, a->manifest_bytes.data,
                                     a->manifest_bytes.len),
                out);
    ws = calloc(1, sizeof *ws);
    GT_ENSURE_GOTO(err, ws != NULL, out, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, send_head(a, ch, &ws->mine), out);
    for (;;) {
        GT_TRY_GOTO(err, gt_channel_recv(ch, &type, &body, GT_HP_MAX_CONTROL), out);
        if (type == GT_HP_BYE) {
            break;
        }
        if (type == GT_HP_WITNESS_REQ) {
            GT_TRY_GOTO(err, serve_witness_req(a, ch, &body, ws), out);
            continue;
        }
        if (type == GT_HP_WITNESS_CONFIRM) {
            GT_TRY_GOTO(err, serve_witness_confirm(a, &body, ws), out);
            continue;
        }
        if (type == GT_HP_WITNESSES) {
            GT_TRY_GOTO(err, serve_witnesses(a, ch, &body, ws, trainer), out);
            continue;
        }
        if (type == GT_HP_FETCH || type == GT_HP_TRAVEL) {
            gt_err admitted = witnesses_admit(a, ws->witnessed);
            if (!gt_is_ok(admitted)) {
                count_refusal(a);
                ledger_note(a, "refuse", &(ledger_detail){.trainer = trainer, .chunk = -1,
                                                          .reason = admitted.msg});
                GT_TRY_GOTO(err, send_refuse(ch, admitted), out);
                continue;
            }
        }
        if (type == GT_HP_USED) {
            GT_TRY_GOTO(err, record_use(a, &body, trainer), out);
            continue;
        }
        if (type == GT_HP_TRAVEL) {
            GT_TRY_GOTO(err, serve_travel(a, ch, &body, trainer), out);
            continue;
        }
        GT_ENSURE_GOTO(err, type == GT_HP_FETCH, out, GT_E_FORMAT, "expected FETCH, got %#x",
                       type);
        GT_TRY_GOTO(err, serve_fetch(a, ch, &body, trainer), out);
    }
out:
    if (a->cfg.ledger != NULL) {  // the trainer's last confirmed uses, durable as it leaves
        gt_err synced = gt_ledger_sync(a->cfg.ledger);
        if (!gt_is_ok(synced)) {
            gt_log_error("holder %s: ledger: %s", a->me->name, synced.msg);
        }
    }
    free(ws);
    gt_buf_free_nowipe(&body);
    return err;
}

gt_err gt_holder_agent_handle(gt_holder_agent *a, gt_channel *ch)
{
    return handle_conn(a, ch, NULL, NULL);
}

// ---- serving: accept, handshake on workers, limits ------------------------------------------

// One connection, from accept to close. Owned by the serving loop's list (under a->lock); its
// thread sets state CONN_DONE as its last act and the loop joins it.
enum { CONN_HANDSHAKE = 0, CONN_SERVING = 1, CONN_DONE = 2 };
struct holder_conn_slot {
    gt_holder_agent *a;
    int fd;                          // until gt_channel_accept_fd takes it over
    char peer[GT_NET_PEER_MAX];      // "HOST:PORT" as accepted (not authenticated)
    char host[GT_NET_PEER_MAX];      // HOST only: the per-address handshake limit's key
    char trainer[64];                // after HELLO: the per-trainer connection limit's key
    int state;                       // CONN_*, under a->lock
    pthread_t thread;
    struct holder_conn_slot *next;
};

static void slot_set_state(conn_slot *c, int state)
{
    pthread_mutex_lock(&c->a->lock);
    c->state = state;
    pthread_mutex_unlock(&c->a->lock);
}

// Failures of peers that never attested (a broken or stalled handshake, refused evidence, a
// connection over a limit) go to the log, at most one line a second with a count of the rest:
// a flood of them must neither fill the log nor reach the signed ledger, which holds decisions
// about attested peers only.
static void unauth_log(gt_holder_agent *a, const char *peer, const char *what)
{
    double now = gt_now_seconds();
    pthread_mutex_lock(&a->lock);
    a->stats.handshake_failures++;
    bool say = now - a->unauth_log_at >= 1.0;
    unsigned long long quiet = a->unauth_quiet;
    if (say) {
        a->unauth_log_at = now;
        a->unauth_quiet = 0;
    } else {
        a->unauth_quiet++;
    }
    pthread_mutex_unlock(&a->lock);
    if (say) {
        char more[64] = "";
        if (quiet > 0) {
            snprintf(more, sizeof more, " (and %llu more since the last such line)", quiet);
        }
        gt_log_warn("holder %s: refused a connection from %s: %s%s", a->me->name, peer, what,
                    more);
    }
}

// Called by handle_conn after HELLO: is there room for one more connection of this trainer?
static gt_err trainer_admit(gt_holder_agent *a, conn_slot *self, const char *trainer)
{
    if (self == NULL) {
        return GT_OK;
    }
    unsigned cap = a->cfg.max_connections_per_trainer ? a->cfg.max_connections_per_trainer : 8;
    unsigned n = 0;
    pthread_mutex_lock(&a->lock);
    for (conn_slot *c = a->conns; c != NULL; c = c->next) {
        n += c != self && c->state == CONN_SERVING && strcmp(c->trainer, trainer) == 0;
    }
    if (n < cap) {
        snprintf(self->trainer, sizeof self->trainer, "%s", trainer);
    }
    pthread_mutex_unlock(&a->lock);
    GT_ENSURE(n < cap, GT_E_LIMIT, "trainer '%s' already has %u connections open (at most %u)",
              trainer, n, cap);
    return GT_OK;
}

static void *conn_main(void *p)
{
    conn_slot *c = p;
    gt_holder_agent *a = c->a;
    // Each handshake appraises with its own copy of the attestor: the copy's peer_summary is
    // this connection's, whatever other handshakes run at the same time.
    gt_tee_attestor mine;
    gt_net_attestor att = a->cfg.attestor;
    if (a->cfg.tee != NULL) {
        mine = *a->cfg.tee;
        mine.peer_summary[0] = '\0';
        att = gt_tee_attestor_bind(&mine);
    }
    int deadline = a->cfg.handshake_deadline_ms > 0 ? a->cfg.handshake_deadline_ms : 10000;
    gt_channel *ch = NULL;
    int fd = c->fd;
    c->fd = -1;
    gt_err err = gt_channel_accept_fd(&ch, fd, &att, deadline);
    if (!gt_is_ok(err)) {
        unauth_log(a, c->peer, err.msg);
        slot_set_state(c, CONN_DONE);
        return NULL;
    }
    slot_set_state(c, CONN_SERVING);
    err = handle_conn(a, ch, a->cfg.tee != NULL ? mine.peer_summary : NULL, c);
    if (!gt_is_ok(err) && err.code != GT_E_PEER) {
        gt_log_warn("holder %s: connection from %s ended: %s", a->me->name, c->peer, err.msg);
    }
    gt_channel_close(ch);
    slot_set_state(c, CONN_DONE);
    return NULL;
}

// Joins every finished connection thread (all of them with wait_all, once none can start).
static void conns_reap(gt_holder_agent *a, bool wait_all)
{
    for (;;) {
        conn_slot *done = NULL;
        bool any = false;
        pthread_mutex_lock(&a->lock);
        for (conn_slot **pp = &a->conns; *pp != NULL; pp = &(*pp)->next) {
            any = true;
            if ((*pp)->state == CONN_DONE) {
                done = *pp;
                *pp = done->next;
                break;
            }
        }
        pthread_mutex_unlock(&a->lock);
        if (done != NULL) {
            pthread_join(done->thread, NULL);
            free(done);
            continue;
        }
        if (!wait_all || !any) {
            return;
        }
        usleep(10000);  // still running: their own timeouts and deadlines end them
    }
}

// Admits one accepted TCP connection to a handshake, or says why not (limits of unattested
// peers: in total, and per source address, so one address cannot take every slot).
static gt_err conn_admit(gt_holder_agent *a, const char *host)
{
    unsigned total_cap = a->cfg.max_handshakes ? a->cfg.max_handshakes : 32;
    unsigned host_cap = a->cfg.max_handshakes_per_address ? a->cfg.max_handshakes_per_address : 4;
    unsigned total = 0, same = 0;
    pthread_mutex_lock(&a->lock);
    for (conn_slot *c = a->conns; c != NULL; c = c->next) {
        if (c->state == CONN_HANDSHAKE) {
            total++;
            same += strcmp(c->host, host) == 0;
        }
    }
    pthread_mutex_unlock(&a->lock);
    GT_ENSURE(total < total_cap, GT_E_LIMIT, "%u handshakes already in progress (at most %u)",
              total, total_cap);
    GT_ENSURE(same < host_cap, GT_E_LIMIT,
              "%u handshakes from this address already in progress (at most %u)", same,
              host_cap);
    return GT_OK;
}

static void peer_host(char host[GT_NET_PEER_MAX], const char *peer)
{
    snprintf(host, GT_NET_PEER_MAX, "%s", peer);
    char *colon = strrchr(host, ':');
    if (colon != NULL) {
        *colon = '\0';
    }
}

gt_err gt_holder_agent_serve(gt_holder_agent *a, gt_listener *l, const volatile int *stop)
{
    while (stop == NULL || !*stop) {
        conns_reap(a, false);
        int fd = -1;
        char peer[GT_NET_PEER_MAX];
        gt_err err = gt_listener_accept_fd(l, 200, &fd, peer);
        if (err.code == GT_E_TIMEOUT) {
            continue;
        }
        if (!gt_is_ok(err)) {
            unauth_log(a, "(not accepted)", err.msg);
            usleep(20000);  // out of descriptors: let finished connections release theirs
            continue;
        }
        char host[GT_NET_PEER_MAX];
        peer_host(host, peer);
        err = conn_admit(a, host);
        conn_slot *c = gt_is_ok(err) ? calloc(1, sizeof *c) : NULL;
        if (c == NULL) {
            close(fd);
            unauth_log(a, peer, gt_is_ok(err) ? "out of memory" : err.msg);
            continue;
        }
        *c = (conn_slot){.a = a, .fd = fd, .state = CONN_HANDSHAKE};
        snprintf(c->peer, sizeof c->peer, "%s", peer);
        snprintf(c->host, sizeof c->host, "%s", host);
        pthread_mutex_lock(&a->lock);
        bool started = pthread_create(&c->thread, NULL, conn_main, c) == 0;
        if (started) {
            c->next = a->conns;
            a->conns = c;
        }
        pthread_mutex_unlock(&a->lock);
        if (!started) {
            close(fd);
            free(c);
            unauth_log(a, peer, "cannot start a connection thread");
        }
    }
    // Join every connection thread (not just wait for them): nothing of theirs, OpenSSL's
    // per-thread state included, outlives the server.
    conns_reap(a, true);
    return GT_OK;
}
