// The holder's end of a trip the trainer serves itself (holder_internal.h): the sealed chunk is
// opened in this process (cpu trainer: OpenSSL into a memfd; cuda trainer: on this holder's GPU)
// and handed over; it is freed only after the trainer's RELEASED.
#include "holder_internal.h"

#include <string.h>

#define TRIP_RELEASE_TIMEOUT_MS (3600 * 1000)

gt_err gt_holder_trip_carry(const char *dataset_dir, const gt_manifest *m,
                            const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                            const uint8_t agreement_hash[32], uint32_t chunk,
                            const uint8_t ticket[32], const char *address,
                            gt_device_trip_carrier **carrier, uint64_t *loaded)
{
    *carrier = NULL;
    *loaded = 0;
    GT_ENSURE(chunk < m->chunk_count, GT_E_ARG, "chunk %u does not exist", chunk);
    char path[4200];
    GT_TRY(gt_chunk_path(path, sizeof path, dataset_dir, chunk));
    const uint64_t file_len = gt_manifest_chunk_file_bytes(m, chunk);
    gt_buf file = {0};
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_file_read_all(path, file_len, &file), out);
    GT_ENSURE_GOTO(err, file.len == file_len, out, GT_E_TRUNCATED,
                   "%s: %zu bytes, the manifest says %llu", path, file.len,
                   (unsigned long long)file_len);
    GT_TRY_GOTO(err, gt_chunk_header_check(file.data, file.len, m, chunk), out);
    GT_TRY_GOTO(err, gt_chunk_key_derive(key, dataset_key, m, chunk), out);
    gt_device_sim_options opt = {.timeout_ms = 60000};
    memcpy(opt.agreement_hash, agreement_hash, sizeof opt.agreement_hash);
    // The chunk file: 8-byte magic, the 32-byte AAD, then ciphertext || tag (data.h).
    GT_TRY_GOTO(err, gt_device_trip_carry(carrier, address, &opt, ticket,
                                          file.data + GT_CHUNK_HEADER_BYTES,
                                          file.len - GT_CHUNK_HEADER_BYTES,
                                          m->chunks[chunk].iv, file.data + 8, key),
                out);
    *loaded = m->chunks[chunk].plaintext_len;
out:
    gt_secure_zero(key, sizeof key);
    gt_buf_free_nowipe(&file);  // ciphertext
    return err;
}

gt_err gt_holder_trip_finish(gt_device_trip_carrier *carrier, gt_err sent, const char *holder,
                             uint32_t chunk)
{
    gt_err err = gt_device_trip_carrier_finish(carrier, TRIP_RELEASE_TIMEOUT_MS);
    if (gt_is_ok(err)) {
        gt_log_info("holder %s: the trainer released chunk %u; its buffer is wiped and freed",
                    holder, chunk);
    } else {
        gt_log_warn("holder %s: trip for chunk %u ended without RELEASED (%s); its buffer is "
                    "wiped and freed", holder, chunk, err.msg);
    }
    return gt_is_ok(sent) ? err : sent;
}
