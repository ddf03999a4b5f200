// gputravel keys show: a key folder's public parts, in the forms the agreement wants. Reads only
// the .pub files: nothing secret is opened.
#include "cli.h"

#include <gputravel/seal.h>

#include <getopt.h>
#include <string.h>
#include <sys/stat.h>

static void usage(void)
{
    printf("usage: gputravel keys show DIR [--json]\n"
           "\n"
           "Prints the public keys of a holder key folder (gputravel keygen) as an agreement's\n"
           "holder entry spells them (docs/agreement.md):\n"
           "  identity_key   64 hex digits: the Ed25519 key that signs the holder's datasets and\n"
           "                 ledger (" GT_KEYDIR_HOLDER_PUBLIC ")\n"
           "  recipient_key  64 hex digits: the X25519 key a sealed checkpoint is wrapped to\n"
           "                 (" GT_KEYDIR_RECIPIENT_PUBLIC "; needed for output.recipients)\n"
           "Only the .pub files are read; the secrets are never opened.\n"
           "\n"
           "  --json      one JSON object {\"identity_key\", \"recipient_key\"} (recipient_key\n"
           "              null when the folder has none)\n"
           "  -h, --help  this help\n");
}

int gt_cmd_keys(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {0}};
    bool json = false;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 'j') {
            return gt_cli_usage("keys", "unknown option");
        }
        json = true;
    }
    if (optind >= argc || strcmp(argv[optind], "show") != 0) {
        return gt_cli_usage("keys", optind >= argc ? "a subcommand is required: show DIR"
                                                   : "unknown subcommand (expected: show DIR)");
    }
    if (optind + 2 != argc) {
        return gt_cli_usage("keys", optind + 1 == argc ? "show needs the key folder DIR"
                                                       : "unexpected argument after DIR");
    }
    const char *dir = argv[optind + 1];
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return gt_cli_fail("keys", gt_errf(GT_E_NOTFOUND, "%s is not a folder (make a key folder "
                                                          "with 'gputravel keygen --out DIR')",
                                           dir));
    }
    uint8_t id[GT_ED25519_PUBLIC_BYTES] = {0}, rk[GT_X25519_BYTES] = {0};
    gt_err err = gt_holder_pub_load(dir, id);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("keys", gt_err_wrap(err, "%s is no key folder (make one with "
                                                    "'gputravel keygen --out DIR')", dir));
    }
    char rpath[4200];
    err = gt_path_join(rpath, sizeof rpath, dir, GT_KEYDIR_RECIPIENT_PUBLIC);
    bool has_rk = gt_is_ok(err) && gt_path_exists(rpath);
    if (has_rk) {
        err = gt_recipient_pub_load(dir, rk);
    }
    if (!gt_is_ok(err)) {
        return gt_cli_fail("keys", err);
    }
    char id_hex[2 * sizeof id + 1], rk_hex[2 * sizeof rk + 1];
    gt_hex_encode(id_hex, sizeof id_hex, id, sizeof id);
    gt_hex_encode(rk_hex, sizeof rk_hex, rk, sizeof rk);
    if (json) {
        printf("{\"identity_key\": \"%s\", \"recipient_key\": %s%s%s}\n", id_hex,
               has_rk ? "\"" : "", has_rk ? rk_hex : "null", has_rk ? "\"" : "");
        return GT_EXIT_OK;
    }
    printf("key folder %s\n", dir);
    printf("  \"identity_key\": \"%s\"\n", id_hex);
    if (has_rk) {
        printf("  \"recipient_key\": \"%s\"\n", rk_hex);
    } else {
        printf("  recipient_key: none (add one with 'gputravel keygen --out %s "
               "--add-recipient-key'; needed to receive a sealed checkpoint)\n", dir);
    }
    return GT_EXIT_OK;
}
