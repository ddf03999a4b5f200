// The sim device's identity and evidence (layout in devproto.h), and the default hooks.
#include <gputravel/devproto.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// The built-in policies say what they allow: simulation (this is the sim device), never debug
// (allow_debug false, as the default is), CC mode on for a device. Sim reports no TCB status.
// Sim evidence from a device: accepted as simulation only, never debug, CC mode on.
static const char default_device_policy[] =
    "{\"accepted_tee_types\": [\"sim\"], \"allow_simulation\": true, \"allow_debug\": false,"
    " \"gpu\": {\"cc_mode\": true}}";
// Sim evidence from a client TEE: accepted as simulation only, never debug.
static const char default_admission_policy[] =
    "{\"accepted_tee_types\": [\"sim\"], \"allow_simulation\": true, \"allow_debug\": false}";

struct gt_sim_identity {
    gt_pkey *key;        // the device identity key
    gt_buf pem;          // its public key, PEM (root-pub.pem of the identity directory)
    gt_buf cert_sig;     // the vendor root's signature over the identity public key
    uint8_t measurement[GT_MEASUREMENT_BYTES];
    gt_sim_device_memory memory;  // what the evidence says holds this device's memory
    uint8_t prk[GT_SHA256_BYTES];  // HKDF-extract of the identity key file: the export secrets' root
};

static gt_err xy_of(const gt_pkey *k, uint8_t out[GT_P384_XY_BYTES])
{
    size_t len = 0;
    GT_TRY(gt_pkey_ec_public_xy(k, out, GT_P384_XY_BYTES, &len));
    GT_ENSURE(len == GT_P384_XY_BYTES, GT_E_FORMAT, "sim device: not a P-384 key (%zu bytes)",
              len);
    return GT_OK;
}

#define CERT_MSG_BYTES (sizeof(GT_SIM_DEV_CERT_TAG) - 1 + GT_P384_XY_BYTES)
static void cert_message(uint8_t out[CERT_MSG_BYTES], const uint8_t xy[GT_P384_XY_BYTES])
{
    memcpy(out, GT_SIM_DEV_CERT_TAG, sizeof(GT_SIM_DEV_CERT_TAG) - 1);
    memcpy(out + sizeof(GT_SIM_DEV_CERT_TAG) - 1, xy, GT_P384_XY_BYTES);
}

// The identity key file's bytes, extracted once into prk and wiped: devd's persistent secret,
// from which it derives its export-signing key and resume secret (gt_sim_identity_derive).
static gt_err identity_prk(gt_sim_identity *id, const char *identity_dir)
{
    char dir[4096], path[4096 + 32];
    GT_TRY(gt_sim_root_dir(dir, sizeof dir, identity_dir));
    GT_TRY(gt_path_join(path, sizeof path, dir, GT_SIM_ROOT_KEY_FILE));
    gt_buf key = {0};
    GT_TRY(gt_file_read_all(path, 1u << 16, &key));
    gt_err err = gt_hmac(GT_HASH_SHA256, id->prk, key.data, key.len,
                         (const uint8_t *)"gputravel devd identity", 23);
    gt_buf_free(&key);  // wipes
    return err;
}

gt_err gt_sim_identity_derive(const gt_sim_identity *id, const char *purpose, uint8_t out[32])
{
    char info[128];
    int n = snprintf(info, sizeof info, "gputravel devd %s", purpose);
    GT_ENSURE(n > 0 && (size_t)n < sizeof info, GT_E_ARG, "sim identity: purpose too long");
    return gt_hkdf(GT_HASH_SHA256, out, 32, id->prk, sizeof id->prk, NULL, 0,
                   (const uint8_t *)info, (size_t)n);
}

gt_err gt_sim_identity_id(const gt_sim_identity *id, uint8_t out[32])
{
    return gt_hash(GT_HASH_SHA256, out, id->pem.data, id->pem.len);
}

gt_err gt_sim_identity_open(gt_sim_identity **out, const char *identity_dir,
                            const char *vendor_root_dir)
{
    *out = NULL;
    gt_err err = GT_OK;
    gt_pkey *vendor = NULL;
    char dir[4096], pub[4096 + 32];
    uint8_t xy[GT_P384_XY_BYTES], msg[CERT_MSG_BYTES];
    gt_sim_identity *id = calloc(1, sizeof *id);
    GT_ENSURE(id != NULL, GT_E_NOMEM, "sim identity: out of memory");
    if (identity_dir == NULL) {
        char root[4000];
        GT_TRY_GOTO(err, gt_sim_root_dir(root, sizeof root, NULL), out);
        GT_TRY_GOTO(err, gt_path_join(dir, sizeof dir, root, "devd-identity"), out);
        identity_dir = dir;
    }
    GT_TRY_GOTO(err, gt_err_wrap(gt_sim_root_open(&id->key, pub, sizeof pub, identity_dir, true),
                                 "devd identity: "), out);
    GT_TRY_GOTO(err, gt_file_read_all(pub, GT_SIM_DEV_MAX_PEM, &id->pem), out);
    GT_TRY_GOTO(err, identity_prk(id, identity_dir), out);
    GT_TRY_GOTO(err, xy_of(id->key, xy), out);
    // "manufacturing": the vendor root certifies the identity key
    GT_TRY_GOTO(err, gt_err_wrap(gt_sim_root_open(&vendor, NULL, 0, vendor_root_dir, true),
                                 "devd vendor root: "), out);
    cert_message(msg, xy);
    GT_TRY_GOTO(err, gt_pkey_sign(vendor, GT_HASH_SHA384, &id->cert_sig, msg, sizeof msg), out);
    GT_TRY_GOTO(err, gt_sim_measure_exe(id->measurement, NULL), out);
    id->memory = GT_SIM_MEMORY_DEVD;
out:
    gt_pkey_free(vendor);
    if (!gt_is_ok(err)) {
        gt_sim_identity_free(id);
        return err;
    }
    *out = id;
    return GT_OK;
}

void gt_sim_identity_set_memory(gt_sim_identity *id, gt_sim_device_memory memory)
{
    id->memory = memory;
}

void gt_sim_identity_free(gt_sim_identity *id)
{
    if (id == NULL) {
        return;
    }
    gt_pkey_free(id->key);
    gt_secure_zero(id->prk, sizeof id->prk);
    gt_buf_free_nowipe(&id->pem);
    gt_buf_free_nowipe(&id->cert_sig);
    free(id);
}

gt_err gt_sim_identity_produce(void *ctx, const uint8_t report_data[GT_REPORT_DATA_BYTES],
                               gt_buf *evidence)
{
    const gt_sim_identity *id = ctx;
    gt_err err = GT_OK;
    gt_evidence ev;
    memset(&ev, 0, sizeof ev);
    gt_buf gtev = {0};
    gt_writer w = gt_writer_init_dynamic();
    gt_sim_claims c;
    memset(&c, 0, sizeof c);
    memcpy(c.measurement, id->measurement, sizeof c.measurement);
    memcpy(c.report_data, report_data, sizeof c.report_data);
    c.device = true;
    c.cc_mode = true;
    c.memory = id->memory;
    c.issued_at = (uint64_t)time(NULL);
    GT_TRY_GOTO(err, gt_sim_evidence_create(&ev, &c, id->key), out);
    GT_TRY_GOTO(err, gt_evidence_encode(&ev, &gtev), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, GT_SIM_DEV_MAGIC, 8), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, GT_SIM_DEV_VERSION), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, (uint16_t)id->pem.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, id->pem.data, id->pem.len), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, (uint16_t)id->cert_sig.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, id->cert_sig.data, id->cert_sig.len), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)gtev.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, gtev.data, gtev.len), out);
    GT_TRY_GOTO(err, gt_buf_append(evidence, w.data, w.len), out);
out:
    gt_evidence_free(&ev);
    gt_buf_free_nowipe(&gtev);
    gt_writer_free(&w);
    return err;
}

gt_err gt_sim_device_bundle_parse(gt_span bundle, gt_sim_device_bundle *out)
{
    gt_reader r = gt_reader_init(bundle.data, bundle.len);
    gt_sim_device_bundle b;
    memset(&b, 0, sizeof b);
    uint8_t magic[8] = {0};
    uint16_t version = 0, n16 = 0;
    uint32_t n32 = 0;
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, GT_SIM_DEV_MAGIC, 8) == 0, GT_E_FORMAT,
              "device evidence: not sim device evidence");
    GT_TRY(gt_reader_u16le(&r, &version));
    GT_ENSURE(version == GT_SIM_DEV_VERSION, GT_E_UNSUPPORTED, "device evidence: version %u",
              version);
    GT_TRY(gt_reader_u16le(&r, &n16));
    GT_ENSURE(n16 <= GT_SIM_DEV_MAX_PEM, GT_E_FORMAT, "device evidence: identity key of %u bytes",
              n16);
    GT_TRY(gt_reader_span(&r, n16, &b.identity_pem));
    GT_TRY(gt_reader_u16le(&r, &n16));
    GT_ENSURE(n16 <= GT_SIM_DEV_MAX_CERT, GT_E_FORMAT,
              "device evidence: certificate signature of %u bytes", n16);
    GT_TRY(gt_reader_span(&r, n16, &b.cert_sig));
    GT_TRY(gt_reader_u32le(&r, &n32));
    GT_TRY(gt_reader_span(&r, n32, &b.gtev));
    GT_TRY(gt_reader_expect_end(&r, "device evidence"));
    *out = b;
    return GT_OK;
}

// "reason; reason; ..." of a rejected appraisal, as one error.
static gt_err appraisal_error(const gt_appraisal *a, const char *who)
{
    char text[160] = "";
    for (size_t i = 0; i < a->reason_count; i++) {
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used, "%s%s", i ? "; " : "", a->reasons[i]);
    }
    gt_code code = a->verdict == GT_VERDICT_REJECTED ? GT_E_POLICY : GT_E_AUTH;
    return gt_errf(code, "%s evidence %s: %s", who, gt_verdict_name(a->verdict),
                   text[0] ? text : "no reason given");
}

gt_err gt_sim_device_evidence_appraise(gt_span bundle, const uint8_t *report_data,
                                       const char *vendor_root_pub_pem, const gt_policy *policy,
                                       cJSON **claims_out)
{
    if (claims_out != NULL) {
        *claims_out = NULL;
    }
    gt_sim_device_bundle b;
    GT_TRY(gt_sim_device_bundle_parse(bundle, &b));
    gt_err err = GT_OK;
    gt_pkey *vendor = NULL, *ident = NULL;
    gt_policy *own = NULL;
    gt_appraisal a;
    memset(&a, 0, sizeof a);
    bool appraised = false;
    char vpath[4096 + 32];
    uint8_t vxy[GT_P384_XY_BYTES], ixy[GT_P384_XY_BYTES], msg[CERT_MSG_BYTES];
    if (vendor_root_pub_pem == NULL) {
        char root[4000];
        GT_TRY_GOTO(err, gt_sim_root_dir(root, sizeof root, NULL), out);
        GT_TRY_GOTO(err, gt_path_join(vpath, sizeof vpath, root, "root-pub.pem"), out);
        vendor_root_pub_pem = vpath;
    }
    GT_TRY_GOTO(err, gt_err_wrap(gt_pkey_load_pem(&vendor, vendor_root_pub_pem, false),
                                 "device evidence: vendor root: "), out);
    GT_TRY_GOTO(err, xy_of(vendor, vxy), out);
    GT_TRY_GOTO(err, gt_err_wrap(gt_pkey_parse_pem_public(&ident, b.identity_pem.data,
                                                          b.identity_pem.len),
                                 "device evidence: identity key: "), out);
    GT_TRY_GOTO(err, xy_of(ident, ixy), out);
    // the identity key is certified by the vendor root
    cert_message(msg, ixy);
    GT_ENSURE_GOTO(err, gt_is_ok(gt_ecdsa_verify_der(GT_EC_P384, GT_HASH_SHA384, b.cert_sig.data,
                                                     b.cert_sig.len, msg, sizeof msg, vxy,
                                                     sizeof vxy)),
                   out, GT_E_AUTH, "device evidence: identity key not certified by the vendor root");
    // the evidence is signed by the identity key, bound to this session, and a CC-mode device
    if (policy == NULL) {
        GT_TRY_GOTO(err, gt_policy_parse(&own, default_device_policy,
                                         sizeof default_device_policy - 1), out);
        policy = own;
    }
    gt_attest_file root = {.path = NULL, .data = b.identity_pem};  // bytes only: no file
    gt_appraise_params p;
    memset(&p, 0, sizeof p);
    p.roots = &root;
    p.root_count = 1;
    p.expected_report_data = report_data;
    GT_TRY_GOTO(err, gt_attest_appraise_bytes(&a, b.gtev.data, b.gtev.len, GT_TEE_SIM, policy, &p),
                out);
    appraised = true;
    if (a.verdict != GT_VERDICT_ACCEPTED) {
        err = appraisal_error(&a, "device");
        goto out;
    }
    GT_ENSURE_GOTO(err, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a.claims, "device")), out,
                   GT_E_POLICY, "device evidence: describes a CPU TEE, not a device");
    if (claims_out != NULL) {
        *claims_out = a.claims;
        a.claims = NULL;
    }
out:
    if (appraised) {
        gt_appraisal_free(&a);
    }
    gt_policy_free(own);
    gt_pkey_free(vendor);
    gt_pkey_free(ident);
    return err;
}

gt_err gt_sim_default_client_produce(void *ctx, const uint8_t rd[GT_REPORT_DATA_BYTES],
                                     gt_buf *evidence)
{
    (void)ctx;
    gt_collect_params p;
    memset(&p, 0, sizeof p);
    p.type = GT_TEE_SIM;
    gt_evidence ev;
    GT_TRY(gt_attest_collect(&ev, &p, rd));
    gt_err err = gt_evidence_encode(&ev, evidence);
    gt_evidence_free(&ev);
    return err;
}

gt_err gt_sim_default_client_appraise(void *ctx, gt_span evidence,
                                      const uint8_t rd[GT_REPORT_DATA_BYTES])
{
    return gt_sim_device_evidence_appraise(evidence, rd, ctx, NULL, NULL);
}

gt_err gt_sim_admission_open(gt_sim_admission **out, const char *policy_path, const char *root_pem)
{
    *out = NULL;
    gt_err err = GT_OK;
    gt_sim_admission *adm = calloc(1, sizeof *adm);
    GT_ENSURE(adm != NULL, GT_E_NOMEM, "devd: out of memory");
    if (policy_path != NULL) {
        GT_TRY_GOTO(err, gt_err_wrap(gt_policy_load_file(&adm->policy, policy_path),
                                     "devd admission policy: "), out);
    } else {
        GT_TRY_GOTO(err, gt_policy_parse(&adm->policy, default_admission_policy,
                                         sizeof default_admission_policy - 1), out);
    }
    if (root_pem != NULL) {
        GT_ENSURE_GOTO(err, strlen(root_pem) < sizeof adm->root_path, out, GT_E_ARG,
                       "devd: root path too long");
        memcpy(adm->root_path, root_pem, strlen(root_pem) + 1);
    } else {  // the sim root of this machine (created on first use)
        gt_pkey *k = NULL;
        GT_TRY_GOTO(err, gt_sim_root_open(&k, adm->root_path, sizeof adm->root_path, NULL, true),
                    out);
        gt_pkey_free(k);
    }
    GT_TRY_GOTO(err, gt_file_read_all(adm->root_path, 1u << 20, &adm->root_data), out);
out:
    if (!gt_is_ok(err)) {
        gt_sim_admission_free(adm);
        return err;
    }
    *out = adm;
    return GT_OK;
}

void gt_sim_admission_free(gt_sim_admission *adm)
{
    if (adm == NULL) {
        return;
    }
    gt_policy_free(adm->policy);
    gt_buf_free_nowipe(&adm->root_data);
    free(adm);
}

gt_err gt_sim_admission_appraise(void *ctx, gt_span evidence,
                                 const uint8_t rd[GT_REPORT_DATA_BYTES])
{
    const gt_sim_admission *adm = ctx;
    gt_attest_file root = {.path = adm->root_path, .data = gt_buf_span(&adm->root_data)};
    gt_appraise_params p;
    memset(&p, 0, sizeof p);
    p.roots = &root;
    p.root_count = 1;
    p.expected_report_data = rd;
    gt_appraisal a;
    memset(&a, 0, sizeof a);
    GT_TRY(gt_attest_appraise_bytes(&a, evidence.data, evidence.len, GT_TEE_AUTO, adm->policy,
                                    &p));
    gt_err err = GT_OK;
    if (a.verdict != GT_VERDICT_ACCEPTED) {
        err = appraisal_error(&a, "client");
    } else {
        gt_log_info("devd: client evidence accepted (%s%s)", gt_tee_type_name(a.type),
                    a.insecure_simulation ? ", " GT_INSECURE_SIMULATION : "");
    }
    gt_appraisal_free(&a);
    return err;
}
