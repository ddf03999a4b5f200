// gputravel demo, step 4: the parties sign up to one training agreement.
#include "agreement_doc.h"
#include "demo.h"

#include <string.h>

// The holder's port is bound now and held until its agent takes the socket over: a port closed
// after choosing it could be taken (by any process's next connection) before the agent binds.
static gt_err holder_listen(demo_holder *h)
{
    GT_TRY(gt_listener_open(&h->listener, "127.0.0.1:0"));
    h->port = gt_listener_port(h->listener);
    return GT_OK;
}

// The enclave-mode holder is named by the MRSIGNER (and ISVPRODID, min ISVSVN) of the holder
// enclave this build signed: the trainer will ask it for nothing before a quote of such an
// enclave verifies. Read from the SIGSTRUCT beside the program, whose signature must verify.
static gt_err enclave_holder_named(demo *d, gt_cli_agreement_holder *e)
{
    char dir[4096], sig[4200];
    GT_TRY(gt_cli_holder_enclave_dir(NULL, dir, sizeof dir));
    GT_TRY(gt_path_join(sig, sizeof sig, dir, "holder.sig"));
    GT_TRY(gt_cli_agreement_enclave_from_sig(sig, false, &e->enclave));
    char mrs[65];
    gt_hex_encode(mrs, sizeof mrs, e->enclave.mrsigner, 32);
    say(d, "    holder %s is named by its enclave: MRSIGNER %.16s... (ISVPRODID %u, ISVSVN >= %u)\n"
           "    of the holder enclave this build signed (%s); the trainer asks it for nothing\n"
           "    before a quote of such an enclave, bound to this agreement and session, verifies.\n",
        e->name, mrs, e->enclave.isvprodid, e->enclave.min_isvsvn, sig);
    return GT_OK;
}

gt_err demo_step_agreement(demo *d)
{
    step_begin(d, 4, "The parties sign up to one training agreement");
    gt_cli_agreement_holder holders[HOLDERS];
    memset(holders, 0, sizeof holders);
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        gt_cli_agreement_holder *e = &holders[i];
        GT_TRY(holder_listen(h));
        GT_TRY(gt_recipient_pub_load(h->keys, e->recipient_key));
        e->has_recipient_key = true;
        snprintf(e->name, sizeof e->name, "%s", holder_names[i]);
        memcpy(e->identity_key, h->k.holder_pub, sizeof e->identity_key);
        memcpy(e->dataset_id, h->dataset_id, sizeof e->dataset_id);
        snprintf(e->endpoint, sizeof e->endpoint, "127.0.0.1:%d", h->port);
        e->token_budget = h->tokens;
        e->max_uses_per_chunk = 1;
    }
    if (d->transfer == GT_TRANSFER_TRAVEL) {
        GT_TRY(enclave_holder_named(d, &holders[DEMO_ENCLAVE_HOLDER]));
    }
    gt_cli_agreement_spec spec = {
        .name = "gputravel-demo", .layers = 4, .channels = 128, .heads = 4, .vocab = 256,
        .max_seq = 64, .init_seed = 1337, .steps = d->steps, .batch = 8, .seq = 64,
        .learning_rate = 0.001, .holders = holders, .holder_count = HOLDERS,
        .allow_simulation = true, .transfers = GT_TRANSFER_BIT(d->transfer),
        .sealed_checkpoint = true, .recipients = holder_names, .recipient_count = HOLDERS,
    };
    gt_buf doc = {0};
    gt_err err = gt_cli_agreement_format(&spec, &doc);
    if (gt_is_ok(err)) {
        err = gt_file_write_atomic(d->agreement_path, doc.data, doc.len, 0644);
    }
    gt_buf_free_nowipe(&doc);
    GT_TRY(err);
    GT_TRY(gt_agreement_load(&d->agreement, d->agreement_path));
    // The appraisal policy (holders and trainer), stating what it allows: simulated TEEs (no
    // hardware here), never a debug one; sim reports no TCB status: no accepted_tcb_statuses.
    static const char policy[] =
        "{\n  \"comment\": \"gputravel demo: simulated TEEs only, never debug\",\n"
        "  \"allow_simulation\": true,\n  \"allow_debug\": false\n}\n";
    GT_TRY(gt_file_write_atomic(d->policy, policy, sizeof policy - 1, 0644));
    char hash[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, d->agreement.hash, sizeof d->agreement.hash);
    say(d, "    %s: GPT-2 (4 layers, 128 channels, byte vocabulary), %u steps of 8 x 64\n"
           "    tokens; each holder's budget is its whole dataset, each chunk used once; the\n"
           "    trained model goes, sealed, to the three holders only (each holder's X25519\n"
           "    recipient_key from its key folder).\n"
           "    Transfer: only %s (the agreement's \"transfer\" list; holders refuse\n"
           "    any other mode).\n"
           "    Agreement hash %s: bound into every evidence.\n"
           "    Simulated TEEs are allowed (allow_simulation): this demo has no TDX/SEV-SNP\n"
           "    hardware and no H100, and proves the protocol, not hardware isolation.\n"
           "    Debug TEEs are refused (allow_debug false, the default).\n",
        d->agreement_path, d->steps, gt_transfer_mode_name(d->transfer), hash);
    step_end(d);
    return GT_OK;
}
