// gputravel demo, step 4: the parties sign up to one training agreement.
#include "demo.h"

#include <string.h>

static gt_err free_port(int *port)
{
    gt_listener *l = NULL;
    GT_TRY(gt_listener_open(&l, "127.0.0.1:0"));
    *port = gt_listener_port(l);
    gt_listener_close(l);
    return GT_OK;
}

gt_err demo_step_agreement(demo *d)
{
    step_begin(d, 4, "The parties sign up to one training agreement");
    char holders[4096] = "";
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        GT_TRY(free_port(&h->port));
        char key[65], id[33], rkey[65], one[640];
        uint8_t rpub[GT_X25519_BYTES] = {0};
        GT_TRY(gt_recipient_pub_load(h->keys, rpub));
        gt_hex_encode(key, sizeof key, h->k.holder_pub, 32);
        gt_hex_encode(id, sizeof id, h->dataset_id, 16);
        gt_hex_encode(rkey, sizeof rkey, rpub, sizeof rpub);
        snprintf(one, sizeof one,
                 "%s\n    {\"name\": \"%s\", \"identity_key\": \"%s\", \"endpoint\": "
                 "\"127.0.0.1:%d\", \"dataset_id\": \"%s\", \"token_budget\": %llu, "
                 "\"max_uses_per_chunk\": 1,\n     \"recipient_key\": \"%s\"}",
                 i ? "," : "", holder_names[i], key, h->port, id,
                 (unsigned long long)h->tokens, rkey);
        strncat(holders, one, sizeof holders - strlen(holders) - 1);
    }
    char doc[8192];
    snprintf(doc, sizeof doc,
             "{\n  \"version\": 1,\n  \"name\": \"gputravel-demo\",\n"
             "  \"model\": {\"layers\": 4, \"channels\": 128, \"heads\": 4, \"vocab\": 256, "
             "\"max_seq\": 64, \"init_seed\": 1337},\n"
             "  \"training\": {\"steps\": %u, \"batch\": 8, \"seq\": 64, "
             "\"learning_rate\": 0.001},\n"
             "  \"holders\": [%s\n  ],\n"
             "  \"trainer\": {},\n  \"device\": {},\n  \"allow_simulation\": true,\n"
             "  \"transfer\": [\"%s\"],\n"
             "  \"output\": {\"kind\": \"sealed_checkpoint\", \"recipients\": [\"%s\", \"%s\", "
             "\"%s\"]}\n}\n",
             d->steps, holders, gt_transfer_mode_name(d->transfer), holder_names[0],
             holder_names[1], holder_names[2]);
    GT_TRY(gt_file_write_atomic(d->agreement_path, doc, strlen(doc), 0644));
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
