// Internal to device/ (GPUTRAVEL_CUDA only): NVIDIA Confidential Computing state and GPU
// attestation evidence through NVML, loaded at run time (dlopen "libnvidia-ml.so.1"), so that a
// build needs no nvml.h and a machine without the driver gets "not CC", never a crash.
//
// Trusts: nothing it returns. The evidence (an SPDM GET_MEASUREMENTS transcript signed by the
// GPU's attestation key, and the certificate chain to NVIDIA's root) is for the attestation
// layer to verify; these functions only collect it. The CC state read here is the driver's
// claim, useful for reporting and for refusing early, never as proof.
#ifndef GT_DEVICE_NVML_CC_H
#define GT_DEVICE_NVML_CC_H

#include <gputravel/attest.h>
#include "cc_mode.h"  // gt_cc_state, what the readings mean
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Fills st (the readings through gt_cc_decide). Never fails: no NVML, no CC API, CC off or a CC
// query NVML refuses all give mode OFF with the reason in st->why ("not CC").
GT_MUST_USE gt_err gt_nvml_cc_state(gt_cc_state *st);

#define GT_NVML_CC_REPORT_MAX 0x2000
#define GT_NVML_CC_CEC_REPORT_MAX 0x1000
#define GT_NVML_CC_CERT_CHAIN_MAX 0x1000
#define GT_NVML_CC_ATTESTATION_CERT_CHAIN_MAX 0x1400

typedef struct {
    uint8_t nonce[GT_NVGPU_NONCE_BYTES];  // the nonce the report answers
    gt_buf report;                 // SPDM evidence (attestation report), <= 8 KiB
    gt_buf cec_report;             // CEC attestation report when present (else len 0)
    gt_buf cert_chain;             // GPU certificate chain
    gt_buf attestation_cert_chain; // attestation certificate chain
} gt_cc_evidence;

// Evidence from the GPU at `pci_bus_id` ("0000:17:00.0", as cudaDeviceGetPCIBusId writes it;
// NULL: NVML's GPU 0) over the caller's fresh nonce (bind it to the session as DESIGN §4 says,
// e.g. the first 32 bytes of the report_data hash), in CC mode or protected PCIe mode.
// GT_E_UNSUPPORTED with "not CC: <why>" when NVML is missing, both are off or the driver does
// not offer the report; ev is then empty.
// The caller frees ev with gt_cc_evidence_free.
GT_MUST_USE gt_err gt_nvml_cc_evidence(const char *pci_bus_id,
                                       const uint8_t nonce[GT_NVGPU_NONCE_BYTES],
                                       gt_cc_evidence *ev);
void gt_cc_evidence_free(gt_cc_evidence *ev);

#endif
