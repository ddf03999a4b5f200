// gputravel tokenize: text files -> one llm.c shard, byte-level tokens.
#include "cli.h"

#include <gputravel/data.h>

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(void)
{
    printf("usage: gputravel tokenize FILE... --out SHARD\n"
           "\n"
           "Tokenizes text files byte-level (vocab 256: token = byte value) into one llm.c token\n"
           "shard (magic 20240520, version 1, uint16 tokens), in the order given. The shard\n"
           "appears under its name only when complete.\n"
           "\n"
           "  -o, --out SHARD   output shard (required)\n"
           "  -h, --help        this help\n");
}

static gt_err tokenize_file(gt_shard_writer *w, const char *path, gt_progress *bar)
{
    FILE *fp = fopen(path, "rb");
    GT_ENSURE(fp != NULL, GT_E_IO, "%s: %s", path, strerror(errno));
    enum { PIECE = 1 << 16 };
    uint8_t *text = malloc(PIECE);
    uint16_t *tokens = malloc(PIECE * sizeof *tokens);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, text != NULL && tokens != NULL, out, GT_E_NOMEM, "out of memory");
    size_t n;
    while ((n = fread(text, 1, PIECE, fp)) > 0) {
        gt_tokenize_bytes(tokens, text, n);
        GT_TRY_GOTO(err, gt_shard_writer_append(w, tokens, n), out);
        gt_progress_add(bar, n);
    }
    GT_ENSURE_GOTO(err, !ferror(fp), out, GT_E_IO, "%s: read error", path);
out:
    free(text);
    free(tokens);
    fclose(fp);
    return err;
}

typedef struct {
    const char *out;
    char **files;
    int nfiles;
} tokenize_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, tokenize_options *o)
{
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'}, {0}};
    *o = (tokenize_options){0};
    int c;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        default: return gt_cli_usage("tokenize", "unknown option");
        }
    }
    if (o->out == NULL) {
        return gt_cli_usage("tokenize", "--out SHARD is required");
    }
    if (optind == argc) {
        return gt_cli_usage("tokenize", "no input files");
    }
    o->files = argv + optind;
    o->nfiles = argc - optind;
    return GT_EXIT_OK;
}

// Writes every file's bytes as tokens into --out; *tokens is the shard's token count.
static gt_err run(const tokenize_options *o, uint64_t *tokens)
{
    uint64_t total = 0;
    for (int i = 0; i < o->nfiles; i++) {
        struct stat st;
        GT_ENSURE(stat(o->files[i], &st) == 0 && S_ISREG(st.st_mode), GT_E_IO,
                  "%s: not a readable file", o->files[i]);
        total += (uint64_t)st.st_size;
    }
    gt_shard_writer w;
    GT_TRY(gt_shard_writer_open(&w, o->out));
    gt_progress bar;
    gt_progress_start(&bar, "tokenize", total, gt_cli.quiet);
    gt_err err = GT_OK;
    for (int i = 0; i < o->nfiles && gt_is_ok(err); i++) {
        err = tokenize_file(&w, o->files[i], &bar);
    }
    gt_progress_finish(&bar);
    if (!gt_is_ok(err)) {
        gt_shard_writer_abort(&w);
        return err;
    }
    *tokens = w.token_count;
    return gt_shard_writer_commit(&w);
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
    uint64_t count = 0;
    gt_err err = run(&o, &count);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("tokenize", err);
    }
    printf("%s: %llu tokens from %d file(s), byte-level vocab %d\n", o.out,
           (unsigned long long)count, o.nfiles, GT_BYTE_VOCAB);
    return GT_EXIT_OK;
}
