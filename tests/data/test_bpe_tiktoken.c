// data/: GPT-2 BPE token for token against tiktoken's JavaScript port (npm js-tiktoken, run by
// node) on the text Debian ships (fortunes, licence texts; a few MB) and on generated stress
// text; and decode(encode(document)) = document for each. Skipped (exit 77) when the GPT-2
// tokenizer or node is not there (scripts/gpt2_tokenizer.sh makes both available).
#include "testlib.h"

#include "gpt2_fixture.h"

#include <gputravel/data.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static gt_tokenizer *tok;
static char why[1200];

enum { MAX_DOCS = 256 };
typedef struct {
    char *paths[MAX_DOCS];
    size_t n;
} doc_list;

static void add_dir(doc_list *d, const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(dp)) != NULL && d->n < MAX_DOCS) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || (len > 4 && strcmp(e->d_name + len - 4, ".dat") == 0)) {
            continue;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
            d->paths[d->n++] = strdup(path);
        }
    }
    closedir(dp);
}

// Generated text that stresses the pattern and the merge: long runs (heap merge), mixed
// scripts, every kind of space the pattern knows, digits, contractions.
static void write_stress(const char *path)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    static const char *const bits[] = {
        "a", "aa", " the", "'ll", "'S", "'re", " 12", "345", "\xc3\xa9", "\xe6\x97\xa5",
        "\xf0\x9f\x99\x82", "\xe2\x80\x8d", " ", "  ", "\t", "\n", "\r\n", "\xc2\xa0",
        "\xe3\x80\x80", "\xe2\x80\xa8", "!!", "...", "-", "==", "\xd9\xa1", "x", "Zz", "\xe2\x80\xaf"};
    uint64_t rng = 42;
    for (int i = 0; i < 60000; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        const char *b = bits[(rng >> 33) % (sizeof bits / sizeof *bits)];
        int reps = (rng >> 20) % 97 == 0 ? 200 : 1;  // now and then a long run
        for (int r = 0; r < reps; r++) {
            fputs(b, f);
        }
    }
    assert_int_equal(fclose(f), 0);
}

static void equals_tiktoken_on_debian_text(void **state)
{
    (void)state;
    if (tok == NULL) {
        print_message("SKIPPED: %s\n", why);
        skip();
    }
    char dir[256], stress[512], ref[512], file[1024], npm[1024];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(stress, sizeof stress, dir, "stress.txt"));
    GT_ASSERT_OK(gt_path_join(ref, sizeof ref, dir, "ref.bin"));
    write_stress(stress);
    doc_list docs = {0};
    docs.paths[docs.n++] = strdup(stress);
    add_dir(&docs, "/usr/share/games/fortunes");
    add_dir(&docs, "/usr/share/common-licenses");
    gt_test_gpt2_paths(file, sizeof file, npm, sizeof npm);
    gt_buf cmd = {0};
    char head[3000];
    snprintf(head, sizeof head, "node '%s/scripts/tiktoken_ref.cjs' '%s' encode '%s'",
             GT_SOURCE_DIR, npm, ref);
    GT_ASSERT_OK(gt_buf_append(&cmd, head, strlen(head)));
    for (size_t i = 0; i < docs.n; i++) {
        GT_ASSERT_OK(gt_buf_append(&cmd, " '", 2));
        GT_ASSERT_OK(gt_buf_append(&cmd, docs.paths[i], strlen(docs.paths[i])));
        GT_ASSERT_OK(gt_buf_append(&cmd, "'", 1));
    }
    GT_ASSERT_OK(gt_buf_append(&cmd, "", 1));
    assert_int_equal(system((char *)cmd.data), 0);
    gt_buf refs = {0};
    GT_ASSERT_OK(gt_file_read_all(ref, 1u << 30, &refs));
    gt_reader r = gt_reader_init(refs.data, refs.len);

    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, tok));
    gt_token_buf out = {0};
    gt_buf back = {0};
    size_t total_bytes = 0, total_tokens = 0;
    for (size_t d = 0; d < docs.n; d++) {
        gt_buf text = {0};
        GT_ASSERT_OK(gt_file_read_all(docs.paths[d], 64u << 20, &text));
        out.len = 0;
        size_t used = 0;
        GT_ASSERT_OK(gt_bpe_encode(b, text.data, text.len, true, &out, &used));
        uint32_t n = 0;
        GT_ASSERT_OK(gt_reader_u32le(&r, &n));
        for (size_t i = 0; i < out.len && i < n; i++) {
            uint32_t want = 0;
            GT_ASSERT_OK(gt_reader_u32le(&r, &want));
            if (out.data[i] != want) {
                fail_msg("%s: token %zu is %u, tiktoken's %u", docs.paths[d], i, out.data[i],
                         want);
            }
        }
        if (out.len != n) {
            fail_msg("%s: %zu tokens, tiktoken %u", docs.paths[d], out.len, n);
        }
        back.len = 0;
        for (size_t i = 0; i < out.len; i++) {
            gt_span p = {0};
            GT_ASSERT_OK(gt_tokenizer_decode(tok, out.data[i], &p));
            GT_ASSERT_OK(gt_buf_append(&back, p.data, p.len));
        }
        assert_int_equal(back.len, text.len);
        assert_memory_equal(back.data, text.data, text.len);
        total_bytes += text.len;
        total_tokens += out.len;
        gt_buf_free_nowipe(&text);
        free(docs.paths[d]);
    }
    assert_int_equal(gt_reader_left(&r), 0);
    print_message("%zu documents, %zu bytes, %zu tokens: all equal to js-tiktoken\n", docs.n,
                  total_bytes, total_tokens);
    assert_true(total_bytes > (docs.n > 50 ? 2000000u : 1000u));
    gt_buf_free_nowipe(&back);
    gt_token_buf_free(&out);
    gt_bpe_free(b);
    gt_buf_free_nowipe(&refs);
    gt_buf_free_nowipe(&cmd);
    gt_test_rmtree(dir);
}

static void known_answers_full_vocab(void **state)
{
    (void)state;
    if (tok == NULL) {
        print_message("SKIPPED: %s\n", why);
        skip();
    }
    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, tok));
    gt_token_buf out = {0};
    size_t used = 0;
    GT_ASSERT_OK(gt_bpe_encode(b, (const uint8_t *)" Hello, world!", 14, true, &out, &used));
    const uint32_t want[] = {18435, 11, 995, 0};
    assert_int_equal(out.len, 4);
    assert_memory_equal(out.data, want, sizeof want);
    gt_token_buf_free(&out);
    gt_bpe_free(b);
}

int main(void)
{
    tok = gt_test_gpt2_full(why, sizeof why);
    if (tok != NULL && system("node --version >/dev/null 2>&1") != 0) {
        snprintf(why, sizeof why, "node is not installed (js-tiktoken runs in it)");
        gt_tokenizer_free(tok);
        tok = NULL;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_answers_full_vocab),
        cmocka_unit_test(equals_tiktoken_on_debian_text),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    bool skipped = tok == NULL;
    gt_tokenizer_free(tok);
    if (skipped) {
        printf("SKIPPED: %s\n", why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
