// gputravel tokenize: text files -> llm.c shards (byte-level, or GPT-2 BPE with --tokenizer);
// --decode for the way back; --write-tokenizer writes llm.c's tokenizer file.
#include "cli.h"

#include <gputravel/data.h>

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(void)
{
    printf("usage: gputravel tokenize [--tokenizer TOK] FILE... --out SHARD [--val-tokens N]\n"
           "       gputravel tokenize --decode [--tokenizer TOK] SHARD\n"
           "       gputravel tokenize --write-tokenizer OUT [--tokenizer TOK]\n"
           "\n"
           "Tokenizes text files into llm.c token shards (magic 20240520, version 1, uint16\n"
           "tokens), in the order given. Without --tokenizer: byte-level (vocab 256, token = byte\n"
           "value). With --tokenizer (llm.c's gpt2_tokenizer.bin, which llm.c's data scripts\n"
           "write): GPT-2 BPE, token for token as tiktoken's gpt2 encoding, with the end-of-text\n"
           "token before each document as llm.c's data scripts put it; a document is a file, or\n"
           "with --split-paragraphs also each stretch ending in a blank line (tinyshakespeare.py).\n"
           "Shards appear under their names only when complete (mode 0600).\n"
           "\n"
           "  -t, --tokenizer TOK      llm.c tokenizer file: GPT-2 BPE instead of byte-level\n"
           "  -o, --out SHARD          output shard (required to tokenize)\n"
           "      --val-tokens N       the first N tokens go to a validation shard instead\n"
           "      --val-out VAL        its path (default: SHARD with _val before .bin)\n"
           "      --split-paragraphs   end-of-text also after each \"\\n\\n\" (needs --tokenizer)\n"
           "      --decode             print the text of SHARD's tokens to stdout\n"
           "      --remove-stale       remove SHARD.tmp-* left by an interrupted earlier run\n"
           "                           (without it they are named in a warning)\n"
           "      --write-tokenizer OUT  write TOK (or the byte-level tokenizer) as an llm.c\n"
           "                           tokenizer file: version 2 with its end-of-text token\n"
           "                           (version 1 for byte-level, which has none)\n"
           "  -h, --help               this help\n");
}

typedef struct {
    const char *out;
    const char *val_out;
    const char *tokenizer;
    const char *write_tokenizer;
    uint64_t val_tokens;
    bool split_paragraphs;
    bool decode;
    bool remove_stale;
    char **files;
    int nfiles;
    char val_path[4096];
} tokenize_options;

// Where tokens go: the first val_left to the validation shard, the rest to the main one.
typedef struct {
    gt_shard_writer main;
    gt_shard_writer val;
    bool has_val;
    uint64_t val_left;
    uint16_t buf[1 << 14];
    uint64_t documents;
} token_sink;

static gt_err sink_put(token_sink *s, const uint32_t *tokens, size_t n)
{
    while (n > 0) {
        size_t k = n < sizeof s->buf / sizeof *s->buf ? n : sizeof s->buf / sizeof *s->buf;
        if (s->has_val && s->val_left > 0 && k > s->val_left) {
            k = (size_t)s->val_left;
        }
        for (size_t i = 0; i < k; i++) {
            s->buf[i] = (uint16_t)tokens[i];  // vocab <= 65536 checked at open
        }
        bool to_val = s->has_val && s->val_left > 0;
        GT_TRY(gt_shard_writer_append(to_val ? &s->val : &s->main, s->buf, k));
        if (to_val) {
            s->val_left -= k;
        }
        tokens += k;
        n -= k;
    }
    return GT_OK;
}

static gt_err sink_put_bytes(token_sink *s, const uint8_t *text, size_t n)
{
    uint32_t t[4096];
    while (n > 0) {
        size_t k = n < 4096 ? n : 4096;
        for (size_t i = 0; i < k; i++) {
            t[i] = text[i];
        }
        GT_TRY(sink_put(s, t, k));
        text += k;
        n -= k;
    }
    return GT_OK;
}

typedef struct {
    gt_bpe *bpe;  // NULL: byte-level
    uint32_t eot;
    bool split_paragraphs;
    gt_token_buf tokens;
} encoder;

// Encodes text[0..len) (more follows unless final), hands the tokens to s; *used as gt_bpe_encode.
static gt_err encode_some(encoder *e, token_sink *s, const uint8_t *text, size_t len, bool final,
                          size_t *used)
{
    if (e->bpe == NULL) {
        *used = len;
        return sink_put_bytes(s, text, len);
    }
    e->tokens.len = 0;
    GT_TRY(gt_bpe_encode(e->bpe, text, len, final, &e->tokens, used));
    return sink_put(s, e->tokens.data, e->tokens.len);
}

static gt_err document_start(encoder *e, token_sink *s)
{
    s->documents++;
    return e->bpe != NULL ? sink_put(s, &e->eot, 1) : GT_OK;
}

static const uint8_t *find_blank_line(const uint8_t *p, size_t n)
{
    const uint8_t *q = p, *end = p + n;
    while (end - q >= 2 && (q = memchr(q, '\n', (size_t)(end - q - 1))) != NULL) {
        if (q[1] == '\n') {
            return q;
        }
        q++;
    }
    return NULL;
}

// One file in pieces: memory is the read buffer, grown only while one BPE piece fills it.
static gt_err tokenize_file(encoder *e, token_sink *s, const char *path, gt_progress *bar)
{
    FILE *fp = fopen(path, "rb");
    GT_ENSURE(fp != NULL, GT_E_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 20, have = 0, scan = 0;  // buf[0..have) not yet encoded
    uint8_t *buf = malloc(cap);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, buf != NULL, out, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, document_start(e, s), out);
    for (bool eof = false; !eof;) {
        if (have == cap) {
            uint8_t *grown = realloc(buf, cap * 2);
            GT_ENSURE_GOTO(err, grown != NULL, out, GT_E_NOMEM,
                           "%s: out of memory for a piece of %zu bytes", path, cap);
            buf = grown;
            cap *= 2;
        }
        // Ctrl-C: the shard being written is removed on the way out (gt_shard_writer_abort).
        GT_ENSURE_GOTO(err, !gt_interrupted(), out, GT_E_STATE,
                       "stopped by %s; the unfinished shard was removed",
                       strsignal(gt_interrupted()));
        size_t n = fread(buf + have, 1, cap - have, fp);
        GT_ENSURE_GOTO(err, !ferror(fp), out, GT_E_IO, "%s: read error", path);
        eof = n == 0 && feof(fp);
        have += n;
        gt_progress_add(bar, n);
        size_t pos = 0, used = 0;
        const uint8_t *blank;
        while (e->split_paragraphs && (blank = find_blank_line(buf + scan, have - scan)) != NULL) {
            size_t end = (size_t)(blank - buf) + 2;  // the document keeps its "\n\n"
            GT_TRY_GOTO(err, encode_some(e, s, buf + pos, end - pos, true, &used), out);
            GT_TRY_GOTO(err, document_start(e, s), out);
            pos = scan = end;
        }
        GT_TRY_GOTO(err, encode_some(e, s, buf + pos, have - pos, eof, &used), out);
        pos += used;
        memmove(buf, buf + pos, have - pos);
        have -= pos;
        scan = have > 0 ? have - 1 : 0;  // a "\n" at the end may pair with the next one
    }
out:
    free(buf);
    fclose(fp);
    return gt_err_wrap(err, "%s", path);
}

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, tokenize_options *o)
{
    enum { VAL_TOKENS = 1000, VAL_OUT, SPLIT, DECODE, WRITE_TOK, REMOVE_STALE };
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"tokenizer", required_argument, NULL, 't'},
                                         {"val-tokens", required_argument, NULL, VAL_TOKENS},
                                         {"val-out", required_argument, NULL, VAL_OUT},
                                         {"split-paragraphs", no_argument, NULL, SPLIT},
                                         {"decode", no_argument, NULL, DECODE},
                                         {"write-tokenizer", required_argument, NULL, WRITE_TOK},
                                         {"remove-stale", no_argument, NULL, REMOVE_STALE},
                                         {0}};
    *o = (tokenize_options){0};
    int c;
    bool has_val = false;
    while ((c = getopt_long(argc, argv, "o:t:", opts, NULL)) != -1) {
        gt_err e = GT_OK;
        switch (c) {
        case 'o': o->out = optarg; break;
        case 't': o->tokenizer = optarg; break;
        case VAL_TOKENS:
            e = gt_cli_parse_u64("--val-tokens", optarg, 1, INT32_MAX, &o->val_tokens);
            has_val = true;
            break;
        case VAL_OUT: o->val_out = optarg; break;
        case SPLIT: o->split_paragraphs = true; break;
        case DECODE: o->decode = true; break;
        case WRITE_TOK: o->write_tokenizer = optarg; break;
        case REMOVE_STALE: o->remove_stale = true; break;
        default: return gt_cli_usage("tokenize", "unknown option");
        }
        if (!gt_is_ok(e)) {
            return gt_cli_usage("tokenize", "%s", e.msg);
        }
    }
    o->files = argv + optind;
    o->nfiles = argc - optind;
    if (o->write_tokenizer != NULL) {
        return o->nfiles == 0 && o->out == NULL && !o->decode
                   ? GT_EXIT_OK
                   : gt_cli_usage("tokenize", "--write-tokenizer takes only --tokenizer");
    }
    if (o->decode) {
        return o->nfiles == 1 && o->out == NULL && !has_val
                   ? GT_EXIT_OK
                   : gt_cli_usage("tokenize", "--decode takes one SHARD and no --out");
    }
    if (o->out == NULL) {
        return gt_cli_usage("tokenize", "--out SHARD is required");
    }
    if (o->nfiles == 0) {
        return gt_cli_usage("tokenize", "no input files");
    }
    if (o->split_paragraphs && o->tokenizer == NULL) {
        return gt_cli_usage("tokenize", "--split-paragraphs needs --tokenizer (documents are "
                                        "separated by its end-of-text token)");
    }
    if (o->val_out != NULL && !has_val) {
        return gt_cli_usage("tokenize", "--val-out needs --val-tokens N");
    }
    if (has_val && o->val_out == NULL) {
        size_t n = strlen(o->out);
        int stem = n > 4 && strcmp(o->out + n - 4, ".bin") == 0 ? (int)n - 4 : (int)n;
        snprintf(o->val_path, sizeof o->val_path, "%.*s_val.bin", stem, o->out);
        o->val_out = o->val_path;
    }
    if (o->val_out != NULL && strcmp(o->val_out, o->out) == 0) {
        return gt_cli_usage("tokenize", "--val-out and --out are the same file");
    }
    return GT_EXIT_OK;
}

static gt_err load_tokenizer(const char *path, gt_tokenizer **t)
{
    if (path == NULL) {
        return gt_tokenizer_byte_new(t);
    }
    GT_TRY(gt_tokenizer_load(t, path));
    if (gt_tokenizer_vocab_size(*t) > 65536) {
        uint32_t v = gt_tokenizer_vocab_size(*t);
        gt_tokenizer_free(*t);
        *t = NULL;
        return gt_errf(GT_E_UNSUPPORTED,
                       "%s: vocab %u does not fit llm.c's uint16 shards (at most 65536)", path,
                       v);
    }
    return GT_OK;
}

typedef struct {
    uint64_t tokens, val_tokens, documents, invalid_utf8;
} tokenize_result;

static gt_err sink_open(token_sink *s, const tokenize_options *o)
{
    GT_TRY(gt_shard_writer_open(&s->main, o->out));
    s->has_val = o->val_out != NULL;
    s->val_left = o->val_tokens;
    if (s->has_val) {
        gt_err err = gt_shard_writer_open(&s->val, o->val_out);
        if (!gt_is_ok(err)) {
            gt_shard_writer_abort(&s->main);
            return err;
        }
    }
    return GT_OK;
}

// Both shards, or neither: the validation one must be full, then both are committed.
static gt_err sink_commit(token_sink *s, const tokenize_options *o, tokenize_result *res)
{
    res->tokens = s->main.token_count;
    res->val_tokens = s->has_val ? s->val.token_count : 0;
    res->documents = s->documents;
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, !s->has_val || s->val_left == 0, fail, GT_E_ARG,
                   "--val-tokens %llu: the input has only %llu tokens",
                   (unsigned long long)o->val_tokens, (unsigned long long)res->val_tokens);
    GT_ENSURE_GOTO(err, !s->has_val || res->tokens > 0, fail, GT_E_ARG,
                   "--val-tokens %llu takes every token, none are left for %s",
                   (unsigned long long)o->val_tokens, o->out);
    if (s->has_val) {
        GT_TRY_GOTO(err, gt_shard_writer_commit(&s->val), fail_main);
    }
    return gt_shard_writer_commit(&s->main);
fail:
    if (s->has_val) {
        gt_shard_writer_abort(&s->val);
    }
fail_main:
    gt_shard_writer_abort(&s->main);
    return err;
}

static gt_err run(const tokenize_options *o, tokenize_result *res)
{
    uint64_t total = 0;
    for (int i = 0; i < o->nfiles; i++) {
        struct stat st;
        GT_ENSURE(stat(o->files[i], &st) == 0 && S_ISREG(st.st_mode), GT_E_IO,
                  "%s: not a readable file", o->files[i]);
        total += (uint64_t)st.st_size;
    }
    // What an interrupted earlier run left beside the outputs: named, or removed when asked.
    GT_TRY(gt_stale_temps(o->out, o->remove_stale, "--remove-stale", NULL));
    if (o->val_tokens > 0) {
        GT_TRY(gt_stale_temps(o->val_out, o->remove_stale, "--remove-stale", NULL));
    }
    gt_tokenizer *t = NULL;
    GT_TRY(load_tokenizer(o->tokenizer, &t));
    encoder e = {.split_paragraphs = o->split_paragraphs};
    gt_err err = GT_OK;
    if (o->tokenizer != NULL) {
        GT_ENSURE_GOTO(err, gt_tokenizer_eot(t) >= 0, out, GT_E_FORMAT,
                       "%s: no end-of-text token (a version 1 file with fewer than 50257 "
                       "tokens); documents cannot be separated",
                       o->tokenizer);
        e.eot = (uint32_t)gt_tokenizer_eot(t);
        GT_TRY_GOTO(err, gt_err_wrap(gt_bpe_new(&e.bpe, t), "%s", o->tokenizer), out);
    }
    token_sink *s = calloc(1, sizeof *s);
    GT_ENSURE_GOTO(err, s != NULL, out, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, sink_open(s, o), out_sink);
    gt_progress bar;
    gt_progress_start(&bar, "tokenize", total, gt_cli.quiet);
    for (int i = 0; i < o->nfiles && gt_is_ok(err); i++) {
        err = tokenize_file(&e, s, o->files[i], &bar);
    }
    gt_progress_finish(&bar);
    if (gt_is_ok(err)) {
        err = sink_commit(s, o, res);
    } else {
        gt_shard_writer_abort(&s->main);
        if (s->has_val) {
            gt_shard_writer_abort(&s->val);
        }
    }
    res->invalid_utf8 = e.bpe != NULL ? gt_bpe_invalid_utf8_bytes(e.bpe) : 0;
out_sink:
    free(s);
out:
    gt_token_buf_free(&e.tokens);
    gt_bpe_free(e.bpe);
    gt_tokenizer_free(t);
    return err;
}

static gt_err decode(const tokenize_options *o)
{
    gt_tokenizer *t = NULL;
    GT_TRY(load_tokenizer(o->tokenizer, &t));
    gt_shard_reader r;
    gt_err err = gt_shard_reader_open(&r, o->files[0]);
    if (!gt_is_ok(err)) {
        gt_tokenizer_free(t);
        return err;
    }
    uint16_t tokens[4096];
    uint64_t at = 0;
    for (;;) {
        size_t n = 0;
        GT_TRY_GOTO(err, gt_shard_reader_read(&r, tokens, 4096, &n), out);
        if (n == 0) {
            break;
        }
        for (size_t i = 0; i < n; i++, at++) {
            gt_span p = {0};
            gt_err e = gt_tokenizer_decode(t, tokens[i], &p);
            GT_TRY_GOTO(err, gt_err_wrap(e, "%s: token %llu", o->files[0],
                                         (unsigned long long)at), out);
            fwrite(p.data, 1, p.len, stdout);
        }
    }
    GT_ENSURE_GOTO(err, fflush(stdout) == 0, out, GT_E_IO, "stdout: %s", strerror(errno));
out:
    gt_shard_reader_close(&r);
    gt_tokenizer_free(t);
    return err;
}

static gt_err write_tokenizer(const tokenize_options *o)
{
    gt_tokenizer *t = NULL;
    GT_TRY(load_tokenizer(o->tokenizer, &t));
    gt_err err = gt_tokenizer_write(t, o->write_tokenizer, 0644);
    if (gt_is_ok(err)) {
        printf("%s: llm.c tokenizer, version %d, vocab %u, end-of-text %d\n", o->write_tokenizer,
               gt_tokenizer_eot(t) >= 0 ? 2 : 1, gt_tokenizer_vocab_size(t), gt_tokenizer_eot(t));
    }
    gt_tokenizer_free(t);
    return err;
}

int gt_cmd_tokenize(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    tokenize_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    if (o.write_tokenizer != NULL || o.decode) {
        gt_err err = o.decode ? decode(&o) : write_tokenizer(&o);
        return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("tokenize", err);
    }
    tokenize_result res = {0};
    gt_interrupt_install();  // Ctrl-C stops between reads and removes the partial shard
    gt_err err = run(&o, &res);
    if (!gt_is_ok(err)) {
        int rc = gt_cli_fail("tokenize", err);
        return gt_interrupted() ? 128 + gt_interrupted() : rc;
    }
    if (res.invalid_utf8 > 0) {
        fprintf(stderr, "gputravel tokenize: warning: %llu bytes were not UTF-8; they are kept as "
                        "byte tokens (tiktoken takes only text)\n",
                (unsigned long long)res.invalid_utf8);
    }
    if (o.tokenizer != NULL) {
        printf("%s: %llu tokens from %d file(s), %llu document(s), GPT-2 BPE (%s)\n", o.out,
               (unsigned long long)res.tokens, o.nfiles, (unsigned long long)res.documents,
               o.tokenizer);
    } else {
        printf("%s: %llu tokens from %d file(s), byte-level vocab %d\n", o.out,
               (unsigned long long)res.tokens, o.nfiles, GT_BYTE_VOCAB);
    }
    if (o.val_out != NULL) {
        printf("%s: %llu validation tokens\n", o.val_out, (unsigned long long)res.val_tokens);
    }
    return GT_EXIT_OK;
}
