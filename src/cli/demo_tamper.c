// gputravel demo, step 3: anyone can check a sealed dataset without a key; a flipped bit is
// caught by verify-dataset and by unseal.
#include "demo.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static gt_err copy_file(const char *from, const char *to)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(from, 1u << 30, &b));
    gt_err err = gt_file_write_atomic(to, b.data, b.len, 0644);
    gt_buf_free_nowipe(&b);  // ciphertext
    return err;
}

static gt_err tamper_one(demo *d, const demo_holder *h, const gt_manifest *m)
{
    GT_TRY(gt_mkdir_p(d->tampered, 0755));
    char from[4096], to[4096];
    GT_TRY(gt_path_join(from, sizeof from, h->dataset, GT_MANIFEST_FILE));
    GT_TRY(gt_path_join(to, sizeof to, d->tampered, GT_MANIFEST_FILE));
    GT_TRY(copy_file(from, to));
    uint32_t victim = m->chunk_count > 1 ? 1 : 0;
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        GT_TRY(gt_chunk_path(from, sizeof from, h->dataset, i));
        GT_TRY(gt_chunk_path(to, sizeof to, d->tampered, i));
        GT_TRY(copy_file(from, to));
    }
    GT_TRY(gt_chunk_path(to, sizeof to, d->tampered, victim));
    int fd = open(to, O_RDWR);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: %s", to, strerror(errno));
    off_t at = GT_CHUNK_HEADER_BYTES + (off_t)(m->chunks[victim].plaintext_len / 2);
    uint8_t byte = 0;
    bool ok = pread(fd, &byte, 1, at) == 1;
    byte ^= 0x10;
    ok = ok && pwrite(fd, &byte, 1, at) == 1;
    close(fd);
    GT_ENSURE(ok, GT_E_IO, "%s: cannot flip a bit", to);
    say(d, "    Copied the dataset to %s and flipped bit 4 of byte %lld of chunk %u.\n",
        d->tampered, (long long)at, victim);
    gt_err v = gt_dataset_verify(d->tampered, NULL, false, NULL);
    GT_ENSURE(v.code == GT_E_AUTH, GT_E_STATE, "tampering was not detected: %s",
              v.code ? v.msg : "verify passed");
    say(d, "    verify-dataset: %s\n", v.msg);
    char shard[4096];
    GT_TRY(gt_path_join(shard, sizeof shard, d->tampered, "unsealed.bin"));
    gt_err u = gt_unseal(d->tampered, &h->k, shard, false, NULL);
    GT_ENSURE(u.code == GT_E_AUTH && !gt_path_exists(shard), GT_E_STATE,
              "tampering was not detected by unseal: %s", u.code ? u.msg : "unseal passed");
    say(d, "    unseal:         %s; no plaintext file was left behind.\n", u.msg);
    return GT_OK;
}

gt_err demo_step_tamper(demo *d)
{
    step_begin(d, 3, "Anyone can check a sealed dataset without a key; a flipped bit is caught");
    gt_manifest m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < HOLDERS; i++) {
        gt_manifest_free(&m);
        GT_TRY(gt_dataset_verify(d->h[i].dataset, d->h[i].k.holder_pub, false, &m));
        say(d, "    %-9s manifest signature valid; all %u chunks present and intact\n",
            holder_names[i], m.chunk_count);
    }
    gt_manifest_free(&m);
    GT_TRY(gt_manifest_load(&m, d->h[0].dataset));
    gt_err err = tamper_one(d, &d->h[0], &m);
    gt_manifest_free(&m);
    GT_TRY(err);
    step_end(d);
    return GT_OK;
}
