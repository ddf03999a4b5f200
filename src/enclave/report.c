// EREPORT and the structures ENCLU takes from enclave memory (SDM vol. 3D, "EREPORT", "EGETKEY",
// tables TARGETINFO, REPORT, KEYREQUEST), as pure functions: the enclave runtime's ENCLU
// emulation and the tests call the same code.
#include <gputravel/enclave.h>

#include <string.h>

static bool all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= p[i];
    }
    return acc == 0;
}

void gt_sgx_targetinfo_of(gt_sgx_targetinfo *ti, const gt_sgx_secs_identity *secs)
{
    memset(ti, 0, sizeof *ti);
    memcpy(ti->mrenclave, secs->mrenclave, sizeof ti->mrenclave);
    ti->attributes = secs->attributes;
    ti->configsvn = secs->configsvn;
    ti->miscselect = secs->miscselect;
    memcpy(ti->configid, secs->configid, sizeof ti->configid);
}

void gt_sgx_targetinfo_encode(const gt_sgx_targetinfo *ti, uint8_t out[GT_SGX_TARGETINFO_BYTES])
{
    memset(out, 0, GT_SGX_TARGETINFO_BYTES);
    memcpy(out, ti->mrenclave, 32);
    gt_store_u64le(out + 32, ti->attributes.flags);
    gt_store_u64le(out + 40, ti->attributes.xfrm);
    out[48] = ti->cet_attributes;
    out[50] = (uint8_t)ti->configsvn;
    out[51] = (uint8_t)(ti->configsvn >> 8);
    gt_store_u32le(out + 52, ti->miscselect);
    memcpy(out + 64, ti->configid, 64);
}

gt_err gt_sgx_targetinfo_parse(const uint8_t *data, size_t len, gt_sgx_targetinfo *ti)
{
    memset(ti, 0, sizeof *ti);
    GT_ENSURE(len == GT_SGX_TARGETINFO_BYTES, GT_E_FORMAT, "TARGETINFO: %zu bytes (512)", len);
    gt_reader r = gt_reader_init(data, len);
    uint8_t resv1 = 0, resv2[8], resv3[384];
    GT_TRY(gt_reader_bytes(&r, ti->mrenclave, 32));
    GT_TRY(gt_reader_u64le(&r, &ti->attributes.flags));
    GT_TRY(gt_reader_u64le(&r, &ti->attributes.xfrm));
    GT_TRY(gt_reader_u8(&r, &ti->cet_attributes));
    GT_TRY(gt_reader_u8(&r, &resv1));
    GT_TRY(gt_reader_u16le(&r, &ti->configsvn));
    GT_TRY(gt_reader_u32le(&r, &ti->miscselect));
    GT_TRY(gt_reader_bytes(&r, resv2, sizeof resv2));
    GT_TRY(gt_reader_bytes(&r, ti->configid, 64));
    GT_TRY(gt_reader_bytes(&r, resv3, sizeof resv3));
    GT_ENSURE(resv1 == 0 && all_zero(resv2, sizeof resv2) && all_zero(resv3, sizeof resv3),
              GT_E_FORMAT, "TARGETINFO: reserved bytes set");
    return GT_OK;
}

void gt_sgx_report_write(const gt_sgx_report *r, uint8_t out[GT_SGX_REPORT_BYTES])
{
    memset(out, 0, GT_SGX_REPORT_BYTES);
    memcpy(out, r->cpusvn, 16);
    gt_store_u32le(out + 16, r->miscselect);
    out[20] = r->cet_attributes;
    memcpy(out + 32, r->isvextprodid, 16);
    gt_store_u64le(out + 48, r->attributes.flags);
    gt_store_u64le(out + 56, r->attributes.xfrm);
    memcpy(out + 64, r->mrenclave, 32);
    memcpy(out + 128, r->mrsigner, 32);
    memcpy(out + 192, r->configid, 64);
    const uint16_t svns[3] = {r->isvprodid, r->isvsvn, r->configsvn};
    for (int i = 0; i < 3; i++) {
        out[256 + 2 * i] = (uint8_t)svns[i];
        out[257 + 2 * i] = (uint8_t)(svns[i] >> 8);
    }
    memcpy(out + 304, r->isvfamilyid, 16);
    memcpy(out + 320, r->reportdata, 64);
    memcpy(out + 384, r->keyid, 32);
    memcpy(out + 416, r->mac, 16);
}

gt_err gt_sgx_report_decode(const uint8_t *data, size_t len, gt_sgx_report *r)
{
    memset(r, 0, sizeof *r);
    GT_ENSURE(len == GT_SGX_REPORT_BYTES, GT_E_FORMAT, "REPORT: %zu bytes (432)", len);
    gt_reader rd = gt_reader_init(data, len);
    uint8_t resv[11 + 32 + 32 + 42];
    GT_TRY(gt_reader_bytes(&rd, r->cpusvn, 16));
    GT_TRY(gt_reader_u32le(&rd, &r->miscselect));
    GT_TRY(gt_reader_u8(&rd, &r->cet_attributes));
    GT_TRY(gt_reader_bytes(&rd, resv, 11));
    GT_TRY(gt_reader_bytes(&rd, r->isvextprodid, 16));
    GT_TRY(gt_reader_u64le(&rd, &r->attributes.flags));
    GT_TRY(gt_reader_u64le(&rd, &r->attributes.xfrm));
    GT_TRY(gt_reader_bytes(&rd, r->mrenclave, 32));
    GT_TRY(gt_reader_bytes(&rd, resv + 11, 32));
    GT_TRY(gt_reader_bytes(&rd, r->mrsigner, 32));
    GT_TRY(gt_reader_bytes(&rd, resv + 43, 32));
    GT_TRY(gt_reader_bytes(&rd, r->configid, 64));
    GT_TRY(gt_reader_u16le(&rd, &r->isvprodid));
    GT_TRY(gt_reader_u16le(&rd, &r->isvsvn));
    GT_TRY(gt_reader_u16le(&rd, &r->configsvn));
    GT_TRY(gt_reader_bytes(&rd, resv + 75, 42));
    GT_TRY(gt_reader_bytes(&rd, r->isvfamilyid, 16));
    GT_TRY(gt_reader_bytes(&rd, r->reportdata, 64));
    GT_TRY(gt_reader_bytes(&rd, r->keyid, 32));
    GT_TRY(gt_reader_bytes(&rd, r->mac, 16));
    // EREPORT writes the reserved bytes as zero; the fields kept are re-encoded for the MAC, so
    // a set reserved byte is refused here rather than silently dropped.
    GT_ENSURE(all_zero(resv, sizeof resv), GT_E_FORMAT, "REPORT: reserved bytes set");
    return gt_reader_expect_end(&rd, "REPORT");
}

gt_err gt_sgx_keyrequest_parse(const uint8_t *data, size_t len, gt_sgx_keyrequest *req)
{
    memset(req, 0, sizeof *req);
    GT_ENSURE(len == GT_SGX_KEYREQUEST_BYTES, GT_E_FORMAT, "KEYREQUEST: %zu bytes (512)", len);
    gt_reader r = gt_reader_init(data, len);
    uint16_t resv1 = 0;
    uint8_t resv2[434];
    GT_TRY(gt_reader_u16le(&r, &req->keyname));
    GT_TRY(gt_reader_u16le(&r, &req->keypolicy));
    GT_TRY(gt_reader_u16le(&r, &req->isvsvn));
    GT_TRY(gt_reader_u16le(&r, &resv1));
    GT_TRY(gt_reader_bytes(&r, req->cpusvn, 16));
    GT_TRY(gt_reader_u64le(&r, &req->attributemask.flags));
    GT_TRY(gt_reader_u64le(&r, &req->attributemask.xfrm));
    GT_TRY(gt_reader_bytes(&r, req->keyid, 32));
    GT_TRY(gt_reader_u32le(&r, &req->miscmask));
    GT_TRY(gt_reader_u16le(&r, &req->configsvn));
    GT_TRY(gt_reader_bytes(&r, resv2, sizeof resv2));
    GT_ENSURE(resv1 == 0 && all_zero(resv2, sizeof resv2), GT_E_FORMAT,
              "KEYREQUEST: reserved bytes set");
    return GT_OK;
}

void gt_sgx_keyrequest_encode(const gt_sgx_keyrequest *req, uint8_t out[GT_SGX_KEYREQUEST_BYTES])
{
    memset(out, 0, GT_SGX_KEYREQUEST_BYTES);
    const uint16_t head[3] = {req->keyname, req->keypolicy, req->isvsvn};
    for (int i = 0; i < 3; i++) {
        out[2 * i] = (uint8_t)head[i];
        out[2 * i + 1] = (uint8_t)(head[i] >> 8);
    }
    memcpy(out + 8, req->cpusvn, 16);
    gt_store_u64le(out + 24, req->attributemask.flags);
    gt_store_u64le(out + 32, req->attributemask.xfrm);
    memcpy(out + 40, req->keyid, 32);
    gt_store_u32le(out + 72, req->miscmask);
    out[76] = (uint8_t)req->configsvn;
    out[77] = (uint8_t)(req->configsvn >> 8);
}

gt_err gt_sgx_report_mac(uint8_t mac[GT_CMAC_BYTES], const uint8_t report[GT_SGX_REPORT_BYTES],
                         const uint8_t key[GT_SGX_KEY_BYTES_128])
{
    return gt_aes128_cmac(mac, report, GT_SGX_REPORTBODY_BYTES, key);
}

// The report key of the enclave a TARGETINFO (or a verifier's own SECS) names, for KEYID keyid.
static gt_err report_key(uint8_t key[GT_SGX_KEY_BYTES_128], const gt_sgx_platform *pf,
                         const gt_sgx_secs_identity *target, const uint8_t keyid[32])
{
    gt_sgx_keyrequest req;
    memset(&req, 0, sizeof req);
    req.keyname = GT_SGX_KEYNAME_REPORT;
    memcpy(req.keyid, keyid, 32);
    return gt_sgx_egetkey(key, pf, target, &req);
}

gt_err gt_sgx_ereport(gt_sgx_report *out, const gt_sgx_platform *pf,
                      const gt_sgx_secs_identity *secs, const gt_sgx_targetinfo *ti,
                      const uint8_t reportdata[GT_SGX_REPORTDATA_BYTES], const uint8_t keyid[32])
{
    memset(out, 0, sizeof *out);
    memcpy(out->cpusvn, pf->cpusvn, 16);
    out->miscselect = secs->miscselect;
    memcpy(out->isvextprodid, secs->isvextprodid, 16);
    out->attributes = secs->attributes;
    memcpy(out->mrenclave, secs->mrenclave, 32);
    memcpy(out->mrsigner, secs->mrsigner, 32);
    memcpy(out->configid, secs->configid, 64);
    out->isvprodid = secs->isvprodid;
    out->isvsvn = secs->isvsvn;
    out->configsvn = secs->configsvn;
    memcpy(out->isvfamilyid, secs->isvfamilyid, 16);
    memcpy(out->reportdata, reportdata, 64);
    memcpy(out->keyid, keyid, 32);
    // The target's identity as EREPORT derives its key: only what TARGETINFO carries.
    gt_sgx_secs_identity target;
    memset(&target, 0, sizeof target);
    memcpy(target.mrenclave, ti->mrenclave, 32);
    target.attributes = ti->attributes;
    target.miscselect = ti->miscselect;
    memcpy(target.configid, ti->configid, 64);
    target.configsvn = ti->configsvn;
    uint8_t key[GT_SGX_KEY_BYTES_128], raw[GT_SGX_REPORT_BYTES];
    gt_err err;
    GT_TRY_GOTO(err, report_key(key, pf, &target, keyid), out);
    gt_sgx_report_write(out, raw);
    GT_TRY_GOTO(err, gt_sgx_report_mac(out->mac, raw, key), out);
out:
    gt_secure_zero(key, sizeof key);
    return err;
}

gt_err gt_sgx_report_verify(const gt_sgx_report *r, const gt_sgx_platform *pf,
                            const gt_sgx_secs_identity *me)
{
    uint8_t key[GT_SGX_KEY_BYTES_128], raw[GT_SGX_REPORT_BYTES], mac[GT_CMAC_BYTES];
    gt_err err;
    GT_TRY_GOTO(err, report_key(key, pf, me, r->keyid), out);
    gt_sgx_report_write(r, raw);
    GT_TRY_GOTO(err, gt_sgx_report_mac(mac, raw, key), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(mac, r->mac, GT_CMAC_BYTES), out, GT_E_AUTH,
                   "report: the MAC does not verify for this target (another target, or the "
                   "report was changed)");
out:
    gt_secure_zero(key, sizeof key);
    return err;
}

gt_err gt_enclave_seal_request_parse(const uint8_t *data, size_t len, gt_enclave_seal_request *q)
{
    memset(q, 0, sizeof *q);
    GT_ENSURE(len == GT_ENCLAVE_SEAL_REQUEST_BYTES, GT_E_FORMAT, "seal request: %zu bytes (64)",
              len);
    gt_reader r = gt_reader_init(data, len);
    uint8_t resv1[6], resv2[16];
    GT_TRY(gt_reader_u16le(&r, &q->keypolicy));
    GT_TRY(gt_reader_bytes(&r, resv1, sizeof resv1));
    GT_TRY(gt_reader_u64le(&r, &q->in));
    GT_TRY(gt_reader_u64le(&r, &q->in_len));
    GT_TRY(gt_reader_u64le(&r, &q->out));
    GT_TRY(gt_reader_u64le(&r, &q->out_cap));
    GT_TRY(gt_reader_u64le(&r, &q->out_len));
    GT_TRY(gt_reader_bytes(&r, resv2, sizeof resv2));
    GT_ENSURE(all_zero(resv1, sizeof resv1) && all_zero(resv2, sizeof resv2), GT_E_FORMAT,
              "seal request: reserved bytes set");
    return GT_OK;
}

void gt_enclave_seal_request_encode(const gt_enclave_seal_request *q,
                                    uint8_t out[GT_ENCLAVE_SEAL_REQUEST_BYTES])
{
    memset(out, 0, GT_ENCLAVE_SEAL_REQUEST_BYTES);
    out[0] = (uint8_t)q->keypolicy;
    out[1] = (uint8_t)(q->keypolicy >> 8);
    const uint64_t v[5] = {q->in, q->in_len, q->out, q->out_cap, q->out_len};
    for (int i = 0; i < 5; i++) {
        gt_store_u64le(out + 8 + 8 * i, v[i]);
    }
}
