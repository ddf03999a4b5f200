// Internal to device/: the server end of the sim device handshake (sim_proto.h), shared by devd
// and by a trainer that serves a trip itself (ipc_trip.h, --device cuda). One copy of the
// handshake: hello parsing, evidence binding and key derivation are sim_proto.c's.
#ifndef GT_DEVICE_SIM_SERVER_H
#define GT_DEVICE_SIM_SERVER_H

#include "sim_proto.h"

typedef struct {
    uint32_t slot_count, slot_bytes;  // bounce layout announced (and attested) in SERVER_HELLO
    uint64_t mem_limit;               // announced (and attested) device memory
    // This side's evidence over report_data, and the admission of the client's evidence.
    gt_err (*produce)(void *ctx, const uint8_t *report_data, gt_buf *evidence);
    void *produce_ctx;
    gt_err (*appraise)(void *ctx, gt_span evidence, const uint8_t *report_data);
    void *appraise_ctx;
    // Creates the bounce memfd (slot_count * slot_bytes, sealed against shrink/grow) once the
    // client's evidence passed; *fd is attached to SERVER_HELLO and stays the caller's.
    gt_err (*bounce)(void *ctx, int *fd);
    void *bounce_ctx;
} gt_sim_server_params;

// Reads CLIENT_HELLO from fd (rx: GT_SIM_MAX_FRAME bytes of scratch), appraises the client's
// evidence (bound to its nonce, X25519 key and agreement hash), answers SERVER_HELLO with this
// side's evidence (bound to the client's hello and to the announced parameters) and derives the
// session keys. A malformed hello or refused evidence is answered with REFUSE. On success *keys
// and agreement (the client's agreement hash) are set.
GT_MUST_USE gt_err gt_sim_server_handshake(int fd, uint8_t *rx, const gt_sim_watch *watch,
                                           const gt_sim_server_params *p, gt_sim_keys *keys,
                                           uint8_t agreement[GT_SIM_AGREEMENT_BYTES]);

#endif
