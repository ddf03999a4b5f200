// SNP_GET_DERIVED_KEY (Linux sev-guest, SEV-SNP firmware ABI "MSG_KEY_REQ"/"MSG_KEY_RSP"): a
// key only this guest launch on this chip can derive again; the root a sealed store needs.
#include <gputravel/attest.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/sev-guest.h>

// MSG_KEY_RSP: status u32, 28 reserved bytes, then the 32-byte derived key.
#define SNP_MSG_KEY_RSP_KEY_OFFSET 32u
#define SNP_KEY_FIELDS_KNOWN 0x3full

gt_err gt_sev_guest_get_derived_key(uint8_t key[GT_SNP_DERIVED_KEY_BYTES], const char *dev_path,
                                    uint32_t vmpl, uint64_t guest_field_select)
{
    memset(key, 0, GT_SNP_DERIVED_KEY_BYTES);
    const char *dev = dev_path != NULL ? dev_path : "/dev/sev-guest";
    GT_ENSURE(vmpl <= 3, GT_E_ARG, "snp: vmpl %u out of range", vmpl);
    GT_ENSURE((guest_field_select & ~SNP_KEY_FIELDS_KNOWN) == 0, GT_E_ARG,
              "snp: unknown guest field select bits 0x%llx",
              (unsigned long long)guest_field_select);
    struct snp_derived_key_req req;
    struct snp_derived_key_resp resp;
    struct snp_guest_request_ioctl io;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    memset(&io, 0, sizeof io);
    req.root_key_select = 0;  // VCEK: the chip's own root, not the migration agent's VMRK
    req.guest_field_select = guest_field_select;
    req.vmpl = vmpl;
    io.msg_version = 1;
    io.req_data = (__u64)(uintptr_t)&req;
    io.resp_data = (__u64)(uintptr_t)&resp;
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    GT_ENSURE(fd >= 0, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "snp: open %s: %s", dev,
              strerror(errno));
    int rc = ioctl(fd, SNP_GET_DERIVED_KEY, &io);
    int saved = errno;
    close(fd);
    gt_err err = GT_OK;
    uint32_t status = 0;
    gt_reader r = gt_reader_init(resp.data, sizeof resp.data);
    if (rc != 0) {
        err = gt_errf(GT_E_IO, "snp: SNP_GET_DERIVED_KEY: %s (firmware error 0x%llx)",
                      strerror(saved), (unsigned long long)io.exitinfo2);
    } else if (!gt_is_ok(err = gt_reader_u32le(&r, &status)) || status != 0) {
        err = gt_errf(GT_E_IO, "snp: MSG_KEY_RSP status 0x%x", status);
    } else {
        err = gt_reader_skip(&r, SNP_MSG_KEY_RSP_KEY_OFFSET - 4);
        if (gt_is_ok(err)) {
            err = gt_reader_bytes(&r, key, GT_SNP_DERIVED_KEY_BYTES);
        }
    }
    gt_secure_zero(&resp, sizeof resp);
    if (!gt_is_ok(err)) {
        gt_secure_zero(key, GT_SNP_DERIVED_KEY_BYTES);
    }
    return err;
}
