// The ledger's rollback guard (holder.h): a TPM 2.0 NV counter through tpm2-tss ESAPI, an
// insecure-simulation counter file, or none; and the check of a ledger against a counter.
#include <gputravel/holder.h>

#include "rollback_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#define SIM_COUNTER_MAX_BYTES 256
#define NV_INDEX_FIRST 0x01000000u
#define NV_INDEX_LAST 0x01FFFFFFu

struct gt_rollback_guard {
    gt_rollback_kind kind;
    char name[4400];
    char path[4096];  // sim: the counter file
    // tpm
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
    TPM2_HANDLE index;
    ESYS_TR nv;  // ESYS_TR_NONE until the index is known to exist
    // The index was checked (a counter) and found written: a counter stays written while it
    // exists, so later reads and increments skip the lookups (an undefined index then fails).
    bool known_written;
    void (*hook)(void *ctx);
    void *hook_ctx;
};

// ---- sim: a counter file ----------------------------------------------------------------------

gt_err gt_sim_counter_parse(const uint8_t *data, size_t len, uint64_t *value)
{
    *value = 0;
    const size_t plen = strlen(GT_SIM_COUNTER_PREFIX);
    gt_reader r = gt_reader_init(data, len);
    gt_span prefix = {0};
    GT_TRY(gt_reader_span(&r, plen, &prefix));
    GT_ENSURE(memcmp(prefix.data, GT_SIM_COUNTER_PREFIX, plen) == 0, GT_E_FORMAT,
              "sim counter file: not a gputravel counter file");
    uint64_t v = 0;
    size_t digits = 0;
    for (;;) {
        uint8_t c = 0;
        GT_TRY(gt_reader_u8(&r, &c));
        if (c == '\n') {
            break;
        }
        GT_ENSURE(c >= '0' && c <= '9', GT_E_FORMAT, "sim counter file: a non-digit in the value");
        GT_ENSURE(!(digits == 1 && v == 0), GT_E_FORMAT, "sim counter file: a leading zero");
        GT_ENSURE(v <= (UINT64_MAX - (c - '0')) / 10, GT_E_LIMIT,
                  "sim counter file: value beyond 64 bits");
        v = v * 10 + (uint64_t)(c - '0');
        digits++;
    }
    GT_ENSURE(digits > 0, GT_E_FORMAT, "sim counter file: no value");
    GT_ENSURE(gt_reader_left(&r) == 0, GT_E_FORMAT, "sim counter file: bytes after the value");
    *value = v;
    return GT_OK;
}

static gt_err sim_read(gt_rollback_guard *g, uint64_t *value, bool *written)
{
    gt_buf b = {0};
    gt_err err = gt_file_read_all(g->path, SIM_COUNTER_MAX_BYTES, &b);
    if (err.code == GT_E_NOTFOUND) {
        return GT_OK;
    }
    if (gt_is_ok(err)) {
        err = gt_sim_counter_parse(b.data, b.len, value);
    }
    gt_buf_free_nowipe(&b);
    GT_TRY(gt_err_wrap(err, "%s", g->path));
    *written = true;
    return GT_OK;
}

// The rename is durable only once the folder holding the file is fsynced too.
static gt_err fsync_parent(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    GT_ENSURE(rc == 0, GT_E_IO, "%s: fsync: %s", dir, strerror(saved));
    return GT_OK;
}

static gt_err sim_increment(gt_rollback_guard *g, uint64_t *value)
{
    uint64_t v = 0;
    bool written = false;
    GT_TRY(sim_read(g, &v, &written));
    GT_ENSURE(v < UINT64_MAX, GT_E_LIMIT, "%s: counter at its maximum", g->path);
    char text[128];
    int n = snprintf(text, sizeof text, "%s%" PRIu64 "\n", GT_SIM_COUNTER_PREFIX, v + 1);
    GT_TRY(gt_file_write_atomic(g->path, text, (size_t)n, 0600));
    GT_TRY(fsync_parent(g->path));
    *value = v + 1;
    return GT_OK;
}

// ---- tpm: an NV counter through ESAPI ---------------------------------------------------------

static gt_err tpm_fail(const gt_rollback_guard *g, const char *what, TSS2_RC rc)
{
    return gt_errf(GT_E_IO, "tpm nv 0x%08" PRIx32 ": %s: %s (0x%" PRIx32 ")", g->index, what,
                   Tss2_RC_Decode(rc), rc);
}

static gt_err tpm_connect(gt_rollback_guard *g, const char *tcti)
{
    TSS2_RC rc = Tss2_TctiLdr_Initialize(tcti, &g->tcti);
    GT_ENSURE(rc == TSS2_RC_SUCCESS, GT_E_IO,
              "tpm: cannot open the TCTI '%s': %s (is the TPM or swtpm there?)", tcti,
              Tss2_RC_Decode(rc));
    rc = Esys_Initialize(&g->esys, g->tcti, NULL);
    GT_ENSURE(rc == TSS2_RC_SUCCESS, GT_E_IO, "tpm: '%s': ESAPI initialisation: %s", tcti,
              Tss2_RC_Decode(rc));
    return GT_OK;
}

// Whether the index exists, asked of the handle list (a lookup of a missing index would make
// ESAPI log an error).
static gt_err tpm_defined(gt_rollback_guard *g, bool *defined)
{
    *defined = false;
    TPMI_YES_NO more = TPM2_NO;
    TPMS_CAPABILITY_DATA *cap = NULL;
    TSS2_RC rc = Esys_GetCapability(g->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                    TPM2_CAP_HANDLES, g->index, 1, &more, &cap);
    if (rc != TSS2_RC_SUCCESS) {
        return tpm_fail(g, "listing NV indices", rc);
    }
    *defined = cap->data.handles.count > 0 && cap->data.handles.handle[0] == g->index;
    Esys_Free(cap);
    return GT_OK;
}

// Resolves the existing index and checks it is an 8-byte counter usable with an empty auth
// value; *written from TPMA_NV_WRITTEN.
static gt_err tpm_public(gt_rollback_guard *g, bool *written)
{
    TSS2_RC rc = TSS2_RC_SUCCESS;
    if (g->nv == ESYS_TR_NONE) {
        rc = Esys_TR_FromTPMPublic(g->esys, g->index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   &g->nv);
        if (rc != TSS2_RC_SUCCESS) {
            g->nv = ESYS_TR_NONE;
            return tpm_fail(g, "resolving the index", rc);
        }
    }
    TPM2B_NV_PUBLIC *pub = NULL;
    TPM2B_NAME *name = NULL;
    rc = Esys_NV_ReadPublic(g->esys, g->nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, &name);
    if (rc != TSS2_RC_SUCCESS) {
        return tpm_fail(g, "reading its public area", rc);
    }
    TPMA_NV attrs = pub->nvPublic.attributes;
    uint16_t size = pub->nvPublic.dataSize;
    Esys_Free(pub);
    Esys_Free(name);
    uint32_t type = (attrs & TPMA_NV_TPM2_NT_MASK) >> TPMA_NV_TPM2_NT_SHIFT;
    GT_ENSURE(type == TPM2_NT_COUNTER && size == 8 && (attrs & TPMA_NV_AUTHWRITE) != 0 &&
                  (attrs & TPMA_NV_AUTHREAD) != 0,
              GT_E_STATE,
              "tpm nv 0x%08" PRIx32 ": exists but is not a counter this holder can use (type %u, "
              "%u bytes): name another index (tpm@0xINDEX:...)", g->index, type, size);
    *written = (attrs & TPMA_NV_WRITTEN) != 0;
    return GT_OK;
}

static gt_err tpm_read(gt_rollback_guard *g, uint64_t *value, bool *written)
{
    if (!g->known_written) {
        bool defined = false;
        GT_TRY(tpm_defined(g, &defined));
        if (!defined) {
            return GT_OK;
        }
        GT_TRY(tpm_public(g, &g->known_written));
        if (!g->known_written) {
            return GT_OK;
        }
    }
    TPM2B_MAX_NV_BUFFER *data = NULL;
    TSS2_RC rc = Esys_NV_Read(g->esys, g->nv, g->nv, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                              ESYS_TR_NONE, 8, 0, &data);
    if (rc != TSS2_RC_SUCCESS) {
        return tpm_fail(g, "reading the counter", rc);
    }
    // The TPM's answer is device bytes: exactly 8, big-endian (TPM 2.0 Part 1, NV counter).
    gt_reader r = gt_reader_init(data->buffer, data->size);
    uint64_t v = 0;
    gt_err err = gt_reader_u64be(&r, &v);
    if (gt_is_ok(err) && gt_reader_left(&r) != 0) {
        err = gt_errf(GT_E_FORMAT, "tpm nv 0x%08" PRIx32 ": the counter read back %u bytes, not 8",
                      g->index, (unsigned)data->size);
    }
    Esys_Free(data);
    GT_TRY(err);
    *value = v;
    *written = true;
    return GT_OK;
}

static gt_err tpm_define(gt_rollback_guard *g)
{
    TPM2B_AUTH auth = {.size = 0};
    TPM2B_NV_PUBLIC pub = {
        .nvPublic = {
            .nvIndex = g->index,
            .nameAlg = TPM2_ALG_SHA256,
            // A counter (only NV_Increment writes it), used with the index's own empty auth so
            // that no owner secret is needed after the define; no dictionary-attack lockout.
            .attributes = (TPM2_NT_COUNTER << TPMA_NV_TPM2_NT_SHIFT) | TPMA_NV_AUTHWRITE |
                          TPMA_NV_AUTHREAD | TPMA_NV_OWNERREAD | TPMA_NV_NO_DA,
            .authPolicy = {.size = 0},
            .dataSize = 8,
        }};
    TSS2_RC rc = Esys_NV_DefineSpace(g->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                     ESYS_TR_NONE, &auth, &pub, &g->nv);
    if (rc != TSS2_RC_SUCCESS) {
        g->nv = ESYS_TR_NONE;
        return tpm_fail(g, "defining the counter (owner hierarchy, empty owner auth)", rc);
    }
    gt_log_info("tpm nv 0x%08" PRIx32 ": defined a new NV counter for the ledger's rollback guard",
                g->index);
    return GT_OK;
}

static gt_err tpm_increment(gt_rollback_guard *g, uint64_t *value)
{
    bool defined = g->known_written, written = false;
    if (!defined) {
        GT_TRY(tpm_defined(g, &defined));
    }
    if (!defined) {
        GT_TRY(tpm_define(g));
    } else if (!g->known_written) {
        GT_TRY(tpm_public(g, &written));
    }
    TSS2_RC rc = Esys_NV_Increment(g->esys, g->nv, g->nv, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                   ESYS_TR_NONE);
    if (rc != TSS2_RC_SUCCESS) {
        return tpm_fail(g, "incrementing the counter", rc);
    }
    g->known_written = true;
    GT_TRY(tpm_read(g, value, &written));
    GT_ENSURE(written, GT_E_STATE, "tpm nv 0x%08" PRIx32 ": no value after an increment",
              g->index);
    return GT_OK;
}

// ---- the interface ----------------------------------------------------------------------------

// "tpm:TCTI" or "tpm@0xINDEX:TCTI": the index (default GT_ROLLBACK_TPM_DEFAULT_INDEX) and TCTI.
static gt_err tpm_spec(const char *rest, uint32_t *index, const char **tcti)
{
    *index = GT_ROLLBACK_TPM_DEFAULT_INDEX;
    if (rest[0] == '@') {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(rest + 1, &end, 16);
        GT_ENSURE(errno == 0 && end != rest + 1 && *end == ':' && v >= NV_INDEX_FIRST &&
                      v <= NV_INDEX_LAST,
                  GT_E_ARG, "rollback guard: 'tpm@INDEX:TCTI' needs an NV index in hex, "
                            "0x01000000-0x01FFFFFF (the owner range is 0x01800000-0x01BFFFFF)");
        *index = (uint32_t)v;
        rest = end;
    }
    GT_ENSURE(rest[0] == ':' && rest[1] != '\0', GT_E_ARG,
              "rollback guard: 'tpm:TCTI' needs a TCTI, e.g. tpm:device:/dev/tpmrm0 or "
              "tpm:swtpm:host=127.0.0.1,port=2321");
    *tcti = rest + 1;
    return GT_OK;
}

gt_err gt_rollback_guard_open(gt_rollback_guard **out, const char *spec)
{
    *out = NULL;
    gt_rollback_guard *g = calloc(1, sizeof *g);
    GT_ENSURE(g != NULL, GT_E_NOMEM, "rollback guard: out of memory");
    g->nv = ESYS_TR_NONE;
    gt_err err = GT_OK;
    if (strcmp(spec, "none") == 0) {
        g->kind = GT_ROLLBACK_NONE;
        snprintf(g->name, sizeof g->name, "none");
    } else if (strncmp(spec, "sim:", 4) == 0) {
        GT_ENSURE_GOTO(err, spec[4] != '\0' && strlen(spec + 4) < sizeof g->path, fail, GT_E_ARG,
                       "rollback guard: 'sim:PATH' needs a counter file path");
        g->kind = GT_ROLLBACK_SIM;
        snprintf(g->path, sizeof g->path, "%s", spec + 4);
        snprintf(g->name, sizeof g->name, "sim %s (insecure-simulation)", g->path);
    } else if (strncmp(spec, "tpm", 3) == 0 && (spec[3] == ':' || spec[3] == '@')) {
        const char *tcti = NULL;
        uint32_t index = 0;
        GT_TRY_GOTO(err, tpm_spec(spec + 3, &index, &tcti), fail);
        GT_ENSURE_GOTO(err, strlen(tcti) < 4096, fail, GT_E_LIMIT, "rollback guard: TCTI too long");
        g->kind = GT_ROLLBACK_TPM;
        g->index = index;
        snprintf(g->name, sizeof g->name, "tpm %s nv 0x%08" PRIx32, tcti, index);
        GT_TRY_GOTO(err, tpm_connect(g, tcti), fail);
    } else {
        GT_ENSURE_GOTO(err, false, fail, GT_E_ARG,
                       "rollback guard '%s': expected tpm:TCTI, tpm@0xINDEX:TCTI, sim:PATH or none",
                       spec);
    }
    *out = g;
    return GT_OK;
fail:
    gt_rollback_guard_close(g);
    return err;
}

gt_err gt_rollback_guard_read(gt_rollback_guard *g, uint64_t *value, bool *written)
{
    *value = 0;
    *written = false;
    switch (g->kind) {
    case GT_ROLLBACK_SIM: return sim_read(g, value, written);
    case GT_ROLLBACK_TPM: return tpm_read(g, value, written);
    case GT_ROLLBACK_NONE: return GT_OK;
    default: return gt_errf(GT_E_STATE, "rollback guard: unknown kind");
    }
}

gt_err gt_rollback_guard_increment(gt_rollback_guard *g, uint64_t *value)
{
    *value = 0;
    if (g->hook != NULL) {
        g->hook(g->hook_ctx);
    }
    switch (g->kind) {
    case GT_ROLLBACK_SIM: return sim_increment(g, value);
    case GT_ROLLBACK_TPM: return tpm_increment(g, value);
    case GT_ROLLBACK_NONE: return gt_errf(GT_E_STATE, "rollback guard none: no counter");
    default: return gt_errf(GT_E_STATE, "rollback guard: unknown kind");
    }
}

gt_rollback_kind gt_rollback_guard_kind(const gt_rollback_guard *g)
{
    return g == NULL ? GT_ROLLBACK_NONE : g->kind;
}

const char *gt_rollback_guard_name(const gt_rollback_guard *g)
{
    return g == NULL ? "none" : g->name;
}

void gt_rollback_guard_set_test_hook(gt_rollback_guard *g, void (*hook)(void *ctx), void *ctx)
{
    g->hook = hook;
    g->hook_ctx = ctx;
}

void gt_rollback_guard_close(gt_rollback_guard *g)
{
    if (g == NULL) {
        return;
    }
    if (g->esys != NULL) {
        if (g->nv != ESYS_TR_NONE) {
            // Forgets ESAPI's handle only; the index stays in the TPM.
            TSS2_RC ignored = Esys_TR_Close(g->esys, &g->nv);
            (void)ignored;
        }
        Esys_Finalize(&g->esys);
    }
    if (g->tcti != NULL) {
        Tss2_TctiLdr_Finalize(&g->tcti);
    }
    free(g);
}

// ---- a ledger against a counter ---------------------------------------------------------------

gt_err gt_rollback_check(const gt_ledger_summary *s, uint64_t value, bool written,
                         const char *guard_name, gt_rollback_verdict *v)
{
    *v = GT_ROLLBACK_REFUSE;
    bool have = s != NULL && s->entries > 0;
    unsigned long long l = have ? (unsigned long long)s->counter : 0;
    unsigned long long t = (unsigned long long)value;
    if (!written) {
        if (!have || !s->anchored) {
            *v = have ? GT_ROLLBACK_UNANCHORED : GT_ROLLBACK_NEW;
            return GT_OK;
        }
        return gt_errf(GT_E_STATE, "rollback: the ledger is anchored at counter %llu but the "
                                   "guard has no counter (another TPM or counter file, or it was "
                                   "removed); guard %s", l, guard_name);
    }
    GT_ENSURE(have, GT_E_STATE, "rollback: no ledger (missing or empty) while the guard's counter "
                                "is at %llu: it was deleted or replaced; refusing a new genesis; "
                                "guard %s", t, guard_name);
    GT_ENSURE(s->anchored, GT_E_STATE, "rollback: the ledger carries no counter while the guard's "
                                       "is at %llu: replaced by an old or another ledger; guard %s",
              t, guard_name);
    if (s->counter == value) {
        *v = GT_ROLLBACK_MATCH;
        return GT_OK;
    }
    if (value < UINT64_MAX && s->counter == value + 1) {
        *v = GT_ROLLBACK_PENDING;
        return GT_OK;
    }
    GT_ENSURE(s->counter > value, GT_E_STATE, "rollback: the ledger's counter %llu is behind the "
                                              "guard's %llu: it was cut back or an old copy "
                                              "restored (or replaced); guard %s", l, t, guard_name);
    return gt_errf(GT_E_STATE, "rollback: the ledger's counter %llu is ahead of the guard's %llu: "
                               "another TPM or counter file, or the counter's state was restored; "
                               "guard %s", l, t, guard_name);
}

// ---- a software TPM ------------------------------------------------------------------------------

static bool swtpm_find(char *exe, size_t cap)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path && *path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        snprintf(exe, cap, "%s/swtpm", d);
        if (access(exe, X_OK) == 0) {
            return true;
        }
    }
    return false;
}

static bool port_accepts(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

// P from the kernel's pick and P+1, both free; P+1 is returned bound and listening (swtpm takes
// it over as its control socket), P closed again: swtpm's command socket must bind it itself
// (its fd= form is for a connected socket, not a listening one).
static gt_err port_pair(int *port, gt_listener **ctrl)
{
    for (int tries = 0; tries < 50; tries++) {
        gt_listener *l = NULL;
        GT_TRY(gt_listener_open(&l, "127.0.0.1:0"));
        int p = gt_listener_port(l);
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", p + 1);
        bool ok = p < 65535 && gt_is_ok(gt_listener_open(ctrl, addr));
        gt_listener_close(l);
        if (ok) {
            *port = p;
            return GT_OK;
        }
    }
    return gt_errf(GT_E_IO, "swtpm: no two adjacent free TCP ports");
}

// One try: swtpm on command port *port (bound by swtpm) and the control socket ctrl (inherited).
// GT_E_RETRY when swtpm exited at start: the command port was taken meanwhile.
static gt_err swtpm_try(const char *exe, const char *state_dir, const char *log, gt_proc *proc,
                        int port, gt_listener *ctrl)
{
    char state[4200], server[64], ctrl_arg[64];
    int ctrl_fd = gt_listener_fd(ctrl);
    snprintf(state, sizeof state, "dir=%s", state_dir);
    snprintf(server, sizeof server, "type=tcp,port=%d", port);
    snprintf(ctrl_arg, sizeof ctrl_arg, "type=tcp,fd=%d", ctrl_fd);
    // not-need-init,startup-clear: the TPM comes up started, as a platform's firmware leaves it.
    char *argv[] = {(char *)exe, "socket", "--tpm2", "--tpmstate", state, "--server", server,
                    "--ctrl", ctrl_arg, "--flags", "not-need-init,startup-clear", NULL};
    gt_proc_spec ps = {.argv = argv, .log_path = log, .log_append = true,
                       .inherit_fds = &ctrl_fd, .inherit_count = 1};
    GT_TRY(gt_proc_spawn(proc, &ps));
    // Ready once both ports take a connection (swtpm treats a connect-and-close as a client gone).
    for (int i = 0; i < 200; i++) {
        if (port_accepts(port + 1) && port_accepts(port)) {
            return GT_OK;
        }
        if (!gt_proc_alive(proc)) {
            return gt_errf(GT_E_RETRY, "swtpm exited at start (log %s)", log);
        }
        usleep(20000);
    }
    gt_proc_stop(proc, 1000);
    return gt_errf(GT_E_TIMEOUT, "swtpm did not listen on ports %d and %d within 4 s (log %s)",
                   port, port + 1, log);
}

gt_err gt_rollback_swtpm_start(const char *state_dir, const char *log, gt_proc *proc, int *port,
                               char *spec, size_t spec_cap)
{
    char exe[4200];
    GT_ENSURE(swtpm_find(exe, sizeof exe), GT_E_NOTFOUND,
              "swtpm is not installed (Debian packages swtpm swtpm-tools; scripts/deps.sh "
              "installs them)");
    GT_TRY(gt_mkdir_p(state_dir, 0700));
    gt_err err = GT_OK;
    for (int attempt = 0; attempt < 5; attempt++) {
        gt_listener *ctrl = NULL;
        GT_TRY(port_pair(port, &ctrl));
        err = swtpm_try(exe, state_dir, log, proc, *port, ctrl);
        gt_listener_close(ctrl);  // swtpm holds its own copy
        if (err.code != GT_E_RETRY) {
            break;
        }
    }
    GT_ENSURE(err.code != GT_E_RETRY, GT_E_PEER, "%s, five times", err.msg);
    GT_TRY(err);
    snprintf(spec, spec_cap, "tpm:swtpm:host=127.0.0.1,port=%d", *port);
    return GT_OK;
}
