// gputravel/travel.h: what the parties agree on, and the trips the device makes.
//
// The training agreement is a JSON document every party holds byte for byte; its SHA-256 over
// those exact bytes (no re-serialisation) is the agreement hash bound into every evidence the
// trainer and the device present (DESIGN.md §4). Schema: docs/agreement.md.
#ifndef GPUTRAVEL_TRAVEL_H
#define GPUTRAVEL_TRAVEL_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/net.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>

#define GT_AGREEMENT_MAX_HOLDERS 64
#define GT_AGREEMENT_MAX_MEASUREMENTS 16
#define GT_AGREEMENT_NAME_BYTES 64
#define GT_DATASET_ID_BYTES 16
#define GT_MEASUREMENT_BYTES 48  // SHA-384

typedef struct {
    char name[GT_AGREEMENT_NAME_BYTES];
    uint8_t identity_key[GT_ED25519_PUBLIC_BYTES];  // the holder's Ed25519 key (ledger, manifest)
    char endpoint[128];                             // HOST:PORT of its agent
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint64_t token_budget;        // tokens the trainer may consume from this holder in total
    uint32_t max_uses_per_chunk;  // how many times each chunk may be loaded and trained on
    // X25519 key a sealed checkpoint is wrapped to ("recipient_key"); required for recipients.
    uint8_t recipient_key[GT_X25519_BYTES];
    bool has_recipient_key;
} gt_agreement_holder;

typedef struct {
    uint8_t values[GT_AGREEMENT_MAX_MEASUREMENTS][GT_MEASUREMENT_BYTES];
    uint32_t count;  // 0: any measurement (only sensible with simulation)
} gt_measurement_list;

typedef enum { GT_OUTPUT_LOSS_ONLY = 0, GT_OUTPUT_SEALED_CHECKPOINT } gt_output_kind;

typedef struct {
    char name[GT_AGREEMENT_NAME_BYTES];
    // model (llm.c GPT-2 shapes) and training
    uint32_t layers, channels, heads, vocab, max_seq;
    uint64_t init_seed;
    uint32_t steps, batch, seq;
    float learning_rate;
    // parties
    gt_agreement_holder holders[GT_AGREEMENT_MAX_HOLDERS];
    uint32_t holder_count;
    gt_measurement_list trainer_measurements;
    gt_measurement_list device_measurements;
    bool allow_simulation;  // every party accepts simulated TEEs/devices (demo, tests)
    // what may leave the TEE at the end
    gt_output_kind output;
    char recipients[GT_AGREEMENT_MAX_HOLDERS][GT_AGREEMENT_NAME_BYTES];
    uint32_t recipient_count;
    uint8_t hash[GT_SHA256_BYTES];  // SHA-256 of the document's bytes
} gt_agreement;

// Parses and validates an agreement document (untrusted bytes); fills a->hash.
GT_MUST_USE gt_err gt_agreement_parse(gt_agreement *a, const uint8_t *doc, size_t len);
GT_MUST_USE gt_err gt_agreement_load(gt_agreement *a, const char *path);
// The holder entry with this name, or NULL.
const gt_agreement_holder *gt_agreement_find_holder(const gt_agreement *a, const char *name);
// True when m is in the list (constant-time per entry), or the list is empty.
bool gt_measurement_allowed(const gt_measurement_list *list, const uint8_t m[GT_MEASUREMENT_BYTES]);

// ---- TEE-backed attestors for attested channels ----------------------------------------------
// This side proves itself with evidence from the attest layer (sim, tdx or snp) whose report_data
// is gt_attest_report_data_build("gputravel/attested-tls/v1", binding, -, agreement hash): fresh
// per TLS session (net.h) and bound to the agreement. The peer's evidence must carry the
// report_data computed the same way, be accepted by `policy`, and - when the agreement lists
// measurements for the peer's role - carry one of them (claim "measurement", or "mr_td" for TDX).
#define GT_TLS_REPORT_DATA_TAG "gputravel/attested-tls/v1"

typedef enum { GT_PEER_TRAINER = 0, GT_PEER_HOLDER, GT_PEER_DEVICE } gt_peer_role;

typedef struct {
    gt_collect_params collect;         // how this side collects its evidence
    const gt_policy *policy;           // how the peer's evidence is appraised (NULL: default)
    const gt_attest_file *roots;       // trust inputs for the peer's evidence (sim root, CAs)
    size_t root_count;
    const gt_agreement *agreement;
    gt_peer_role peer_role;
    // Out, after an accepted appraisal: "sim measurement 1a2b... (insecure-simulation)". The
    // channel calls appraise from the thread that accepts or connects; one attestor per thread.
    char peer_summary[192];
} gt_tee_attestor;

// The callbacks for gt_channel_connect / gt_listener_accept, backed by t (borrowed).
gt_net_attestor gt_tee_attestor_bind(gt_tee_attestor *t);

#endif
