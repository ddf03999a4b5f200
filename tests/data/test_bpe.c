// data/: GPT-2 BPE against known answers from tiktoken, offline: the committed GPT-2 subset
// (gpt2_fixture.h) and js-tiktoken's tokens for tests/testdata/gpt2/sample.txt.
#include "testlib.h"

#include "gpt2_fixture.h"

#include <gputravel/data.h>

#include <stdlib.h>

static gt_bpe *subset_bpe(void)
{
    gt_tokenizer *t = gt_test_gpt2_subset();
    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, t));
    gt_tokenizer_free(t);  // gt_bpe keeps its own copy
    return b;
}

static void encode_all(gt_bpe *b, const void *text, size_t len, gt_token_buf *out)
{
    size_t used = 0;
    GT_ASSERT_OK(gt_bpe_encode(b, text, len, true, out, &used));
    assert_int_equal(used, len);
}

static void known_answers(void **state)
{
    (void)state;
    gt_bpe *b = subset_bpe();
    gt_token_buf out = {0};
    encode_all(b, "hello world", 11, &out);
    assert_int_equal(out.len, 2);
    assert_int_equal(out.data[0], 31373);
    assert_int_equal(out.data[1], 995);
    out.len = 0;
    encode_all(b, " Hello, world!", 14, &out);
    const uint32_t want[] = {18435, 11, 995, 0};
    assert_int_equal(out.len, 4);
    assert_memory_equal(out.data, want, sizeof want);
    out.len = 0;
    encode_all(b, "", 0, &out);
    assert_int_equal(out.len, 0);
    gt_token_buf_free(&out);
    gt_bpe_free(b);
}

// js-tiktoken's gpt2 tokens for the sample (contractions, digits, whitespace runs, CRLF, accents,
// CJK, emoji with joiners, no-break and ideographic spaces, long runs through the heap merge).
static void sample_equals_tiktoken(void **state)
{
    (void)state;
    gt_bpe *b = subset_bpe();
    gt_buf text = {0};
    gt_test_read_data("gpt2/sample.txt", &text);
    uint32_t *want = NULL;
    size_t nwant = 0;
    gt_test_read_token_lines("gpt2/sample.tokens", &want, &nwant);
    gt_token_buf out = {0};
    encode_all(b, text.data, text.len, &out);
    for (size_t i = 0; i < out.len && i < nwant; i++) {
        if (out.data[i] != want[i]) {
            fail_msg("token %zu: %u, tiktoken %u", i, out.data[i], want[i]);
        }
    }
    assert_int_equal(out.len, nwant);
    assert_int_equal(gt_bpe_invalid_utf8_bytes(b), 0);
    free(want);
    gt_token_buf_free(&out);
    gt_buf_free_nowipe(&text);
    gt_bpe_free(b);
}

// Fed in pieces of every size from 1 to 40 bytes (cutting characters and contractions apart),
// the stream gives the tokens of one call.
static void streaming_equals_one_call(void **state)
{
    (void)state;
    gt_bpe *b = subset_bpe();
    gt_buf text = {0};
    gt_test_read_data("gpt2/sample.txt", &text);
    gt_token_buf whole = {0};
    encode_all(b, text.data, text.len, &whole);
    for (size_t step = 1; step <= 40; step++) {
        gt_token_buf out = {0};
        uint8_t *win = malloc(text.len);
        size_t have = 0, fed = 0;  // win[0..have): text not yet encoded
        while (fed < text.len || have > 0) {
            size_t take = step < text.len - fed ? step : text.len - fed;
            memcpy(win + have, text.data + fed, take);
            have += take;
            fed += take;
            size_t used = 0;
            bool final = fed == text.len;
            GT_ASSERT_OK(gt_bpe_encode(b, win, have, final, &out, &used));
            memmove(win, win + used, have - used);
            have -= used;
            if (final) {
                assert_int_equal(have, 0);
            }
        }
        assert_int_equal(out.len, whole.len);
        assert_memory_equal(out.data, whole.data, whole.len * sizeof *out.data);
        free(win);
        gt_token_buf_free(&out);
    }
    gt_token_buf_free(&whole);
    gt_buf_free_nowipe(&text);
    gt_bpe_free(b);
}

static void decode_to(const gt_tokenizer *t, const gt_token_buf *tokens, gt_buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < tokens->len; i++) {
        gt_span p = {0};
        GT_ASSERT_OK(gt_tokenizer_decode(t, tokens->data[i], &p));
        GT_ASSERT_OK(gt_buf_append(out, p.data, p.len));
    }
}

// Bytes that are not UTF-8 are kept: decode(encode(x)) = x, and the end-of-text token is never
// produced from text, not even from "<|endoftext|>" itself.
static void decode_encode_identity(void **state)
{
    (void)state;
    gt_tokenizer *t = gt_test_gpt2_subset();
    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, t));
    static const char *const texts[] = {
        "caf\xc3\xa9 \xc3 broken \xe6\x97 half \xf0\x9f\x99 emoji",
        "\x80\x80 lone continuation, \xc0\xaf overlong, \xed\xa0\x80 surrogate",
        "<|endoftext|> is text here",
        "\xc3",
    };
    gt_token_buf out = {0};
    gt_buf back = {0};
    uint64_t invalid = 0;
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        size_t n = strlen(texts[i]);
        out.len = 0;
        encode_all(b, texts[i], n, &out);
        decode_to(t, &out, &back);
        assert_int_equal(back.len, n);
        assert_memory_equal(back.data, texts[i], n);
        for (size_t k = 0; k < out.len; k++) {
            assert_int_not_equal(out.data[k], GT_GPT2_EOT);
        }
        assert_true(gt_bpe_invalid_utf8_bytes(b) > invalid || i == 2);
        invalid = gt_bpe_invalid_utf8_bytes(b);
    }
    gt_buf_free_nowipe(&back);
    gt_token_buf_free(&out);
    gt_bpe_free(b);
    gt_tokenizer_free(t);
}

// An independent reference merge: repeatedly join the adjacent pair whose concatenation has the
// lowest id, by linear search over the subset's real tokens (no hash map, no heap).
typedef struct {
    const gt_tokenizer *t;
    uint32_t ids[GT_GPT2_VOCAB];
    size_t n;
} slow_vocab;

static void slow_vocab_init(slow_vocab *v, const gt_tokenizer *t)
{
    v->t = t;
    v->n = 0;
    for (uint32_t i = 0; i < GT_GPT2_EOT; i++) {
        gt_span s = {0};
        GT_ASSERT_OK(gt_tokenizer_decode(t, i, &s));
        if (!(s.len == 2 && s.data[0] == 0xff && s.data[1] == 0xfe)) {
            v->ids[v->n++] = i;
        }
    }
}

static uint32_t slow_rank(const slow_vocab *v, const uint8_t *p, size_t n)
{
    for (size_t k = 0; k < v->n; k++) {
        gt_span s = {0};
        GT_ASSERT_OK(gt_tokenizer_decode(v->t, v->ids[k], &s));
        if (s.len == n && memcmp(s.data, p, n) == 0) {
            return v->ids[k];
        }
    }
    return UINT32_MAX;
}

static size_t slow_merge(const slow_vocab *t, const uint8_t *p, size_t n, uint32_t *out)
{
    size_t cut[512];  // part i is p[cut[i] .. cut[i+1])
    size_t parts = n;
    for (size_t i = 0; i <= n; i++) {
        cut[i] = i;
    }
    for (;;) {
        uint32_t best = UINT32_MAX;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts; i++) {
            uint32_t r = slow_rank(t, p + cut[i], cut[i + 2] - cut[i]);
            if (r < best) {
                best = r;
                at = i;
            }
        }
        if (best == UINT32_MAX) {
            break;
        }
        memmove(cut + at + 1, cut + at + 2, (parts - at - 1) * sizeof *cut);
        parts--;
    }
    for (size_t i = 0; i < parts; i++) {
        out[i] = slow_rank(t, p + cut[i], cut[i + 1] - cut[i]);
    }
    return parts;
}

// Pieces of 2 to 200 bytes made of the sample's words glued together: both merge paths (the
// scan up to 64 bytes, the heap above) agree with the reference.
static void merge_paths_match_reference(void **state)
{
    (void)state;
    gt_tokenizer *t = gt_test_gpt2_subset();
    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, t));
    static const char *const words[] = {"hello", "world", "aaaa", "---", "Pneum", "ono",
                                        "ultra", "ism", "anti", "z", "\xc3\xa9", "the"};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    slow_vocab *v = malloc(sizeof *v);
    assert_non_null(v);
    slow_vocab_init(v, t);
    gt_token_buf got = {0};
    uint32_t want[512];
    for (int round = 0; round < 50; round++) {
        uint8_t piece[320];
        size_t n = 0, target = 2 + (size_t)(round * 7 % 199);
        while (n < target) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            const char *w = words[(rng >> 33) % (sizeof words / sizeof *words)];
            size_t k = strlen(w) < target - n ? strlen(w) : target - n;
            memcpy(piece + n, w, k);
            n += k;
        }
        got.len = 0;
        GT_ASSERT_OK(gt_bpe_encode_piece(b, piece, n, &got));
        size_t nwant = slow_merge(v, piece, n, want);
        assert_int_equal(got.len, nwant);
        assert_memory_equal(got.data, want, nwant * sizeof *want);
        if (round % 2 == 0) {  // again, now from the cache where it fits
            got.len = 0;
            GT_ASSERT_OK(gt_bpe_encode_piece(b, piece, n, &got));
            assert_int_equal(got.len, nwant);
            assert_memory_equal(got.data, want, nwant * sizeof *want);
        }
    }
    free(v);
    gt_token_buf_free(&got);
    gt_bpe_free(b);
    gt_tokenizer_free(t);
}

static void needs_every_byte(void **state)
{
    (void)state;
    gt_span toks[255];
    uint8_t bytes[255];
    for (int i = 0; i < 255; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = (gt_span){bytes + i, 1};
    }
    gt_tokenizer *t = NULL;
    GT_ASSERT_OK(gt_tokenizer_from_tokens(&t, toks, 255, -1));  // no 0xff
    gt_bpe *b = NULL;
    GT_ASSERT_ERR(gt_bpe_new(&b, t), GT_E_FORMAT, "0xff");
    assert_null(b);
    gt_tokenizer_free(t);
    GT_ASSERT_OK(gt_tokenizer_byte_new(&t));  // bytes only: BPE is then byte-level
    GT_ASSERT_OK(gt_bpe_new(&b, t));
    gt_token_buf out = {0};
    encode_all(b, "hi there", 8, &out);
    assert_int_equal(out.len, 8);
    assert_int_equal(out.data[2], ' ');
    gt_token_buf_free(&out);
    gt_bpe_free(b);
    gt_tokenizer_free(t);
}

// The tokenizer file writer: what it writes parses back to the same tokens, and is llm.c's
// layout (magic, version 2, vocab, eot, then length-prefixed tokens).
static void tokenizer_file_round_trip(void **state)
{
    (void)state;
    gt_tokenizer *t = gt_test_gpt2_subset();
    gt_buf file = {0};
    GT_ASSERT_OK(gt_tokenizer_serialize(t, &file));
    gt_reader r = gt_reader_init(file.data, file.len);
    uint32_t magic = 0, version = 0, vocab = 0, eot = 0;
    GT_ASSERT_OK(gt_reader_u32le(&r, &magic));
    GT_ASSERT_OK(gt_reader_u32le(&r, &version));
    GT_ASSERT_OK(gt_reader_u32le(&r, &vocab));
    GT_ASSERT_OK(gt_reader_u32le(&r, &eot));
    assert_int_equal(magic, 20240328);
    assert_int_equal(version, 2);
    assert_int_equal(vocab, GT_GPT2_VOCAB);
    assert_int_equal(eot, GT_GPT2_EOT);
    assert_int_equal(file.data[1024], 1);  // token 0 is "!": one byte
    assert_int_equal(file.data[1025], '!');
    gt_tokenizer *back = NULL;
    GT_ASSERT_OK(gt_tokenizer_parse(&back, file.data, file.len));
    for (uint32_t i = 0; i < GT_GPT2_VOCAB; i++) {
        gt_span a = {0}, c = {0};
        GT_ASSERT_OK(gt_tokenizer_decode(t, i, &a));
        GT_ASSERT_OK(gt_tokenizer_decode(back, i, &c));
        assert_int_equal(a.len, c.len);
        assert_memory_equal(a.data, c.data, a.len);
    }
    assert_int_equal(gt_tokenizer_eot(back), GT_GPT2_EOT);
    gt_span empty = {(const uint8_t *)"", 0};
    gt_tokenizer *bad = NULL;
    GT_ASSERT_CODE(gt_tokenizer_from_tokens(&bad, &empty, 1, -1), GT_E_ARG);
    gt_tokenizer_free(back);
    gt_buf_free_nowipe(&file);
    gt_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_answers),
        cmocka_unit_test(sample_equals_tiktoken),
        cmocka_unit_test(streaming_equals_one_call),
        cmocka_unit_test(decode_encode_identity),
        cmocka_unit_test(merge_paths_match_reference),
        cmocka_unit_test(needs_every_byte),
        cmocka_unit_test(tokenizer_file_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
