// Internal to device/: the client end of a sim device session (gt_device_sim_open uses it; tests
// use it directly to send crafted, replayed or reordered records and to tamper with the bounce
// slots, which a real attacker on the host could do).
#ifndef GT_DEVICE_SIM_CLIENT_H
#define GT_DEVICE_SIM_CLIENT_H

#include "backend.h"
#include "sim_proto.h"

typedef struct {
    int fd;
    gt_sim_keys keys;
    uint8_t *bounce;
    size_t bounce_bytes;
    uint32_t slot_count, slot_bytes;
    uint64_t mem_limit;
    gt_buf device_evidence;
    uint8_t device_report_data[GT_SIM_REPORT_DATA_BYTES];
    gt_sim_watch watch;  // reply timeout
    bool broken;         // a fatal error ended the session; every call fails from then on
} gt_sim_conn;

// Connects, runs the handshake and maps the bounce slots. On failure c is closed.
GT_MUST_USE gt_err gt_sim_conn_open(gt_sim_conn *c, const char *socket_path,
                                    const gt_device_sim_options *opt);
void gt_sim_conn_close(gt_sim_conn *c);  // sends BYE when the session is still good
GT_MUST_USE gt_err gt_sim_conn_send(gt_sim_conn *c, const gt_sim_msg *m);
GT_MUST_USE gt_err gt_sim_conn_recv(gt_sim_conn *c, gt_sim_msg *m);

GT_MUST_USE gt_err gt_device_sim_open_opts(const gt_device_config *cfg,
                                           const gt_device_sim_options *opt, void **impl,
                                           const gt_device_backend **ops);
GT_MUST_USE gt_err gt_device_sim_impl_stat(void *impl, gt_device_sim_stat *stat);
GT_MUST_USE gt_err gt_device_sim_impl_evidence(void *impl, gt_span *evidence,
                                               uint8_t report_data[GT_SIM_REPORT_DATA_BYTES]);

#endif
