// The one toy attestor of the tests (testlib.h): evidence = binding || name, no TEE.
#include "testlib.h"

#include <string.h>

static gt_err toy_collect(void *ctx, const uint8_t b[GT_NET_BINDING_BYTES], gt_buf *ev)
{
    const gt_test_toy *t = ctx;
    GT_TRY(gt_buf_append(ev, t->replay ? t->recorded : b, GT_NET_BINDING_BYTES));
    return gt_buf_append(ev, t->name, strlen(t->name));
}

static bool name_accepted(const char *accept, const uint8_t *name, size_t n)
{
    size_t a = strlen(accept);
    if (a > 0 && accept[a - 1] == '*') {  // a prefix
        return n >= a - 1 && memcmp(name, accept, a - 1) == 0;
    }
    return n == a && memcmp(name, accept, n) == 0;
}

static gt_err toy_appraise(void *ctx, const uint8_t *ev, size_t len,
                           const uint8_t b[GT_NET_BINDING_BYTES])
{
    const gt_test_toy *t = ctx;
    GT_ENSURE(len >= GT_NET_BINDING_BYTES, GT_E_FORMAT, "toy evidence too short");
    GT_ENSURE(gt_ct_equal(ev, b, GT_NET_BINDING_BYTES), GT_E_POLICY,
              "evidence is bound to another session");
    const uint8_t *name = ev + GT_NET_BINDING_BYTES;
    size_t n = len - GT_NET_BINDING_BYTES;
    GT_ENSURE(name_accepted(t->accept, name, n), GT_E_POLICY, "unexpected peer '%.*s'",
              (int)(n > 64 ? 64 : n), (const char *)name);
    return GT_OK;
}

gt_net_attestor gt_test_toy_attestor(gt_test_toy *t)
{
    return (gt_net_attestor){toy_collect, toy_appraise, t};
}
