// gputravel train --agreement: collaborative training on the holders' data (orchestr.h).
#include "cli.h"
#include "train_dist.h"

#include <math.h>

#include <gputravel/orchestr.h>
#include <gputravel/train.h>

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define CMD "train"
#define MAX_ROOTS 8

static void usage(void)
{
    printf("usage: gputravel train --agreement A.json --state DIR [options]\n"
           "\n"
           "Trains the agreement's GPT-2 on every holder's data. Each holder's agent (gputravel\n"
           "holder) is reached at its agreement endpoint over attested TLS; chunks come into\n"
           "device memory as NO_READBACK buffers, are trained on, then erased; after each chunk\n"
           "the model is checkpointed and the use journaled, so --resume continues without\n"
           "losing or double-using a chunk.\n"
           "\n"
           "  --agreement FILE     training agreement (docs/agreement.md)\n"
           "  --state DIR          device-sealed resume state (resume.sealed) and journal folder\n"
           "  --resume             continue from DIR's checkpoint and journal\n"
           "  --transfer MODE      one the agreement's \"transfer\" list names: travel (the\n"
           "                       device goes to each holder. sim: through devd; cuda: this\n"
           "                       trainer serves the trip on DIR/trip.sock or --device-socket,\n"
           "                       the holder decrypts on its GPU and hands the buffer over),\n"
           "                       conventional-keyrelease, conventional, or insecure-host-trip\n"
           "                       (cpu only: the trip in this trainer's host memory, no\n"
           "                       protection). Default: travel on sim or cuda, else\n"
           "                       conventional-keyrelease, else conventional, as listed\n"
           "  --device cpu|sim|cuda  device (default cpu); sim needs --device-socket PATH\n"
           "  --device-socket PATH devd's socket (--device sim), or where this trainer serves\n"
           "                       trips (--transfer travel on cuda, insecure-host-trip on cpu)\n"
           "  --threads N          kernel threads (default: all cores)\n"
           "  --name NAME          this trainer's name in holders' ledgers (default trainer)\n"
           "  --tee TYPE           how this trainer proves itself: sim (default), tdx or snp\n"
           "  --sim-root DIR       simulated platform root for sim evidence\n"
           "  --policy FILE        appraisal policy for holders' evidence (docs/attestation.md;\n"
           "                       default and unless it relaxes them: sim, debug TEEs and\n"
           "                       Intel TCB statuses other than UpToDate refused)\n"
           "  --root FILE          trust input for holders' evidence (repeatable)\n"
           "  --plot PNG           loss curve (default DIR/loss.png; 'none' skips)\n"
           "  --distributed        one rank of 'mpirun -np N gputravel train --agreement A\n"
           "                       --distributed ...' (N: the agreement's trainer.ranks): each\n"
           "                       rank trains on its own chunks with its own device (\"%%r\" in\n"
           "                       --device-socket is the rank), its state in DIR/rank<r>, its\n"
           "                       name NAME.rank<r>; gradients summed by the encrypted ring\n"
           "                       (docs/collaboration.md \"Across ranks\")\n"
           "  --json               the final summary as one JSON object on stdout, last line\n"
           "  --sealed-out FILE    where the checkpoint sealed for the agreement's recipients\n"
           "                       goes when training ends (default DIR/model.sealed; only with\n"
           "                       output sealed_checkpoint: loss_only writes no checkpoint\n"
           "                       outside DIR)\n"
           "  --config FILE        more options from FILE: a JSON object whose keys are these\n"
           "                       long options without -- (a string or number each, a list\n"
           "                       for --root, true for a flag), e.g. {\"agreement\": \"a.json\",\n"
           "                       \"state\": \"trainer\", \"root\": [\"root-pub.pem\"]}; unknown\n"
           "                       keys and wrong types are errors; the command line overrides\n"
           "                       it\n");
}

typedef struct {
    double *steps, *losses;
    size_t n, cap;
} curve;

// A test's fixed point (tests/collective/dcollab_cli.sh): with GPUTRAVEL_TEST_STOP_AFTER_STEP=N
// the printing rank stops itself (SIGSTOP) once step N is printed, so the test can kill another
// rank at a known step instead of racing the training. It pauses this process and nothing else.
static void test_stop_point(unsigned step)
{
    const char *at = getenv("GPUTRAVEL_TEST_STOP_AFTER_STEP");
    if (at != NULL && strtoul(at, NULL, 10) == step) {
        raise(SIGSTOP);
    }
}

static void on_step(void *ctx, const gt_collab_step *s)
{
    curve *c = ctx;
    printf("step %u/%u | loss %.6f | %.1f ms | holder %u chunk %u\n", s->step, s->steps,
           (double)s->loss, s->ms, s->holder, s->chunk);
    fflush(stdout);
    test_stop_point(s->step);
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        double *a = realloc(c->steps, cap * sizeof *a);
        if (a != NULL) {
            c->steps = a;
        }
        double *b = realloc(c->losses, cap * sizeof *b);
        if (b != NULL) {
            c->losses = b;
        }
        if (a == NULL || b == NULL) {
            return;  // the curve is a convenience; training goes on
        }
        c->cap = cap;
    }
    c->steps[c->n] = s->step;
    c->losses[c->n++] = s->loss;
}

static void on_event(void *ctx, const char *line)
{
    (void)ctx;
    printf("  %s\n", line);
    fflush(stdout);
}

typedef struct {
    const char *agreement_path, *state_dir, *socket, *name, *sim_root, *policy_path, *plot;
    const char *sealed_out;
    const char *roots[MAX_ROOTS];
    int root_count, threads;
    bool resume;
    bool json;  // --json: the final summary as one JSON object too
    bool distributed;  // --distributed: a rank of mpirun -np N
    const gt_collab_ranks *ranks;  // --distributed: this rank's part (train_dist_collab)
    bool transfer_given;  // --transfer; else the default the agreement allows (pick_transfer)
    gt_transfer_mode transfer;
    gt_device_kind kind;
    gt_tee_type tee;
} ta_options;

// What a run holds until it ends (freed by ta_free).
typedef struct {
    gt_agreement a;
    gt_policy *policy;
    gt_device *dev;
    gt_buf root_bytes[MAX_ROOTS];
    gt_attest_file root_files[MAX_ROOTS];
    curve cv;
    char trip_sock[4200];
    gt_collab_report rep;
} ta_run;

// One option into o; 0, or the exit status of a usage error (already printed).
static int parse_one(int c, ta_options *o)
{
    switch (c) {
    case 'a': o->agreement_path = optarg; break;
    case 'S': o->state_dir = optarg; break;
    case 'R': o->resume = true; break;
    case 'x':
        if (!gt_is_ok(gt_transfer_mode_parse(optarg, &o->transfer))) {
            return gt_cli_usage(CMD, "unknown --transfer '%s' (travel, conventional-keyrelease, "
                                     "conventional or insecure-host-trip)", optarg);
        }
        o->transfer_given = true;
        break;
    case 'd':
        if (!gt_is_ok(gt_device_kind_parse(optarg, &o->kind))) {
            return gt_cli_usage(CMD, "unknown --device '%s'", optarg);
        }
        break;
    case 'D': o->socket = optarg; break;
    case 'j': {
        gt_err e = gt_cli_parse_int("--threads", optarg, 0, 4096, &o->threads);
        if (!gt_is_ok(e)) {
            return gt_cli_usage(CMD, "%s", e.msg);
        }
        break;
    }
    case 'n': o->name = optarg; break;
    case 't':
        if (!gt_is_ok(gt_tee_type_parse(optarg, &o->tee))) {
            return gt_cli_usage(CMD, "unknown --tee '%s'", optarg);
        }
        break;
    case 's': o->sim_root = optarg; break;
    case 'p': o->policy_path = optarg; break;
    case 'r':
        if (o->root_count == MAX_ROOTS) {
            return gt_cli_usage(CMD, "at most %d --root files", MAX_ROOTS);
        }
        o->roots[o->root_count++] = optarg;
        break;
    case 'P': o->plot = optarg; break;
    case 'O': o->sealed_out = optarg; break;
    case 'J': o->json = true; break;
    case 'M': o->distributed = true; break;
    default: return gt_cli_usage(CMD, "unknown option");
    }
    return GT_EXIT_OK;
}

// The options, and the keys of a --config file: the same names.
static const struct option opts[] = {
    {"agreement", required_argument, NULL, 'a'}, {"state", required_argument, NULL, 'S'},
    {"resume", no_argument, NULL, 'R'}, {"transfer", required_argument, NULL, 'x'},
    {"device", required_argument, NULL, 'd'}, {"device-socket", required_argument, NULL, 'D'},
    {"threads", required_argument, NULL, 'j'}, {"name", required_argument, NULL, 'n'},
    {"tee", required_argument, NULL, 't'}, {"sim-root", required_argument, NULL, 's'},
    {"policy", required_argument, NULL, 'p'}, {"root", required_argument, NULL, 'r'},
    {"plot", required_argument, NULL, 'P'}, {"sealed-out", required_argument, NULL, 'O'},
    {"json", no_argument, NULL, 'J'}, {"distributed", no_argument, NULL, 'M'},
    {0}};
static const char *const repeatable[] = {"root", NULL};

static int parse(int argc, char **argv, ta_options *o)
{
    *o = (ta_options){.name = "trainer", .transfer = GT_TRANSFER_CONVENTIONAL,
                      .kind = GT_DEVICE_CPU, .tee = GT_TEE_SIM};
    int c, rc = GT_EXIT_OK;
    while (rc == GT_EXIT_OK && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        rc = parse_one(c, o);
    }
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    if (o->agreement_path == NULL || o->state_dir == NULL) {
        return gt_cli_usage(CMD, "--agreement and --state are required");
    }
    if (o->distributed && !gt_train_dist_under_mpirun()) {
        return gt_cli_usage(CMD, "--distributed must be started under mpirun, e.g. mpirun -np 2 "
                                 "gputravel train --agreement A.json --distributed ...");
    }
    if (o->kind == GT_DEVICE_SIM && o->socket == NULL) {
        return gt_cli_usage(CMD, "--device sim needs --device-socket PATH");
    }
    return GT_EXIT_OK;
}

// The trainer's device; with travel on a cpu or cuda device, the socket it serves trips on.
static gt_err open_device(const ta_options *o, ta_run *r, const char **socket)
{
    *socket = o->socket;
    gt_device_config dc = {.kind = o->kind, .threads = o->threads, .socket_path = o->socket};
    if (o->kind == GT_DEVICE_SIM) {
        // The device session carries the agreement: a holder the device travels to must
        // attach under the same one.
        // busy_wait_ms: resumed right after a crash, devd may still be wiping the dead session.
        gt_device_sim_options so = {.timeout_ms = 0, .busy_wait_ms = 30000};
        memcpy(so.agreement_hash, r->a.hash, sizeof so.agreement_hash);
        GT_TRY(gt_device_open_sim(&r->dev, &dc, &so));
    } else {
        GT_TRY(gt_device_open(&r->dev, &dc));
    }
    const bool served = o->transfer == GT_TRANSFER_INSECURE_HOST_TRIP ||
                        (o->transfer == GT_TRANSFER_TRAVEL && o->kind == GT_DEVICE_CUDA);
    if (!served) {
        return GT_OK;
    }
    // This trainer serves the trips; its device evidence comes from the sim root.
    if (*socket == NULL) {
        GT_TRY(gt_path_join(r->trip_sock, sizeof r->trip_sock, o->state_dir, "trip.sock"));
        *socket = r->trip_sock;
    }
    if (o->sim_root != NULL) {
        GT_TRY(gt_cli_sim_root_use(o->sim_root));
    }
    printf("travel on the %s device: this trainer serves each trip on %s%s\n",
           gt_device_kind_name(o->kind), *socket,
           o->kind == GT_DEVICE_CPU ? " (cpu: the holder hands its decrypted chunk over in host "
                                      "memory; no confidentiality, this shows the protocol and "
                                      "the accounting only)"
                                    : "");
    return GT_OK;
}

static void print_agreement(const ta_options *o, const gt_agreement *a)
{
    char hash[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, a->hash, sizeof a->hash);
    printf("agreement %s (%.16s...): %u holder(s), GPT-2 L=%u C=%u NH=%u V=%u, %u steps of %ux%u, "
           "transfer %s, device %s%s\n",
           a->name, hash, a->holder_count, a->layers, a->channels, a->heads, a->vocab, a->steps,
           a->batch, a->seq, gt_transfer_mode_name(o->transfer), gt_device_kind_name(o->kind),
           o->tee == GT_TEE_SIM ? "; this trainer proves itself with insecure-simulation evidence"
                                : "");
}

// Without --transfer: the safest mode the agreement lists that this device does (travel on
// sim or cuda, then conventional-keyrelease, then conventional); the host-memory trip is taken
// only when asked for by name. Then the mode is checked against the agreement and the device,
// before anyone is contacted.
static gt_err pick_transfer(ta_options *o, const gt_agreement *a)
{
    if (!o->transfer_given) {
        const gt_transfer_mode order[] = {GT_TRANSFER_TRAVEL, GT_TRANSFER_CONVENTIONAL_KEYRELEASE,
                                          GT_TRANSFER_CONVENTIONAL};
        bool found = false;
        for (size_t i = 0; i < sizeof order / sizeof order[0] && !found; i++) {
            bool fits = order[i] != GT_TRANSFER_TRAVEL || o->kind != GT_DEVICE_CPU;
            if (fits && gt_agreement_allows(a, order[i])) {
                o->transfer = order[i];
                found = true;
            }
        }
        char list[96];
        gt_agreement_transfer_list(a, list, sizeof list);
        GT_ENSURE(found, GT_E_POLICY, "the agreement's transfer list (%s) has no mode the %s "
                  "device uses by default: name one with --transfer", list,
                  gt_device_kind_name(o->kind));
    }
    return gt_collab_transfer_check(a, o->transfer, o->kind);
}

// Loads what the run needs, trains (printing each step as it goes) and fills r->rep.
static gt_err run(ta_options *o, ta_run *r)
{
    GT_TRY(gt_agreement_load(&r->a, o->agreement_path));
    GT_TRY(pick_transfer(o, &r->a));
    GT_ENSURE(o->sealed_out == NULL || r->a.output == GT_OUTPUT_SEALED_CHECKPOINT, GT_E_POLICY,
              "--sealed-out: the agreement's output is loss_only, so no checkpoint may leave the "
              "TEE");
    GT_TRY(gt_mkdir_p(o->state_dir, 0700));
    if (o->policy_path != NULL) {
        GT_TRY(gt_policy_load_file(&r->policy, o->policy_path));
    } else {
        GT_TRY(gt_policy_default(&r->policy));
    }
    for (int i = 0; i < o->root_count; i++) {
        GT_TRY(gt_file_read_all(o->roots[i], 1 << 20, &r->root_bytes[i]));
        r->root_files[i] = (gt_attest_file){o->roots[i], gt_buf_span(&r->root_bytes[i])};
    }
    const char *socket = NULL;
    GT_TRY(open_device(o, r, &socket));
    gt_tee_attestor att = {.collect = {.type = o->tee, .sim_root = o->sim_root},
                           .policy = r->policy, .roots = r->root_files,
                           .root_count = (size_t)o->root_count, .agreement = &r->a,
                           .peer_role = GT_PEER_HOLDER};
    const bool speaks = o->ranks == NULL || o->ranks->rank == 0;  // rank 0 prints
    if (speaks) {
        print_agreement(o, &r->a);
    }
    gt_collab_config cfg = {
        .agreement = &r->a, .dev = r->dev, .transfer = o->transfer,
        .attestor = gt_tee_attestor_bind(&att), .trainer_name = o->name,
        .holder_roots = r->root_files, .holder_root_count = (size_t)o->root_count,
        .state_dir = o->state_dir, .resume = o->resume, .on_step = speaks ? on_step : NULL,
        .on_event = speaks ? on_event : NULL, .ctx = &r->cv, .device_address = socket,
        .sealed_path = o->sealed_out, .stop = gt_interrupt_flag(), .ranks = o->ranks,
    };
    return gt_collab_train(&cfg, &r->rep);
}

// What held a holder's chunks back at the end, in --json.
static const char *holder_left_name(gt_schedule_left left)
{
    switch (left) {
    case GT_SCHEDULE_LEFT_OPEN: return "open";
    case GT_SCHEDULE_LEFT_USES: return "uses";
    case GT_SCHEDULE_LEFT_FAILED: return "failed";
    case GT_SCHEDULE_LEFT_BUDGET: return "budget";
    }
    return "unknown";
}

// Why holder h contributed nothing, in the warning's words.
static const char *nothing_because(const gt_collab_holder_report *h)
{
    switch (h->left) {
    case GT_SCHEDULE_LEFT_FAILED: return "its chunks failed in this run";
    case GT_SCHEDULE_LEFT_BUDGET: return "what is left of its budget holds none of its chunks";
    case GT_SCHEDULE_LEFT_USES: return "its chunks were used up before this run";
    case GT_SCHEDULE_LEFT_OPEN: break;
    }
    return "the steps ran out before its turn";
}

// --json: what the table says, for scripts (one object, the last line on stdout).
static void print_report_json(const ta_run *r)
{
    const gt_collab_report *rep = &r->rep;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "steps_done", rep->steps_done);
    if (isnan(rep->final_loss)) {
        cJSON_AddNullToObject(j, "final_loss");  // the agreement released no loss at the end
    } else {
        cJSON_AddNumberToObject(j, "final_loss", rep->final_loss);
    }
    cJSON_AddNumberToObject(j, "interrupted", rep->interrupted);
    cJSON_AddStringToObject(j, "stop", gt_collab_stop_name(rep->stop));
    cJSON_AddStringToObject(j, "stop_message", rep->stop_message);
    cJSON *hs = cJSON_AddArrayToObject(j, "holders");
    for (uint32_t i = 0; i < r->a.holder_count; i++) {
        const gt_collab_holder_report *h = &rep->holders[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", r->a.holders[i].name);
        cJSON_AddNumberToObject(o, "tokens_used", (double)h->tokens_used);
        cJSON_AddNumberToObject(o, "token_budget", (double)h->token_budget);
        cJSON_AddNumberToObject(o, "uses", h->uses);
        cJSON_AddNumberToObject(o, "bytes_moved", (double)h->bytes_moved);
        cJSON_AddNumberToObject(o, "transfer_seconds", h->transfer_seconds);
        cJSON_AddNumberToObject(o, "skipped", h->skipped);
        cJSON_AddBoolToObject(o, "gone", h->gone);
        cJSON_AddStringToObject(o, "left", holder_left_name(h->left));
        if (h->skipped > 0) {
            cJSON_AddStringToObject(o, "failure", h->failure);
        }
        if (h->enclave_verified) {  // a holder named by enclave: what its quote proved
            char mrs[65], mre[65];
            gt_hex_encode(mrs, sizeof mrs, h->enclave.mrsigner, 32);
            gt_hex_encode(mre, sizeof mre, h->enclave.mrenclave, 32);
            cJSON *e = cJSON_AddObjectToObject(o, "enclave");
            cJSON_AddStringToObject(e, "mrsigner", mrs);
            cJSON_AddStringToObject(e, "mrenclave", mre);
            cJSON_AddNumberToObject(e, "isvprodid", h->enclave.isvprodid);
            cJSON_AddNumberToObject(e, "isvsvn", h->enclave.isvsvn);
            cJSON_AddBoolToObject(e, "debug", h->enclave.debug);
            cJSON_AddStringToObject(e, "host", h->enclave.host);
            cJSON_AddBoolToObject(e, "insecure_simulation", h->enclave.insecure_simulation);
        }
        cJSON_AddItemToArray(hs, o);
    }
    cJSON_AddBoolToObject(j, "sealed", rep->sealed);
    if (rep->sealed) {
        cJSON_AddStringToObject(j, "sealed_path", rep->sealed_path);
        cJSON_AddNumberToObject(j, "sealed_bytes", (double)rep->sealed_bytes);
        cJSON_AddNumberToObject(j, "sealed_recipients", rep->sealed_recipients);
    }
    char *text = cJSON_PrintUnformatted(j);
    printf("%s\n", text ? text : "{}");
    cJSON_free(text);
    cJSON_Delete(j);
}

static gt_err print_report(const ta_options *o, const ta_run *r)
{
    const gt_collab_report *rep = &r->rep;
    printf("\ntrained %u step(s), final loss %.4f\n", rep->steps_done, (double)rep->final_loss);
    printf("%-16s %12s %12s %6s %7s %12s %10s\n", "holder", "tokens used", "budget", "uses",
           "skipped", "bytes moved", "transfer s");
    for (uint32_t i = 0; i < r->a.holder_count; i++) {
        const gt_collab_holder_report *h = &rep->holders[i];
        printf("%-16s %12llu %12llu %6u %7u %12llu %10.3f\n", r->a.holders[i].name,
               (unsigned long long)h->tokens_used, (unsigned long long)h->token_budget, h->uses,
               h->skipped, (unsigned long long)h->bytes_moved, h->transfer_seconds);
    }
    printf("stopped: %s\n", rep->stop_message);
    for (uint32_t i = 0; i < r->a.holder_count; i++) {
        const gt_collab_holder_report *h = &rep->holders[i];
        if (h->skipped > 0) {
            printf("warning: holder %s: %u chunk(s) skipped, nothing of them used: %s%s\n",
                   r->a.holders[i].name, h->skipped, h->failure,
                   h->gone ? " (none of its chunks was asked for after that)" : "");
        }
    }
    // A holder that contributed nothing still receives the model if it is a recipient: say so,
    // so that nobody reads the table as "everyone's data went in".
    for (uint32_t i = 0; i < r->a.holder_count; i++) {
        if (rep->holders[i].uses == 0) {
            printf("warning: holder %s contributed nothing to this run (no chunk of it was "
                   "trained on: %s)%s\n", r->a.holders[i].name, nothing_because(&rep->holders[i]),
                   rep->sealed ? "; it is still a recipient of the sealed checkpoint" : "");
        }
    }
    if (rep->stop == GT_COLLAB_STOP_FAILURES || rep->interrupted) {
        printf("no final output yet: the run is not done (--resume continues it)\n");
    } else if (rep->sealed) {
        printf("sealed checkpoint: %s (%llu bytes), openable only by the agreement's %u "
               "recipient(s) with gputravel open-checkpoint\n",
               rep->sealed_path, (unsigned long long)rep->sealed_bytes, rep->sealed_recipients);
    } else {
        printf("output loss_only: no checkpoint was written outside %s\n", o->state_dir);
    }
    if (r->cv.n == 0 || (o->plot != NULL && strcmp(o->plot, "none") == 0)) {
        return GT_OK;
    }
    char png[4200];
    const char *plot = o->plot;
    if (plot == NULL) {
        GT_TRY(gt_path_join(png, sizeof png, o->state_dir, "loss.png"));
        plot = png;
    }
    gt_plot_series s = {"train loss", r->cv.steps, r->cv.losses, r->cv.n};
    gt_plot_style st = {.title = "collaborative training", .xlabel = "step", .ylabel = "loss"};
    gt_err perr = gt_plot_lines(plot, &st, &s, 1);
    if (gt_is_ok(perr)) {
        printf("loss curve: %s\n", plot);
    } else {
        fprintf(stderr, "gputravel train: note: %s\n", perr.msg);
    }
    return GT_OK;
}

static void ta_free(ta_run *r)
{
    free(r->cv.steps);
    free(r->cv.losses);
    gt_device_close(r->dev);
    gt_policy_free(r->policy);
    for (int i = 0; i < MAX_ROOTS; i++) {
        gt_buf_free_nowipe(&r->root_bytes[i]);
    }
    free(r);
}

static int train_exit(const ta_options *o, gt_err err, int stopped, bool failures,
                      uint32_t steps);

// --distributed: MPI, this rank's folder, socket and name in o (train_dist_collab_init).
static gt_err dist_begin(ta_options *o, train_dist_collab *t, int *argc,
                                         char ***argv)
{
    GT_TRY(gt_train_dist_collab_init(t, argc, argv, o->agreement_path, o->state_dir, o->socket,
                                     o->name));
    o->state_dir = t->state_dir;
    o->socket = o->socket != NULL ? t->socket : NULL;
    o->name = t->name;
    o->ranks = &t->ranks;
    if (t->d.rank != 0) {
        // Every rank seals its final weights (the same on every rank: a recipient can check
        // that); only rank 0's go to --sealed-out, the others' stay in their folders.
        o->plot = "none";
        o->sealed_out = NULL;
    }
    return GT_OK;
}

int gt_cli_train_agreement(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    gt_cli_config conf;
    int rc = gt_cli_config_expand(CMD, opts, repeatable, &argc, &argv, &conf);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    ta_options o;
    rc = parse(argc, argv, &o);
    ta_run *r = rc == GT_EXIT_OK ? calloc(1, sizeof *r) : NULL;
    if (r == NULL) {
        gt_cli_config_free(&conf);
        return rc != GT_EXIT_OK ? rc : gt_cli_fail(CMD, gt_errf(GT_E_NOMEM, "out of memory"));
    }
    // Ctrl-C or SIGTERM stops at the next step with the use in progress committed (a second one
    // ends the process at once).
    gt_interrupt_install();
    static train_dist_collab dist;  // --distributed: MPI and the ring (train_dist_agreement.c)
    gt_err err = GT_OK;
    if (o.distributed) {
        err = dist_begin(&o, &dist, &argc, &argv);
    }
    if (gt_is_ok(err)) {
        err = run(&o, r);
    }
    const bool speaks = !o.distributed || dist.d.rank == 0;
    if (gt_is_ok(err) && speaks) {
        err = print_report(&o, r);
    }
    if (gt_is_ok(err) && o.json && speaks) {
        print_report_json(r);
    }
    if (o.distributed) {
        fflush(stdout);
        gt_train_dist_collab_end(&dist, err);  // an error ends the job here
    }
    int stopped = gt_is_ok(err) ? r->rep.interrupted : 0;
    uint32_t steps = r->rep.steps_done;
    bool failures = gt_is_ok(err) && r->rep.stop == GT_COLLAB_STOP_FAILURES;
    ta_free(r);
    rc = train_exit(&o, err, stopped, failures, steps);
    gt_cli_config_free(&conf);  // o's strings may be the file's
    return rc;
}

// The exit status, with the stop message of a run that did not finish.
static int train_exit(const ta_options *o, gt_err err, int stopped, bool failures,
                      uint32_t steps)
{
    if (failures) {
        fprintf(stderr, "gputravel train: stopped after step %u: the chunks left failed in this "
                        "run (the table above names them); the resume state is sealed in %s: run "
                        "the same command with --resume once their holders answer\n",
                steps, o->state_dir);
        return GT_EXIT_FAIL;
    }
    if (stopped) {
        fprintf(stderr, "gputravel train: stopped by %s after step %u; the resume state is "
                        "sealed in %s: run the same command with --resume to continue\n",
                strsignal(stopped), steps, o->state_dir);
        return 128 + stopped;
    }
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail(CMD, err);
}
