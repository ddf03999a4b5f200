// device/: what NVML's CC readings mean (src/device/cc_mode.c), every mode from the raw values
// NVML returns, without a GPU: CC off (with and without the settings query), CC on, protected
// PCIe (ccFeature 0, multiGpuMode PROTECTED_PCIE: attests, reported as PPCIe and never as
// "not CC", CUDA IPC refused), devtools, readiness and an unknown environment value.
#include "testlib.h"

#include <string.h>

#include "device/cc_mode.h"

static gt_cc_state decide(gt_cc_readings r)
{
    gt_cc_state st;
    memset(&st, 0x5a, sizeof st);  // every field decide owns must be set by it
    st.nvml = true;
    gt_cc_decide(&r, &st);
    return st;
}

static void off(void **state)
{
    (void)state;
    gt_cc_state st = decide((gt_cc_readings){.environment = 2, .have_settings = true});
    assert_int_equal(st.mode, GT_CC_MODE_OFF);
    assert_false(st.cc_on);
    assert_false(st.multi_gpu);
    assert_false(st.devtools);
    assert_false(st.ready);
    assert_int_equal(st.env, GT_CC_ENV_PROD);
    assert_false(gt_cc_has_evidence(&st));
    assert_non_null(strstr(st.why, "CC feature off"));
    GT_ASSERT_OK(gt_cc_ipc_check(&st));  // nothing protected: IPC is the plain CUDA feature
    assert_string_equal(gt_cc_mode_name(st.mode), "off");
    // an older driver without the settings query: the state alone decides
    st = decide((gt_cc_readings){.environment = 0});
    assert_int_equal(st.mode, GT_CC_MODE_OFF);
    assert_non_null(strstr(st.why, "not reported"));
}

static void on(void **state)
{
    (void)state;
    gt_cc_state st = decide((gt_cc_readings){.environment = 2, .cc_feature = 1,
                                             .have_settings = true, .have_ready = true,
                                             .ready = 1});
    assert_int_equal(st.mode, GT_CC_MODE_ON);
    assert_true(st.cc_on);
    assert_false(st.multi_gpu);
    assert_true(st.ready);
    assert_true(gt_cc_has_evidence(&st));
    assert_string_equal(st.why, "");
    GT_ASSERT_OK(gt_cc_ipc_check(&st));
    assert_string_equal(gt_cc_mode_name(st.mode), "on");
    // no settings query (older driver): still on; devtools reported; not ready
    st = decide((gt_cc_readings){.environment = 1, .cc_feature = 1, .devtools_mode = 1,
                                 .have_ready = true, .ready = 0});
    assert_int_equal(st.mode, GT_CC_MODE_ON);
    assert_int_equal(st.env, GT_CC_ENV_SIM);
    assert_true(st.devtools);
    assert_false(st.ready);
    // the ready value without a successful query means nothing
    st = decide((gt_cc_readings){.cc_feature = 1, .ready = 1});
    assert_false(st.ready);
}

static void ppcie(void **state)
{
    (void)state;
    // what a PPCIe system reads: ccFeature 0, multiGpuMode PROTECTED_PCIE
    gt_cc_state st = decide((gt_cc_readings){.environment = 2, .cc_feature = 0,
                                             .have_settings = true, .multi_gpu_mode = 1,
                                             .have_ready = true, .ready = 1});
    assert_int_equal(st.mode, GT_CC_MODE_PPCIE);
    assert_false(st.cc_on);
    assert_true(st.multi_gpu);
    assert_true(st.ready);
    assert_true(gt_cc_has_evidence(&st));  // not "not CC": the GPUs attest
    assert_null(strstr(st.why, "CC feature off"));
    assert_non_null(strstr(st.why, "protected PCIe"));
    GT_ASSERT_ERR(gt_cc_ipc_check(&st), GT_E_UNSUPPORTED, "PPCIe");
    assert_string_equal(gt_cc_mode_name(st.mode), "ppcie");
    // PPCIe wins over a ccFeature that reads enabled: IPC stays refused
    st = decide((gt_cc_readings){.cc_feature = 1, .have_settings = true, .multi_gpu_mode = 1});
    assert_int_equal(st.mode, GT_CC_MODE_PPCIE);
    GT_ASSERT_ERR(gt_cc_ipc_check(&st), GT_E_UNSUPPORTED, "unsupported");
    // a multiGpuMode value without a successful settings query is not believed
    st = decide((gt_cc_readings){.multi_gpu_mode = 1});
    assert_int_equal(st.mode, GT_CC_MODE_OFF);
    // another multi-GPU value (none = 0, or one we do not know) is not PPCIe
    st = decide((gt_cc_readings){.cc_feature = 1, .have_settings = true, .multi_gpu_mode = 7});
    assert_int_equal(st.mode, GT_CC_MODE_ON);
}

static void odd_values(void **state)
{
    (void)state;
    gt_cc_state st = decide((gt_cc_readings){.environment = 9, .cc_feature = 2,
                                             .devtools_mode = 3});
    assert_int_equal(st.env, GT_CC_ENV_UNAVAILABLE);
    assert_int_equal(st.mode, GT_CC_MODE_OFF);  // only 1 means enabled
    assert_false(st.devtools);
    // no NVML at all: no evidence whatever the mode field holds
    gt_cc_state none;
    memset(&none, 0, sizeof none);
    none.mode = GT_CC_MODE_PPCIE;
    assert_false(gt_cc_has_evidence(&none));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(off),
        cmocka_unit_test(on),
        cmocka_unit_test(ppcie),
        cmocka_unit_test(odd_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
