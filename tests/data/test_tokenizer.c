// data/: byte-level tokenizer and llm.c tokenizer files, well-formed and malformed.
#include "testlib.h"

#include <gputravel/data.h>

#include <string.h>

// Builds an llm.c tokenizer file: header then (len, bytes) per token.
static void build_file(gt_writer *w, uint32_t version, const char *const *tokens, uint32_t n,
                       uint32_t eot)
{
    *w = gt_writer_init_dynamic();
    uint8_t hdr[1024] = {0};
    gt_store_u32le(hdr, GT_TOKENIZER_MAGIC);
    gt_store_u32le(hdr + 4, version);
    gt_store_u32le(hdr + 8, n);
    gt_store_u32le(hdr + 12, eot);
    GT_ASSERT_OK(gt_writer_bytes(w, hdr, sizeof hdr));
    for (uint32_t i = 0; i < n; i++) {
        GT_ASSERT_OK(gt_writer_u8(w, (uint8_t)strlen(tokens[i])));
        GT_ASSERT_OK(gt_writer_bytes(w, tokens[i], strlen(tokens[i])));
    }
}

static void byte_tokenizer_round_trip(void **state)
{
    (void)state;
    gt_tokenizer *t = NULL;
    GT_ASSERT_OK(gt_tokenizer_byte_new(&t));
    assert_int_equal(gt_tokenizer_vocab_size(t), 256);
    assert_int_equal(gt_tokenizer_eot(t), -1);
    const uint8_t text[] = "h\xc3\xa9llo\n";
    uint16_t tokens[sizeof text];
    gt_tokenize_bytes(tokens, text, sizeof text - 1);
    assert_int_equal(tokens[1], 0xc3);
    for (size_t i = 0; i < sizeof text - 1; i++) {
        gt_span piece = {0};
        GT_ASSERT_OK(gt_tokenizer_decode(t, tokens[i], &piece));
        assert_int_equal(piece.len, 1);
        assert_int_equal(piece.data[0], text[i]);
    }
    gt_span piece = {0};
    GT_ASSERT_CODE(gt_tokenizer_decode(t, 256, &piece), GT_E_ARG);
    gt_tokenizer_free(t);
}

static void llmc_file_versions(void **state)
{
    (void)state;
    const char *const toks[] = {"a", "bc", " the", "<|endoftext|>"};
    gt_writer w;
    build_file(&w, 2, toks, 4, 3);
    gt_tokenizer *t = NULL;
    GT_ASSERT_OK(gt_tokenizer_parse(&t, w.data, w.len));
    assert_int_equal(gt_tokenizer_vocab_size(t), 4);
    assert_int_equal(gt_tokenizer_eot(t), 3);
    gt_span p = {0};
    GT_ASSERT_OK(gt_tokenizer_decode(t, 2, &p));
    assert_int_equal(p.len, 4);
    assert_memory_equal(p.data, " the", 4);
    gt_tokenizer_free(t);
    gt_writer_free(&w);

    build_file(&w, 1, toks, 4, 0);  // v1: no end-of-text field; GPT-2's 50256 is outside
    GT_ASSERT_OK(gt_tokenizer_parse(&t, w.data, w.len));
    assert_int_equal(gt_tokenizer_eot(t), -1);
    gt_tokenizer_free(t);
    gt_writer_free(&w);
}

static void malformed_files_fail_cleanly(void **state)
{
    (void)state;
    const char *const toks[] = {"a", "bc", "def"};
    gt_writer w;
    build_file(&w, 2, toks, 3, 0);
    gt_tokenizer *t = NULL;
    // Every truncation is an error, never a crash, and leaves *t NULL.
    for (size_t len = 0; len < w.len; len++) {
        gt_err e = gt_tokenizer_parse(&t, w.data, len);
        assert_int_not_equal(e.code, GT_E_NONE);
        assert_null(t);
    }
    w.data[0] ^= 1;
    GT_ASSERT_CODE(gt_tokenizer_parse(&t, w.data, w.len), GT_E_FORMAT);
    w.data[0] ^= 1;
    w.data[4] = 3;
    GT_ASSERT_CODE(gt_tokenizer_parse(&t, w.data, w.len), GT_E_UNSUPPORTED);
    w.data[4] = 2;
    w.data[12] = 7;  // end-of-text outside the vocabulary
    GT_ASSERT_CODE(gt_tokenizer_parse(&t, w.data, w.len), GT_E_FORMAT);
    w.data[12] = 0;
    w.data[1024] = 0;  // zero-length token
    GT_ASSERT_CODE(gt_tokenizer_parse(&t, w.data, w.len), GT_E_FORMAT);
    w.data[1024] = 1;
    gt_store_u32le(w.data + 8, 0xffffffffu);  // absurd vocabulary: refused before allocating
    gt_err e = gt_tokenizer_parse(&t, w.data, w.len);
    assert_int_not_equal(e.code, GT_E_NONE);
    gt_writer_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(byte_tokenizer_round_trip),
        cmocka_unit_test(llmc_file_versions),
        cmocka_unit_test(malformed_files_fail_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
