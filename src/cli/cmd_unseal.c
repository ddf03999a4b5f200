// gputravel unseal: sealed dataset -> one llm.c shard, published only once authenticated.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>
#include <string.h>

static void usage(void)
{
    printf("usage: gputravel unseal DSDIR --key DIR --out SHARD\n"
           "\n"
           "Checks the manifest signature and that DIR holds this dataset's key, then decrypts\n"
           "every chunk into one llm.c token shard (mode 0600). The shard is written under a\n"
           "temporary name and appears as SHARD only after every chunk authenticated; on any\n"
           "failure nothing is left behind.\n"
           "\n"
           "  -k, --key DIR     holder key folder holding the dataset key\n"
           "  -o, --out SHARD   output shard\n"
           "  -h, --help        this help\n");
}

int gt_cmd_unseal(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"key", required_argument, NULL, 'k'}, {"out", required_argument, NULL, 'o'}, {0}};
    const char *key_dir = NULL, *out = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "k:o:", opts, NULL)) != -1) {
        switch (c) {
        case 'k': key_dir = optarg; break;
        case 'o': out = optarg; break;
        default: return gt_cli_usage("unseal", "unknown option");
        }
    }
    if (key_dir == NULL || out == NULL || optind + 1 != argc) {
        return gt_cli_usage("unseal", "needs DSDIR, --key DIR and --out SHARD");
    }
    const char *dsdir = argv[optind];
    gt_holder_keys keys;
    gt_err err = gt_keydir_load(key_dir, &keys);
    if (err.code != GT_E_NONE) {
        return gt_cli_fail("unseal", err);
    }
    gt_manifest m;
    double t0 = gt_now_seconds();
    err = gt_unseal(dsdir, &keys, out, !gt_cli.quiet, &m);
    double dt = gt_now_seconds() - t0;
    gt_holder_keys_wipe(&keys);
    if (err.code != GT_E_NONE) {
        if (err.code == GT_E_AUTH && strstr(err.msg, "wrong dataset key") != NULL) {
            err = gt_err_wrap(err, "%s", key_dir);
        }
        return gt_cli_fail("unseal", err);
    }
    char size[32], rate[32];
    uint64_t bytes = 2 * m.token_count;
    gt_format_size(size, sizeof size, bytes);
    gt_format_size(rate, sizeof rate, dt > 0 ? (uint64_t)((double)bytes / dt) : 0);
    printf("unsealed %llu tokens (%s) from %u authenticated chunk%s into %s: %.2f s (%s/s)\n",
           (unsigned long long)m.token_count, size, m.chunk_count, m.chunk_count == 1 ? "" : "s",
           out, dt, rate);
    gt_manifest_free(&m);
    return GT_EXIT_OK;
}
