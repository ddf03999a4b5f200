// gputravel tokenize through the binary: output content, and no output on failure.
#include "testlib.h"

#include "gpt2_fixture.h"

#include <gputravel/data.h>

#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void tokenizes_files_in_order(void **state)
{
    (void)state;
    char dir[256], a[512], b[512], out[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(a, sizeof a, dir, "a.txt"));
    GT_ASSERT_OK(gt_path_join(b, sizeof b, dir, "b.txt"));
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "out.bin"));
    GT_ASSERT_OK(gt_file_write_atomic(a, "Hi ", 3, 0644));
    GT_ASSERT_OK(gt_file_write_atomic(b, "\xffthere", 6, 0644));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"tokenize", a, b, "--out", out, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "9 tokens"));
    gt_buf_free(&log);
    uint16_t *tokens = NULL;
    size_t n = 0;
    GT_ASSERT_OK(gt_shard_read_all(out, &tokens, &n));
    assert_int_equal(n, 9);
    const uint16_t want[] = {'H', 'i', ' ', 0xff, 't', 'h', 'e', 'r', 'e'};
    assert_memory_equal(tokens, want, sizeof want);
    free(tokens);
    gt_test_rmtree(dir);
}

static void failures_leave_no_output(void **state)
{
    (void)state;
    char dir[256], out[512], missing[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "out.bin"));
    GT_ASSERT_OK(gt_path_join(missing, sizeof missing, dir, "missing.txt"));
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"tokenize", missing, "--out", out, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "missing.txt"));
    gt_buf_free(&log);
    assert_int_equal(gt_test_count_files(dir), 0);
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", missing, NULL});
    assert_int_equal(rc, 64);
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", "--help", NULL});
    assert_int_equal(rc, 0);
    gt_test_rmtree(dir);
}

// Ctrl-C (SIGINT) mid-way: the partial shard is removed (no *.tmp-* left), the exit status is
// 128 + SIGINT and the message says so. The input is a sparse 4 GiB file, so the run is long
// enough to interrupt and costs no disk.
static void sigint_leaves_nothing_behind(void **state)
{
    (void)state;
    char dir[256], in[512], outdir[512], out[600], log[600];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(in, sizeof in, dir, "zeros.txt"));
    GT_ASSERT_OK(gt_path_join(outdir, sizeof outdir, dir, "out"));
    GT_ASSERT_OK(gt_mkdir_p(outdir, 0700));
    snprintf(out, sizeof out, "%s/shard.bin", outdir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 4ll << 30), 0);
    fclose(f);
    gt_proc p;
    gt_proc_spec spec = {.argv = (char *[]){GT_CLI_PATH, "tokenize", in, "--out", out, NULL},
                         .log_path = log};
    GT_ASSERT_OK(gt_proc_spawn(&p, &spec));
    for (int i = 0; i < 500 && gt_test_count_files(outdir) == 0; i++) {
        usleep(10000);  // until the shard is being written
    }
    assert_int_equal(gt_test_count_files(outdir), 1);
    kill(p.pid, SIGINT);
    int status = gt_test_proc_wait(&p, 20000);  // it stops by itself
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGINT);
    assert_int_equal(gt_test_count_files(outdir), 0);  // no shard, no *.tmp-*
    gt_buf said = {0};
    GT_ASSERT_OK(gt_file_read_all(log, 1 << 20, &said));
    GT_ASSERT_OK(gt_buf_append(&said, "", 1));
    assert_non_null(strstr((char *)said.data, "stopped by Interrupt; the unfinished shard was "
                                              "removed"));
    gt_buf_free(&said);

    // A temporary a crash left (SIGKILL cannot be cleaned up after) is named by the next run,
    // and removed with --remove-stale.
    char stale[700], small[600];
    snprintf(stale, sizeof stale, "%s.tmp-Ab12Cd", out);
    snprintf(small, sizeof small, "%s/small.txt", dir);
    GT_ASSERT_OK(gt_file_write_atomic(stale, "left", 4, 0600));
    GT_ASSERT_OK(gt_file_write_atomic(small, "hello", 5, 0600));
    gt_buf log2 = {0};
    int rc = gt_test_run_cli(&log2, (const char *[]){"tokenize", small, "--out", out, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log2.data, "shard.bin.tmp-Ab12Cd was left by an interrupted "
                                              "earlier run"));
    assert_non_null(strstr((char *)log2.data, "--remove-stale"));
    assert_true(gt_path_exists(stale));
    gt_buf_free(&log2);
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", small, "--out", out, "--remove-stale",
                                                NULL});
    assert_int_equal(rc, 0);
    assert_false(gt_path_exists(stale));
    assert_int_equal(gt_test_count_files(outdir), 1);  // the shard only
    gt_test_rmtree(dir);
}

// Ctrl-C in seal: the staging folder goes, nothing of DSDIR appears, exit 128 + SIGINT. The
// input is a sparse shard of 1 Gi zero tokens, so the run is long enough and costs no disk read.
static void seal_sigint_leaves_nothing_behind(void **state)
{
    (void)state;
    char dir[256], in[512], keys[512], outdir[512], out[600], log[600];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(in, sizeof in, dir, "zeros.bin"));
    GT_ASSERT_OK(gt_path_join(keys, sizeof keys, dir, "keys"));
    GT_ASSERT_OK(gt_path_join(outdir, sizeof outdir, dir, "out"));
    GT_ASSERT_OK(gt_mkdir_p(outdir, 0700));
    snprintf(out, sizeof out, "%s/ds", outdir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    assert_int_equal(gt_test_run_cli(NULL, (const char *[]){"keygen", "--out", keys, NULL}), 0);
    int32_t hdr[256] = {20240520, 1, 1 << 30};
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(hdr, sizeof hdr, 1, f), 1);
    assert_int_equal(ftruncate(fileno(f), (off_t)sizeof hdr + (2ll << 30)), 0);
    fclose(f);
    gt_proc p;
    gt_proc_spec spec = {.argv = (char *[]){GT_CLI_PATH, "seal", in, "--key", keys, "--out", out,
                                            "--vocab", "256", NULL},
                         .log_path = log};
    GT_ASSERT_OK(gt_proc_spawn(&p, &spec));
    for (int i = 0; i < 1000 && gt_test_count_files(outdir) == 0; i++) {
        usleep(10000);  // until the staging folder exists
    }
    assert_int_equal(gt_test_count_files(outdir), 1);
    kill(p.pid, SIGINT);
    int status = gt_test_proc_wait(&p, 30000);  // it stops by itself
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGINT);
    assert_int_equal(gt_test_count_files(outdir), 0);  // no DSDIR, no DSDIR.tmp-*
    gt_test_rmtree(dir);
}

// A tokenizer file (the committed GPT-2 subset) and two texts: the sample repeated past the
// command's 1 MiB read buffer, so pieces and blank lines fall across reads.
typedef struct {
    char dir[256], tok[512], a[512], b[512], out[512];
    gt_buf text_a, text_b;
    gt_tokenizer *t;
} bpe_case;

static void bpe_case_make(bpe_case *c)
{
    gt_test_tmpdir(c->dir, sizeof c->dir);
    GT_ASSERT_OK(gt_path_join(c->tok, sizeof c->tok, c->dir, "gpt2_tokenizer.bin"));
    GT_ASSERT_OK(gt_path_join(c->a, sizeof c->a, c->dir, "a.txt"));
    GT_ASSERT_OK(gt_path_join(c->b, sizeof c->b, c->dir, "b.txt"));
    GT_ASSERT_OK(gt_path_join(c->out, sizeof c->out, c->dir, "train.bin"));
    c->t = gt_test_gpt2_subset();
    GT_ASSERT_OK(gt_tokenizer_write(c->t, c->tok, 0644));
    gt_buf sample = {0};
    gt_test_read_data("gpt2/sample.txt", &sample);
    c->text_a = (gt_buf){0};
    c->text_b = (gt_buf){0};
    while (c->text_a.len < (5u << 19)) {  // 2.5 MiB
        GT_ASSERT_OK(gt_buf_append(&c->text_a, sample.data, sample.len));
        GT_ASSERT_OK(gt_buf_append(&c->text_a, "x\n", 2));
    }
    GT_ASSERT_OK(gt_buf_append(&c->text_b, sample.data, 100));
    GT_ASSERT_OK(gt_file_write_atomic(c->a, c->text_a.data, c->text_a.len, 0644));
    GT_ASSERT_OK(gt_file_write_atomic(c->b, c->text_b.data, c->text_b.len, 0644));
    gt_buf_free_nowipe(&sample);
}

static void bpe_case_free(bpe_case *c)
{
    gt_buf_free_nowipe(&c->text_a);
    gt_buf_free_nowipe(&c->text_b);
    gt_tokenizer_free(c->t);
    gt_test_rmtree(c->dir);
}

// What the shard must hold: per document, end-of-text then the library's one-call encoding.
// split: documents also end after each "\n\n" (found left to right, not overlapping).
static void expect_docs(gt_bpe *b, const gt_buf *text, bool split, gt_token_buf *want)
{
    size_t start = 0;
    for (size_t i = 0; i <= text->len; i++) {
        bool cut = i == text->len ||
                   (split && i + 1 < text->len && text->data[i] == '\n' && text->data[i + 1] == '\n');
        if (!cut) {
            continue;
        }
        size_t end = i == text->len ? i : i + 2;
        size_t used = 0;
        GT_ASSERT_OK(gt_token_buf_push(want, GT_GPT2_EOT));
        GT_ASSERT_OK(gt_bpe_encode(b, text->data + start, end - start, true, want, &used));
        start = end;
        if (i == text->len) {
            break;
        }
        i = end - 1;
        if (end == text->len) {  // a final "\n\n" starts one more, empty document
            GT_ASSERT_OK(gt_token_buf_push(want, GT_GPT2_EOT));
            break;
        }
    }
}

static void assert_shard(const char *path, const uint32_t *want, size_t n)
{
    uint16_t *tokens = NULL;
    size_t count = 0;
    GT_ASSERT_OK(gt_shard_read_all(path, &tokens, &count));
    for (size_t i = 0; i < count && i < n; i++) {
        if (tokens[i] != want[i]) {
            fail_msg("%s: token %zu is %u, expected %u", path, i, tokens[i], want[i]);
        }
    }
    assert_int_equal(count, n);
    free(tokens);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void bpe_shard_equals_library(void **state)
{
    (void)state;
    bpe_case c;
    bpe_case_make(&c);
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"tokenize", "--tokenizer", c.tok, c.a, c.b,
                                                    "--out", c.out, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "2 document(s), GPT-2 BPE"));
    gt_buf_free(&log);
    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, c.t));
    gt_token_buf want = {0};
    expect_docs(b, &c.text_a, false, &want);
    expect_docs(b, &c.text_b, false, &want);
    assert_shard(c.out, want.data, want.len);

    // --decode gives the text back, an end-of-text marker before each document
    rc = gt_test_run_cli(&log, (const char *[]){"tokenize", "--decode", "--tokenizer", c.tok,
                                                c.out, NULL});
    assert_int_equal(rc, 0);
    static const char eot[] = "<|endoftext|>";
    size_t n = strlen(eot);
    assert_int_equal(log.len, 2 * n + c.text_a.len + c.text_b.len);
    assert_memory_equal(log.data, eot, n);
    assert_memory_equal(log.data + n, c.text_a.data, c.text_a.len);
    assert_memory_equal(log.data + 2 * n + c.text_a.len, c.text_b.data, c.text_b.len);
    gt_buf_free(&log);
    gt_token_buf_free(&want);
    gt_bpe_free(b);
    bpe_case_free(&c);
}

// tinyshakespeare.py's documents, and its split: the first N tokens are the validation shard.
static void paragraphs_and_validation_split(void **state)
{
    (void)state;
    bpe_case c;
    bpe_case_make(&c);
    char val[600];
    snprintf(val, sizeof val, "%s/train_val.bin", c.dir);
    gt_buf log = {0};
    int rc = gt_test_run_cli(&log, (const char *[]){"tokenize", "-t", c.tok, c.a,
                                                    "--split-paragraphs", "--val-tokens",
                                                    "32768", "--out", c.out, NULL});
    assert_int_equal(rc, 0);
    assert_non_null(strstr((char *)log.data, "32768 validation tokens"));
    gt_buf_free(&log);
    gt_bpe *b = NULL;
    GT_ASSERT_OK(gt_bpe_new(&b, c.t));
    gt_token_buf want = {0};
    expect_docs(b, &c.text_a, true, &want);
    assert_true(want.len > 40000);
    assert_shard(val, want.data, 32768);
    assert_shard(c.out, want.data + 32768, want.len - 32768);

    // more validation tokens than there are: an error, and neither shard appears
    GT_ASSERT_OK(gt_path_join(c.out, sizeof c.out, c.dir, "second.bin"));
    rc = gt_test_run_cli(&log, (const char *[]){"tokenize", "-t", c.tok, c.b, "--val-tokens",
                                                "100000", "--out", c.out, NULL});
    assert_int_equal(rc, 1);
    assert_non_null(strstr((char *)log.data, "--val-tokens 100000"));
    gt_buf_free(&log);
    assert_false(gt_path_exists(c.out));
    snprintf(val, sizeof val, "%s/second_val.bin", c.dir);
    assert_false(gt_path_exists(val));
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", c.a, "--split-paragraphs", "--out",
                                                c.out, NULL});
    assert_int_equal(rc, 64);  // paragraphs need an end-of-text token
    gt_token_buf_free(&want);
    gt_bpe_free(b);
    bpe_case_free(&c);
}

// --write-tokenizer: llm.c's file back unchanged, and the byte-level one as version 1.
static void writes_tokenizer_files(void **state)
{
    (void)state;
    bpe_case c;
    bpe_case_make(&c);
    char copy[600], bytes[600];
    snprintf(copy, sizeof copy, "%s/copy.bin", c.dir);
    snprintf(bytes, sizeof bytes, "%s/bytes.bin", c.dir);
    int rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", "--write-tokenizer", copy,
                                                    "--tokenizer", c.tok, NULL});
    assert_int_equal(rc, 0);
    gt_buf x = {0}, y = {0};
    GT_ASSERT_OK(gt_file_read_all(c.tok, 1u << 24, &x));
    GT_ASSERT_OK(gt_file_read_all(copy, 1u << 24, &y));
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    gt_buf_free_nowipe(&y);
    rc = gt_test_run_cli(NULL, (const char *[]){"tokenize", "--write-tokenizer", bytes, NULL});
    assert_int_equal(rc, 0);
    GT_ASSERT_OK(gt_file_read_all(bytes, 1u << 24, &y));
    assert_int_equal(y.len, 1024 + 2 * 256);
    assert_int_equal(y.data[4], 1);  // version 1: no end-of-text token
    assert_int_equal(y.data[9], 1);  // vocab 256
    gt_tokenizer *t = NULL;
    GT_ASSERT_OK(gt_tokenizer_parse(&t, y.data, y.len));
    assert_int_equal(gt_tokenizer_vocab_size(t), 256);
    gt_tokenizer_free(t);
    gt_buf_free_nowipe(&x);
    gt_buf_free_nowipe(&y);
    bpe_case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokenizes_files_in_order),
        cmocka_unit_test(failures_leave_no_output),
        cmocka_unit_test(sigint_leaves_nothing_behind),
        cmocka_unit_test(seal_sigint_leaves_nothing_behind),
        cmocka_unit_test(bpe_shard_equals_library),
        cmocka_unit_test(paragraphs_and_validation_split),
        cmocka_unit_test(writes_tokenizer_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
