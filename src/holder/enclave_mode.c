// A holder in enclave mode: the dataset key and the release decision live in the holder enclave
// (enclaves/holder/holder.c) run by the enclave process; this host side only marshals ECALLs.
// Nothing here ever holds the dataset key, a chunk key or chunk plaintext: IMPORT's key comes
// from the caller once (and is wiped by it), and a release comes back wrapped to the device.
#include <gputravel/holder.h>

#include "holder_enclave_abi.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(HOLDER_WRAP_AAD_BYTES == GT_RELEASE_AAD_BYTES,
               "the enclave's wrap AAD and travel.h's are the same bytes");

struct gt_holder_enclave {
    gt_enclave *e;
    gt_vqe *vqe;  // NULL: this enclave is not quoted
    pthread_mutex_t lock;  // one ECALL at a time: the agent's connection threads share it
};

static const char *status_text(int64_t s)
{
    switch (s) {
    case HOLDER_E_FORMAT: return "an input of the wrong shape";
    case HOLDER_E_REFUSED: return "the sealed key does not open for this enclave (another "
                                  "signer, another platform, or changed bytes)";
    case HOLDER_E_STATE: return "no key or no terms yet, or the terms are already fixed";
    case HOLDER_E_WRAP: return "the chunk key could not be wrapped to that device key";
    case HOLDER_E_DEVICE: return "the enclave's appraisal refused the device (not the attested "
                                 "session's key, another agreement, or a device the agreement "
                                 "does not accept; the enclave process's log says which)";
    case HOLDER_REFUSE_USES: return "the chunk's uses under the agreement are spent";
    case HOLDER_REFUSE_RESENDS: return "the chunk was already sent max_uses_per_chunk + 1 times "
                                       "without confirmed uses";
    case HOLDER_REFUSE_BUDGET: return "releasing it would cross the agreement's token budget";
    case HOLDER_REFUSE_CHUNK: return "no such chunk";
    case HOLDER_E_NOTSENT: return "the chunk was not sent, or its use is already counted";
    default: return "unknown status";
    }
}

static gt_err call(gt_holder_enclave *he, uint64_t n, const void *in, size_t len, gt_buf *out,
                   const char *what)
{
    int64_t status = -1;
    gt_buf tmp = {0};
    pthread_mutex_lock(&he->lock);
    gt_err err = gt_enclave_ecall(he->e, n, in, len, out ? out : &tmp, &status);
    pthread_mutex_unlock(&he->lock);
    gt_buf_free(&tmp);
    GT_TRY(gt_err_wrap(err, "holder enclave"));
    if (status == HOLDER_OK) {
        return GT_OK;
    }
    // A resend refusal is about this chunk only (GT_E_RETRY, travel.h REFUSE), as in plain mode.
    gt_code code = status == HOLDER_REFUSE_RESENDS                              ? GT_E_RETRY
                   : status >= HOLDER_REFUSE_USES || status == HOLDER_E_DEVICE ? GT_E_POLICY
                       : status == HOLDER_E_REFUSED ? GT_E_AUTH
                       : status == HOLDER_E_STATE   ? GT_E_STATE
                                                    : GT_E_FORMAT;
    return gt_errf(code, "holder enclave: %s: %s (status %lld)", what, status_text(status),
                   (long long)status);
}

// The vQE on the enclave's own platform (the same root: it verifies the enclave's REPORT MAC).
static gt_err vqe_open(gt_holder_enclave *he, const gt_holder_enclave_config *cfg)
{
    const char *dir = cfg->vqe_dir ? cfg->vqe_dir : cfg->platform_dir;
    if (dir == NULL) {
        return GT_OK;
    }
    const gt_sgx_platform_options *po = cfg->platform_options;
    gt_collect_params host = {.type = po ? po->host : GT_TEE_SIM,
                              .sim_root = po ? po->sim_root : NULL};
    if (cfg->vqe_host != NULL) {
        host = *cfg->vqe_host;
    }
    gt_sgx_platform pf;
    gt_err err = GT_OK;
    if (cfg->platform != NULL) {
        pf = *cfg->platform;
    } else {
        GT_TRY_GOTO(err, gt_sgx_platform_open(cfg->platform_dir, po, &pf, NULL), out);
    }
    err = gt_err_wrap(gt_vqe_open(&he->vqe, dir, &pf, &host), "holder enclave: its quoting enclave");
out:
    gt_secure_zero(&pf, sizeof pf);
    return err;
}

gt_err gt_holder_enclave_start(gt_holder_enclave **out, const gt_holder_enclave_config *cfg)
{
    *out = NULL;
    gt_buf image = {0}, sig = {0};
    gt_err err = GT_OK;
    gt_holder_enclave *he = calloc(1, sizeof *he);
    GT_ENSURE(he != NULL, GT_E_NOMEM, "holder enclave: out of memory");
    GT_TRY_GOTO(err, gt_file_read_all(cfg->image_path, GT_ENCLAVE_IMAGE_MAX_BYTES, &image), out);
    GT_TRY_GOTO(err, gt_file_read_all(cfg->sigstruct_path, GT_SGX_SIGSTRUCT_BYTES, &sig), out);
    GT_ENSURE_GOTO(err, sig.len == GT_SGX_SIGSTRUCT_BYTES, out, GT_E_FORMAT,
                   "%s: not a %d-byte SIGSTRUCT", cfg->sigstruct_path, GT_SGX_SIGSTRUCT_BYTES);
    gt_enclave_spec spec = {.process_path = cfg->process_path, .image = image.data,
                            .image_len = image.len, .sigstruct = sig.data,
                            .platform_dir = cfg->platform_dir,
                            .platform_options = cfg->platform_options,
                            .platform = cfg->platform};
    GT_TRY_GOTO(err, gt_err_wrap(gt_enclave_start(&he->e, &spec), "holder enclave"), out);
    pthread_mutex_init(&he->lock, NULL);
    err = vqe_open(he, cfg);
    if (!gt_is_ok(err)) {
        gt_holder_enclave_stop(he);
        he = NULL;
        goto out;
    }
    *out = he;
    he = NULL;
out:
    gt_buf_free_nowipe(&image);
    gt_buf_free_nowipe(&sig);
    free(he);
    return err;
}

void gt_holder_enclave_stop(gt_holder_enclave *he)
{
    if (he != NULL) {
        gt_enclave_stop(he->e);
        gt_vqe_free(he->vqe);
        pthread_mutex_destroy(&he->lock);
        free(he);
    }
}

const gt_sgx_identity *gt_holder_enclave_identity(const gt_holder_enclave *he)
{
    return gt_enclave_identity(he->e);
}

int gt_holder_enclave_pid(const gt_holder_enclave *he)
{
    return gt_enclave_pid(he->e);
}

gt_err gt_holder_enclave_import(gt_holder_enclave *he,
                                const uint8_t dataset_key[GT_DATASET_KEY_BYTES], gt_buf *sealed)
{
    return call(he, HOLDER_ECALL_IMPORT, dataset_key, GT_DATASET_KEY_BYTES, sealed,
                "sealing the dataset key");
}

gt_err gt_holder_enclave_open_key(gt_holder_enclave *he, const uint8_t *sealed, size_t len)
{
    return call(he, HOLDER_ECALL_OPEN, sealed, len, NULL, "opening the sealed dataset key");
}

gt_err gt_holder_enclave_set_terms(gt_holder_enclave *he, const gt_holder_enclave_terms *t)
{
    GT_ENSURE(t->chunk_count > 0 && t->chunk_count <= HOLDER_MAX_CHUNKS, GT_E_LIMIT,
              "holder enclave: %u chunks (1..%d in enclave mode)", t->chunk_count,
              HOLDER_MAX_CHUNKS);
    gt_writer w = gt_writer_init_dynamic();
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_writer_bytes(&w, t->agreement_hash, GT_SHA256_BYTES), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, t->dataset_id, GT_DATASET_ID_BYTES), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, t->max_uses_per_chunk), out);
    GT_TRY_GOTO(err, gt_writer_u64le(&w, t->token_budget), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, t->chunk_count), out);
    for (uint32_t c = 0; c < t->chunk_count; c++) {
        GT_TRY_GOTO(err, gt_writer_u64le(&w, t->tokens[c]), out);
    }
    for (uint32_t c = 0; c < t->chunk_count; c++) {
        GT_TRY_GOTO(err, gt_writer_u32le(&w, t->releases ? t->releases[c] : 0), out);
    }
    for (uint32_t c = 0; c < t->chunk_count; c++) {
        GT_TRY_GOTO(err, gt_writer_u32le(&w, t->uses ? t->uses[c] : 0), out);
    }
    GT_TRY_GOTO(err, gt_writer_u64le(&w, t->tokens_released), out);
    err = call(he, HOLDER_ECALL_TERMS, w.data, w.len, NULL, "fixing the agreement's terms");
out:
    gt_writer_free(&w);
    return err;
}

gt_err gt_holder_enclave_release(gt_holder_enclave *he, uint32_t chunk,
                                 const uint8_t device_pub[GT_X25519_BYTES],
                                 const uint8_t trip_id[GT_SHA256_BYTES],
                                 const uint8_t device_id[GT_SHA256_BYTES],
                                 const gt_holder_enclave_appraisal *ap,
                                 uint8_t wrapped[GT_KEYWRAP_BYTES])
{
    gt_writer w = gt_writer_init_dynamic();
    gt_buf out = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_writer_u32le(&w, chunk), done);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, device_pub, GT_X25519_BYTES), done);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, trip_id, GT_SHA256_BYTES), done);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, device_id, GT_SHA256_BYTES), done);
    const gt_span parts[] = {ap->agreement, ap->client_hello, ap->server_hello};
    for (size_t i = 0; i < 3; i++) {
        GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)parts[i].len), done);
        GT_TRY_GOTO(err, gt_writer_bytes(&w, parts[i].data, parts[i].len), done);
    }
    GT_ENSURE_GOTO(err, w.len <= HOLDER_RELEASE_MAX, done, GT_E_LIMIT,
                   "holder enclave: the agreement and devd's hellos take %zu bytes; enclave mode "
                   "carries at most %d in one release", w.len, HOLDER_RELEASE_MAX);
    char what[48];
    snprintf(what, sizeof what, "releasing chunk %u", chunk);
    err = call(he, HOLDER_ECALL_RELEASE, w.data, w.len, &out, what);
    if (gt_is_ok(err) && out.len != GT_KEYWRAP_BYTES) {
        err = gt_errf(GT_E_FORMAT, "holder enclave: a wrapped key of %zu bytes", out.len);
    }
    if (gt_is_ok(err)) {
        memcpy(wrapped, out.data, GT_KEYWRAP_BYTES);
    }
done:
    gt_buf_free_nowipe(&out);  // a wrapped key: no secret
    gt_writer_free(&w);
    return err;
}

gt_err gt_holder_enclave_used(gt_holder_enclave *he, uint32_t chunk)
{
    uint8_t in[4];
    gt_store_u32le(in, chunk);
    return call(he, HOLDER_ECALL_USED, in, sizeof in, NULL, "counting a use");
}

gt_err gt_holder_enclave_quote(gt_holder_enclave *he, const uint8_t session[GT_SHA256_BYTES],
                               gt_buf *evidence)
{
    GT_ENSURE(he->vqe != NULL, GT_E_STATE, "holder enclave: no quoting enclave was opened (its "
              "platform folder is the vQE's)");
    _Static_assert(HOLDER_QUOTE_IN_BYTES == GT_SGX_TARGETINFO_BYTES + GT_SHA256_BYTES, "layout");
    _Static_assert(HOLDER_QUOTE_OUT_BYTES == GT_SGX_REPORT_BYTES, "a REPORT");
    uint8_t in[HOLDER_QUOTE_IN_BYTES];
    gt_sgx_targetinfo ti;
    gt_vqe_targetinfo(he->vqe, &ti);
    gt_sgx_targetinfo_encode(&ti, in);
    memcpy(in + GT_SGX_TARGETINFO_BYTES, session, GT_SHA256_BYTES);
    gt_buf report = {0};
    gt_evidence ev = {0};
    gt_err err = call(he, HOLDER_ECALL_QUOTE, in, sizeof in, &report, "reporting for a quote");
    if (gt_is_ok(err)) {
        err = gt_err_wrap(gt_vqe_quote_report(he->vqe, report.data, report.len, &ev),
                          "holder enclave: quoting its REPORT");
    }
    if (gt_is_ok(err)) {
        err = gt_evidence_encode(&ev, evidence);
    }
    gt_evidence_free(&ev);
    gt_buf_free_nowipe(&report);  // a REPORT: public
    return err;
}
