// attest/sim_report.h: the sim report layout (sim.c parses and signs it; envelope.c only reads
// its version when it detects the type). Not a public header.
#ifndef GPUTRAVEL_ATTEST_SIM_REPORT_H
#define GPUTRAVEL_ATTEST_SIM_REPORT_H

#include <gputravel/attest.h>

// Sim report layout (the body of a type-sim envelope), little-endian:
//   0   2  version (1)
//   2   2  flags: bit 0 debug, bit 1 device, bit 2 cc_mode, bits 3-4 device memory
//          (gt_sim_device_memory; device only); other bits zero
//   4   4  svn
//   8   8  issued_at (unix seconds)
//   16 48  measurement
//   64 64  report_data
//   128 32 root key id: SHA-256 of the root public key x || y (diagnostics only, never trusted)
//   160 2  signature length n (8..GT_SIM_SIG_MAX)
//   162 n  DER ECDSA P-384 / SHA-384 signature over GT_SIM_SIGN_DOMAIN (with its NUL) || bytes
//          0..160
#define GT_SIM_REPORT_VERSION 1
#define GT_SIM_SIGNED_BYTES 160
#define GT_SIM_SIG_MAX 120
#define GT_SIM_FLAG_DEBUG 0x1u
#define GT_SIM_FLAG_DEVICE 0x2u
#define GT_SIM_FLAG_CC_MODE 0x4u
#define GT_SIM_FLAG_MEMORY_SHIFT 3
#define GT_SIM_FLAG_MEMORY_MASK 0x18u
#define GT_SIM_FLAGS_KNOWN 0x1fu
#define GT_SIM_SIGN_DOMAIN "gputravel sim evidence v1"

typedef struct {
    uint16_t version;
    uint16_t flags;
    gt_sim_claims claims;
    uint8_t root_key_id[32];
    gt_span signed_region;  // borrowed from the parsed bytes
    gt_span signature;
} gt_sim_report;

// Parses a sim report body exactly (no trailing bytes). Signature NOT checked.
GT_MUST_USE gt_err gt_sim_report_parse(gt_sim_report *r, const uint8_t *data, size_t len);

#endif
