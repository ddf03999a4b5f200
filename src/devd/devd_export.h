// Internal to devd/: the device-sealed exports (devd_export.c), apart from the session loop.
// devd.c fills the environment from the session that asked and sends the reply (or the error
// as STATUS).
#ifndef GT_DEVD_EXPORT_H
#define GT_DEVD_EXPORT_H

#include <gputravel/devproto.h>
#include <gputravel/travel.h>

typedef struct {
    gt_buftab *tab;
    const gt_sim_identity *identity;  // NULL: devd runs with a custom evidence hook
    const uint8_t *agreement_hash;    // the session's (its evidence binds it)
    const gt_agreement *declared;     // parsed by devd from the declared bytes; NULL: none yet
    const gt_device_outputs *rules;   // the declared rules; NULL: none yet
    // The session's own buffers (devd.c): find and range-check, allocate (unlabelled, flags 0),
    // free (wipes).
    void *ctx;
    gt_err (*access)(void *ctx, uint64_t h, uint64_t off, uint64_t len, const char *what,
                     gt_buftab_entry **e);
    gt_err (*alloc)(void *ctx, uint64_t bytes, uint64_t *h);
    gt_err (*free)(void *ctx, uint64_t h);
    // The arena's bytes [at, at + n), at an entry's at.offset plus an offset: copied out, copied
    // in, filled. With --paging-store they go through the pager a page at a time, so an export
    // never needs a whole buffer resident (docs/paging.md).
    gt_err (*read)(void *ctx, uint64_t at, uint8_t *out, uint64_t n);
    gt_err (*write)(void *ctx, uint64_t at, const uint8_t *in, uint64_t n);
    gt_err (*fill)(void *ctx, uint64_t at, int value, uint64_t n);
} devd_export_env;

// Whether type is one of the requests below.
static inline bool devd_export_request(uint16_t type)
{
    return type == GT_SIM_REQ_EXPORT_CHECKPOINT || type == GT_SIM_REQ_EXPORT_SIGNER ||
           type == GT_SIM_REQ_EXPORT_RESUME || type == GT_SIM_REQ_IMPORT_RESUME;
}

// An EXPORT_* or IMPORT_RESUME request; on success *rep is the reply. A refusal is the error
// (devd.c sends it as STATUS; the session goes on). Nothing is changed on a refusal.
gt_err devd_export_serve(const devd_export_env *env, const gt_sim_msg *req, gt_sim_msg *rep);

#endif
