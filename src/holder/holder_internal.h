// Internal to holder/: the holder's end of a trip the trainer serves itself (trip.c).
#ifndef GT_HOLDER_INTERNAL_H
#define GT_HOLDER_INTERNAL_H

#include <gputravel/holder.h>

// Reads chunk `chunk` of the dataset in dataset_dir (header checked against m), derives its key
// and carries it to the trip at address (ipc-cpu: / ipc-cuda:, device.h gt_device_trip_carry)
// under agreement_hash. OK: *carrier holds the handed-over buffer, *loaded = plaintext bytes.
GT_MUST_USE gt_err gt_holder_trip_carry(const char *dataset_dir, const gt_manifest *m,
                                        const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                                        const uint8_t agreement_hash[32], uint32_t chunk,
                                        const uint8_t ticket[32], const char *address,
                                        gt_device_trip_carrier **carrier, uint64_t *loaded);
// After TRAVELLED went out (sent: its result): waits for the trainer's RELEASED, then wipes and
// frees the buffer. The first failure of the two is the result.
GT_MUST_USE gt_err gt_holder_trip_finish(gt_device_trip_carrier *carrier, gt_err sent,
                                         const char *holder, uint32_t chunk);

#endif
