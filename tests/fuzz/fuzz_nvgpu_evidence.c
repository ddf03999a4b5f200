// Fuzz target: NVIDIA SPDM GET_MEASUREMENTS evidence parser, opaque-data decoding and claims.
// Any input must give a clean gt_err or an evidence whose spans all lie inside the input.
#include "attest/nvgpu_evidence.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void span_inside(gt_span s, const uint8_t *data, size_t size)
{
    assert(s.len == 0 ||
           (s.data >= data && s.len <= size && (size_t)(s.data - data) <= size - s.len));
    (void)data;
    (void)size;
    (void)s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_nvgpu_evidence *ev = malloc(sizeof *ev);
    if (ev == NULL) {
        return 0;
    }
    gt_err e = gt_nvgpu_evidence_parse(ev, data, size);
    if (e.code == GT_E_NONE) {
        assert(ev->measurement_count == ev->number_of_blocks);
        assert(ev->signed_region.len + GT_NVGPU_SIG_BYTES + ev->trailing_bytes == size);
        span_inside(ev->signed_region, data, size);
        for (size_t i = 0; i < ev->measurement_count; i++) {
            span_inside(ev->measurements[i].value, data, size);
        }
        for (size_t i = 0; i < ev->opaque_count; i++) {
            span_inside(ev->opaque[i].value, data, size);
        }
        char buf[64];
        gt_err d = gt_nvgpu_driver_version(ev, buf, sizeof buf);
        gt_err v = gt_nvgpu_vbios_version(ev, buf, sizeof buf);
        (void)d;
        (void)v;
        cJSON *obj = cJSON_CreateObject();
        if (obj != NULL) {
            gt_err j = gt_nvgpu_evidence_claims_json(ev, obj);
            (void)j;
            cJSON_Delete(obj);
        }
    } else {
        assert(ev->measurement_count == 0 && ev->signed_region.data == NULL);
    }
    free(ev);
    return 0;
}
