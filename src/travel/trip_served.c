// A trip served by the trainer itself, behind device.h's public API (gt_device_trip_*): the
// state machine of trip_ipc.c with the importer and the holder's load that fit the trainer's
// device: CUDA IPC (cuda_trip.c) for a cuda trainer, the host-memory handoff (trip_host.c) for a
// cpu trainer.
#include <gputravel/travel.h>

#include "trip_ipc.h"

#include "trip_host.h"
#ifdef GT_HAVE_CUDA
#include "cuda_trip.h"
#endif

#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#define SCHEME_CUDA "ipc-cuda:"
#define SCHEME_CPU "ipc-cpu:"

gt_err gt_device_trip_address_parse(const char *address, gt_device_kind *kind, char *path,
                                    size_t cap)
{
    GT_ENSURE(address != NULL, GT_E_FORMAT, "device address: none");
    size_t n = strlen(address);
    GT_ENSURE(n > 0 && n < GT_DEVICE_TRIP_ADDRESS_MAX, GT_E_FORMAT,
              "device address of %zu bytes", n);
    const char *p = address;
    gt_device_kind k = GT_DEVICE_SIM;
    if (strncmp(address, SCHEME_CUDA, strlen(SCHEME_CUDA)) == 0) {
        k = GT_DEVICE_CUDA;
        p += strlen(SCHEME_CUDA);
    } else if (strncmp(address, SCHEME_CPU, strlen(SCHEME_CPU)) == 0) {
        k = GT_DEVICE_CPU;
        p += strlen(SCHEME_CPU);
    } else {
        // "<scheme>:" of letters, digits, '+', '-', '.' before any '/' is a scheme we do not know
        size_t i = 0;
        while (address[i] != '\0' && address[i] != '/' && address[i] != ':' &&
               ((address[i] >= 'a' && address[i] <= 'z') ||
                (address[i] >= 'A' && address[i] <= 'Z') ||
                (address[i] >= '0' && address[i] <= '9') || address[i] == '+' ||
                address[i] == '-' || address[i] == '.')) {
            i++;
        }
        GT_ENSURE(!(i > 0 && address[i] == ':'), GT_E_FORMAT,
                  "device address '%.*s...': unknown scheme (ipc-cuda:, ipc-cpu: or a devd "
                  "socket path)", (int)(i + 1), address);
    }
    size_t plen = strlen(p);
    GT_ENSURE(plen > 0 && plen < sizeof(((struct sockaddr_un *)0)->sun_path), GT_E_FORMAT,
              "device address: a socket path of %zu bytes", plen);
    for (size_t i = 0; i < plen; i++) {
        GT_ENSURE((unsigned char)p[i] >= 0x20 && p[i] != 0x7f, GT_E_FORMAT,
                  "device address: a control byte in the socket path");
    }
    GT_ENSURE(plen < cap, GT_E_LIMIT, "device address: no room for the path");
    memcpy(path, p, plen + 1);
    *kind = k;
    return GT_OK;
}

// ---- the trainer ------------------------------------------------------------------------------

struct gt_device_trip {
    gt_ipc_trip *trip;
    gt_ipc_trip_importer imp;
};

gt_err gt_device_trip_lend(gt_device_trip **out, gt_device *dev, const char *socket_path,
                           uint32_t lease_ms, int peer_fd,
                           const uint8_t agreement_hash[GT_SHA256_BYTES],
                           uint8_t ticket[GT_SIM_TICKET_BYTES], char *address,
                           size_t address_cap)
{
    *out = NULL;
    gt_device_kind kind = gt_device_get_kind(dev);
    const char *scheme = kind == GT_DEVICE_CUDA ? SCHEME_CUDA : SCHEME_CPU;
    GT_ENSURE(kind == GT_DEVICE_CPU || kind == GT_DEVICE_CUDA, GT_E_UNSUPPORTED,
              "trip: the trainer serves trips for a cpu or cuda device (the sim device travels "
              "through devd)");
    GT_ENSURE(socket_path != NULL &&
                  strlen(scheme) + strlen(socket_path) < address_cap &&
                  strlen(scheme) + strlen(socket_path) < GT_DEVICE_TRIP_ADDRESS_MAX,
              GT_E_LIMIT, "trip: socket path too long for a device address");
#ifdef GT_HAVE_CUDA
    if (kind == GT_DEVICE_CUDA) {  // PPCIe: no CUDA IPC, so no trip; refused before any holder
        GT_TRY(gt_device_cuda_ipc_check(dev));
    }
#endif
    gt_device_trip *t = calloc(1, sizeof *t);
    GT_ENSURE(t != NULL, GT_E_NOMEM, "trip: out of memory");
#ifdef GT_HAVE_CUDA
    t->imp = kind == GT_DEVICE_CUDA ? gt_cuda_trip_importer(dev) : gt_host_trip_importer(dev);
#else
    t->imp = gt_host_trip_importer(dev);  // no cuda device exists in this build
#endif
    gt_ipc_trip_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.socket_path = socket_path;
    cfg.lease_ms = lease_ms;
    // The evidence says what the holder's chunk will be in: a GPU, or this process's host memory.
    cfg.memory = kind == GT_DEVICE_CUDA ? GT_SIM_MEMORY_CUDA : GT_SIM_MEMORY_HOST;
    memcpy(cfg.agreement_hash, agreement_hash, sizeof cfg.agreement_hash);
    gt_err err = gt_ipc_trip_lend(&t->trip, &cfg, ticket);
    if (!gt_is_ok(err)) {
        free(t);
        return err;
    }
    gt_ipc_trip_watch_peer(t->trip, peer_fd);
    if (kind == GT_DEVICE_CPU) {
        gt_log_info("trip: cpu device: the holder's chunk arrives in host memory (no "
                    "confidentiality; the protocol and the accounting only)");
    }
    snprintf(address, address_cap, "%s%s", scheme, socket_path);
    *out = t;
    return GT_OK;
}

gt_err gt_device_trip_wait(gt_device_trip *t, const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                           uint64_t bytes, gt_dbuf *out)
{
    return gt_ipc_trip_wait(t->trip, &t->imp, aad, bytes, out);
}

gt_err gt_device_trip_check(gt_device_trip *t)
{
    return gt_ipc_trip_check(t->trip);
}

gt_err gt_device_trip_release(gt_device_trip *t)
{
    return gt_ipc_trip_release(t->trip);
}

void gt_device_trip_close(gt_device_trip *t)
{
    if (t == NULL) {
        return;
    }
    gt_ipc_trip_close(t->trip);
    free(t);
}

// ---- the holder -------------------------------------------------------------------------------

struct gt_device_trip_carrier {
    gt_sim_conn conn;
    gt_host_trip_buf host;  // cpu trainer: the memfd
    gt_device *gpu;         // cuda trainer: this holder's own GPU context and its buffer
    gt_dbuf gpu_buf;
    gt_device_kind kind;    // the trainer's
    bool attached, handed_over;
};

static void carrier_free_buffer(gt_device_trip_carrier *c)
{
    gt_host_trip_free(&c->host);
    if (c->gpu != NULL) {
        if (c->gpu_buf != 0) {
            gt_err e = gt_device_free(c->gpu, c->gpu_buf);  // wipes
            if (!gt_is_ok(e)) {
                gt_log_warn("trip: freeing the holder's GPU buffer: %s", e.msg);
            }
        }
        gt_device_close(c->gpu);
        c->gpu = NULL;
        c->gpu_buf = 0;
    }
}

// The chunk into this holder's memory, opened; ipc: what RETURN_IPC carries, *fd: what goes with it.
static gt_err carrier_load(gt_device_trip_carrier *c, gt_device_kind kind,
                           const uint8_t *ct_and_tag, uint64_t len, const uint8_t iv[12],
                           const uint8_t aad[GT_SIM_LOAD_AAD_BYTES], const uint8_t key[32],
                           uint32_t seg_bytes, uint8_t ipc[GT_SIM_IPC_DESC_BYTES], int *fd)
{
    *fd = -1;
    if (kind == GT_DEVICE_CPU) {
        GT_TRY(gt_host_trip_load(ct_and_tag, len, iv, aad, key, seg_bytes, &c->host, ipc));
        *fd = c->host.fd;
        return GT_OK;
    }
#ifdef GT_HAVE_CUDA
    gt_device_config dc = {.kind = GT_DEVICE_CUDA};
    GT_TRY(gt_err_wrap(gt_device_open(&c->gpu, &dc), "trip: this holder's GPU"));
    return gt_cuda_trip_load(c->gpu, ct_and_tag, len, iv, aad, key, seg_bytes, &c->gpu_buf, ipc);
#else
    (void)ct_and_tag, (void)len, (void)iv, (void)aad, (void)key, (void)ipc, (void)seg_bytes;
    return gt_errf(GT_E_UNSUPPORTED, "this holder is built without CUDA (GPUTRAVEL_CUDA=OFF): it "
                   "cannot decrypt its chunk on a GPU for a cuda trainer");
#endif
}

gt_err gt_device_trip_attach(gt_device_trip_carrier **out, const char *address,
                             const gt_device_sim_options *opt,
                             const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    *out = NULL;
    gt_device_kind kind = GT_DEVICE_SIM;
    char path[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_TRY(gt_device_trip_address_parse(address, &kind, path, sizeof path));
    GT_ENSURE(kind != GT_DEVICE_SIM, GT_E_ARG, "trip: %s is devd's address, not a trip served "
              "by the trainer", address);
    gt_device_trip_carrier *c = calloc(1, sizeof *c);
    GT_ENSURE(c != NULL, GT_E_NOMEM, "trip: out of memory");
    c->host.fd = -1;
    c->kind = kind;
    gt_err err = gt_ipc_trip_attach(&c->conn, path, opt, ticket);
    if (!gt_is_ok(err)) {
        free(c);
        return err;
    }
    c->attached = true;
    *out = c;
    return GT_OK;
}

gt_err gt_device_trip_measurement(gt_device_trip_carrier *c,
                                  uint8_t out[GT_MEASUREMENT_BYTES])
{
    return gt_sim_conn_measurement(&c->conn, out);
}

gt_err gt_device_trip_hand_over(gt_device_trip_carrier *c, const uint8_t *ct_and_tag,
                                uint64_t len, const uint8_t iv[12],
                                const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                const uint8_t key[32], uint32_t seg_bytes)
{
    GT_ENSURE(c->attached && !c->handed_over, GT_E_STATE, "trip: not attached, or handed over");
    uint8_t ipc[GT_SIM_IPC_DESC_BYTES];
    int fd = -1;
    gt_err err = carrier_load(c, c->kind, ct_and_tag, len, iv, aad, key, seg_bytes, ipc, &fd);
    if (gt_is_ok(err)) {
        err = gt_ipc_trip_hand_over(&c->conn, ipc, aad, fd);
    }
    if (!gt_is_ok(err)) {
        gt_sim_conn_close(&c->conn);  // BYE: nothing handed over (or the import refused)
        c->attached = false;
        carrier_free_buffer(c);
        return err;
    }
    c->handed_over = true;
    return GT_OK;
}

gt_err gt_device_trip_carrier_finish(gt_device_trip_carrier *c, int timeout_ms)
{
    if (c == NULL) {
        return GT_OK;
    }
    gt_err err = c->handed_over ? gt_ipc_trip_wait_released(&c->conn, timeout_ms)
                                : gt_errf(GT_E_STATE, "trip: nothing was handed over");
    gt_device_trip_carrier_close(c);  // frees only now: the trainer's mapping is gone
    return err;
}

void gt_device_trip_carrier_close(gt_device_trip_carrier *c)
{
    if (c == NULL) {
        return;
    }
    if (c->attached) {
        gt_sim_conn_close(&c->conn);
    }
    carrier_free_buffer(c);
    gt_secure_zero(c, sizeof *c);
    free(c);
}
