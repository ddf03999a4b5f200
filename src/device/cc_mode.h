// Internal to device/ (every configuration): what NVIDIA's Confidential Computing readings mean
// for us, as pure functions of the values NVML returned, so that a CPU test covers every mode
// without a GPU (tests/device/test_cc_mode.c). nvml_cc.c takes the readings; this decides.
//
// Modes (NVIDIA's CC deployment guide, NVML's nvmlSystemConfComputeSettings_v1_t):
//   ON     ccFeature enabled, single-GPU CC: attestation evidence, CUDA IPC not refused here
//   PPCIE  multiGpuMode PROTECTED_PCIE (ccFeature reads 0 there: the GPUs are protected as a
//          group, with per-GPU CC off): attestation evidence, CUDA IPC unsupported and refused
//   OFF    neither: not CC, no evidence
#ifndef GT_DEVICE_CC_MODE_H
#define GT_DEVICE_CC_MODE_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    GT_CC_ENV_UNAVAILABLE = 0,  // NVML_CC_SYSTEM_ENVIRONMENT_UNAVAILABLE
    GT_CC_ENV_SIM = 1,          // ..._SIM
    GT_CC_ENV_PROD = 2,         // ..._PROD
} gt_cc_env;

typedef enum {
    GT_CC_MODE_OFF = 0,
    GT_CC_MODE_ON = 1,     // single-GPU CC
    GT_CC_MODE_PPCIE = 2,  // protected PCIe multi-GPU mode
} gt_cc_mode;

// NVML's raw answers (values as nvml.h defines them).
typedef struct {
    unsigned int environment;    // nvmlConfComputeSystemState_t.environment
    unsigned int cc_feature;     // .ccFeature (1: enabled)
    unsigned int devtools_mode;  // .devToolsMode (1: on)
    bool have_settings;          // nvmlSystemGetConfComputeSettings (v1) answered
    unsigned int multi_gpu_mode; // its .multiGpuMode (1: protected PCIe)
    bool have_ready;             // nvmlSystemGetConfComputeGpusReadyState answered
    unsigned int ready;          // its value (1: accepting client requests)
} gt_cc_readings;

typedef struct {
    bool nvml;            // NVML loaded and initialised
    gt_cc_mode mode;      // OFF, ON or PPCIE
    bool cc_on;           // mode == GT_CC_MODE_ON (the CC feature is enabled)
    gt_cc_env env;        // environment NVML reports
    bool devtools;        // CC devtools mode (debugging allowed: not acceptable for production)
    bool multi_gpu;       // protected PCIe multi-GPU mode (settings v1, where the driver has it)
    bool ready;           // GPUs accept client work (nvmlSystemGetConfComputeGpusReadyState)
    char driver[80];      // driver version, "" when unknown
    char why[192];        // when OFF: why ("libnvidia-ml.so.1 not found", "CC feature off");
                          // PPCIE: what it restricts
} gt_cc_state;

// Sets st's mode, cc_on, env, devtools, multi_gpu, ready and why from r (nvml and driver are
// the caller's). A protected-PCIe reading wins over ccFeature: whatever ccFeature says, the
// system is in PPCIe and IPC must be refused.
void gt_cc_decide(const gt_cc_readings *r, gt_cc_state *st);

// Whether this system's GPUs attest (ON or PPCIE); the "not CC" answer otherwise.
bool gt_cc_has_evidence(const gt_cc_state *st);

// Whether CUDA IPC may carry holder data on this system: GT_E_UNSUPPORTED in PPCIe (NVIDIA lists
// CUDA IPC as unsupported in protected PCIe mode), GT_OK otherwise.
GT_MUST_USE gt_err gt_cc_ipc_check(const gt_cc_state *st);

// "off", "on", "ppcie"
const char *gt_cc_mode_name(gt_cc_mode m);

#endif
