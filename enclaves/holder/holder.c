// The holder enclave (built with the SDK, freestanding, signed at build time): it holds a
// holder's dataset key and makes the release decision, so the holder's host process never
// sees the dataset key or a chunk key. ECALLs and layouts: holder_abi.h; design and trust:
// docs/holder-enclave.md. The key arrives once (IMPORT) and is kept sealed under the MRSIGNER
// policy, so a later version of this enclave by the same signer opens it and no other signer's
// enclave does. A chunk key K_i leaves only through the wrap leaf, wrapped to the device key
// the host names, bound to the agreement, dataset, chunk, trip and device, and only after the
// wrap leaf has appraised that device itself (its attested hellos against the agreement bytes).
#include "gtsdk.h"
#include "holder_enclave_abi.h"  // src/holder/, on the include path (CMakeLists.txt)

#ifndef HOLDER_VERSION
#define HOLDER_VERSION 1  // a second build (tests) is a new version: another MRENCLAVE
#endif

const volatile uint32_t holder_version = HOLDER_VERSION;

static uint8_t g_key[32];
static int g_have_key;

// The agreement's terms for this holder and the counts (fixed by TERMS).
static struct {
    int set;
    uint8_t agreement[32];
    uint8_t dataset[16];
    uint32_t max_uses;
    uint64_t budget;
    uint32_t chunks;
    uint64_t tokens_released;
    uint64_t tokens[HOLDER_MAX_CHUNKS];
    uint32_t releases[HOLDER_MAX_CHUNKS];
    uint32_t uses[HOLDER_MAX_CHUNKS];
} g_terms;

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint64_t leaf(uint32_t which, uint16_t policy, const void *in, size_t in_len, void *out,
                     size_t out_cap, size_t *out_len)
{
    static gtsdk_seal_request req;
    memset(&req, 0, sizeof req);
    req.keypolicy = policy;
    req.in = (uint64_t)(uintptr_t)in;
    req.in_len = in_len;
    req.out = (uint64_t)(uintptr_t)out;
    req.out_cap = out_cap;
    uint64_t rax = gtsdk_seal_call(which, &req);
    *out_len = rax == 0 ? req.out_len : 0;
    return rax;
}

static long ecall_import(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                         size_t *out_len)
{
    if (in_len != 32) {
        return HOLDER_E_FORMAT;
    }
    static uint8_t payload[40];
    memcpy(payload, HOLDER_SEALED_MAGIC, 4);
    st32(payload + 4, 1);
    memcpy(payload + 8, in, 32);
    uint64_t rax = leaf(GTSDK_ENCLU_GT_SEAL, 2 /* MRSIGNER */, payload, sizeof payload, out,
                        out_cap, out_len);
    gtsdk_wipe(payload, sizeof payload);
    return rax == 0 ? HOLDER_OK : HOLDER_E_REFUSED;
}

static long ecall_open(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                       size_t *out_len)
{
    (void)out;
    (void)out_cap;
    *out_len = 0;
    static uint8_t payload[64];
    size_t n = 0;
    uint64_t rax = leaf(GTSDK_ENCLU_GT_UNSEAL, 0, in, in_len, payload, sizeof payload, &n);
    long status = HOLDER_OK;
    if (rax != 0) {
        status = HOLDER_E_REFUSED;
    } else if (n != 40 || memcmp(payload, HOLDER_SEALED_MAGIC, 4) != 0 || ld32(payload + 4) != 1) {
        status = HOLDER_E_FORMAT;
    } else {
        memcpy(g_key, payload + 8, 32);
        g_have_key = 1;
    }
    gtsdk_wipe(payload, sizeof payload);
    return status;
}

static long ecall_terms(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                        size_t *out_len)
{
    (void)out;
    (void)out_cap;
    *out_len = 0;
    if (g_terms.set) {
        return HOLDER_E_STATE;  // the terms and counts of this run are the first ones given
    }
    if (in_len < 64) {
        return HOLDER_E_FORMAT;
    }
    uint32_t chunks = ld32(in + 60);
    if (chunks == 0 || chunks > HOLDER_MAX_CHUNKS ||
        in_len != 64 + (size_t)chunks * 16 + 8) {
        return HOLDER_E_FORMAT;
    }
    memcpy(g_terms.agreement, in, 32);
    memcpy(g_terms.dataset, in + 32, 16);
    g_terms.max_uses = ld32(in + 48);
    g_terms.budget = ld64(in + 52);
    g_terms.chunks = chunks;
    const uint8_t *p = in + 64;
    for (uint32_t c = 0; c < chunks; c++) {
        g_terms.tokens[c] = ld64(p + 8 * c);
        g_terms.releases[c] = ld32(p + 8 * (size_t)chunks + 4 * c);
        g_terms.uses[c] = ld32(p + 12 * (size_t)chunks + 4 * c);
    }
    g_terms.tokens_released = ld64(p + 16 * (size_t)chunks);
    g_terms.set = 1;
    return HOLDER_OK;
}

// The decision (as the host agent's decide(), docs/holder.md): uses, resends, budget. On a
// grant the release is counted before the key is wrapped (a failed wrap stays counted:
// stricter, never looser; only a device the wrap leaf refused before deriving is uncounted).
static long decide(uint32_t c)
{
    if (c >= g_terms.chunks) {
        return HOLDER_REFUSE_CHUNK;
    }
    if (g_terms.uses[c] >= g_terms.max_uses) {
        return HOLDER_REFUSE_USES;
    }
    if (g_terms.releases[c] >= g_terms.max_uses + 1u) {
        return HOLDER_REFUSE_RESENDS;
    }
    uint64_t t = g_terms.tokens[c];
    if (t > g_terms.budget || g_terms.tokens_released > g_terms.budget - t) {
        return HOLDER_REFUSE_BUDGET;
    }
    g_terms.tokens_released += t;
    g_terms.releases[c]++;
    return HOLDER_OK;
}

static long ecall_release(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                          size_t *out_len)
{
    *out_len = 0;
    if (in_len < HOLDER_RELEASE_FIXED || in_len > HOLDER_RELEASE_MAX) {
        return HOLDER_E_FORMAT;
    }
    if (!g_have_key || !g_terms.set) {
        return HOLDER_E_STATE;
    }
    uint32_t c = ld32(in);
    long verdict = decide(c);
    if (verdict != HOLDER_OK) {
        return verdict;
    }
    // The wrap leaf's input: ikm | salt | info | recipient | aad (enclave.h)
    static const char info[] = HOLDER_CHUNK_KEY_INFO;
    // ... | the appraisal bytes as given: the leaf appraises the device from them, and they
    // cannot bind the key elsewhere (the AAD above is the enclave's)
    static uint8_t w[32 + 16 + 2 + sizeof info - 1 + 4 + 32 + 2 + HOLDER_WRAP_AAD_BYTES +
                     HOLDER_RELEASE_MAX];
    uint8_t *p = w;
    memcpy(p, g_key, 32), p += 32;
    memcpy(p, g_terms.dataset, 16), p += 16;
    st16(p, (uint16_t)(sizeof info - 1 + 4)), p += 2;
    memcpy(p, info, sizeof info - 1), p += sizeof info - 1;
    st32(p, c), p += 4;
    memcpy(p, in + 4, 32), p += 32;  // the device's key
    st16(p, HOLDER_WRAP_AAD_BYTES), p += 2;
    memcpy(p, "GTRW", 4), p += 4;
    memcpy(p, g_terms.agreement, 32), p += 32;
    memcpy(p, g_terms.dataset, 16), p += 16;
    st32(p, c), p += 4;
    memcpy(p, in + 36, 64), p += 64;  // trip id, device id
    memcpy(p, in + HOLDER_RELEASE_FIXED, in_len - HOLDER_RELEASE_FIXED);
    p += in_len - HOLDER_RELEASE_FIXED;
    uint64_t rax = leaf(GTSDK_ENCLU_GT_WRAP, 0, w, (size_t)(p - w), out, out_cap, out_len);
    gtsdk_wipe(w, sizeof w);
    if (rax == GTSDK_WRAP_E_DEVICE) {
        // The leaf refused the device before deriving anything: nothing left, nothing counted
        // (so a host naming a bad device cannot spend the holder's releases either).
        g_terms.releases[c]--;
        g_terms.tokens_released -= g_terms.tokens[c];
        return HOLDER_E_DEVICE;
    }
    return rax == 0 ? HOLDER_OK : HOLDER_E_WRAP;
}

static long ecall_used(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                       size_t *out_len)
{
    (void)out;
    (void)out_cap;
    *out_len = 0;
    if (in_len != 4) {
        return HOLDER_E_FORMAT;
    }
    uint32_t c = ld32(in);
    if (!g_terms.set || c >= g_terms.chunks || g_terms.releases[c] <= g_terms.uses[c]) {
        return HOLDER_E_NOTSENT;
    }
    g_terms.uses[c]++;
    return HOLDER_OK;
}

// A REPORT for the vQE whose REPORTDATA starts with the agreement hash of this run's terms: a
// host cannot get a quote of this enclave for an agreement it did not fix at TERMS.
static long ecall_quote(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                        size_t *out_len)
{
    *out_len = 0;
    if (in_len != HOLDER_QUOTE_IN_BYTES || out_cap < HOLDER_QUOTE_OUT_BYTES) {
        return HOLDER_E_FORMAT;
    }
    if (!g_terms.set) {
        return HOLDER_E_STATE;
    }
    static gtsdk_targetinfo ti;
    static gtsdk_reportdata data;
    static gtsdk_report report;
    memcpy(ti.bytes, in, sizeof ti.bytes);
    memcpy(data.bytes, g_terms.agreement, 32);
    memcpy(data.bytes + 32, in + 512, 32);
    gtsdk_ereport(&ti, &data, &report);
    memcpy(out, report.bytes, HOLDER_QUOTE_OUT_BYTES);
    *out_len = HOLDER_QUOTE_OUT_BYTES;
    return HOLDER_OK;
}

GTSDK_ECALLS(ecall_import, ecall_open, ecall_terms, ecall_release, ecall_used, ecall_quote);
