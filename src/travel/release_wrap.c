// The binding of a chunk key the holder's enclave wraps to a device (enclaves/holder/holder.c
// builds the same bytes, freestanding): what a device checks before it uses the key. A key
// wrapped for another agreement, dataset, chunk, trip or device does not open.
#include <gputravel/travel.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
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

// The device half of the appraisal: the evidence in the server hello, bound to both hellos,
// from devd, with a measurement the agreement accepts.
static gt_err appraise_device(const gt_agreement *a, const gt_sim_client_hello *ch,
                              const gt_sim_server_hello *sh, gt_span client_hello)
{
    uint8_t rd[GT_REPORT_DATA_BYTES], m[GT_MEASUREMENT_BYTES];
    cJSON *claims = NULL;
    GT_TRY(gt_sim_device_report_data(rd, ch->nonce, sh, client_hello));
    GT_TRY(gt_sim_device_evidence_appraise(sh->evidence, rd, NULL, NULL, &claims));
    const char *mem =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "device_memory"));
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "measurement"));
    gt_err err = GT_OK;
    if (mem == NULL || strcmp(mem, gt_sim_device_memory_name(GT_SIM_MEMORY_DEVD)) != 0) {
        err = gt_errf(GT_E_POLICY, "wrap appraisal: the device's memory is '%s', not devd's",
                      mem ? mem : "unstated");
    } else if (hex == NULL || !gt_is_ok(gt_hex_decode_exact(m, sizeof m, hex))) {
        err = gt_errf(GT_E_FORMAT, "wrap appraisal: the device evidence has no measurement");
    } else if (a->device_measurements.count > 0 &&
               !gt_measurement_allowed(&a->device_measurements, m)) {
        err = gt_errf(GT_E_POLICY, "wrap appraisal: device measurement %.16s... is not one the "
                                   "agreement accepts", hex);
    }
    cJSON_Delete(claims);
    return err;
}

gt_err gt_release_wrap_appraise(gt_span agreement_doc, gt_span client_hello, gt_span server_hello,
                                const uint8_t recipient[GT_X25519_BYTES], const uint8_t *aad,
                                size_t aad_len)
{
    GT_ENSURE(aad_len == GT_RELEASE_AAD_BYTES && memcmp(aad, "GTRW", 4) == 0, GT_E_FORMAT,
              "wrap appraisal: an AAD of %zu bytes that is not a chunk release's", aad_len);
    gt_agreement *a = malloc(sizeof *a);
    GT_ENSURE(a != NULL, GT_E_NOMEM, "wrap appraisal: out of memory");
    gt_sim_client_hello ch;
    gt_sim_server_hello sh;
    uint8_t device_id[GT_SHA256_BYTES];
    gt_err err = gt_err_wrap(gt_agreement_parse(a, agreement_doc.data, agreement_doc.len),
                             "wrap appraisal: the agreement");
    const uint8_t *aad_agreement = aad + 4, *aad_device = aad + GT_RELEASE_AAD_BYTES - 32;
    GT_TRY_GOTO(err, err, out);
    GT_ENSURE_GOTO(err, gt_ct_equal(a->hash, aad_agreement, GT_SHA256_BYTES), out, GT_E_POLICY,
                   "wrap appraisal: the key would be bound to another agreement than the one "
                   "given");
    GT_TRY_GOTO(err, gt_err_wrap(gt_sim_client_hello_parse(client_hello, &ch),
                                 "wrap appraisal: client hello"), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(ch.agreement, a->hash, GT_SHA256_BYTES), out, GT_E_POLICY,
                   "wrap appraisal: the device session is under another agreement");
    GT_TRY_GOTO(err, gt_err_wrap(gt_sim_server_hello_parse(server_hello, &sh),
                                 "wrap appraisal: server hello"), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(sh.pub, recipient, GT_X25519_BYTES), out, GT_E_POLICY,
                   "wrap appraisal: the recipient is not the key the device's session binds");
    GT_TRY_GOTO(err, gt_hash(GT_HASH_SHA256, device_id, server_hello.data, server_hello.len), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(device_id, aad_device, GT_SHA256_BYTES), out, GT_E_POLICY,
                   "wrap appraisal: the AAD names another device session");
    err = appraise_device(a, &ch, &sh, client_hello);
out:
    free(a);
    return err;
}
