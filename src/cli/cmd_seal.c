// gputravel seal: llm.c shards -> sealed dataset (signed manifest + AES-256-GCM chunks).
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>
#include <stdlib.h>

static void usage(void)
{
    printf("usage: gputravel seal SHARD... --key DIR --out DSDIR [--chunk-size 512MiB]\n"
           "                      [--vocab N] [--threads 0|1] [--format 1|2]\n"
           "                      [--segment-size 4MiB]\n"
           "\n"
           "Seals the tokens of the given llm.c shards (concatenated, in order) into DSDIR:\n"
           "a manifest signed with the holder's Ed25519 key and one AES-256-GCM chunk file per\n"
           "--chunk-size bytes of tokens, each under its own HKDF-derived key. Streams in constant\n"
           "memory; DSDIR appears only when complete. No key is needed to verify it\n"
           "(gputravel verify-dataset); unsealing needs the dataset key.\n"
           "\n"
           "  -k, --key DIR          holder key folder (gputravel keygen)\n"
           "  -o, --out DSDIR        output folder (must not exist, or be empty)\n"
           "  -c, --chunk-size SIZE  plaintext bytes per chunk, even (default 512MiB)\n"
           "      --vocab N          reject tokens >= N (default 50257, GPT-2; 65536 = no check)\n"
           "      --threads N        0: the pipeline (default: the cipher reads the mapped input,\n"
           "                         hashing and writing on two more threads); 1: one thread,\n"
           "                         read() and encrypt in place (the reference; same bytes)\n"
           "      --format N         chunk files: 2 = GTCHUNK2 (default), independently tagged\n"
           "                         segments that a device opens on several cores; 1 =\n"
           "                         GTCHUNK1, one GCM message per chunk (docs/formats.md)\n"
           "      --segment-size S   format 2: plaintext bytes per segment, a multiple of 4KiB\n"
           "                         up to 1GiB (default 4MiB)\n"
           "  -h, --help             this help\n");
}

typedef struct {
    const char *key_dir;
    gt_seal_params p;  // shards, out_dir, chunk_size, vocab_size, progress, threads
} seal_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, seal_options *o)
{
    static const struct option opts[] = {{"key", required_argument, NULL, 'k'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"chunk-size", required_argument, NULL, 'c'},
                                         {"vocab", required_argument, NULL, 'V'},
                                         {"threads", required_argument, NULL, 'T'},
                                         {"format", required_argument, NULL, 'F'},
                                         {"segment-size", required_argument, NULL, 'S'},
                                         {0}};
    *o = (seal_options){.p = {.chunk_size = GT_SEAL_DEFAULT_CHUNK_BYTES, .vocab_size = 50257,
                              .progress = !gt_cli.quiet}};
    gt_seal_params *p = &o->p;
    int c;
    while ((c = getopt_long(argc, argv, "k:o:c:", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o->key_dir = optarg; break;
        case 'o': p->out_dir = optarg; break;
        case 'c':
            if (!gt_is_ok(gt_parse_size(optarg, &p->chunk_size)) || p->chunk_size < 2 ||
                p->chunk_size % 2 != 0 || p->chunk_size > GT_SEAL_MAX_CHUNK_BYTES) {
                return gt_cli_usage("seal", "--chunk-size %s: an even size from 2 bytes to 16GiB",
                                    optarg);
            }
            break;
        case 'V':
            if (!gt_is_ok(gt_cli_parse_u32("--vocab", optarg, 1, 65536, &p->vocab_size))) {
                return gt_cli_usage("seal", "--vocab %s: a number from 1 to 65536", optarg);
            }
            break;
        case 'T':
            if (!gt_is_ok(gt_cli_parse_int("--threads", optarg, 0, 1, &p->threads))) {
                return gt_cli_usage("seal", "--threads %s: 0 (the pipeline) or 1", optarg);
            }
            break;
        case 'F':
            if (!gt_is_ok(gt_cli_parse_int("--format", optarg, 1, 2, &p->format))) {
                return gt_cli_usage("seal", "--format %s: 1 (GTCHUNK1) or 2 (GTCHUNK2)", optarg);
            }
            break;
        case 'S': {
            uint64_t seg = 0;
            if (!gt_is_ok(gt_parse_size(optarg, &seg)) || seg == 0 || seg > UINT32_MAX ||
                !gt_is_ok(gt_chunk_seg_check((uint32_t)seg))) {
                return gt_cli_usage("seal", "--segment-size %s: a multiple of 4KiB up to 1GiB",
                                    optarg);
            }
            p->segment_bytes = (uint32_t)seg;
            break;
        }
        default: return gt_cli_usage("seal", "unknown option");
        }
    }
    if (o->key_dir == NULL || p->out_dir == NULL || optind == argc) {
        return gt_cli_usage("seal", "needs SHARD..., --key DIR and --out DSDIR");
    }
    if (p->segment_bytes != 0 && p->format != 2) {
        return gt_cli_usage("seal", "--segment-size needs --format 2");
    }
    p->shards = (const char *const *)argv + optind;
    p->shard_count = (size_t)(argc - optind);
    return GT_EXIT_OK;
}

static gt_err run(const seal_options *o, gt_seal_result *r, double *seconds)
{
    gt_holder_keys keys;
    GT_TRY(gt_keydir_load(o->key_dir, &keys));
    double t0 = gt_now_seconds();
    gt_err err = gt_seal(&o->p, &keys, r);
    *seconds = gt_now_seconds() - t0;
    gt_holder_keys_wipe(&keys);
    return err;
}

static void print_sealed(const seal_options *o, const gt_seal_result *r, double dt)
{
    const gt_seal_params *p = &o->p;
    char id[2 * GT_DATASET_ID_BYTES + 1], size[32], chunk[32], rate[32];
    gt_hex_encode(id, sizeof id, r->dataset_id, sizeof r->dataset_id);
    gt_format_size(size, sizeof size, r->plaintext_bytes);
    gt_format_size(chunk, sizeof chunk, p->chunk_size);
    gt_format_size(rate, sizeof rate, dt > 0 ? (uint64_t)((double)r->plaintext_bytes / dt) : 0);
    printf("sealed %llu tokens (%s) from %zu shard%s into %u chunk%s of up to %s: %s\n",
           (unsigned long long)r->token_count, size, p->shard_count,
           p->shard_count == 1 ? "" : "s", r->chunk_count, r->chunk_count == 1 ? "" : "s", chunk,
           p->out_dir);
    printf("dataset id %s, %.2f s (%s/s)\n", id, dt, rate);
}

int gt_cmd_seal(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    seal_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    gt_seal_result r;
    double dt = 0;
    // Ctrl-C stops at the next slot, and the staging folder is removed; a folder a crash left
    // (DSDIR.tmp-*) is named.
    gt_interrupt_install();
    gt_err err = gt_stale_temps(o.p.out_dir, false, NULL, NULL);
    if (gt_is_ok(err)) {
        err = run(&o, &r, &dt);
    }
    if (gt_interrupted()) {
        int ignored = gt_cli_fail("seal", err);  // the message; the status says which signal
        (void)ignored;
        return 128 + gt_interrupted();
    }
    if (!gt_is_ok(err)) {
        int status = gt_cli_fail("seal", err);
        for (size_t i = 0; err.code == GT_E_FORMAT && i < o.p.shard_count; i++) {
            gt_cli_file_hint("seal", o.p.shards[i], "a token shard");
        }
        return status;
    }
    print_sealed(&o, &r, dt);
    return GT_EXIT_OK;
}
