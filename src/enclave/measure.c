// MRENCLAVE: the SHA-256 over the 64-byte blocks ECREATE, EADD and EEXTEND write (SDM vol. 3D,
// "ECREATE", "EADD", "EEXTEND"), and the SGXS stream, which is exactly those blocks.
#include <gputravel/enclave.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES 64

struct gt_sgx_measurer {
    gt_hash_ctx *hash;
    gt_sgx_measurement *m;
    bool have_page;
    uint64_t page;          // offset of the page last added
    uint16_t chunks_seen;   // EEXTENDs of that page, one bit per 256-byte chunk
    bool have_prev_page;
    uint64_t prev_page;
};

const char *gt_sgx_page_type_name(unsigned type)
{
    static const char *const names[GT_SGX_PT_COUNT_] = {"SECS", "TCS", "REG", "VA", "TRIM"};
    return type < GT_SGX_PT_COUNT_ ? names[type] : NULL;
}

const char *gt_sgx_attribute_name(unsigned bit)
{
    switch (bit) {
    case 0: return "INIT";
    case 1: return "DEBUG";
    case 2: return "MODE64BIT";
    case 4: return "PROVISIONKEY";
    case 5: return "EINITTOKEN_KEY";
    case 6: return "CET";
    case 7: return "KSS";
    case 10: return "AEXNOTIFY";
    default: return NULL;
    }
}

void gt_sgx_measurement_problem(gt_sgx_measurement *m, const char *fmt, ...)
{
    if (m->problem_count < GT_SGX_PROBLEMS_KEPT) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->problems[m->problem_count], sizeof m->problems[0], fmt, ap);
        va_end(ap);
    }
    m->problem_count++;
}

static gt_err block(gt_sgx_measurer *mz, const uint8_t b[BLOCK_BYTES])
{
    mz->m->records++;
    return gt_hash_update(mz->hash, b, BLOCK_BYTES);
}

gt_err gt_sgx_measurer_new(gt_sgx_measurer **out, gt_sgx_measurement *m, uint32_t ssaframesize,
                           uint64_t size)
{
    *out = NULL;
    memset(m, 0, sizeof *m);
    gt_sgx_measurer *mz = calloc(1, sizeof *mz);
    GT_ENSURE(mz != NULL, GT_E_NOMEM, "measure: out of memory");
    mz->m = m;
    gt_err err = gt_hash_new(&mz->hash, GT_HASH_SHA256);
    if (!gt_is_ok(err)) {
        free(mz);
        return err;
    }
    m->ssaframesize = ssaframesize;
    m->size = size;
    if (size == 0 || (size & (size - 1)) != 0 || size < 2 * GT_SGX_PAGE_BYTES) {
        gt_sgx_measurement_problem(m, "ECREATE: SIZE 0x%llx is not a power of two >= 8 KiB",
                                   (unsigned long long)size);
    }
    if (ssaframesize == 0) {
        gt_sgx_measurement_problem(m, "ECREATE: SSAFRAMESIZE is 0");
    }
    // "ECREATE\0" | SSAFRAMESIZE u32 | SIZE u64 | 44 zero bytes
    uint8_t b[BLOCK_BYTES] = {0};
    memcpy(b, "ECREATE", 8);
    gt_store_u32le(b + 8, ssaframesize);
    gt_store_u64le(b + 12, size);
    err = block(mz, b);
    if (!gt_is_ok(err)) {
        gt_sgx_measurer_free(mz);
        return err;
    }
    *out = mz;
    return GT_OK;
}

gt_err gt_sgx_measurer_eadd(gt_sgx_measurer *mz, uint64_t offset, uint64_t secinfo_flags)
{
    gt_sgx_measurement *m = mz->m;
    if (offset % GT_SGX_PAGE_BYTES != 0) {
        gt_sgx_measurement_problem(m, "EADD at 0x%llx: not page aligned",
                                   (unsigned long long)offset);
    }
    if (mz->have_prev_page && offset <= mz->prev_page) {
        gt_sgx_measurement_problem(m, "EADD at 0x%llx: not above the page before (0x%llx)",
                                   (unsigned long long)offset,
                                   (unsigned long long)mz->prev_page);
    }
    if (offset >= m->size || m->size - offset < GT_SGX_PAGE_BYTES) {
        gt_sgx_measurement_problem(m, "EADD at 0x%llx: outside SIZE 0x%llx",
                                   (unsigned long long)offset, (unsigned long long)m->size);
    }
    unsigned type = GT_SGX_PAGE_TYPE(secinfo_flags);
    if (type < GT_SGX_PT_COUNT_) {
        m->page_types[type]++;
    } else {
        m->page_types_other++;
    }
    if (type != GT_SGX_PT_TCS && type != GT_SGX_PT_REG) {
        gt_sgx_measurement_problem(m, "EADD at 0x%llx: page type %u (EADD takes TCS or REG)",
                                   (unsigned long long)offset, type);
    }
    m->eadd_pages++;
    mz->have_page = mz->have_prev_page = true;
    mz->page = mz->prev_page = offset;
    mz->chunks_seen = 0;
    // "EADD\0\0\0\0" | offset u64 | SECINFO[0:48] (FLAGS u64, then reserved: zero)
    uint8_t b[BLOCK_BYTES] = {0};
    memcpy(b, "EADD", 4);
    gt_store_u64le(b + 8, offset);
    gt_store_u64le(b + 16, secinfo_flags);
    return block(mz, b);
}

gt_err gt_sgx_measurer_eextend(gt_sgx_measurer *mz, uint64_t offset,
                               const uint8_t data[GT_SGX_CHUNK_BYTES])
{
    gt_sgx_measurement *m = mz->m;
    if (offset % GT_SGX_CHUNK_BYTES != 0) {
        gt_sgx_measurement_problem(m, "EEXTEND at 0x%llx: not 256-byte aligned",
                                   (unsigned long long)offset);
    }
    uint64_t page = offset & ~(uint64_t)(GT_SGX_PAGE_BYTES - 1);
    if (!mz->have_page || page != mz->page) {
        gt_sgx_measurement_problem(m, "EEXTEND at 0x%llx: not in the page last added",
                                   (unsigned long long)offset);
    } else {
        uint16_t bit = (uint16_t)(1u << ((offset % GT_SGX_PAGE_BYTES) / GT_SGX_CHUNK_BYTES));
        if (mz->chunks_seen & bit) {
            gt_sgx_measurement_problem(m, "EEXTEND at 0x%llx: chunk measured twice",
                                       (unsigned long long)offset);
        }
        mz->chunks_seen |= bit;
    }
    m->eextend_chunks++;
    // "EEXTEND\0" | offset u64 | 48 zero bytes, then the 256 bytes in four blocks
    uint8_t b[BLOCK_BYTES] = {0};
    memcpy(b, "EEXTEND", 8);
    gt_store_u64le(b + 8, offset);
    GT_TRY(block(mz, b));
    return gt_hash_update(mz->hash, data, GT_SGX_CHUNK_BYTES);
}

gt_err gt_sgx_measurer_page(gt_sgx_measurer *mz, uint64_t offset, uint64_t secinfo_flags,
                            const uint8_t *page, bool extend)
{
    static const uint8_t zero[GT_SGX_CHUNK_BYTES];
    GT_TRY(gt_sgx_measurer_eadd(mz, offset, secinfo_flags));
    for (size_t c = 0; extend && c < GT_SGX_PAGE_BYTES; c += GT_SGX_CHUNK_BYTES) {
        GT_TRY(gt_sgx_measurer_eextend(mz, offset + c, page != NULL ? page + c : zero));
    }
    return GT_OK;
}

gt_err gt_sgx_measurer_finish(gt_sgx_measurer *mz)
{
    gt_err err = gt_hash_final(mz->hash, mz->m->mrenclave);
    gt_sgx_measurer_free(mz);
    return err;
}

void gt_sgx_measurer_free(gt_sgx_measurer *mz)
{
    if (mz != NULL) {
        gt_hash_free(mz->hash);
        free(mz);
    }
}

// ---- SGXS -----------------------------------------------------------------------------------

static bool all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= p[i];
    }
    return acc == 0;
}

static gt_err sgxs_records(gt_reader *r, gt_sgx_measurer *mz, gt_sgx_measurement *m)
{
    while (gt_reader_left(r) > 0) {
        size_t at = r->pos;
        uint8_t tag[8] = {0}, rest[40] = {0};
        uint64_t offset = 0;
        GT_TRY(gt_reader_bytes(r, tag, sizeof tag));
        if (memcmp(tag, "EADD\0\0\0\0", 8) == 0) {
            uint64_t flags = 0;
            GT_TRY(gt_reader_u64le(r, &offset));
            GT_TRY(gt_reader_u64le(r, &flags));
            GT_TRY(gt_reader_bytes(r, rest, sizeof rest));  // SECINFO reserved
            if (!all_zero(rest, sizeof rest)) {
                gt_sgx_measurement_problem(m, "EADD at 0x%llx: SECINFO reserved bytes set",
                                           (unsigned long long)offset);
            }
            GT_TRY(gt_sgx_measurer_eadd(mz, offset, flags));
        } else if (memcmp(tag, "EEXTEND\0", 8) == 0 || memcmp(tag, "UNMEASRD", 8) == 0) {
            bool measured = tag[0] == 'E';
            uint8_t data[GT_SGX_CHUNK_BYTES] = {0}, resv[48] = {0};
            GT_TRY(gt_reader_u64le(r, &offset));
            GT_TRY(gt_reader_bytes(r, resv, sizeof resv));
            GT_ENSURE(gt_reader_left(r) >= sizeof data, GT_E_TRUNCATED,
                      "sgxs: record at byte %zu: %s data ends early", at,
                      measured ? "EEXTEND" : "UNMEASRD");
            GT_TRY(gt_reader_bytes(r, data, sizeof data));
            if (!all_zero(resv, sizeof resv)) {
                gt_sgx_measurement_problem(m, "%s at 0x%llx: reserved header bytes set",
                                           measured ? "EEXTEND" : "UNMEASRD",
                                           (unsigned long long)offset);
            }
            if (measured) {
                GT_TRY(gt_sgx_measurer_eextend(mz, offset, data));
            } else {
                m->unmeasured_chunks++;
            }
        } else if (memcmp(tag, "ECREATE\0", 8) == 0) {
            return gt_errf(GT_E_FORMAT, "sgxs: record at byte %zu: a second ECREATE", at);
        } else if (memcmp(tag, "UNSIZED\0", 8) == 0) {
            return gt_errf(GT_E_UNSUPPORTED, "sgxs: record at byte %zu: UNSIZED (the enclave "
                           "size is not fixed yet, so there is no MRENCLAVE; finish the ESGXS "
                           "stream first)", at);
        } else {
            return gt_errf(GT_E_FORMAT, "sgxs: record at byte %zu: unknown tag "
                           "%02x%02x%02x%02x%02x%02x%02x%02x", at, tag[0], tag[1], tag[2],
                           tag[3], tag[4], tag[5], tag[6], tag[7]);
        }
    }
    return GT_OK;
}

gt_err gt_sgx_measure_sgxs(const uint8_t *data, size_t len, gt_sgx_measurement *out)
{
    memset(out, 0, sizeof *out);
    GT_ENSURE(len <= GT_SGX_IMAGE_MAX_BYTES, GT_E_LIMIT, "sgxs: %zu bytes is too large", len);
    gt_reader r = gt_reader_init(data, len);
    uint8_t tag[8] = {0}, rest[44] = {0};
    uint32_t ssa = 0;
    uint64_t size = 0;
    GT_TRY(gt_reader_bytes(&r, tag, sizeof tag));
    GT_ENSURE(memcmp(tag, "UNSIZED\0", 8) != 0, GT_E_UNSUPPORTED,
              "sgxs: the stream starts with UNSIZED (no enclave size yet: no MRENCLAVE)");
    GT_ENSURE(memcmp(tag, "ECREATE\0", 8) == 0, GT_E_FORMAT,
              "sgxs: the stream does not start with an ECREATE record");
    GT_TRY(gt_reader_u32le(&r, &ssa));
    GT_TRY(gt_reader_u64le(&r, &size));
    GT_TRY(gt_reader_bytes(&r, rest, sizeof rest));
    gt_sgx_measurer *mz = NULL;
    GT_TRY(gt_sgx_measurer_new(&mz, out, ssa, size));
    if (!all_zero(rest, sizeof rest)) {
        gt_sgx_measurement_problem(out, "ECREATE: reserved bytes set");
    }
    gt_err err = sgxs_records(&r, mz, out);
    if (!gt_is_ok(err)) {
        gt_sgx_measurer_free(mz);
        memset(out, 0, sizeof *out);
        return err;
    }
    return gt_sgx_measurer_finish(mz);
}

// ---- flat images ----------------------------------------------------------------------------

gt_err gt_sgx_measure_flat(const uint8_t *data, size_t len, uint32_t ssaframesize, uint64_t size,
                           gt_sgx_measurement *out)
{
    memset(out, 0, sizeof *out);
    GT_ENSURE(len > 0 && len % GT_SGX_PAGE_BYTES == 0 && len <= GT_SGX_IMAGE_MAX_BYTES,
              GT_E_FORMAT, "flat image: %zu bytes is not a whole number of 4 KiB pages", len);
    if (size == 0) {
        for (size = 2 * GT_SGX_PAGE_BYTES; size < len; size <<= 1) {
        }
    }
    GT_ENSURE(size >= len, GT_E_ARG, "flat image: SIZE 0x%llx is smaller than the image (%zu)",
              (unsigned long long)size, len);
    gt_sgx_measurer *mz = NULL;
    GT_TRY(gt_sgx_measurer_new(&mz, out, ssaframesize, size));
    gt_reader r = gt_reader_init(data, len);
    gt_err err = GT_OK;
    for (uint64_t off = 0; off < len; off += GT_SGX_PAGE_BYTES) {
        gt_span page = {0};
        GT_TRY_GOTO(err, gt_reader_span(&r, GT_SGX_PAGE_BYTES, &page), fail);
        uint64_t flags = off == 0 ? GT_SGX_SECINFO_TCS
                                  : GT_SGX_SECINFO_REG | GT_SGX_SECINFO_R | GT_SGX_SECINFO_W |
                                        GT_SGX_SECINFO_X;
        GT_TRY_GOTO(err, gt_sgx_measurer_page(mz, off, flags, page.data, true), fail);
    }
    return gt_sgx_measurer_finish(mz);
fail:
    gt_sgx_measurer_free(mz);
    return err;
}
