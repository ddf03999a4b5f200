// Internal to device/: a trip served by the trainer itself (docs/cuda.md "Travelling with a real
// GPU"). With --device cuda the trainer process owns the GPU context, so it, not devd, is the
// far end of the lend / attach / return protocol: the same messages (devproto.h), the same
// attested handshake (devproto.h), ticket and lease as devd's trips. The holder loads and
// decrypts its chunk in its own GPU context and hands the buffer over (RETURN_IPC with the
// 72-byte descriptor); the trainer imports it NO_READBACK, uses it, releases it (wipe) and says
// RELEASED, after which the holder frees its allocation.
//
// The GPU step is behind gt_ipc_trip_importer, so the state machine is built and tested in
// every configuration (tests/device/test_ipc_trip.c drives it with a shared-memory stand-in);
// cuda_trip.h has the CUDA importer and the holder's GPU load.
//
// Trusts: its own process. Does not trust: the holder's bytes (every record through sim_proto.c's
// parser, at its exact size), its descriptor (the size and the chunk's AAD are checked before
// anything is used; the importer checks the size against the driver's record), its timing (the
// lease bounds everything up to the handoff).
#ifndef GT_DEVICE_IPC_TRIP_H
#define GT_DEVICE_IPC_TRIP_H

#include <gputravel/device.h>
#include <gputravel/devproto.h>

// The GPU step on the trainer's side.
typedef struct {
    void *ctx;
    // Maps the holder's exported buffer described by ipc as a buffer the trainer may launch on
    // but never read back (GT_DBUF_NO_READBACK). GT_E_ARG unless it holds exactly `bytes` bytes.
    // fd: the descriptor that came with RETURN_IPC (SCM_RIGHTS), -1 if none; borrowed (the trip
    // closes it after the import).
    gt_err (*import)(void *ctx, const uint8_t ipc[GT_SIM_IPC_DESC_BYTES], int fd, uint64_t bytes,
                     gt_dbuf *out);
    // Wipes and unmaps an import (the holder's memory reads as zeros afterwards).
    gt_err (*release)(void *ctx, gt_dbuf buf);
} gt_ipc_trip_importer;

typedef struct {
    const char *socket_path;      // where the trainer listens for the holder (mode 0600)
    // produce: the trainer's evidence (NULL: sim device evidence from identity_dir, as devd);
    // appraise: admission of the holder's evidence (NULL: devd's default admission policy).
    gt_device_attester attester;
    const char *identity_dir;     // NULL: <sim root>/devd-identity
    uint8_t agreement_hash[GT_SHA256_BYTES];  // the holder's must be the same
    uint32_t lease_ms;            // 1 .. GT_SIM_MAX_LEASE_MS: until the handoff
    // What the trip's device evidence says holds its memory: GT_SIM_MEMORY_CUDA (a GPU) or
    // GT_SIM_MEMORY_HOST (host memory). Required with the default produce hook: a trip the
    // trainer serves is never devd (GT_E_ARG otherwise).
    gt_sim_device_memory memory;
} gt_ipc_trip_config;

typedef struct gt_ipc_trip gt_ipc_trip;

// Trainer: listens, draws a fresh ticket (hand it to the holder over its attested channel, then
// wipe it). State LENT.
GT_MUST_USE gt_err gt_ipc_trip_lend(gt_ipc_trip **trip, const gt_ipc_trip_config *cfg,
                                    uint8_t ticket[GT_SIM_TICKET_BYTES]);
// Trainer: waits (at most until the lease ends) for a holder that passes admission, presents
// the ticket and has the trainer's agreement hash (others are refused, the lend stands), then
// for its RETURN_IPC: the chunk's AAD must be `aad`, the import must hold exactly `bytes`.
// Returned (GT_OK): *out is the import, state RETURNED. Otherwise the trip FAILED with the code
// why (GT_E_TIMEOUT: lease; GT_E_PEER: the holder left; GT_E_ARG / GT_E_POLICY: a descriptor
// of the wrong size or chunk): nothing is imported, *out stays 0.
GT_MUST_USE gt_err gt_ipc_trip_wait(gt_ipc_trip *trip, const gt_ipc_trip_importer *imp,
                                    const uint8_t aad[GT_SIM_LOAD_AAD_BYTES], uint64_t bytes,
                                    gt_dbuf *out);
// Trainer, while it uses the import: GT_OK while the holder is still attached and silent; if it
// went away (or sent anything before RELEASED) the import is released (wiped) at once, the trip
// FAILED, and GT_E_PEER says to discard whatever was computed from it.
GT_MUST_USE gt_err gt_ipc_trip_check(gt_ipc_trip *trip);
// Trainer, done: releases the import (wipe), sends RELEASED and waits (5 s) for the holder's
// BYE. GT_E_PEER when the holder had vanished first (discard the trip's results); GT_E_STATE
// when there is nothing (more) to release.
GT_MUST_USE gt_err gt_ipc_trip_release(gt_ipc_trip *trip);
uint32_t gt_ipc_trip_state(const gt_ipc_trip *trip);  // gt_sim_trip_state
// Trainer: while LENT, gt_ipc_trip_wait also watches fd (the holder's channel to the trainer):
// readable before an attach means the holder answered there instead (a refusal, or it left),
// and the wait ends at once with GT_E_PEER instead of at the lease's end. -1: none.
void gt_ipc_trip_watch_peer(gt_ipc_trip *trip, int fd);
// Releases an import still held, closes, removes the socket.
void gt_ipc_trip_close(gt_ipc_trip *trip);

// Holder: the attested handshake with the trainer (opt: the holder's evidence and its appraisal
// of the trainer's, its agreement hash) and ATTACH with the ticket. On failure c is closed.
GT_MUST_USE gt_err gt_ipc_trip_attach(gt_sim_conn *c, const char *socket_path,
                                      const gt_device_sim_options *opt,
                                      const uint8_t ticket[GT_SIM_TICKET_BYTES]);
// Holder: RETURN_IPC with the exported buffer's descriptor and the chunk's AAD (attach_fd, when
// >= 0, goes with it over SCM_RIGHTS: the host-memory handoff of trip_host.h); the trainer's
// STATUS (its import's result) is the result.
GT_MUST_USE gt_err gt_ipc_trip_hand_over(gt_sim_conn *c, const uint8_t ipc[GT_SIM_IPC_DESC_BYTES],
                                         const uint8_t aad[GT_SIM_LOAD_AAD_BYTES], int attach_fd);
// Holder: waits up to timeout_ms (0: 1 hour) for RELEASED; only then may it free its allocation.
// Then gt_sim_conn_close (BYE). GT_E_PEER: the trainer's process is gone (and with it its
// mapping): free. GT_E_TIMEOUT: the trainer holds the buffer longer than the holder allows; the
// holder may free it anyway (the trainer's import then reads undefined memory, which makes its
// trip void: it is attested code that only launches on the import, never reads it back).
GT_MUST_USE gt_err gt_ipc_trip_wait_released(gt_sim_conn *c, int timeout_ms);

#endif
