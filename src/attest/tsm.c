// attest/tsm.c: collecting hardware evidence. Linux configfs-tsm first
// (Documentation/ABI/testing/configfs-tsm), the guest-device ioctls as fallback, and
// gt_attest_collect, which also drives the sim backend.
//
// configfs-tsm protocol for one report:
//   mkdir ROOT/<entry>            the kernel creates inblob, outblob, auxblob, provider, generation
//   read generation      -> g0
//   write inblob (64 B)           the kernel bumps generation
//   read generation      -> g1    must be g0 + 1, else another writer touched the entry
//   read outblob, auxblob, provider
//   read generation      -> g2    must be g1: a write while we read makes outblob someone else's
//   rmdir ROOT/<entry>
#include "claims.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/tdx-guest.h>)
#include <linux/tdx-guest.h>
#define GT_HAVE_TDX_GUEST_H 1
#endif
#endif

#ifndef GT_HAVE_TDX_GUEST_H
// include/uapi/linux/tdx-guest.h (Linux 6.2+), for distributions whose headers predate it.
#define TDX_REPORTDATA_LEN 64
#define TDX_REPORT_LEN 1024
struct tdx_report_req {
    __u8 reportdata[TDX_REPORTDATA_LEN];
    __u8 tdreport[TDX_REPORT_LEN];
};
#define TDX_CMD_GET_REPORT0 _IOWR('T', 1, struct tdx_report_req)
#endif

_Static_assert(sizeof(struct tdx_report_req) == 64 + GT_TDX_TDREPORT_BYTES, "tdx uapi layout");
// The kernel names its sizes, we name ours: the memcpy()s below rely on their agreeing.
_Static_assert(sizeof(((struct tdx_report_req *)0)->reportdata) == GT_REPORT_DATA_BYTES,
               "tdx uapi: reportdata is our report_data");
_Static_assert(sizeof(((struct tdx_report_req *)0)->tdreport) == GT_TDX_TDREPORT_BYTES,
               "tdx uapi: tdreport");

#define TSM_DEFAULT_ROOT "/sys/kernel/config/tsm/report"
#define TSM_MAX_BLOB (64u << 10)     // quotes ~5 KiB, SNP reports 1184 B, cert tables ~ 4 KiB

// ---- small file helpers --------------------------------------------------------------------------

static gt_err attr_path(char *out, size_t cap, const char *entry, const char *attr)
{
    return gt_path_join(out, cap, entry, attr);
}

static gt_err read_attr(const char *entry, const char *attr, size_t max, gt_buf *out)
{
    char path[4096 + 64];
    GT_TRY(attr_path(path, sizeof path, entry, attr));
    return gt_err_wrap(gt_file_read_all(path, max, out), "configfs-tsm: %s", attr);
}

static gt_err read_generation(const char *entry, uint64_t *gen)
{
    gt_buf b = {0};
    GT_TRY(read_attr(entry, "generation", 64, &b));
    char text[65] = {0};
    memcpy(text, b.data, b.len);
    gt_buf_free_nowipe(&b);
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    GT_ENSURE(end != text && errno == 0 && (*end == '\0' || *end == '\n') && text[0] != '-',
              GT_E_FORMAT, "configfs-tsm: generation '%.20s' is not a number", text);
    *gen = v;
    return GT_OK;
}

static gt_err write_attr(const char *entry, const char *attr, const void *data, size_t len)
{
    char path[4096 + 64];
    GT_TRY(attr_path(path, sizeof path, entry, attr));
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    GT_ENSURE(fd >= 0, GT_E_IO, "configfs-tsm: open %s: %s", attr, strerror(errno));
    // configfs binary attributes take the whole value in one write.
    ssize_t n = write(fd, data, len);
    int saved = errno;
    int cerr = close(fd);
    GT_ENSURE(n == (ssize_t)len, GT_E_IO, "configfs-tsm: write %s: %s", attr,
              n < 0 ? strerror(saved) : "short write");
    GT_ENSURE(cerr == 0, GT_E_IO, "configfs-tsm: close %s: %s", attr, strerror(errno));
    return GT_OK;
}

static void hook(const gt_tsm_params *p, gt_tsm_step step, const char *entry)
{
    if (p->hook != NULL) {
        p->hook(p->hook_ctx, step, entry);
    }
}

void gt_tsm_report_free(gt_tsm_report *r)
{
    gt_buf_free_nowipe(&r->outblob);
    gt_buf_free_nowipe(&r->auxblob);
    memset(r, 0, sizeof *r);
}

// ---- configfs-tsm ------------------------------------------------------------------------------

static gt_err tsm_read_entry(gt_tsm_report *out, const gt_tsm_params *p, const char *entry,
                             const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    uint64_t g0 = 0, g1 = 0, g2 = 0;
    GT_TRY(read_generation(entry, &g0));
    GT_TRY(write_attr(entry, "inblob", report_data, GT_REPORT_DATA_BYTES));
    hook(p, GT_TSM_STEP_INBLOB_WRITTEN, entry);
    GT_TRY(read_generation(entry, &g1));
    GT_ENSURE(g1 == g0 + 1, GT_E_STATE,
              "configfs-tsm: generation went from %" PRIu64 " to %" PRIu64
              " around our inblob write: another writer is using the entry",
              g0, g1);
    GT_TRY(read_attr(entry, "outblob", TSM_MAX_BLOB, &out->outblob));
    GT_ENSURE(out->outblob.len > 0, GT_E_FORMAT, "configfs-tsm: empty outblob");
    hook(p, GT_TSM_STEP_OUTBLOB_READ, entry);
    char aux_path[4096 + 64];
    GT_TRY(attr_path(aux_path, sizeof aux_path, entry, "auxblob"));
    if (gt_path_exists(aux_path)) {
        gt_err aerr = read_attr(entry, "auxblob", TSM_MAX_BLOB, &out->auxblob);
        // The kernel answers ENOENT/EIO-free empty reads when the provider has no aux data.
        if (!gt_is_ok(aerr)) {
            gt_log_debug("%s", aerr.msg);
        }
    }
    gt_buf prov = {0};
    GT_TRY(read_attr(entry, "provider", sizeof out->provider - 1, &prov));
    size_t n = prov.len;
    while (n > 0 && (prov.data[n - 1] == '\n' || prov.data[n - 1] == '\0')) {
        n--;
    }
    memcpy(out->provider, prov.data, n);
    out->provider[n] = '\0';
    gt_buf_free_nowipe(&prov);
    GT_TRY(read_generation(entry, &g2));
    GT_ENSURE(g2 == g1, GT_E_STATE,
              "configfs-tsm: generation changed from %" PRIu64 " to %" PRIu64
              " while reading outblob: a concurrent writer replaced the report",
              g1, g2);
    out->generation = g2;
    return GT_OK;
}

gt_err gt_tsm_report_collect(gt_tsm_report *out, const gt_tsm_params *p,
                             const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    memset(out, 0, sizeof *out);
    static const gt_tsm_params defaults;
    if (p == NULL) {
        p = &defaults;
    }
    const char *root = p->root != NULL ? p->root : TSM_DEFAULT_ROOT;
    char name[96];
    if (p->entry != NULL) {
        GT_ENSURE(strlen(p->entry) < sizeof name && strchr(p->entry, '/') == NULL &&
                      p->entry[0] != '.' && p->entry[0] != '\0',
                  GT_E_ARG, "configfs-tsm: bad entry name");
        snprintf(name, sizeof name, "%s", p->entry);
    } else {
        uint32_t rnd = 0;
        GT_TRY(gt_random_bytes(&rnd, sizeof rnd));
        snprintf(name, sizeof name, "gputravel-%ld-%08x", (long)getpid(), rnd);
    }
    char entry[4096 + 128];
    GT_TRY(gt_path_join(entry, sizeof entry, root, name));
    if (mkdir(entry, 0700) != 0) {
        return gt_errf(errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO,
                       "configfs-tsm: mkdir %s: %s", entry, strerror(errno));
    }
    hook(p, GT_TSM_STEP_MKDIR, entry);
    gt_err err = tsm_read_entry(out, p, entry, report_data);
    hook(p, GT_TSM_STEP_BEFORE_RMDIR, entry);
    if (rmdir(entry) != 0) {
        gt_log_warn("configfs-tsm: rmdir %s: %s", entry, strerror(errno));
    }
    if (!gt_is_ok(err)) {
        gt_tsm_report_free(out);
    }
    return err;
}

// ---- guest-device ioctls -------------------------------------------------------------------------

gt_err gt_tdx_guest_get_report0(uint8_t tdreport[GT_TDX_TDREPORT_BYTES], const char *dev_path,
                                const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    const char *dev = dev_path != NULL ? dev_path : "/dev/tdx_guest";
    struct tdx_report_req req;
    memset(&req, 0, sizeof req);
    memcpy(req.reportdata, report_data, GT_REPORT_DATA_BYTES);
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    GT_ENSURE(fd >= 0, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "tdx: open %s: %s", dev,
              strerror(errno));
    int rc = ioctl(fd, TDX_CMD_GET_REPORT0, &req);
    int saved = errno;
    close(fd);
    GT_ENSURE(rc == 0, GT_E_IO, "tdx: TDX_CMD_GET_REPORT0: %s", strerror(saved));
    memcpy(tdreport, req.tdreport, GT_TDX_TDREPORT_BYTES);
    return GT_OK;
}

// ---- collect -------------------------------------------------------------------------------------

static gt_err collect_sim(gt_evidence *ev, const gt_collect_params *p,
                          const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    gt_sim_claims c = {.svn = p->sim_svn, .debug = p->sim_debug,
                       .issued_at = (uint64_t)time(NULL)};
    memcpy(c.report_data, report_data, GT_REPORT_DATA_BYTES);
    GT_TRY(gt_sim_measure_exe(c.measurement, p->sim_exe));
    gt_pkey *root = NULL;
    GT_TRY(gt_sim_root_open(&root, NULL, 0, p->sim_root, true));
    gt_err err = gt_sim_evidence_create(ev, &c, root);
    gt_pkey_free(root);
    if (gt_is_ok(err)) {
        gt_log_warn("attest: produced %s evidence (software-signed, no hardware isolation)",
                    GT_INSECURE_SIMULATION);
    }
    return err;
}

static gt_tee_type provider_type(const char *provider)
{
    if (strcmp(provider, "tdx_guest") == 0) {
        return GT_TEE_TDX;
    }
    if (strcmp(provider, "sev_guest") == 0) {
        return GT_TEE_SNP;
    }
    return GT_TEE_AUTO;
}

static gt_err collect_hw(gt_evidence *ev, const gt_collect_params *p,
                         const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    gt_tsm_report rep;
    gt_err err = gt_tsm_report_collect(&rep, p->tsm, report_data);
    if (gt_is_ok(err)) {
        gt_tee_type t = provider_type(rep.provider);
        if (t == GT_TEE_AUTO || (p->type != GT_TEE_AUTO && t != p->type)) {
            err = gt_errf(GT_E_UNSUPPORTED, "configfs-tsm: provider '%s' does not give %s evidence",
                          rep.provider, gt_tee_type_name(p->type));
        } else {
            gt_evidence tmp = {0};
            err = gt_evidence_parse(&tmp, rep.outblob.data, rep.outblob.len, t);
            if (gt_is_ok(err) && rep.auxblob.len > 0) {
                err = gt_buf_append(&tmp.aux, rep.auxblob.data, rep.auxblob.len);
            }
            if (gt_is_ok(err)) {
                tmp.enveloped = true;
                *ev = tmp;
            } else {
                gt_evidence_free(&tmp);
                err = gt_err_wrap(err, "configfs-tsm outblob");
            }
        }
        gt_tsm_report_free(&rep);
        return err;
    }
    if (err.code != GT_E_NOTFOUND) {
        return err;  // configfs-tsm is there but failed: do not paper over it
    }
    gt_log_info("attest: no configfs-tsm (%s); trying the guest device", err.msg);
    if (p->type == GT_TEE_SNP) {
        gt_evidence tmp = {0};
        gt_buf raw = {0};
        GT_TRY(gt_sev_guest_get_report(&raw, p->dev_path, 0, report_data));
        err = gt_evidence_parse(&tmp, raw.data, raw.len, GT_TEE_SNP);
        gt_buf_free_nowipe(&raw);
        if (gt_is_ok(err)) {
            tmp.enveloped = true;
            *ev = tmp;
        }
        return err;
    }
    if (p->type == GT_TEE_TDX) {
        uint8_t tdreport[GT_TDX_TDREPORT_BYTES];
        GT_TRY(gt_tdx_guest_get_report0(tdreport, p->dev_path, report_data));
        return gt_errf(GT_E_UNSUPPORTED, "tdx: /dev/tdx_guest gave a TDREPORT, which only the "
                                         "local quoting enclave can verify; remote evidence needs "
                                         "configfs-tsm quote generation (Linux 6.7+)");
    }
    return gt_errf(GT_E_NOTFOUND, "attest: no configfs-tsm and no evidence type to fall back to");
}

gt_err gt_attest_collect(gt_evidence *ev, const gt_collect_params *p,
                         const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    memset(ev, 0, sizeof *ev);
    switch (p->type) {
    case GT_TEE_SIM:
        return collect_sim(ev, p, report_data);
    case GT_TEE_TDX:
    case GT_TEE_SNP:
    case GT_TEE_AUTO:
        return collect_hw(ev, p, report_data);
    case GT_TEE_SGX:
    case GT_TEE_NVGPU:
    default:
        return gt_errf(GT_E_UNSUPPORTED, "attest: collecting %s evidence is not supported here "
                                         "(sgx: in-enclave quoting; nvgpu: the device backend)",
                       gt_tee_type_name(p->type));
    }
}
