// gputravel keygen: a holder's key folder (Ed25519 identity, dataset key, X25519 recipient key),
// files mode 0600.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>
#include <string.h>

static void usage(void)
{
    printf("usage: gputravel keygen --out DIR [--force]\n"
           "       gputravel keygen --out DIR --add-recipient-key [--force]\n"
           "\n"
           "Creates a holder key folder: an Ed25519 identity that signs sealed-dataset manifests\n"
           "(" GT_KEYDIR_HOLDER_SECRET ", " GT_KEYDIR_HOLDER_PUBLIC "), a 32-byte dataset key\n"
           "from which every chunk key is derived (" GT_KEYDIR_DATASET_KEY ") and an X25519\n"
           "recipient key to which trained checkpoints are sealed (" GT_KEYDIR_RECIPIENT_SECRET ",\n"
           GT_KEYDIR_RECIPIENT_PUBLIC "; its public key is the agreement's \"recipient_key\").\n"
           "The recipient key is generated on its own, not derived from the identity. The folder\n"
           "is mode 0700, the files 0600, each written atomically (docs/formats.md).\n"
           "\n"
           "  -o, --out DIR             key folder (created if missing)\n"
           "  -r, --add-recipient-key   only add a recipient key to an existing folder (one made\n"
           "                            before recipient keys existed); other keys are kept\n"
           "  -f, --force               replace existing keys (datasets sealed with them, or\n"
           "                            checkpoints sealed to them, become unreadable)\n"
           "  -h, --help                this help\n");
}

typedef struct {
    const char *out;
    bool force, recipient_only;
} keygen_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, keygen_options *o)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"force", no_argument, NULL, 'f'},
        {"add-recipient-key", no_argument, NULL, 'r'}, {0}};
    *o = (keygen_options){0};
    int c;
    while ((c = getopt_long(argc, argv, "o:fr", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'f': o->force = true; break;
        case 'r': o->recipient_only = true; break;
        default: return gt_cli_usage("keygen", "unknown option");
        }
    }
    if (o->out == NULL || optind != argc) {
        return gt_cli_usage("keygen",
                            o->out == NULL ? "--out DIR is required" : "unexpected argument");
    }
    return GT_EXIT_OK;
}

// The public halves of what was written (holder_pub stays zero with --add-recipient-key).
typedef struct {
    uint8_t holder_pub[GT_ED25519_PUBLIC_BYTES];
    uint8_t recipient_pub[GT_X25519_BYTES];
} keygen_result;

static gt_err run(const keygen_options *o, keygen_result *r)
{
    if (o->recipient_only) {
        return gt_keydir_recipient_generate(o->out, o->force, r->recipient_pub);
    }
    gt_holder_keys keys;
    gt_err err = gt_keydir_generate(o->out, o->force, &keys);
    if (err.code == GT_E_STATE && !o->force) {
        fprintf(stderr, "gputravel keygen: note: a key folder made before recipient keys "
                        "gets one with --add-recipient-key\n");
    }
    GT_TRY(err);
    memcpy(r->holder_pub, keys.holder_pub, sizeof r->holder_pub);
    gt_holder_keys_wipe(&keys);
    return gt_recipient_pub_load(o->out, r->recipient_pub);
}

static void print_keys(const keygen_options *o, const keygen_result *r)
{
    char hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    if (o->recipient_only) {
        gt_hex_encode(hex, sizeof hex, r->recipient_pub, sizeof r->recipient_pub);
        printf("added a recipient key to %s (identity and dataset key unchanged)\n", o->out);
        printf("recipient public key (X25519): %s\n", hex);
        return;
    }
    gt_hex_encode(hex, sizeof hex, r->holder_pub, sizeof r->holder_pub);
    printf("wrote a holder identity, a dataset key and a recipient key to %s\n", o->out);
    printf("holder public key (Ed25519):    %s\n", hex);
    gt_hex_encode(hex, sizeof hex, r->recipient_pub, sizeof r->recipient_pub);
    printf("recipient public key (X25519):  %s\n", hex);
}

int gt_cmd_keygen(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    keygen_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    keygen_result r = {0};
    gt_err err = run(&o, &r);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("keygen", err);
    }
    print_keys(&o, &r);
    return GT_EXIT_OK;
}
