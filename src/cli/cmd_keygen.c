// gputravel keygen: a holder's key folder (Ed25519 identity + dataset key), files mode 0600.
#include "cli.h"

#include <gputravel/data.h>

#include <getopt.h>

static void usage(void)
{
    printf("usage: gputravel keygen --out DIR [--force]\n"
           "\n"
           "Creates a holder key folder: an Ed25519 identity that signs sealed-dataset manifests\n"
           "(" GT_KEYDIR_HOLDER_SECRET ", " GT_KEYDIR_HOLDER_PUBLIC ") and a 32-byte dataset key\n"
           "from which every chunk key is derived (" GT_KEYDIR_DATASET_KEY "). The folder is\n"
           "mode 0700, the files 0600, each written atomically (docs/formats.md).\n"
           "\n"
           "  -o, --out DIR   key folder (created if missing)\n"
           "  -f, --force     replace existing keys (datasets sealed with them become unreadable)\n"
           "  -h, --help      this help\n");
}

int gt_cmd_keygen(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"force", no_argument, NULL, 'f'}, {0}};
    const char *out = NULL;
    bool force = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:f", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'f': force = true; break;
        default: return gt_cli_usage("keygen", "unknown option");
        }
    }
    if (out == NULL || optind != argc) {
        return gt_cli_usage("keygen", out == NULL ? "--out DIR is required" : "unexpected argument");
    }
    gt_holder_keys keys;
    gt_err err = gt_keydir_generate(out, force, &keys);
    if (err.code != GT_E_NONE) {
        return gt_cli_fail("keygen", err);
    }
    char pub[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(pub, sizeof pub, keys.holder_pub, sizeof keys.holder_pub);
    gt_holder_keys_wipe(&keys);
    printf("wrote a holder identity and a dataset key to %s\n", out);
    printf("holder public key (Ed25519): %s\n", pub);
    return GT_EXIT_OK;
}
