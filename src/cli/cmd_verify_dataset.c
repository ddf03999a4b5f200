// gputravel verify-dataset: a sealed dataset's manifest signature and every chunk, no key needed.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>

static void usage(void)
{
    printf("usage: gputravel verify-dataset DSDIR [--holder PUB]\n"
           "\n"
           "Checks, without any key, that the manifest's Ed25519 signature verifies, and that\n"
           "every chunk file is present, exactly the size the manifest says, names this dataset\n"
           "and its own index, and hashes (SHA-256) to the value the manifest signed. Exits 0\n"
           "only if all of it holds.\n"
           "\n"
           "      --holder PUB   also require the manifest to be signed by this holder: a key\n"
           "                     folder, a " GT_KEYDIR_HOLDER_PUBLIC " file or 64 hex digits\n"
           "  -h, --help         this help\n");
}

int gt_cmd_verify_dataset(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {{"holder", required_argument, NULL, 'H'}, {0}};
    const char *holder = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'H': holder = optarg; break;
        default: return gt_cli_usage("verify-dataset", "unknown option");
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage("verify-dataset", "needs exactly one DSDIR");
    }
    uint8_t pub[GT_ED25519_PUBLIC_BYTES];
    if (holder != NULL) {
        gt_err e = gt_holder_pub_load(holder, pub);
        if (e.code != GT_E_NONE) {
            return gt_cli_fail("verify-dataset", gt_err_wrap(e, "--holder"));
        }
    }
    gt_manifest m;
    double t0 = gt_now_seconds();
    gt_err err = gt_dataset_verify(argv[optind], holder ? pub : NULL, !gt_cli.quiet, &m);
    double dt = gt_now_seconds() - t0;
    if (err.code != GT_E_NONE) {
        return gt_cli_fail("verify-dataset", err);
    }
    char id[2 * GT_DATASET_ID_BYTES + 1], hk[2 * GT_ED25519_PUBLIC_BYTES + 1], size[32];
    gt_hex_encode(id, sizeof id, m.dataset_id, sizeof m.dataset_id);
    gt_hex_encode(hk, sizeof hk, m.holder_pub, sizeof m.holder_pub);
    gt_format_size(size, sizeof size, 2 * m.token_count);
    printf("OK: %s: signature valid, %u chunk%s (%s) intact (%.2f s)\n", argv[optind],
           m.chunk_count, m.chunk_count == 1 ? "" : "s", size, dt);
    printf("dataset id %s, holder %s%s\n", id, hk, holder ? " (as expected)" : "");
    gt_manifest_free(&m);
    return GT_EXIT_OK;
}
