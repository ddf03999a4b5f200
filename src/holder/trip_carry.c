// The holder's end of a trip the trainer serves itself (holder_internal.h): attach (device
// evidence and measurement checked), then the sealed chunk is opened in this process (cpu
// trainer: OpenSSL into a memfd; cuda trainer: on this holder's GPU) and handed over; it is
// freed only after the trainer's RELEASED.
#include "holder_internal.h"

#include <string.h>

#define TRIP_RELEASE_TIMEOUT_MS (3600 * 1000)

gt_err gt_holder_trip_attach(const gt_agreement *agreement,
                             const uint8_t ticket[GT_SIM_TICKET_BYTES],
                             const char *address, gt_device_trip_carrier **carrier)
{
    *carrier = NULL;
    gt_device_kind kind = GT_DEVICE_SIM;
    char path[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_TRY(gt_err_wrap(gt_device_trip_address_parse(address, &kind, path, sizeof path),
                       "travelling device"));
    if (kind == GT_DEVICE_SIM) {
        return GT_OK;  // devd's: the caller attaches to devd
    }
    // The trip's evidence must say what its address says: a GPU for ipc-cuda:, the trainer's
    // host memory for ipc-cpu: (which only insecure-host-trip allows; the caller checked).
    gt_device_sim_options opt = {
        .timeout_ms = 60000,
        .expect_memory = kind == GT_DEVICE_CUDA ? GT_SIM_MEMORY_CUDA : GT_SIM_MEMORY_HOST};
    memcpy(opt.agreement_hash, agreement->hash, sizeof opt.agreement_hash);
    gt_device_trip_carrier *c = NULL;
    GT_TRY(gt_err_wrap(gt_device_trip_attach(&c, address, &opt, ticket), "travelling device"));
    uint8_t m[GT_MEASUREMENT_BYTES] = {0};
    gt_err err = gt_holder_device_check(agreement, gt_device_trip_measurement(c, m), m);
    if (!gt_is_ok(err)) {
        gt_device_trip_carrier_close(c);  // BYE: the trainer's trip fails at once
        return err;
    }
    *carrier = c;
    return GT_OK;
}

gt_err gt_holder_device_check(const gt_agreement *agreement, gt_err got,
                              const uint8_t m[GT_MEASUREMENT_BYTES])
{
    const gt_measurement_list *accepted = &agreement->device_measurements;
    if (accepted->count == 0) {
        return GT_OK;
    }
    GT_TRY(got);
    if (!gt_measurement_allowed(accepted, m)) {
        char hex[2 * GT_MEASUREMENT_BYTES + 1];
        gt_hex_encode(hex, sizeof hex, m, GT_MEASUREMENT_BYTES);
        return gt_errf(GT_E_POLICY, "travelling device: measurement %.16s... is not one the "
                                    "agreement accepts", hex);
    }
    return GT_OK;
}

gt_err gt_holder_trip_load(gt_device_trip_carrier **carrier, const char *dataset_dir,
                           const gt_manifest *m, const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                           uint32_t chunk, uint64_t *loaded)
{
    *loaded = 0;
    char path[4200];
    const uint64_t file_len = gt_manifest_chunk_file_bytes(m, chunk);
    gt_buf file = {0};
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, chunk < m->chunk_count, out, GT_E_ARG, "chunk %u does not exist", chunk);
    GT_TRY_GOTO(err, gt_chunk_path(path, sizeof path, dataset_dir, chunk), out);
    GT_TRY_GOTO(err, gt_file_read_all(path, file_len, &file), out);
    GT_ENSURE_GOTO(err, file.len == file_len, out, GT_E_TRUNCATED,
                   "%s: %zu bytes, the manifest says %llu", path, file.len,
                   (unsigned long long)file_len);
    GT_TRY_GOTO(err, gt_chunk_header_check(file.data, file.len, m, chunk), out);
    GT_TRY_GOTO(err, gt_chunk_key_derive(key, dataset_key, m, chunk), out);
    // The chunk file: 8-byte magic, the 32-byte AAD, then its body (seal.h: one tag, or one per
    // GTCHUNK2 segment).
    GT_TRY_GOTO(err, gt_err_wrap(gt_device_trip_hand_over(*carrier,
                                                          file.data + GT_CHUNK_HEADER_BYTES,
                                                          file.len - GT_CHUNK_HEADER_BYTES,
                                                          m->chunks[chunk].iv, file.data + 8,
                                                          key, m->segment_bytes),
                                 "travelling device"),
                out);
    *loaded = m->chunks[chunk].plaintext_len;
out:
    gt_secure_zero(key, sizeof key);
    gt_buf_free_nowipe(&file);  // ciphertext
    if (!gt_is_ok(err)) {
        gt_device_trip_carrier_close(*carrier);
        *carrier = NULL;
    }
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
