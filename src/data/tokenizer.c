// Tokenizers: byte-level (vocab 256) and llm.c's GPT-2 tokenizer file for decoding.
#include <gputravel/data.h>

#include <stdlib.h>
#include <string.h>

struct gt_tokenizer {
    uint32_t vocab_size;
    int32_t eot;
    uint8_t *bytes;     // every token's bytes, back to back
    uint32_t *offsets;  // token i is bytes[offsets[i] .. offsets[i+1])
};

void gt_tokenizer_free(gt_tokenizer *t)
{
    if (t == NULL) {
        return;
    }
    free(t->bytes);
    free(t->offsets);
    free(t);
}

static gt_err tokenizer_alloc(gt_tokenizer **out, uint32_t vocab, size_t byte_cap)
{
    gt_tokenizer *t = calloc(1, sizeof *t);
    GT_ENSURE(t != NULL, GT_E_NOMEM, "tokenizer: out of memory");
    t->vocab_size = vocab;
    t->offsets = calloc((size_t)vocab + 1, sizeof *t->offsets);
    t->bytes = malloc(byte_cap ? byte_cap : 1);
    if (t->offsets == NULL || t->bytes == NULL) {
        gt_tokenizer_free(t);
        return gt_errf(GT_E_NOMEM, "tokenizer: out of memory for %u tokens", vocab);
    }
    *out = t;
    return GT_OK;
}

gt_err gt_tokenizer_byte_new(gt_tokenizer **out)
{
    gt_tokenizer *t = NULL;
    GT_TRY(tokenizer_alloc(&t, GT_BYTE_VOCAB, GT_BYTE_VOCAB));
    for (uint32_t i = 0; i < GT_BYTE_VOCAB; i++) {
        t->bytes[i] = (uint8_t)i;
        t->offsets[i + 1] = i + 1;
    }
    t->eot = -1;
    *out = t;
    return GT_OK;
}

gt_err gt_tokenizer_parse(gt_tokenizer **out, const uint8_t *data, size_t len)
{
    *out = NULL;
    gt_reader r = gt_reader_init(data, len);
    uint32_t magic = 0, version = 0, vocab = 0, eot = 50256;
    GT_TRY(gt_reader_u32le(&r, &magic));
    GT_TRY(gt_reader_u32le(&r, &version));
    GT_TRY(gt_reader_u32le(&r, &vocab));
    GT_ENSURE(magic == GT_TOKENIZER_MAGIC, GT_E_FORMAT, "tokenizer: bad magic %u (expected %u)",
              magic, GT_TOKENIZER_MAGIC);
    GT_ENSURE(version == 1 || version == 2, GT_E_UNSUPPORTED,
              "tokenizer: version %u (expected 1 or 2)", version);
    if (version == 2) {
        GT_TRY(gt_reader_u32le(&r, &eot));
        GT_TRY(gt_reader_skip(&r, 256 * 4 - 16));
    } else {
        GT_TRY(gt_reader_skip(&r, 256 * 4 - 12));
    }
    GT_ENSURE(vocab > 0 && vocab <= 1u << 20, GT_E_FORMAT, "tokenizer: vocab size %u", vocab);
    // Version 1 files predate the end-of-text field; GPT-2's is 50256.
    GT_ENSURE(version == 1 || eot < vocab, GT_E_FORMAT,
              "tokenizer: end-of-text %u outside vocab %u", eot, vocab);
    // Each token needs at least its length byte, so the remaining bytes bound the vocabulary
    // before anything is allocated.
    GT_ENSURE(vocab <= gt_reader_left(&r), GT_E_TRUNCATED,
              "tokenizer: %u tokens cannot fit in %zu bytes", vocab, gt_reader_left(&r));
    gt_tokenizer *t = NULL;
    GT_TRY(tokenizer_alloc(&t, vocab, gt_reader_left(&r)));
    t->eot = eot < vocab ? (int32_t)eot : -1;
    gt_err err = GT_OK;
    uint32_t at = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        uint8_t n = 0;
        GT_TRY_GOTO(err, gt_reader_u8(&r, &n), fail);
        GT_ENSURE_GOTO(err, n > 0, fail, GT_E_FORMAT, "tokenizer: token %u has length 0", i);
        GT_TRY_GOTO(err, gt_reader_bytes(&r, t->bytes + at, n), fail);
        at += n;
        t->offsets[i + 1] = at;
    }
    *out = t;
    return GT_OK;
fail:
    gt_tokenizer_free(t);
    return gt_err_wrap(err, "tokenizer");
}

gt_err gt_tokenizer_load(gt_tokenizer **t, const char *path)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, 64u << 20, &b));
    gt_err err = gt_tokenizer_parse(t, b.data, b.len);
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", path);
}

gt_err gt_tokenizer_from_tokens(gt_tokenizer **out, const gt_span *tokens, uint32_t n,
                                int32_t eot)
{
    *out = NULL;
    GT_ENSURE(n > 0 && n <= 1u << 20, GT_E_ARG, "tokenizer: vocab size %u", n);
    GT_ENSURE(eot >= -1 && eot < (int64_t)n, GT_E_ARG, "tokenizer: end-of-text %d outside %u",
              eot, n);
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        GT_ENSURE(tokens[i].len >= 1 && tokens[i].len <= 255, GT_E_ARG,
                  "tokenizer: token %u has %zu bytes (an llm.c file holds 1 to 255)", i,
                  tokens[i].len);
        total += tokens[i].len;
    }
    GT_ENSURE(total <= UINT32_MAX, GT_E_LIMIT, "tokenizer: %zu token bytes", total);
    gt_tokenizer *t = NULL;
    GT_TRY(tokenizer_alloc(&t, n, total));
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(t->bytes + at, tokens[i].data, tokens[i].len);
        at += (uint32_t)tokens[i].len;
        t->offsets[i + 1] = at;
    }
    t->eot = eot;
    *out = t;
    return GT_OK;
}

gt_err gt_tokenizer_serialize(const gt_tokenizer *t, gt_buf *out)
{
    *out = (gt_buf){0};
    size_t total = 1024 + (size_t)t->vocab_size + t->offsets[t->vocab_size];
    GT_TRY(gt_buf_reserve(out, total));
    uint8_t hdr[1024] = {0};
    gt_store_u32le(hdr, GT_TOKENIZER_MAGIC);
    gt_store_u32le(hdr + 4, t->eot >= 0 ? 2 : 1);
    gt_store_u32le(hdr + 8, t->vocab_size);
    if (t->eot >= 0) {
        gt_store_u32le(hdr + 12, (uint32_t)t->eot);
    }
    memcpy(out->data, hdr, sizeof hdr);
    size_t at = sizeof hdr;
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        uint32_t n = t->offsets[i + 1] - t->offsets[i];
        out->data[at++] = (uint8_t)n;  // 1..255: parse and from_tokens both check
        memcpy(out->data + at, t->bytes + t->offsets[i], n);
        at += n;
    }
    out->len = at;
    return GT_OK;
}

gt_err gt_tokenizer_write(const gt_tokenizer *t, const char *path, unsigned mode)
{
    gt_buf b = {0};
    GT_TRY(gt_tokenizer_serialize(t, &b));
    gt_err err = gt_file_write_atomic(path, b.data, b.len, mode);
    gt_buf_free_nowipe(&b);
    return err;
}

uint32_t gt_tokenizer_vocab_size(const gt_tokenizer *t) { return t->vocab_size; }

int32_t gt_tokenizer_eot(const gt_tokenizer *t) { return t->eot; }

gt_err gt_tokenizer_decode(const gt_tokenizer *t, uint32_t token, gt_span *piece)
{
    GT_ENSURE(token < t->vocab_size, GT_E_ARG, "token %u outside the vocabulary (%u)", token,
              t->vocab_size);
    piece->data = t->bytes + t->offsets[token];
    piece->len = t->offsets[token + 1] - t->offsets[token];
    return GT_OK;
}

void gt_tokenize_bytes(uint16_t *out, const uint8_t *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        out[i] = text[i];
    }
}
