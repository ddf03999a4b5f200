// EGETKEY's key derivation (SDM vol. 3D, EGETKEY): the KEYDEPENDENCIES block filled per key
// name from the enclave's SECS, the KEYREQUEST and the platform, then AES-128-CMAC under the
// platform root. Layout (little-endian, in SDM order):
//   KEYNAME 2 | ISVPRODID 2 | ISVSVN 2 | OWNEREPOCH 16 | ATTRIBUTES 16 | ATTRIBUTESMASK 16 |
//   MRENCLAVE 32 | MRSIGNER 32 | KEYID 32 | SEAL_KEY_FUSES 16 | CPUSVN 16 | PADDING 352 |
//   MISCSELECT 4 | MISCMASK 4 | KEYPOLICY 2 | CONFIGID 64 | CONFIGSVN 2 | ISVFAMILYID 16 |
//   ISVEXTPRODID 16
// A field a key name does not include stays zero.
#include <gputravel/enclave.h>

#include <string.h>

#define DEPS_BYTES 642
#define KEYPOLICY_KNOWN 0x003fu
#define KEYPOLICY_KSS (GT_SGX_KEYPOLICY_NOISVPRODID | GT_SGX_KEYPOLICY_CONFIGID | \
                       GT_SGX_KEYPOLICY_ISVFAMILYID | GT_SGX_KEYPOLICY_ISVEXTPRODID)

typedef struct {
    uint16_t keyname, isvprodid, isvsvn;
    uint8_t ownerepoch[16];
    gt_sgx_attributes attributes, attributesmask;
    uint8_t mrenclave[32], mrsigner[32], keyid[32], fuses[16], cpusvn[16];
    uint32_t miscselect, miscmask;
    uint16_t keypolicy;
    uint8_t configid[64];
    uint16_t configsvn;
    uint8_t isvfamilyid[16], isvextprodid[16];
} deps;

static gt_err encode(const deps *d, uint8_t out[DEPS_BYTES])
{
    gt_writer w = gt_writer_init_fixed(out, DEPS_BYTES);
    static const uint8_t padding[352];
    GT_TRY(gt_writer_u16le(&w, d->keyname));
    GT_TRY(gt_writer_u16le(&w, d->isvprodid));
    GT_TRY(gt_writer_u16le(&w, d->isvsvn));
    GT_TRY(gt_writer_bytes(&w, d->ownerepoch, 16));
    GT_TRY(gt_writer_u64le(&w, d->attributes.flags));
    GT_TRY(gt_writer_u64le(&w, d->attributes.xfrm));
    GT_TRY(gt_writer_u64le(&w, d->attributesmask.flags));
    GT_TRY(gt_writer_u64le(&w, d->attributesmask.xfrm));
    GT_TRY(gt_writer_bytes(&w, d->mrenclave, 32));
    GT_TRY(gt_writer_bytes(&w, d->mrsigner, 32));
    GT_TRY(gt_writer_bytes(&w, d->keyid, 32));
    GT_TRY(gt_writer_bytes(&w, d->fuses, 16));
    GT_TRY(gt_writer_bytes(&w, d->cpusvn, 16));
    GT_TRY(gt_writer_bytes(&w, padding, sizeof padding));
    GT_TRY(gt_writer_u32le(&w, d->miscselect));
    GT_TRY(gt_writer_u32le(&w, d->miscmask));
    GT_TRY(gt_writer_u16le(&w, d->keypolicy));
    GT_TRY(gt_writer_bytes(&w, d->configid, 64));
    GT_TRY(gt_writer_u16le(&w, d->configsvn));
    GT_TRY(gt_writer_bytes(&w, d->isvfamilyid, 16));
    GT_TRY(gt_writer_bytes(&w, d->isvextprodid, 16));
    GT_ENSURE(w.len == DEPS_BYTES, GT_E_STATE, "egetkey: %zu-byte KEYDEPENDENCIES", w.len);
    return GT_OK;
}

// Each byte of want at most the platform's (CPUSVN is a set of component SVNs).
static bool cpusvn_le(const uint8_t *want, const uint8_t *current)
{
    for (size_t i = 0; i < GT_SGX_CPUSVN_BYTES; i++) {
        if (want[i] > current[i]) {
            return false;
        }
    }
    return true;
}

// The inputs of a key bound to the signer: SEAL, PROVISION, PROVISION_SEAL.
static gt_err signer_inputs(deps *d, const gt_sgx_platform *pf, const gt_sgx_secs_identity *secs,
                            const gt_sgx_keyrequest *req)
{
    GT_ENSURE(req->isvsvn <= secs->isvsvn, GT_E_POLICY,
              "egetkey: ISVSVN %u above the enclave's %u", req->isvsvn, secs->isvsvn);
    GT_ENSURE(cpusvn_le(req->cpusvn, pf->cpusvn), GT_E_POLICY,
              "egetkey: the requested CPUSVN is above the platform's");
    d->isvprodid = secs->isvprodid;
    d->isvsvn = req->isvsvn;
    d->attributes.flags = secs->attributes.flags & req->attributemask.flags;
    d->attributes.xfrm = secs->attributes.xfrm & req->attributemask.xfrm;
    d->attributesmask = req->attributemask;
    memcpy(d->mrsigner, secs->mrsigner, 32);
    memcpy(d->cpusvn, req->cpusvn, 16);
    return GT_OK;
}

static gt_err fill(deps *d, const gt_sgx_platform *pf, const gt_sgx_secs_identity *secs,
                   const gt_sgx_keyrequest *req)
{
    GT_ENSURE((req->keypolicy & ~KEYPOLICY_KNOWN) == 0, GT_E_ARG,
              "egetkey: reserved KEYPOLICY bits 0x%04x", req->keypolicy & ~KEYPOLICY_KNOWN);
    GT_ENSURE(!(req->keypolicy & KEYPOLICY_KSS) || (secs->attributes.flags & GT_SGX_ATTR_KSS),
              GT_E_POLICY, "egetkey: KEYPOLICY 0x%04x needs the KSS attribute", req->keypolicy);
    d->keyname = req->keyname;
    switch (req->keyname) {
    case GT_SGX_KEYNAME_SEAL:
        GT_TRY(signer_inputs(d, pf, secs, req));
        if (req->keypolicy & GT_SGX_KEYPOLICY_NOISVPRODID) {
            d->isvprodid = 0;
        }
        if (!(req->keypolicy & GT_SGX_KEYPOLICY_MRSIGNER)) {
            memset(d->mrsigner, 0, 32);
        }
        if (req->keypolicy & GT_SGX_KEYPOLICY_MRENCLAVE) {
            memcpy(d->mrenclave, secs->mrenclave, 32);
        }
        if (req->keypolicy & GT_SGX_KEYPOLICY_CONFIGID) {
            GT_ENSURE(req->configsvn <= secs->configsvn, GT_E_POLICY,
                      "egetkey: CONFIGSVN %u above the enclave's %u", req->configsvn,
                      secs->configsvn);
            memcpy(d->configid, secs->configid, 64);
            d->configsvn = req->configsvn;
        }
        if (req->keypolicy & GT_SGX_KEYPOLICY_ISVFAMILYID) {
            memcpy(d->isvfamilyid, secs->isvfamilyid, 16);
        }
        if (req->keypolicy & GT_SGX_KEYPOLICY_ISVEXTPRODID) {
            memcpy(d->isvextprodid, secs->isvextprodid, 16);
        }
        memcpy(d->ownerepoch, pf->ownerepoch, 16);
        memcpy(d->keyid, req->keyid, 32);
        memcpy(d->fuses, pf->seal_key_fuses, 16);
        d->miscselect = secs->miscselect & req->miscmask;
        d->miscmask = req->miscmask;
        d->keypolicy = req->keypolicy;
        return GT_OK;
    case GT_SGX_KEYNAME_PROVISION:
    case GT_SGX_KEYNAME_PROVISION_SEAL:  // the provisioning key's inputs, + the fuses
        if (req->keyname == GT_SGX_KEYNAME_PROVISION_SEAL) {
            memcpy(d->fuses, pf->seal_key_fuses, 16);
        }
        GT_ENSURE(secs->attributes.flags & GT_SGX_ATTR_PROVISIONKEY, GT_E_POLICY,
                  "egetkey: a provisioning key needs the PROVISIONKEY attribute");
        return signer_inputs(d, pf, secs, req);
    case GT_SGX_KEYNAME_REPORT:
        // The enclave's own report key: the current platform and the enclave as it is.
        memcpy(d->ownerepoch, pf->ownerepoch, 16);
        d->attributes = secs->attributes;
        memcpy(d->mrenclave, secs->mrenclave, 32);
        memcpy(d->keyid, req->keyid, 32);
        memcpy(d->fuses, pf->seal_key_fuses, 16);
        memcpy(d->cpusvn, pf->cpusvn, 16);
        d->miscselect = secs->miscselect;
        memcpy(d->configid, secs->configid, 64);
        d->configsvn = secs->configsvn;
        return GT_OK;
    case GT_SGX_KEYNAME_EINITTOKEN:
        GT_ENSURE(secs->attributes.flags & GT_SGX_ATTR_EINITTOKEN_KEY, GT_E_POLICY,
                  "egetkey: the EINITTOKEN key needs the EINITTOKEN_KEY attribute");
        GT_ENSURE(cpusvn_le(req->cpusvn, pf->cpusvn), GT_E_POLICY,
                  "egetkey: the requested CPUSVN is above the platform's");
        d->isvprodid = secs->isvprodid;
        d->isvsvn = secs->isvsvn;
        memcpy(d->ownerepoch, pf->ownerepoch, 16);
        memcpy(d->mrsigner, secs->mrsigner, 32);
        memcpy(d->keyid, req->keyid, 32);
        memcpy(d->fuses, pf->seal_key_fuses, 16);
        memcpy(d->cpusvn, req->cpusvn, 16);
        return GT_OK;
    default:
        return gt_errf(GT_E_ARG, "egetkey: unknown KEYNAME %u", req->keyname);
    }
}

gt_err gt_sgx_egetkey(uint8_t key[GT_SGX_KEY_BYTES_128], const gt_sgx_platform *pf,
                      const gt_sgx_secs_identity *secs, const gt_sgx_keyrequest *req)
{
    deps d;
    uint8_t block[DEPS_BYTES];
    memset(&d, 0, sizeof d);
    gt_err err;
    GT_TRY_GOTO(err, fill(&d, pf, secs, req), out);
    GT_TRY_GOTO(err, encode(&d, block), out);
    GT_TRY_GOTO(err, gt_aes128_cmac(key, block, sizeof block, pf->root), out);
out:
    if (!gt_is_ok(err)) {
        gt_secure_zero(key, GT_SGX_KEY_BYTES_128);
    }
    gt_secure_zero(&d, sizeof d);
    gt_secure_zero(block, sizeof block);
    return err;
}
