// Internal to holder/: the holder's end of a trip the trainer serves itself (trip.c).
#ifndef GT_HOLDER_INTERNAL_H
#define GT_HOLDER_INTERNAL_H

#include <gputravel/holder.h>

// For a TRAVEL address "ipc-cuda:" / "ipc-cpu:" (device.h): attaches to the trainer's trip with
// the ticket (its device evidence appraised, under the agreement's hash; its device_memory
// claim must be cuda for ipc-cuda:, host for ipc-cpu:, else GT_E_POLICY) and checks its
// measurement against the agreement's accepted device measurements, as for devd. devd's address
// (a plain path): GT_OK and *carrier = NULL (not a served trip). A malformed address: GT_E_FORMAT.
// The travelling device's measurement m (got: how reading it went) against the agreement's
// device.accepted_measurements: GT_OK when the list is empty or holds m, else GT_E_POLICY (or
// got's error) saying why.
GT_MUST_USE gt_err gt_holder_device_check(const gt_agreement *agreement, gt_err got,
                                          const uint8_t m[GT_MEASUREMENT_BYTES]);
GT_MUST_USE gt_err gt_holder_trip_attach(const gt_agreement *agreement,
                                         const uint8_t ticket[GT_SIM_TICKET_BYTES],
                                         const char *address, gt_device_trip_carrier **carrier);
// Reads chunk `chunk` of the dataset in dataset_dir (header checked against m), derives its key,
// opens it in this process and hands it over. *loaded = plaintext bytes. On failure the trip is
// ended and *carrier closed (NULL).
GT_MUST_USE gt_err gt_holder_trip_load(gt_device_trip_carrier **carrier, const char *dataset_dir,
                                       const gt_manifest *m,
                                       const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                                       uint32_t chunk, uint64_t *loaded);
// After TRAVELLED went out (sent: its result): waits for the trainer's RELEASED, then wipes and
// frees the buffer. The first failure of the two is the result.
GT_MUST_USE gt_err gt_holder_trip_finish(gt_device_trip_carrier *carrier, gt_err sent,
                                         const char *holder, uint32_t chunk);

#endif
