// NVIDIA CC state and attestation evidence through NVML, loaded with dlopen. The few NVML entry
// points and structures used are declared here from NVIDIA's documented API (nvml.h, "Confidential
// Computing" section, driver r535 and later); nothing links libnvidia-ml at build time.
#include "nvml_cc.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

// ---- NVML declarations (from the documented API) ----------------------------------------------

typedef int nvml_return;  // nvmlReturn_t: an enum, int-sized
typedef struct nvml_device_st *nvml_device;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
};

#define NVML_CC_CEC_ATTESTATION_REPORT_PRESENT 1

typedef struct {  // nvmlConfComputeSystemState_t
    unsigned int environment;
    unsigned int ccFeature;
    unsigned int devToolsMode;
} nvml_cc_system_state;

typedef struct {  // nvmlSystemConfComputeSettings_v1_t
    unsigned int version;
    unsigned int environment;
    unsigned int ccFeature;
    unsigned int devToolsMode;
    unsigned int multiGpuMode;
} nvml_cc_settings_v1;
// NVML_STRUCT_VERSION(SystemConfComputeSettings, 1): sizeof | version << 24
#define NVML_CC_SETTINGS_V1 ((unsigned int)(sizeof(nvml_cc_settings_v1) | (1u << 24)))

typedef struct {  // nvmlConfComputeGpuCertificate_t
    unsigned int certChainSize;
    unsigned int attestationCertChainSize;
    unsigned char certChain[GT_NVML_CC_CERT_CHAIN_MAX];
    unsigned char attestationCertChain[GT_NVML_CC_ATTESTATION_CERT_CHAIN_MAX];
} nvml_cc_cert;

typedef struct {  // nvmlConfComputeGpuAttestationReport_t
    unsigned int isCecAttestationReportPresent;
    unsigned int attestationReportSize;
    unsigned int cecAttestationReportSize;
    unsigned char nonce[GT_NVGPU_NONCE_BYTES];  // in: the nonce
    unsigned char attestationReport[GT_NVML_CC_REPORT_MAX];
    unsigned char cecAttestationReport[GT_NVML_CC_CEC_REPORT_MAX];
} nvml_cc_report;

typedef struct {
    void *lib;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*driver_version)(char *, unsigned int);
    nvml_return (*cc_state)(nvml_cc_system_state *);
    nvml_return (*cc_settings)(nvml_cc_settings_v1 *);               // optional (newer drivers)
    nvml_return (*cc_ready)(unsigned int *);                         // optional
    nvml_return (*by_index)(unsigned int, nvml_device *);
    nvml_return (*by_pci)(const char *, nvml_device *);
    nvml_return (*cc_report)(nvml_device, nvml_cc_report *);
    nvml_return (*cc_cert)(nvml_device, nvml_cc_cert *);
} nvml_api;

static const char *nvml_msg(const nvml_api *a, nvml_return r)
{
    return a->error_string != NULL ? a->error_string(r) : "NVML error";
}

static void nvml_close(nvml_api *a)
{
    if (a->lib != NULL) {
        if (a->shutdown != NULL) {
            (void)a->shutdown();
        }
        dlclose(a->lib);
    }
    memset(a, 0, sizeof *a);
}

// Loads and initialises NVML. false (with why) when the library or a required entry is missing.
static bool nvml_open(nvml_api *a, char *why, size_t cap)
{
    memset(a, 0, sizeof *a);
    a->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (a->lib == NULL) {
        const char *e = dlerror();
        snprintf(why, cap, "libnvidia-ml.so.1 not loadable (%s)", e != NULL ? e : "?");
        return false;
    }
    // dlsym returns void *; POSIX guarantees it converts to a function pointer.
#define SYM(field, name) *(void **)(&a->field) = dlsym(a->lib, name)
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(error_string, "nvmlErrorString");
    SYM(driver_version, "nvmlSystemGetDriverVersion");
    SYM(cc_state, "nvmlSystemGetConfComputeState");
    SYM(cc_settings, "nvmlSystemGetConfComputeSettings");
    SYM(cc_ready, "nvmlSystemGetConfComputeGpusReadyState");
    SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
    SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    SYM(cc_report, "nvmlDeviceGetConfComputeGpuAttestationReport");
    SYM(cc_cert, "nvmlDeviceGetConfComputeGpuCertificate");
#undef SYM
    if (a->init == NULL || a->shutdown == NULL) {
        snprintf(why, cap, "libnvidia-ml.so.1 lacks nvmlInit_v2");
        dlclose(a->lib);
        memset(a, 0, sizeof *a);
        return false;
    }
    nvml_return r = a->init();
    if (r != NVML_SUCCESS) {
        snprintf(why, cap, "nvmlInit_v2: %s", nvml_msg(a, r));
        a->shutdown = NULL;  // nothing to shut down
        nvml_close(a);
        return false;
    }
    return true;
}

gt_err gt_nvml_cc_state(gt_cc_state *st)
{
    memset(st, 0, sizeof *st);
    nvml_api a;
    if (!nvml_open(&a, st->why, sizeof st->why)) {
        return GT_OK;  // no NVML: not CC
    }
    st->nvml = true;
    if (a.driver_version != NULL &&
        a.driver_version(st->driver, (unsigned int)sizeof st->driver) != NVML_SUCCESS) {
        st->driver[0] = '\0';
    }
    if (a.cc_state == NULL) {
        snprintf(st->why, sizeof st->why, "driver %s has no CC API (before r535)", st->driver);
        goto out;
    }
    nvml_cc_system_state s = {0};
    nvml_return r = a.cc_state(&s);
    if (r != NVML_SUCCESS) {
        // NOT_SUPPORTED on GPUs without CC; anything else (no permission, a VM that hides the
        // query) also leaves us unable to claim CC: report it, never guess "on".
        snprintf(st->why, sizeof st->why, "nvmlSystemGetConfComputeState: %s", nvml_msg(&a, r));
        goto out;
    }
    gt_cc_readings rd = {.environment = s.environment, .cc_feature = s.ccFeature,
                         .devtools_mode = s.devToolsMode};
    if (a.cc_settings != NULL) {
        nvml_cc_settings_v1 set = {.version = NVML_CC_SETTINGS_V1};
        // older drivers lack it: without it PPCIe cannot be seen, and the state alone decides
        if (a.cc_settings(&set) == NVML_SUCCESS) {
            rd.have_settings = true;
            rd.multi_gpu_mode = set.multiGpuMode;
        }
    }
    if (a.cc_ready != NULL) {
        rd.have_ready = a.cc_ready(&rd.ready) == NVML_SUCCESS;
    }
    gt_cc_decide(&rd, st);
out:
    nvml_close(&a);
    return GT_OK;
}

static gt_err buf_set(gt_buf *b, const void *p, unsigned int n, unsigned int max, const char *what)
{
    GT_ENSURE(n <= max, GT_E_FORMAT, "nvml: %s of %u bytes (at most %u)", what, n, max);
    b->len = 0;
    return n > 0 ? gt_buf_append(b, p, n) : GT_OK;
}

gt_err gt_nvml_cc_evidence(const char *pci_bus_id, const uint8_t nonce[GT_NVGPU_NONCE_BYTES],
                           gt_cc_evidence *ev)
{
    memset(ev, 0, sizeof *ev);
    gt_cc_state st;
    GT_TRY(gt_nvml_cc_state(&st));
    GT_ENSURE(gt_cc_has_evidence(&st), GT_E_UNSUPPORTED, "not CC: %s", st.why);
    char why[160];
    nvml_api a;
    GT_ENSURE(nvml_open(&a, why, sizeof why), GT_E_UNSUPPORTED, "not CC: %s", why);
    gt_err err = GT_OK;
    nvml_cc_report *rep = calloc(1, sizeof *rep);
    nvml_cc_cert *cert = calloc(1, sizeof *cert);
    GT_ENSURE_GOTO(err, rep != NULL && cert != NULL, out, GT_E_NOMEM, "nvml: out of memory");
    GT_ENSURE_GOTO(err, a.cc_report != NULL && a.cc_cert != NULL && a.by_index != NULL, out,
                   GT_E_UNSUPPORTED, "not CC: driver %s offers no GPU attestation report",
                   st.driver);
    nvml_device dev = NULL;
    nvml_return r = pci_bus_id != NULL && a.by_pci != NULL ? a.by_pci(pci_bus_id, &dev)
                                                           : a.by_index(0, &dev);
    GT_ENSURE_GOTO(err, r == NVML_SUCCESS, out, GT_E_NOTFOUND, "nvml: GPU %s: %s",
                   pci_bus_id != NULL ? pci_bus_id : "0", nvml_msg(&a, r));
    memcpy(rep->nonce, nonce, GT_NVGPU_NONCE_BYTES);
    r = a.cc_report(dev, rep);
    GT_ENSURE_GOTO(err, r != NVML_ERROR_NOT_SUPPORTED, out, GT_E_UNSUPPORTED,
                   "not CC: attestation report not supported (%s)", nvml_msg(&a, r));
    GT_ENSURE_GOTO(err, r == NVML_SUCCESS, out, GT_E_IO,
                   "nvmlDeviceGetConfComputeGpuAttestationReport: %s", nvml_msg(&a, r));
    r = a.cc_cert(dev, cert);
    GT_ENSURE_GOTO(err, r == NVML_SUCCESS, out, GT_E_IO,
                   "nvmlDeviceGetConfComputeGpuCertificate: %s", nvml_msg(&a, r));
    memcpy(ev->nonce, nonce, GT_NVGPU_NONCE_BYTES);
    GT_TRY_GOTO(err, buf_set(&ev->report, rep->attestationReport, rep->attestationReportSize,
                             GT_NVML_CC_REPORT_MAX, "attestation report"), out);
    GT_ENSURE_GOTO(err, ev->report.len > 0, out, GT_E_FORMAT, "nvml: empty attestation report");
    if (rep->isCecAttestationReportPresent == NVML_CC_CEC_ATTESTATION_REPORT_PRESENT) {
        GT_TRY_GOTO(err, buf_set(&ev->cec_report, rep->cecAttestationReport,
                                 rep->cecAttestationReportSize, GT_NVML_CC_CEC_REPORT_MAX,
                                 "CEC report"), out);
    }
    GT_TRY_GOTO(err, buf_set(&ev->cert_chain, cert->certChain, cert->certChainSize,
                             GT_NVML_CC_CERT_CHAIN_MAX, "certificate chain"), out);
    GT_TRY_GOTO(err, buf_set(&ev->attestation_cert_chain, cert->attestationCertChain,
                             cert->attestationCertChainSize,
                             GT_NVML_CC_ATTESTATION_CERT_CHAIN_MAX, "attestation chain"), out);
out:
    free(rep);
    free(cert);
    nvml_close(&a);
    if (err.code != GT_E_NONE) {
        gt_cc_evidence_free(ev);
    }
    return err;
}

void gt_cc_evidence_free(gt_cc_evidence *ev)
{
    gt_buf_free_nowipe(&ev->report);  // evidence is public
    gt_buf_free_nowipe(&ev->cec_report);
    gt_buf_free_nowipe(&ev->cert_chain);
    gt_buf_free_nowipe(&ev->attestation_cert_chain);
    memset(ev->nonce, 0, sizeof ev->nonce);
}
