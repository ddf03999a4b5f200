// Writing an agreement document (docs/agreement.md) from its parts: one layout for every writer
// (the demo, `gputravel agreement init`), so what one writes the other's readers see the same way.
#ifndef GPUTRAVEL_CLI_AGREEMENT_DOC_H
#define GPUTRAVEL_CLI_AGREEMENT_DOC_H

#include <gputravel/travel.h>

typedef struct {
    char name[GT_AGREEMENT_NAME_BYTES];
    uint8_t identity_key[GT_ED25519_PUBLIC_BYTES];
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    char endpoint[128];
    uint64_t token_budget;
    uint32_t max_uses_per_chunk;
    bool has_recipient_key;
    uint8_t recipient_key[GT_X25519_BYTES];
    gt_agreement_enclave enclave;  // present: the holder named by enclave ("enclave")
} gt_cli_agreement_holder;

// holders[i].enclave from an enclave's SIGSTRUCT (a raw 1808-byte .sig, or a file that holds
// one, enclave.h gt_sgx_sigstruct_find): its MRSIGNER and ISVPRODID, min_isvsvn its ISVSVN,
// with_mrenclave: its ENCLAVEHASH too (pins this build; without it, any version by that signer).
// GT_E_AUTH when the SIGSTRUCT's signature does not verify.
GT_MUST_USE gt_err gt_cli_agreement_enclave_from_sig(const char *path, bool with_mrenclave,
                                                     gt_agreement_enclave *out);

typedef struct {
    const char *name;
    uint32_t layers, channels, heads, vocab, max_seq;
    uint64_t init_seed;
    uint32_t steps, batch, seq;
    double learning_rate;
    const gt_cli_agreement_holder *holders;
    uint32_t holder_count;
    gt_measurement_list trainer, device;  // empty: the section is {}
    uint32_t ranks;                       // trainer.ranks; 0 or 1: not written (the default)
    bool allow_simulation;
    uint32_t transfers;                   // GT_TRANSFER_BIT set; 0: no "transfer" field
    bool sealed_checkpoint;               // else loss_only
    const char *const *recipients;        // sealed_checkpoint: holder names, in order
    uint32_t recipient_count;
} gt_cli_agreement_spec;

// The document's bytes (replacing out's contents; public data). Names and endpoints must
// already be safe inside a JSON string (no '"', '\\' or control characters): GT_E_ARG otherwise.
// The result is not parsed here: a caller that wants it checked loads it (gt_agreement_parse).
GT_MUST_USE gt_err gt_cli_agreement_format(const gt_cli_agreement_spec *s, gt_buf *out);

#endif
