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
            "  --svn N, --debug  sim claims: security version number and debug flag\n"
            "  --tsm-root DIR    configfs-tsm report directory (default /sys/kernel/config/tsm/report)\n"
            "  --device PATH     guest device for the ioctl fallback (/dev/sev-guest, /dev/tdx_guest)\n");
}

int gt_cmd_attest(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"type", required_argument, NULL, 't'},     {"report-data", required_argument, NULL, 'd'},
        {"out", required_argument, NULL, 'o'},      {"sim-root", required_argument, NULL, 's'},
        {"svn", required_argument, NULL, 'v'},      {"debug", no_argument, NULL, 'D'},
        {"tsm-root", required_argument, NULL, 'T'}, {"device", required_argument, NULL, 'x'},
        {NULL, 0, NULL, 0},
    };
    const char *type_name = NULL, *rd_arg = NULL, *out = NULL, *sim_root = NULL;
    const char *svn_arg = NULL, *tsm_root = NULL, *device = NULL;
    bool debug = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 't': type_name = optarg; break;
        case 'd': rd_arg = optarg; break;
        case 'o': out = optarg; break;
        case 's': sim_root = optarg; break;
        case 'v': svn_arg = optarg; break;
        case 'D': debug = true; break;
        case 'T': tsm_root = optarg; break;
        case 'x': device = optarg; break;
        default:
            return gt_cli_usage("attest", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc) {
        return gt_cli_usage("attest", "unexpected argument '%s'", argv[optind]);
    }
    if (type_name == NULL || rd_arg == NULL || out == NULL) {
        return gt_cli_usage("attest", "--type, --report-data and --out are required");
    }
    gt_collect_params p = {.sim_root = sim_root, .sim_debug = debug, .dev_path = device};
    if (!gt_is_ok(gt_tee_type_parse(type_name, &p.type)) ||
        (p.type != GT_TEE_SIM && p.type != GT_TEE_TDX && p.type != GT_TEE_SNP &&
         p.type != GT_TEE_AUTO)) {
        return gt_cli_usage("attest", "--type must be sim, tdx, snp or auto");
    }
    uint8_t rd[GT_REPORT_DATA_BYTES] = {0};
    size_t rd_len = 0;
    const char *hex = rd_arg;
    if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) {
        hex += 2;
    }
    if (!gt_is_ok(gt_hex_decode(rd, sizeof rd, &rd_len, hex))) {
        return gt_cli_usage("attest", "--report-data must be up to 64 bytes of hex");
    }
    if (svn_arg != NULL) {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(svn_arg, &end, 10);
        if (end == svn_arg || *end != '\0' || errno != 0 || v > UINT32_MAX || svn_arg[0] == '-') {
            return gt_cli_usage("attest", "--svn must be an integer in 0..4294967295");
        }
        p.sim_svn = (uint32_t)v;
    }
    if (p.type != GT_TEE_SIM && (sim_root || svn_arg || debug)) {
        return gt_cli_usage("attest", "--sim-root, --svn and --debug apply to --type sim only");
    }
    gt_tsm_params tsm = {.root = tsm_root};
    p.tsm = &tsm;

    gt_evidence ev = {0};
    gt_err err = gt_attest_collect(&ev, &p, rd);
    if (gt_is_ok(err)) {
        err = gt_evidence_save_file(&ev, out);
    }
    if (!gt_is_ok(err)) {
        gt_evidence_free(&ev);
        return gt_cli_fail("attest", err);
    }
    if (ev.type == GT_TEE_SIM) {
        char dir[4096];
        if (gt_is_ok(gt_sim_root_dir(dir, sizeof dir, sim_root))) {
            fprintf(stderr, "gputravel attest: wrote %s: sim evidence (%s); verify with "
                            "--root %s/root-pub.pem\n",
                    out, GT_INSECURE_SIMULATION, dir);
        }
    } else if (!gt_cli.quiet) {
        fprintf(stderr, "gputravel attest: wrote %s: %s evidence v%u (%zu bytes)\n", out,
                gt_tee_type_name(ev.type), ev.version, ev.body.len);
    }
    gt_evidence_free(&ev);
    return GT_EXIT_OK;
}
