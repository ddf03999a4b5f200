// The binding of a chunk key the holder's enclave wraps to a device (enclaves/holder/holder.c
// builds the same bytes, freestanding): what a device checks before it uses the key. A key
// wrapped for another agreement, dataset, chunk, trip or device does not open.
#include <gputravel/travel.h>

#include <string.h>

void gt_release_aad_build(uint8_t aad[GT_RELEASE_AAD_BYTES],
                          const uint8_t agreement_hash[GT_SHA256_BYTES],
                          const uint8_t dataset_id[GT_DATASET_ID_BYTES], uint32_t chunk,
                          const uint8_t trip_id[GT_SHA256_BYTES],
                          const uint8_t device_id[GT_SHA256_BYTES])
{
    uint8_t *p = aad;
    memcpy(p, "GTRW", 4);
    p += 4;
    memcpy(p, agreement_hash, GT_SHA256_BYTES);
    p += GT_SHA256_BYTES;
    memcpy(p, dataset_id, GT_DATASET_ID_BYTES);
    p += GT_DATASET_ID_BYTES;
    gt_store_u32le(p, chunk);
    p += 4;
    memcpy(p, trip_id, GT_SHA256_BYTES);
    p += GT_SHA256_BYTES;
    memcpy(p, device_id, GT_SHA256_BYTES);
}

gt_err gt_release_trip_id(uint8_t id[GT_SHA256_BYTES], const uint8_t ticket[32])
{
    static const char label[] = "gputravel trip id v1";
    uint8_t in[sizeof label - 1 + 32];
    memcpy(in, label, sizeof label - 1);
    memcpy(in + sizeof label - 1, ticket, 32);
    gt_err err = gt_hash(GT_HASH_SHA256, id, in, sizeof in);
    gt_secure_zero(in, sizeof in);
    return err;
}

gt_err gt_release_unwrap(uint8_t key[GT_AEAD_KEY_BYTES], const uint8_t *wrapped, size_t len,
                         const uint8_t device_sec[GT_X25519_BYTES],
                         const uint8_t aad[GT_RELEASE_AAD_BYTES])
{
    return gt_err_wrap(gt_x25519_unwrap(key, wrapped, len, device_sec, aad, GT_RELEASE_AAD_BYTES),
                       "released chunk key");
}
