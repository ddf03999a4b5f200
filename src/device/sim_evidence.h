// Internal to device/: the sim device's identity and evidence, and the default evidence hooks.
//
// Device evidence (all integers little-endian, parsed only through gt_reader):
//   "GTSIMDEV" | u16 version (1) | u8 flags (bit 0 simulated, always set; bit 1 CC mode)
//   | u64 mem_limit | exe measurement[48] (SHA-384 of devd's executable) | report_data[64]
//   | u16 n, device public key (P-384 x || y) | u16 n, vendor root public key (P-384 x || y)
//   | u16 n, certificate signature (ECDSA-P384-SHA384 by the root over "gtsim-devcert-v1" ||
//     device public key, DER) | u16 n, evidence signature (by the device key over every byte
//     before this length, DER)
// The device identity key is certified by a simulated vendor root, as a GPU's device certificate
// chain is by NVIDIA's; the evidence is always marked simulated.
#ifndef GT_DEVICE_SIM_EVIDENCE_H
#define GT_DEVICE_SIM_EVIDENCE_H

#include <gputravel/crypto.h>
#include <gputravel/device.h>

#define GT_SIM_DEV_MAGIC "GTSIMDEV"
#define GT_SIM_DEV_VERSION 1u
#define GT_SIM_DEV_FLAG_SIMULATED 1u
#define GT_SIM_DEV_FLAG_CC_MODE 2u
#define GT_SIM_DEV_CERT_TAG "gtsim-devcert-v1"
#define GT_SIM_P384_XY_BYTES 96
#define GT_SIM_CLIENT_NOTEE_MAGIC "GTNOTEE1"

typedef struct gt_sim_identity gt_sim_identity;

// A fresh device identity: a P-384 identity key certified by a sim vendor root (loaded from
// vendor_key_pem when not NULL, else generated), measurements of this executable.
GT_MUST_USE gt_err gt_sim_identity_create(gt_sim_identity **id, const char *vendor_key_pem,
                                          uint64_t mem_limit, bool cc_mode);
void gt_sim_identity_free(gt_sim_identity *id);
// The produce hook of devd (ctx = gt_sim_identity).
gt_err gt_sim_identity_produce(void *ctx, const uint8_t report_data[GT_DEVICE_REPORT_DATA_BYTES],
                               gt_buf *evidence);

typedef struct {
    uint8_t flags;
    uint64_t mem_limit;
    uint8_t exe_measurement[GT_SHA384_BYTES];
    uint8_t report_data[GT_DEVICE_REPORT_DATA_BYTES];
    uint8_t device_pub[GT_SIM_P384_XY_BYTES];
    uint8_t root_pub[GT_SIM_P384_XY_BYTES];
} gt_sim_device_claims;

// Parses and verifies device evidence: both signatures, the simulated flag, and (when not NULL)
// that report_data matches and the root is the pinned one. Claims are filled only on success.
GT_MUST_USE gt_err gt_sim_device_evidence_verify(gt_span evidence, const uint8_t *report_data,
                                                 const uint8_t *pinned_root_xy,
                                                 gt_sim_device_claims *claims);

// Default hooks. Client: produce an unattested blob ("GTNOTEE1" || report_data); appraise the
// device evidence with gt_sim_device_evidence_verify (no pinned root). devd: appraise admits a
// client whose evidence (of any kind it can read) binds report_data.
gt_err gt_sim_default_client_produce(void *ctx, const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES],
                                     gt_buf *evidence);
gt_err gt_sim_default_client_appraise(void *ctx, gt_span evidence,
                                      const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES]);
gt_err gt_sim_default_devd_appraise(void *ctx, gt_span evidence,
                                    const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES]);

#endif
