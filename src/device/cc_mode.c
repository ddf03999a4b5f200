// What NVML's CC readings mean (cc_mode.h): pure functions, built in every configuration.
#include "cc_mode.h"

#include <stdio.h>
#include <string.h>

#define NVML_CC_SYSTEM_FEATURE_ENABLED 1
#define NVML_CC_SYSTEM_DEVTOOLS_MODE_ON 1
#define NVML_CC_SYSTEM_MULTIGPU_PROTECTED_PCIE 1
#define NVML_CC_ACCEPTING_CLIENT_REQUESTS_TRUE 1

void gt_cc_decide(const gt_cc_readings *r, gt_cc_state *st)
{
    st->env = r->environment <= GT_CC_ENV_PROD ? (gt_cc_env)r->environment
                                               : GT_CC_ENV_UNAVAILABLE;
    st->devtools = r->devtools_mode == NVML_CC_SYSTEM_DEVTOOLS_MODE_ON;
    st->multi_gpu = r->have_settings &&
                    r->multi_gpu_mode == NVML_CC_SYSTEM_MULTIGPU_PROTECTED_PCIE;
    st->ready = r->have_ready && r->ready == NVML_CC_ACCEPTING_CLIENT_REQUESTS_TRUE;
    if (st->multi_gpu) {
        st->mode = GT_CC_MODE_PPCIE;
        snprintf(st->why, sizeof st->why,
                 "protected PCIe multi-GPU mode (environment %u, ccFeature %u): GPUs attest, "
                 "CUDA IPC is unsupported",
                 r->environment, r->cc_feature);
    } else if (r->cc_feature == NVML_CC_SYSTEM_FEATURE_ENABLED) {
        st->mode = GT_CC_MODE_ON;
        st->why[0] = '\0';
    } else {
        st->mode = GT_CC_MODE_OFF;
        snprintf(st->why, sizeof st->why, "CC feature off (environment %u, multi-GPU mode %s)",
                 r->environment, r->have_settings ? "none" : "not reported");
    }
    st->cc_on = st->mode == GT_CC_MODE_ON;
}

bool gt_cc_has_evidence(const gt_cc_state *st)
{
    return st->nvml && st->mode != GT_CC_MODE_OFF;
}

gt_err gt_cc_ipc_check(const gt_cc_state *st)
{
    GT_ENSURE(st->mode != GT_CC_MODE_PPCIE, GT_E_UNSUPPORTED,
              "cuda ipc: the system is in protected PCIe (PPCIe) mode, where CUDA IPC is "
              "unsupported; hand data over without IPC (--transfer conventional-keyrelease)");
    return GT_OK;
}

const char *gt_cc_mode_name(gt_cc_mode m)
{
    switch (m) {
    case GT_CC_MODE_ON:
        return "on";
    case GT_CC_MODE_PPCIE:
        return "ppcie";
    case GT_CC_MODE_OFF:
        break;
    }
    return "off";
}
