// gputravel open-checkpoint: a recipient opens a sealed checkpoint with its own key folder.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/travel.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define CMD "open-checkpoint"

static void usage(void)
{
    printf("usage: gputravel open-checkpoint FILE --key DIR --out model.bin [--agreement A.json]\n"
           "                                 [--force]\n"
           "\n"
           "Opens a checkpoint that collaborative training sealed for the agreement's recipients\n"
           "(docs/formats.md \"Sealed checkpoint\") with this holder's recipient key (X25519,\n"
           "DIR/" GT_KEYDIR_RECIPIENT_SECRET "), and writes the llm.c fp32 checkpoint it holds\n"
           "(weights only) to --out, mode 0600. The body is authenticated before the file\n"
           "appears under its name: on any failure (not a recipient, wrong key, tampered or\n"
           "truncated file) nothing is written. `gputravel inspect FILE` shows the header\n"
           "(recipients, step, agreement hash) without a key.\n"
           "\n"
           "  -k, --key DIR          this holder's key folder (gputravel keygen)\n"
           "  -o, --out FILE         where the llm.c checkpoint goes (refused if it exists)\n"
           "  -a, --agreement FILE   also check the checkpoint was sealed under this agreement\n"
           "                         and for exactly its recipients and their keys\n"
           "  -f, --force            replace an existing --out\n"
           "  -h, --help             this help\n");
}

// The header's agreement hash and recipient list must be the agreement's.
static gt_err check_agreement(const gt_sckpt_header *h, const char *path)
{
    gt_agreement *a = calloc(1, sizeof *a);
    GT_ENSURE(a != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_agreement_load(a, path), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(a->hash, h->agreement_hash, GT_SHA256_BYTES), out,
                   GT_E_POLICY, "sealed under another agreement (its hash is not %s's)", path);
    GT_ENSURE_GOTO(err, a->output == GT_OUTPUT_SEALED_CHECKPOINT &&
                            a->recipient_count == h->recipient_count,
                   out, GT_E_POLICY, "the recipients differ from %s's output.recipients", path);
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        const gt_agreement_holder *ah = gt_agreement_find_holder(a, h->recipients[i].name);
        GT_ENSURE_GOTO(err, ah != NULL && ah->has_recipient_key &&
                                strcmp(a->recipients[i], h->recipients[i].name) == 0 &&
                                memcmp(ah->recipient_key, h->recipients[i].pub,
                                       GT_X25519_BYTES) == 0,
                       out, GT_E_POLICY,
                       "recipient %u ('%s') or its key differs from %s's output.recipients", i,
                       h->recipients[i].name, path);
    }
out:
    free(a);
    return err;
}

int gt_cmd_open_checkpoint(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {{"key", required_argument, NULL, 'k'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"agreement", required_argument, NULL, 'a'},
                                         {"force", no_argument, NULL, 'f'},
                                         {0}};
    const char *key = NULL, *out = NULL, *agreement = NULL;
    bool force = false;
    int c;
    while ((c = getopt_long(argc, argv, "k:o:a:f", opts, NULL)) != -1) {
        switch (c) {
        case 'k': key = optarg; break;
        case 'o': out = optarg; break;
        case 'a': agreement = optarg; break;
        case 'f': force = true; break;
        default: return gt_cli_usage(CMD, "unknown option");
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage(CMD, "needs exactly one sealed checkpoint FILE");
    }
    if (key == NULL || out == NULL) {
        return gt_cli_usage(CMD, "--key DIR and --out FILE are required");
    }
    const char *file = argv[optind];
    if (!force && gt_path_exists(out)) {
        return gt_cli_fail(CMD, gt_errf(GT_E_STATE, "%s exists (--force replaces it)", out));
    }
    gt_recipient_keys k;
    gt_sckpt_header *h = calloc(1, sizeof *h);
    if (h == NULL) {
        return gt_cli_fail(CMD, gt_errf(GT_E_NOMEM, "out of memory"));
    }
    uint32_t me = 0;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_keydir_recipient_load(key, &k), done);
    if (agreement != NULL) {
        // Keyless checks first, so a checkpoint from another agreement is refused before any
        // decryption.
        GT_TRY_GOTO(err, gt_sckpt_read_header(file, h), done);
        GT_TRY_GOTO(err, gt_err_wrap(check_agreement(h, agreement), "%s", file), done);
    }
    GT_TRY_GOTO(err, gt_sckpt_open(file, &k, out, h, &me), done);
    char hash[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, h->agreement_hash, sizeof h->agreement_hash);
    printf("opened %s as recipient '%s' (%u of %u): step %llu, GPT-2 L=%u C=%u NH=%u V=%u "
           "maxT=%u\n",
           file, h->recipients[me].name, me + 1, h->recipient_count,
           (unsigned long long)h->step, h->model.num_layers, h->model.channels,
           h->model.num_heads, h->model.vocab_size, h->model.max_seq_len);
    printf("agreement %s%s\n", hash, agreement ? " (matches --agreement)" : "");
    printf("wrote %s (%llu bytes, llm.c fp32 checkpoint, weights only)\n", out,
           (unsigned long long)h->plaintext_len);
done:
    gt_recipient_keys_wipe(&k);
    free(h);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail(CMD, err);
}
