// enclave/: MRENCLAVE of the real images in tests/testdata/sgx-enclave/ (an SGXS stream, the
// Linux selftest flat image, an SDK signed enclave) as their expected.json / SIGSTRUCT say; a
// synthetic SDK enclave whose MRENCLAVE the test builds block by block on its own (segments,
// partial pages, .bss, patches, heap, guard, stack fill, TCS relocation, thread groups, the
// metadata 1.3 extra page); and damaged streams and ELFs refused.
#include "enclave_testlib.h"

#include <stdlib.h>

static void image_expected(const char *file, gt_sgx_image_kind kind, bool is_sgxs)
{
    gt_buf b = {0};
    sgxe_read(file, &b);
    gt_sgx_measurement m;
    gt_sgx_image_kind got_kind = GT_SGX_IMAGE_AUTO;
    GT_ASSERT_OK(gt_sgx_measure_image(b.data, b.len, kind, 0, 0, &m, &got_kind));
    cJSON *got = NULL;
    GT_ASSERT_OK(gt_sgx_measurement_json(&m, &got));
    cJSON *want = sgxe_expected(file);
    const cJSON *ex = cJSON_GetObjectItem(want, "expected");
    // The checker's sha256_of_whole_file is the hash of the stream only for SGXS (for the flat
    // image it repeats the MRENCLAVE).
    static const char *const ignore[] = {"sha256_of_whole_file", NULL};
    sgxe_expect_members(got, cJSON_GetObjectItem(ex, "measurement"), ignore, file);
    const char *mre = cJSON_GetObjectItem(ex, "mrenclave")->valuestring;
    assert_string_equal(cJSON_GetObjectItem(got, "mrenclave")->valuestring, mre);
    if (is_sgxs) {
        // SGXS is the measured stream itself: SHA-256 of the file is MRENCLAVE.
        uint8_t h[GT_SHA256_BYTES];
        GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, h, b.data, b.len));
        assert_memory_equal(h, m.mrenclave, sizeof h);
        assert_int_equal(got_kind, GT_SGX_IMAGE_SGXS);
    }
    // ... and it is the ENCLAVEHASH of the SIGSTRUCT that signs it.
    const cJSON *by = cJSON_GetObjectItem(ex, "signed_by");
    if (by != NULL) {
        gt_buf sb = {0};
        sgxe_read(by->valuestring, &sb);
        gt_sgx_sigstruct s;
        GT_ASSERT_OK(gt_sgx_sigstruct_parse(sb.data, sb.len, &s));
        assert_memory_equal(s.enclavehash, m.mrenclave, GT_SGX_HASH_BYTES);
        gt_buf_free_nowipe(&sb);
    }
    cJSON_Delete(got);
    cJSON_Delete(want);
    gt_buf_free_nowipe(&b);
}

static void sgxs_stream(void **state)
{
    (void)state;
    image_expected("fortanix_test_enclave.sgxs", GT_SGX_IMAGE_AUTO, true);
}

static void flat_selftest_image(void **state)
{
    (void)state;
    image_expected("enarx_encl.bin", GT_SGX_IMAGE_FLAT, false);
    gt_buf b = {0};
    sgxe_read("enarx_encl.bin", &b);
    gt_sgx_measurement m;
    GT_ASSERT_CODE(gt_sgx_measure_image(b.data, b.len, GT_SGX_IMAGE_AUTO, 0, 0, &m, NULL),
                   GT_E_FORMAT);  // not detectable: flat must be asked for
    GT_ASSERT_CODE(gt_sgx_measure_flat(b.data, b.len - 1, 1, 0, &m), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_sgx_measure_flat(b.data, b.len, 1, 0x4000, &m), GT_E_ARG);
    gt_buf_free_nowipe(&b);
}

// A real Intel SGX SDK enclave: our MRENCLAVE is the one the SDK's sgx_sign signed.
static void sdk_signed_so(void **state)
{
    (void)state;
    gt_buf b = {0};
    sgxe_read("sdk_pingpong_2018.signed.so", &b);
    gt_sgx_measurement m;
    gt_sgx_meta meta;
    GT_ASSERT_OK(gt_sgx_measure_signed_so(b.data, b.len, &m, &meta));
    cJSON *want = sgxe_expected("sdk_pingpong_2018.signed.so");
    const cJSON *ex = cJSON_GetObjectItem(want, "expected");
    char hex[65], v[32];
    gt_hex_encode(hex, sizeof hex, m.mrenclave, sizeof m.mrenclave);
    assert_string_equal(hex, cJSON_GetObjectItem(ex, "mrenclave")->valuestring);
    const cJSON *md = cJSON_GetObjectItem(ex, "metadata");
    snprintf(v, sizeof v, "0x%llx", (unsigned long long)meta.version);
    assert_string_equal(v, cJSON_GetObjectItem(md, "version")->valuestring);
    snprintf(v, sizeof v, "0x%llx", (unsigned long long)meta.enclave_size);
    assert_string_equal(v, cJSON_GetObjectItem(md, "enclave_size")->valuestring);
    assert_int_equal(meta.size, cJSON_GetObjectItem(md, "size")->valueint);
    assert_int_equal(meta.ssa_frame_size, cJSON_GetObjectItem(md, "ssa_frame_size")->valueint);
    assert_int_equal(meta.tcs_min_pool, cJSON_GetObjectItem(md, "tcs_min_pool")->valueint);
    assert_int_equal(meta.metadata_offset, cJSON_GetObjectItem(ex, "metadata_offset")->valueint);
    assert_int_equal(meta.sigstruct_offset,
                     cJSON_GetObjectItem(ex, "sigstruct_offset")->valueint);
    assert_int_equal(m.problem_count, 0);
    // Any change to a measured byte (here: in .text) changes MRENCLAVE.
    gt_sgx_measurement m2;
    b.data[0x2000] ^= 1;
    GT_ASSERT_OK(gt_sgx_measure_signed_so(b.data, b.len, &m2, NULL));
    assert_memory_not_equal(m.mrenclave, m2.mrenclave, GT_SGX_HASH_BYTES);
    cJSON_Delete(want);
    gt_buf_free_nowipe(&b);
}

// ---- a synthetic SDK enclave and an oracle built here, block by block ------------------------

#define SYN_BYTES 0x40c0
#define SYN_NOTE 0x3000
#define SYN_META (SYN_NOTE + 12 + 13)
#define SYN_META_SIZE 2400
#define SYN_PATCH 1888
#define SYN_LAYOUT (1888 + 32)
#define SYN_LAYOUTS 7
#define SYN_TCS_TEMPLATE 2200
#define SYN_CONTENT 2300
#define SYN_PATCH_SRC 2290

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static void layout(uint8_t *meta, int i, uint16_t id, uint16_t attr, uint32_t pages,
                   uint64_t rva, uint32_t content_size, uint32_t content_offset, uint64_t si)
{
    uint8_t *e = meta + SYN_LAYOUT + 32 * i;
    put16(e, id);
    put16(e + 2, attr);
    gt_store_u32le(e + 4, pages);
    gt_store_u64le(e + 8, rva);
    gt_store_u32le(e + 16, content_size);
    gt_store_u32le(e + 20, content_offset);
    gt_store_u64le(e + 24, si);
}

static void synthetic_elf(uint8_t *f, uint64_t version)
{
    memset(f, 0, SYN_BYTES);
    for (size_t i = 0; i < 0x2400; i++) {
        f[i] = (uint8_t)(i * 7 + 1);  // segment bytes (headers are rewritten below)
    }
    memset(f, 0, 0x100);
    memcpy(f, "\x7f" "ELF\x02\x01\x01", 7);
    put16(f + 16, 3);
    put16(f + 18, 62);
    gt_store_u32le(f + 20, 1);
    gt_store_u64le(f + 32, 64);       // e_phoff
    gt_store_u64le(f + 40, 0x4000);   // e_shoff
    put16(f + 52, 64);
    put16(f + 54, 56);
    put16(f + 56, 2);                 // e_phnum
    put16(f + 58, 64);
    put16(f + 60, 3);                 // e_shnum
    put16(f + 62, 2);                 // e_shstrndx
    uint8_t *p = f + 64;              // PT_LOAD R X: [0, 0x1800)
    gt_store_u32le(p, 1);
    gt_store_u32le(p + 4, 5);
    gt_store_u64le(p + 32, 0x1800);
    gt_store_u64le(p + 40, 0x1800);
    gt_store_u64le(p + 48, 0x1000);
    p += 56;  // PT_LOAD RW at 0x3100: 0x300 bytes from file 0x2100, .bss up to 0x4300
    gt_store_u32le(p, 1);
    gt_store_u32le(p + 4, 6);
    gt_store_u64le(p + 8, 0x2100);
    gt_store_u64le(p + 16, 0x3100);
    gt_store_u64le(p + 32, 0x300);
    gt_store_u64le(p + 40, 0x1200);
    gt_store_u64le(p + 48, 0x1000);
    memset(f + 0x2400, 0, 0x1c00);
    // .note.sgxmeta: namesz, descsz, type, "sgx_metadata\0", metadata_t (unpadded, as the SDK)
    gt_store_u32le(f + SYN_NOTE, 13);
    gt_store_u32le(f + SYN_NOTE + 4, SYN_META_SIZE);
    gt_store_u32le(f + SYN_NOTE + 8, 1);
    memcpy(f + SYN_NOTE + 12, "sgx_metadata", 13);
    uint8_t *m = f + SYN_META;
    gt_store_u64le(m, GT_SGX_META_MAGIC);
    gt_store_u64le(m + 8, version);
    gt_store_u32le(m + 16, SYN_META_SIZE);
    gt_store_u32le(m + 24, 1);                  // ssa_frame_size
    gt_store_u64le(m + 40, 0x100000);           // enclave_size
    gt_store_u32le(m + 1872, SYN_PATCH);
    gt_store_u32le(m + 1876, 32);
    gt_store_u32le(m + 1880, SYN_LAYOUT);
    gt_store_u32le(m + 1884, 32 * SYN_LAYOUTS);
    gt_store_u64le(m + SYN_PATCH, 0x1010);      // patch: 8 bytes into the first segment
    gt_store_u32le(m + SYN_PATCH + 8, SYN_PATCH_SRC);
    gt_store_u32le(m + SYN_PATCH + 12, 8);
    memset(m + SYN_PATCH_SRC, 0x5a, 8);
    gt_store_u64le(m + SYN_TCS_TEMPLATE + 16, 0x1000);  // ossa
    gt_store_u64le(m + SYN_TCS_TEMPLATE + 32, 0x777);   // oentry (not relocated)
    gt_store_u64le(m + SYN_TCS_TEMPLATE + 48, 0x2000);  // ofs_base
    gt_store_u64le(m + SYN_TCS_TEMPLATE + 56, 0x3000);  // ogs_base
    for (int i = 0; i < 100; i++) {
        m[SYN_CONTENT + i] = (uint8_t)(0xa0 + i);
    }
    layout(m, 0, 1, 1, 2, 0x10000, 0, 0, 0x203);            // heap: EADD only
    layout(m, 1, 10, 0, 1, 0x12000, 0, 0, 0);               // guard
    layout(m, 2, 8, 3, 2, 0x13000, 0xcccccccc, 0, 0x203);   // stack, filled
    layout(m, 3, 4, 3, 1, 0x15000, 72, SYN_TCS_TEMPLATE, 0x100);  // TCS
    layout(m, 4, 6, 3, 1, 0x16000, 0, 0, 0x203);            // SSA
    uint8_t *g = m + SYN_LAYOUT + 32 * 5;                   // thread group: 3 entries, twice
    put16(g, 0x1009);
    put16(g + 2, 3);
    gt_store_u32le(g + 4, 2);
    gt_store_u64le(g + 8, 0x10000);
    layout(m, 6, 20, 3, 1, 0x40000, 100, SYN_CONTENT, 0x201);  // initial content, read-only
    // section headers: [0] null, [1] .note.sgxmeta, [2] .shstrtab
    static const char names[] = "\0.note.sgxmeta\0.shstrtab";
    memcpy(f + 0x3f00, names, sizeof names);
    uint8_t *s1 = f + 0x4000 + 64, *s2 = f + 0x4000 + 128;
    gt_store_u32le(s1, 1);
    gt_store_u32le(s1 + 4, 7);
    gt_store_u64le(s1 + 24, SYN_NOTE);
    gt_store_u64le(s1 + 32, 12 + 13 + SYN_META_SIZE);
    gt_store_u32le(s2, 15);
    gt_store_u32le(s2 + 4, 3);
    gt_store_u64le(s2 + 24, 0x3f00);
    gt_store_u64le(s2 + 32, sizeof names);
}

typedef struct {
    gt_hash_ctx *h;
} oracle;

static void o_block(oracle *o, const char *tag, uint64_t a, uint64_t b, bool b32)
{
    uint8_t blk[64] = {0};
    memcpy(blk, tag, strlen(tag));
    if (b32) {  // ECREATE: u32 then u64
        gt_store_u32le(blk + 8, (uint32_t)a);
        gt_store_u64le(blk + 12, b);
    } else {
        gt_store_u64le(blk + 8, a);
        gt_store_u64le(blk + 16, b);
    }
    GT_ASSERT_OK(gt_hash_update(o->h, blk, sizeof blk));
}

static void o_page(oracle *o, uint64_t off, uint64_t flags, const uint8_t *page, bool extend)
{
    static const uint8_t zero[4096];
    o_block(o, "EADD", off, flags, false);
    for (int c = 0; extend && c < 16; c++) {
        o_block(o, "EEXTEND", off + 256 * (uint64_t)c, 0, false);
        GT_ASSERT_OK(gt_hash_update(o->h, (page ? page : zero) + 256 * c, 256));
    }
}

static void synthetic_oracle(const uint8_t *f, bool v13, uint64_t size, uint8_t out[32])
{
    oracle o;
    GT_ASSERT_OK(gt_hash_new(&o.h, GT_HASH_SHA256));
    o_block(&o, "ECREATE", 1, size, true);
    uint8_t page[4096];
    memcpy(page, f, 4096);                                      // segment 1, page 0
    o_page(&o, 0, 0x205, page, true);
    memset(page, 0, sizeof page);                               // page 1: 0x800 bytes, patched
    memcpy(page, f + 0x1000, 0x800);
    memset(page + 0x10, 0x5a, 8);
    o_page(&o, 0x1000, 0x205, page, true);
    memset(page, 0, sizeof page);                               // segment 2 at 0x3100
    memcpy(page + 0x100, f + 0x2100, 0x300);
    o_page(&o, 0x3000, 0x203, page, true);
    o_page(&o, 0x4000, 0x203, NULL, true);                      // .bss
    if (v13) {
        o_page(&o, 0x5000, 0x203, NULL, true);                  // SDK 1.5's extra page
    }
    o_page(&o, 0x10000, 0x203, NULL, false);                    // heap, added only
    o_page(&o, 0x11000, 0x203, NULL, false);
    for (uint64_t delta = 0; delta <= 0x30000; delta += 0x10000) {
        if (delta == 0x30000) {
            break;
        }
        // stack (filled), TCS (offsets relocated by its own address), SSA: at 0, then the group
        // repeats them at +0x10000 and +0x20000
        uint8_t fill[4096];
        for (size_t i = 0; i < sizeof fill; i += 4) {
            gt_store_u32le(fill + i, 0xcccccccc);
        }
        o_page(&o, delta + 0x13000, 0x203, fill, true);
        o_page(&o, delta + 0x14000, 0x203, fill, true);
        uint8_t tcs[4096] = {0};
        uint64_t at = delta + 0x15000;
        gt_store_u64le(tcs + 16, 0x1000 + at);
        gt_store_u64le(tcs + 32, 0x777);
        gt_store_u64le(tcs + 48, 0x2000 + at);
        gt_store_u64le(tcs + 56, 0x3000 + at);
        o_page(&o, at, 0x100, tcs, true);
        o_page(&o, delta + 0x16000, 0x203, NULL, true);
        if (delta == 0) {
            continue;  // the group comes after entries 0..4 have been laid out once
        }
    }
    uint8_t content[4096] = {0};
    for (int i = 0; i < 100; i++) {
        content[i] = (uint8_t)(0xa0 + i);
    }
    o_page(&o, 0x40000, 0x201, content, true);
    GT_ASSERT_OK(gt_hash_final(o.h, out));
    gt_hash_free(o.h);
}

static void synthetic_sdk_enclave(void **state)
{
    (void)state;
    uint8_t *f = malloc(SYN_BYTES);
    assert_non_null(f);
    const uint64_t versions[] = {(2ull << 32) | 3, (1ull << 32) | 3};
    for (int v = 0; v < 2; v++) {
        synthetic_elf(f, versions[v]);
        uint8_t want[32];
        synthetic_oracle(f, v == 1, 0x100000, want);
        gt_sgx_measurement m;
        gt_sgx_meta meta;
        GT_ASSERT_OK(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, &meta));
        assert_int_equal(meta.layout_count, SYN_LAYOUTS);
        assert_int_equal(meta.patch_count, 1);
        assert_int_equal(meta.sigstruct_offset, SYN_META + 64);
        assert_memory_equal(m.mrenclave, want, 32);
        assert_int_equal(m.page_types[GT_SGX_PT_TCS], 3);
        assert_int_equal(m.problem_count, 0);
    }
    // Damage: each is refused with its reason, never measured.
    gt_sgx_measurement m;
    synthetic_elf(f, versions[0]);
    f[SYN_META] ^= 1;
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_FORMAT, "magic");
    synthetic_elf(f, versions[0]);
    put16(f + SYN_META + SYN_LAYOUT + 32 * 5 + 2, 6);          // group repeats 6 of 5 entries
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_FORMAT, "group");
    synthetic_elf(f, versions[0]);
    gt_store_u64le(f + SYN_META + SYN_PATCH, SYN_BYTES - 4);   // patch past the file's end
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_FORMAT, "patch");
    synthetic_elf(f, versions[0]);
    gt_store_u32le(f + SYN_META + 1884, 32 * 200);              // layout table past the metadata
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_FORMAT, "outside");
    synthetic_elf(f, versions[0]);
    gt_store_u64le(f + SYN_META + 8, 13ull << 32);              // elrange metadata
    GT_ASSERT_CODE(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_UNSUPPORTED);
    synthetic_elf(f, versions[0]);
    gt_store_u32le(f + 0x4000 + 64, 0);                        // no section is .note.sgxmeta
    GT_ASSERT_CODE(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_NOTFOUND);
    synthetic_elf(f, versions[0]);
    gt_store_u32le(f + 64 + 56 + 4, 0);                        // a PT_LOAD without permissions
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_FORMAT, "permission");
    synthetic_elf(f, versions[0]);
    gt_store_u64le(f + SYN_META + 40, 0x8000);                  // enclave too small for its pages
    assert_true(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL).code != GT_E_NONE);
    // Cut anywhere: an error, never a crash (ASan watches).
    synthetic_elf(f, versions[0]);
    for (size_t n = 0; n < SYN_BYTES; n += 61) {
        assert_true(gt_sgx_measure_signed_so(f, n, &m, NULL).code != GT_E_NONE);
    }
    free(f);
}

// SDK 2.17 enclaves are 128 GiB (sgx_sign rounds its 0x1fffffffff content limit up to a power of
// two; ltao91/sgxcuckoo): the size is measured, not refused, and the work is bounded apart from it.
static void synthetic_sdk_enclave_128g(void **state)
{
    (void)state;
    const uint64_t size = 128ull << 30;
    uint8_t *f = malloc(SYN_BYTES);
    assert_non_null(f);
    synthetic_elf(f, (2ull << 32) | 3);
    gt_store_u64le(f + SYN_META + 40, size);
    uint8_t want[32];
    synthetic_oracle(f, false, size, want);
    gt_sgx_measurement m;
    GT_ASSERT_OK(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL));
    assert_memory_equal(m.mrenclave, want, 32);
    assert_int_equal(m.size, size);
    // Attack: a stack entry of 16 Mi + 1 filled pages fits the 128 GiB enclave but would hash
    // 64 GiB of pages from a 16 KiB file; refused before any is measured.
    gt_store_u32le(f + SYN_META + SYN_LAYOUT + 32 * 2 + 4, (1u << 24) + 1);
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_LIMIT, "blocks");
    // Above the 47-bit address space: refused.
    synthetic_elf(f, (2ull << 32) | 3);
    gt_store_u64le(f + SYN_META + 40, 1ull << 48);
    GT_ASSERT_ERR(gt_sgx_measure_signed_so(f, SYN_BYTES, &m, NULL), GT_E_LIMIT, "address space");
    free(f);
}

// ---- SGXS streams ---------------------------------------------------------------------------

static void sgxs_damage(void **state)
{
    (void)state;
    gt_buf b = {0};
    sgxe_read("fortanix_test_enclave.sgxs", &b);
    gt_sgx_measurement m, ref;
    GT_ASSERT_OK(gt_sgx_measure_sgxs(b.data, b.len, &ref));
    // Truncated inside a record.
    for (size_t n = 1; n < 64 * 40; n += 37) {
        if (n % 64 == 0) {
            continue;
        }
        gt_err e = gt_sgx_measure_sgxs(b.data, n, &m);
        assert_true(e.code == GT_E_TRUNCATED || e.code == GT_E_NONE);
    }
    GT_ASSERT_CODE(gt_sgx_measure_sgxs(b.data, b.len - 1, &m), GT_E_TRUNCATED);
    uint8_t *c = malloc(b.len);
    assert_non_null(c);
    // Not ECREATE first; an unknown tag; a second ECREATE; UNSIZED.
    memcpy(c, b.data, b.len);
    c[0] = 'X';
    GT_ASSERT_ERR(gt_sgx_measure_sgxs(c, b.len, &m), GT_E_FORMAT, "ECREATE");
    memcpy(c, b.data, b.len);
    memcpy(c + 64, "BOGUS\0\0\0", 8);
    GT_ASSERT_ERR(gt_sgx_measure_sgxs(c, b.len, &m), GT_E_FORMAT, "unknown tag");
    memcpy(c + 64, "ECREATE\0", 8);
    GT_ASSERT_ERR(gt_sgx_measure_sgxs(c, b.len, &m), GT_E_FORMAT, "second ECREATE");
    memcpy(c, b.data, b.len);
    memcpy(c, "UNSIZED\0", 8);
    GT_ASSERT_CODE(gt_sgx_measure_sgxs(c, b.len, &m), GT_E_UNSUPPORTED);
    // The first EEXTEND made UNMEASRD: loaded, skipped, so MRENCLAVE is the stream without it.
    memcpy(c, b.data, b.len);
    size_t at = 128;  // ECREATE, EADD, then the first EEXTEND
    assert_memory_equal(c + at, "EEXTEND\0", 8);
    memcpy(c + at, "UNMEASRD", 8);
    GT_ASSERT_OK(gt_sgx_measure_sgxs(c, b.len, &m));
    assert_int_equal(m.unmeasured_chunks, 1);
    assert_int_equal(m.eextend_chunks, ref.eextend_chunks - 1);
    uint8_t h[32];
    memmove(c + at, c + at + 320, b.len - at - 320);
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, h, c, b.len - 320));
    assert_memory_equal(h, m.mrenclave, 32);
    // Non-canonical: a reserved byte, an EADD out of order, an EEXTEND outside its page are
    // measured as the hardware would, and named.
    memcpy(c, b.data, b.len);
    c[64 + 40] = 1;  // SECINFO reserved
    GT_ASSERT_OK(gt_sgx_measure_sgxs(c, b.len, &m));
    assert_int_equal(m.problem_count, 1);
    assert_non_null(strstr(m.problems[0], "SECINFO reserved"));
    assert_memory_equal(m.mrenclave, ref.mrenclave, 32);  // rebuilt with zero, as SGX measures
    memcpy(c, b.data, b.len);
    gt_store_u64le(c + at + 8, 0x30000);  // EEXTEND far from its EADD
    GT_ASSERT_OK(gt_sgx_measure_sgxs(c, b.len, &m));
    assert_true(m.problem_count >= 1);
    assert_non_null(strstr(m.problems[0], "not in the page"));
    free(c);
    gt_buf_free_nowipe(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgxs_stream),
        cmocka_unit_test(flat_selftest_image),
        cmocka_unit_test(sdk_signed_so),
        cmocka_unit_test(synthetic_sdk_enclave),
        cmocka_unit_test(synthetic_sdk_enclave_128g),
        cmocka_unit_test(sgxs_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
