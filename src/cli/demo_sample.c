// gputravel demo, step 8: a recipient opens the sealed model, and the model writes.
#include "demo.h"

#include <stdlib.h>
#include <string.h>

gt_err demo_step_sample(demo *d)
{
    step_begin(d, 8, "A recipient opens the sealed model, and the model writes");
    // The trainer's checkpoint stays in its TEE; what left is the sealed file. The first
    // recipient opens it with its own recipient key, and the text below comes from that copy.
    const demo_holder *r = &d->h[0];
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/%s/model.bin", d->dir, holder_names[0]);
    gt_device *dev = NULL;
    gt_gpt2 *m = NULL;
    gt_tokenizer *tok = NULL;
    int32_t tokens[64] = {0};
    gt_recipient_keys rk;
    memset(&rk, 0, sizeof rk);
    gt_sckpt_header *hdr = calloc(1, sizeof *hdr);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, hdr != NULL, out, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, gt_keydir_recipient_load(r->keys, &rk), out);
    uint32_t me = 0;
    // Who sealed it: the signer must be the trainer whose session the hospital's own ledger
    // recorded (the key its HELLO presented inside the channel the hospital appraised).
    GT_TRY_GOTO(err, gt_sckpt_read_header(d->sealed, hdr), out);
    gt_ledger_session ses;
    GT_TRY_GOTO(err, gt_ledger_find_session(r->ledger, r->k.holder_pub, hdr->signer_pub, &ses),
                out);
    GT_ENSURE_GOTO(err, gt_ct_equal(ses.agreement, hdr->agreement_hash, GT_SHA256_BYTES), out,
                   GT_E_STATE, "the signer served the hospital under another agreement");
    uint8_t signer[GT_ED25519_PUBLIC_BYTES];
    memcpy(signer, hdr->signer_pub, sizeof signer);
    GT_TRY_GOTO(err, gt_sckpt_open(d->sealed, &rk, signer, ckpt, hdr, &me), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(hdr->agreement_hash, d->agreement.hash, GT_SHA256_BYTES), out,
                   GT_E_STATE, "the sealed checkpoint names another agreement");
    char signer_hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(signer_hex, sizeof signer_hex, signer, sizeof signer);
    say(d, "    %s opened model.sealed with its own recipient key (recipient %u of %u; step\n"
           "    %llu, this agreement's hash; GCM tag verified) into %s/model.bin.\n",
        holder_names[0], me + 1, hdr->recipient_count, (unsigned long long)hdr->step,
        holder_names[0]);
    say(d, "    It was sealed by the trainer %s appraised: the signature verifies under\n"
           "    signing key %.16s... (the device's own export key: the device sealed it),\n"
           "    which trainer '%s' presented inside the attested channel and %s's own\n"
           "    ledger recorded (entry %llu).\n",
        holder_names[0], signer_hex, ses.trainer, holder_names[0], (unsigned long long)ses.seq);
    if (ses.appraisal[0] != '\0') {
        say(d, "    %s appraised that trainer as: %s\n", holder_names[0], ses.appraisal);
    }
    say(d, "    The text below is sampled from that copy, not from the trainer's checkpoint:\n");
    gt_device_config dc = {.kind = GT_DEVICE_CPU};
    GT_TRY_GOTO(err, gt_device_open(&dev, &dc), out);
    GT_TRY_GOTO(err, gt_gpt2_load(&m, dev, ckpt), out);
    GT_TRY_GOTO(err, gt_tokenizer_byte_new(&tok), out);
    static const char prompt[] = "The ";
    for (size_t i = 0; i < sizeof prompt - 1; i++) {
        tokens[i] = (uint8_t)prompt[i];
    }
    gt_sampler s = {.temperature = 0.8f, .top_k = 40, .rng = 42};
    GT_TRY_GOTO(err, gt_gpt2_generate(m, &s, tokens, (int)sizeof prompt - 1, 64), out);
    say(d, "    \"");
    for (int i = 0; i < 64; i++) {
        gt_span piece = {0};
        if (gt_is_ok(gt_tokenizer_decode(tok, (uint32_t)tokens[i], &piece))) {
            char c = (char)piece.data[0];
            say(d, "%c", c == '\n' ? ' ' : (c >= 32 && c < 127 ? c : '?'));
        }
    }
    say(d, "\"\n");
out:
    gt_recipient_keys_wipe(&rk);
    free(hdr);
    gt_tokenizer_free(tok);
    gt_gpt2_free(m);
    gt_device_close(dev);
    step_end(d);
    return err;
}
