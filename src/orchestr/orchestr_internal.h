// Internal to orchestr/: what trip.c needs of a holder connection (fetch.c owns it).
#ifndef GT_ORCHESTR_INTERNAL_H
#define GT_ORCHESTR_INTERNAL_H

#include <gputravel/orchestr.h>

gt_channel *gt_holder_conn_channel(gt_holder_conn *c);
const char *gt_holder_conn_name(const gt_holder_conn *c);
// GT_E_STATE for a holder named by enclave whose quote is not verified (fetch, travel, trip).
GT_MUST_USE gt_err gt_holder_conn_enclave_gate(const gt_holder_conn *c);

// ---- the device-sealed run state (devstate.c) --------------------------------------------------
// In an agreement run the weights carry holder labels: the run's state is the resume state the
// device seals to itself (state_dir/resume.sealed) and its output the checkpoint the device
// seals to the recipients. No plaintext weights in state_dir.
#include <gputravel/train.h>

#define GT_DEVSTATE_RESUME_FILE "resume.sealed"

typedef struct {
    gt_device *dev;
    gt_export_local local;
    gt_resume_device rd;         // cpu / cuda: the resume key in state_dir
    bool resume_declared;        // the agreement lets a resume state out of the device
    char path[4300];             // state_dir/resume.sealed
    const char *state_dir;       // borrowed (the config's)
    // Across ranks: the rank, the job's size and the run's tag, sealed into every resume state
    // (its loader fields, which the device authenticates with the rest of the header) and
    // required of one that is loaded.
    bool bound;
    gt_resume_loader bind;
} gt_devstate;

// sim: devd seals with its own keys; cpu / cuda: signing_secret (borrowed, the run's key) and
// the resume key in state_dir. Wipe with gt_devstate_close.
GT_MUST_USE gt_err gt_devstate_open(gt_devstate *ds, const gt_collab_config *cfg,
                                    const uint8_t *signing_secret);
void gt_devstate_close(gt_devstate *ds);
// The key that signs the final checkpoint (what the holders are told in HELLO).
GT_MUST_USE gt_err gt_devstate_signer(gt_devstate *ds, uint8_t pub[GT_ED25519_PUBLIC_BYTES]);
// After a chunk: the sealed resume state of the model at its step, written atomically (nothing
// when the agreement declares no resume output).
GT_MUST_USE gt_err gt_devstate_save(gt_devstate *ds, gt_gpt2 *model);
// Resume: whether a state exists, and importing it into the model (step set).
bool gt_devstate_exists(const gt_devstate *ds);
GT_MUST_USE gt_err gt_devstate_load(gt_devstate *ds, gt_gpt2 *model);
// The final checkpoint sealed by the device for the agreement's recipients (sealed replaced).
// Across ranks: the states are state_dir/resume.<step>.sealed, one per checkpoint step, the
// newest two kept (the ranks' newest differ by at most one round). _at points ds->path at
// step's; _steps lists the newest two steps there (UINT64_MAX: none); _prune removes those
// under keep but (keep_before) the newest of them.
GT_MUST_USE gt_err gt_devstate_at(gt_devstate *ds, uint64_t step);
GT_MUST_USE gt_err gt_devstate_steps(const gt_devstate *ds, uint64_t newest[2]);
void gt_devstate_prune(const gt_devstate *ds, uint64_t keep, bool keep_before);
GT_MUST_USE gt_err gt_devstate_seal_final(gt_devstate *ds, gt_gpt2 *model, gt_buf *sealed);

#endif
