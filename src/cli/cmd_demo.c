// gputravel demo: the README's main command. For now one holder's side of the story: a text
// corpus becomes llm.c token shards, is sealed under the holder's keys into a signed, chunked,
// encrypted dataset, verified without any key, shown to reject tampering, and unsealed back
// bit-for-bit. Each step is its own function; later steps (attested devices, travelling GPU,
// training) extend this file.
#include "cli.h"

#include <gputravel/data.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORTUNE_DIR "/usr/share/games/fortunes"
#define DEMO_MARKER ".gputravel-demo"
#define DEMO_SHARDS 2

typedef struct {
    char dir[3072];
    bool quiet;
    char corpus_from[256];
    uint8_t *text;  // the corpus (public demo text)
    size_t text_len;
    char shards[DEMO_SHARDS][4096];
    char keys[4096];
    char dataset[4096];
    char tampered[4096];
    char unsealed[4096];
    gt_holder_keys holder;
    gt_manifest manifest;
    uint64_t chunk_size;
    double t_step;
    double t_total;
} demo;

static void say(const demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const demo *d, const char *fmt, ...)
{
    if (d->quiet) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void step_begin(demo *d, int n, const char *title)
{
    say(d, "\n[%d] %s\n", n, title);
    d->t_step = gt_now_seconds();
}

static void step_end(demo *d)
{
    say(d, "    (%.3f s)\n", gt_now_seconds() - d->t_step);
}

static void usage(void)
{
    printf("usage: gputravel demo [--out DIR] [--quiet]\n"
           "\n"
           "Runs the end-to-end demo and tells its story: a text corpus (the Debian fortunes if\n"
           "installed, else built-in text) is tokenized byte-level into llm.c shards; a holder\n"
           "creates its keys, seals the shards into a signed dataset of AES-256-GCM chunks,\n"
           "verifies it without any key, watches a one-bit change get caught, and unseals it\n"
           "back, checking every token.\n"
           "\n"
           "  -o, --out DIR   work folder (default: a new /tmp/gputravel-demo-XXXXXX); a folder\n"
           "                  from an earlier demo run is reused\n"
           "  -q, --quiet     print only the final line\n"
           "  -h, --help      this help\n");
}

// ---- the work folder ------------------------------------------------------------------------

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

// Only paths this demo creates, inside a folder that carries the demo marker.
static void remove_previous_run(const demo *d)
{
    const char *paths[] = {d->keys, d->dataset, d->tampered, d->unsealed};
    char corpus[4096];
    snprintf(corpus, sizeof corpus, "%s/corpus", d->dir);
    nftw(corpus, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        nftw(paths[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

static gt_err prepare_dir(demo *d, const char *out)
{
    if (out == NULL) {
        snprintf(d->dir, sizeof d->dir, "/tmp/gputravel-demo-XXXXXX");
        GT_ENSURE(mkdtemp(d->dir) != NULL, GT_E_IO, "mkdtemp: %s", strerror(errno));
    } else {
        GT_ENSURE(strlen(out) < sizeof d->dir, GT_E_LIMIT, "--out: path too long");
        snprintf(d->dir, sizeof d->dir, "%s", out);
        GT_TRY(gt_mkdir_p(d->dir, 0700));
    }
    snprintf(d->keys, sizeof d->keys, "%s/keys", d->dir);
    snprintf(d->dataset, sizeof d->dataset, "%s/dataset", d->dir);
    snprintf(d->tampered, sizeof d->tampered, "%s/tampered", d->dir);
    snprintf(d->unsealed, sizeof d->unsealed, "%s/unsealed.bin", d->dir);
    for (int i = 0; i < DEMO_SHARDS; i++) {
        snprintf(d->shards[i], sizeof d->shards[i], "%s/corpus/holder_a_%03d.bin", d->dir, i);
    }
    char marker[4096];
    GT_TRY(gt_path_join(marker, sizeof marker, d->dir, DEMO_MARKER));
    DIR *dir = opendir(d->dir);
    GT_ENSURE(dir != NULL, GT_E_IO, "%s: %s", d->dir, strerror(errno));
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        empty = empty && (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0);
    }
    closedir(dir);
    GT_ENSURE(empty || gt_path_exists(marker), GT_E_STATE,
              "%s is not empty and was not made by gputravel demo: choose another --out", d->dir);
    remove_previous_run(d);
    GT_TRY(gt_file_write_atomic(marker, "gputravel demo work folder\n", 27, 0644));
    char corpus[4096];
    GT_TRY(gt_path_join(corpus, sizeof corpus, d->dir, "corpus"));
    return gt_mkdir_p(corpus, 0700);
}

// ---- step 1: a corpus -----------------------------------------------------------------------

static const char builtin_text[] =
    "It was a bright cold day in April, and the clocks were striking thirteen. The hospital's\n"
    "records, the bank's ledgers and the lab's notebooks each held words no other party could\n"
    "read, yet together they would teach one model to write. Each holder sealed its text, and\n"
    "the confidential accelerator travelled to each of them in turn, carrying nothing home but\n"
    "what the training agreement allowed.\n";

static int skip_name(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    bool dat = n > 4 && strcmp(e->d_name + n - 4, ".dat") == 0;
    bool u8 = n > 3 && strcmp(e->d_name + n - 3, ".u8") == 0;
    return e->d_name[0] != '.' && !dat && !u8;
}

static gt_err corpus_from_fortunes(demo *d)
{
    struct dirent **names = NULL;
    int n = scandir(FORTUNE_DIR, &names, skip_name, alphasort);
    if (n <= 0) {
        free(names);
        return gt_errf(GT_E_NOTFOUND, "%s: no fortune files", FORTUNE_DIR);
    }
    gt_buf all = {0};
    gt_err err = GT_OK;
    int files = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (err.code == GT_E_NONE &&
            gt_path_join(path, sizeof path, FORTUNE_DIR, names[i]->d_name).code == GT_E_NONE &&
            lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (16 << 20)) {
            gt_buf one = {0};
            err = gt_file_read_all(path, 16u << 20, &one);
            if (err.code == GT_E_NONE) {
                err = gt_buf_append(&all, one.data, one.len);
                files++;
            }
            gt_buf_free_nowipe(&one);
        }
        free(names[i]);
    }
    free(names);
    if (err.code != GT_E_NONE || all.len == 0) {
        gt_buf_free_nowipe(&all);
        return err.code != GT_E_NONE ? err : gt_errf(GT_E_NOTFOUND, "no fortune text");
    }
    d->text = all.data;
    d->text_len = all.len;
    snprintf(d->corpus_from, sizeof d->corpus_from, "%d fortune files from " FORTUNE_DIR, files);
    return GT_OK;
}

static gt_err step_corpus(demo *d)
{
    step_begin(d, 1, "A holder's private text");
    if (corpus_from_fortunes(d).code != GT_E_NONE) {
        size_t reps = 2000, n = sizeof builtin_text - 1;
        d->text = malloc(reps * n);
        GT_ENSURE(d->text != NULL, GT_E_NOMEM, "out of memory");
        for (size_t i = 0; i < reps; i++) {
            memcpy(d->text + i * n, builtin_text, n);
        }
        d->text_len = reps * n;
        snprintf(d->corpus_from, sizeof d->corpus_from,
                 "built-in text (install fortunes-min for a richer corpus)");
    }
    char size[32];
    gt_format_size(size, sizeof size, d->text_len);
    say(d, "    Holder A's corpus: %s of text, %s.\n", size, d->corpus_from);
    size_t line = 0;
    while (line < d->text_len && line < 100 && d->text[line] != '\n') {
        line++;
    }
    say(d, "    It begins: \"%.*s\"\n", (int)line, (const char *)d->text);
    step_end(d);
    return GT_OK;
}

// ---- step 2: tokens -------------------------------------------------------------------------

static gt_err step_tokenize(demo *d)
{
    step_begin(d, 2, "Tokenize into llm.c shards");
    uint16_t *tokens = malloc(d->text_len * sizeof *tokens);
    GT_ENSURE(tokens != NULL, GT_E_NOMEM, "out of memory");
    gt_tokenize_bytes(tokens, d->text, d->text_len);
    gt_err err = GT_OK;
    size_t half = d->text_len / 2;
    GT_TRY_GOTO(err, gt_shard_write(d->shards[0], tokens, half), out);
    GT_TRY_GOTO(err, gt_shard_write(d->shards[1], tokens + half, d->text_len - half), out);
    say(d, "    Byte-level tokens (token = byte value, vocabulary 256), uint16 little-endian,\n"
           "    in llm.c's shard format (magic 20240520, version 1):\n");
    say(d, "      %s  %zu tokens\n      %s  %zu tokens\n", d->shards[0], half, d->shards[1],
        d->text_len - half);
out:
    free(tokens);
    step_end(d);
    return err;
}

// ---- step 3: keys ---------------------------------------------------------------------------

static gt_err step_keygen(demo *d)
{
    step_begin(d, 3, "The holder creates its keys");
    GT_TRY(gt_keydir_generate(d->keys, false, &d->holder));
    char pub[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(pub, sizeof pub, d->holder.holder_pub, sizeof d->holder.holder_pub);
    say(d, "    %s: an Ed25519 identity (signs manifests) and a 32-byte dataset key\n"
           "    (every chunk key is derived from it with HKDF); files mode 0600.\n", d->keys);
    say(d, "    Holder public key: %s\n", pub);
    step_end(d);
    return GT_OK;
}

// ---- step 4: seal ---------------------------------------------------------------------------

static gt_err step_seal(demo *d)
{
    step_begin(d, 4, "Seal the shards");
    uint64_t bytes = 2 * (uint64_t)d->text_len;
    d->chunk_size = ((bytes / 5 + 4095) / 4096) * 4096;  // about five chunks, the last shorter
    d->chunk_size = d->chunk_size < 4096 ? 4096 : d->chunk_size;
    const char *shards[DEMO_SHARDS];
    for (int i = 0; i < DEMO_SHARDS; i++) {
        shards[i] = d->shards[i];
    }
    gt_seal_params p = {.shards = shards, .shard_count = DEMO_SHARDS, .out_dir = d->dataset,
                        .chunk_size = d->chunk_size, .vocab_size = GT_BYTE_VOCAB,
                        .progress = !d->quiet};
    gt_seal_result r;
    GT_TRY(gt_seal(&p, &d->holder, &r));
    char id[2 * GT_DATASET_ID_BYTES + 1], cs[32], pt[32], st[32];
    gt_hex_encode(id, sizeof id, r.dataset_id, sizeof r.dataset_id);
    gt_format_size(cs, sizeof cs, d->chunk_size);
    gt_format_size(pt, sizeof pt, r.plaintext_bytes);
    gt_format_size(st, sizeof st, r.stored_bytes);
    say(d, "    %s of tokens -> %u chunks of up to %s in %s (%s on disk).\n", pt, r.chunk_count,
        cs, d->dataset, st);
    say(d, "    Each chunk: AES-256-GCM under its own HKDF-derived key and a random IV, the\n"
           "    dataset id, chunk index, chunk count and length bound in as associated data.\n"
           "    The manifest lists every chunk's IV, tag and SHA-256, signed by the holder.\n");
    say(d, "    Dataset id: %s\n", id);
    step_end(d);
    return GT_OK;
}

// ---- step 5: verify without a key -----------------------------------------------------------

static gt_err step_verify(demo *d)
{
    step_begin(d, 5, "Anyone can check the sealed dataset, without any key");
    GT_TRY(gt_dataset_verify(d->dataset, d->holder.holder_pub, !d->quiet, &d->manifest));
    say(d, "    Manifest signature valid (signed by holder A); all %u chunks present, of the\n"
           "    signed sizes, in order, and hashing to the signed SHA-256 values.\n",
        d->manifest.chunk_count);
    step_end(d);
    return GT_OK;
}

// ---- step 6: tampering is caught ------------------------------------------------------------

static gt_err copy_file(const char *from, const char *to)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(from, 1u << 30, &b));
    gt_err err = gt_file_write_atomic(to, b.data, b.len, 0644);
    gt_buf_free_nowipe(&b);  // ciphertext
    return err;
}

static gt_err step_tamper(demo *d)
{
    step_begin(d, 6, "A single flipped bit is caught");
    GT_TRY(gt_mkdir_p(d->tampered, 0755));
    char from[4096], to[4096];
    GT_TRY(gt_path_join(from, sizeof from, d->dataset, GT_MANIFEST_FILE));
    GT_TRY(gt_path_join(to, sizeof to, d->tampered, GT_MANIFEST_FILE));
    GT_TRY(copy_file(from, to));
    uint32_t victim = d->manifest.chunk_count > 1 ? 1 : 0;
    for (uint32_t i = 0; i < d->manifest.chunk_count; i++) {
        GT_TRY(gt_chunk_path(from, sizeof from, d->dataset, i));
        GT_TRY(gt_chunk_path(to, sizeof to, d->tampered, i));
        GT_TRY(copy_file(from, to));
    }
    GT_TRY(gt_chunk_path(to, sizeof to, d->tampered, victim));
    int fd = open(to, O_RDWR);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: %s", to, strerror(errno));
    off_t at = GT_CHUNK_HEADER_BYTES + (off_t)(d->manifest.chunks[victim].plaintext_len / 2);
    uint8_t byte = 0;
    bool ok = pread(fd, &byte, 1, at) == 1;
    byte ^= 0x10;
    ok = ok && pwrite(fd, &byte, 1, at) == 1;
    close(fd);
    GT_ENSURE(ok, GT_E_IO, "%s: cannot flip a bit", to);
    say(d, "    Copied the dataset to %s and flipped bit 4 of byte %lld of chunk %u.\n",
        d->tampered, (long long)at, victim);
    gt_err v = gt_dataset_verify(d->tampered, NULL, false, NULL);
    GT_ENSURE(v.code == GT_E_AUTH, GT_E_STATE, "tampering was not detected: %s",
              v.code ? v.msg : "verify passed");
    say(d, "    verify-dataset: %s\n", v.msg);
    char shard[4096];
    GT_TRY(gt_path_join(shard, sizeof shard, d->tampered, "unsealed.bin"));
    gt_err u = gt_unseal(d->tampered, &d->holder, shard, false, NULL);
    GT_ENSURE(u.code == GT_E_AUTH && !gt_path_exists(shard), GT_E_STATE,
              "tampering was not detected by unseal: %s", u.code ? u.msg : "unseal passed");
    say(d, "    unseal:         %s; no plaintext file was left behind.\n", u.msg);
    step_end(d);
    return GT_OK;
}

// ---- step 7: unseal and compare -------------------------------------------------------------

static gt_err step_unseal(demo *d)
{
    step_begin(d, 7, "The holder unseals it again");
    GT_TRY(gt_unseal(d->dataset, &d->holder, d->unsealed, !d->quiet, NULL));
    uint16_t *tokens = NULL;
    size_t count = 0;
    GT_TRY(gt_shard_read_all(d->unsealed, &tokens, &count));
    bool same = count == d->text_len;
    for (size_t i = 0; same && i < count; i++) {
        same = tokens[i] == d->text[i];
    }
    gt_secure_zero(tokens, count * sizeof *tokens);
    free(tokens);
    GT_ENSURE(same, GT_E_STATE, "round trip FAILED: %s differs from the corpus", d->unsealed);
    say(d, "    Every chunk authenticated before %s appeared (written under a temporary\n"
           "    name, renamed only after the last GCM tag verified).\n", d->unsealed);
    say(d, "    Round trip: %zu tokens, identical to the corpus.\n", count);
    step_end(d);
    return GT_OK;
}

int gt_cmd_demo(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"quiet", no_argument, NULL, 'q'}, {0}};
    const char *out = NULL;
    demo *d = calloc(1, sizeof *d);
    if (d == NULL) {
        return gt_cli_fail("demo", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    d->quiet = gt_cli.quiet;
    int c;
    while ((c = getopt_long(argc, argv, "o:q", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'q': d->quiet = true; break;
        default: free(d); return gt_cli_usage("demo", "unknown option");
        }
    }
    if (optind != argc) {
        free(d);
        return gt_cli_usage("demo", "unexpected argument '%s'", argv[optind]);
    }
    d->t_total = gt_now_seconds();
    gt_err err = prepare_dir(d, out);
    if (err.code == GT_E_NONE) {
        say(d, "gputravel demo: one data holder seals its text (work folder %s)\n", d->dir);
    }
    gt_err (*const order[])(demo *) = {step_corpus, step_tokenize, step_keygen, step_seal,
                                       step_verify, step_tamper, step_unseal};
    for (size_t i = 0; i < sizeof order / sizeof order[0] && err.code == GT_E_NONE; i++) {
        err = order[i](d);
    }
    gt_holder_keys_wipe(&d->holder);
    gt_manifest_free(&d->manifest);
    free(d->text);
    int rc = GT_EXIT_OK;
    if (err.code != GT_E_NONE) {
        rc = gt_cli_fail("demo", err);
    } else {
        printf("%sdemo OK: sealed, verified, tamper caught, unsealed identically (%.2f s, in %s)\n",
               d->quiet ? "" : "\n", gt_now_seconds() - d->t_total, d->dir);
    }
    free(d);
    return rc;
}
