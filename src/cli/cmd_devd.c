// gputravel devd: run the emulated confidential GPU on a Unix socket until SIGINT/SIGTERM.
#include "cli.h"

#include <gputravel/device.h>
#include <gputravel/devd.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t devd_stop;

static void on_signal(int sig)
{
    (void)sig;
    devd_stop = 1;
}

static void usage(void)
{
    printf("usage: gputravel devd --socket PATH [--mem-limit BYTES] [--threads N]\n"
           "                      [--slots N] [--slot-size BYTES] [--max-sessions N]\n"
           "                      [--idle-timeout SECONDS] [--identity DIR] [--vendor-root DIR]\n"
           "                      [--admit-policy P.json] [--client-root PEM]\n"
           "                      [--paging-store DIR [--page-size BYTES] [--prefetch]]\n"
           "\n"
           "Runs the emulated confidential GPU: a separate process that owns all device memory,\n"
           "attests itself (a P-384 identity key certified by a simulated vendor root; evidence is\n"
           "always marked simulated) and serves one attested, encrypted session at a time.\n"
           "\n"
           "  --socket PATH          Unix socket to listen on (mode 0600)\n"
           "  --mem-limit BYTES      device memory, reserved and touched at start (default 1GiB);\n"
           "                         an allocation past it is refused unless paging is on\n"
           "  --paging-store DIR     page beyond --mem-limit: buffers may total more, at most\n"
           "                         --mem-limit of them resident; cold pages are sealed\n"
           "                         (AES-256-GCM, version tree) into files under DIR, which is\n"
           "                         untrusted (docs/paging.md)\n"
           "  --page-size BYTES      paging unit, a power of two 4KiB..1MiB (default 64KiB)\n"
           "  --prefetch             paging: a second thread learns the op stream and loads\n"
           "                         pages ahead of the launch that needs them (OpenMP's\n"
           "                         idle threads then wait passively: OMP_WAIT_POLICY=PASSIVE\n"
           "                         unless set)\n"
           "  --threads N            OpenMP threads for launched ops (default: all cores)\n"
           "  --slots N              bounce slots per session (default 4)\n"
           "  --slot-size BYTES      bytes per bounce slot (default 4MiB)\n"
           "  --max-sessions N       exit after N sessions (default: serve until signalled)\n"
           "  --idle-timeout SECONDS drop a client silent this long (default 300; 0: never)\n"
           "  --identity DIR         device identity key (default: <sim root>/devd-identity,\n"
           "                         created on first start)\n"
           "  --vendor-root DIR      simulated vendor root that certifies the identity\n"
           "                         (default: the sim root, $GT_SIM_ROOT or ~/.local/share)\n"
           "  --admit-policy P.json  admission policy for client evidence (default: sim\n"
           "                         evidence accepted as insecure-simulation, debug refused)\n"
           "  --client-root PEM      root for client evidence (default: the sim root's key)\n"
           "\n"
           "Device evidence: `gputravel verify --root <identity>/root-pub.pem` appraises it.\n");
}

// A size flag (--mem-limit, --slot-size) into cfg; 0, or the exit status of a usage error.
static int parse_size_flag(int c, gt_devd_config *cfg)
{
    uint64_t v = 0;
    if (!gt_is_ok(gt_parse_size(optarg, &v)) || v == 0) {
        return gt_cli_usage("devd", "bad size '%s'", optarg);
    }
    if (c == 'm') {
        cfg->mem_limit = v;
    } else if (v > UINT32_MAX) {
        return gt_cli_usage("devd", "size '%s' is too large", optarg);
    } else if (c == 'g') {
        cfg->page_bytes = (uint32_t)v;
    } else {
        cfg->slot_bytes = (uint32_t)v;
    }
    return GT_EXIT_OK;
}

// A count flag (--threads, --slots, --max-sessions, --idle-timeout), 0..1000000.
static int parse_count_flag(int c, gt_devd_config *cfg)
{
    uint64_t v = 0;
    if (!gt_is_ok(gt_cli_parse_u64("devd", optarg, 0, 1000000, &v))) {
        return gt_cli_usage("devd", "bad number '%s'", optarg);
    }
    if (c == 't') {
        cfg->threads = (int)v;
    } else if (c == 'n') {
        cfg->slot_count = (uint32_t)v;
    } else if (c == 'x') {
        cfg->max_sessions = v;
    } else {
        cfg->idle_timeout_ms = v == 0 ? -1 : (int)(v * 1000);  // -1: never (devd.h)
    }
    return GT_EXIT_OK;
}

// The options are devd's own configuration: 0 and cfg filled, or a usage error's exit status.
static int parse(int argc, char **argv, gt_devd_config *cfg)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},    {"mem-limit", required_argument, NULL, 'm'},
        {"threads", required_argument, NULL, 't'},   {"slots", required_argument, NULL, 'n'},
        {"slot-size", required_argument, NULL, 'z'}, {"max-sessions", required_argument, NULL, 'x'},
        {"idle-timeout", required_argument, NULL, 'i'}, {"identity", required_argument, NULL, 'I'},
        {"vendor-root", required_argument, NULL, 'V'}, {"admit-policy", required_argument, NULL, 'P'},
        {"client-root", required_argument, NULL, 'R'},
        {"paging-store", required_argument, NULL, 'S'}, {"page-size", required_argument, NULL, 'g'},
        {"prefetch", no_argument, NULL, 'F'},
        {NULL, 0, NULL, 0},
    };
    memset(cfg, 0, sizeof *cfg);
    // A client that goes silent (or a hello replayed by someone who cannot go on) must not hold
    // the device for ever.
    cfg->idle_timeout_ms = GT_DEVD_DEFAULT_IDLE_TIMEOUT_MS;
    int c, rc = GT_EXIT_OK;
    while (rc == GT_EXIT_OK && (c = getopt_long(argc, argv, "s:m:t:", opts, NULL)) != -1) {
        switch (c) {
        case 's': cfg->socket_path = optarg; break;
        case 'I': cfg->identity_dir = optarg; break;
        case 'V': cfg->vendor_root_dir = optarg; break;
        case 'P': cfg->admit_policy = optarg; break;
        case 'R': cfg->client_root = optarg; break;
        case 'S': cfg->paging_store = optarg; break;
        case 'F': cfg->prefetch = true; break;
        case 'm':
        case 'g':
        case 'z': rc = parse_size_flag(c, cfg); break;
        case 't':
        case 'n':
        case 'x':
        case 'i': rc = parse_count_flag(c, cfg); break;
        default: return gt_cli_usage("devd", "unknown option");
        }
    }
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    if (optind != argc) {
        return gt_cli_usage("devd", "unexpected argument '%s'", argv[optind]);
    }
    if (cfg->socket_path == NULL) {
        return gt_cli_usage("devd", "--socket PATH is required");
    }
    if (cfg->page_bytes != 0 && cfg->paging_store == NULL) {
        return gt_cli_usage("devd", "--page-size needs --paging-store DIR");
    }
    if (cfg->prefetch && cfg->paging_store == NULL) {
        return gt_cli_usage("devd", "--prefetch needs --paging-store DIR");
    }
    return GT_EXIT_OK;
}

// Serves until SIGINT or SIGTERM (or --max-sessions); devd logs what it does itself.
static gt_err run(gt_devd_config *cfg)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    cfg->stop = &devd_stop;
    return gt_devd_run(cfg);
}

int gt_cmd_devd(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    gt_devd_config cfg;
    int rc = parse(argc, argv, &cfg);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    gt_err err = run(&cfg);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("devd", err);
}
