// Internal to device/: the sim device's identity and evidence, and the default evidence hooks of
// both session ends (built on attest/: sim evidence, policy, appraisal).
//
// Identity: devd's identity key is a P-384 key kept like a sim root (attest.h) in an identity
// directory (root-key.pem 0600, root-pub.pem), created on first start - a GPU's fused device key.
// At start devd has it certified by the simulated vendor root (the sim root, attest.h): the
// vendor root signs "gtsim-devcert-v1" || identity public key (P-384 x || y) - a GPU's device
// certificate chain in miniature.
//
// Device evidence (the bundle devd sends in SERVER_HELLO; integers little-endian):
//   "GTSIMDEV" | u16 version (2) | u16 n, identity public key PEM (root-pub.pem's bytes)
//   | u16 n, vendor certificate signature (DER) | u32 n, GTEV sim evidence
// The GTEV sim evidence (attest.h: type sim, device = true, cc_mode = true, measurement =
// SHA-384 of devd's executable, report_data = the session binding) is signed by the identity key
// and is ALWAYS insecure-simulation. `gputravel verify --evidence E --root IDDIR/root-pub.pem`
// appraises it like any other evidence. The memory limit is bound through report_data (the
// device report_data covers the server hello's parameters; sim_proto.h).
#ifndef GT_DEVICE_SIM_EVIDENCE_H
#define GT_DEVICE_SIM_EVIDENCE_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/device.h>

#define GT_SIM_DEV_MAGIC "GTSIMDEV"
#define GT_SIM_DEV_VERSION 2u
#define GT_SIM_DEV_CERT_TAG "gtsim-devcert-v1"
#define GT_SIM_P384_XY_BYTES 96
#define GT_SIM_DEV_MAX_PEM 4096
#define GT_SIM_DEV_MAX_CERT 256

typedef struct gt_sim_identity gt_sim_identity;

// Opens (creating on first use) the identity in identity_dir (NULL: <sim root dir>/devd-identity)
// and has it certified by the vendor root in vendor_root_dir (NULL: the sim root dir, created on
// first use). Measures this executable.
GT_MUST_USE gt_err gt_sim_identity_open(gt_sim_identity **id, const char *identity_dir,
                                        const char *vendor_root_dir);
void gt_sim_identity_free(gt_sim_identity *id);
// The produce hook of devd (ctx = gt_sim_identity): the bundle above.
gt_err gt_sim_identity_produce(void *ctx, const uint8_t report_data[GT_DEVICE_REPORT_DATA_BYTES],
                               gt_buf *evidence);

// A parsed bundle; spans borrow the bundle's bytes.
typedef struct {
    gt_span identity_pem;
    gt_span cert_sig;
    gt_span gtev;
} gt_sim_device_bundle;
GT_MUST_USE gt_err gt_sim_device_bundle_parse(gt_span bundle, gt_sim_device_bundle *out);

// Appraises device evidence: the identity certificate against the vendor root public key
// (vendor_root_pub_pem: a PEM file path; NULL: <sim root dir>/root-pub.pem), then the GTEV under
// policy (NULL: sim accepted, debug forbidden, device with CC mode on) with the identity key as
// its root and report_data as the expected binding. GT_E_AUTH / GT_E_POLICY with the reasons.
// claims_out (optional): the appraisal's claims JSON (caller cJSON_Delete).
GT_MUST_USE gt_err gt_sim_device_evidence_appraise(gt_span bundle, const uint8_t *report_data,
                                                   const char *vendor_root_pub_pem,
                                                   const gt_policy *policy, cJSON **claims_out);

// Default hooks. Client: produce = sim evidence from the sim root (attest.h, created on first
// use); appraise = gt_sim_device_evidence_appraise (ctx: the vendor root PEM path or NULL). devd: appraise = the client
// evidence must be sim evidence signed by the sim root, not debug, bound to report_data.
gt_err gt_sim_default_client_produce(void *ctx, const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES],
                                     gt_buf *evidence);
gt_err gt_sim_default_client_appraise(void *ctx, gt_span evidence,
                                      const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES]);

// devd's admission: a policy and the roots client evidence is checked against.
typedef struct {
    gt_policy *policy;              // owned
    char root_path[4096];           // a PEM file: CA certificate(s) or a sim root public key
    gt_buf root_data;               // its bytes
} gt_sim_admission;
// policy_path NULL: sim accepted, debug forbidden. root_pem NULL: the sim root's root-pub.pem.
GT_MUST_USE gt_err gt_sim_admission_open(gt_sim_admission **adm, const char *policy_path,
                                         const char *root_pem);
void gt_sim_admission_free(gt_sim_admission *adm);
gt_err gt_sim_admission_appraise(void *ctx, gt_span evidence,
                                 const uint8_t rd[GT_DEVICE_REPORT_DATA_BYTES]);

#endif
