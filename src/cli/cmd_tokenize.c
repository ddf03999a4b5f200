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

int gt_cmd_tokenize(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'}, {0}};
    const char *out = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        default: return gt_cli_usage("tokenize", "unknown option");
        }
    }
    if (out == NULL) {
        return gt_cli_usage("tokenize", "--out SHARD is required");
    }
    if (optind == argc) {
        return gt_cli_usage("tokenize", "no input files");
    }
    uint64_t total = 0;
    for (int i = optind; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0 || !S_ISREG(st.st_mode)) {
            return gt_cli_fail("tokenize", gt_errf(GT_E_IO, "%s: not a readable file", argv[i]));
        }
        total += (uint64_t)st.st_size;
    }
    gt_shard_writer w;
    gt_err err = gt_shard_writer_open(&w, out);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("tokenize", err);
    }
    gt_progress bar;
    gt_progress_start(&bar, "tokenize", total, gt_cli.quiet);
    for (int i = optind; i < argc && gt_is_ok(err); i++) {
        err = tokenize_file(&w, argv[i], &bar);
    }
    gt_progress_finish(&bar);
    if (!gt_is_ok(err)) {
        gt_shard_writer_abort(&w);
        return gt_cli_fail("tokenize", err);
    }
    uint64_t count = w.token_count;
    err = gt_shard_writer_commit(&w);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("tokenize", err);
    }
    printf("%s: %llu tokens from %d file(s), byte-level vocab %d\n", out,
           (unsigned long long)count, argc - optind, GT_BYTE_VOCAB);
    return GT_EXIT_OK;
}
