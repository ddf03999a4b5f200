// The sim device's wire protocol: writers and parsers for every message (layouts in devproto.h).
// Parsers read only through gt_reader and accept each type only at its exact size.
#include <gputravel/devproto.h>

#include <gputravel/attest.h>

#include <string.h>

// ---- handshake ----------------------------------------------------------------------------------

gt_err gt_sim_peek_type(gt_span body, uint16_t *type)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    return gt_reader_u16le(&r, type);
}

gt_err gt_sim_challenge_write(gt_writer *w, const uint8_t nonce[GT_SIM_NONCE_BYTES])
{
    GT_TRY(gt_writer_u16le(w, GT_SIM_MSG_CHALLENGE));
    GT_TRY(gt_writer_u16le(w, GT_SIM_VERSION));
    return gt_writer_bytes(w, nonce, GT_SIM_NONCE_BYTES);
}

gt_err gt_sim_challenge_parse(gt_span body, uint8_t nonce[GT_SIM_NONCE_BYTES])
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t type = 0, version = 0;
    GT_TRY(gt_reader_u16le(&r, &type));
    GT_ENSURE(type == GT_SIM_MSG_CHALLENGE, GT_E_FORMAT,
              "sim device: expected devd's challenge, got message type 0x%04x", type);
    GT_TRY(gt_reader_u16le(&r, &version));
    GT_TRY(gt_reader_bytes(&r, nonce, GT_SIM_NONCE_BYTES));
    GT_TRY(gt_reader_expect_end(&r, "challenge"));
    GT_ENSURE(version == GT_SIM_VERSION, GT_E_UNSUPPORTED,
              "sim device: devd speaks protocol version %u (this client %u)", version,
              GT_SIM_VERSION);
    return GT_OK;
}

gt_err gt_sim_client_hello_write(gt_writer *w, const gt_sim_client_hello *h)
{
    GT_ENSURE(h->evidence.len <= GT_SIM_MAX_EVIDENCE, GT_E_LIMIT,
              "client hello: evidence of %zu bytes (at most %u)", h->evidence.len,
              GT_SIM_MAX_EVIDENCE);
    GT_TRY(gt_writer_u16le(w, GT_SIM_MSG_CLIENT_HELLO));
    GT_TRY(gt_writer_u16le(w, h->version));
    GT_TRY(gt_writer_bytes(w, h->nonce, sizeof h->nonce));
    GT_TRY(gt_writer_bytes(w, h->server_nonce, sizeof h->server_nonce));
    GT_TRY(gt_writer_bytes(w, h->pub, sizeof h->pub));
    GT_TRY(gt_writer_bytes(w, h->agreement, sizeof h->agreement));
    GT_TRY(gt_writer_u32le(w, (uint32_t)h->evidence.len));
    GT_TRY(gt_writer_bytes(w, h->evidence.data, h->evidence.len));
    return GT_OK;
}

gt_err gt_sim_client_hello_parse(gt_span body, gt_sim_client_hello *h)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t type = 0;
    uint32_t ev_len = 0;
    GT_TRY(gt_reader_u16le(&r, &type));
    GT_ENSURE(type == GT_SIM_MSG_CLIENT_HELLO, GT_E_FORMAT,
              "devd: expected client hello, got message type 0x%04x", type);
    GT_TRY(gt_reader_u16le(&r, &h->version));
    GT_TRY(gt_reader_bytes(&r, h->nonce, sizeof h->nonce));
    GT_TRY(gt_reader_bytes(&r, h->server_nonce, sizeof h->server_nonce));
    GT_TRY(gt_reader_bytes(&r, h->pub, sizeof h->pub));
    GT_TRY(gt_reader_bytes(&r, h->agreement, sizeof h->agreement));
    GT_TRY(gt_reader_u32le(&r, &ev_len));
    GT_ENSURE(ev_len <= GT_SIM_MAX_EVIDENCE, GT_E_LIMIT,
              "client hello: evidence of %u bytes (at most %u)", ev_len, GT_SIM_MAX_EVIDENCE);
    GT_TRY(gt_reader_span(&r, ev_len, &h->evidence));
    GT_TRY(gt_reader_expect_end(&r, "client hello"));
    GT_ENSURE(h->version == GT_SIM_VERSION, GT_E_UNSUPPORTED,
              "client hello: protocol version %u (devd speaks %u)", h->version, GT_SIM_VERSION);
    return GT_OK;
}

gt_err gt_sim_server_hello_write(gt_writer *w, const gt_sim_server_hello *h)
{
    GT_ENSURE(h->evidence.len <= GT_SIM_MAX_EVIDENCE, GT_E_LIMIT,
              "server hello: evidence of %zu bytes (at most %u)", h->evidence.len,
              GT_SIM_MAX_EVIDENCE);
    GT_TRY(gt_writer_u16le(w, GT_SIM_MSG_SERVER_HELLO));
    GT_TRY(gt_writer_u16le(w, h->version));
    GT_TRY(gt_writer_bytes(w, h->pub, sizeof h->pub));
    GT_TRY(gt_writer_u32le(w, h->slot_count));
    GT_TRY(gt_writer_u32le(w, h->slot_bytes));
    GT_TRY(gt_writer_u64le(w, h->mem_limit));
    GT_TRY(gt_writer_u32le(w, (uint32_t)h->evidence.len));
    GT_TRY(gt_writer_bytes(w, h->evidence.data, h->evidence.len));
    return GT_OK;
}

gt_err gt_sim_server_hello_parse(gt_span body, gt_sim_server_hello *h)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t type = 0;
    uint32_t ev_len = 0;
    GT_TRY(gt_reader_u16le(&r, &type));
    GT_ENSURE(type == GT_SIM_MSG_SERVER_HELLO, GT_E_FORMAT,
              "sim device: expected server hello, got message type 0x%04x", type);
    GT_TRY(gt_reader_u16le(&r, &h->version));
    GT_TRY(gt_reader_bytes(&r, h->pub, sizeof h->pub));
    GT_TRY(gt_reader_u32le(&r, &h->slot_count));
    GT_TRY(gt_reader_u32le(&r, &h->slot_bytes));
    GT_TRY(gt_reader_u64le(&r, &h->mem_limit));
    GT_TRY(gt_reader_u32le(&r, &ev_len));
    GT_ENSURE(ev_len <= GT_SIM_MAX_EVIDENCE, GT_E_LIMIT,
              "server hello: evidence of %u bytes (at most %u)", ev_len, GT_SIM_MAX_EVIDENCE);
    GT_TRY(gt_reader_span(&r, ev_len, &h->evidence));
    GT_TRY(gt_reader_expect_end(&r, "server hello"));
    GT_ENSURE(h->version == GT_SIM_VERSION, GT_E_UNSUPPORTED,
              "server hello: protocol version %u (expected %u)", h->version, GT_SIM_VERSION);
    GT_ENSURE(h->slot_count >= 2 && h->slot_count <= GT_SIM_MAX_SLOTS, GT_E_FORMAT,
              "server hello: %u bounce slots (2..%u)", h->slot_count, GT_SIM_MAX_SLOTS);
    GT_ENSURE(h->slot_bytes >= GT_SIM_MIN_SLOT_BYTES && h->slot_bytes <= GT_SIM_MAX_SLOT_BYTES &&
                  h->slot_bytes % 4096 == 0,
              GT_E_FORMAT, "server hello: bounce slot of %u bytes", h->slot_bytes);
    return GT_OK;
}

static gt_err status_write(gt_writer *w, uint32_t code, const char *msg)
{
    size_t n = strnlen(msg, GT_SIM_MAX_STATUS_MSG);
    GT_TRY(gt_writer_u32le(w, code));
    GT_TRY(gt_writer_u16le(w, (uint16_t)n));
    GT_TRY(gt_writer_bytes(w, msg, n));
    return GT_OK;
}

// STAT's pager counters (version 3), the prefetcher's (version 4), the mmap calls and split
// matmuls (version 6) and the discards (version 7), in the order of gt_sim_stat: one list, so
// that writer and parser cannot disagree.
#define STAT_PAGING_FIELDS 19

static void stat_paging_fields(gt_sim_stat *st, uint64_t *v[STAT_PAGING_FIELDS])
{
    uint64_t *f[STAT_PAGING_FIELDS] = {
        &st->page_bytes, &st->paging_cap, &st->resident, &st->peak_resident, &st->evicted,
        &st->page_outs, &st->fault_ins, &st->clean_drops, &st->prefetch, &st->demand_faults,
        &st->prefetch_issued, &st->prefetch_hits, &st->prefetch_wasted, &st->assist_faults,
        &st->pre_evictions, &st->mispredicts, &st->map_calls, &st->ops_in_parts,
        &st->discards};
    memcpy(v, f, sizeof f);
}

static gt_err stat_paging_write(gt_writer *w, const gt_sim_stat *st)
{
    gt_sim_stat copy = *st;
    uint64_t *v[STAT_PAGING_FIELDS];
    stat_paging_fields(&copy, v);
    for (int i = 0; i < STAT_PAGING_FIELDS; i++) {
        GT_TRY(gt_writer_u64le(w, *v[i]));
    }
    return GT_OK;
}

static gt_err stat_paging_parse(gt_reader *r, gt_sim_stat *st)
{
    uint64_t *v[STAT_PAGING_FIELDS];
    stat_paging_fields(st, v);
    for (int i = 0; i < STAT_PAGING_FIELDS; i++) {
        GT_TRY(gt_reader_u64le(r, v[i]));
    }
    GT_ENSURE(st->prefetch <= 1, GT_E_FORMAT, "stat_reply: prefetch flag %llu",
              (unsigned long long)st->prefetch);
    return GT_OK;
}

static gt_err status_parse(gt_reader *r, gt_sim_status *s)
{
    uint16_t n = 0;
    GT_TRY(gt_reader_u32le(r, &s->code));
    GT_TRY(gt_reader_u16le(r, &n));
    GT_ENSURE(n <= GT_SIM_MAX_STATUS_MSG, GT_E_FORMAT, "status: message of %u bytes", n);
    GT_ENSURE(s->code < GT_E_COUNT_, GT_E_FORMAT, "status: unknown code %u", s->code);
    GT_TRY(gt_reader_bytes(r, s->msg, n));
    s->msg[n] = '\0';
    for (uint16_t i = 0; i < n; i++) {  // text for an operator: printable ASCII only
        if ((unsigned char)s->msg[i] < 0x20 || (unsigned char)s->msg[i] > 0x7e) {
            s->msg[i] = '?';
        }
    }
    return GT_OK;
}

gt_err gt_sim_refuse_write(gt_writer *w, gt_err reason)
{
    GT_TRY(gt_writer_u16le(w, GT_SIM_MSG_REFUSE));
    return status_write(w, (uint32_t)reason.code, reason.msg);
}

gt_err gt_sim_refuse_parse(gt_span body, gt_sim_status *refused)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t type = 0;
    gt_sim_status s = {0};
    GT_TRY(gt_reader_u16le(&r, &type));
    GT_ENSURE(type == GT_SIM_MSG_REFUSE, GT_E_FORMAT, "not a refuse message (0x%04x)", type);
    GT_TRY(status_parse(&r, &s));
    GT_TRY(gt_reader_expect_end(&r, "refuse"));
    *refused = s;
    return GT_OK;
}

gt_err gt_sim_client_report_data(uint8_t rd[GT_REPORT_DATA_BYTES], const gt_sim_client_hello *h)
{
    uint8_t nonces[2 * GT_SIM_NONCE_BYTES];
    memcpy(nonces, h->nonce, GT_SIM_NONCE_BYTES);
    memcpy(nonces + GT_SIM_NONCE_BYTES, h->server_nonce, GT_SIM_NONCE_BYTES);
    return gt_attest_report_data_build(rd, GT_SIM_TAG_CLIENT_RD, nonces, sizeof nonces, h->pub,
                                       sizeof h->pub, h->agreement, sizeof h->agreement);
}

gt_err gt_sim_device_report_data(uint8_t rd[GT_REPORT_DATA_BYTES],
                                 const uint8_t client_nonce[GT_SIM_NONCE_BYTES],
                                 const gt_sim_server_hello *sh, gt_span client_hello_body)
{
    uint8_t th[GT_SHA512_BYTES], params[16];
    gt_store_u32le(params, sh->slot_count);
    gt_store_u32le(params + 4, sh->slot_bytes);
    gt_store_u64le(params + 8, sh->mem_limit);
    gt_hash_ctx *h = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA512), out);
    GT_TRY_GOTO(err, gt_hash_update(h, client_hello_body.data, client_hello_body.len), out);
    GT_TRY_GOTO(err, gt_hash_update(h, params, sizeof params), out);
    GT_TRY_GOTO(err, gt_hash_final(h, th), out);
    GT_TRY_GOTO(err, gt_attest_report_data_build(rd, GT_SIM_TAG_DEVICE_RD, client_nonce,
                                                 GT_SIM_NONCE_BYTES, sh->pub, sizeof sh->pub, th,
                                                 sizeof th), out);
out:
    gt_hash_free(h);
    return err;
}

// ---- keys and IVs -------------------------------------------------------------------------------

gt_err gt_sim_keys_derive(gt_sim_keys *keys, bool is_client, const uint8_t shared[GT_X25519_BYTES],
                          gt_span client_hello_body, gt_span server_hello_body)
{
    gt_err err = GT_OK;
    gt_hash_ctx *h = NULL;
    uint8_t salt[GT_SHA512_BYTES];
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA512), out);
    GT_TRY_GOTO(err, gt_hash_update(h, client_hello_body.data, client_hello_body.len), out);
    GT_TRY_GOTO(err, gt_hash_update(h, server_hello_body.data, server_hello_body.len), out);
    GT_TRY_GOTO(err, gt_hash_final(h, salt), out);
    memset(keys, 0, sizeof *keys);
    keys->is_client = is_client;
    GT_TRY_GOTO(err, gt_hkdf(GT_HASH_SHA512, keys->key_c2s, sizeof keys->key_c2s, shared,
                             GT_X25519_BYTES, salt, sizeof salt, (const uint8_t *)GT_SIM_INFO_C2S,
                             sizeof(GT_SIM_INFO_C2S) - 1), out);
    GT_TRY_GOTO(err, gt_hkdf(GT_HASH_SHA512, keys->key_s2c, sizeof keys->key_s2c, shared,
                             GT_X25519_BYTES, salt, sizeof salt, (const uint8_t *)GT_SIM_INFO_S2C,
                             sizeof(GT_SIM_INFO_S2C) - 1), out);
    GT_TRY_GOTO(err, gt_hash(GT_HASH_SHA256, keys->server_hello_hash, server_hello_body.data,
                             server_hello_body.len), out);
out:
    if (!gt_is_ok(err)) {
        gt_secure_zero(keys, sizeof *keys);
    }
    gt_hash_free(h);
    return err;
}

gt_err gt_sim_iv_next(gt_sim_keys *keys, int stream, uint8_t iv[GT_AEAD_IV_BYTES])
{
    GT_ENSURE(stream >= GT_SIM_STREAM_CTRL_C2S && stream <= GT_SIM_STREAM_BULK_S2C, GT_E_ARG,
              "sim session: stream %d", stream);
    GT_ENSURE(keys->counter[stream] != UINT64_MAX, GT_E_LIMIT,
              "sim session: IV counter exhausted on stream %d", stream);
    gt_store_u32be(iv, (uint32_t)stream);
    gt_store_u64be(iv + 4, keys->counter[stream]++);
    return GT_OK;
}

const uint8_t *gt_sim_stream_key(const gt_sim_keys *keys, int stream)
{
    bool c2s = stream == GT_SIM_STREAM_CTRL_C2S || stream == GT_SIM_STREAM_BULK_C2S;
    return c2s ? keys->key_c2s : keys->key_s2c;
}

// ---- records ------------------------------------------------------------------------------------

static void rec_aad(uint8_t aad[sizeof(GT_SIM_AAD_REC) - 1 + 4], size_t body_len)
{
    memcpy(aad, GT_SIM_AAD_REC, sizeof(GT_SIM_AAD_REC) - 1);
    gt_store_u32le(aad + sizeof(GT_SIM_AAD_REC) - 1, (uint32_t)body_len);
}

gt_err gt_sim_record_seal(gt_sim_keys *keys, uint8_t *out, size_t out_cap, size_t *out_len,
                          const uint8_t *plain, size_t plain_len)
{
    int stream = keys->is_client ? GT_SIM_STREAM_CTRL_C2S : GT_SIM_STREAM_CTRL_S2C;
    uint8_t iv[GT_AEAD_IV_BYTES];
    uint8_t aad[sizeof(GT_SIM_AAD_REC) - 1 + 4];
    GT_ENSURE(plain_len + GT_AEAD_TAG_BYTES <= GT_SIM_MAX_FRAME, GT_E_LIMIT,
              "sim record of %zu bytes", plain_len);
    rec_aad(aad, plain_len + GT_AEAD_TAG_BYTES);
    GT_TRY(gt_sim_iv_next(keys, stream, iv));
    return gt_aead_seal(out, out_cap, out_len, plain, plain_len, aad, sizeof aad, iv,
                        gt_sim_stream_key(keys, stream));
}

gt_err gt_sim_record_open(gt_sim_keys *keys, uint8_t *plain, size_t plain_cap, size_t *plain_len,
                          gt_span body)
{
    int stream = keys->is_client ? GT_SIM_STREAM_CTRL_S2C : GT_SIM_STREAM_CTRL_C2S;
    uint8_t iv[GT_AEAD_IV_BYTES];
    uint8_t aad[sizeof(GT_SIM_AAD_REC) - 1 + 4];
    *plain_len = 0;
    GT_ENSURE(body.len >= GT_AEAD_TAG_BYTES && body.len - GT_AEAD_TAG_BYTES <= plain_cap,
              GT_E_AUTH, "sim session: control record authentication failed");
    rec_aad(aad, body.len);
    GT_TRY(gt_sim_iv_next(keys, stream, iv));
    gt_err err = gt_aead_open(plain, plain_cap, plain_len, body.data, body.len, aad, sizeof aad,
                              iv, gt_sim_stream_key(keys, stream));
    if (!gt_is_ok(err)) {
        return gt_errf(GT_E_AUTH, "sim session: control record authentication failed");
    }
    return GT_OK;
}

void gt_sim_bulk_aad(uint8_t aad[GT_SIM_BULK_AAD_BYTES], uint64_t handle, uint64_t offset,
                     uint32_t len)
{
    size_t n = sizeof(GT_SIM_AAD_BULK) - 1;
    memcpy(aad, GT_SIM_AAD_BULK, n);
    gt_store_u64le(aad + n, handle);
    gt_store_u64le(aad + n + 8, offset);
    gt_store_u32le(aad + n + 16, len);
}

// ---- control messages ---------------------------------------------------------------------------

gt_err gt_sim_op_write(gt_writer *w, const gt_op *op)
{
    GT_TRY(gt_writer_u32le(w, op->kind));
    for (int i = 0; i < GT_OP_MAX_REFS; i++) {
        GT_TRY(gt_writer_u64le(w, op->refs[i].buf));
        GT_TRY(gt_writer_u64le(w, op->refs[i].offset));
    }
    for (int i = 0; i < GT_OP_MAX_INTS; i++) {
        GT_TRY(gt_writer_u64le(w, (uint64_t)op->ints[i]));
    }
    for (int i = 0; i < GT_OP_MAX_FLOATS; i++) {
        uint32_t bits = 0;
        memcpy(&bits, &op->floats[i], sizeof bits);
        GT_TRY(gt_writer_u32le(w, bits));
    }
    return GT_OK;
}

gt_err gt_sim_op_parse(gt_reader *r, gt_op *op)
{
    gt_op o;
    memset(&o, 0, sizeof o);
    GT_TRY(gt_reader_u32le(r, &o.kind));
    for (int i = 0; i < GT_OP_MAX_REFS; i++) {
        GT_TRY(gt_reader_u64le(r, &o.refs[i].buf));
        GT_TRY(gt_reader_u64le(r, &o.refs[i].offset));
    }
    for (int i = 0; i < GT_OP_MAX_INTS; i++) {
        uint64_t v = 0;
        GT_TRY(gt_reader_u64le(r, &v));
        o.ints[i] = (int64_t)v;
    }
    for (int i = 0; i < GT_OP_MAX_FLOATS; i++) {
        uint32_t bits = 0;
        GT_TRY(gt_reader_u32le(r, &bits));
        memcpy(&o.floats[i], &bits, sizeof bits);
    }
    *op = o;
    return GT_OK;
}

const char *gt_sim_msg_name(uint16_t type)
{
    switch (type) {
    case GT_SIM_REQ_ALLOC: return "alloc";
    case GT_SIM_REQ_FREE: return "free";
    case GT_SIM_REQ_SIZE: return "size";
    case GT_SIM_REQ_MEMSET: return "memset";
    case GT_SIM_REQ_COPY_IN: return "copy_in";
    case GT_SIM_REQ_COPY_OUT: return "copy_out";
    case GT_SIM_REQ_LAUNCH: return "launch";
    case GT_SIM_REQ_SYNC: return "sync";
    case GT_SIM_REQ_BYE: return "bye";
    case GT_SIM_REQ_STAT: return "stat";
    case GT_SIM_MSG_CHUNK: return "chunk";
    case GT_SIM_MSG_SLOT_FREE: return "slot_free";
    case GT_SIM_REP_STATUS: return "status";
    case GT_SIM_REP_HANDLE: return "handle";
    case GT_SIM_REP_SIZE: return "size_reply";
    case GT_SIM_REP_STAT: return "stat_reply";
    case GT_SIM_REQ_LEND: return "lend";
    case GT_SIM_REQ_TRIP_STATUS: return "trip_status";
    case GT_SIM_REQ_RECALL: return "recall";
    case GT_SIM_REQ_ATTACH: return "attach";
    case GT_SIM_REQ_LOAD_SEALED: return "load_sealed";
    case GT_SIM_REQ_RETURN: return "return";
    case GT_SIM_REQ_RETURN_STAY: return "return_stay";
    case GT_SIM_REQ_LOAD_SEALED_FD: return "load_sealed_fd";
    case GT_SIM_REQ_LOAD_SEALED_WRAPPED: return "load_sealed_wrapped";
    case GT_SIM_REP_TICKET: return "ticket";
    case GT_SIM_REP_TRIP: return "trip";
    case GT_SIM_REP_LOADED: return "loaded";
    case GT_SIM_REQ_RETURN_IPC: return "return_ipc";
    case GT_SIM_REP_RELEASED: return "released";
    case GT_SIM_REQ_EXPORT_CHECKPOINT: return "export_checkpoint";
    case GT_SIM_REQ_EXPORT_SIGNER: return "export_signer";
    case GT_SIM_REQ_EXPORT_RESUME: return "export_resume";
    case GT_SIM_REQ_IMPORT_RESUME: return "import_resume";
    case GT_SIM_REP_EXPORTED: return "exported";
    case GT_SIM_REP_SIGNER: return "signer";
    case GT_SIM_REP_RESUMED: return "resumed";
    case GT_SIM_REQ_PEER_HELLO: return "peer_hello";
    case GT_SIM_REQ_PEER_ADMIT: return "peer_admit";
    case GT_SIM_REQ_PEER_RUN_ID: return "peer_run_id";
    case GT_SIM_REQ_PEER_SEAL: return "peer_seal";
    case GT_SIM_REQ_PEER_OPEN: return "peer_open";
    case GT_SIM_REP_PEER_RUN: return "peer_run";
    case GT_SIM_REQ_LABEL_ADD: return "label_add";
    case GT_SIM_REQ_LABEL_GET: return "label_get";
    case GT_SIM_REQ_DECLARE: return "declare";
    case GT_SIM_REQ_OUTPUTS: return "outputs";
    case GT_SIM_REQ_PIN: return "pin";
    case GT_SIM_REP_LABEL: return "label";
    case GT_SIM_REP_OUTPUTS: return "outputs_reply";
    default: return "unknown";
    }
}

// ---- exports (EXPORT_*, IMPORT_RESUME and their replies), kept apart from the table below ----

static bool export_type(uint16_t type)
{
    return (type >= GT_SIM_REQ_EXPORT_CHECKPOINT && type <= GT_SIM_REQ_IMPORT_RESUME) ||
           (type >= GT_SIM_REP_EXPORTED && type <= GT_SIM_REP_RESUMED);
}

static gt_err loader_write(gt_writer *w, const gt_sim_loader *l)
{
    const uint64_t v[5] = {l->epoch, l->shard, l->sample, l->sample_tokens, l->seed};
    for (int i = 0; i < 5; i++) {
        GT_TRY(gt_writer_u64le(w, v[i]));
    }
    return gt_writer_u32le(w, l->shuffle);
}

static gt_err loader_parse(gt_reader *r, gt_sim_loader *l)
{
    uint64_t *v[5] = {&l->epoch, &l->shard, &l->sample, &l->sample_tokens, &l->seed};
    for (int i = 0; i < 5; i++) {
        GT_TRY(gt_reader_u64le(r, v[i]));
    }
    GT_TRY(gt_reader_u32le(r, &l->shuffle));
    GT_ENSURE(l->shuffle <= 1, GT_E_FORMAT, "loader: shuffle %u", l->shuffle);
    return GT_OK;
}

static gt_err config_write(gt_writer *w, const uint32_t c[6])
{
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_writer_u32le(w, c[i]));
    }
    return GT_OK;
}

static gt_err config_parse(gt_reader *r, uint32_t c[6])
{
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_reader_u32le(r, &c[i]));
    }
    return GT_OK;
}

static gt_err export_write(gt_writer *w, const gt_sim_msg *m)
{
    switch (m->type) {
    case GT_SIM_REQ_EXPORT_CHECKPOINT:
        GT_TRY(gt_writer_u64le(w, m->handle));
        GT_TRY(gt_writer_u64le(w, m->offset));
        GT_TRY(gt_writer_u64le(w, m->len));
        GT_TRY(gt_writer_u64le(w, m->step));
        return config_write(w, m->config);
    case GT_SIM_REQ_EXPORT_SIGNER:
        return GT_OK;
    case GT_SIM_REQ_EXPORT_RESUME:
        for (int i = 0; i < 3; i++) {
            GT_TRY(gt_writer_u64le(w, m->bufs[i]));
        }
        GT_TRY(gt_writer_u64le(w, m->len));
        GT_TRY(gt_writer_u64le(w, m->step));
        GT_TRY(loader_write(w, &m->loader));
        return config_write(w, m->config);
    case GT_SIM_REQ_IMPORT_RESUME:
        GT_TRY(gt_writer_u64le(w, m->handle));
        GT_TRY(gt_writer_u64le(w, m->len));
        for (int i = 0; i < 3; i++) {
            GT_TRY(gt_writer_u64le(w, m->bufs[i]));
        }
        return GT_OK;
    case GT_SIM_REP_EXPORTED:
        GT_TRY(gt_writer_u64le(w, m->handle));
        return gt_writer_u64le(w, m->len);
    case GT_SIM_REP_SIGNER:
        return gt_writer_bytes(w, m->export_key, sizeof m->export_key);
    default:  // RESUMED
        GT_TRY(gt_writer_u64le(w, m->step));
        return loader_write(w, &m->loader);
    }
}

static gt_err export_parse(gt_reader *r, gt_sim_msg *m)
{
    switch (m->type) {
    case GT_SIM_REQ_EXPORT_CHECKPOINT:
        GT_TRY(gt_reader_u64le(r, &m->handle));
        GT_TRY(gt_reader_u64le(r, &m->offset));
        GT_TRY(gt_reader_u64le(r, &m->len));
        GT_TRY(gt_reader_u64le(r, &m->step));
        return config_parse(r, m->config);
    case GT_SIM_REQ_EXPORT_SIGNER:
        return GT_OK;
    case GT_SIM_REQ_EXPORT_RESUME:
        for (int i = 0; i < 3; i++) {
            GT_TRY(gt_reader_u64le(r, &m->bufs[i]));
        }
        GT_TRY(gt_reader_u64le(r, &m->len));
        GT_TRY(gt_reader_u64le(r, &m->step));
        GT_TRY(loader_parse(r, &m->loader));
        return config_parse(r, m->config);
    case GT_SIM_REQ_IMPORT_RESUME:
        GT_TRY(gt_reader_u64le(r, &m->handle));
        GT_TRY(gt_reader_u64le(r, &m->len));
        for (int i = 0; i < 3; i++) {
            GT_TRY(gt_reader_u64le(r, &m->bufs[i]));
        }
        return GT_OK;
    case GT_SIM_REP_EXPORTED:
        GT_TRY(gt_reader_u64le(r, &m->handle));
        return gt_reader_u64le(r, &m->len);
    case GT_SIM_REP_SIGNER:
        return gt_reader_bytes(r, m->export_key, sizeof m->export_key);
    default:  // RESUMED
        GT_TRY(gt_reader_u64le(r, &m->step));
        return loader_parse(r, &m->loader);
    }
}

// The label and declaration messages (issue 13), kept apart from the long tables below.
static gt_err label_msg_write(gt_writer *w, const gt_sim_msg *m)
{
    switch (m->type) {
    case GT_SIM_REQ_LABEL_ADD:
        GT_TRY(gt_writer_u64le(w, m->handle));
        return gt_writer_bytes(w, m->label_ids[0], GT_SIM_LABEL_ID_BYTES);
    case GT_SIM_REQ_LABEL_GET:
        return gt_writer_u64le(w, m->handle);
    case GT_SIM_REQ_DECLARE:
    case GT_SIM_REQ_PIN:
        GT_TRY(gt_writer_u64le(w, m->handle));
        return gt_writer_u64le(w, m->len);
    case GT_SIM_REQ_OUTPUTS:
        return GT_OK;
    case GT_SIM_REP_LABEL:
        GT_ENSURE(m->label_n <= GT_SIM_LABEL_IDS && m->label_n <= m->count, GT_E_ARG,
                  "sim: label reply with %u of %u ids", m->label_n, m->count);
        GT_TRY(gt_writer_u32le(w, m->count));
        GT_TRY(gt_writer_u32le(w, m->label_n));
        return gt_writer_bytes(w, m->label_ids, (size_t)m->label_n * GT_SIM_LABEL_ID_BYTES);
    case GT_SIM_REP_OUTPUTS: {
        const gt_sim_outputs *o = &m->outputs;
        GT_TRY(gt_writer_u8(w, o->loss));
        GT_TRY(gt_writer_u32le(w, o->loss_bits));
        GT_TRY(gt_writer_u64le(w, o->loss_budget));
        GT_TRY(gt_writer_u8(w, o->grad_norm));
        GT_TRY(gt_writer_u64le(w, o->grad_norm_budget));
        GT_TRY(gt_writer_u8(w, o->checkpoint));
        return gt_writer_u8(w, o->resume);
    }
    default:
        return gt_errf(GT_E_ARG, "sim: cannot write message type 0x%04x", m->type);
    }
}

static gt_err read_bool(gt_reader *r, bool *out, const char *what)
{
    uint8_t b = 0;
    GT_TRY(gt_reader_u8(r, &b));
    GT_ENSURE(b <= 1, GT_E_FORMAT, "outputs: %s is %u, not 0 or 1", what, b);
    *out = b == 1;
    return GT_OK;
}

static gt_err label_msg_parse(gt_reader *r, gt_sim_msg *m)
{
    switch (m->type) {
    case GT_SIM_REQ_LABEL_ADD:
        GT_TRY(gt_reader_u64le(r, &m->handle));
        return gt_reader_bytes(r, m->label_ids[0], GT_SIM_LABEL_ID_BYTES);
    case GT_SIM_REQ_LABEL_GET:
        return gt_reader_u64le(r, &m->handle);
    case GT_SIM_REQ_DECLARE:
    case GT_SIM_REQ_PIN:
        GT_TRY(gt_reader_u64le(r, &m->handle));
        return gt_reader_u64le(r, &m->len);
    case GT_SIM_REQ_OUTPUTS:
        return GT_OK;
    case GT_SIM_REP_LABEL:
        GT_TRY(gt_reader_u32le(r, &m->count));
        GT_TRY(gt_reader_u32le(r, &m->label_n));
        GT_ENSURE(m->count <= 64 && m->label_n <= GT_SIM_LABEL_IDS && m->label_n <= m->count,
                  GT_E_FORMAT, "label: %u of %u ids", m->label_n, m->count);
        return gt_reader_bytes(r, m->label_ids, (size_t)m->label_n * GT_SIM_LABEL_ID_BYTES);
    case GT_SIM_REP_OUTPUTS: {
        gt_sim_outputs *o = &m->outputs;
        GT_TRY(read_bool(r, &o->loss, "loss"));
        GT_TRY(gt_reader_u32le(r, &o->loss_bits));
        GT_TRY(gt_reader_u64le(r, &o->loss_budget));
        GT_TRY(read_bool(r, &o->grad_norm, "grad_norm"));
        GT_TRY(gt_reader_u64le(r, &o->grad_norm_budget));
        GT_TRY(read_bool(r, &o->checkpoint, "checkpoint"));
        GT_TRY(read_bool(r, &o->resume, "resume"));
        GT_ENSURE(o->loss_bits <= 23, GT_E_FORMAT, "outputs: %u loss bits", o->loss_bits);
        return GT_OK;
    }
    default:
        return gt_errf(GT_E_FORMAT, "sim: unknown message type 0x%04x", m->type);
    }
}

// The families kept apart from the flat table below: peers, exports, labels.
static gt_err family_write(gt_writer *w, const gt_sim_msg *m)
{
    if (gt_sim_peer_type(m->type)) {
        return gt_sim_peer_msg_write(w, m);
    }
    return export_type(m->type) ? export_write(w, m) : label_msg_write(w, m);
}

// long: one flat table of per-type field writes, mirroring gt_sim_msg_parse; clearer whole
gt_err gt_sim_msg_write(gt_writer *w, const gt_sim_msg *m)
{
    GT_TRY(gt_writer_u16le(w, m->type));
    switch (m->type) {
    case GT_SIM_REQ_ALLOC:
        GT_TRY(gt_writer_u64le(w, m->len));
        GT_TRY(gt_writer_u32le(w, m->flags));
        return GT_OK;
    case GT_SIM_REQ_FREE:
    case GT_SIM_REQ_SIZE:
    case GT_SIM_REP_HANDLE:
        return gt_writer_u64le(w, m->handle);
    case GT_SIM_REP_SIZE:
        return gt_writer_u64le(w, m->len);
    case GT_SIM_REQ_MEMSET:
        GT_TRY(gt_writer_u64le(w, m->handle));
        GT_TRY(gt_writer_u64le(w, m->offset));
        GT_TRY(gt_writer_u32le(w, m->value));
        return gt_writer_u64le(w, m->len);
    case GT_SIM_REQ_COPY_IN:
    case GT_SIM_REQ_COPY_OUT:
        GT_TRY(gt_writer_u64le(w, m->handle));
        GT_TRY(gt_writer_u64le(w, m->offset));
        return gt_writer_u64le(w, m->len);
    case GT_SIM_REQ_LAUNCH:
        return gt_sim_op_write(w, &m->op);
    case GT_SIM_REQ_SYNC:
    case GT_SIM_REQ_BYE:
    case GT_SIM_REQ_STAT:
    case GT_SIM_REQ_TRIP_STATUS:
    case GT_SIM_REQ_RECALL:
    case GT_SIM_REQ_RETURN:
    case GT_SIM_REQ_RETURN_STAY:
    case GT_SIM_REP_RELEASED:
        return GT_OK;
    case GT_SIM_REQ_RETURN_IPC:
        GT_TRY(gt_writer_bytes(w, m->ipc, sizeof m->ipc));
        return gt_writer_bytes(w, m->aad, sizeof m->aad);
    case GT_SIM_REQ_LEND:
        return gt_writer_u32le(w, m->ms);
    case GT_SIM_REQ_ATTACH:
    case GT_SIM_REP_TICKET:
        return gt_writer_bytes(w, m->ticket, sizeof m->ticket);
    case GT_SIM_REQ_LOAD_SEALED:
    case GT_SIM_REQ_LOAD_SEALED_FD:
    case GT_SIM_REQ_LOAD_SEALED_WRAPPED:
        GT_TRY(gt_writer_u64le(w, m->handle));
        GT_TRY(gt_writer_u64le(w, m->offset));
        GT_TRY(gt_writer_u64le(w, m->len));
        if (m->type != GT_SIM_REQ_LOAD_SEALED) {
            GT_TRY(gt_writer_u64le(w, m->file_offset));
        }
        GT_TRY(gt_writer_bytes(w, m->iv, sizeof m->iv));
        GT_TRY(gt_writer_bytes(w, m->aad, sizeof m->aad));
        GT_TRY(gt_writer_u32le(w, m->seg_bytes));
        return m->type == GT_SIM_REQ_LOAD_SEALED_WRAPPED
                   ? gt_writer_bytes(w, m->wrapped, sizeof m->wrapped)
                   : gt_writer_bytes(w, m->key, sizeof m->key);
    case GT_SIM_REP_TRIP:
        GT_TRY(gt_writer_u32le(w, m->state));
        GT_TRY(gt_writer_u32le(w, m->code));
        return gt_writer_u32le(w, m->count);
    case GT_SIM_REP_LOADED:
        GT_TRY(gt_writer_u64le(w, m->handle));
        return gt_writer_u64le(w, m->len);
    case GT_SIM_MSG_CHUNK:
        GT_TRY(gt_writer_u32le(w, m->slot));
        return gt_writer_u32le(w, (uint32_t)m->len);
    case GT_SIM_MSG_SLOT_FREE:
        return gt_writer_u32le(w, m->slot);
    case GT_SIM_REP_STATUS:
        return status_write(w, m->status.code, m->status.msg);
    case GT_SIM_REP_STAT:
        GT_TRY(gt_writer_u64le(w, m->stat.sessions));
        GT_TRY(gt_writer_u64le(w, m->stat.bytes_in_use));
        GT_TRY(gt_writer_u64le(w, m->stat.bytes_wiped));
        GT_TRY(gt_writer_u64le(w, m->stat.buffers_live));
        GT_TRY(gt_writer_u64le(w, m->stat.mem_limit));
        return stat_paging_write(w, &m->stat);
    default:
        return family_write(w, m);
    }
}

// long: one flat table of per-type field reads, mirroring gt_sim_msg_write; clearer whole
gt_err gt_sim_msg_parse(gt_span plain, gt_sim_msg *out)
{
    gt_reader r = gt_reader_init(plain.data, plain.len);
    gt_sim_msg m;
    memset(&m, 0, sizeof m);
    uint32_t u32 = 0;
    GT_TRY(gt_reader_u16le(&r, &m.type));
    // Every export type takes one case here: export_parse reads its fields.
    switch (export_type(m.type) ? GT_SIM_REQ_EXPORT_CHECKPOINT : m.type) {
    case GT_SIM_REQ_EXPORT_CHECKPOINT:
        GT_TRY(export_parse(&r, &m));
        break;
    case GT_SIM_REQ_ALLOC:
        GT_TRY(gt_reader_u64le(&r, &m.len));
        GT_TRY(gt_reader_u32le(&r, &m.flags));
        break;
    case GT_SIM_REQ_FREE:
    case GT_SIM_REQ_SIZE:
    case GT_SIM_REP_HANDLE:
        GT_TRY(gt_reader_u64le(&r, &m.handle));
        break;
    case GT_SIM_REP_SIZE:
        GT_TRY(gt_reader_u64le(&r, &m.len));
        break;
    case GT_SIM_REQ_MEMSET:
        GT_TRY(gt_reader_u64le(&r, &m.handle));
        GT_TRY(gt_reader_u64le(&r, &m.offset));
        GT_TRY(gt_reader_u32le(&r, &m.value));
        GT_TRY(gt_reader_u64le(&r, &m.len));
        GT_ENSURE(m.value <= 0xff, GT_E_FORMAT, "memset: value %u is not a byte", m.value);
        break;
    case GT_SIM_REQ_COPY_IN:
    case GT_SIM_REQ_COPY_OUT:
        GT_TRY(gt_reader_u64le(&r, &m.handle));
        GT_TRY(gt_reader_u64le(&r, &m.offset));
        GT_TRY(gt_reader_u64le(&r, &m.len));
        break;
    case GT_SIM_REQ_LAUNCH:
        GT_TRY(gt_sim_op_parse(&r, &m.op));
        break;
    case GT_SIM_REQ_SYNC:
    case GT_SIM_REQ_BYE:
    case GT_SIM_REQ_STAT:
    case GT_SIM_REQ_TRIP_STATUS:
    case GT_SIM_REQ_RECALL:
    case GT_SIM_REQ_RETURN:
    case GT_SIM_REQ_RETURN_STAY:
    case GT_SIM_REP_RELEASED:
        break;
    case GT_SIM_REQ_RETURN_IPC:
        GT_TRY(gt_reader_bytes(&r, m.ipc, sizeof m.ipc));
        GT_TRY(gt_reader_bytes(&r, m.aad, sizeof m.aad));
        break;
    case GT_SIM_REQ_LEND:
        GT_TRY(gt_reader_u32le(&r, &m.ms));
        break;
    case GT_SIM_REQ_ATTACH:
    case GT_SIM_REP_TICKET:
        GT_TRY(gt_reader_bytes(&r, m.ticket, sizeof m.ticket));
        break;
    case GT_SIM_REQ_LOAD_SEALED:
    case GT_SIM_REQ_LOAD_SEALED_FD:
    case GT_SIM_REQ_LOAD_SEALED_WRAPPED:
        GT_TRY(gt_reader_u64le(&r, &m.handle));
        GT_TRY(gt_reader_u64le(&r, &m.offset));
        GT_TRY(gt_reader_u64le(&r, &m.len));
        if (m.type != GT_SIM_REQ_LOAD_SEALED) {
            GT_TRY(gt_reader_u64le(&r, &m.file_offset));
        }
        GT_TRY(gt_reader_bytes(&r, m.iv, sizeof m.iv));
        GT_TRY(gt_reader_bytes(&r, m.aad, sizeof m.aad));
        GT_TRY(gt_reader_u32le(&r, &m.seg_bytes));
        if (m.type == GT_SIM_REQ_LOAD_SEALED_WRAPPED) {
            GT_TRY(gt_reader_bytes(&r, m.wrapped, sizeof m.wrapped));
        } else {
            GT_TRY(gt_reader_bytes(&r, m.key, sizeof m.key));
        }
        break;
    case GT_SIM_REP_TRIP:
        GT_TRY(gt_reader_u32le(&r, &m.state));
        GT_TRY(gt_reader_u32le(&r, &m.code));
        GT_TRY(gt_reader_u32le(&r, &m.count));
        GT_ENSURE(m.state <= GT_SIM_TRIP_FAILED && m.count <= GT_SIM_MAX_TRIP_BUFFERS,
                  GT_E_FORMAT, "trip: state %u, %u buffers", m.state, m.count);
        break;
    case GT_SIM_REP_LOADED:
        GT_TRY(gt_reader_u64le(&r, &m.handle));
        GT_TRY(gt_reader_u64le(&r, &m.len));
        break;
    case GT_SIM_MSG_CHUNK:
        GT_TRY(gt_reader_u32le(&r, &m.slot));
        GT_TRY(gt_reader_u32le(&r, &u32));
        m.len = u32;
        GT_ENSURE(m.slot < GT_SIM_MAX_SLOTS, GT_E_FORMAT, "chunk: slot %u", m.slot);
        break;
    case GT_SIM_MSG_SLOT_FREE:
        GT_TRY(gt_reader_u32le(&r, &m.slot));
        GT_ENSURE(m.slot < GT_SIM_MAX_SLOTS, GT_E_FORMAT, "slot_free: slot %u", m.slot);
        break;
    case GT_SIM_REP_STATUS:
        GT_TRY(status_parse(&r, &m.status));
        break;
    case GT_SIM_REP_STAT:
        GT_TRY(gt_reader_u64le(&r, &m.stat.sessions));
        GT_TRY(gt_reader_u64le(&r, &m.stat.bytes_in_use));
        GT_TRY(gt_reader_u64le(&r, &m.stat.bytes_wiped));
        GT_TRY(gt_reader_u64le(&r, &m.stat.buffers_live));
        GT_TRY(gt_reader_u64le(&r, &m.stat.mem_limit));
        GT_TRY(stat_paging_parse(&r, &m.stat));
        break;
    default:
        GT_TRY(gt_sim_peer_type(m.type) ? gt_sim_peer_msg_parse(&r, &m)
                                        : label_msg_parse(&r, &m));
        break;
    }
    gt_err err = gt_reader_expect_end(&r, gt_sim_msg_name(m.type));
    if (gt_is_ok(err)) {
        *out = m;
    }
    gt_secure_zero(&m, sizeof m);  // LOAD_SEALED carries a chunk key
    return err;
}

const char *gt_sim_trip_state_name(uint32_t state)
{
    switch (state) {
    case GT_SIM_TRIP_AT_TRAINER: return "at_trainer";
    case GT_SIM_TRIP_LENT: return "lent";
    case GT_SIM_TRIP_ATTACHED: return "attached";
    case GT_SIM_TRIP_LOADED: return "loaded";
    case GT_SIM_TRIP_RETURNED: return "returned";
    case GT_SIM_TRIP_FAILED: return "failed";
    default: return "unknown";
    }
}

void gt_sim_msg_status(gt_sim_msg *m, gt_err e)
{
    memset(m, 0, sizeof *m);
    m->type = GT_SIM_REP_STATUS;
    m->status.code = (uint32_t)e.code;
    size_t n = strnlen(e.msg, GT_SIM_MAX_STATUS_MSG);
    memcpy(m->status.msg, e.msg, n);
    m->status.msg[n] = '\0';
}

gt_err gt_sim_status_err(const gt_sim_status *s)
{
    if (s->code == GT_E_NONE) {
        return GT_OK;
    }
    return gt_errf((gt_code)s->code, "%s", s->msg[0] ? s->msg : gt_code_text((gt_code)s->code));
}
