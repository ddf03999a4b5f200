// gputravel train --agreement: collaborative training on the holders' data (orchestr.h).
#include "cli.h"

#include <gputravel/orchestr.h>
#include <gputravel/train.h>

#include <getopt.h>
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
           "  --state DIR          checkpoint (model.bin, model.bin.state) and journal folder\n"
           "  --resume             continue from DIR's checkpoint and journal\n"
           "  --transfer MODE      conventional (default), conventional-keyrelease or travel\n"
           "                       (travel: the device goes to each holder. sim: through devd;\n"
           "                       cpu, cuda: this trainer serves the trip on DIR/trip.sock or\n"
           "                       --device-socket, the holder decrypts in its own process and\n"
           "                       hands the buffer over; cpu is host memory, no protection)\n"
           "  --device cpu|sim|cuda  device (default cpu); sim needs --device-socket PATH\n"
           "  --threads N          kernel threads (default: all cores)\n"
           "  --name NAME          this trainer's name in holders' ledgers (default trainer)\n"
           "  --tee TYPE           how this trainer proves itself: sim (default), tdx or snp\n"
           "  --sim-root DIR       simulated platform root for sim evidence\n"
           "  --policy FILE        appraisal policy for holders' evidence (default policy)\n"
           "  --root FILE          trust input for holders' evidence (repeatable)\n"
           "  --plot PNG           loss curve (default DIR/loss.png; 'none' skips)\n"
           "  --sealed-out FILE    where the checkpoint sealed for the agreement's recipients\n"
           "                       goes when training ends (default DIR/model.sealed; only with\n"
           "                       output sealed_checkpoint: loss_only writes no checkpoint\n"
           "                       outside DIR)\n");
}

typedef struct {
    double *steps, *losses;
    size_t n, cap;
} curve;

static void on_step(void *ctx, const gt_collab_step *s)
{
    curve *c = ctx;
    printf("step %u/%u | loss %.6f | %.1f ms | holder %u chunk %u\n", s->step, s->steps,
           (double)s->loss, s->ms, s->holder, s->chunk);
    fflush(stdout);
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

int gt_cli_train_agreement(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"agreement", required_argument, NULL, 'a'}, {"state", required_argument, NULL, 'S'},
        {"resume", no_argument, NULL, 'R'}, {"transfer", required_argument, NULL, 'x'},
        {"device", required_argument, NULL, 'd'}, {"device-socket", required_argument, NULL, 'D'},
        {"threads", required_argument, NULL, 'j'}, {"name", required_argument, NULL, 'n'},
        {"tee", required_argument, NULL, 't'}, {"sim-root", required_argument, NULL, 's'},
        {"policy", required_argument, NULL, 'p'}, {"root", required_argument, NULL, 'r'},
        {"plot", required_argument, NULL, 'P'}, {"sealed-out", required_argument, NULL, 'O'},
        {0}};
    const char *agreement_path = NULL, *state_dir = NULL, *socket = NULL, *name = "trainer";
    const char *sim_root = NULL, *policy_path = NULL, *plot = NULL, *roots[MAX_ROOTS];
    const char *sealed_out = NULL;
    int root_count = 0, threads = 0;
    bool resume = false;
    gt_transfer_mode transfer = GT_TRANSFER_CONVENTIONAL;
    gt_device_kind kind = GT_DEVICE_CPU;
    gt_tee_type tee = GT_TEE_SIM;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a': agreement_path = optarg; break;
        case 'S': state_dir = optarg; break;
        case 'R': resume = true; break;
        case 'x':
            if (!gt_is_ok(gt_transfer_mode_parse(optarg, &transfer))) {
                return gt_cli_usage(CMD, "unknown --transfer '%s'", optarg);
            }
            break;
        case 'd':
            if (!gt_is_ok(gt_device_kind_parse(optarg, &kind))) {
                return gt_cli_usage(CMD, "unknown --device '%s'", optarg);
            }
            break;
        case 'D': socket = optarg; break;
        case 'j': threads = atoi(optarg); break;
        case 'n': name = optarg; break;
        case 't':
            if (!gt_is_ok(gt_tee_type_parse(optarg, &tee))) {
                return gt_cli_usage(CMD, "unknown --tee '%s'", optarg);
            }
            break;
        case 's': sim_root = optarg; break;
        case 'p': policy_path = optarg; break;
        case 'r':
            if (root_count == MAX_ROOTS) {
                return gt_cli_usage(CMD, "at most %d --root files", MAX_ROOTS);
            }
            roots[root_count++] = optarg;
            break;
        case 'P': plot = optarg; break;
        case 'O': sealed_out = optarg; break;
        default: return gt_cli_usage(CMD, "unknown option");
        }
    }
    if (agreement_path == NULL || state_dir == NULL) {
        return gt_cli_usage(CMD, "--agreement and --state are required");
    }
    if (kind == GT_DEVICE_SIM && socket == NULL) {
        return gt_cli_usage(CMD, "--device sim needs --device-socket PATH");
    }
    gt_agreement a;
    gt_policy *policy = NULL;
    gt_device *dev = NULL;
    gt_buf root_bytes[MAX_ROOTS] = {{0}};
    gt_attest_file root_files[MAX_ROOTS];
    curve cv = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_agreement_load(&a, agreement_path), out);
    GT_ENSURE_GOTO(err, sealed_out == NULL || a.output == GT_OUTPUT_SEALED_CHECKPOINT, out,
                   GT_E_POLICY, "--sealed-out: the agreement's output is loss_only, so no "
                                "checkpoint may leave the TEE");
    GT_TRY_GOTO(err, gt_mkdir_p(state_dir, 0700), out);
    if (policy_path != NULL) {
        GT_TRY_GOTO(err, gt_policy_load_file(&policy, policy_path), out);
    } else {
        GT_TRY_GOTO(err, gt_policy_default(&policy), out);
    }
    for (int i = 0; i < root_count; i++) {
        GT_TRY_GOTO(err, gt_file_read_all(roots[i], 1 << 20, &root_bytes[i]), out);
        root_files[i] = (gt_attest_file){roots[i], gt_buf_span(&root_bytes[i])};
    }
    gt_device_config dc = {.kind = kind, .threads = threads, .socket_path = socket};
    if (kind == GT_DEVICE_SIM) {
        // The device session carries the agreement: a holder the device travels to must
        // attach under the same one.
        // busy_wait_ms: resumed right after a crash, devd may still be wiping the dead session.
        gt_device_sim_options so = {.timeout_ms = 0, .busy_wait_ms = 30000};
        memcpy(so.agreement_hash, a.hash, sizeof so.agreement_hash);
        GT_TRY_GOTO(err, gt_device_open_sim(&dev, &dc, &so), out);
    } else {
        GT_TRY_GOTO(err, gt_device_open(&dev, &dc), out);
    }
    char trip_sock[4200];
    if (transfer == GT_TRANSFER_TRAVEL && kind != GT_DEVICE_SIM) {
        // This trainer serves the trips; its device evidence comes from the sim root.
        if (socket == NULL) {
            GT_TRY_GOTO(err, gt_path_join(trip_sock, sizeof trip_sock, state_dir, "trip.sock"),
                        out);
            socket = trip_sock;
        }
        if (sim_root != NULL) {
            GT_TRY_GOTO(err, gt_cli_sim_root_use(sim_root), out);
        }
        printf("travel on the %s device: this trainer serves each trip on %s%s\n",
               gt_device_kind_name(kind), socket,
               kind == GT_DEVICE_CPU ? " (cpu: the holder hands its decrypted chunk over in host "
                                       "memory; no confidentiality, this shows the protocol and "
                                       "the accounting only)"
                                     : "");
    }
    gt_tee_attestor att = {.collect = {.type = tee, .sim_root = sim_root}, .policy = policy,
                           .roots = root_files, .root_count = (size_t)root_count,
                           .agreement = &a, .peer_role = GT_PEER_HOLDER};
    char hash[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, a.hash, sizeof a.hash);
    printf("agreement %s (%.16s...): %u holder(s), GPT-2 L=%u C=%u NH=%u V=%u, %u steps of %ux%u, "
           "transfer %s, device %s%s\n",
           a.name, hash, a.holder_count, a.layers, a.channels, a.heads, a.vocab, a.steps,
           a.batch, a.seq, gt_transfer_mode_name(transfer), gt_device_kind_name(kind),
           tee == GT_TEE_SIM ? "; this trainer proves itself with insecure-simulation evidence"
                             : "");
    gt_collab_config cfg = {
        .agreement = &a, .dev = dev, .transfer = transfer,
        .attestor = gt_tee_attestor_bind(&att), .trainer_name = name, .state_dir = state_dir,
        .resume = resume, .on_step = on_step, .on_event = on_event, .ctx = &cv,
        .device_address = socket, .sealed_path = sealed_out,
    };
    gt_collab_report rep;
    GT_TRY_GOTO(err, gt_collab_train(&cfg, &rep), out);
    printf("\ntrained %u step(s), final loss %.4f\n", rep.steps_done, (double)rep.final_loss);
    printf("%-16s %12s %12s %6s %12s %10s\n", "holder", "tokens used", "budget", "uses",
           "bytes moved", "transfer s");
    for (uint32_t i = 0; i < a.holder_count; i++) {
        const gt_collab_holder_report *h = &rep.holders[i];
        printf("%-16s %12llu %12llu %6u %12llu %10.3f\n", a.holders[i].name,
               (unsigned long long)h->tokens_used, (unsigned long long)h->token_budget, h->uses,
               (unsigned long long)h->bytes_moved, h->transfer_seconds);
    }
    if (rep.sealed) {
        printf("sealed checkpoint: %s (%llu bytes), openable only by the agreement's %u "
               "recipient(s) with gputravel open-checkpoint\n",
               rep.sealed_path, (unsigned long long)rep.sealed_bytes, rep.sealed_recipients);
    } else {
        printf("output loss_only: no checkpoint was written outside %s\n", state_dir);
    }
    if (cv.n > 0 && (plot == NULL || strcmp(plot, "none") != 0)) {
        char png[4200];
        if (plot == NULL) {
            GT_TRY_GOTO(err, gt_path_join(png, sizeof png, state_dir, "loss.png"), out);
            plot = png;
        }
        gt_plot_series s = {"train loss", cv.steps, cv.losses, cv.n};
        gt_plot_style st = {.title = "collaborative training", .xlabel = "step",
                            .ylabel = "loss"};
        gt_err perr = gt_plot_lines(plot, &st, &s, 1);
        if (gt_is_ok(perr)) {
            printf("loss curve: %s\n", plot);
        } else {
            fprintf(stderr, "gputravel train: note: %s\n", perr.msg);
        }
    }
out:
    free(cv.steps);
    free(cv.losses);
    gt_device_close(dev);
    gt_policy_free(policy);
    for (int i = 0; i < MAX_ROOTS; i++) {
        gt_buf_free_nowipe(&root_bytes[i]);
    }
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail(CMD, err);
}
