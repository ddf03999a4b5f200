// gputravel attest: collects fresh evidence bound to a report_data and writes it to a file.
#include "cli.h"

#include <gputravel/attest.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gputravel attest --type sim|tdx|snp|auto --report-data HEX --out FILE\n"
            "                        [--sim-root DIR] [--svn N] [--debug]\n"
            "                        [--tsm-root DIR] [--device PATH]\n"
            "\n"
            "Collects evidence bound to REPORT-DATA (up to 64 bytes of hex, zero-padded to 64) and\n"
            "writes it as a gputravel evidence file.\n"
            "\n"
            "  --type sim        simulated platform: claims signed by the sim root key, always\n"
            "                    reported as " GT_INSECURE_SIMULATION " (proves no hardware isolation)\n"
            "  --type tdx|snp    hardware: Linux configfs-tsm, falling back to the guest device\n"
            "  --type auto       hardware: whatever configfs-tsm provides\n"
            "  --sim-root DIR    sim root key directory (default $GT_SIM_ROOT, else\n"
            "                    ~/.local/share/gputravel/sim-root); created on first use;\n"
            "                    verifiers need DIR/root-pub.pem (gputravel verify --root)\n"
            "  --svn N, --debug  sim claims: security version number and debug flag (a debug\n"
            "                    TEE is refused by verifiers unless their policy sets\n"
            "                    \"allow_debug\": true; sim evidence needs \"allow_simulation\")\n"
            "  --tsm-root DIR    configfs-tsm report directory (default /sys/kernel/config/tsm/report)\n"
            "  --device PATH     guest device for the ioctl fallback (/dev/sev-guest, /dev/tdx_guest)\n");
}

typedef struct {
    const char *type_name, *rd_arg, *out, *sim_root, *svn_arg, *tsm_root, *device;
    bool debug;
    // Parsed from the strings above:
    gt_tee_type type;
    uint8_t rd[GT_REPORT_DATA_BYTES];
    uint32_t svn;
} attest_options;

// --type, --report-data and --svn, and the flags that go with --type sim only.
static int parse_values(attest_options *o)
{
    if (!gt_is_ok(gt_tee_type_parse(o->type_name, &o->type)) ||
        (o->type != GT_TEE_SIM && o->type != GT_TEE_TDX && o->type != GT_TEE_SNP &&
         o->type != GT_TEE_AUTO)) {
        return gt_cli_usage("attest", "--type must be sim, tdx, snp or auto");
    }
    size_t rd_len = 0;
    const char *hex = o->rd_arg;
    if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) {
        hex += 2;
    }
    if (!gt_is_ok(gt_hex_decode(o->rd, sizeof o->rd, &rd_len, hex))) {
        return gt_cli_usage("attest", "--report-data must be up to 64 bytes of hex");
    }
    if (o->svn_arg != NULL &&
        !gt_is_ok(gt_cli_parse_u32("--svn", o->svn_arg, 0, UINT32_MAX, &o->svn))) {
        return gt_cli_usage("attest", "--svn must be an integer in 0..4294967295");
    }
    if (o->type != GT_TEE_SIM && (o->sim_root || o->svn_arg || o->debug)) {
        return gt_cli_usage("attest", "--sim-root, --svn and --debug apply to --type sim only");
    }
    return GT_EXIT_OK;
}

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, attest_options *o)
{
    static const struct option opts[] = {
        {"type", required_argument, NULL, 't'},     {"report-data", required_argument, NULL, 'd'},
        {"out", required_argument, NULL, 'o'},      {"sim-root", required_argument, NULL, 's'},
        {"svn", required_argument, NULL, 'v'},      {"debug", no_argument, NULL, 'D'},
        {"tsm-root", required_argument, NULL, 'T'}, {"device", required_argument, NULL, 'x'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 't': o->type_name = optarg; break;
        case 'd': o->rd_arg = optarg; break;
        case 'o': o->out = optarg; break;
        case 's': o->sim_root = optarg; break;
        case 'v': o->svn_arg = optarg; break;
        case 'D': o->debug = true; break;
        case 'T': o->tsm_root = optarg; break;
        case 'x': o->device = optarg; break;
        default:
            return gt_cli_usage("attest", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc) {
        return gt_cli_usage("attest", "unexpected argument '%s'", argv[optind]);
    }
    if (o->type_name == NULL || o->rd_arg == NULL || o->out == NULL) {
        return gt_cli_usage("attest", "--type, --report-data and --out are required");
    }
    return parse_values(o);
}

// Collects the evidence into ev (the caller frees it) and writes it to --out.
static gt_err run(const attest_options *o, gt_evidence *ev)
{
    gt_tsm_params tsm = {.root = o->tsm_root};
    gt_collect_params p = {.type = o->type, .sim_root = o->sim_root, .sim_debug = o->debug,
                           .sim_svn = o->svn, .dev_path = o->device, .tsm = &tsm};
    GT_TRY(gt_attest_collect(ev, &p, o->rd));
    return gt_evidence_save_file(ev, o->out);
}

static void print_written(const attest_options *o, const gt_evidence *ev)
{
    if (ev->type == GT_TEE_SIM) {
        char dir[4096];
        if (gt_is_ok(gt_sim_root_dir(dir, sizeof dir, o->sim_root))) {
            fprintf(stderr, "gputravel attest: wrote %s: sim evidence (%s); verify with "
                            "--root %s/root-pub.pem\n",
                    o->out, GT_INSECURE_SIMULATION, dir);
        }
    } else if (!gt_cli.quiet) {
        fprintf(stderr, "gputravel attest: wrote %s: %s evidence v%u (%zu bytes)\n", o->out,
                gt_tee_type_name(ev->type), ev->version, ev->body.len);
    }
}

int gt_cmd_attest(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    attest_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    gt_evidence ev = {0};
    gt_err err = run(&o, &ev);
    if (gt_is_ok(err)) {
        print_written(&o, &ev);
    }
    gt_evidence_free(&ev);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("attest", err);
}
