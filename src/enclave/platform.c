// The SGX platform root, sealed to the host TEE. File (DIR/sgx-platform.sealed, 0600):
//   "GTPR" | u16 version 1 | u16 host TEE type | CPUSVN 16 | OWNEREPOCH 16 | SEAL_KEY_FUSES 16 |
//   salt 32 | IV 12 | AES-256-GCM(root 16) + tag 16          (132 bytes; AAD = bytes 0..100)
// The GCM key is HKDF-SHA256(host secret, salt, "gputravel/sgx-platform/seal/v1/<host>"), the
// host secret being what only this host TEE instance can derive (header comment of enclave.h).
#include <gputravel/enclave.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define PLATFORM_MAGIC "GTPR"
#define PLATFORM_VERSION 1
#define PLATFORM_AAD_BYTES 100
#define PLATFORM_FILE_BYTES (PLATFORM_AAD_BYTES + GT_AES128_KEY_BYTES + GT_AEAD_TAG_BYTES)
#define HOST_SECRET_MAX 4096

typedef struct {
    uint16_t host;
    uint8_t salt[32];
    uint8_t iv[GT_AEAD_IV_BYTES];
} platform_file;

// sim: the sim root's private key (DER). insecure-simulation: a file, not hardware.
static gt_err sim_secret(gt_buf *secret, const gt_sgx_platform_options *o)
{
    gt_pkey *root = NULL;
    GT_TRY(gt_sim_root_open(&root, NULL, 0, o->sim_root, true));
    gt_err err = gt_pkey_private_der(root, secret);
    gt_pkey_free(root);
    return err;
}

static gt_err host_secret(gt_buf *secret, const gt_sgx_platform_options *o)
{
    switch (o->host) {
    case GT_TEE_SIM:
        gt_log_warn("enclave: the SGX platform root is sealed to the sim root (%s)",
                    GT_INSECURE_SIMULATION);
        return sim_secret(secret, o);
    case GT_TEE_SNP: {
        uint8_t key[GT_SNP_DERIVED_KEY_BYTES];
        gt_err err = gt_sev_guest_get_derived_key(
            key, o->dev_path, 0, GT_SNP_KEY_FIELD_MEASUREMENT | GT_SNP_KEY_FIELD_GUEST_POLICY);
        if (gt_is_ok(err)) {
            err = gt_buf_append(secret, key, sizeof key);
        }
        gt_secure_zero(key, sizeof key);
        return gt_is_ok(err) ? err : gt_err_wrap(err, "enclave: sealing the platform to SEV-SNP");
    }
    case GT_TEE_TDX:
        return gt_errf(GT_E_UNSUPPORTED,
                       "enclave: TDX 1.x gives a TD no sealing key (no SGX-style EGETKEY for "
                       "TDs); sealing the platform root to a vTPM is not built yet: use sim or "
                       "snp");
    default:
        return gt_errf(GT_E_ARG, "enclave: a platform root cannot be sealed to %s",
                       gt_tee_type_name(o->host));
    }
}

static gt_err seal_key(uint8_t key[GT_AEAD_KEY_BYTES], const gt_sgx_platform_options *o,
                       const platform_file *f)
{
    gt_buf secret = {0};
    char info[64];
    snprintf(info, sizeof info, "gputravel/sgx-platform/seal/v1/%s", gt_tee_type_name(o->host));
    gt_err err = host_secret(&secret, o);
    if (gt_is_ok(err)) {
        err = gt_hkdf(GT_HASH_SHA256, key, GT_AEAD_KEY_BYTES, secret.data, secret.len, f->salt,
                      sizeof f->salt, (const uint8_t *)info, strlen(info));
    }
    gt_buf_free(&secret);
    return err;
}

static gt_err header_encode(uint8_t out[PLATFORM_AAD_BYTES], const platform_file *f,
                            const gt_sgx_platform *pf)
{
    gt_writer w = gt_writer_init_fixed(out, PLATFORM_AAD_BYTES);
    GT_TRY(gt_writer_bytes(&w, PLATFORM_MAGIC, 4));
    GT_TRY(gt_writer_u16le(&w, PLATFORM_VERSION));
    GT_TRY(gt_writer_u16le(&w, f->host));
    GT_TRY(gt_writer_bytes(&w, pf->cpusvn, 16));
    GT_TRY(gt_writer_bytes(&w, pf->ownerepoch, 16));
    GT_TRY(gt_writer_bytes(&w, pf->seal_key_fuses, 16));
    GT_TRY(gt_writer_bytes(&w, f->salt, sizeof f->salt));
    return gt_writer_bytes(&w, f->iv, sizeof f->iv);
}

static gt_err header_parse(gt_reader *r, platform_file *f, gt_sgx_platform *pf)
{
    uint8_t magic[4];
    uint16_t version = 0;
    GT_TRY(gt_reader_bytes(r, magic, 4));
    GT_ENSURE(memcmp(magic, PLATFORM_MAGIC, 4) == 0, GT_E_FORMAT,
              "enclave: not a sealed SGX platform file");
    GT_TRY(gt_reader_u16le(r, &version));
    GT_ENSURE(version == PLATFORM_VERSION, GT_E_UNSUPPORTED,
              "enclave: sealed platform version %u (expected %u)", version, PLATFORM_VERSION);
    GT_TRY(gt_reader_u16le(r, &f->host));
    GT_TRY(gt_reader_bytes(r, pf->cpusvn, 16));
    GT_TRY(gt_reader_bytes(r, pf->ownerepoch, 16));
    GT_TRY(gt_reader_bytes(r, pf->seal_key_fuses, 16));
    GT_TRY(gt_reader_bytes(r, f->salt, sizeof f->salt));
    return gt_reader_bytes(r, f->iv, sizeof f->iv);
}

static gt_err platform_create(const char *path, const gt_sgx_platform_options *o,
                              gt_sgx_platform *pf)
{
    platform_file f = {.host = (uint16_t)o->host};
    uint8_t file[PLATFORM_FILE_BYTES], key[GT_AEAD_KEY_BYTES];
    size_t ct_len = 0;
    memset(pf->cpusvn, 1, sizeof pf->cpusvn);  // every component at SVN 1: the first TCB
    gt_err err;
    GT_TRY_GOTO(err, gt_random_bytes(pf->root, sizeof pf->root), out);
    GT_TRY_GOTO(err, gt_random_bytes(pf->ownerepoch, sizeof pf->ownerepoch), out);
    GT_TRY_GOTO(err, gt_random_bytes(pf->seal_key_fuses, sizeof pf->seal_key_fuses), out);
    GT_TRY_GOTO(err, gt_random_bytes(f.salt, sizeof f.salt), out);
    GT_TRY_GOTO(err, gt_random_bytes(f.iv, sizeof f.iv), out);
    GT_TRY_GOTO(err, seal_key(key, o, &f), out);
    GT_TRY_GOTO(err, header_encode(file, &f, pf), out);
    GT_TRY_GOTO(err, gt_aead_seal(file + PLATFORM_AAD_BYTES, sizeof file - PLATFORM_AAD_BYTES,
                                  &ct_len, pf->root, sizeof pf->root, file, PLATFORM_AAD_BYTES,
                                  f.iv, key),
                out);
    GT_TRY_GOTO(err, gt_file_write_atomic(path, file, sizeof file, 0600), out);
out:
    gt_secure_zero(key, sizeof key);
    return err;
}

static gt_err platform_load(const char *path, const gt_sgx_platform_options *o,
                            gt_sgx_platform *pf)
{
    gt_buf b = {0};
    platform_file f;
    uint8_t key[GT_AEAD_KEY_BYTES];
    size_t pt_len = 0;
    gt_err err;
    GT_TRY_GOTO(err, gt_file_read_all(path, PLATFORM_FILE_BYTES + 1, &b), out);
    gt_reader r = gt_reader_init(b.data, b.len);
    GT_TRY_GOTO(err, header_parse(&r, &f, pf), out);
    GT_ENSURE_GOTO(err, b.len == PLATFORM_FILE_BYTES, out, GT_E_FORMAT,
                   "enclave: sealed platform of %zu bytes (expected %u)", b.len,
                   PLATFORM_FILE_BYTES);
    GT_ENSURE_GOTO(err, f.host == (uint16_t)o->host, out, GT_E_STATE,
                   "enclave: the platform root is sealed to %s, not %s",
                   gt_tee_type_name((gt_tee_type)f.host), gt_tee_type_name(o->host));
    GT_TRY_GOTO(err, seal_key(key, o, &f), out);
    err = gt_aead_open(pf->root, sizeof pf->root, &pt_len, b.data + PLATFORM_AAD_BYTES,
                       b.len - PLATFORM_AAD_BYTES, b.data, PLATFORM_AAD_BYTES, f.iv, key);
    if (!gt_is_ok(err) || pt_len != sizeof pf->root) {
        err = gt_errf(GT_E_AUTH, "enclave: %s was not sealed by this %s instance, or was "
                                 "changed", path, gt_tee_type_name(o->host));
    }
out:
    gt_secure_zero(key, sizeof key);
    gt_buf_free_nowipe(&b);
    return err;
}

gt_err gt_sgx_platform_id(const gt_sgx_platform *pf, uint8_t out[GT_SGX_PLATFORM_ID_BYTES])
{
    static const char label[] = "gputravel/sgx-platform-id/v1";
    return gt_hmac(GT_HASH_SHA256, out, label, sizeof label - 1, pf->root, sizeof pf->root);
}

gt_err gt_sgx_platform_open(const char *dir, const gt_sgx_platform_options *o,
                            gt_sgx_platform *pf, gt_sgx_platform_info *info)
{
    memset(pf, 0, sizeof *pf);
    gt_sgx_platform_info inf = {.host = o->host, .insecure_simulation = o->host == GT_TEE_SIM};
    char path[4096];
    gt_err err;
    GT_TRY_GOTO(err, gt_mkdir_p(dir, 0700), out);
    GT_TRY_GOTO(err, gt_path_join(path, sizeof path, dir, GT_SGX_PLATFORM_FILE), out);
    struct stat st;
    if (stat(path, &st) == 0) {
        GT_TRY_GOTO(err, platform_load(path, o, pf), out);
    } else {
        // Only a root that does not exist yet is made: never one that could not be read.
        GT_ENSURE_GOTO(err, errno == ENOENT, out, GT_E_IO, "enclave: %s: %s", path,
                       strerror(errno));
        GT_TRY_GOTO(err, platform_create(path, o, pf), out);
        inf.created = true;
    }
    GT_TRY_GOTO(err, gt_sgx_platform_id(pf, inf.platform_id), out);
    if (info != NULL) {
        *info = inf;
    }
out:
    if (!gt_is_ok(err)) {
        gt_secure_zero(pf, sizeof *pf);
    }
    return err;
}
