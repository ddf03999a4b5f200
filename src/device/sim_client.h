// Internal to device/: the client end of a sim device session (gt_device_sim_open uses it; tests
// use it directly to send crafted, replayed or reordered records and to tamper with the bounce
// slots, which a real attacker on the host could do).
#ifndef GT_DEVICE_SIM_CLIENT_H
#define GT_DEVICE_SIM_CLIENT_H

#include "backend.h"
#include <gputravel/devproto.h>

typedef struct {
    int fd;
    gt_sim_keys keys;
    uint8_t *bounce;
    size_t bounce_bytes;
    uint32_t slot_count, slot_bytes;
    uint64_t mem_limit;
    gt_buf device_evidence;
    uint8_t device_report_data[GT_SIM_REPORT_DATA_BYTES];
    uint8_t device_measurement[GT_DEVICE_MEASUREMENT_BYTES];
    bool has_measurement;  // the default appraisal ran and kept the evidence's measurement
    gt_sim_watch watch;  // reply timeout
    bool broken;         // a fatal error ended the session; every call fails from then on
    bool holder;         // attached to a lent device with a ticket
    bool parked;         // the trip ended with RETURN_STAY: only a reattach may follow
} gt_sim_conn;

// Connects, runs the handshake and maps the bounce slots. On failure c is closed.
GT_MUST_USE gt_err gt_sim_conn_open(gt_sim_conn *c, const char *socket_path,
                                    const gt_device_sim_options *opt);
// Sends BYE when the session is still good and waits for devd to end it; a parked session is
// just closed (devd, not reading it until the next lend, notices then).
void gt_sim_conn_close(gt_sim_conn *c);
GT_MUST_USE gt_err gt_sim_conn_send(gt_sim_conn *c, const gt_sim_msg *m);
GT_MUST_USE gt_err gt_sim_conn_recv(gt_sim_conn *c, gt_sim_msg *m);
// The same with attach_fd attached to the record's frame (SCM_RIGHTS) when >= 0.
GT_MUST_USE gt_err gt_sim_conn_send_fd(gt_sim_conn *c, const gt_sim_msg *m, int attach_fd);

GT_MUST_USE gt_err gt_device_sim_open_opts(const gt_device_config *cfg,
                                           const gt_device_sim_options *opt, void **impl,
                                           const gt_device_backend **ops);
GT_MUST_USE gt_err gt_device_sim_impl_stat(void *impl, gt_device_sim_stat *stat);
GT_MUST_USE gt_err gt_device_sim_impl_evidence(void *impl, gt_span *evidence,
                                               uint8_t report_data[GT_SIM_REPORT_DATA_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_measurement(void *impl,
                                                  uint8_t out[GT_DEVICE_MEASUREMENT_BYTES]);

// Travelling (device.h gt_device_sim_lend ... wait_return).
GT_MUST_USE gt_err gt_device_sim_impl_lend(void *impl, uint32_t lease_ms,
                                           uint8_t ticket[GT_SIM_TICKET_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_trip(void *impl, uint32_t *state, uint32_t *code,
                                           gt_device_sim_loaded *loaded, size_t cap,
                                           size_t *count);
GT_MUST_USE gt_err gt_device_sim_impl_recall(void *impl);
GT_MUST_USE gt_err gt_device_sim_impl_attach(void *impl, const uint8_t ticket[GT_SIM_TICKET_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_load_sealed(void *impl, gt_dbuf dst, uint64_t dst_offset,
                                                  const uint8_t *ct_and_tag, uint64_t len,
                                                  const uint8_t iv[GT_AEAD_IV_BYTES],
                                                  const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                                  const uint8_t key[GT_AEAD_KEY_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_load_sealed_fd(void *impl, gt_dbuf dst, uint64_t dst_offset,
                                                     int fd, uint64_t file_offset, uint64_t len,
                                                     const uint8_t iv[GT_AEAD_IV_BYTES],
                                                     const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                                     const uint8_t key[GT_AEAD_KEY_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_return(void *impl);
GT_MUST_USE gt_err gt_device_sim_impl_return_stay(void *impl);
GT_MUST_USE gt_err gt_device_sim_impl_reattach(void *impl,
                                               const uint8_t ticket[GT_SIM_TICKET_BYTES]);

#endif
