// llm.c token shards (dev/data/data_common.py's format): 256 x int32 header, uint16 tokens.
#include <gputravel/data.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

gt_err gt_shard_header_parse(const uint8_t *hdr, size_t len, uint64_t *token_count)
{
    gt_reader r = gt_reader_init(hdr, len);
    int32_t magic = 0, version = 0, count = 0;
    GT_TRY(gt_reader_i32le(&r, &magic));
    GT_TRY(gt_reader_i32le(&r, &version));
    GT_TRY(gt_reader_i32le(&r, &count));
    GT_TRY(gt_reader_skip(&r, GT_SHARD_HEADER_BYTES - 12));
    // Other llm.c files are named, so that a file given in the wrong place says what it is.
    GT_ENSURE(magic != GT_SHARD_EVAL_MAGIC, GT_E_FORMAT,
              "shard: bad magic %d: an llm.c evaluation file (HellaSwag/MMLU examples), not "
              "training tokens",
              magic);
    GT_ENSURE(magic != 20240326, GT_E_FORMAT, "shard: bad magic %d: an llm.c model checkpoint",
              magic);
    GT_ENSURE(magic != GT_TOKENIZER_MAGIC, GT_E_FORMAT,
              "shard: bad magic %d: an llm.c tokenizer file", magic);
    GT_ENSURE(magic == GT_SHARD_MAGIC, GT_E_FORMAT, "shard: bad magic %d (expected %d)", magic,
              GT_SHARD_MAGIC);
    GT_ENSURE(version != GT_SHARD_VERSION_LLAMA3, GT_E_UNSUPPORTED,
              "shard: version %d: llm.c's llama-3 shard (uint32 tokens); gputravel trains GPT-2 "
              "shards (version %d, uint16)",
              version, GT_SHARD_VERSION);
    GT_ENSURE(version == GT_SHARD_VERSION, GT_E_UNSUPPORTED,
              "shard: version %d (expected %d: uint16 tokens)", version, GT_SHARD_VERSION);
    GT_ENSURE(count >= 0, GT_E_FORMAT, "shard: negative token count %d", count);
    *token_count = (uint64_t)count;
    return GT_OK;
}

void gt_shard_header_build(uint8_t hdr[GT_SHARD_HEADER_BYTES], uint64_t token_count)
{
    memset(hdr, 0, GT_SHARD_HEADER_BYTES);
    gt_store_u32le(hdr, GT_SHARD_MAGIC);
    gt_store_u32le(hdr + 4, GT_SHARD_VERSION);
    gt_store_u32le(hdr + 8, (uint32_t)token_count);
}

gt_err gt_shard_reader_open(gt_shard_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    GT_ENSURE(strlen(path) < sizeof r->path, GT_E_LIMIT, "path too long: %s", path);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->fp = fopen(path, "rb");
    GT_ENSURE(r->fp != NULL, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "%s: %s", path,
              strerror(errno));
    gt_err err = GT_OK;
    uint8_t hdr[GT_SHARD_HEADER_BYTES];
    struct stat st;
    GT_ENSURE_GOTO(err, fstat(fileno(r->fp), &st) == 0, fail, GT_E_IO, "%s: %s", path,
                   strerror(errno));
    size_t got = fread(hdr, 1, sizeof hdr, r->fp);
    GT_TRY_GOTO(err, gt_shard_header_parse(hdr, got, &r->token_count), fail);
    uint64_t want = GT_SHARD_HEADER_BYTES + 2 * r->token_count;
    GT_ENSURE_GOTO(err, (uint64_t)st.st_size == want, fail, GT_E_FORMAT,
                   "shard: %s: header says %llu tokens (%llu bytes) but the file has %llu bytes",
                   (uint64_t)st.st_size < want ? "file ends early" : "trailing bytes",
                   (unsigned long long)r->token_count, (unsigned long long)want,
                   (unsigned long long)st.st_size);
    return GT_OK;
fail:
    gt_shard_reader_close(r);
    return gt_err_wrap(err, "%s", path);
}

gt_err gt_shard_reader_read(gt_shard_reader *r, uint16_t *out, size_t max, size_t *n)
{
    *n = 0;
    uint64_t left = r->token_count - r->tokens_read;
    size_t want = left < max ? (size_t)left : max;
    if (want == 0) {
        return GT_OK;
    }
    size_t got = fread(out, 2, want, r->fp);
    GT_ENSURE(got == want, GT_E_TRUNCATED, "%s: shard ends early at token %llu", r->path,
              (unsigned long long)(r->tokens_read + got));
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    for (size_t i = 0; i < got; i++) {
        out[i] = (uint16_t)((out[i] >> 8) | (out[i] << 8));
    }
#endif
    r->tokens_read += got;
    *n = got;
    return GT_OK;
}

void gt_shard_reader_close(gt_shard_reader *r)
{
    if (r->fp != NULL) {
        fclose(r->fp);
        r->fp = NULL;
    }
}

gt_err gt_shard_read_all(const char *path, uint16_t **tokens, size_t *count)
{
    *tokens = NULL;
    *count = 0;
    gt_shard_reader r;
    GT_TRY(gt_shard_reader_open(&r, path));
    gt_err err = GT_OK;
    size_t n = (size_t)r.token_count;
    uint16_t *t = malloc(n ? n * sizeof *t : 1);
    GT_ENSURE_GOTO(err, t != NULL, out, GT_E_NOMEM, "%s: cannot allocate %zu tokens", path, n);
    size_t got = 0;
    GT_TRY_GOTO(err, gt_shard_reader_read(&r, t, n, &got), out);
    *tokens = t;
    *count = got;
    t = NULL;
out:
    free(t);
    gt_shard_reader_close(&r);
    return err;
}

gt_err gt_shard_writer_open(gt_shard_writer *w, const char *path)
{
    memset(w, 0, sizeof *w);
    GT_TRY(gt_atomic_file_open(&w->file, path, 0600));  // a holder's plaintext data
    uint8_t hdr[GT_SHARD_HEADER_BYTES];
    gt_shard_header_build(hdr, 0);  // rewritten with the real count on commit
    gt_err err = gt_atomic_file_write(&w->file, hdr, sizeof hdr);
    if (err.code != GT_E_NONE) {
        gt_atomic_file_abort(&w->file);
    }
    return err;
}

gt_err gt_shard_writer_append(gt_shard_writer *w, const uint16_t *tokens, size_t n)
{
    GT_ENSURE(n <= (uint64_t)INT32_MAX - w->token_count, GT_E_LIMIT,
              "shard: more than %d tokens do not fit an llm.c header", INT32_MAX);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shard writer assumes a little-endian host"
#endif
    GT_TRY(gt_atomic_file_write(&w->file, tokens, n * 2));
    w->token_count += n;
    return GT_OK;
}

gt_err gt_shard_writer_commit(gt_shard_writer *w)
{
    uint8_t hdr[GT_SHARD_HEADER_BYTES];
    gt_shard_header_build(hdr, w->token_count);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, fflush(w->file.fp) == 0 && fseek(w->file.fp, 0, SEEK_SET) == 0, fail,
                   GT_E_IO, "%s: %s", w->file.path, strerror(errno));
    GT_TRY_GOTO(err, gt_atomic_file_write(&w->file, hdr, sizeof hdr), fail);
    return gt_atomic_file_commit(&w->file);
fail:
    gt_atomic_file_abort(&w->file);
    return err;
}

void gt_shard_writer_abort(gt_shard_writer *w)
{
    gt_atomic_file_abort(&w->file);
}

gt_err gt_shard_write(const char *path, const uint16_t *tokens, size_t count)
{
    gt_shard_writer w;
    GT_TRY(gt_shard_writer_open(&w, path));
    gt_err err = gt_shard_writer_append(&w, tokens, count);
    if (err.code != GT_E_NONE) {
        gt_shard_writer_abort(&w);
        return err;
    }
    return gt_shard_writer_commit(&w);
}
