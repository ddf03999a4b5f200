// device/: CC-mode detection and GPU evidence through NVML (loaded at run time). Runs
// everywhere: without NVML or with CC off it checks the "not CC" answers (GT_E_UNSUPPORTED, empty
// evidence); with CC on it collects evidence over a fresh nonce and checks its sizes. It prints
// what it found, for the GPU check's log.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <cuda_runtime_api.h>
#include <string.h>

#include "device/nvml_cc.h"

static void state_and_evidence(void **state)
{
    (void)state;
    gt_cc_state st;
    GT_ASSERT_OK(gt_nvml_cc_state(&st));
    print_message("nvml %s, driver '%s', cc mode %s, env %d, devtools %s, multi-gpu %s, "
                  "ready %s%s%s\n",
                  st.nvml ? "loaded" : "absent", st.driver, gt_cc_mode_name(st.mode), (int)st.env,
                  st.devtools ? "on" : "off", st.multi_gpu ? "on" : "off",
                  st.ready ? "yes" : "no", st.mode == GT_CC_MODE_OFF ? "; not CC: " : "; ",
                  st.why);
    if (!st.nvml) {
        assert_int_equal(st.mode, GT_CC_MODE_OFF);
    }
    if (st.mode != GT_CC_MODE_ON) {
        assert_true(st.why[0] != '\0');
    }
    char bus[32] = {0};
    const char *pci = NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 &&
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, 0) == cudaSuccess) {
        pci = bus;
        print_message("GPU 0 at PCI %s\n", bus);
    }
    uint8_t nonce[GT_NVGPU_NONCE_BYTES];
    GT_ASSERT_OK(gt_random_bytes(nonce, sizeof nonce));
    gt_cc_evidence ev;
    gt_err e = gt_nvml_cc_evidence(pci, nonce, &ev);
    if (!gt_cc_has_evidence(&st)) {
        assert_int_equal(e.code, GT_E_UNSUPPORTED);
        assert_non_null(strstr(e.msg, "not CC"));
        assert_int_equal(ev.report.len, 0);
        assert_int_equal(ev.cert_chain.len, 0);
        print_message("evidence: %s\n", e.msg);
        return;
    }
    // CC on or PPCIe: the driver must answer (a refusal here is a finding, not a skip).
    GT_ASSERT_OK(e);
    assert_memory_equal(ev.nonce, nonce, sizeof nonce);
    assert_true(ev.report.len > 0 && ev.report.len <= GT_NVML_CC_REPORT_MAX);
    assert_true(ev.cert_chain.len > 0 || ev.attestation_cert_chain.len > 0);
    print_message("evidence: report %zu bytes, CEC report %zu, cert chain %zu, attestation "
                  "chain %zu\n", ev.report.len, ev.cec_report.len, ev.cert_chain.len,
                  ev.attestation_cert_chain.len);
    gt_cc_evidence_free(&ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(state_and_evidence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
