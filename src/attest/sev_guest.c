// The SEV-SNP guest device (Linux sev-guest, /dev/sev-guest): the attestation report
// (SNP_GET_REPORT, firmware MSG_REPORT_REQ/RSP) and the derived key (SNP_GET_DERIVED_KEY,
// MSG_KEY_REQ/RSP: a key only this guest launch on this chip can derive again, the root a sealed
// store needs). Both are one guest request through one ioctl; the response is parsed through
// gt_reader (the firmware's bytes are trusted no more than any other input).
#include <gputravel/attest.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/sev-guest.h>

_Static_assert(sizeof(((struct snp_report_req *)0)->user_data) == GT_REPORT_DATA_BYTES,
               "snp uapi layout");
_Static_assert(sizeof(struct snp_report_req) == 96, "snp uapi layout");
_Static_assert(sizeof(struct snp_report_resp) == 4000, "snp uapi layout");

// MSG_REPORT_RSP: status u32, report_size u32, 24 reserved bytes, then the report.
#define SNP_MSG_REPORT_RSP_HEADER 32u
// MSG_KEY_RSP: status u32, 28 reserved bytes, then the 32-byte derived key.
#define SNP_MSG_KEY_RSP_KEY_OFFSET 32u
#define SNP_KEY_FIELDS_KNOWN 0x3full

// One guest request: opens dev, runs the ioctl, closes it. GT_E_NOTFOUND when there is no such
// device (not an SNP guest), GT_E_IO with the firmware's error otherwise.
static gt_err guest_request(const char *dev, unsigned long cmd, const char *cmd_name, void *req,
                            void *resp)
{
    struct snp_guest_request_ioctl io;
    memset(&io, 0, sizeof io);
    io.msg_version = 1;
    io.req_data = (__u64)(uintptr_t)req;
    io.resp_data = (__u64)(uintptr_t)resp;
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    GT_ENSURE(fd >= 0, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "snp: open %s: %s", dev,
              strerror(errno));
    int rc = ioctl(fd, cmd, &io);
    int saved = errno;
    close(fd);
    GT_ENSURE(rc == 0, GT_E_IO, "snp: %s: %s (firmware error 0x%llx)", cmd_name, strerror(saved),
              (unsigned long long)io.exitinfo2);
    return GT_OK;
}

gt_err gt_sev_guest_get_report(gt_buf *report, const char *dev_path, uint32_t vmpl,
                               const uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    GT_ENSURE(vmpl <= 3, GT_E_ARG, "snp: vmpl %u out of range", vmpl);
    struct snp_report_req req;
    struct snp_report_resp resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    memcpy(req.user_data, report_data, GT_REPORT_DATA_BYTES);
    req.vmpl = vmpl;
    GT_TRY(guest_request(dev_path != NULL ? dev_path : "/dev/sev-guest", SNP_GET_REPORT,
                         "SNP_GET_REPORT", &req, &resp));
    gt_reader r = gt_reader_init(resp.data, sizeof resp.data);
    uint32_t status = 0, size = 0;
    GT_TRY(gt_reader_u32le(&r, &status));
    GT_TRY(gt_reader_u32le(&r, &size));
    GT_ENSURE(status == 0, GT_E_IO, "snp: MSG_REPORT_RSP status 0x%x", status);
    GT_TRY(gt_reader_skip(&r, SNP_MSG_REPORT_RSP_HEADER - 8));
    gt_span rep = {0};
    GT_TRY(gt_err_wrap(gt_reader_span(&r, size, &rep), "snp: MSG_REPORT_RSP"));
    return gt_buf_append(report, rep.data, rep.len);
}

gt_err gt_sev_guest_get_derived_key(uint8_t key[GT_SNP_DERIVED_KEY_BYTES], const char *dev_path,
                                    uint32_t vmpl, uint64_t guest_field_select)
{
    memset(key, 0, GT_SNP_DERIVED_KEY_BYTES);
    GT_ENSURE(vmpl <= 3, GT_E_ARG, "snp: vmpl %u out of range", vmpl);
    GT_ENSURE((guest_field_select & ~SNP_KEY_FIELDS_KNOWN) == 0, GT_E_ARG,
              "snp: unknown guest field select bits 0x%llx",
              (unsigned long long)guest_field_select);
    struct snp_derived_key_req req;
    struct snp_derived_key_resp resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.root_key_select = 0;  // VCEK: the chip's own root, not the migration agent's VMRK
    req.guest_field_select = guest_field_select;
    req.vmpl = vmpl;
    gt_err err = guest_request(dev_path != NULL ? dev_path : "/dev/sev-guest",
                               SNP_GET_DERIVED_KEY, "SNP_GET_DERIVED_KEY", &req, &resp);
    uint32_t status = 0;
    gt_reader r = gt_reader_init(resp.data, sizeof resp.data);
    if (gt_is_ok(err) && (!gt_is_ok(err = gt_reader_u32le(&r, &status)) || status != 0)) {
        err = gt_errf(GT_E_IO, "snp: MSG_KEY_RSP status 0x%x", status);
    }
    if (gt_is_ok(err)) {
        err = gt_reader_skip(&r, SNP_MSG_KEY_RSP_KEY_OFFSET - 4);
    }
    if (gt_is_ok(err)) {
        err = gt_reader_bytes(&r, key, GT_SNP_DERIVED_KEY_BYTES);
    }
    gt_secure_zero(&resp, sizeof resp);
    if (!gt_is_ok(err)) {
        gt_secure_zero(key, GT_SNP_DERIVED_KEY_BYTES);
    }
    return err;
}
