// The sealed dataset's signed manifest, and the per-chunk values every party derives from it:
// chunk keys (HKDF), AAD, chunk file headers, and one-shot chunk opening. Layout: docs/formats.md.
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>

static const char chunk_key_info[] = "gputravel chunk key v1";        // || u32le index
static const char key_check_info[] = "gputravel dataset key check v1";

void gt_manifest_free(gt_manifest *m)
{
    free(m->chunks);
    memset(m, 0, sizeof *m);
}

uint64_t gt_manifest_chunk_file_bytes(const gt_manifest *m, uint32_t index)
{
    return GT_CHUNK_HEADER_BYTES + gt_chunk_body_bytes(m->chunks[index].plaintext_len,
                                                       m->segment_bytes);
}

gt_err gt_chunk_path(char *out, size_t cap, const char *dsdir, uint32_t index)
{
    char name[32];
    snprintf(name, sizeof name, "chunk-%06u.gtc", index);
    return gt_path_join(out, cap, dsdir, name);
}

// Reads the fixed header and the chunk table; *signed_part is every byte the signature covers.
static gt_err decode(gt_manifest *m, gt_reader *r, gt_span *signed_part)
{
    gt_span head = {0}, table = {0};
    GT_TRY(gt_err_wrap(gt_reader_span(r, GT_MANIFEST_HEADER_BYTES, &head), "manifest header"));
    gt_reader h = gt_reader_init(head.data, head.len);
    uint8_t magic[8] = {0};
    uint32_t flags = 0, reserved = 0;  // reserved: version 2's segment size
    GT_TRY(gt_reader_bytes(&h, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, GT_MANIFEST_MAGIC, 8) == 0, GT_E_FORMAT,
              "manifest: bad magic (not a gputravel sealed-dataset manifest)");
    GT_TRY(gt_reader_u32le(&h, &m->version));
    GT_ENSURE(m->version == GT_MANIFEST_VERSION || m->version == GT_MANIFEST_VERSION_SEGMENTED,
              GT_E_UNSUPPORTED, "manifest: version %u (this build reads versions %u and %u)",
              m->version, GT_MANIFEST_VERSION, GT_MANIFEST_VERSION_SEGMENTED);
    GT_TRY(gt_reader_u32le(&h, &flags));
    GT_TRY(gt_reader_bytes(&h, m->dataset_id, sizeof m->dataset_id));
    GT_TRY(gt_reader_bytes(&h, m->holder_pub, sizeof m->holder_pub));
    GT_TRY(gt_reader_bytes(&h, m->key_check, sizeof m->key_check));
    GT_TRY(gt_reader_u16le(&h, &m->suite));
    GT_TRY(gt_reader_u16le(&h, &m->token_dtype));
    GT_TRY(gt_reader_u32le(&h, &m->vocab_size));
    GT_TRY(gt_reader_u64le(&h, &m->token_count));
    GT_TRY(gt_reader_u64le(&h, &m->chunk_size));
    GT_TRY(gt_reader_u32le(&h, &m->chunk_count));
    GT_TRY(gt_reader_u32le(&h, &reserved));
    GT_TRY(gt_reader_expect_end(&h, "manifest header"));
    bool segmented = m->version == GT_MANIFEST_VERSION_SEGMENTED;
    GT_ENSURE(flags == 0 && (segmented || reserved == 0), GT_E_UNSUPPORTED,
              "manifest: unknown flags 0x%08x / reserved 0x%08x", flags, reserved);
    GT_ENSURE(!segmented || reserved != 0, GT_E_FORMAT,
              "manifest: version 2 (segmented chunks) with a segment size of 0");
    m->segment_bytes = segmented ? reserved : 0;
    GT_ENSURE(m->chunk_count <= GT_MANIFEST_MAX_CHUNKS, GT_E_LIMIT,
              "manifest: %u chunks (at most %u)", m->chunk_count, GT_MANIFEST_MAX_CHUNKS);
    size_t table_len = (size_t)m->chunk_count * GT_MANIFEST_ENTRY_BYTES;
    GT_ENSURE(gt_reader_left(r) >= GT_ED25519_SIG_BYTES &&
                  table_len == gt_reader_left(r) - GT_ED25519_SIG_BYTES,
              gt_reader_left(r) < table_len + GT_ED25519_SIG_BYTES ? GT_E_TRUNCATED : GT_E_FORMAT,
              "manifest: %u chunks need %zu bytes of table and signature, the file has %zu",
              m->chunk_count, table_len + GT_ED25519_SIG_BYTES, gt_reader_left(r));
    GT_TRY(gt_reader_span(r, table_len, &table));
    m->chunks = calloc(m->chunk_count ? m->chunk_count : 1, sizeof *m->chunks);
    GT_ENSURE(m->chunks != NULL, GT_E_NOMEM, "manifest: %u chunks", m->chunk_count);
    gt_reader t = gt_reader_init(table.data, table.len);
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        gt_manifest_chunk *c = &m->chunks[i];
        GT_TRY(gt_reader_u64le(&t, &c->plaintext_len));
        GT_TRY(gt_reader_bytes(&t, c->iv, sizeof c->iv));
        GT_TRY(gt_reader_bytes(&t, c->tag, sizeof c->tag));
        GT_TRY(gt_reader_bytes(&t, c->file_sha256, sizeof c->file_sha256));
    }
    GT_TRY(gt_reader_bytes(r, m->signature, sizeof m->signature));
    GT_TRY(gt_reader_expect_end(r, "manifest"));
    // head and table are adjacent: the signed part is exactly what was parsed before the signature
    *signed_part = (gt_span){head.data, head.len + table.len};
    return GT_OK;
}

gt_err gt_manifest_decode(gt_manifest *m, const uint8_t *data, size_t len)
{
    memset(m, 0, sizeof *m);
    gt_reader r = gt_reader_init(data, len);
    gt_span signed_part = {0};
    gt_err err = decode(m, &r, &signed_part);
    if (err.code != GT_E_NONE) {
        gt_manifest_free(m);
    }
    return err;
}

gt_err gt_manifest_check(const gt_manifest *m)
{
    GT_ENSURE(m->suite == GT_SUITE_AES256GCM_HKDF_SHA256, GT_E_UNSUPPORTED,
              "manifest: cipher suite %u (expected %u: AES-256-GCM, HKDF-SHA256)", m->suite,
              GT_SUITE_AES256GCM_HKDF_SHA256);
    GT_ENSURE(m->token_dtype == GT_DTYPE_U16LE, GT_E_UNSUPPORTED,
              "manifest: token type %u (expected %u: uint16 LE)", m->token_dtype, GT_DTYPE_U16LE);
    GT_ENSURE((m->version == GT_MANIFEST_VERSION_SEGMENTED) == (m->segment_bytes != 0),
              GT_E_FORMAT, "manifest: version %u with a segment size of %u", m->version,
              m->segment_bytes);
    GT_TRY(gt_err_wrap(gt_chunk_seg_check(m->segment_bytes), "manifest"));
    GT_ENSURE(m->vocab_size >= 1 && m->vocab_size <= 65536, GT_E_FORMAT,
              "manifest: vocabulary size %u (uint16 tokens allow 1..65536)", m->vocab_size);
    GT_ENSURE(m->chunk_size >= 2 && m->chunk_size % 2 == 0 &&
                  m->chunk_size <= GT_SEAL_MAX_CHUNK_BYTES,
              GT_E_FORMAT, "manifest: chunk size %llu (must be even, 2 .. %llu)",
              (unsigned long long)m->chunk_size, (unsigned long long)GT_SEAL_MAX_CHUNK_BYTES);
    GT_ENSURE(m->token_count >= 1 && m->token_count <= INT32_MAX, GT_E_FORMAT,
              "manifest: %llu tokens (an llm.c shard holds 1 .. %d)",
              (unsigned long long)m->token_count, INT32_MAX);
    uint64_t total = 2 * m->token_count;
    uint64_t want_chunks = (total + m->chunk_size - 1) / m->chunk_size;
    GT_ENSURE(m->chunk_count == want_chunks, GT_E_FORMAT,
              "manifest: sizes disagree: %llu bytes in chunks of %llu make %llu chunks, not %u",
              (unsigned long long)total, (unsigned long long)m->chunk_size,
              (unsigned long long)want_chunks, m->chunk_count);
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        uint64_t want = i + 1 < m->chunk_count ? m->chunk_size
                                                : total - (uint64_t)i * m->chunk_size;
        GT_ENSURE(m->chunks[i].plaintext_len == want, GT_E_FORMAT,
                  "manifest: sizes disagree: chunk %u holds %llu bytes, expected %llu", i,
                  (unsigned long long)m->chunks[i].plaintext_len, (unsigned long long)want);
    }
    return GT_OK;
}

gt_err gt_manifest_parse(gt_manifest *m, const uint8_t *data, size_t len)
{
    memset(m, 0, sizeof *m);
    gt_reader r = gt_reader_init(data, len);
    gt_span signed_part = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, decode(m, &r, &signed_part), fail);
    err = gt_ed25519_verify(m->signature, signed_part.data, signed_part.len, m->holder_pub);
    if (err.code != GT_E_NONE) {
        err = gt_errf(GT_E_AUTH, "manifest: signature does not verify (manifest altered, or not "
                                 "signed by the holder key it names)");
        goto fail;
    }
    GT_TRY_GOTO(err, gt_manifest_check(m), fail);
    return GT_OK;
fail:
    gt_manifest_free(m);
    return err;
}

gt_err gt_manifest_load(gt_manifest *m, const char *dsdir)
{
    memset(m, 0, sizeof *m);
    char path[4096];
    GT_TRY(gt_path_join(path, sizeof path, dsdir, GT_MANIFEST_FILE));
    size_t max = GT_MANIFEST_HEADER_BYTES + (size_t)GT_MANIFEST_MAX_CHUNKS * GT_MANIFEST_ENTRY_BYTES +
                 GT_ED25519_SIG_BYTES;
    gt_buf b = {0};
    gt_err err = gt_file_read_all(path, max, &b);
    if (err.code == GT_E_NOTFOUND) {
        return gt_errf(GT_E_NOTFOUND, "%s: no manifest (is %s a sealed dataset?)", path, dsdir);
    }
    GT_TRY(err);
    err = gt_manifest_parse(m, b.data, b.len);
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", path);
}

gt_err gt_manifest_encode(gt_manifest *m, const uint8_t sec[GT_ED25519_SECRET_BYTES], gt_buf *out)
{
    *out = (gt_buf){0};
    gt_writer w = gt_writer_init_dynamic();
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_writer_bytes(&w, GT_MANIFEST_MAGIC, 8), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, m->version), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, 0), out);  // flags
    GT_TRY_GOTO(err, gt_writer_bytes(&w, m->dataset_id, sizeof m->dataset_id), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, m->holder_pub, sizeof m->holder_pub), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, m->key_check, sizeof m->key_check), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, m->suite), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, m->token_dtype), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, m->vocab_size), out);
    GT_TRY_GOTO(err, gt_writer_u64le(&w, m->token_count), out);
    GT_TRY_GOTO(err, gt_writer_u64le(&w, m->chunk_size), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, m->chunk_count), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, m->segment_bytes), out);  // version 1: reserved, 0
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        const gt_manifest_chunk *c = &m->chunks[i];
        GT_TRY_GOTO(err, gt_writer_u64le(&w, c->plaintext_len), out);
        GT_TRY_GOTO(err, gt_writer_bytes(&w, c->iv, sizeof c->iv), out);
        GT_TRY_GOTO(err, gt_writer_bytes(&w, c->tag, sizeof c->tag), out);
        GT_TRY_GOTO(err, gt_writer_bytes(&w, c->file_sha256, sizeof c->file_sha256), out);
    }
    GT_TRY_GOTO(err, gt_ed25519_sign(m->signature, w.data, w.len, sec), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, m->signature, sizeof m->signature), out);
    GT_TRY_GOTO(err, gt_buf_append(out, w.data, w.len), out);
out:
    gt_writer_free(&w);
    return err;
}

gt_err gt_dataset_key_check(uint8_t out[GT_KEY_CHECK_BYTES],
                            const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                            const uint8_t dataset_id[GT_DATASET_ID_BYTES])
{
    return gt_hkdf(GT_HASH_SHA256, out, GT_KEY_CHECK_BYTES, dataset_key, GT_DATASET_KEY_BYTES,
                   dataset_id, GT_DATASET_ID_BYTES, (const uint8_t *)key_check_info,
                   sizeof key_check_info - 1);
}

gt_err gt_chunk_key_derive(uint8_t key_out[GT_AEAD_KEY_BYTES],
                           const uint8_t dataset_key[GT_DATASET_KEY_BYTES], const gt_manifest *m,
                           uint32_t index)
{
    GT_ENSURE(index < m->chunk_count, GT_E_ARG, "chunk %u out of range (%u chunks)", index,
              m->chunk_count);
    uint8_t info[sizeof chunk_key_info - 1 + 4];
    memcpy(info, chunk_key_info, sizeof chunk_key_info - 1);
    gt_store_u32le(info + sizeof chunk_key_info - 1, index);
    return gt_hkdf(GT_HASH_SHA256, key_out, GT_AEAD_KEY_BYTES, dataset_key, GT_DATASET_KEY_BYTES,
                   m->dataset_id, sizeof m->dataset_id, info, sizeof info);
}

gt_err gt_chunk_aad_build(uint8_t aad[GT_CHUNK_AAD_BYTES], const gt_manifest *m, uint32_t index)
{
    GT_ENSURE(index < m->chunk_count, GT_E_ARG, "chunk %u out of range (%u chunks)", index,
              m->chunk_count);
    memcpy(aad, m->dataset_id, GT_DATASET_ID_BYTES);
    gt_store_u32le(aad + 16, index);
    gt_store_u32le(aad + 20, m->chunk_count);
    gt_store_u64le(aad + 24, m->chunks[index].plaintext_len);
    return GT_OK;
}

gt_err gt_chunk_header_check(const uint8_t *hdr, size_t len, const gt_manifest *m, uint32_t index)
{
    GT_ENSURE(index < m->chunk_count, GT_E_ARG, "chunk %u out of range (%u chunks)", index,
              m->chunk_count);
    gt_reader r = gt_reader_init(hdr, len);
    uint8_t magic[8] = {0}, id[GT_DATASET_ID_BYTES] = {0};
    uint32_t idx = 0, count = 0;
    uint64_t pt_len = 0;
    GT_TRY(gt_err_wrap(gt_reader_bytes(&r, magic, sizeof magic), "chunk %u header", index));
    GT_TRY(gt_err_wrap(gt_reader_bytes(&r, id, sizeof id), "chunk %u header", index));
    GT_TRY(gt_err_wrap(gt_reader_u32le(&r, &idx), "chunk %u header", index));
    GT_TRY(gt_err_wrap(gt_reader_u32le(&r, &count), "chunk %u header", index));
    GT_TRY(gt_err_wrap(gt_reader_u64le(&r, &pt_len), "chunk %u header", index));
    const char *want_magic = m->segment_bytes ? GT_CHUNK_V2_MAGIC : GT_CHUNK_MAGIC;
    if (memcmp(magic, want_magic, 8) != 0) {
        const char *other = m->segment_bytes ? GT_CHUNK_MAGIC : GT_CHUNK_V2_MAGIC;
        GT_ENSURE(memcmp(magic, other, 8) != 0, GT_E_FORMAT,
                  "chunk %u: a %.8s file in a dataset of %.8s chunks", index, other, want_magic);
        return gt_errf(GT_E_FORMAT, "chunk %u: not a chunk file (bad magic)", index);
    }
    if (memcmp(id, m->dataset_id, sizeof id) != 0) {
        char theirs[2 * GT_DATASET_ID_BYTES + 1], ours[2 * GT_DATASET_ID_BYTES + 1];
        gt_hex_encode(theirs, sizeof theirs, id, sizeof id);
        gt_hex_encode(ours, sizeof ours, m->dataset_id, sizeof m->dataset_id);
        return gt_errf(GT_E_AUTH, "chunk %u belongs to another dataset (%s, not %s)", index,
                       theirs, ours);
    }
    GT_ENSURE(idx == index, GT_E_AUTH,
              "chunk file %u holds chunk %u of this dataset: chunks swapped or renamed", index, idx);
    GT_ENSURE(count == m->chunk_count && pt_len == m->chunks[index].plaintext_len, GT_E_AUTH,
              "chunk %u: header says %u chunks and %llu bytes, the manifest %u and %llu", index,
              count, (unsigned long long)pt_len, m->chunk_count,
              (unsigned long long)m->chunks[index].plaintext_len);
    return GT_OK;
}

gt_err gt_chunk_open(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *file,
                     size_t file_len, const gt_manifest *m, uint32_t index,
                     const uint8_t chunk_key[GT_AEAD_KEY_BYTES])
{
    return gt_chunk_open_threads(pt, pt_cap, pt_len, file, file_len, m, index, chunk_key, 1);
}

gt_err gt_chunk_open_threads(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *file,
                             size_t file_len, const gt_manifest *m, uint32_t index,
                             const uint8_t chunk_key[GT_AEAD_KEY_BYTES], int threads)
{
    *pt_len = 0;
    GT_ENSURE(index < m->chunk_count, GT_E_ARG, "chunk %u out of range (%u chunks)", index,
              m->chunk_count);
    uint64_t want = gt_manifest_chunk_file_bytes(m, index);
    GT_ENSURE(file_len == want, file_len < want ? GT_E_TRUNCATED : GT_E_FORMAT,
              "chunk %u has %zu bytes, the manifest says %llu", index, file_len,
              (unsigned long long)want);
    const uint64_t n = m->chunks[index].plaintext_len;
    if (pt_cap < n) {
        gt_secure_zero(pt, pt_cap);
        return gt_errf(GT_E_LIMIT, "chunk %u: %llu bytes do not fit in %zu", index,
                       (unsigned long long)n, pt_cap);
    }
    GT_TRY(gt_chunk_header_check(file, file_len, m, index));
    uint8_t aad[GT_CHUNK_AAD_BYTES];
    GT_TRY(gt_chunk_aad_build(aad, m, index));
    gt_err err = gt_chunk_body_open(pt, file + GT_CHUNK_HEADER_BYTES,
                                    file_len - GT_CHUNK_HEADER_BYTES, n, m->segment_bytes,
                                    threads, m->chunks[index].iv, aad, chunk_key);
    if (err.code == GT_E_AUTH) {
        return gt_errf(GT_E_AUTH, "chunk %u is altered: authentication failed", index);
    }
    GT_TRY(err);
    *pt_len = (size_t)n;
    return GT_OK;
}
