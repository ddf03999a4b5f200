// gputravel keygen: a holder's key folder (Ed25519 identity, dataset key, X25519 recipient key),
// files mode 0600.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>

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

int gt_cmd_keygen(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"force", no_argument, NULL, 'f'},
        {"add-recipient-key", no_argument, NULL, 'r'}, {0}};
    const char *out = NULL;
    bool force = false, recipient_only = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:fr", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'f': force = true; break;
        case 'r': recipient_only = true; break;
        default: return gt_cli_usage("keygen", "unknown option");
        }
    }
    if (out == NULL || optind != argc) {
        return gt_cli_usage("keygen", out == NULL ? "--out DIR is required" : "unexpected argument");
    }
    uint8_t rpub[GT_X25519_BYTES] = {0};
    char hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    if (recipient_only) {
        gt_err err = gt_keydir_recipient_generate(out, force, rpub);
        if (err.code != GT_E_NONE) {
            return gt_cli_fail("keygen", err);
        }
        gt_hex_encode(hex, sizeof hex, rpub, sizeof rpub);
        printf("added a recipient key to %s (identity and dataset key unchanged)\n", out);
        printf("recipient public key (X25519): %s\n", hex);
        return GT_EXIT_OK;
    }
    gt_holder_keys keys;
    gt_err err = gt_keydir_generate(out, force, &keys);
    if (err.code == GT_E_STATE && !force) {
        fprintf(stderr, "gputravel keygen: note: a key folder made before recipient keys "
                        "gets one with --add-recipient-key\n");
    }
    if (err.code == GT_E_NONE) {
        err = gt_recipient_pub_load(out, rpub);
    }
    if (err.code != GT_E_NONE) {
        return gt_cli_fail("keygen", err);
    }
    gt_hex_encode(hex, sizeof hex, keys.holder_pub, sizeof keys.holder_pub);
    gt_holder_keys_wipe(&keys);
    printf("wrote a holder identity, a dataset key and a recipient key to %s\n", out);
    printf("holder public key (Ed25519):    %s\n", hex);
    gt_hex_encode(hex, sizeof hex, rpub, sizeof rpub);
    printf("recipient public key (X25519):  %s\n", hex);
    return GT_EXIT_OK;
}
