// gputravel demo: the README's main command. Three data holders seal their own text; an
// emulated confidential GPU (devd) and three holder agents start as separate processes; the
// trainer trains one GPT-2 on everybody's data, each chunk reaching the device's protected
// memory through an attested channel; every party's decisions are checked; the model writes.
// Everything runs on the simulated TEE and the emulated device, and says so.
#include "demo.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("usage: gputravel demo [--out DIR] [--steps N] [--transfer MODE] [--mem-limit SIZE]\n"
           "                      [--quiet]\n"
           "\n"
           "End to end on one machine: three data holders (hospital, bank, lab) seal their\n"
           "own text (the fortunes databases, split by file); an emulated confidential GPU\n"
           "(gputravel devd) and three holder agents (gputravel holder) start as processes;\n"
           "the trainer attests to every holder and trains one GPT-2 on all their data: for each\n"
           "chunk the device travels to its holder, who loads the chunk straight into the\n"
           "device's protected memory; it is trained on, then erased. Then every\n"
           "holder's ledger is verified, a loss curve is drawn, and the model writes some text.\n"
           "All TEEs are simulated and the device is emulated: every evidence says\n"
           "insecure-simulation.\n"
           "\n"
           "  --out DIR        work folder (default: a new folder under /tmp); a folder from an\n"
           "                   earlier demo is reused, any other non-empty folder is refused\n"
           "  --steps N        training steps (default 600)\n"
           "  --transfer MODE  travel (default: the GPU travels to each holder),\n"
           "                   conventional-keyrelease or conventional\n"
           "  --mem-limit SIZE the device's protected memory, e.g. 4MiB (default: 512 MiB, more\n"
           "                   than the demo needs): under a smaller cap devd pages, sealing cold\n"
           "                   pages into DIR/paging (docs/paging.md), and the demo says how much\n"
           "  --quiet          only the final line\n");
}

typedef struct {
    const char *out;  // NULL: a new folder under /tmp
    uint32_t steps;
    gt_transfer_mode transfer;
    uint64_t mem_limit;  // 0: the default, no paging
    bool quiet;
} demo_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, demo_options *o)
{
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"steps", required_argument, NULL, 's'},
                                         {"transfer", required_argument, NULL, 't'},
                                         {"mem-limit", required_argument, NULL, 'm'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {0}};
    *o = (demo_options){.steps = 600, .transfer = GT_TRANSFER_TRAVEL, .quiet = gt_cli.quiet};
    int c;
    while ((c = getopt_long(argc, argv, "o:q", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'q': o->quiet = true; break;
        case 's':
            if (!gt_is_ok(gt_cli_parse_u32("--steps", optarg, 1, 100000, &o->steps))) {
                return gt_cli_usage("demo", "--steps 1..100000");
            }
            break;
        case 't':
            if (!gt_is_ok(gt_transfer_mode_parse(optarg, &o->transfer)) ||
                o->transfer == GT_TRANSFER_INSECURE_HOST_TRIP) {  // the demo's device is devd
                return gt_cli_usage("demo", "--transfer: travel, conventional or "
                                            "conventional-keyrelease");
            }
            break;
        case 'm':
            if (!gt_is_ok(gt_parse_size(optarg, &o->mem_limit)) || o->mem_limit < (1u << 20)) {
                return gt_cli_usage("demo", "--mem-limit: a size of at least 1MiB, e.g. 4MiB");
            }
            break;
        default: return gt_cli_usage("demo", "unknown option");
        }
    }
    if (optind != argc) {
        return gt_cli_usage("demo", "unexpected argument");
    }
    return GT_EXIT_OK;
}

// Every step in order, then the processes stop and the secrets go; rep holds the training.
static gt_err run(demo *d, const demo_options *o, gt_collab_report *rep)
{
    gt_err err = demo_prepare_dir(d, o->out);
    if (gt_is_ok(err)) {
        say(d, "gputravel demo: three data holders, one emulated confidential GPU, one model\n"
               "(work folder %s; simulated TEEs and device: insecure-simulation)\n", d->dir);
    }
    gt_err (*const before[])(demo *) = {demo_step_corpus, demo_step_seal, demo_step_tamper,
                                        demo_step_agreement, demo_step_start};
    for (size_t i = 0; i < sizeof before / sizeof before[0] && gt_is_ok(err); i++) {
        err = before[i](d);
    }
    if (gt_is_ok(err)) {
        err = demo_step_train(d, rep);
    }
    demo_stop_processes(d);  // holders write their last ledger entries as they stop
    if (gt_is_ok(err)) {
        err = demo_step_ledgers(d, rep);
    }
    if (gt_is_ok(err)) {
        err = demo_step_sample(d);
    }
    for (int i = 0; i < HOLDERS; i++) {
        gt_holder_keys_wipe(&d->h[i].k);
        gt_buf_free(&d->h[i].text);
    }
    free(d->curve_x);
    free(d->curve_y);
    return err;
}

static void print_result(const demo *d, const gt_collab_report *rep)
{
    char paged[128] = "";
    if (d->mem_limit != 0) {
        char cap[32];
        gt_format_size(cap, sizeof cap, d->mem_limit);
        snprintf(paged, sizeof paged, ", device memory capped at %s: %llu page-outs, %llu fault-ins",
                 cap, (unsigned long long)d->paged.page_outs,
                 (unsigned long long)d->paged.fault_ins);
    }
    printf("%sdemo OK: %u steps on %d holders' data, final loss %.3f%s (%.1f s, in %s)\n",
           d->quiet ? "" : "\n", rep->steps_done, HOLDERS, (double)rep->final_loss, paged,
           gt_now_seconds() - d->t_total, d->dir);
}

int gt_cmd_demo(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    demo_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    demo *d = calloc(1, sizeof *d);
    if (d == NULL) {
        return gt_cli_fail("demo", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    d->quiet = o.quiet;
    d->steps = o.steps;
    d->transfer = o.transfer;
    d->mem_limit = o.mem_limit;
    signal(SIGPIPE, SIG_IGN);
    if (!gt_cli.verbose) {
        gt_log_set_level(GT_LOG_ERROR);  // the story says what the warnings would
    }
    d->t_total = gt_now_seconds();
    gt_collab_report rep;
    memset(&rep, 0, sizeof rep);
    gt_err err = run(d, &o, &rep);
    if (gt_is_ok(err)) {
        print_result(d, &rep);
    } else {
        rc = gt_cli_fail("demo", err);
    }
    free(d);
    return rc;
}
