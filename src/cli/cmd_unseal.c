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

typedef struct {
    const char *dsdir, *key_dir, *out;
} unseal_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, unseal_options *o)
{
    static const struct option opts[] = {
        {"key", required_argument, NULL, 'k'}, {"out", required_argument, NULL, 'o'}, {0}};
    *o = (unseal_options){0};
    int c;
    while ((c = getopt_long(argc, argv, "k:o:", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o->key_dir = optarg; break;
        case 'o': o->out = optarg; break;
        default: return gt_cli_usage("unseal", "unknown option");
        }
    }
    if (o->key_dir == NULL || o->out == NULL || optind + 1 != argc) {
        return gt_cli_usage("unseal", "needs DSDIR, --key DIR and --out SHARD");
    }
    o->dsdir = argv[optind];
    return GT_EXIT_OK;
}

// Unseals into --out; m is the dataset's manifest (the caller frees it when this succeeds).
static gt_err run(const unseal_options *o, gt_manifest *m, double *seconds)
{
    gt_holder_keys keys;
    GT_TRY(gt_keydir_load(o->key_dir, &keys));
    double t0 = gt_now_seconds();
    gt_err err = gt_unseal(o->dsdir, &keys, o->out, !gt_cli.quiet, m);
    *seconds = gt_now_seconds() - t0;
    gt_holder_keys_wipe(&keys);
    if (err.code == GT_E_AUTH && strstr(err.msg, "wrong dataset key") != NULL) {
        return gt_err_wrap(err, "%s", o->key_dir);
    }
    return err;
}

static void print_unsealed(const unseal_options *o, const gt_manifest *m, double dt)
{
    char size[32], rate[32];
    uint64_t bytes = 2 * m->token_count;
    gt_format_size(size, sizeof size, bytes);
    gt_format_size(rate, sizeof rate, dt > 0 ? (uint64_t)((double)bytes / dt) : 0);
    printf("unsealed %llu tokens (%s) from %u authenticated chunk%s into %s: %.2f s (%s/s)\n",
           (unsigned long long)m->token_count, size, m->chunk_count,
           m->chunk_count == 1 ? "" : "s", o->out, dt, rate);
}

int gt_cmd_unseal(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    unseal_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    gt_manifest m;
    double dt = 0;
    gt_interrupt_install();  // Ctrl-C stops at the next slot; the partial output is removed
    gt_err err = gt_stale_temps(o.out, false, NULL, NULL);
    if (gt_is_ok(err)) {
        err = run(&o, &m, &dt);
    }
    if (!gt_is_ok(err)) {
        int status = gt_cli_fail("unseal", err);
        return gt_interrupted() ? 128 + gt_interrupted() : status;
    }
    print_unsealed(&o, &m, dt);
    gt_manifest_free(&m);
    return GT_EXIT_OK;
}
