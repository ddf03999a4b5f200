// gputravel program: the training program of an agreement's step (kernels.h "programs"), whose
// SHA-256 an agreement pins as training.program.
#include "cli.h"

#include <gputravel/orchestr.h>
#include <gputravel/train.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("usage: gputravel program --agreement A.json [--out FILE]\n"
           "\n"
           "Records the op sequence of one training step of the agreement's model and batch, as\n"
           "`gputravel train --agreement` runs it (kinds and shapes; docs/security.md), and prints\n"
           "its SHA-256: the value of \"training\": {\"program\": ...} that pins it. With a pinned\n"
           "program the device runs no other op on holder data. When A.json pins one already,\n"
           "says whether it is this one (exit 1 if not).\n"
           "\n"
           "  -a, --agreement FILE   the training agreement\n"
           "  -o, --out FILE         also write the program's bytes there\n"
           "  -h, --help             this help\n");
}

int gt_cmd_program(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {{"agreement", required_argument, NULL, 'a'},
                                         {"out", required_argument, NULL, 'o'}, {0}};
    const char *path = NULL, *out = NULL;
    for (int c; (c = getopt_long(argc, argv, "a:o:", opts, NULL)) != -1;) {
        switch (c) {
        case 'a': path = optarg; break;
        case 'o': out = optarg; break;
        default: return gt_cli_usage("program", "unknown option");
        }
    }
    if (path == NULL || optind != argc) {
        return gt_cli_usage("program", path == NULL ? "--agreement FILE is required"
                                                    : "unexpected argument");
    }
    gt_agreement *a = calloc(1, sizeof *a);
    gt_buf prog = {0};
    gt_err err = a != NULL ? gt_agreement_load(a, path) : gt_errf(GT_E_NOMEM, "out of memory");
    uint8_t hash[GT_SHA256_BYTES] = {0};
    if (gt_is_ok(err)) {
        err = gt_collab_program(a, &prog);
    }
    if (gt_is_ok(err)) {
        err = gt_hash(GT_HASH_SHA256, hash, prog.data, prog.len);
    }
    if (gt_is_ok(err) && out != NULL) {
        err = gt_file_write_atomic(out, prog.data, prog.len, 0644);
    }
    int rc = GT_EXIT_OK;
    if (gt_is_ok(err)) {
        char hex[2 * GT_SHA256_BYTES + 1];
        gt_hex_encode(hex, sizeof hex, hash, sizeof hash);
        printf("training.program: %s\n", hex);
        if (a->program_pinned) {
            bool same = gt_ct_equal(hash, a->program_hash, sizeof hash);
            printf("%s pins %s\n", path, same ? "this program" : "ANOTHER program");
            rc = same ? GT_EXIT_OK : 1;
        }
    }
    gt_buf_free_nowipe(&prog);
    free(a);
    return gt_is_ok(err) ? rc : gt_cli_fail("program", err);
}
