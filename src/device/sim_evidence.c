// The sim device's identity and evidence (format in sim_evidence.h), and the default hooks.
#include "sim_evidence.h"

#include <stdlib.h>
#include <string.h>

struct gt_sim_identity {
    gt_pkey *root;    // the simulated vendor root (a real GPU never holds its vendor's key)
    gt_pkey *device;  // the device identity key
    uint8_t device_pub[GT_SIM_P384_XY_BYTES];
    uint8_t root_pub[GT_SIM_P384_XY_BYTES];
    gt_buf cert_sig;  // root's signature over the device key
    uint8_t exe_measurement[GT_SHA384_BYTES];
    uint64_t mem_limit;
    bool cc_mode;
};

static gt_err xy_of(const gt_pkey *k, uint8_t out[GT_SIM_P384_XY_BYTES])
{
    size_t len = 0;
    GT_TRY(gt_pkey_ec_public_xy(k, out, GT_SIM_P384_XY_BYTES, &len));
    GT_ENSURE(len == GT_SIM_P384_XY_BYTES, GT_E_CRYPTO, "sim identity: P-384 point of %zu bytes",
              len);
    return GT_OK;
}

static gt_err cert_message(uint8_t out[sizeof(GT_SIM_DEV_CERT_TAG) - 1 + GT_SIM_P384_XY_BYTES],
                           const uint8_t device_pub[GT_SIM_P384_XY_BYTES])
{
    memcpy(out, GT_SIM_DEV_CERT_TAG, sizeof(GT_SIM_DEV_CERT_TAG) - 1);
    memcpy(out + sizeof(GT_SIM_DEV_CERT_TAG) - 1, device_pub, GT_SIM_P384_XY_BYTES);
    return GT_OK;
}

gt_err gt_sim_identity_create(gt_sim_identity **out, const char *vendor_key_pem,
                              uint64_t mem_limit, bool cc_mode)
{
    *out = NULL;
    gt_err err = GT_OK;
    gt_sim_identity *id = calloc(1, sizeof *id);
    GT_ENSURE(id != NULL, GT_E_NOMEM, "sim identity: out of memory");
    id->mem_limit = mem_limit;
    id->cc_mode = cc_mode;
    if (vendor_key_pem != NULL) {
        GT_TRY_GOTO(err, gt_pkey_load_pem(&id->root, vendor_key_pem, true), out);
    } else {
        GT_TRY_GOTO(err, gt_pkey_generate_ec(&id->root, GT_EC_P384), out);
    }
    GT_TRY_GOTO(err, gt_pkey_generate_ec(&id->device, GT_EC_P384), out);
    GT_TRY_GOTO(err, xy_of(id->root, id->root_pub), out);
    GT_TRY_GOTO(err, xy_of(id->device, id->device_pub), out);
    uint8_t msg[sizeof(GT_SIM_DEV_CERT_TAG) - 1 + GT_SIM_P384_XY_BYTES];
    GT_TRY_GOTO(err, cert_message(msg, id->device_pub), out);
    GT_TRY_GOTO(err, gt_pkey_sign(id->root, GT_HASH_SHA384, &id->cert_sig, msg, sizeof msg), out);
    GT_TRY_GOTO(err, gt_hash_file(GT_HASH_SHA384, id->exe_measurement, "/proc/self/exe"), out);
out:
    if (!gt_is_ok(err)) {
        gt_sim_identity_free(id);
        return err;
    }
    *out = id;
    return GT_OK;
}

void gt_sim_identity_free(gt_sim_identity *id)
{
    if (id == NULL) {
        return;
    }
    gt_pkey_free(id->root);
    gt_pkey_free(id->device);
    gt_buf_free_nowipe(&id->cert_sig);
    free(id);
}

static gt_err put_blob(gt_writer *w, const uint8_t *p, size_t n)
{
    GT_ENSURE(n <= UINT16_MAX, GT_E_LIMIT, "sim evidence: field of %zu bytes", n);
    GT_TRY(gt_writer_u16le(w, (uint16_t)n));
    return gt_writer_bytes(w, p, n);
}

gt_err gt_sim_identity_produce(void *ctx, const uint8_t report_data[GT_DEVICE_REPORT_DATA_BYTES],
                               gt_buf *evidence)
{
    const gt_sim_identity *id = ctx;
    gt_err err = GT_OK;
    gt_writer w = gt_writer_init_dynamic();
    gt_buf sig = {0};
    uint8_t flags = GT_SIM_DEV_FLAG_SIMULATED | (id->cc_mode ? GT_SIM_DEV_FLAG_CC_MODE : 0);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, GT_SIM_DEV_MAGIC, 8), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, GT_SIM_DEV_VERSION), out);
    GT_TRY_GOTO(err, gt_writer_u8(&w, flags), out);
    GT_TRY_GOTO(err, gt_writer_u64le(&w, id->mem_limit), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, id->exe_measurement, sizeof id->exe_measurement), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, report_data, GT_DEVICE_REPORT_DATA_BYTES), out);
    GT_TRY_GOTO(err, put_blob(&w, id->device_pub, sizeof id->device_pub), out);
    GT_TRY_GOTO(err, put_blob(&w, id->root_pub, sizeof id->root_pub), out);
    GT_TRY_GOTO(err, put_blob(&w, id->cert_sig.data, id->cert_sig.len), out);
    GT_TRY_GOTO(err, gt_pkey_sign(id->device, GT_HASH_SHA384, &sig, w.data, w.len), out);
    GT_TRY_GOTO(err, put_blob(&w, sig.data, sig.len), out);
    GT_TRY_GOTO(err, gt_buf_append(evidence, w.data, w.len), out);
out:
    gt_writer_free(&w);
    gt_buf_free_nowipe(&sig);
    return err;
}

static gt_err get_blob(gt_reader *r, gt_span *s)
{
    uint16_t n = 0;
    GT_TRY(gt_reader_u16le(r, &n));
    return gt_reader_span(r, n, s);
}

gt_err gt_sim_device_evidence_verify(gt_span evidence, const uint8_t *report_data,
                                     const uint8_t *pinned_root_xy, gt_sim_device_claims *claims)
{
    gt_reader r = gt_reader_init(evidence.data, evidence.len);
    gt_sim_device_claims c;
    memset(&c, 0, sizeof c);
    uint8_t magic[8] = {0};
    uint16_t version = 0;
    gt_span dev_pub = {0}, root_pub = {0}, cert_sig = {0}, sig = {0};
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, GT_SIM_DEV_MAGIC, 8) == 0, GT_E_FORMAT,
              "device evidence: not sim device evidence");
    GT_TRY(gt_reader_u16le(&r, &version));
    GT_ENSURE(version == GT_SIM_DEV_VERSION, GT_E_UNSUPPORTED, "device evidence: version %u",
              version);
    GT_TRY(gt_reader_u8(&r, &c.flags));
    GT_TRY(gt_reader_u64le(&r, &c.mem_limit));
    GT_TRY(gt_reader_bytes(&r, c.exe_measurement, sizeof c.exe_measurement));
    GT_TRY(gt_reader_bytes(&r, c.report_data, sizeof c.report_data));
    GT_TRY(get_blob(&r, &dev_pub));
    GT_TRY(get_blob(&r, &root_pub));
    GT_TRY(get_blob(&r, &cert_sig));
    size_t signed_len = r.pos;
    GT_TRY(get_blob(&r, &sig));
    GT_TRY(gt_reader_expect_end(&r, "device evidence"));
    GT_ENSURE(dev_pub.len == GT_SIM_P384_XY_BYTES && root_pub.len == GT_SIM_P384_XY_BYTES,
              GT_E_FORMAT, "device evidence: keys are not P-384 points");
    memcpy(c.device_pub, dev_pub.data, GT_SIM_P384_XY_BYTES);
    memcpy(c.root_pub, root_pub.data, GT_SIM_P384_XY_BYTES);
    GT_ENSURE((c.flags & GT_SIM_DEV_FLAG_SIMULATED) != 0, GT_E_POLICY,
              "device evidence: a sim device must mark its evidence simulated");
    uint8_t msg[sizeof(GT_SIM_DEV_CERT_TAG) - 1 + GT_SIM_P384_XY_BYTES];
    GT_TRY(cert_message(msg, c.device_pub));
    gt_err e = gt_ecdsa_verify_der(GT_EC_P384, GT_HASH_SHA384, cert_sig.data, cert_sig.len, msg,
                                   sizeof msg, c.root_pub, sizeof c.root_pub);
    GT_ENSURE(gt_is_ok(e), GT_E_AUTH, "device evidence: identity certificate does not verify");
    e = gt_ecdsa_verify_der(GT_EC_P384, GT_HASH_SHA384, sig.data, sig.len, evidence.data,
                            signed_len, c.device_pub, sizeof c.device_pub);
    GT_ENSURE(gt_is_ok(e), GT_E_AUTH, "device evidence: signature does not verify");
    if (pinned_root_xy != NULL) {
        GT_ENSURE(gt_ct_equal(pinned_root_xy, c.root_pub, GT_SIM_P384_XY_BYTES), GT_E_POLICY,
                  "device evidence: certified by another vendor root");
    }
    if (report_data != NULL) {
        GT_ENSURE(gt_ct_equal(report_data, c.report_data, GT_DEVICE_REPORT_DATA_BYTES),
                  GT_E_AUTH, "device evidence: not bound to this session (report_data)");
    }
    if (claims != NULL) {
        *claims = c;
    }
    return GT_OK;
}

gt_err gt_sim_default_client_produce(void *ctx, const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES],
                                     gt_buf *evidence)
{
    (void)ctx;
    GT_TRY(gt_buf_append(evidence, GT_SIM_CLIENT_NOTEE_MAGIC, 8));
    return gt_buf_append(evidence, rd, GT_DEVICE_REPORT_DATA_BYTES);
}

gt_err gt_sim_default_client_appraise(void *ctx, gt_span evidence,
                                      const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES])
{
    (void)ctx;
    gt_sim_device_claims c;
    GT_TRY(gt_sim_device_evidence_verify(evidence, rd, NULL, &c));
    gt_log_debug("sim device: evidence verified (simulated, CC mode %s, %llu bytes)",
                 (c.flags & GT_SIM_DEV_FLAG_CC_MODE) ? "on" : "off",
                 (unsigned long long)c.mem_limit);
    return GT_OK;
}

gt_err gt_sim_default_devd_appraise(void *ctx, gt_span evidence,
                                    const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES])
{
    (void)ctx;
    gt_reader r = gt_reader_init(evidence.data, evidence.len);
    uint8_t magic[8] = {0};
    uint8_t bound[GT_DEVICE_REPORT_DATA_BYTES] = {0};
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, GT_SIM_CLIENT_NOTEE_MAGIC, 8) == 0, GT_E_POLICY,
              "devd: client evidence of an unknown kind (no attester configured)");
    GT_TRY(gt_reader_bytes(&r, bound, sizeof bound));
    GT_TRY(gt_reader_expect_end(&r, "client evidence"));
    GT_ENSURE(gt_ct_equal(bound, rd, sizeof bound), GT_E_AUTH,
              "devd: client evidence not bound to this session");
    gt_log_warn("devd: admitting an unattested client (no admission policy configured)");
    return GT_OK;
}
