// gputravel demo, step 2: each holder tokenizes its text, creates its keys and seals it.
#include "demo.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gt_err demo_step_seal(demo *d)
{
    step_begin(d, 2, "Each holder tokenizes its text, creates its keys and seals its dataset");
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        uint16_t *tokens = malloc(h->text.len * sizeof *tokens + 2);
        GT_ENSURE(tokens != NULL, GT_E_NOMEM, "out of memory");
        gt_tokenize_bytes(tokens, h->text.data, h->text.len);
        gt_err err = gt_shard_write(h->shard, tokens, h->text.len);
        free(tokens);
        GT_TRY(err);
        GT_TRY(gt_keydir_generate(h->keys, false, &h->k));
        const char *shards[] = {h->shard};
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = h->dataset,
                            .chunk_size = CHUNK_BYTES, .vocab_size = GT_BYTE_VOCAB};
        gt_seal_result r;
        GT_TRY(gt_seal(&p, &h->k, &r));
        // The plaintext shard was only a step on the way: the holder keeps the sealed form.
        unlink(h->shard);
        memcpy(h->dataset_id, r.dataset_id, sizeof h->dataset_id);
        h->tokens = r.token_count;
        h->chunks = r.chunk_count;
        char id[2 * GT_DATASET_ID_BYTES + 1], pub[2 * GT_ED25519_PUBLIC_BYTES + 1];
        gt_hex_encode(id, sizeof id, r.dataset_id, sizeof r.dataset_id);
        gt_hex_encode(pub, sizeof pub, h->k.holder_pub, sizeof h->k.holder_pub);
        say(d, "    %-9s %8llu byte-level tokens -> %3u chunks (AES-256-GCM, signed manifest)\n"
               "              dataset %.16s...  holder key %.16s...\n",
            holder_names[i], (unsigned long long)r.token_count, r.chunk_count, id, pub);
    }
    say(d, "    Each chunk has its own HKDF-derived key; the manifest lists every chunk's IV,\n"
           "    GCM tag and SHA-256 and is signed with the holder's Ed25519 key.\n");
    step_end(d);
    return GT_OK;
}
