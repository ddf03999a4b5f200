// gputravel/data.h: llm.c token shards and tokenizers, the plain data an llm.c user brings.
// The sealed formats built on them are seal.h.
//
// Trusts: nothing read from disk; shard headers and tokenizer files go through gt_reader and are
// checked against the file sizes before any token is used.
#ifndef GPUTRAVEL_DATA_H
#define GPUTRAVEL_DATA_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// ---- llm.c token shards ---------------------------------------------------------------------
// Header: 256 little-endian int32: [0] magic 20240520, [1] version 1, [2] token count; then
// count uint16 little-endian tokens. The file is exactly 1024 + 2 * count bytes.
#define GT_SHARD_MAGIC 20240520
#define GT_SHARD_VERSION 1
// Named when seen, never read: llm.c's llama-3 shards (same magic, version 7, uint32 tokens) and
// its evaluation files (dev/data/hellaswag.py, mmlu.py: magic 20240522).
#define GT_SHARD_VERSION_LLAMA3 7
#define GT_SHARD_EVAL_MAGIC 20240522
#define GT_SHARD_HEADER_INTS 256
#define GT_SHARD_HEADER_BYTES (GT_SHARD_HEADER_INTS * 4)

// Parses a shard header (exactly GT_SHARD_HEADER_BYTES).
GT_MUST_USE gt_err gt_shard_header_parse(const uint8_t *hdr, size_t len, uint64_t *token_count);
void gt_shard_header_build(uint8_t hdr[GT_SHARD_HEADER_BYTES], uint64_t token_count);

// Streaming reader: validates header and file length on open, then reads tokens in pieces.
typedef struct {
    FILE *fp;
    uint64_t token_count;
    uint64_t tokens_read;
    char path[4096];
} gt_shard_reader;
GT_MUST_USE gt_err gt_shard_reader_open(gt_shard_reader *r, const char *path);
// Reads up to max tokens into out (host order); *n = 0 at the end.
GT_MUST_USE gt_err gt_shard_reader_read(gt_shard_reader *r, uint16_t *out, size_t max, size_t *n);
void gt_shard_reader_close(gt_shard_reader *r);

// Reads a whole shard into memory (caller frees *tokens with free()).
GT_MUST_USE gt_err gt_shard_read_all(const char *path, uint16_t **tokens, size_t *count);

// Streaming writer: appears under its name only on commit (atomic), with the final count.
typedef struct {
    gt_atomic_file file;
    uint64_t token_count;
} gt_shard_writer;
GT_MUST_USE gt_err gt_shard_writer_open(gt_shard_writer *w, const char *path);
GT_MUST_USE gt_err gt_shard_writer_append(gt_shard_writer *w, const uint16_t *tokens, size_t n);
GT_MUST_USE gt_err gt_shard_writer_commit(gt_shard_writer *w);
void gt_shard_writer_abort(gt_shard_writer *w);
GT_MUST_USE gt_err gt_shard_write(const char *path, const uint16_t *tokens, size_t count);

// ---- tokenizers -----------------------------------------------------------------------------
// The byte-level tokenizer (vocab 256, token = byte value) encodes and decodes. An llm.c GPT-2
// tokenizer file (gpt2_tokenizer.bin: 256 x uint32 header, magic 20240328, version 1 or 2,
// vocab size, [v2] end-of-text token; then per token a uint8 length and that many bytes)
// decodes, and encodes through gt_bpe below (its ids are GPT-2's merge ranks).
#define GT_TOKENIZER_MAGIC 20240328
#define GT_BYTE_VOCAB 256

typedef struct gt_tokenizer gt_tokenizer;  // opaque; gt_tokenizer_free
GT_MUST_USE gt_err gt_tokenizer_byte_new(gt_tokenizer **t);
// Parses an llm.c tokenizer file held in memory (untrusted bytes).
GT_MUST_USE gt_err gt_tokenizer_parse(gt_tokenizer **t, const uint8_t *data, size_t len);
GT_MUST_USE gt_err gt_tokenizer_load(gt_tokenizer **t, const char *path);
void gt_tokenizer_free(gt_tokenizer *t);
uint32_t gt_tokenizer_vocab_size(const gt_tokenizer *t);
// End-of-text token, or -1 when the tokenizer has none (byte-level).
int32_t gt_tokenizer_eot(const gt_tokenizer *t);
// A tokenizer from token byte strings in id order (each 1..255 bytes); eot < n, or -1 for none.
GT_MUST_USE gt_err gt_tokenizer_from_tokens(gt_tokenizer **t, const gt_span *tokens, uint32_t n,
                                            int32_t eot);
// llm.c's tokenizer file (version 2, which has the end-of-text field; version 1 when t has no
// end-of-text token) into *out (caller frees with gt_buf_free_nowipe), or atomically to path.
GT_MUST_USE gt_err gt_tokenizer_serialize(const gt_tokenizer *t, gt_buf *out);
GT_MUST_USE gt_err gt_tokenizer_write(const gt_tokenizer *t, const char *path, unsigned mode);
// The bytes of one token (borrowed from t). GT_E_ARG for a token outside the vocabulary.
GT_MUST_USE gt_err gt_tokenizer_decode(const gt_tokenizer *t, uint32_t token, gt_span *piece);
// Byte-level encoding: out[i] = text[i]; out holds len tokens.
void gt_tokenize_bytes(uint16_t *out, const uint8_t *text, size_t len);

// ---- GPT-2 byte-level BPE -------------------------------------------------------------------
// Encodes text as tiktoken's `gpt2` encoding does with encode_ordinary: the GPT-2 pattern cuts
// the text into pieces (\s as Unicode White_Space, \p{L} and \p{N} from PCRE2's Unicode tables),
// then each piece's bytes merge pairwise, lowest rank first, where a token's rank is its id in
// the tokenizer file (true for GPT-2's gpt2_tokenizer.bin). The end-of-text token is never
// produced from text. Bytes that are not UTF-8 (tiktoken takes only text) form pieces of their
// own and keep their bytes, so decoding always gives back the input.
// A gt_bpe holds a piece cache of fixed size: one thread at a time.
typedef struct gt_bpe gt_bpe;  // opaque; gt_bpe_free
// t must hold a token for each of the 256 bytes (GT_E_FORMAT otherwise); t is copied, the caller
// may free it afterwards.
GT_MUST_USE gt_err gt_bpe_new(gt_bpe **b, const gt_tokenizer *t);
void gt_bpe_free(gt_bpe *b);

// Growable token list (caller frees with gt_token_buf_free; zero-initialise before first use).
typedef struct {
    uint32_t *data;
    size_t len;
    size_t cap;
} gt_token_buf;
GT_MUST_USE gt_err gt_token_buf_push(gt_token_buf *tb, uint32_t token);
void gt_token_buf_free(gt_token_buf *tb);

// Appends the tokens of text[0..len) to out. final false: more text follows, so pieces that the
// following text could still change (those ending near len) are left: *used is how many bytes
// were encoded, and the caller passes text[*used..len) again with what follows. final true:
// *used = len. Memory beyond the fixed cache grows only with the longest piece.
GT_MUST_USE gt_err gt_bpe_encode(gt_bpe *b, const uint8_t *text, size_t len, bool final,
                                 gt_token_buf *out, size_t *used);
// The merge step alone, for one piece as the pattern cut it.
GT_MUST_USE gt_err gt_bpe_encode_piece(gt_bpe *b, const uint8_t *piece, size_t len,
                                       gt_token_buf *out);
// Bytes so far that were not UTF-8.
uint64_t gt_bpe_invalid_utf8_bytes(const gt_bpe *b);

#endif
