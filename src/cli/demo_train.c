// gputravel demo, step 6: the trainer attests to every holder and trains on all their data.
#include "demo.h"

#include <stdlib.h>
#include <string.h>

static void on_step(void *ctx, const gt_collab_step *s)
{
    demo *d = ctx;
    double *x = realloc(d->curve_x, (d->curve_n + 1) * sizeof *x);
    if (x != NULL) {
        d->curve_x = x;
    }
    double *y = realloc(d->curve_y, (d->curve_n + 1) * sizeof *y);
    if (y != NULL) {
        d->curve_y = y;
    }
    if (x != NULL && y != NULL) {
        x[d->curve_n] = s->step;
        y[d->curve_n++] = s->loss;
    }
    if (s->step == 1 || s->step % 50 == 0 || s->step == s->steps) {
        say(d, "      step %4u/%u  loss %.4f  (%s's chunk %u)\n", s->step, s->steps,
            (double)s->loss, holder_names[s->holder % HOLDERS], s->chunk);
    }
}

static void on_event(void *ctx, const char *line)
{
    demo *d = ctx;
    // Chunk-by-chunk events are many; the story keeps the first of each kind.
    static const char *const keep[] = {"attested", "resumed", "journal", "stopping", "sealed",
                                       "output", "signing key"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        if (strstr(line, keep[i]) != NULL) {
            say(d, "    %s\n", line);
        }
    }
}

// The trainer turned adversary, once, on the first travelled chunk: every way back it tries is
// refused by the device, which says why. Nothing here changes the training that follows.
static void refused(demo *d, const char *what, gt_err e)
{
    say(d, "      %-44s %s\n", what, e.code == GT_E_POLICY ? "REFUSED by the device:" : "?!");
    say(d, "        %s\n", e.msg);
}

static void try_read_back(void *ctx, gt_device *dev, gt_dbuf chunk, uint64_t tokens,
                          gt_gpt2 *model)
{
    demo *d = ctx;
    if (d->attacked || tokens < 2 * 64 + 1) {
        return;
    }
    d->attacked = true;
    say(d, "    The trainer now tries, as an adversary would, to read the chunk it was lent back:\n");
    uint8_t *out = calloc(1, 64 * 4);
    gt_dbuf inp = 0, tgt = 0;
    if (out == NULL || !gt_is_ok(gt_device_alloc(dev, 64 * 4, 0, &inp)) ||
        !gt_is_ok(gt_device_alloc(dev, 64 * 4, 0, &tgt))) {
        free(out);
        return;
    }
    refused(d, "copy_out of the chunk itself", gt_device_copy_out(dev, out, chunk, 0, 64));
    gt_op g = gt_op_tokens_gather((gt_dref){inp, 0}, (gt_dref){tgt, 0}, (gt_dref){chunk, 0}, 64,
                                  0, 256);
    gt_err e = gt_device_launch(dev, &g);
    refused(d, "gather into its own buffer, then copy_out",
            gt_is_ok(e) ? gt_device_copy_out(dev, out, inp, 0, 64 * 4) : e);
    gt_dref losses = {0, 0};
    e = gt_gpt2_forward_losses(model, inp, tgt, 1, 64, &losses);
    refused(d, "the per-position loss vector (B*T floats)",
            gt_is_ok(e) ? gt_device_copy_out(dev, out, losses.buf, losses.offset, 64 * 4) : e);
    say(d, "    Labels follow the data through every op: only what the agreement's \"outputs\"\n"
           "    declare leaves (one mean loss per step), and the weights leave only sealed by\n"
           "    the device.\n");
    gt_err ignored = gt_device_free(dev, inp);
    ignored = gt_device_free(dev, tgt);
    (void)ignored;
    free(out);
}

// The holder the agreement names by enclave: the trainer must have verified its quote (the demo
// fails otherwise: that check is the point of naming it so).
static gt_err enclave_holder_verified(demo *d, const gt_collab_report *rep)
{
    for (uint32_t i = 0; i < d->agreement.holder_count; i++) {
        if (!d->agreement.holders[i].enclave.present) {
            continue;
        }
        const gt_collab_holder_report *h = &rep->holders[i];
        GT_ENSURE(h->enclave_verified, GT_E_STATE, "holder %s is named by enclave, and the "
                  "trainer did not verify its enclave quote", d->agreement.holders[i].name);
        char mrs[65];
        gt_hex_encode(mrs, sizeof mrs, h->enclave.mrsigner, 32);
        say(d, "    The trainer verified holder %s's enclave before asking it for any chunk: a\n"
               "    vsgx quote of MRSIGNER %.16s... (the agreement's), ISVSVN %u, bound to this\n"
               "    agreement, the holder's identity key and the channel; host %s%s.\n",
            d->agreement.holders[i].name, mrs, h->enclave.isvsvn, h->enclave.host,
            h->enclave.insecure_simulation ? " (" GT_INSECURE_SIMULATION ")" : "");
    }
    return GT_OK;
}

// Under --mem-limit: what devd's pager did, from its STAT reply; a cap the run never reached
// is said too (nothing was paged).
static gt_err paging_said(demo *d, gt_device *dev)
{
    gt_device_sim_stat sim;
    GT_TRY(gt_device_sim_stat_get(dev, &sim));
    d->paged = sim.paging;
    char cap[32], peak[32], out[32];
    gt_format_size(cap, sizeof cap, d->mem_limit);
    gt_format_size(peak, sizeof peak, sim.paging.peak_resident);
    gt_format_size(out, sizeof out, sim.paging.page_outs * sim.paging.page_bytes);
    if (sim.paging.page_outs == 0) {
        say(d, "    Paging: the %s cap was never reached (peak resident %s): nothing was paged.\n",
            cap, peak);
        return GT_OK;
    }
    say(d, "    Paging: protected memory stayed within %s (peak resident %s); %llu pages (%s)\n"
           "    left it sealed and %llu were faulted back in, each checked against the hash\n"
           "    tree; %llu ops (matmuls, sums of squares) ran in parts to fit.\n",
        cap, peak, (unsigned long long)sim.paging.page_outs, out,
        (unsigned long long)sim.paging.fault_ins, (unsigned long long)sim.paging.ops_in_parts);
    return GT_OK;
}

gt_err demo_step_train(demo *d, gt_collab_report *rep)
{
    step_begin(d, 6, "The trainer attests to every holder and trains on all their data");
    gt_device *dev = NULL;
    gt_policy *policy = NULL;
    gt_buf root = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_policy_load_file(&policy, d->policy), out);
    GT_TRY_GOTO(err, gt_file_read_all(d->root_pub, 1 << 16, &root), out);
    gt_attest_file rf = {d->root_pub, gt_buf_span(&root)};
    gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = d->socket};
    gt_device_sim_options so = {.timeout_ms = 0};
    memcpy(so.agreement_hash, d->agreement.hash, sizeof so.agreement_hash);
    GT_TRY_GOTO(err, gt_device_open_sim(&dev, &dc, &so), out);
    say(d, "    The trainer opened an attested session with devd: the device's evidence\n"
           "    (insecure-simulation) verified against the simulated vendor root.\n");
    gt_tee_attestor att = {.collect = {.type = GT_TEE_SIM, .sim_root = d->sim_root},
                           .policy = policy, .roots = &rf, .root_count = 1,
                           .agreement = &d->agreement, .peer_role = GT_PEER_HOLDER};
    GT_TRY_GOTO(err, gt_mkdir_p(d->state, 0700), out);
    snprintf(d->sealed, sizeof d->sealed, "%s/model.sealed", d->dir);
    gt_collab_config cfg = {
        .agreement = &d->agreement, .dev = dev, .transfer = d->transfer,
        .attestor = gt_tee_attestor_bind(&att), .trainer_name = "demo-trainer",
        .state_dir = d->state, .on_step = on_step, .on_event = on_event, .ctx = d,
        .device_address = d->socket, .sealed_path = d->sealed, .on_chunk = try_read_back,
        .holder_roots = &rf, .holder_root_count = 1,
    };
    if (d->transfer == GT_TRANSFER_TRAVEL) {
        say(d, "    GPU travelling: for each chunk the trainer lends the device to its holder;\n"
               "    the holder attaches with the ticket (sent over the attested channel),\n"
               "    appraises the device, streams the sealed chunk unchanged and releases only\n"
               "    its key to the device, which decrypts it once into protected memory; the\n"
               "    device returns. No dataset byte crosses the network. A holder's first trip\n"
               "    opens an attested session with the device; its later trips reattach that\n"
               "    session with the new ticket instead of a new handshake.\n");
    } else {
        say(d, "    Transfer: %s over the attested channel.\n", gt_transfer_mode_name(d->transfer));
    }
    say(d, "    Each chunk lands in device memory as a NO_READBACK buffer, is trained on once,\n"
           "    then erased; the use is checkpointed, journaled and confirmed to its holder.\n");
    GT_TRY_GOTO(err, gt_collab_train(&cfg, rep), out);
    GT_TRY_GOTO(err, enclave_holder_verified(d, rep), out);
    if (d->mem_limit != 0) {
        GT_TRY_GOTO(err, paging_said(d, dev), out);
    }
    say(d, "    %-9s %12s %12s %6s %12s\n", "holder", "tokens used", "budget", "chunks",
        "transfer s");
    for (int i = 0; i < HOLDERS; i++) {
        const gt_collab_holder_report *h = &rep->holders[i];
        say(d, "    %-9s %12llu %12llu %6u %12.3f\n", holder_names[i],
            (unsigned long long)h->tokens_used, (unsigned long long)h->token_budget, h->uses,
            h->transfer_seconds);
    }
out:
    gt_device_close(dev);
    gt_policy_free(policy);
    gt_buf_free_nowipe(&root);
    step_end(d);
    return err;
}
