// Internal to device/: the sim backend's entry points behind device.h (its session is devproto.h's
// gt_sim_conn).
#ifndef GT_DEVICE_SIM_CLIENT_H
#define GT_DEVICE_SIM_CLIENT_H

#include "backend.h"
#include <gputravel/devproto.h>

GT_MUST_USE gt_err gt_device_sim_open_opts(const gt_device_config *cfg,
                                           const gt_device_sim_options *opt, void **impl,
                                           const gt_device_backend **ops);
GT_MUST_USE gt_err gt_device_sim_impl_stat(void *impl, gt_device_sim_stat *stat);
GT_MUST_USE gt_err gt_device_sim_impl_evidence(void *impl, gt_span *evidence,
                                               uint8_t report_data[GT_REPORT_DATA_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_measurement(void *impl,
                                                  uint8_t out[GT_MEASUREMENT_BYTES]);

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
                                                  const uint8_t key[GT_AEAD_KEY_BYTES],
                                                  uint32_t seg_bytes);
GT_MUST_USE gt_err gt_device_sim_impl_load_sealed_fd(void *impl, gt_dbuf dst, uint64_t dst_offset,
                                                     int fd, uint64_t file_offset, uint64_t len,
                                                     const uint8_t iv[GT_AEAD_IV_BYTES],
                                                     const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                                     const uint8_t key[GT_AEAD_KEY_BYTES],
                                                     uint32_t seg_bytes);
GT_MUST_USE gt_err gt_device_sim_impl_load_sealed_wrapped(void *impl, gt_dbuf dst,
                                                          uint64_t dst_offset, int fd,
                                                          uint64_t file_offset, uint64_t len,
                                                          const uint8_t iv[GT_AEAD_IV_BYTES],
                                                          const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                                          const uint8_t wrapped[GT_KEYWRAP_BYTES],
                                                          uint32_t seg_bytes);
void gt_device_sim_impl_session_hellos(void *impl, gt_span *client_hello, gt_span *server_hello);
void gt_device_sim_impl_session_binding(void *impl, uint8_t server_pub[GT_X25519_BYTES],
                                        uint8_t server_hello_hash[GT_SHA256_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_return(void *impl);
GT_MUST_USE gt_err gt_device_sim_impl_return_stay(void *impl);
GT_MUST_USE gt_err gt_device_sim_impl_reattach(void *impl,
                                               const uint8_t ticket[GT_SIM_TICKET_BYTES]);

// Labels and declared outputs (device.h): devd keeps both.
GT_MUST_USE gt_err gt_device_sim_impl_label_add(void *impl, gt_dbuf buf,
                                                const uint8_t id[GT_LABEL_ID_BYTES]);
GT_MUST_USE gt_err gt_device_sim_impl_label_get(void *impl, gt_dbuf buf, size_t *count,
                                                uint8_t (*ids)[GT_LABEL_ID_BYTES], size_t cap);
GT_MUST_USE gt_err gt_device_sim_impl_declare(void *impl, gt_span agreement);
GT_MUST_USE gt_err gt_device_sim_impl_pin(void *impl, gt_span program);
GT_MUST_USE gt_err gt_device_sim_impl_outputs_get(void *impl, gt_device_outputs *now);

// Peers (issue 16): devd makes the key, appraises, holds the keys, seals and opens.
GT_MUST_USE gt_err gt_device_sim_impl_peer_hello(void *impl, uint32_t rank, uint32_t nranks,
                                                 uint8_t *hello, size_t cap, size_t *len);
GT_MUST_USE gt_err gt_device_sim_impl_peer_admit(void *impl, uint32_t peer_rank,
                                                 const uint8_t *hello, size_t len);
GT_MUST_USE gt_err gt_device_sim_impl_peer_run_id(void *impl, uint8_t run[16]);
GT_MUST_USE gt_err gt_device_sim_impl_peer_seal(void *impl, const gt_peer_hdr *h, gt_dbuf buf,
                                                uint8_t *out, size_t cap, size_t *outlen);
GT_MUST_USE gt_err gt_device_sim_impl_peer_open(void *impl, const gt_peer_hdr *h,
                                                const uint8_t *in, size_t len, gt_dbuf buf,
                                                int mode);

#endif
