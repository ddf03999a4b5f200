// gputravel verify-dataset: a sealed dataset's manifest signature and every chunk, no key needed.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>

static void usage(void)
{
    printf("usage: gputravel verify-dataset DSDIR [--holder PUB] [--json]\n"
           "\n"
           "Checks, without any key, that the manifest's Ed25519 signature verifies, and that\n"
           "every chunk file is present, exactly the size the manifest says, names this dataset\n"
           "and its own index, and hashes (SHA-256) to the value the manifest signed. Exits 0\n"
           "only if all of it holds.\n"
           "\n"
           "      --holder PUB   also require the manifest to be signed by this holder: a key\n"
           "                     folder, a " GT_KEYDIR_HOLDER_PUBLIC " file or 64 hex digits\n"
           "      --json         the result as one JSON object on stdout\n"
           "  -h, --help         this help\n");
}

typedef struct {
    const char *dsdir, *holder;
    bool json;
} vd_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, vd_options *o)
{
    static const struct option opts[] = {{"holder", required_argument, NULL, 'H'},
                                         {"json", no_argument, NULL, 'j'}, {0}};
    *o = (vd_options){0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'H': o->holder = optarg; break;
        case 'j': o->json = true; break;
        default: return gt_cli_usage("verify-dataset", "unknown option");
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage("verify-dataset", "needs exactly one DSDIR");
    }
    o->dsdir = argv[optind];
    return GT_EXIT_OK;
}

// Verifies the dataset; m is its manifest (the caller frees it when this succeeds).
static gt_err run(const vd_options *o, gt_manifest *m, double *seconds)
{
    uint8_t pub[GT_ED25519_PUBLIC_BYTES];
    if (o->holder != NULL) {
        GT_TRY(gt_err_wrap(gt_holder_pub_load(o->holder, pub), "--holder"));
    }
    double t0 = gt_now_seconds();
    gt_err err = gt_dataset_verify(o->dsdir, o->holder ? pub : NULL, !gt_cli.quiet, m);
    *seconds = gt_now_seconds() - t0;
    return err;
}

static void print_verified(const vd_options *o, const gt_manifest *m, double dt)
{
    char id[2 * GT_DATASET_ID_BYTES + 1], hk[2 * GT_ED25519_PUBLIC_BYTES + 1], size[32];
    gt_hex_encode(id, sizeof id, m->dataset_id, sizeof m->dataset_id);
    gt_hex_encode(hk, sizeof hk, m->holder_pub, sizeof m->holder_pub);
    gt_format_size(size, sizeof size, 2 * m->token_count);
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "dataset", o->dsdir);
        cJSON_AddBoolToObject(j, "verified", true);
        cJSON_AddStringToObject(j, "dataset_id", id);
        cJSON_AddStringToObject(j, "holder_key", hk);
        cJSON_AddBoolToObject(j, "holder_pinned", o->holder != NULL);
        cJSON_AddNumberToObject(j, "chunks", m->chunk_count);
        cJSON_AddNumberToObject(j, "tokens", (double)m->token_count);
        cJSON_AddNumberToObject(j, "vocab", m->vocab_size);
        cJSON_AddNumberToObject(j, "seconds", dt);
        char *text = cJSON_PrintUnformatted(j);
        printf("%s\n", text ? text : "{}");
        cJSON_free(text);
        cJSON_Delete(j);
        return;
    }
    printf("OK: %s: signature valid, %u chunk%s (%s) intact (%.2f s)\n", o->dsdir,
           m->chunk_count, m->chunk_count == 1 ? "" : "s", size, dt);
    printf("dataset id %s, holder %s%s\n", id, hk, o->holder ? " (as expected)" : "");
}

int gt_cmd_verify_dataset(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    vd_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    gt_manifest m;
    double dt = 0;
    gt_err err = run(&o, &m, &dt);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("verify-dataset", err);
    }
    print_verified(&o, &m, dt);
    gt_manifest_free(&m);
    return GT_EXIT_OK;
}
