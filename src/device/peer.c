// The peer core (device.h "peers", issue 16): hellos, admission, pairwise keys and the sealed
// chunk format, shared by the in-process backends (device.c calls it on the trainer's own
// memory) and devd (which calls it on its arena). Everything from a peer is parsed here through
// gt_reader; nothing is written to a destination before the header, the sequence number and the
// tag are all checked.
#include <gputravel/device.h>

#include <gputravel/attest.h>

#include <stdlib.h>
#include <string.h>

typedef struct {
    bool admitted;
    gt_buf hello;                       // the peer's hello as admitted (salt, run id)
    uint8_t pub[GT_X25519_BYTES];       // its key for this run
    uint8_t key_send[GT_AEAD_KEY_BYTES];  // this rank -> the peer
    uint8_t key_recv[GT_AEAD_KEY_BYTES];  // the peer -> this rank
    uint64_t send_seq, recv_seq;        // the next sequence number each way
} peer_slot;

struct gt_peer_core {
    bool active;  // a hello was made: the run exists
    uint32_t rank, nranks;
    gt_device_peer_rules rules;  // what the device was declared with, at hello time
    char vendor_root[4096];      // DEVD peers' vendor root ("" : the sim root's)
    uint8_t sec[GT_X25519_BYTES], pub[GT_X25519_BYTES];
    gt_buf hello;
    peer_slot *peers;  // nranks entries (this rank's unused)
    bool have_run;
    uint8_t run[16];
};

gt_err gt_peer_core_new(gt_peer_core **pc)
{
    *pc = calloc(1, sizeof **pc);
    GT_ENSURE(*pc != NULL, GT_E_NOMEM, "device: out of memory (peers)");
    return GT_OK;
}

static void core_reset(gt_peer_core *pc)
{
    if (pc->peers != NULL) {
        for (uint32_t i = 0; i < pc->nranks; i++) {
            gt_buf_free_nowipe(&pc->peers[i].hello);
        }
        gt_secure_zero(pc->peers, sizeof *pc->peers * pc->nranks);
        free(pc->peers);
    }
    gt_buf_free_nowipe(&pc->hello);
    gt_secure_zero(pc, sizeof *pc);
}

void gt_peer_core_free(gt_peer_core *pc)
{
    if (pc == NULL) {
        return;
    }
    core_reset(pc);
    free(pc);
}

// ---- the hello -----------------------------------------------------------------------------------

static gt_err hello_head_write(gt_writer *w, uint16_t kind, uint32_t rank, uint32_t nranks,
                               const uint8_t agreement[32], const uint8_t pub[32], gt_span trainer)
{
    GT_ENSURE(trainer.len <= GT_SIM_MAX_FRAME, GT_E_LIMIT, "peer hello: trainer part of %zu bytes",
              trainer.len);
    GT_TRY(gt_writer_bytes(w, GT_PEER_HELLO_MAGIC, 8));
    GT_TRY(gt_writer_u16le(w, GT_PEER_HELLO_VERSION));
    GT_TRY(gt_writer_u16le(w, kind));
    GT_TRY(gt_writer_u32le(w, rank));
    GT_TRY(gt_writer_u32le(w, nranks));
    GT_TRY(gt_writer_bytes(w, agreement, 32));
    GT_TRY(gt_writer_bytes(w, pub, 32));
    GT_TRY(gt_writer_u32le(w, (uint32_t)trainer.len));
    return gt_writer_bytes(w, trainer.data, trainer.len);
}

gt_err gt_peer_hello_parse(gt_span hello, gt_peer_hello_msg *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(hello.data, hello.len);
    uint8_t magic[8];
    uint32_t tlen = 0, elen = 0;
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, GT_PEER_HELLO_MAGIC, 8) == 0, GT_E_FORMAT,
              "peer hello: not a hello (bad magic)");
    GT_TRY(gt_reader_u16le(&r, &out->version));
    GT_ENSURE(out->version == GT_PEER_HELLO_VERSION, GT_E_UNSUPPORTED,
              "peer hello: version %u (this device speaks %u)", out->version,
              GT_PEER_HELLO_VERSION);
    GT_TRY(gt_reader_u16le(&r, &out->kind));
    GT_ENSURE(out->kind == GT_PEER_KIND_INPROC || out->kind == GT_PEER_KIND_DEVD, GT_E_FORMAT,
              "peer hello: unknown device kind %u", out->kind);
    GT_TRY(gt_reader_u32le(&r, &out->rank));
    GT_TRY(gt_reader_u32le(&r, &out->nranks));
    GT_TRY(gt_reader_bytes(&r, out->agreement, sizeof out->agreement));
    GT_TRY(gt_reader_bytes(&r, out->pub, sizeof out->pub));
    GT_TRY(gt_reader_u32le(&r, &tlen));
    GT_ENSURE(tlen <= GT_SIM_MAX_FRAME, GT_E_FORMAT, "peer hello: trainer part of %u bytes", tlen);
    GT_TRY(gt_reader_span(&r, tlen, &out->trainer));
    out->signed_len = r.pos;
    GT_TRY(gt_reader_u32le(&r, &elen));
    GT_ENSURE(elen > 0 && elen <= 2 * GT_SIM_MAX_EVIDENCE, GT_E_FORMAT,
              "peer hello: evidence of %u bytes", elen);
    GT_TRY(gt_reader_span(&r, elen, &out->evidence));
    return gt_reader_expect_end(&r, "peer hello");
}

static gt_err hello_report_data(uint8_t rd[GT_REPORT_DATA_BYTES], const uint8_t *head,
                                size_t head_len, const uint8_t pub[32], const uint8_t agreement[32])
{
    uint8_t digest[GT_SHA256_BYTES];
    GT_TRY(gt_hash(GT_HASH_SHA256, digest, head, head_len));
    return gt_attest_report_data_build(rd, GT_PEER_TAG_RD, digest, sizeof digest, pub, 32,
                                       agreement, 32);
}

gt_err gt_peer_core_hello(gt_peer_core *pc, const gt_device_peer_rules *rules,
                          const gt_peer_identity *id, uint32_t rank, uint32_t nranks,
                          uint8_t *hello, size_t cap, size_t *len)
{
    *len = 0;
    uint32_t want = rules->ranks ? rules->ranks : 1;
    GT_ENSURE(nranks == want, GT_E_POLICY,
              "device: %u ranks asked, the declared agreement admits %u (trainer.ranks)", nranks,
              want);
    GT_ENSURE(nranks >= 2 && nranks <= GT_PEER_MAX_RANKS && rank < nranks, GT_E_ARG,
              "device: rank %u of %u (peers need 2..%u ranks)", rank, nranks, GT_PEER_MAX_RANKS);
    core_reset(pc);  // a new run: nothing of the last one survives
    pc->peers = calloc(nranks, sizeof *pc->peers);
    GT_ENSURE(pc->peers != NULL, GT_E_NOMEM, "device: out of memory (peers)");
    pc->rank = rank;
    pc->nranks = nranks;
    pc->rules = *rules;
    if (id->vendor_root_pem != NULL) {
        snprintf(pc->vendor_root, sizeof pc->vendor_root, "%s", id->vendor_root_pem);
    }
    gt_err err = GT_OK;
    gt_writer w = gt_writer_init_dynamic();
    gt_buf ev = {0};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_TRY_GOTO(err, gt_x25519_keypair(pc->pub, pc->sec), fail);
    GT_TRY_GOTO(err, hello_head_write(&w, id->kind, rank, nranks, rules->agreement_hash, pc->pub,
                                      id->trainer), fail);
    GT_TRY_GOTO(err, hello_report_data(rd, w.data, w.len, pc->pub, rules->agreement_hash), fail);
    GT_TRY_GOTO(err, id->produce(id->produce_ctx, rd, &ev), fail);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)ev.len), fail);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, ev.data, ev.len), fail);
    GT_ENSURE_GOTO(err, w.len <= cap, fail, GT_E_LIMIT, "device: the hello takes %zu bytes (room "
                   "for %zu)", w.len, cap);
    GT_TRY_GOTO(err, gt_buf_append(&pc->hello, w.data, w.len), fail);
    memcpy(hello, w.data, w.len);
    *len = w.len;
    pc->active = true;
fail:
    gt_buf_free_nowipe(&ev);
    gt_writer_free(&w);
    if (!gt_is_ok(err)) {
        core_reset(pc);
    }
    return err;
}

// ---- appraisal -----------------------------------------------------------------------------------

static bool list_allows(const uint8_t (*list)[GT_MEASUREMENT_BYTES], uint32_t count,
                        const uint8_t m[GT_MEASUREMENT_BYTES])
{
    bool found = count == 0;
    for (uint32_t i = 0; i < count; i++) {
        found |= gt_ct_equal(list[i], m, GT_MEASUREMENT_BYTES);
    }
    return found;
}

static gt_err claims_measurement(const cJSON *claims, uint8_t m[GT_MEASUREMENT_BYTES],
                                 const char *who)
{
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "measurement"));
    if (hex == NULL) {
        hex = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "mr_td"));
    }
    GT_ENSURE(hex != NULL && gt_is_ok(gt_hex_decode_exact(m, GT_MEASUREMENT_BYTES, hex)),
              GT_E_POLICY, "peer %s evidence carries no 48-byte measurement", who);
    return GT_OK;
}

static gt_err measurement_check(const uint8_t (*list)[GT_MEASUREMENT_BYTES], uint32_t count,
                                const uint8_t m[GT_MEASUREMENT_BYTES], const char *who)
{
    char hex[2 * GT_MEASUREMENT_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, m, GT_MEASUREMENT_BYTES);
    GT_ENSURE(list_allows(list, count, m), GT_E_POLICY,
              "peer %s measurement %.16s... is not one the agreement accepts (%s."
              "accepted_measurements)", who, hex, who);
    return GT_OK;
}

// A TEE's evidence (the trainer's; on cpu also the device) bound to rd, its measurement out.
static gt_err appraise_tee(const gt_peer_core *pc, gt_span ev, const uint8_t *rd,
                           uint8_t m[GT_MEASUREMENT_BYTES], const char *who)
{
    char dir[4096], pub_path[4200];
    GT_TRY(gt_sim_root_dir(dir, sizeof dir, NULL));
    snprintf(pub_path, sizeof pub_path, "%s/root-pub.pem", dir);
    gt_attest_file root = {.path = pub_path};
    gt_appraise_params p = {.roots = &root, .root_count = 1, .expected_report_data = rd};
    gt_policy *policy = NULL;
    const char *json = pc->rules.allow_simulation ? "{\"allow_simulation\": true}" : "{}";
    GT_TRY(gt_policy_parse(&policy, json, strlen(json)));
    gt_appraisal a;
    memset(&a, 0, sizeof a);
    gt_err err = gt_attest_appraise_bytes(&a, ev.data, ev.len, GT_TEE_AUTO, policy, &p);
    gt_policy_free(policy);
    GT_TRY(err);
    if (a.verdict != GT_VERDICT_ACCEPTED) {
        err = gt_errf(a.verdict == GT_VERDICT_REJECTED ? GT_E_POLICY : GT_E_AUTH,
                      "peer %s evidence %s: %s", who, gt_verdict_name(a.verdict),
                      a.reason_count ? a.reasons[0] : "no reason given");
    } else {
        err = claims_measurement(a.claims, m, who);
    }
    if (gt_is_ok(err) && a.insecure_simulation) {
        gt_log_info("device: peer %s evidence accepted (%s)", who, GT_INSECURE_SIMULATION);
    }
    gt_appraisal_free(&a);
    return err;
}

// kind INPROC: one evidence, the trainer's process, which is the device. Its measurement must be
// an accepted trainer's, and an accepted device's when the agreement names devices.
static gt_err appraise_inproc(const gt_peer_core *pc, const gt_peer_hello_msg *m,
                              const uint8_t *rd)
{
    GT_ENSURE(m->trainer.len == 0, GT_E_FORMAT, "peer hello: a cpu device has no trainer part");
    uint8_t meas[GT_MEASUREMENT_BYTES];
    GT_TRY(appraise_tee(pc, m->evidence, rd, meas, "trainer"));
    GT_TRY(measurement_check(pc->rules.trainer, pc->rules.trainer_count, meas, "trainer"));
    return measurement_check(pc->rules.device, pc->rules.device_count, meas, "device");
}

// kind DEVD: devd's device evidence bound to the hello (which holds the trainer's CLIENT_HELLO),
// and the trainer's evidence as that hello bound it for its session with this devd.
static gt_err appraise_devd(const gt_peer_core *pc, const gt_peer_hello_msg *m,
                            const uint8_t *rd)
{
    GT_ENSURE(pc->rules.allow_simulation, GT_E_POLICY,
              "peer device: devd is an emulated device (%s) and the agreement does not allow "
              "simulation", GT_INSECURE_SIMULATION);
    cJSON *claims = NULL;
    GT_TRY(gt_sim_device_evidence_appraise(m->evidence, rd,
                                           pc->vendor_root[0] ? pc->vendor_root : NULL, NULL,
                                           &claims));
    uint8_t meas[GT_MEASUREMENT_BYTES];
    gt_err err = claims_measurement(claims, meas, "device");
    // Only devd itself holds peers: a trip a trainer serves says cuda or host memory.
    const char *mem =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "device_memory"));
    if (gt_is_ok(err) && (mem == NULL || strcmp(mem, "devd") != 0)) {
        err = gt_errf(GT_E_POLICY, "peer device: its memory is '%s', not devd's",
                      mem ? mem : "unstated");
    }
    cJSON_Delete(claims);
    GT_TRY(err);
    GT_TRY(measurement_check(pc->rules.device, pc->rules.device_count, meas, "device"));
    gt_sim_client_hello ch;
    GT_TRY(gt_err_wrap(gt_sim_client_hello_parse(m->trainer, &ch), "peer hello: trainer part"));
    GT_ENSURE(gt_ct_equal(ch.agreement, pc->rules.agreement_hash, 32), GT_E_POLICY,
              "peer trainer: its device session is bound to another agreement");
    uint8_t trd[GT_REPORT_DATA_BYTES];
    GT_TRY(gt_sim_client_report_data(trd, &ch));
    GT_TRY(appraise_tee(pc, ch.evidence, trd, meas, "trainer"));
    return measurement_check(pc->rules.trainer, pc->rules.trainer_count, meas, "trainer");
}

static gt_err hello_check(const gt_peer_core *pc, uint32_t peer_rank, const gt_peer_hello_msg *m)
{
    GT_ENSURE(m->rank == peer_rank, GT_E_POLICY, "peer hello: from rank %u, expected rank %u",
              m->rank, peer_rank);
    GT_ENSURE(m->nranks == pc->nranks, GT_E_POLICY, "peer hello: a run of %u ranks (this one: %u)",
              m->nranks, pc->nranks);
    GT_ENSURE(gt_ct_equal(m->agreement, pc->rules.agreement_hash, 32), GT_E_POLICY,
              "peer hello: bound to another agreement");
    GT_ENSURE(!gt_ct_equal(m->pub, pc->pub, sizeof m->pub), GT_E_POLICY,
              "peer hello: carries this device's own key (reflected)");
    for (uint32_t i = 0; i < pc->nranks; i++) {
        const peer_slot *s = &pc->peers[i];
        GT_ENSURE(!s->admitted || !gt_ct_equal(s->pub, m->pub, sizeof s->pub),
                  GT_E_POLICY, "peer hello: its key was already admitted for rank %u (replayed)",
                  i);
    }
    return GT_OK;
}

// HKDF-SHA-256(shared, salt = agreement || u32 n || lower rank's hello || u32 n || higher's):
// the first key seals lower -> higher, the second higher -> lower.
static gt_err derive_keys(gt_peer_core *pc, uint32_t peer_rank, gt_span peer_hello,
                          const uint8_t peer_pub[32], peer_slot *s)
{
    bool lower = pc->rank < peer_rank;
    gt_span lo = lower ? gt_buf_span(&pc->hello) : peer_hello;
    gt_span hi = lower ? peer_hello : gt_buf_span(&pc->hello);
    uint8_t shared[GT_X25519_BYTES], okm[2 * GT_AEAD_KEY_BYTES];
    gt_writer w = gt_writer_init_dynamic();
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_x25519_shared(shared, peer_pub, pc->sec), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, pc->rules.agreement_hash, 32), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)lo.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, lo.data, lo.len), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)hi.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, hi.data, hi.len), out);
    GT_TRY_GOTO(err, gt_hkdf(GT_HASH_SHA256, okm, sizeof okm, shared, sizeof shared, w.data, w.len,
                             (const uint8_t *)GT_PEER_KEYS_INFO, strlen(GT_PEER_KEYS_INFO)), out);
    memcpy(s->key_send, lower ? okm : okm + 32, 32);
    memcpy(s->key_recv, lower ? okm + 32 : okm, 32);
out:
    gt_secure_zero(shared, sizeof shared);
    gt_secure_zero(okm, sizeof okm);
    gt_writer_free(&w);
    return err;
}

gt_err gt_peer_core_admit(gt_peer_core *pc, uint32_t peer_rank, gt_span hello)
{
    GT_ENSURE(pc->active, GT_E_STATE, "device: no peer run (make this device's hello first)");
    GT_ENSURE(peer_rank < pc->nranks && peer_rank != pc->rank, GT_E_ARG,
              "device: rank %u is no peer of rank %u of %u", peer_rank, pc->rank, pc->nranks);
    peer_slot *s = &pc->peers[peer_rank];
    GT_ENSURE(!s->admitted, GT_E_STATE, "device: rank %u is already admitted in this run",
              peer_rank);
    gt_peer_hello_msg m;
    GT_TRY(gt_peer_hello_parse(hello, &m));
    GT_TRY(hello_check(pc, peer_rank, &m));
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_TRY(hello_report_data(rd, hello.data, m.signed_len, m.pub, m.agreement));
    gt_err err = m.kind == GT_PEER_KIND_INPROC ? appraise_inproc(pc, &m, rd)
                                               : appraise_devd(pc, &m, rd);
    GT_TRY(gt_err_wrap(err, "device: rank %u refused", peer_rank));
    peer_slot fresh = {0};
    GT_TRY(derive_keys(pc, peer_rank, hello, m.pub, &fresh));
    err = gt_buf_append(&fresh.hello, hello.data, hello.len);
    if (!gt_is_ok(err)) {
        gt_secure_zero(&fresh, sizeof fresh);
        return err;
    }
    memcpy(fresh.pub, m.pub, sizeof fresh.pub);
    fresh.admitted = true;
    *s = fresh;
    gt_secure_zero(&fresh, sizeof fresh);
    return GT_OK;
}

gt_err gt_peer_core_run_id(gt_peer_core *pc, uint8_t run[16])
{
    GT_ENSURE(pc->active, GT_E_STATE, "device: no peer run");
    if (!pc->have_run) {
        for (uint32_t i = 0; i < pc->nranks; i++) {
            GT_ENSURE(i == pc->rank || pc->peers[i].admitted, GT_E_STATE,
                      "device: rank %u is not admitted yet (the run id needs every hello)", i);
        }
        gt_hash_ctx *hc = NULL;
        uint8_t digest[GT_SHA256_BYTES], n[4];
        gt_err err = GT_OK;
        GT_TRY(gt_hash_new(&hc, GT_HASH_SHA256));
        for (uint32_t i = 0; i < pc->nranks && gt_is_ok(err); i++) {
            const gt_buf *b = i == pc->rank ? &pc->hello : &pc->peers[i].hello;
            gt_store_u32le(n, (uint32_t)b->len);
            err = gt_hash_update(hc, n, sizeof n);
            if (gt_is_ok(err)) {
                err = gt_hash_update(hc, b->data, b->len);
            }
        }
        if (gt_is_ok(err)) {
            err = gt_hash_final(hc, digest);
        }
        gt_hash_free(hc);
        GT_TRY(err);
        memcpy(pc->run, digest, sizeof pc->run);
        pc->have_run = true;
    }
    memcpy(run, pc->run, sizeof pc->run);
    return GT_OK;
}

// ---- chunks --------------------------------------------------------------------------------------

size_t gt_peer_chunk_bytes(uint64_t nelem)
{
    if (nelem == 0 || nelem > GT_PEER_MAX_CHUNK_ELEMS) {
        return 0;
    }
    return GT_PEER_HDR_BYTES + 4 + GT_LABEL_MAX_SOURCES * GT_LABEL_ID_BYTES +
           (size_t)nelem * 4 + GT_AEAD_TAG_BYTES;
}

gt_err gt_peer_hdr_bytes(const gt_peer_hdr *h, uint64_t *offset, uint64_t *len)
{
    GT_ENSURE(h->nelem >= 1 && h->nelem <= GT_PEER_MAX_CHUNK_ELEMS, GT_E_ARG,
              "device: a chunk of %llu floats (1..%u)", (unsigned long long)h->nelem,
              GT_PEER_MAX_CHUNK_ELEMS);
    GT_ENSURE(h->elem_off <= UINT64_MAX / 4 - h->nelem, GT_E_ARG,
              "device: chunk offset %llu wraps", (unsigned long long)h->elem_off);
    *offset = h->elem_off * 4;
    *len = h->nelem * 4;
    return GT_OK;
}

static gt_err hdr_write(gt_writer *w, const gt_peer_hdr *h, uint64_t seq)
{
    GT_TRY(gt_writer_bytes(w, h->run, sizeof h->run));
    GT_TRY(gt_writer_u64le(w, h->step));
    GT_TRY(gt_writer_u32le(w, h->bucket));
    GT_TRY(gt_writer_u32le(w, h->hop));
    GT_TRY(gt_writer_u32le(w, h->src));
    GT_TRY(gt_writer_u32le(w, h->dst));
    GT_TRY(gt_writer_u64le(w, h->elem_off));
    GT_TRY(gt_writer_u64le(w, h->nelem));
    return gt_writer_u64le(w, seq);
}

gt_err gt_peer_chunk_parse(gt_span chunk, gt_peer_chunk_msg *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(chunk.data, chunk.len);
    gt_peer_hdr *h = &out->h;
    GT_TRY(gt_reader_bytes(&r, h->run, sizeof h->run));
    GT_TRY(gt_reader_u64le(&r, &h->step));
    GT_TRY(gt_reader_u32le(&r, &h->bucket));
    GT_TRY(gt_reader_u32le(&r, &h->hop));
    GT_TRY(gt_reader_u32le(&r, &h->src));
    GT_TRY(gt_reader_u32le(&r, &h->dst));
    GT_TRY(gt_reader_u64le(&r, &h->elem_off));
    GT_TRY(gt_reader_u64le(&r, &h->nelem));
    GT_TRY(gt_reader_u64le(&r, &out->seq));
    GT_TRY(gt_reader_u32le(&r, &out->nlabels));
    GT_ENSURE(out->nlabels <= GT_LABEL_MAX_SOURCES, GT_E_FORMAT, "peer chunk: %u labels (at most "
              "%d)", out->nlabels, GT_LABEL_MAX_SOURCES);
    for (uint32_t i = 0; i < out->nlabels; i++) {
        GT_TRY(gt_reader_bytes(&r, out->labels[i], GT_LABEL_ID_BYTES));
    }
    out->aad_len = r.pos;
    GT_ENSURE(h->nelem >= 1 && h->nelem <= GT_PEER_MAX_CHUNK_ELEMS, GT_E_FORMAT,
              "peer chunk: %llu floats", (unsigned long long)h->nelem);
    GT_ENSURE(gt_reader_left(&r) == h->nelem * 4 + GT_AEAD_TAG_BYTES, GT_E_FORMAT,
              "peer chunk: %zu bytes of ciphertext for %llu floats", gt_reader_left(&r),
              (unsigned long long)h->nelem);
    return gt_reader_span(&r, gt_reader_left(&r), &out->ct);
}

// u16be src | u16be dst | u64be seq: distinct per direction and per chunk (ranks < 65536).
static void chunk_iv(uint8_t iv[GT_AEAD_IV_BYTES], uint32_t src, uint32_t dst, uint64_t seq)
{
    gt_writer w = gt_writer_init_fixed(iv, GT_AEAD_IV_BYTES);
    gt_err e1 = gt_writer_u16be(&w, (uint16_t)src), e2 = gt_writer_u16be(&w, (uint16_t)dst),
           e3 = gt_writer_u64be(&w, seq);
    (void)e1, (void)e2, (void)e3;  // 12 bytes into 12: cannot fail
}

static gt_err run_check(gt_peer_core *pc, const gt_peer_hdr *h)
{
    uint8_t run[16];
    GT_TRY(gt_peer_core_run_id(pc, run));
    GT_ENSURE(gt_ct_equal(run, h->run, sizeof run), GT_E_ARG,
              "device: the header names another run than this one");
    return GT_OK;
}

// The checks, the AAD (header || label block), the IV and the key are the core's; the range only
// encrypts its own memory. The sequence number is spent once the range was asked to encrypt,
// whatever it answered: an IV a backend may have used is never offered again.
gt_err gt_peer_core_seal_range(gt_peer_core *pc, const gt_buftab *tab, gt_label label,
                               const gt_peer_hdr *h, const gt_peer_range *r, uint8_t *out,
                               size_t cap, size_t *outlen)
{
    *outlen = 0;
    GT_ENSURE(pc->active && h->src == pc->rank && h->dst < pc->nranks && h->dst != pc->rank &&
                  pc->peers[h->dst].admitted,
              GT_E_POLICY, "device: rank %u is not an admitted peer of this device (rank %u): "
              "nothing leaves sealed to it", h->dst, pc->rank);
    GT_TRY(run_check(pc, h));
    uint64_t off = 0, len = 0;
    GT_TRY(gt_peer_hdr_bytes(h, &off, &len));
    peer_slot *s = &pc->peers[h->dst];
    GT_ENSURE(s->send_seq < UINT64_MAX, GT_E_LIMIT, "device: sequence numbers to rank %u spent",
              h->dst);
    uint8_t ids[GT_LABEL_MAX_SOURCES][GT_LABEL_ID_BYTES];
    size_t n = gt_buftab_label_ids(tab, label, ids, GT_LABEL_MAX_SOURCES);
    size_t aad_len = GT_PEER_HDR_BYTES + 4 + n * GT_LABEL_ID_BYTES;
    GT_ENSURE(cap >= aad_len + len + GT_AEAD_TAG_BYTES, GT_E_LIMIT,
              "device: a sealed chunk takes %zu bytes (room for %zu)",
              (size_t)(aad_len + len + GT_AEAD_TAG_BYTES), cap);
    gt_writer w = gt_writer_init_fixed(out, aad_len);
    GT_TRY(hdr_write(&w, h, s->send_seq));
    GT_TRY(gt_writer_u32le(&w, (uint32_t)n));
    GT_TRY(gt_writer_bytes(&w, ids, n * GT_LABEL_ID_BYTES));
    uint8_t iv[GT_AEAD_IV_BYTES];
    chunk_iv(iv, h->src, h->dst, s->send_seq);
    gt_err err = r->seal(r->ctx, out + aad_len, len, out, aad_len, iv, s->key_send);
    s->send_seq++;  // never reused, whatever the caller does with the chunk
    GT_TRY(err);
    *outlen = aad_len + len + GT_AEAD_TAG_BYTES;
    return GT_OK;
}

static bool hdr_equal(const gt_peer_hdr *a, const gt_peer_hdr *b)
{
    return gt_ct_equal(a->run, b->run, sizeof a->run) && a->step == b->step &&
           a->bucket == b->bucket && a->hop == b->hop && a->src == b->src && a->dst == b->dst &&
           a->elem_off == b->elem_off && a->nelem == b->nelem;
}

static gt_err open_checks(gt_peer_core *pc, const gt_peer_hdr *h, int mode)
{
    GT_ENSURE(mode == GT_PEER_ADD || mode == GT_PEER_COPY, GT_E_ARG, "device: open mode %d", mode);
    GT_ENSURE(pc->active, GT_E_STATE, "device: no peer run (make this device's hello first)");
    GT_ENSURE(h->dst == pc->rank, GT_E_ARG,
              "device: the expected header is for rank %u, this device is rank %u", h->dst,
              pc->rank);
    GT_ENSURE(h->src < pc->nranks && h->src != pc->rank && pc->peers[h->src].admitted,
              GT_E_POLICY, "device: rank %u is not an admitted peer of this device", h->src);
    uint64_t off = 0, len = 0;
    GT_TRY(gt_peer_hdr_bytes(h, &off, &len));
    return run_check(pc, h);
}

// Header, sequence and tag first (the range authenticates and decrypts into its own staging,
// nothing in the destination); then the labels (they only grow); only then the range lands the
// floats. The range's staging is the caller's to wipe.
gt_err gt_peer_core_open_range(gt_peer_core *pc, gt_buftab *tab, gt_dbuf h_dst,
                               const gt_peer_hdr *h, gt_span chunk, const gt_peer_range *r,
                               int mode)
{
    GT_TRY(open_checks(pc, h, mode));
    gt_peer_chunk_msg m;
    GT_TRY(gt_err_wrap(gt_peer_chunk_parse(chunk, &m), "device: chunk from rank %u", h->src));
    peer_slot *s = &pc->peers[h->src];
    GT_ENSURE(hdr_equal(&m.h, h), GT_E_AUTH, "device: chunk from rank %u refused: its header is "
              "not the one expected (misrouted, reordered or from another step)", h->src);
    GT_ENSURE(m.seq == s->recv_seq, GT_E_AUTH, "device: chunk from rank %u refused: sequence "
              "%llu, expected %llu (replayed or reordered)", h->src, (unsigned long long)m.seq,
              (unsigned long long)s->recv_seq);
    uint8_t iv[GT_AEAD_IV_BYTES];
    chunk_iv(iv, h->src, h->dst, m.seq);
    gt_err err = r->open(r->ctx, m.ct.data, h->nelem * 4, chunk.data, m.aad_len, iv,
                         s->key_recv);
    if (err.code == GT_E_AUTH) {
        err = gt_errf(GT_E_AUTH, "device: chunk from rank %u refused: authentication failed "
                      "(tampered)", h->src);
    }
    GT_TRY(err);
    for (uint32_t i = 0; i < m.nlabels; i++) {
        GT_TRY(gt_buftab_label_add(tab, h_dst, m.labels[i]));  // labels only grow: first
    }
    GT_TRY(r->apply(r->ctx, mode));
    s->recv_seq++;
    return GT_OK;
}

// ---- the host range: floats in host memory (cpu backend, devd's arena), OpenSSL's GCM ------------

typedef struct {
    const uint8_t *src;  // seal: the floats
    uint8_t *dst;        // open: the destination floats
    uint8_t *plain;      // open: the authenticated plaintext, until applied
    size_t len;
} host_range;

static gt_err host_seal(void *ctx, uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                        size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                        const uint8_t key[GT_AEAD_KEY_BYTES])
{
    host_range *hr = ctx;
    size_t ct_len = 0;
    return gt_aead_seal(ct_tag, (size_t)len + GT_AEAD_TAG_BYTES, &ct_len, hr->src, (size_t)len,
                        aad, aad_len, iv, key);
}

static gt_err host_open(void *ctx, const uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                        size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                        const uint8_t key[GT_AEAD_KEY_BYTES])
{
    host_range *hr = ctx;
    hr->len = (size_t)len;
    hr->plain = malloc(hr->len);
    GT_ENSURE(hr->plain != NULL, GT_E_NOMEM, "device: out of memory (chunk staging)");
    size_t got = 0;
    gt_err err = gt_aead_open(hr->plain, hr->len, &got, ct_tag, hr->len + GT_AEAD_TAG_BYTES, aad,
                              aad_len, iv, key);
    return gt_is_ok(err) ? GT_OK : gt_errf(GT_E_AUTH, "authentication failed");
}

static gt_err host_apply(void *ctx, int mode)
{
    host_range *hr = ctx;
    if (mode == GT_PEER_COPY) {
        memcpy(hr->dst, hr->plain, hr->len);
        return GT_OK;
    }
    float *d = (float *)(void *)hr->dst;
    const float *p = (const float *)(const void *)hr->plain;
    for (size_t i = 0; i < hr->len / 4; i++) {
        d[i] += p[i];
    }
    return GT_OK;
}

gt_err gt_peer_core_seal(gt_peer_core *pc, const gt_buftab *tab, gt_label label,
                         const gt_peer_hdr *h, const uint8_t *plain, uint8_t *out, size_t cap,
                         size_t *outlen)
{
    host_range hr = {.src = plain};
    gt_peer_range r = {.seal = host_seal, .ctx = &hr};
    return gt_peer_core_seal_range(pc, tab, label, h, &r, out, cap, outlen);
}

gt_err gt_peer_core_open(gt_peer_core *pc, gt_buftab *tab, gt_dbuf h_dst, const gt_peer_hdr *h,
                         gt_span chunk, uint8_t *dst, int mode)
{
    host_range hr = {.dst = dst};
    gt_peer_range r = {.open = host_open, .apply = host_apply, .ctx = &hr};
    gt_err err = gt_peer_core_open_range(pc, tab, h_dst, h, chunk, &r, mode);
    if (hr.plain != NULL) {
        gt_secure_zero(hr.plain, hr.len);
        free(hr.plain);
    }
    return err;
}
