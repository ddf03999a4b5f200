// gputravel open-checkpoint: a recipient opens a sealed checkpoint with its own key folder.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/holder.h>
#include <gputravel/travel.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define CMD "open-checkpoint"

static void usage(void)
{
    printf("usage: gputravel open-checkpoint FILE --key DIR --out model.bin [--agreement A.json]\n"
           "                                 [--ledger LEDGER] [--force]\n"
           "\n"
           "Opens a checkpoint that collaborative training sealed for the agreement's recipients\n"
           "(docs/formats.md \"Sealed checkpoint\") with this holder's recipient key (X25519,\n"
           "DIR/" GT_KEYDIR_RECIPIENT_SECRET "), and writes the llm.c fp32 checkpoint it holds\n"
           "(weights only) to --out, mode 0600. The signer's signature and the body are\n"
           "authenticated before the file appears under its name: on any failure (not a\n"
           "recipient, wrong key, tampered or truncated file, a signer the ledger does not\n"
           "know) nothing is written. `gputravel inspect FILE` shows the header (recipients,\n"
           "step, agreement hash, signer key) without a key.\n"
           "\n"
           "Who sealed it: the file is signed by the trainer's per-run signing key, which the\n"
           "trainer presented to every holder inside the attested channel. With --ledger, this\n"
           "holder's ledger must verify under this key folder's identity key and hold a\n"
           "\"session\" entry with exactly that signing key (under the checkpoint's agreement):\n"
           "then the checkpoint was sealed by the trainer this holder appraised. Without it, the\n"
           "signature is still checked, but not who made it.\n"
           "\n"
           "  -k, --key DIR          this holder's key folder (gputravel keygen)\n"
           "  -o, --out FILE         where the llm.c checkpoint goes (refused if it exists)\n"
           "  -a, --agreement FILE   also check the checkpoint was sealed under this agreement\n"
           "                         and for exactly its recipients and their keys\n"
           "  -l, --ledger FILE      this holder's ledger: the signer must be a trainer it served\n"
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

// The checkpoint's signer must be a trainer this holder served: its ledger (pinned to the key
// folder's identity key) holds a session with that signing key, under the same agreement.
static gt_err check_ledger(const gt_sckpt_header *h, const char *ledger, const char *keydir,
                           gt_ledger_session *ses)
{
    gt_holder_keys hk;
    GT_TRY(gt_keydir_load(keydir, &hk));
    uint8_t holder_pub[GT_ED25519_PUBLIC_BYTES];
    memcpy(holder_pub, hk.holder_pub, sizeof holder_pub);
    gt_holder_keys_wipe(&hk);
    char signer[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(signer, sizeof signer, h->signer_pub, sizeof h->signer_pub);
    // Whose ledger is it? (verified whole: hashes, chain, signatures under its genesis key)
    gt_ledger_summary sum;
    GT_ENSURE(gt_path_exists(ledger), GT_E_NOTFOUND, "%s: no such ledger", ledger);
    GT_TRY(gt_err_wrap(gt_ledger_verify_file(ledger, NULL, NULL, &sum), "ledger"));
    GT_ENSURE(gt_ct_equal(sum.holder_key, holder_pub, GT_ED25519_PUBLIC_BYTES), GT_E_POLICY,
              "%s is not this holder's ledger: it is signed by another holder key than %s's "
              "identity key", ledger, keydir);
    gt_err err = gt_ledger_find_session(ledger, holder_pub, h->signer_pub, ses);
    GT_ENSURE(err.code != GT_E_NOTFOUND, GT_E_POLICY,
              "signer %.16s... is not a trainer this holder served: %s holds no session with "
              "that signing key", signer, ledger);
    GT_TRY(gt_err_wrap(err, "ledger"));
    GT_ENSURE(gt_ct_equal(ses->agreement, h->agreement_hash, GT_SHA256_BYTES), GT_E_POLICY,
              "signer %.16s... served this holder under another agreement than the "
              "checkpoint names (ledger entry %llu)", signer, (unsigned long long)ses->seq);
    return GT_OK;
}

typedef struct {
    const char *file, *key, *out, *agreement, *ledger;
    bool force;
} open_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, open_options *o)
{
    static const struct option opts[] = {{"key", required_argument, NULL, 'k'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"agreement", required_argument, NULL, 'a'},
                                         {"ledger", required_argument, NULL, 'l'},
                                         {"force", no_argument, NULL, 'f'},
                                         {0}};
    memset(o, 0, sizeof *o);
    int c;
    while ((c = getopt_long(argc, argv, "k:o:a:l:f", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o->key = optarg; break;
        case 'o': o->out = optarg; break;
        case 'a': o->agreement = optarg; break;
        case 'l': o->ledger = optarg; break;
        case 'f': o->force = true; break;
        default: return gt_cli_usage(CMD, "unknown option");
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage(CMD, "needs exactly one sealed checkpoint FILE");
    }
    if (o->key == NULL || o->out == NULL) {
        return gt_cli_usage(CMD, "--key DIR and --out FILE are required");
    }
    o->file = argv[optind];
    return GT_EXIT_OK;
}

// What an opened checkpoint tells: its header, which recipient opened it, the ledger session.
typedef struct {
    gt_sckpt_header h;
    uint32_t me;
    gt_ledger_session ses;
} opened;

static gt_err run(const open_options *o, opened *r)
{
    GT_ENSURE(o->force || !gt_path_exists(o->out), GT_E_STATE, "%s exists (--force replaces it)",
              o->out);
    gt_recipient_keys k;
    memset(&k, 0, sizeof k);
    gt_err err = GT_OK;
    uint8_t signer[GT_ED25519_PUBLIC_BYTES] = {0};
    GT_TRY_GOTO(err, gt_keydir_recipient_load(o->key, &k), done);
    // Keyless checks first, so a checkpoint from another agreement, or from a signer this
    // holder never served, is refused before any decryption.
    GT_TRY_GOTO(err, gt_sckpt_read_header(o->file, &r->h), done);
    memcpy(signer, r->h.signer_pub, sizeof signer);
    if (o->agreement != NULL) {
        GT_TRY_GOTO(err, gt_err_wrap(check_agreement(&r->h, o->agreement), "%s", o->file), done);
    }
    if (o->ledger != NULL) {
        GT_TRY_GOTO(err, gt_err_wrap(check_ledger(&r->h, o->ledger, o->key, &r->ses), "%s",
                                     o->file),
                    done);
    }
    // Pinned to the signer read above: a file swapped in meanwhile is refused, not opened.
    GT_TRY_GOTO(err, gt_sckpt_open(o->file, &k, signer, o->out, &r->h, &r->me), done);
done:
    gt_recipient_keys_wipe(&k);
    return err;
}

static void print_opened(const open_options *o, const opened *r)
{
    const gt_sckpt_header *h = &r->h;
    char hash[2 * GT_SHA256_BYTES + 1], signer_hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, h->agreement_hash, sizeof h->agreement_hash);
    gt_hex_encode(signer_hex, sizeof signer_hex, h->signer_pub, sizeof h->signer_pub);
    printf("opened %s as recipient '%s' (%u of %u): step %llu, GPT-2 L=%u C=%u NH=%u V=%u "
           "maxT=%u\n",
           o->file, h->recipients[r->me].name, r->me + 1, h->recipient_count,
           (unsigned long long)h->step, h->model.num_layers, h->model.channels,
           h->model.num_heads, h->model.vocab_size, h->model.max_seq_len);
    printf("agreement %s%s\n", hash, o->agreement ? " (matches --agreement)" : "");
    if (o->ledger != NULL) {
        printf("signed by %.16s...: the trainer '%s' this holder served (ledger %s, entry %llu%s%s)"
               "\n", signer_hex, r->ses.trainer, o->ledger, (unsigned long long)r->ses.seq,
               r->ses.appraisal[0] ? "; appraised: " : "", r->ses.appraisal);
    } else {
        printf("signed by %.16s... (signature verified); this signer key was NOT checked against "
               "any ledger (--ledger): who sealed it is not proved\n", signer_hex);
    }
    printf("wrote %s (%llu bytes, llm.c fp32 checkpoint, weights only)\n", o->out,
           (unsigned long long)h->plaintext_len);
}

int gt_cmd_open_checkpoint(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    open_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    opened *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return gt_cli_fail(CMD, gt_errf(GT_E_NOMEM, "out of memory"));
    }
    gt_err err = run(&o, r);
    if (gt_is_ok(err)) {
        print_opened(&o, r);
    }
    free(r);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail(CMD, err);
}
