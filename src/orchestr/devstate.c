// The device-sealed run state of an agreement run (orchestr_internal.h): resume states the device
// seals to itself after every chunk, and the final checkpoint it seals to the recipients. The
// trainer's host only ever holds their ciphertext.
#include "orchestr_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RESUME_MAX_BYTES ((size_t)1 << 36)  // what --resume reads back at most (64 GiB)

gt_err gt_devstate_open(gt_devstate *ds, const gt_collab_config *cfg,
                        const uint8_t *signing_secret)
{
    memset(ds, 0, sizeof *ds);
    ds->dev = cfg->dev;
    ds->local = (gt_export_local){.agreement = cfg->agreement, .signing_secret = signing_secret};
    gt_device_outputs rules;
    gt_agreement_device_outputs(cfg->agreement, &rules);
    ds->resume_declared = rules.resume;
    ds->state_dir = cfg->state_dir;
    return gt_path_join(ds->path, sizeof ds->path, cfg->state_dir, GT_DEVSTATE_RESUME_FILE);
}

// cpu / cuda: the trainer's process is the device; its resume key lives in state_dir, made on
// first use (so a run refused before training leaves nothing there).
static gt_err resume_key(gt_devstate *ds)
{
    if (ds->local.resume == NULL && gt_device_get_kind(ds->dev) != GT_DEVICE_SIM) {
        GT_TRY(gt_resume_device_load(ds->state_dir, &ds->rd));
        ds->local.resume = &ds->rd;
    }
    return GT_OK;
}

void gt_devstate_close(gt_devstate *ds) { gt_secure_zero(ds, sizeof *ds); }

gt_err gt_devstate_signer(gt_devstate *ds, uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    return gt_err_wrap(gt_travel_export_signer(ds->dev, &ds->local, pub),
                       "the device's checkpoint signing key");
}

static gt_err export_model(gt_gpt2 *model, bool alloc_moments, gt_export_model *x)
{
    gt_gpt2_state_bufs b;
    GT_TRY(gt_gpt2_state_bufs_get(model, alloc_moments, &b));
    const gt_gpt2_config *c = gt_gpt2_get_config(model);
    *x = (gt_export_model){
        .params = b.params, .m = b.m, .v = b.v, .params_bytes = b.params_bytes,
        .step = gt_gpt2_step(model),
        .model = {.max_seq_len = (uint32_t)c->max_seq_len, .vocab_size = (uint32_t)c->vocab_size,
                  .num_layers = (uint32_t)c->num_layers, .num_heads = (uint32_t)c->num_heads,
                  .channels = (uint32_t)c->channels,
                  .padded_vocab_size = (uint32_t)c->padded_vocab_size}};
    return GT_OK;
}

gt_err gt_devstate_save(gt_devstate *ds, gt_gpt2 *model)
{
    if (!ds->resume_declared) {
        return GT_OK;  // nothing may leave: a crashed run cannot resume (gt_devstate_load says so)
    }
    GT_TRY(resume_key(ds));
    gt_export_model x;
    GT_TRY(export_model(model, false, &x));
    if (ds->bound) {
        x.loader = ds->bind;
    }
    gt_buf state = {0};
    gt_err err = gt_travel_export_resume(ds->dev, &x, &ds->local, &state);
    if (gt_is_ok(err)) {
        err = gt_file_write_atomic(ds->path, state.data, state.len, 0600);
    }
    gt_buf_free_nowipe(&state);  // ciphertext
    return gt_err_wrap(err, "resume state %s", ds->path);
}

bool gt_devstate_exists(const gt_devstate *ds) { return gt_path_exists(ds->path); }

// The rank, size and run a loaded state was sealed for must be this rank's of this run: a
// state copied from another rank's folder or another run is refused (on sim its device id
// already differs for another rank; on cpu a copied resume.key would not).
static gt_err bind_check(const gt_devstate *ds, const gt_resume_loader *got)
{
    const gt_resume_loader *want = &ds->bind;
    GT_ENSURE(got->epoch == want->epoch, GT_E_POLICY,
              "it was sealed for a job of %llu ranks, this one has %llu",
              (unsigned long long)got->epoch, (unsigned long long)want->epoch);
    GT_ENSURE(got->shard == want->shard, GT_E_POLICY,
              "it is rank %llu's, this is rank %llu", (unsigned long long)got->shard,
              (unsigned long long)want->shard);
    GT_ENSURE(got->seed == want->seed && got->sample_tokens == want->sample_tokens,
              GT_E_POLICY, "it was sealed in another run (run tag %016llx, this run's %016llx)",
              (unsigned long long)got->seed, (unsigned long long)want->seed);
    return GT_OK;
}

gt_err gt_devstate_load(gt_devstate *ds, gt_gpt2 *model)
{
    GT_ENSURE(ds->resume_declared, GT_E_POLICY,
              "%s: the agreement declares no resume output, so the device seals no resume state "
              "and this run cannot resume", ds->path);
    GT_TRY(resume_key(ds));
    gt_buf state = {0};
    GT_TRY(gt_err_wrap(gt_file_read_all(ds->path, RESUME_MAX_BYTES, &state), "resume state"));
    gt_export_model x;
    gt_err err = export_model(model, true, &x);
    if (gt_is_ok(err)) {
        err = gt_travel_import_resume(ds->dev, gt_buf_span(&state), &x, &ds->local);
    }
    if (gt_is_ok(err) && ds->bound) {
        err = bind_check(ds, &x.loader);
    }
    if (gt_is_ok(err)) {
        gt_gpt2_step_set(model, x.step);
    }
    gt_buf_free_nowipe(&state);  // ciphertext
    return gt_err_wrap(err, "resume state %s refused", ds->path);
}

gt_err gt_devstate_at(gt_devstate *ds, uint64_t step)
{
    char name[64];
    snprintf(name, sizeof name, "resume.%llu.sealed", (unsigned long long)step);
    return gt_path_join(ds->path, sizeof ds->path, ds->state_dir, name);
}

// The step of a file named resume.<step>.sealed (false for any other name).
static bool step_of(const char *name, uint64_t *step)
{
    const char *p = name + strlen("resume.");
    if (strncmp(name, "resume.", 7) != 0 || *p < '0' || *p > '9') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno != 0 || end == NULL || strcmp(end, ".sealed") != 0) {
        return false;
    }
    *step = v;
    return true;
}

gt_err gt_devstate_steps(const gt_devstate *ds, uint64_t newest[2])
{
    newest[0] = newest[1] = UINT64_MAX;
    DIR *d = opendir(ds->state_dir);
    GT_ENSURE(d != NULL, GT_E_IO, "%s: %s", ds->state_dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        uint64_t s = 0;
        if (!step_of(e->d_name, &s)) {
            continue;
        }
        if (newest[0] == UINT64_MAX || s > newest[0]) {
            newest[1] = newest[0];
            newest[0] = s;
        } else if (s != newest[0] && (newest[1] == UINT64_MAX || s > newest[1])) {
            newest[1] = s;
        }
    }
    closedir(d);
    return GT_OK;
}

void gt_devstate_prune(const gt_devstate *ds, uint64_t keep, bool keep_before)
{
    DIR *d = opendir(ds->state_dir);
    if (d == NULL) {
        return;
    }
    uint64_t before = UINT64_MAX;  // the newest step under keep: kept too
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        uint64_t s = 0;
        if (step_of(e->d_name, &s) && s < keep && (before == UINT64_MAX || s > before)) {
            before = s;
        }
    }
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        uint64_t s = 0;
        char path[4400];
        if (step_of(e->d_name, &s) && s < keep && (s != before || !keep_before) &&
            gt_is_ok(gt_path_join(path, sizeof path, ds->state_dir, e->d_name))) {
            unlink(path);  // an old checkpoint left behind costs only disk
        }
    }
    closedir(d);
}

gt_err gt_devstate_seal_final(gt_devstate *ds, gt_gpt2 *model, gt_buf *sealed)
{
    gt_export_model x;
    GT_TRY(export_model(model, false, &x));
    return gt_err_wrap(gt_travel_export_checkpoint(ds->dev, &x, &ds->local, sealed),
                       "sealing the checkpoint");
}
