// attest/sim.c: the simulated platform. A root key (ECDSA P-384) in a directory, evidence it
// signs, and the verifier that checks such evidence against a root public key the CALLER gives:
// the root key id inside the evidence only helps explain a mismatch, it is never trusted.
// Every sim evidence is insecure-simulation: it proves no hardware isolation.
#include "sim_report.h"
#include "verify.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SIM_KEY_FILE GT_SIM_ROOT_KEY_FILE
#define SIM_PUB_FILE "root-pub.pem"

// The process-wide root (gt_sim_root_set). The library never derives one from the environment:
// a guess from $HOME would silently put keys where the caller did not say.
static pthread_mutex_t root_lock = PTHREAD_MUTEX_INITIALIZER;
static char root_dir[4096];

gt_err gt_sim_root_set(const char *dir)
{
    size_t n = dir != NULL ? strlen(dir) : 0;
    GT_ENSURE(n < sizeof root_dir, GT_E_LIMIT, "sim root: path of %zu bytes is too long", n);
    pthread_mutex_lock(&root_lock);
    memcpy(root_dir, n > 0 ? dir : "", n + 1);
    pthread_mutex_unlock(&root_lock);
    return GT_OK;
}

gt_err gt_sim_root_dir(char *out, size_t cap, const char *dir)
{
    if (dir != NULL && dir[0] != '\0') {
        GT_ENSURE((size_t)snprintf(out, cap, "%s", dir) < cap, GT_E_LIMIT,
                  "sim root: path too long");
        return GT_OK;
    }
    pthread_mutex_lock(&root_lock);
    bool set = root_dir[0] != '\0';
    int n = set ? snprintf(out, cap, "%s", root_dir) : 0;
    pthread_mutex_unlock(&root_lock);
    GT_ENSURE(set, GT_E_STATE,
              "sim root: none configured (gputravel: --sim-root DIR or GT_SIM_ROOT; library "
              "callers: pass the directory or call gt_sim_root_set)");
    GT_ENSURE(n >= 0 && (size_t)n < cap, GT_E_LIMIT, "sim root: path too long");
    return GT_OK;
}

static gt_err root_key_id(const gt_pkey *key, uint8_t id[GT_SHA256_BYTES])
{
    uint8_t xy[2 * 66];
    size_t len = 0;
    GT_TRY(gt_pkey_ec_public_xy(key, xy, sizeof xy, &len));
    GT_ENSURE(len == GT_P384_XY_BYTES, GT_E_FORMAT, "sim root: not a P-384 key (%zu-byte point)",
              len);
    return gt_hash(GT_HASH_SHA256, id, xy, len);
}

// Creates the key pair without a window where two processes could each install their own:
// the private key goes to a temporary file that link() installs only if none exists yet.
static gt_err root_create(const char *dir, const char *key_path)
{
    char tmp[4096 + 64];
    gt_pkey *key = NULL;
    gt_err err;
    uint32_t rnd = 0;
    GT_TRY(gt_mkdir_p(dir, 0700));
    GT_TRY(gt_random_bytes(&rnd, sizeof rnd));
    GT_ENSURE((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%08x", key_path, (long)getpid(), rnd) <
                  sizeof tmp,
              GT_E_LIMIT, "sim root: path too long");
    GT_TRY_GOTO(err, gt_pkey_generate_ec(&key, GT_EC_P384), out);
    GT_TRY_GOTO(err, gt_pkey_save_pem(key, tmp, true), out);
    if (link(tmp, key_path) != 0 && errno != EEXIST) {
        err = gt_errf(GT_E_IO, "sim root: cannot install %s: %s", key_path, strerror(errno));
        goto out;
    }
    gt_log_info("attest: created %s root key in %s", GT_INSECURE_SIMULATION, dir);
out:
    unlink(tmp);
    gt_pkey_free(key);
    return err;
}

gt_err gt_sim_root_open(gt_pkey **root, char *pub_path, size_t pub_cap, const char *dir,
                        bool create)
{
    *root = NULL;
    char d[4096], key_path[4096 + 32], pub[4096 + 32];
    GT_TRY(gt_sim_root_dir(d, sizeof d, dir));
    GT_TRY(gt_path_join(key_path, sizeof key_path, d, SIM_KEY_FILE));
    GT_TRY(gt_path_join(pub, sizeof pub, d, SIM_PUB_FILE));
    if (!gt_path_exists(key_path)) {
        GT_ENSURE(create, GT_E_NOTFOUND, "sim root: no key in %s", d);
        GT_TRY(root_create(d, key_path));
    }
    gt_pkey *key = NULL;
    gt_err err;
    GT_TRY_GOTO(err, gt_err_wrap(gt_pkey_load_pem(&key, key_path, true), "sim root"), out);
    uint8_t id[GT_SHA256_BYTES];
    GT_TRY_GOTO(err, root_key_id(key, id), out);
    if (!gt_path_exists(pub)) {
        // The public half is derived from the private key, so rewriting it is idempotent.
        char tmp[4096 + 64];
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", pub, (long)getpid());
        GT_TRY_GOTO(err, gt_pkey_save_pem(key, tmp, false), out);
        if (rename(tmp, pub) != 0) {
            err = gt_errf(GT_E_IO, "sim root: cannot install %s: %s", pub, strerror(errno));
            unlink(tmp);
            goto out;
        }
    }
    if (pub_path != NULL) {
        GT_ENSURE_GOTO(err, (size_t)snprintf(pub_path, pub_cap, "%s", pub) < pub_cap, out,
                       GT_E_LIMIT, "sim root: path too long");
    }
    *root = key;
    key = NULL;
out:
    gt_pkey_free(key);
    return err;
}

gt_err gt_sim_measure_exe(uint8_t out[GT_MEASUREMENT_BYTES], const char *path)
{
    const char *p = path != NULL ? path : "/proc/self/exe";
    return gt_err_wrap(gt_hash_file(GT_HASH_SHA384, out, p), "sim: measuring %s", p);
}

static gt_err sim_signed_message(gt_buf *msg, const uint8_t *body, size_t n)
{
    GT_TRY(gt_buf_append(msg, GT_SIM_SIGN_DOMAIN, sizeof GT_SIM_SIGN_DOMAIN));  // with its NUL
    return gt_buf_append(msg, body, n);
}

const char *gt_sim_device_memory_name(gt_sim_device_memory m)
{
    switch (m) {
    case GT_SIM_MEMORY_UNSTATED: return "unstated";
    case GT_SIM_MEMORY_DEVD: return "devd";
    case GT_SIM_MEMORY_CUDA: return "cuda";
    case GT_SIM_MEMORY_HOST: return "host";
    default: return "unknown";
    }
}

gt_err gt_sim_evidence_create(gt_evidence *ev, const gt_sim_claims *claims, const gt_pkey *root)
{
    memset(ev, 0, sizeof *ev);
    GT_ENSURE(claims->device || !claims->cc_mode, GT_E_ARG, "sim: cc_mode is a device claim");
    GT_ENSURE(claims->device || claims->memory == GT_SIM_MEMORY_UNSTATED, GT_E_ARG,
              "sim: device memory is a device claim");
    GT_ENSURE((unsigned)claims->memory <= GT_SIM_MEMORY_HOST, GT_E_ARG,
              "sim: device memory %d out of range", (int)claims->memory);
    uint16_t flags = (claims->debug ? GT_SIM_FLAG_DEBUG : 0) |
                     (claims->device ? GT_SIM_FLAG_DEVICE : 0) |
                     (claims->cc_mode ? GT_SIM_FLAG_CC_MODE : 0) |
                     (uint16_t)((unsigned)claims->memory << GT_SIM_FLAG_MEMORY_SHIFT);
    uint8_t id[GT_SHA256_BYTES];
    GT_TRY(root_key_id(root, id));
    gt_writer w = gt_writer_init_dynamic();
    gt_buf msg = {0}, sig = {0};
    gt_err err;
    GT_TRY_GOTO(err, gt_writer_u16le(&w, GT_SIM_REPORT_VERSION), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, flags), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, claims->svn), out);
    GT_TRY_GOTO(err, gt_writer_u64le(&w, claims->issued_at), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, claims->measurement, GT_MEASUREMENT_BYTES), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, claims->report_data, GT_REPORT_DATA_BYTES), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, id, sizeof id), out);
    GT_ENSURE_GOTO(err, w.len == GT_SIM_SIGNED_BYTES, out, GT_E_STATE, "sim: layout drift");
    GT_TRY_GOTO(err, sim_signed_message(&msg, w.data, w.len), out);
    GT_TRY_GOTO(err, gt_pkey_sign(root, GT_HASH_SHA384, &sig, msg.data, msg.len), out);
    GT_ENSURE_GOTO(err, sig.len >= 8 && sig.len <= GT_SIM_SIG_MAX, out, GT_E_CRYPTO,
                   "sim: unexpected signature length %zu", sig.len);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, (uint16_t)sig.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, sig.data, sig.len), out);
    GT_TRY_GOTO(err, gt_buf_append(&ev->body, w.data, w.len), out);
    ev->type = GT_TEE_SIM;
    ev->version = GT_SIM_REPORT_VERSION;
    ev->enveloped = true;
out:
    gt_writer_free(&w);
    gt_buf_free_nowipe(&msg);
    gt_buf_free_nowipe(&sig);
    if (!gt_is_ok(err)) {
        gt_evidence_free(ev);
    }
    return err;
}

gt_err gt_sim_report_parse(gt_sim_report *rep, const uint8_t *data, size_t len)
{
    memset(rep, 0, sizeof *rep);
    gt_sim_report r = {0};
    gt_reader rd = gt_reader_init(data, len);
    uint16_t sig_len = 0;
    GT_TRY(gt_err_wrap(gt_reader_u16le(&rd, &r.version), "sim evidence"));
    GT_ENSURE(r.version == GT_SIM_REPORT_VERSION, GT_E_UNSUPPORTED,
              "sim evidence: version %u (expected %u)", r.version, GT_SIM_REPORT_VERSION);
    GT_TRY(gt_err_wrap(gt_reader_u16le(&rd, &r.flags), "sim evidence"));
    GT_ENSURE((r.flags & ~GT_SIM_FLAGS_KNOWN) == 0, GT_E_FORMAT,
              "sim evidence: unknown flags 0x%04x", r.flags);
    GT_ENSURE(!(r.flags & GT_SIM_FLAG_CC_MODE) || (r.flags & GT_SIM_FLAG_DEVICE), GT_E_FORMAT,
              "sim evidence: cc_mode flag without the device flag");
    GT_ENSURE(!(r.flags & GT_SIM_FLAG_MEMORY_MASK) || (r.flags & GT_SIM_FLAG_DEVICE),
              GT_E_FORMAT, "sim evidence: device memory without the device flag");
    GT_TRY(gt_err_wrap(gt_reader_u32le(&rd, &r.claims.svn), "sim evidence"));
    GT_TRY(gt_err_wrap(gt_reader_u64le(&rd, &r.claims.issued_at), "sim evidence"));
    GT_TRY(gt_err_wrap(gt_reader_bytes(&rd, r.claims.measurement, GT_MEASUREMENT_BYTES),
                       "sim evidence"));
    GT_TRY(gt_err_wrap(gt_reader_bytes(&rd, r.claims.report_data, GT_REPORT_DATA_BYTES),
                       "sim evidence"));
    GT_TRY(gt_err_wrap(gt_reader_bytes(&rd, r.root_key_id, sizeof r.root_key_id),
                       "sim evidence"));
    r.signed_region = (gt_span){data, rd.pos};
    GT_TRY(gt_err_wrap(gt_reader_u16le(&rd, &sig_len), "sim evidence"));
    GT_ENSURE(sig_len >= 8 && sig_len <= GT_SIM_SIG_MAX, GT_E_FORMAT,
              "sim evidence: signature length %u out of range", sig_len);
    GT_TRY(gt_err_wrap(gt_reader_span(&rd, sig_len, &r.signature), "sim evidence: signature"));
    GT_TRY(gt_reader_expect_end(&rd, "sim evidence"));
    r.claims.debug = (r.flags & GT_SIM_FLAG_DEBUG) != 0;
    r.claims.device = (r.flags & GT_SIM_FLAG_DEVICE) != 0;
    r.claims.cc_mode = (r.flags & GT_SIM_FLAG_CC_MODE) != 0;
    r.claims.memory = (gt_sim_device_memory)((r.flags & GT_SIM_FLAG_MEMORY_MASK) >>
                                             GT_SIM_FLAG_MEMORY_SHIFT);
    *rep = r;
    return GT_OK;
}

static gt_err sim_claims_json(const gt_sim_report *r, cJSON *c)
{
    bool ok = cJSON_AddStringToObject(c, "security", GT_INSECURE_SIMULATION) != NULL;
    ok &= cJSON_AddNumberToObject(c, "version", r->version) != NULL;
    GT_TRY(gt_claims_add_hex(c, "measurement", r->claims.measurement, GT_MEASUREMENT_BYTES));
    GT_TRY(gt_claims_add_hex(c, "report_data", r->claims.report_data, GT_REPORT_DATA_BYTES));
    ok &= cJSON_AddNumberToObject(c, "svn", r->claims.svn) != NULL;
    ok &= cJSON_AddBoolToObject(c, "debug", r->claims.debug) != NULL;
    ok &= cJSON_AddBoolToObject(c, "device", r->claims.device) != NULL;
    if (r->claims.device) {
        ok &= cJSON_AddBoolToObject(c, "cc_mode", r->claims.cc_mode) != NULL;
        ok &= cJSON_AddStringToObject(c, "device_memory",
                                      gt_sim_device_memory_name(r->claims.memory)) != NULL;
    }
    ok &= cJSON_AddNumberToObject(c, "issued_at", (double)r->claims.issued_at) != NULL;
    GT_TRY(gt_claims_add_hex(c, "root_key_id", r->root_key_id, sizeof r->root_key_id));
    GT_ENSURE(ok, GT_E_NOMEM, "sim claims: out of memory");
    return GT_OK;
}

// A caller root: a PEM public key (SubjectPublicKeyInfo) or a certificate whose key is used,
// from the file's bytes (from its path only when the caller gave no bytes).
static gt_err root_load(const gt_attest_file *f, gt_pkey **key)
{
    *key = NULL;
    bool is_cert = f->data.data != NULL &&
                   memmem(f->data.data, f->data.len, "BEGIN CERTIFICATE", 17) != NULL;
    if (is_cert) {
        gt_x509 **certs = NULL;
        size_t n = 0;
        GT_TRY(gt_x509_parse_pem_all(&certs, &n, (const char *)f->data.data, f->data.len));
        gt_err err = n > 0 ? gt_x509_public_key(certs[0], key)
                           : gt_errf(GT_E_FORMAT, "no certificate");
        for (size_t i = 0; i < n; i++) {
            gt_x509_free(certs[i]);
        }
        free(certs);
        return err;
    }
    if (f->data.len > 0) {
        return gt_pkey_parse_pem_public(key, f->data.data, f->data.len);
    }
    GT_ENSURE(f->path != NULL, GT_E_ARG, "sim root: neither bytes nor a PEM file path");
    return gt_pkey_load_pem(key, f->path, false);
}

gt_err gt_attest_verify_sim(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    gt_sim_report r;
    gt_err perr = gt_sim_report_parse(&r, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        return gt_strlist_addf(&c->invalid, "%s", perr.msg);
    }
    c->parsed = true;
    c->version = r.version;
    GT_TRY(sim_claims_json(&r, c->claims));
    GT_TRY(gt_strlist_addf(&c->warnings, "%s: claims signed by a software key",
                           GT_INSECURE_SIMULATION));
    const gt_appraise_params *p = ctx->p;
    if (p->root_count == 0) {
        return gt_strlist_addf(&c->invalid, "sim: no root given (pass the sim root public key with "
                                            "--root); the evidence's own key id is never trusted");
    }
    gt_buf msg = {0};
    gt_err err;
    GT_TRY_GOTO(err, sim_signed_message(&msg, r.signed_region.data, r.signed_region.len), out);
    bool id_seen = false;
    char given[2 * GT_SHA256_BYTES + 1] = "";
    for (size_t i = 0; i < p->root_count && !c->signature_valid; i++) {
        gt_pkey *key = NULL;
        gt_err lerr = root_load(&p->roots[i], &key);
        uint8_t id[GT_SHA256_BYTES];
        if (gt_is_ok(lerr)) {
            lerr = root_key_id(key, id);
        }
        if (!gt_is_ok(lerr)) {
            GT_TRY_GOTO(err, gt_strlist_addf(&c->warnings, "sim: root %s unusable: %s",
                                             p->roots[i].path ? p->roots[i].path : "(memory)",
                                             lerr.msg),
                        next);
            goto next;
        }
        if (gt_ct_equal(id, r.root_key_id, sizeof id)) {
            id_seen = true;
        } else {
            gt_hex_encode(given, sizeof given, id, sizeof id);
        }
        if (gt_is_ok(gt_pkey_verify(key, GT_HASH_SHA384, r.signature.data, r.signature.len,
                                    msg.data, msg.len))) {
            c->signature_valid = true;
            c->chain_valid = true;  // the signing key IS a caller root: the whole chain
        }
    next:
        gt_pkey_free(key);
        if (!gt_is_ok(err)) {
            goto out;
        }
    }
    if (!c->signature_valid) {
        char want[2 * GT_SHA256_BYTES + 1];
        gt_hex_encode(want, sizeof want, r.root_key_id, sizeof r.root_key_id);
        if (!id_seen && given[0] != '\0') {
            GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "sim: signature does not verify with "
                                             "the given root (evidence names root key id %.16s..., "
                                             "given root is %.16s...)", want, given),
                        out);
        } else {
            GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "sim: signature does not verify with "
                                                          "the given root"),
                        out);
        }
    }
out:
    gt_buf_free_nowipe(&msg);
    return err;
}
