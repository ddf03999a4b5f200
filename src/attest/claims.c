// attest/claims.c: shared vocabulary (claims.h): reason lists, claim helpers, TEE type and
// verdict names, and freeing an evidence. Calls nothing else in attest/.
#include "claims.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- string lists ------------------------------------------------------------------------------

gt_err gt_strlist_addf(gt_strlist *l, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    char **items = realloc(l->items, (l->count + 1) * sizeof *items);
    GT_ENSURE(items != NULL, GT_E_NOMEM, "reasons: out of memory");
    l->items = items;
    l->items[l->count] = strdup(tmp);
    GT_ENSURE(l->items[l->count] != NULL, GT_E_NOMEM, "reasons: out of memory");
    l->count++;
    return GT_OK;
}

bool gt_strlist_contains(const gt_strlist *l, const char *needle)
{
    for (size_t i = 0; i < l->count; i++) {
        if (strstr(l->items[i], needle) != NULL) {
            return true;
        }
    }
    return false;
}

void gt_strlist_free(gt_strlist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i]);
    }
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

// ---- names ---------------------------------------------------------------------------------------

static const char *const tee_names[] = {"auto", "sim", "tdx", "sgx", "snp", "nvgpu", "vsgx"};

const char *gt_tee_type_name(gt_tee_type type)
{
    if ((unsigned)type <= GT_TEE_TYPE_MAX) {
        return tee_names[type];
    }
    return "unknown";
}

gt_err gt_tee_type_parse(const char *name, gt_tee_type *out)
{
    for (unsigned i = 0; i <= GT_TEE_TYPE_MAX; i++) {
        if (strcmp(name, tee_names[i]) == 0) {
            *out = (gt_tee_type)i;
            return GT_OK;
        }
    }
    return gt_errf(GT_E_ARG, "unknown evidence type '%s' (auto, sim, tdx, sgx, snp, nvgpu, vsgx)",
                   name);
}

const char *gt_verdict_name(gt_verdict v)
{
    switch (v) {
    case GT_VERDICT_ACCEPTED:
        return "accepted";
    case GT_VERDICT_REJECTED:
        return "rejected";
    case GT_VERDICT_INVALID:
        return "invalid";
    default:
        return "invalid";
    }
}

// ---- evidence ------------------------------------------------------------------------------------

void gt_evidence_free(gt_evidence *ev)
{
    gt_buf_free_nowipe(&ev->body);
    gt_buf_free_nowipe(&ev->aux);
    memset(ev, 0, sizeof *ev);
}

// ---- claims ------------------------------------------------------------------------------------

const cJSON *gt_claims_get(const cJSON *claims, const char *path)
{
    const cJSON *cur = claims;
    char part[64];
    const char *p = path;
    while (cur != NULL && *p != '\0') {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0 || n >= sizeof part || !cJSON_IsObject(cur)) {
            return NULL;
        }
        memcpy(part, p, n);
        part[n] = '\0';
        cur = cJSON_GetObjectItemCaseSensitive(cur, part);
        p += n + (dot ? 1 : 0);
    }
    return cur;
}

gt_err gt_claims_add_hex(cJSON *claims, const char *name, const void *p, size_t n)
{
    char hex[2 * 256 + 1];
    GT_ENSURE(n <= 256, GT_E_ARG, "claims: %s too long", name);
    gt_hex_encode(hex, sizeof hex, p, n);
    GT_ENSURE(cJSON_AddStringToObject(claims, name, hex) != NULL, GT_E_NOMEM,
              "claims: out of memory");
    return GT_OK;
}
