// Collaborative training: schedule, fetch, train, erase, checkpoint, journal (orchestr.h).
#include <gputravel/orchestr.h>
#include <gputravel/train.h>

#include "orchestr_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// GPT-2's usual recipe: warmup, cosine decay, clipped gradients; stable on small batches. A
// pinned program (training.program) is this recipe's step.
static const gt_adamw collab_adamw = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                      .weight_decay = 0.0f, .grad_clip = 1.0f};

static void event(const gt_collab_config *cfg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void event(const gt_collab_config *cfg, const char *fmt, ...)
{
    if (cfg->on_event == NULL) {
        return;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cfg->on_event(cfg->ctx, line);
}

typedef struct {
    gt_holder_conn *conns[GT_AGREEMENT_MAX_HOLDERS];
    uint32_t counts[GT_AGREEMENT_MAX_HOLDERS];
    uint64_t *tokens[GT_AGREEMENT_MAX_HOLDERS];
} holders;

static void holders_close(holders *h, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        gt_holder_disconnect(h->conns[i]);
        free(h->tokens[i]);
    }
}

// A holder named by enclave: its quote appraised before anything is asked of it; the identity
// verified goes into the run's report and the event stream.
static gt_err holder_enclave_check(const gt_collab_config *cfg, gt_holder_conn *c, uint32_t i,
                                   gt_collab_holder_report *rep)
{
    GT_TRY(gt_holder_conn_enclave_verify(c, cfg->holder_roots, cfg->holder_root_count));
    const gt_holder_enclave_seen *e = gt_holder_conn_enclave(c);
    if (e == NULL) {
        return GT_OK;
    }
    rep->enclave_verified = true;
    rep->enclave = *e;
    char mrs[65], mre[65];
    gt_hex_encode(mrs, sizeof mrs, e->mrsigner, 32);
    gt_hex_encode(mre, sizeof mre, e->mrenclave, 32);
    event(cfg, "holder %s: enclave identity verified (vsgx quote bound to this agreement, its "
          "identity key and this channel): MRSIGNER %.16s... MRENCLAVE %.16s... ISVPRODID %u "
          "ISVSVN %u, host %s%s", cfg->agreement->holders[i].name, mrs, mre, e->isvprodid,
          e->isvsvn, e->host, e->insecure_simulation ? " (" GT_INSECURE_SIMULATION ")" : "");
    return GT_OK;
}

static gt_err holders_open(holders *h, const gt_collab_config *cfg,
                           const uint8_t signing_key[GT_ED25519_PUBLIC_BYTES],
                           gt_collab_report *report)
{
    const gt_agreement *a = cfg->agreement;
    for (uint32_t i = 0; i < a->holder_count; i++) {
        GT_TRY(gt_holder_connect(&h->conns[i], a, i, &cfg->attestor, cfg->trainer_name,
                                 signing_key));
        GT_TRY(holder_enclave_check(cfg, h->conns[i], i, &report->holders[i]));
        const gt_manifest *m = gt_holder_conn_manifest(h->conns[i]);
        h->counts[i] = m->chunk_count;
        h->tokens[i] = calloc(m->chunk_count ? m->chunk_count : 1, sizeof *h->tokens[i]);
        GT_ENSURE(h->tokens[i] != NULL, GT_E_NOMEM, "out of memory");
        for (uint32_t c = 0; c < m->chunk_count; c++) {
            h->tokens[i][c] = m->chunks[c].plaintext_len / 2;
        }
        event(cfg, "holder %s: attested, serves dataset of %llu tokens in %u chunk(s)",
              a->holders[i].name, (unsigned long long)(m->token_count), m->chunk_count);
    }
    return gt_holders_witness(h->conns, a->holder_count);
}

// Trains up to `max_steps` steps on one chunk buffer; returns steps done and tokens consumed.
static gt_err train_on_chunk(gt_gpt2 *model, const gt_collab_config *cfg, gt_dbuf buf,
                             uint64_t allowed, uint32_t holder, uint32_t chunk, uint32_t step0,
                             uint32_t max_steps, uint32_t *steps_done, uint64_t *tokens,
                             float *last_loss)
{
    const gt_agreement *a = cfg->agreement;
    const int B = (int)a->batch, T = (int)a->seq;
    const uint64_t per_step = (uint64_t)B * (uint64_t)T;
    *steps_done = 0;
    *tokens = 0;
    if (allowed < per_step + 1) {
        return GT_OK;  // too small for one (B, T) batch: nothing trained, nothing counted
    }
    uint64_t samples = (allowed - 1) / per_step;
    uint32_t k = samples < max_steps ? (uint32_t)samples : max_steps;
    gt_loader *loader = NULL;
    uint64_t ntok = allowed;
    GT_TRY(gt_loader_create(&loader, cfg->dev, &buf, &ntok, 1, B, T, (int)a->vocab, false, 0));
    gt_adamw opt = collab_adamw;
    gt_lr_schedule lrs = {.kind = GT_LR_COSINE, .lr = a->learning_rate,
                          .warmup = (int)(a->steps / 20 + 1), .total_steps = (int)a->steps,
                          .final_frac = 0.1f};
    gt_err err = GT_OK;
    // The mean loss leaves only on the steps the agreement's outputs release it (every k-th,
    // counting from 0); on the others the device keeps it (the step reports NaN).
    const uint32_t every = a->outputs.loss ? (a->outputs.loss_every ? a->outputs.loss_every : 1) : 0;
    for (uint32_t s = 0; s < k && !(cfg->stop != NULL && *cfg->stop); s++) {
        double t0 = gt_now_seconds();
        float loss = NAN;
        bool release = every > 0 && (step0 + s) % every == 0;
        GT_TRY_GOTO(err, gt_loader_next(loader), out);
        GT_TRY_GOTO(err, gt_gpt2_zero_grad(model), out);
        GT_TRY_GOTO(err, gt_gpt2_forward_backward(model, gt_loader_inputs(loader),
                                                  gt_loader_targets(loader), B, T, 1.0f,
                                                  release ? &loss : NULL),
                    out);
        GT_TRY_GOTO(err, gt_gpt2_update(model, &opt, gt_lr_at(&lrs, (int)(step0 + s)), NULL),
                    out);
        GT_TRY_GOTO(err, gt_device_sync(cfg->dev), out);
        if (release) {
            *last_loss = loss;
        }
        (*steps_done)++;
        *tokens += per_step;
        if (cfg->on_step != NULL) {
            gt_collab_step st = {.step = step0 + s + 1, .steps = a->steps, .loss = loss,
                                 .ms = (gt_now_seconds() - t0) * 1e3, .holder = holder,
                                 .chunk = chunk};
            cfg->on_step(cfg->ctx, &st);
        }
    }
out:
    gt_loader_free(loader);
    return err;
}

// data/ checks the llm.c header of what it seals by these numbers; train/ writes them.
_Static_assert(GT_SCKPT_LLMC_MAGIC == GT_GPT2_CKPT_MAGIC &&
                   GT_SCKPT_LLMC_VERSION == GT_GPT2_CKPT_VERSION,
               "sealed checkpoints name the llm.c checkpoint train/ writes");

// What may leave the TEE at the end (the agreement's "output"): the final weights sealed by the
// device for the named recipients, or nothing but the loss curve.
static gt_err seal_output(const gt_collab_config *cfg, gt_devstate *ds, gt_gpt2 *model,
                          uint64_t step, gt_collab_report *report)
{
    const gt_agreement *a = cfg->agreement;
    if (a->output != GT_OUTPUT_SEALED_CHECKPOINT) {
        event(cfg, "output loss_only: no checkpoint leaves the device; the model stays in it "
                   "(%s holds only its sealed resume state)", cfg->state_dir);
        return GT_OK;
    }
    char path[4200];
    if (cfg->sealed_path != NULL) {
        GT_ENSURE(strlen(cfg->sealed_path) < sizeof path, GT_E_LIMIT, "path too long: %s",
                  cfg->sealed_path);
        snprintf(path, sizeof path, "%s", cfg->sealed_path);
    } else {
        GT_TRY(gt_path_join(path, sizeof path, cfg->state_dir, "model.sealed"));
    }
    gt_buf sealed = {0};
    gt_sckpt_header *h = calloc(1, sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_devstate_seal_final(ds, model, &sealed), out);
    GT_TRY_GOTO(err, gt_sckpt_header_parse(h, sealed.data, sealed.len), out);
    GT_ENSURE_GOTO(err, h->step == step, out, GT_E_STATE,
                   "the device sealed step %llu, not %llu", (unsigned long long)h->step,
                   (unsigned long long)step);
    GT_TRY_GOTO(err, gt_file_write_atomic(path, sealed.data, sealed.len, 0644), out);
    report->sealed = true;
    snprintf(report->sealed_path, sizeof report->sealed_path, "%s", path);
    report->sealed_bytes = sealed.len;
    report->sealed_recipients = h->recipient_count;
    char size[32], names[1024] = "", signer[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_format_size(size, sizeof size, h->plaintext_len);
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", h->recipients[i].name);
    }
    gt_hex_encode(signer, sizeof signer, h->signer_pub, sizeof h->signer_pub);
    event(cfg, "the device sealed the checkpoint of step %llu (weights only, %s) for %s: %s",
          (unsigned long long)step, size, names, path);
    event(cfg, "signed it with %s %.16s..., the key every holder recorded for this session",
          gt_device_get_kind(cfg->dev) == GT_DEVICE_SIM ? "the device's export key"
                                                        : "this run's signing key",
          signer);
out:
    free(h);
    gt_buf_free_nowipe(&sealed);  // ciphertext
    return err;
}

// The agreement names the devices it accepts: a sim device must be one of them (a device whose
// evidence a custom hook judged keeps no measurement; that hook decided).
static gt_err device_measurement_check(const gt_collab_config *cfg)
{
    const gt_agreement *a = cfg->agreement;
    if (gt_device_get_kind(cfg->dev) != GT_DEVICE_SIM || a->device_measurements.count == 0) {
        return GT_OK;
    }
    uint8_t m[GT_MEASUREMENT_BYTES];
    gt_err e = gt_device_sim_measurement(cfg->dev, m);
    if (gt_is_ok(e) && !gt_measurement_allowed(&a->device_measurements, m)) {
        char hex[2 * GT_MEASUREMENT_BYTES + 1];
        gt_hex_encode(hex, sizeof hex, m, sizeof m);
        return gt_errf(GT_E_POLICY, "the device's measurement %.16s... is not one the "
                                    "agreement accepts", hex);
    }
    GT_ENSURE(gt_is_ok(e) || e.code == GT_E_NOTFOUND, e.code, "%s", e.msg);
    return GT_OK;
}

// The agreement's model, in train's terms.
static gt_gpt2_config model_config(const gt_agreement *a)
{
    return (gt_gpt2_config){.max_seq_len = (int)a->max_seq, .vocab_size = (int)a->vocab,
                            .padded_vocab_size = gt_gpt2_pad_vocab((int)a->vocab),
                            .num_layers = (int)a->layers, .num_heads = (int)a->heads,
                            .channels = (int)a->channels};
}

// Creates the agreement's model with its starting weights: the device-sealed resume state when
// resuming and one exists, else the agreement's seeded random init. *step is the step the run
// starts from.
static gt_err model_start(const gt_collab_config *cfg, gt_gpt2 **modelp, gt_devstate *ds,
                          uint64_t *step)
{
    const gt_agreement *a = cfg->agreement;
    gt_gpt2_config mc = model_config(a);
    GT_TRY(gt_gpt2_create(modelp, cfg->dev, &mc));
    gt_gpt2 *model = *modelp;
    char journal[4200];
    GT_TRY(gt_path_join(journal, sizeof journal, cfg->state_dir, "journal"));
    // A run with committed uses but no resume state may not restart from the init: the journal
    // would count uses the model never saw (gt_devstate_load says why).
    if (cfg->resume &&
        (gt_devstate_exists(ds) || (!ds->resume_declared && gt_path_exists(journal)))) {
        GT_TRY(gt_devstate_load(ds, model));
        *step = gt_gpt2_step(model);
        event(cfg, "resumed from the device-sealed state %s at step %llu", ds->path,
              (unsigned long long)*step);
        return GT_OK;
    }
    return gt_gpt2_init_random(model, a->init_seed);
}

// The use schedule over the holders' chunks, with the journal's committed uses replayed into
// it, and the journal opened for appending. The caller frees *sched and closes *journal.
static gt_err schedule_open(const gt_collab_config *cfg, holders *hs, uint64_t step,
                            const char *journal_path, gt_schedule **sched, gt_journal **journal)
{
    GT_TRY(gt_schedule_create(sched, cfg->agreement, hs->counts,
                              (const uint64_t *const *)hs->tokens));
    uint64_t replayed = 0, dropped = 0;
    GT_TRY(gt_journal_replay(journal_path, step, *sched, &replayed, &dropped));
    if (replayed || dropped) {
        event(cfg, "journal: %llu committed chunk use(s) replayed, %llu uncommitted dropped",
              (unsigned long long)replayed, (unsigned long long)dropped);
    }
    return gt_journal_open(journal, journal_path);
}

gt_err gt_collab_transfer_check(const gt_agreement *a, gt_transfer_mode mode,
                                gt_device_kind kind)
{
    GT_TRY(gt_agreement_transfer_check(a, mode, "--transfer"));
    GT_ENSURE(mode != GT_TRANSFER_TRAVEL || kind != GT_DEVICE_CPU, GT_E_POLICY,
              "--transfer travel on a cpu device: the holder's chunk would be handed over in "
              "this trainer's host memory, which is not travel; that is --transfer "
              "insecure-host-trip, and only an agreement listing it allows it");
    GT_ENSURE(mode != GT_TRANSFER_INSECURE_HOST_TRIP || kind == GT_DEVICE_CPU, GT_E_ARG,
              "--transfer insecure-host-trip is the cpu device's host-memory trip; the %s device "
              "travels with --transfer travel", gt_device_kind_name(kind));
    return GT_OK;
}

static gt_err transfer_check(const gt_collab_config *cfg)
{
    GT_TRY(gt_collab_transfer_check(cfg->agreement, cfg->transfer,
                                    gt_device_get_kind(cfg->dev)));
    const bool trip = cfg->transfer == GT_TRANSFER_TRAVEL ||
                      cfg->transfer == GT_TRANSFER_INSECURE_HOST_TRIP;
    GT_ENSURE(!trip || cfg->device_address, GT_E_UNSUPPORTED,
              "transfer '%s' needs the device's address (devd's socket for the sim device, "
              "the trip socket for cpu and cuda)", gt_transfer_mode_name(cfg->transfer));
    return GT_OK;
}

// Brings chunk c of holder h into device memory by the configured transfer, counting the bytes
// and seconds in the report. *trip is set for a trip this trainer serves.
static gt_err chunk_bring(const gt_collab_config *cfg, holders *hs, uint32_t h, uint32_t c,
                          bool served_trip, gt_fetch_mode fetch, gt_collab_report *report,
                          gt_device_trip **trip, gt_dbuf *buf, uint64_t *ntok)
{
    const gt_agreement *a = cfg->agreement;
    double t0 = gt_now_seconds();
    const bool travels = cfg->transfer == GT_TRANSFER_TRAVEL ||
                         cfg->transfer == GT_TRANSFER_INSECURE_HOST_TRIP;
    if (travels && served_trip) {
        GT_TRY(gt_holder_trip(hs->conns[h], c, cfg->dev, cfg->device_address, a->hash, 60000,
                              trip, buf, ntok));
    } else if (travels) {
        GT_TRY(gt_holder_travel(hs->conns[h], c, cfg->dev, cfg->device_address, 60000, buf,
                                ntok));
    } else {
        GT_TRY(gt_holder_fetch(hs->conns[h], c, fetch, cfg->dev, GT_DBUF_NO_READBACK, buf, ntok));
    }
    // The chunk is the holder's data: labelled with its dataset before any op can run on it
    // (devd labels a travelled chunk itself, from the chunk's authenticated AAD; adding the same
    // id again changes nothing). Unlabelled, it is not kept.
    gt_err le = gt_device_label_add(cfg->dev, *buf, a->holders[h].dataset_id);
    if (!gt_is_ok(le)) {
        gt_err ignored = gt_device_free(cfg->dev, *buf);
        (void)ignored;
        *buf = 0;
        return gt_err_wrap(le, "labelling chunk %u of %s", c, a->holders[h].name);
    }
    double secs = gt_now_seconds() - t0;
    report->holders[h].bytes_moved += *ntok * 2;
    report->holders[h].transfer_seconds += secs;
    event(cfg, "chunk %u of %s: %llu tokens in device memory by %s (%.3f s)", c,
          a->holders[h].name, (unsigned long long)*ntok,
          cfg->transfer == GT_TRANSFER_INSECURE_HOST_TRIP
              ? "a trip in this trainer's host memory (insecure-host-trip)"
              : cfg->transfer == GT_TRANSFER_TRAVEL
                    ? (served_trip ? "a trip this trainer serves" : "GPU travelling")
                    : gt_transfer_mode_name(cfg->transfer),
          secs);
    return GT_OK;
}

// Commits one use: the device-sealed resume state first, then the journal record that counts
// it, then the holder's confirmation.
static gt_err use_commit(gt_gpt2 *model, gt_devstate *ds, gt_schedule *sched,
                         gt_journal *journal, gt_holder_conn *conn, uint64_t step, uint32_t h,
                         uint32_t c, uint64_t counted)
{
    GT_TRY(gt_devstate_save(ds, model));
    GT_TRY(gt_schedule_record(sched, h, c, counted));
    GT_TRY(gt_journal_append_use(journal, step, h, c, counted));
    return gt_holder_confirm_use(conn, c, counted);
}

const char *gt_collab_stop_name(gt_collab_stop stop)
{
    switch (stop) {
    case GT_COLLAB_STOP_STEPS: return "steps";
    case GT_COLLAB_STOP_NO_CHUNKS: return "no-chunks";
    case GT_COLLAB_STOP_FAILURES: return "failures";
    case GT_COLLAB_STOP_INTERRUPTED: return "interrupted";
    }
    return "unknown";
}

// What held holder i's chunks back at the end, appended to the stop message.
static void describe_holder(char *msg, size_t cap, const gt_agreement *a, uint32_t i,
                            const gt_collab_holder_report *h)
{
    size_t n = strlen(msg);
    const char *name = a->holders[i].name;
    switch (h->left) {
    case GT_SCHEDULE_LEFT_USES:
        snprintf(msg + n, cap - n, "; holder %s: every chunk used %u time(s)", name,
                 a->holders[i].max_uses_per_chunk);
        break;
    case GT_SCHEDULE_LEFT_BUDGET:
        snprintf(msg + n, cap - n, "; holder %s: budget (%llu of %llu tokens released, no "
                 "unused chunk fits in the rest)", name, (unsigned long long)h->tokens_used,
                 (unsigned long long)h->token_budget);
        break;
    case GT_SCHEDULE_LEFT_FAILED:
        snprintf(msg + n, cap - n, "; holder %s: %u chunk(s) skipped after a failure (%s)",
                 name, h->skipped, h->failure);
        break;
    case GT_SCHEDULE_LEFT_OPEN:
        snprintf(msg + n, cap - n, "; holder %s: chunks left", name);
        break;
    }
}

// The report's accounts, each holder's limit, and which limit ended the run (stop: steps,
// no-chunks or interrupted as the loop saw it; no-chunks becomes failures when a holder's
// chunks are held back by this run's failures).
static void report_finish(gt_collab_report *report, const gt_schedule *sched,
                          const gt_agreement *a, uint64_t step, float loss, gt_collab_stop stop)
{
    report->steps_done = (uint32_t)step;
    report->final_loss = loss;
    uint32_t failed = 0;
    for (uint32_t i = 0; i < a->holder_count; i++) {
        gt_holder_account acc;
        gt_schedule_account(sched, i, &acc);
        gt_collab_holder_report *h = &report->holders[i];
        h->tokens_used = acc.tokens_used;
        h->token_budget = acc.token_budget;
        h->uses = acc.uses;
        h->left = gt_schedule_why_none(sched, i);
        failed += h->left == GT_SCHEDULE_LEFT_FAILED;
    }
    if (stop == GT_COLLAB_STOP_NO_CHUNKS && failed > 0) {
        stop = GT_COLLAB_STOP_FAILURES;
    }
    report->stop = stop;
    char *msg = report->stop_message;
    const size_t cap = sizeof report->stop_message;
    const unsigned long long at = (unsigned long long)step;
    if (stop == GT_COLLAB_STOP_STEPS) {
        snprintf(msg, cap, "trained the agreement's %u steps", a->steps);
        return;
    }
    if (stop == GT_COLLAB_STOP_INTERRUPTED) {
        snprintf(msg, cap, "interrupted at step %llu of %u", at, a->steps);
        return;
    }
    if (failed == a->holder_count) {
        snprintf(msg, cap, "every holder failed in this run (refused or unreachable): stopped at "
                 "step %llu of %u", at, a->steps);
    } else {
        snprintf(msg, cap, "no chunk left to use%s: stopped at step %llu of %u",
                 failed ? " but ones that failed in this run" : "", at, a->steps);
    }
    for (uint32_t i = 0; i < a->holder_count; i++) {
        describe_holder(msg, cap, a, i, &report->holders[i]);
    }
}

// Whether the device still answers after a failed transfer: one small buffer made and freed.
static bool device_answers(gt_device *dev)
{
    gt_dbuf probe = 0;
    if (!gt_is_ok(gt_device_alloc(dev, 4096, 0, &probe))) {
        return false;
    }
    return gt_is_ok(gt_device_free(dev, probe));
}

// What a failed transfer means for the run (chunk_failed).
typedef enum { FAIL_FATAL, FAIL_CHUNK, FAIL_HOLDER } failure_kind;

// An interrupted chunk (its trip failed, or it was sent as often as it may be: the holder's
// REFUSE says GT_E_RETRY, travel.h) is skipped; a failed connection (the holder went away, a
// broken or stalled peer) skips every chunk of the holder for the rest of the run. Any other failure (a refusal
// is a verdict on this trainer or device), or a device that no longer answers, ends the run.
static failure_kind failure_of(const gt_collab_config *cfg, gt_err why)
{
    const bool interrupted = why.code == GT_E_RETRY;
    const bool lost = why.code == GT_E_PEER || why.code == GT_E_IO || why.code == GT_E_TIMEOUT ||
                      why.code == GT_E_TRUNCATED;
    if (!(interrupted || lost) || !device_answers(cfg->dev)) {
        return FAIL_FATAL;
    }
    return lost ? FAIL_HOLDER : FAIL_CHUNK;
}

// Counts a skipped chunk (kind FAIL_CHUNK or FAIL_HOLDER) in the schedule and the report.
static void failure_note(const gt_collab_config *cfg, gt_schedule *sched,
                         gt_collab_report *report, uint32_t h, uint32_t c, failure_kind kind,
                         const char *why)
{
    gt_collab_holder_report *hr = &report->holders[h];
    if (hr->skipped++ == 0) {  // the first reason, cut to fit (not snprintf: -O3 warns of it)
        size_t n = strnlen(why, sizeof hr->failure - 1);
        memcpy(hr->failure, why, n);
        hr->failure[n] = '\0';
    }
    gt_schedule_skip(sched, h, c);
    if (kind == FAIL_HOLDER) {
        gt_schedule_exclude(sched, h);
        hr->gone = true;
    }
    event(cfg, "chunk %u of %s skipped: %s; %s", c, cfg->agreement->holders[h].name, why,
          kind == FAIL_HOLDER ? "none of its chunks is asked for again in this run"
                              : "going on with the other chunks");
}

// Bringing chunk c of holder h failed with `why` (failure_of says what that means). Either way
// nothing was used, and the run goes on with the other chunks, or `why` is returned.
static gt_err chunk_failed(const gt_collab_config *cfg, gt_schedule *sched,
                           gt_collab_report *report, uint32_t h, uint32_t c, gt_err why)
{
    failure_kind kind = failure_of(cfg, why);
    if (kind == FAIL_FATAL) {
        return why;
    }
    failure_note(cfg, sched, report, h, c, kind, why.msg);
    return GT_OK;
}

gt_err gt_collab_program(const gt_agreement *a, gt_buf *program)
{
    gt_gpt2_config mc = model_config(a);
    return gt_gpt2_program(&mc, (int)a->batch, (int)a->seq, &collab_adamw, program);
}

// The agreement's pinned program, recorded from this trainer's own step, given to the device
// (which checks it is the one the agreement's hash names).
static gt_err program_pin(const gt_collab_config *cfg)
{
    const gt_agreement *a = cfg->agreement;
    gt_buf prog = {0};
    GT_TRY(gt_collab_program(a, &prog));
    gt_err e = gt_device_pin_program(cfg->dev, gt_buf_span(&prog));
    gt_buf_free_nowipe(&prog);
    if (e.code == GT_E_POLICY) {
        return gt_err_wrap(e, "the agreement pins another training program than this trainer's "
                              "(gputravel program prints this trainer's)");
    }
    return e;
}

// Tells the device what the agreement lets out of labelled data (device.h "declared outputs"),
// once per device session: a device that has them already keeps them and their budgets.
static gt_err outputs_declare(const gt_collab_config *cfg)
{
    gt_device_outputs now;
    if (gt_is_ok(gt_device_outputs_get(cfg->dev, &now))) {
        return GT_OK;
    }
    gt_device_outputs outs;
    gt_agreement_device_outputs(cfg->agreement, &outs);
    if (outs.program_pinned) {
        GT_TRY(gt_err_wrap(gt_device_declare_outputs(cfg->dev, &outs,
                                                     (gt_span){cfg->agreement->doc,
                                                               cfg->agreement->doc_len}),
                           "declaring the agreement's outputs to the device"));
        return program_pin(cfg);
    }
    return gt_err_wrap(gt_device_declare_outputs(cfg->dev, &outs,
                                                 (gt_span){cfg->agreement->doc, cfg->agreement->doc_len}),
                       "declaring the agreement's outputs to the device");
}

// The run's signing key pair, the device-sealed state, and the key that will sign the output
// (the device's own on sim, this run's on cpu / cuda), which the holders are told.
static gt_err run_keys(const gt_collab_config *cfg, gt_devstate *ds,
                       uint8_t secret[GT_ED25519_SECRET_BYTES],
                       uint8_t signer[GT_ED25519_PUBLIC_BYTES])
{
    memset(ds, 0, sizeof *ds);
    GT_TRY(gt_ed25519_keypair(signer, secret));
    GT_TRY(gt_devstate_open(ds, cfg, secret));
    return gt_devstate_signer(ds, signer);
}

// What one use of a chunk needs, for the life of gt_collab_train.
typedef struct {
    const gt_collab_config *cfg;
    holders *hs;
    gt_schedule *sched;
    gt_journal *journal;
    gt_devstate *ds;
    gt_gpt2 *model;
    gt_collab_report *report;
    gt_fetch_mode fetch;
    bool served_trip;
} collab_run;

// One use: the schedule's next chunk brought in, trained on, erased, committed. Sets *stop when
// the run ends here (no chunk left, interrupted); a failed transfer is skipped (chunk_failed).
static gt_err use_next_chunk(collab_run *r, uint64_t *step, float *loss, gt_collab_stop *stop)
{
    const gt_collab_config *cfg = r->cfg;
    const gt_agreement *a = cfg->agreement;
    uint32_t h = 0, c = 0;
    uint64_t allowed = 0;
    gt_err next = gt_schedule_next(r->sched, &h, &c, &allowed);
    if (next.code == GT_E_NOTFOUND) {
        *stop = GT_COLLAB_STOP_NO_CHUNKS;
        return GT_OK;
    }
    GT_TRY(next);
    gt_dbuf buf = 0;
    uint64_t ntok = 0;
    gt_device_trip *trip = NULL;  // a served trip: ends (release, RELEASED) before the commit
    gt_err got = chunk_bring(cfg, r->hs, h, c, r->served_trip, r->fetch, r->report, &trip, &buf,
                             &ntok);
    if (!gt_is_ok(got)) {
        return chunk_failed(cfg, r->sched, r->report, h, c, got);
    }
    if (cfg->on_chunk != NULL) {
        cfg->on_chunk(cfg->ctx, cfg->dev, buf, ntok, r->model);
    }
    // Budgets count released tokens (all a holder can enforce): the whole chunk counts, and
    // the schedule offers only chunks that fit in what is left of the budget (the holder
    // refuses one that would cross it). One use is one pass over it, cut short only by the
    // step count.
    uint64_t counted = allowed < ntok ? allowed : ntok;
    uint32_t done = 0;
    uint64_t trained = 0;
    gt_err err = train_on_chunk(r->model, cfg, buf, counted, h, c, (uint32_t)*step,
                                a->steps - (uint32_t)*step, &done, &trained, loss);
    // Erase the chunk whatever happened: it was lent for this use only.
    gt_err erase = trip ? gt_holder_trip_end(trip) : gt_device_free(cfg->dev, buf);
    GT_TRY(err);
    GT_TRY(erase);
    *step += done;
    bool stopping = cfg->stop != NULL && *cfg->stop;
    if (stopping && done == 0) {
        // Nothing of it was trained: no use to commit. The holder keeps it as sent and
        // unconfirmed, which the next run's resend may recover.
        r->report->interrupted = *cfg->stop;
        *stop = GT_COLLAB_STOP_INTERRUPTED;
        event(cfg, "stopping before training on chunk %u of %s: its use is not recorded", c,
              a->holders[h].name);
        return GT_OK;
    }
    // Commit: the sealed resume state first, then the journal record that counts the use.
    GT_TRY(use_commit(r->model, r->ds, r->sched, r->journal, r->hs->conns[h], *step, h, c,
                      counted));
    event(cfg, "chunk %u of %s: trained %u step(s) on %llu of its tokens, erased from the "
               "device, use recorded", c, a->holders[h].name, done, (unsigned long long)trained);
    if (stopping) {
        r->report->interrupted = *cfg->stop;
        *stop = GT_COLLAB_STOP_INTERRUPTED;
        event(cfg, "stopping at step %llu of %u as asked: the resume state is sealed",
              (unsigned long long)*step, a->steps);
    }
    return GT_OK;
}

static gt_err ranks_model_start(const gt_collab_config *cfg, gt_gpt2 **modelp, gt_devstate *ds,
                                uint64_t *step);
static gt_err rank_round(collab_run *r, uint64_t *step, float *loss, gt_collab_stop *stop);

gt_err gt_collab_train(const gt_collab_config *cfg, gt_collab_report *report)
{
    memset(report, 0, sizeof *report);
    const gt_agreement *a = cfg->agreement;
    GT_TRY(transfer_check(cfg));
    // sim: the device travels to devd's holder session; cpu / cuda: the trainer serves the trip
    const bool served_trip = gt_device_get_kind(cfg->dev) != GT_DEVICE_SIM;
    GT_TRY(device_measurement_check(cfg));
    GT_TRY(outputs_declare(cfg));
    const gt_collab_ranks *ranks = cfg->ranks;
    GT_ENSURE(ranks == NULL || (ranks->nranks >= 1 && ranks->nranks <= GT_AGREEMENT_MAX_RANKS &&
                                (uint32_t)ranks->nranks == a->ranks && ranks->rank >= 0 &&
                                ranks->rank < ranks->nranks),
              GT_E_ARG, "%d ranks, but the agreement's trainer.ranks is %u",
              ranks ? ranks->nranks : 1, a->ranks);
    char journal_path[4200];
    GT_TRY(gt_path_join(journal_path, sizeof journal_path, cfg->state_dir, "journal"));

    gt_gpt2 *model = NULL;
    gt_schedule *sched = NULL;
    gt_journal *journal = NULL;
    holders hs;
    memset(&hs, 0, sizeof hs);
    gt_err err = GT_OK;
    float loss = NAN;
    // This process's checkpoint signing key: fresh, wiped at out. cpu / cuda sign with it; on
    // sim the device signs with its own export key. Whichever it is goes to every holder.
    uint8_t signing_secret[GT_ED25519_SECRET_BYTES] = {0};
    gt_devstate ds;
    GT_TRY_GOTO(err, run_keys(cfg, &ds, signing_secret, report->signing_key), out);
    uint64_t step = 0;
    GT_TRY_GOTO(err, ranks ? ranks_model_start(cfg, &model, &ds, &step)
                           : model_start(cfg, &model, &ds, &step),
                out);
    GT_TRY_GOTO(err, holders_open(&hs, cfg, report->signing_key, report), out);
    GT_TRY_GOTO(err, schedule_open(cfg, &hs, step, journal_path, &sched, &journal), out);
    collab_run run = {.cfg = cfg, .hs = &hs, .sched = sched, .journal = journal, .ds = &ds,
                      .model = model, .report = report, .served_trip = served_trip,
                      .fetch = cfg->transfer == GT_TRANSFER_CONVENTIONAL ? GT_FETCH_PLAIN
                                                                         : GT_FETCH_KEYRELEASE};
    // STEPS until a use ends the run early (no chunk left, interrupted)
    gt_collab_stop stop = GT_COLLAB_STOP_STEPS;
    while (step < a->steps && stop == GT_COLLAB_STOP_STEPS) {
        GT_TRY_GOTO(err, ranks ? rank_round(&run, &step, &loss, &stop)
                               : use_next_chunk(&run, &step, &loss, &stop),
                    out);
    }
    report_finish(report, sched, a, step, loss, stop);
    if (report->stop != GT_COLLAB_STOP_STEPS) {
        event(cfg, "%s", report->stop_message);
    }
    if (report->stop == GT_COLLAB_STOP_FAILURES) {
        event(cfg, "the final output is not sealed: the run is not done while chunks it "
                   "could not get are left (--resume continues once their holders answer)");
    }
    if (report->interrupted || report->stop == GT_COLLAB_STOP_FAILURES) {
        goto out;  // no final output: the run goes on with resume
    }
    GT_TRY_GOTO(err, seal_output(cfg, &ds, model, step, report), out);
out:
    gt_secure_zero(signing_secret, sizeof signing_secret);
    gt_devstate_close(&ds);
    gt_journal_close(journal);
    gt_schedule_free(sched);
    holders_close(&hs, a->holder_count);
    gt_gpt2_free(model);
    return err;
}

// ---- across ranks (docs/collaboration.md "Across ranks") ---------------------------------------
// Every rank holds the same schedule and journal: in each round the schedule hands out one chunk
// per rank (rank r the r-th), every rank brings its own from its holder onto its own device, the
// outcomes are exchanged, and either all train on their chunks in lockstep (gradients summed by
// the ring) and commit all N uses, or, when any rank's transfer failed, none trains in that
// round: the failed chunks are skipped on every rank and the others go back to the schedule.

gt_err gt_collab_common_step(const uint64_t *steps, int nranks, int per, uint64_t *common)
{
    bool found = false;
    uint64_t best = 0;
    for (int i = 0; i < per; i++) {
        uint64_t s = steps[i];  // a candidate from rank 0's row: in every other row too?
        bool everywhere = s != UINT64_MAX;
        for (int r = 1; r < nranks && everywhere; r++) {
            bool here = false;
            for (int j = 0; j < per; j++) {
                here = here || steps[(size_t)r * (size_t)per + (size_t)j] == s;
            }
            everywhere = here;
        }
        if (everywhere && (!found || s > best)) {
            best = s;
            found = true;
        }
    }
    GT_ENSURE(found, GT_E_NOTFOUND, "no checkpoint step is common to every rank");
    *common = best;
    return GT_OK;
}

// The run's tag (16 random bytes rank 0 drew when the run began, kept in every rank's
// state_dir/run.id): a fresh run agrees on rank 0's; a resumed one checks every rank has it.
static gt_err ranks_run_tag(const gt_collab_config *cfg, uint8_t tag[16])
{
    const gt_collab_ranks *k = cfg->ranks;
    char path[4200];
    GT_TRY(gt_path_join(path, sizeof path, cfg->state_dir, "run.id"));
    uint8_t mine[16] = {0};
    if (cfg->resume) {
        gt_buf b = {0};
        GT_TRY(gt_err_wrap(gt_file_read_all(path, 64, &b), "--resume: this rank's run id"));
        bool ok = b.len == 16;
        if (ok) {
            memcpy(mine, b.data, 16);
        }
        gt_buf_free_nowipe(&b);
        GT_ENSURE(ok, GT_E_FORMAT, "%s: not a run id (16 bytes)", path);
    } else {
        GT_TRY(gt_random_bytes(mine, sizeof mine));
    }
    uint8_t *all = calloc((size_t)k->nranks, 16);
    GT_ENSURE(all != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = k->allgather(k->ctx, mine, 16, all);
    for (int r = 1; r < k->nranks && gt_is_ok(err) && cfg->resume; r++) {
        if (memcmp(all + 16 * (size_t)r, all, 16) != 0) {
            err = gt_errf(GT_E_STATE, "--resume: rank %d's state folder is of another run than "
                          "rank 0's (their run ids differ)", r);
        }
    }
    if (gt_is_ok(err)) {
        memcpy(tag, all, 16);
    }
    free(all);
    if (gt_is_ok(err) && !cfg->resume) {
        err = gt_file_write_atomic(path, tag, 16, 0600);
    }
    return err;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

// Resume across ranks: the newest step every rank has sealed (a rank killed between its own
// seal and another's may be one round ahead), loaded on every rank; none anywhere: a run killed
// before its first commit starts over from the init. *step is where the run starts.
static gt_err ranks_resume(const gt_collab_config *cfg, gt_devstate *ds, gt_gpt2 *model,
                           uint64_t *step)
{
    const gt_collab_ranks *k = cfg->ranks;
    GT_ENSURE(ds->resume_declared, GT_E_POLICY,
              "the agreement declares no resume output, so the devices seal no resume state "
              "and this run cannot resume");
    uint64_t mine[2];
    GT_TRY(gt_devstate_steps(ds, mine));
    uint8_t wire[16];
    gt_writer w = gt_writer_init_fixed(wire, sizeof wire);
    GT_TRY(gt_writer_u64le(&w, mine[0]));
    GT_TRY(gt_writer_u64le(&w, mine[1]));
    uint64_t *all = calloc((size_t)k->nranks, sizeof mine);
    uint8_t *bytes = calloc((size_t)k->nranks, sizeof wire);
    gt_err err = all && bytes ? k->allgather(k->ctx, wire, sizeof wire, bytes)
                              : gt_errf(GT_E_NOMEM, "out of memory");
    gt_reader rd = gt_reader_init(bytes, bytes ? (size_t)k->nranks * sizeof wire : 0);
    for (int i = 0; i < 2 * k->nranks && gt_is_ok(err); i++) {
        err = gt_reader_u64le(&rd, &all[i]);  // MPI carries them: read, not cast
    }
    free(bytes);
    bool none = true;
    for (int i = 0; i < 2 * k->nranks && gt_is_ok(err); i++) {
        none = none && all[i] == UINT64_MAX;
    }
    uint64_t common = 0;
    if (gt_is_ok(err) && !none) {
        err = gt_collab_common_step(all, k->nranks, 2, &common);
    }
    free(all);
    GT_TRY(err);
    if (none) {
        event(cfg, "no rank has sealed a checkpoint yet: starting over from the init");
        return gt_gpt2_init_random(model, cfg->agreement->init_seed);
    }
    GT_TRY(gt_devstate_at(ds, common));
    GT_TRY(gt_devstate_load(ds, model));
    *step = gt_gpt2_step(model);
    GT_ENSURE(*step == common, GT_E_STATE, "%s holds step %llu, not %llu", ds->path,
              (unsigned long long)*step, (unsigned long long)common);
    event(cfg, "rank %d resumed from the device-sealed state %s at step %llu, the newest every "
          "rank has (this rank's newest: %llu)", k->rank, ds->path,
          (unsigned long long)common, (unsigned long long)mine[0]);
    return GT_OK;
}

// model_start across ranks: the run's tag bound into every resume state, the start (fresh or
// the common checkpoint), then the ring over the model's gradients.
static gt_err ranks_model_start(const gt_collab_config *cfg, gt_gpt2 **modelp, gt_devstate *ds,
                                uint64_t *step)
{
    const gt_collab_ranks *k = cfg->ranks;
    uint8_t tag[16];
    GT_TRY(ranks_run_tag(cfg, tag));
    ds->bound = true;
    ds->bind = (gt_resume_loader){.epoch = (uint64_t)k->nranks, .shard = (uint64_t)k->rank,
                                  .seed = le64(tag), .sample_tokens = le64(tag + 8)};
    gt_gpt2_config mc = model_config(cfg->agreement);
    GT_TRY(gt_gpt2_create(modelp, cfg->dev, &mc));
    *step = 0;
    if (cfg->resume) {
        GT_TRY(ranks_resume(cfg, ds, *modelp, step));
    } else {
        gt_devstate_prune(ds, UINT64_MAX, false);  // an earlier run's states: not this run's
        GT_TRY(gt_gpt2_init_random(*modelp, cfg->agreement->init_seed));
    }
    gt_dbuf grads = 0;
    GT_TRY(gt_gpt2_grads_buf(*modelp, &grads));
    return gt_err_wrap(k->start(k->ctx, cfg->dev, grads), "admitting the ranks");
}

void gt_collab_outcome_write(const gt_collab_outcome *o, uint8_t out[GT_COLLAB_OUTCOME_BYTES])
{
    memset(out, 0, GT_COLLAB_OUTCOME_BYTES);
    out[0] = o->kind;
    out[1] = o->stop;
    for (int i = 0; i < 8; i++) {
        out[2 + i] = (uint8_t)(o->counted >> (8 * i));
    }
    size_t n = strnlen(o->reason, GT_COLLAB_REASON_BYTES);
    out[10] = (uint8_t)n;
    for (size_t i = 0; i < n; i++) {
        char c = o->reason[i];
        out[11 + i] = (uint8_t)(c >= 0x20 && c < 0x7f ? c : '?');
    }
}

gt_err gt_collab_outcome_parse(gt_collab_outcome *o, const uint8_t *data, size_t len)
{
    memset(o, 0, sizeof *o);
    GT_ENSURE(len == GT_COLLAB_OUTCOME_BYTES, GT_E_FORMAT, "outcome: %zu bytes, not %d", len,
              GT_COLLAB_OUTCOME_BYTES);
    gt_reader r = gt_reader_init(data, len);
    uint8_t n = 0;
    GT_TRY(gt_reader_u8(&r, &o->kind));
    GT_TRY(gt_reader_u8(&r, &o->stop));
    GT_TRY(gt_reader_u64le(&r, &o->counted));
    GT_TRY(gt_reader_u8(&r, &n));
    GT_ENSURE(n <= GT_COLLAB_REASON_BYTES, GT_E_FORMAT, "outcome: a reason of %u bytes", n);
    GT_TRY(gt_reader_bytes(&r, o->reason, n));
    for (uint8_t i = 0; i < n; i++) {
        GT_ENSURE(o->reason[i] >= 0x20 && o->reason[i] < 0x7f, GT_E_FORMAT,
                  "outcome: the reason is not printable ASCII");
    }
    while (gt_reader_left(&r) > 0) {
        uint8_t pad = 0;
        GT_TRY(gt_reader_u8(&r, &pad));
        GT_ENSURE(pad == 0, GT_E_FORMAT, "outcome: padding is not zero");
    }
    GT_ENSURE(o->kind <= GT_COLLAB_OUT_FATAL, GT_E_FORMAT, "outcome: unknown kind %u", o->kind);
    GT_ENSURE(o->kind == GT_COLLAB_OUT_OK || o->counted == 0, GT_E_FORMAT,
              "outcome: a failed chunk counts %llu tokens", (unsigned long long)o->counted);
    GT_ENSURE(o->kind != GT_COLLAB_OUT_OK || n == 0, GT_E_FORMAT,
              "outcome: a chunk that arrived has a failure reason");
    return GT_OK;
}

typedef struct {
    uint32_t h, c;
    uint64_t allowed;
} round_pick;

// The lockstep steps of a round on this rank's chunk: each step's gradients (the loss scaled by
// 1/N) summed over the ranks before the update, the released loss the ranks' mean.
static gt_err rank_steps(collab_run *r, gt_dbuf buf, uint64_t counted, uint32_t k,
                         uint64_t *step, float *last_loss, const round_pick *mine)
{
    const gt_collab_config *cfg = r->cfg;
    const gt_collab_ranks *rk = cfg->ranks;
    const gt_agreement *a = cfg->agreement;
    const int B = (int)a->batch, T = (int)a->seq;
    gt_loader *loader = NULL;
    uint64_t ntok = counted;
    GT_TRY(gt_loader_create(&loader, cfg->dev, &buf, &ntok, 1, B, T, (int)a->vocab, false, 0));
    gt_adamw opt = collab_adamw;
    gt_lr_schedule lrs = {.kind = GT_LR_COSINE, .lr = a->learning_rate,
                          .warmup = (int)(a->steps / 20 + 1), .total_steps = (int)a->steps,
                          .final_frac = 0.1f};
    const uint32_t every =
        a->outputs.loss ? (a->outputs.loss_every ? a->outputs.loss_every : 1) : 0;
    const uint64_t n = gt_gpt2_num_params(r->model);
    float *losses = calloc((size_t)rk->nranks, sizeof *losses);
    gt_err err = losses ? GT_OK : gt_errf(GT_E_NOMEM, "out of memory");
    for (uint32_t s = 0; s < k && gt_is_ok(err); s++) {
        double t0 = gt_now_seconds();
        float loss = NAN;
        bool release = every > 0 && (*step) % every == 0;
        GT_TRY_GOTO(err, gt_loader_next(loader), out);
        GT_TRY_GOTO(err, gt_gpt2_zero_grad(r->model), out);
        GT_TRY_GOTO(err, gt_gpt2_forward_backward(r->model, gt_loader_inputs(loader),
                                                  gt_loader_targets(loader), B, T,
                                                  1.0f / (float)rk->nranks,
                                                  release ? &loss : NULL),
                    out);
        GT_TRY_GOTO(err, gt_err_wrap(rk->allreduce(rk->ctx, n, *step), "gradients of step %llu",
                                     (unsigned long long)*step + 1),
                    out);
        GT_TRY_GOTO(err, gt_gpt2_update(r->model, &opt, gt_lr_at(&lrs, (int)*step), NULL), out);
        GT_TRY_GOTO(err, gt_device_sync(cfg->dev), out);
        if (release) {
            // Each rank's released loss is of its own batch, all of one size: their mean is the
            // step's loss. The loss scale 1/N does not touch the released value.
            GT_TRY_GOTO(err, rk->allgather(rk->ctx, &loss, sizeof loss, losses), out);
            double sum = 0.0;
            for (int i = 0; i < rk->nranks; i++) {
                sum += losses[i];
            }
            loss = (float)(sum / rk->nranks);
            *last_loss = loss;
        }
        (*step)++;
        if (cfg->on_step != NULL) {
            gt_collab_step st = {.step = (uint32_t)*step, .steps = a->steps, .loss = loss,
                                 .ms = (gt_now_seconds() - t0) * 1e3, .holder = mine->h,
                                 .chunk = mine->c};
            cfg->on_step(cfg->ctx, &st);
        }
    }
out:
    free(losses);
    gt_loader_free(loader);
    return err;
}

// Commits a round at step: every rank's use journaled (the journal is the same on every rank),
// then this rank's device-sealed state of the step, then, once every rank has sealed it, the
// use confirmed to this rank's holder. A kill before every rank sealed leaves the step
// uncommitted everywhere: the resume goes back to the common checkpoint and drops the journal's
// records of this round, and no holder has confirmed any of its uses (they are sent again).
static gt_err rank_commit(collab_run *r, const round_pick *p, const gt_collab_outcome *out,
                          uint64_t step)
{
    const gt_collab_ranks *k = r->cfg->ranks;
    for (int i = 0; i < k->nranks; i++) {
        GT_TRY(gt_schedule_record(r->sched, p[i].h, p[i].c, out[i].counted));
        GT_TRY(gt_journal_append_use(r->journal, step, p[i].h, p[i].c, out[i].counted));
    }
    GT_TRY(gt_devstate_at(r->ds, step));
    GT_TRY(gt_devstate_save(r->ds, r->model));
    gt_devstate_prune(r->ds, step, true);
    uint8_t sealed = 1, *all = calloc((size_t)k->nranks, 1);
    GT_ENSURE(all != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = k->allgather(k->ctx, &sealed, 1, all);
    free(all);
    GT_TRY(gt_err_wrap(err, "waiting for every rank's checkpoint of step %llu",
                       (unsigned long long)step));
    const round_pick *mine = &p[k->rank];
    return gt_holder_confirm_use(r->hs->conns[mine->h], mine->c, out[k->rank].counted);
}

// The schedule's next N chunks, one per rank; false when fewer are left (then no rank trains:
// a round needs a batch on every rank).
static bool round_picks(gt_schedule *sched, int nranks, round_pick *p)
{
    int got = 0;
    for (; got < nranks; got++) {
        if (!gt_is_ok(gt_schedule_next(sched, &p[got].h, &p[got].c, &p[got].allowed))) {
            break;
        }
        gt_schedule_hold(sched, p[got].h, p[got].c);
    }
    gt_schedule_unhold(sched);
    return got == nranks;
}

// A round where some rank's transfer failed: its chunk is skipped on every rank (its holder
// excluded when the connection failed), nothing is trained or committed; the chunks of the
// others go back to the schedule (their holders count them as sent and unconfirmed, which they
// allow once more).
static void round_failed(collab_run *r, const round_pick *p, const gt_collab_outcome *out,
                         const char *my_why)
{
    const gt_collab_ranks *k = r->cfg->ranks;
    for (int i = 0; i < k->nranks; i++) {
        if (out[i].kind == GT_COLLAB_OUT_OK) {
            continue;
        }
        char why[512];
        if (i == k->rank) {
            snprintf(why, sizeof why, "%s", my_why);
        } else {
            snprintf(why, sizeof why, "rank %d: %s", i, out[i].reason);
        }
        failure_note(r->cfg, r->sched, r->report, p[i].h, p[i].c,
                     out[i].kind == GT_COLLAB_OUT_HOLDER ? FAIL_HOLDER : FAIL_CHUNK, why);
    }
    event(r->cfg, "round at step %llu not trained: a rank had no chunk; the others' chunks "
          "are offered again", (unsigned long long)gt_gpt2_step(r->model));
}

// This round's outcomes on every rank (parsed: MPI carries them); one of them fatal ends the
// run on every rank.
static gt_err round_exchange(collab_run *r, const gt_collab_outcome *mine, gt_collab_outcome *out)
{
    const gt_collab_ranks *k = r->cfg->ranks;
    uint8_t wire[GT_COLLAB_OUTCOME_BYTES];
    gt_collab_outcome_write(mine, wire);
    uint8_t *all = calloc((size_t)k->nranks, sizeof wire);
    GT_ENSURE(all != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = k->allgather(k->ctx, wire, sizeof wire, all);
    for (int i = 0; i < k->nranks && gt_is_ok(err); i++) {
        err = gt_err_wrap(gt_collab_outcome_parse(&out[i], all + (size_t)i * sizeof wire,
                                                  sizeof wire),
                          "rank %d's outcome of the round", i);
        if (gt_is_ok(err) && out[i].kind == GT_COLLAB_OUT_FATAL && i != k->rank) {
            err = gt_errf(GT_E_PEER, "rank %d could not bring its chunk: %s", i,
                          out[i].reason);
        }
    }
    free(all);
    return err;
}

// One round across ranks (see above). Sets *stop as use_next_chunk does.
static gt_err rank_round(collab_run *r, uint64_t *step, float *loss, gt_collab_stop *stop)
{
    const gt_collab_config *cfg = r->cfg;
    const gt_collab_ranks *k = cfg->ranks;
    const gt_agreement *a = cfg->agreement;
    round_pick p[GT_AGREEMENT_MAX_RANKS];
    gt_collab_outcome out[GT_AGREEMENT_MAX_RANKS];
    if (!round_picks(r->sched, k->nranks, p)) {
        *stop = GT_COLLAB_STOP_NO_CHUNKS;
        return GT_OK;
    }
    const round_pick *mine = &p[k->rank];
    gt_dbuf buf = 0;
    uint64_t ntok = 0;
    gt_device_trip *trip = NULL;
    gt_err got = chunk_bring(cfg, r->hs, mine->h, mine->c, r->served_trip, r->fetch, r->report,
                             &trip, &buf, &ntok);
    gt_collab_outcome me = {.kind = GT_COLLAB_OUT_OK,
                            .stop = cfg->stop != NULL ? (uint8_t)*cfg->stop : 0,
                            .counted = mine->allowed < ntok ? mine->allowed : ntok};
    if (!gt_is_ok(got)) {
        failure_kind f = failure_of(cfg, got);
        me.kind = f == FAIL_FATAL   ? GT_COLLAB_OUT_FATAL
                  : f == FAIL_CHUNK ? GT_COLLAB_OUT_CHUNK
                                    : GT_COLLAB_OUT_HOLDER;
        me.counted = 0;
        // released: every rank says it (cut to the slot)
        size_t n = strnlen(got.msg, GT_COLLAB_REASON_BYTES);
        memcpy(me.reason, got.msg, n);
        me.reason[n] = '\0';
    }
    gt_err err = round_exchange(r, &me, out);
    if (!gt_is_ok(got) && (me.kind == GT_COLLAB_OUT_FATAL || !gt_is_ok(err))) {
        return got;
    }
    bool failed = false;
    int stopping = 0;  // the first stopped rank's signal
    uint64_t per_step = (uint64_t)a->batch * a->seq, samples = UINT64_MAX;
    for (int i = 0; i < k->nranks && gt_is_ok(err); i++) {
        failed = failed || out[i].kind != GT_COLLAB_OUT_OK;
        stopping = stopping ? stopping : out[i].stop;
        uint64_t s = out[i].counted > per_step ? (out[i].counted - 1) / per_step : 0;
        samples = s < samples ? s : samples;
    }
    uint32_t kk = (uint32_t)(samples < a->steps - *step ? samples : a->steps - *step);
    if (gt_is_ok(err) && !failed && !stopping) {
        err = rank_steps(r, buf, out[k->rank].counted, kk, step, loss, mine);
    }
    // Erase the chunk whatever happened: it was lent for this use only.
    gt_err erase = !gt_is_ok(got) ? GT_OK : trip ? gt_holder_trip_end(trip)
                                                 : gt_device_free(cfg->dev, buf);
    GT_TRY(err);
    GT_TRY(erase);
    if (failed) {
        round_failed(r, p, out, got.msg);
        return GT_OK;
    }
    if (stopping) {
        r->report->interrupted = stopping;
        *stop = GT_COLLAB_STOP_INTERRUPTED;
        event(cfg, "stopping before training this round, as asked: its uses are not recorded");
        return GT_OK;
    }
    GT_TRY(rank_commit(r, p, out, *step));
    event(cfg, "round: %d ranks trained %u step(s) each on their chunks (this rank: chunk %u "
          "of %s), erased, uses recorded", k->nranks, kk, mine->c, a->holders[mine->h].name);
    return GT_OK;
}
