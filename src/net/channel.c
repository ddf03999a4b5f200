// Attested TLS 1.3 channels over TCP (OpenSSL). See net.h for the binding and the frame format.
#include <gputravel/net.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define EXPORTER_LABEL "EXPORTER-gputravel-attested-tls"
#define BINDING_TAG "gputravel/tls-binding/v1"
#define FRAME_EVIDENCE 0xfff00001u  // reserved: the evidence exchange right after the handshake
#define FRAME_REFUSED 0xfff00002u   // reserved: why the server refused the client's evidence
#define REFUSED_MAX 512

struct gt_listener {
    int fd;
    int port;
};

struct gt_channel {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    double deadline;      // gt_now_seconds() by which the handshake must be done (0: none)
    uint64_t send_left;  // bytes still owed to a frame begun with gt_channel_send_begin
    uint64_t recv_left;
};

static gt_err ssl_error(const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[160] = "no detail";
    if (e != 0) {
        ERR_error_string_n(e, buf, sizeof buf);
    }
    ERR_clear_error();
    return gt_errf(GT_E_PEER, "tls: %s: %s", what, buf);
}

// ---- addresses ------------------------------------------------------------------------------

static gt_err split_addr(const char *addr, char *host, size_t cap, char *port, size_t pcap)
{
    const char *colon = strrchr(addr, ':');
    GT_ENSURE(colon != NULL && colon != addr && colon[1] != '\0', GT_E_ARG,
              "address '%s': expected HOST:PORT", addr);
    size_t hl = (size_t)(colon - addr);
    GT_ENSURE(hl < cap && strlen(colon + 1) < pcap, GT_E_ARG, "address '%s' too long", addr);
    memcpy(host, addr, hl);
    host[hl] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return GT_OK;
}

static gt_err listener_wrap(gt_listener **out, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    gt_listener *l = calloc(1, sizeof *l);
    if (l == NULL) {
        close(fd);
        return gt_errf(GT_E_NOMEM, "listener: out of memory");
    }
    l->fd = fd;
    l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    *out = l;
    return GT_OK;
}

// "fd:N": a listening TCP socket inherited from the parent, which bound it.
static gt_err listener_adopt(gt_listener **out, const char *addr)
{
    const char *digits = addr + 3;
    char *end = NULL;
    errno = 0;
    long n = strtol(digits, &end, 10);
    GT_ENSURE(digits[0] >= '0' && digits[0] <= '9' && *end == '\0' && errno == 0 && n > 2 &&
                  n < 1 << 20,
              GT_E_ARG, "listen address '%s': fd:N needs a descriptor number above 2", addr);
    int fd = (int)n, type = 0, listening = 0, domain = 0;
    socklen_t len = sizeof type;
    GT_ENSURE(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0, GT_E_ARG,
              "listen address '%s': descriptor %d is not an open socket (%s)", addr, fd,
              strerror(errno));
    len = sizeof listening;
    GT_ENSURE(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
                  listening == 1 && type == SOCK_STREAM,
              GT_E_ARG, "listen address '%s': descriptor %d is not a listening stream socket",
              addr, fd);
    len = sizeof domain;
    GT_ENSURE(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
                  (domain == AF_INET || domain == AF_INET6),
              GT_E_ARG, "listen address '%s': descriptor %d is not a TCP socket", addr, fd);
    // Ours now: no further child inherits it.
    GT_ENSURE(fcntl(fd, F_SETFD, FD_CLOEXEC) == 0, GT_E_IO, "fd %d: %s", fd, strerror(errno));
    return listener_wrap(out, fd);
}

gt_err gt_listener_open(gt_listener **out, const char *addr)
{
    *out = NULL;
    if (strncmp(addr, "fd:", 3) == 0) {
        return listener_adopt(out, addr);
    }
    char host[256], port[16];
    GT_TRY(split_addr(addr, host, sizeof host, port, sizeof port));
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    GT_ENSURE(rc == 0, GT_E_ARG, "address '%s': %s", addr, gai_strerror(rc));
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
        gt_err err = gt_errf(GT_E_IO, "listen on %s: %s", addr, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        freeaddrinfo(res);
        return err;
    }
    freeaddrinfo(res);
    return listener_wrap(out, fd);
}

int gt_listener_port(const gt_listener *l) { return l->port; }

int gt_listener_fd(const gt_listener *l) { return l->fd; }

void gt_listener_close(gt_listener *l)
{
    if (l != NULL) {
        close(l->fd);
        free(l);
    }
}

// ---- TLS setup ------------------------------------------------------------------------------

// An ephemeral P-256 key and a self-signed certificate for it: TLS needs one, trust comes from
// the evidence exchange, not from the certificate.
static gt_err ephemeral_identity(SSL_CTX *ctx)
{
    gt_err err = GT_OK;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    GT_ENSURE_GOTO(err, key != NULL && cert != NULL, out, GT_E_CRYPTO, "tls: key generation");
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               (const unsigned char *)"gputravel ephemeral", -1, -1, 0);
    X509_set_issuer_name(cert, name);
    GT_ENSURE_GOTO(err, X509_set_pubkey(cert, key) == 1 && X509_sign(cert, key, EVP_sha256()) > 0,
                   out, GT_E_CRYPTO, "tls: self-signing failed");
    GT_ENSURE_GOTO(err, SSL_CTX_use_certificate(ctx, cert) == 1 &&
                       SSL_CTX_use_PrivateKey(ctx, key) == 1,
                   out, GT_E_CRYPTO, "tls: cannot install the ephemeral identity");
out:
    X509_free(cert);
    EVP_PKEY_free(key);
    return err;
}

static int accept_any_certificate(int ok, X509_STORE_CTX *store)
{
    (void)ok;
    (void)store;
    return 1;  // the peer is authenticated by its evidence, bound to its certificate key
}

static gt_err channel_new(gt_channel **out, int fd, bool server)
{
    gt_channel *ch = calloc(1, sizeof *ch);
    if (ch == NULL) {
        close(fd);
        return gt_errf(GT_E_NOMEM, "channel: out of memory");
    }
    ch->fd = fd;
    gt_err err = GT_OK;
    ch->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    GT_ENSURE_GOTO(err, ch->ctx != NULL, fail, GT_E_CRYPTO, "tls: context");
    SSL_CTX_set_min_proto_version(ch->ctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(ch->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       accept_any_certificate);
    GT_TRY_GOTO(err, ephemeral_identity(ch->ctx), fail);
    ch->ssl = SSL_new(ch->ctx);
    GT_ENSURE_GOTO(err, ch->ssl != NULL && SSL_set_fd(ch->ssl, fd) == 1, fail, GT_E_CRYPTO,
                   "tls: session");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *out = ch;
    return GT_OK;
fail:
    gt_channel_close(ch);
    return err;
}

static gt_err spki_hash(X509 *cert, uint8_t out[32])
{
    unsigned char *der = NULL;
    int len = i2d_PUBKEY(X509_get0_pubkey(cert), &der);
    GT_ENSURE(len > 0, GT_E_CRYPTO, "tls: cannot encode a certificate key");
    unsigned int n = 0;
    int ok = EVP_Digest(der, (size_t)len, out, &n, EVP_sha256(), NULL);
    OPENSSL_free(der);
    GT_ENSURE(ok == 1 && n == 32, GT_E_CRYPTO, "tls: digest failed");
    return GT_OK;
}

// binding(role) = SHA-512(tag || role || exporter || H(SPKI of role's side) || H(other SPKI)).
static gt_err compute_binding(SSL *ssl, gt_net_role role, bool own, uint8_t out[64])
{
    uint8_t exporter[32], own_h[32], peer_h[32];
    GT_ENSURE(SSL_export_keying_material(ssl, exporter, sizeof exporter, EXPORTER_LABEL,
                                         strlen(EXPORTER_LABEL), NULL, 0, 0) == 1,
              GT_E_CRYPTO, "tls: exporter failed");
    X509 *peer = SSL_get0_peer_certificate(ssl);
    X509 *mine = SSL_get_certificate(ssl);
    GT_ENSURE(peer != NULL && mine != NULL, GT_E_AUTH, "tls: peer presented no certificate");
    GT_TRY(spki_hash(mine, own_h));
    GT_TRY(spki_hash(peer, peer_h));
    uint8_t r = (uint8_t)role;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int n = 0;
    bool ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha512(), NULL) == 1 &&
              EVP_DigestUpdate(md, BINDING_TAG, strlen(BINDING_TAG)) == 1 &&
              EVP_DigestUpdate(md, &r, 1) == 1 &&
              EVP_DigestUpdate(md, exporter, sizeof exporter) == 1 &&
              EVP_DigestUpdate(md, own ? own_h : peer_h, 32) == 1 &&
              EVP_DigestUpdate(md, own ? peer_h : own_h, 32) == 1 &&
              EVP_DigestFinal_ex(md, out, &n) == 1 && n == 64;
    EVP_MD_CTX_free(md);
    OPENSSL_cleanse(exporter, sizeof exporter);
    GT_ENSURE(ok, GT_E_CRYPTO, "tls: binding digest failed");
    return GT_OK;
}

gt_err gt_channel_binding(const gt_channel *ch, gt_net_role role,
                          uint8_t out[GT_NET_BINDING_BYTES])
{
    GT_ENSURE(ch != NULL && ch->ssl != NULL, GT_E_STATE, "tls: no channel");
    // "own" is whether role is this end's: the server's SSL object knows it is the server.
    gt_net_role me = SSL_is_server(ch->ssl) ? GT_NET_ROLE_SERVER : GT_NET_ROLE_CLIENT;
    return compute_binding(ch->ssl, role, role == me, out);
}

static gt_err send_evidence(gt_channel *ch, const gt_net_attestor *att, gt_net_role me)
{
    uint8_t binding[64];
    GT_TRY(compute_binding(ch->ssl, me, true, binding));
    gt_buf ev = {0};
    gt_err err = att->collect(att->ctx, binding, &ev);
    if (gt_is_ok(err)) {
        err = gt_channel_send(ch, FRAME_EVIDENCE, ev.data, ev.len);
    }
    gt_buf_free_nowipe(&ev);
    return gt_err_wrap(err, "sending evidence");
}

static gt_err check_evidence(gt_channel *ch, const gt_net_attestor *att, gt_net_role peer)
{
    uint8_t binding[64];
    GT_TRY(compute_binding(ch->ssl, peer, false, binding));
    uint32_t type = 0;
    gt_buf ev = {0};
    gt_err err = gt_channel_recv(ch, &type, &ev, GT_NET_EVIDENCE_MAX);
    if (gt_is_ok(err) && type == FRAME_REFUSED && peer == GT_NET_ROLE_SERVER) {
        // The server refused our evidence and said why (printable text only, bounded).
        size_t n = ev.len < REFUSED_MAX ? ev.len : REFUSED_MAX;
        for (size_t i = 0; i < n; i++) {
            if (ev.data[i] < 0x20 || ev.data[i] > 0x7e) {
                ev.data[i] = '?';
            }
        }
        err = gt_errf(GT_E_POLICY, "the peer refused our evidence: %.*s", (int)n,
                      (const char *)ev.data);
        gt_buf_free_nowipe(&ev);
        return err;
    }
    if (gt_is_ok(err) && type != FRAME_EVIDENCE) {
        err = gt_errf(GT_E_FORMAT, "expected the peer's evidence, got frame type %u", type);
    }
    if (gt_is_ok(err)) {
        gt_err verdict = att->appraise(att->ctx, ev.data, ev.len, binding);
        if (!gt_is_ok(verdict)) {
            err = gt_errf(GT_E_POLICY, "peer evidence refused: %s", verdict.msg);
        }
    }
    gt_buf_free_nowipe(&ev);
    return err;
}

// Before every socket read or write of a handshake: the socket's timeouts are set to what is
// left of the deadline, so the whole exchange ends by it. A per-read timeout alone does not: a
// peer that trickles one byte just inside it holds the handshake (and its thread) for ever.
static long deadline_bio_callback(BIO *b, int oper, const char *argp, size_t len, int argi,
                                  long argl, int ret, size_t *processed)
{
    (void)argp, (void)len, (void)argi, (void)argl, (void)processed;
    gt_channel *ch = (gt_channel *)BIO_get_callback_arg(b);
    if (ch == NULL || ch->deadline <= 0 || (oper != BIO_CB_READ && oper != BIO_CB_WRITE)) {
        return ret;
    }
    double left = ch->deadline - gt_now_seconds();
    if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;  // the operation is not performed
    }
    long ms = (long)(left * 1000.0) + 1;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (setsockopt(ch->fd, SOL_SOCKET, oper == BIO_CB_READ ? SO_RCVTIMEO : SO_SNDTIMEO, &tv,
                   sizeof tv) != 0) {
        return -1;
    }
    return ret;
}

static void deadline_set(gt_channel *ch, int deadline_ms)
{
    BIO *bio = SSL_get_rbio(ch->ssl);
    ch->deadline = deadline_ms > 0 ? gt_now_seconds() + deadline_ms / 1000.0 : 0;
    BIO_set_callback_arg(bio, ch->deadline > 0 ? (char *)ch : NULL);
    BIO_set_callback_ex(bio, ch->deadline > 0 ? deadline_bio_callback : NULL);
}

// The error of a failed handshake step: the deadline, when that is what ended it.
static gt_err deadline_check(const gt_channel *ch, gt_err err, int deadline_ms)
{
    if (!gt_is_ok(err) && ch->deadline > 0 && gt_now_seconds() >= ch->deadline) {
        ERR_clear_error();
        return gt_errf(GT_E_TIMEOUT, "handshake and evidence exchange not done within %d ms",
                       deadline_ms);
    }
    return err;
}

gt_err gt_listener_accept_fd(gt_listener *l, int timeout_ms, int *fd,
                             char peer[GT_NET_PEER_MAX])
{
    *fd = -1;
    peer[0] = '\0';
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    int rc = poll(&p, 1, timeout_ms);
    GT_ENSURE(rc != 0, GT_E_TIMEOUT, "accept: no connection within %d ms", timeout_ms);
    // A signal (e.g. the SIGTERM that asks a server to stop) is not a failed connection.
    GT_ENSURE(rc > 0 || errno != EINTR, GT_E_TIMEOUT, "accept: interrupted by a signal");
    GT_ENSURE(rc > 0, GT_E_IO, "accept: %s", strerror(errno));
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int got = accept4(l->fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
    // Out of descriptors (a connection flood): a busy server, not a broken one.
    GT_ENSURE(got >= 0 || (errno != EMFILE && errno != ENFILE), GT_E_LIMIT, "accept: %s",
              strerror(errno));
    GT_ENSURE(got >= 0, errno == ECONNABORTED || errno == EAGAIN ? GT_E_TIMEOUT : GT_E_IO,
              "accept: %s", strerror(errno));
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    snprintf(peer, GT_NET_PEER_MAX, sa.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
    *fd = got;
    return GT_OK;
}

gt_err gt_channel_accept_fd(gt_channel **out, int fd, const gt_net_attestor *att,
                            int deadline_ms)
{
    *out = NULL;
    gt_channel *ch = NULL;
    GT_TRY(channel_new(&ch, fd, true));
    gt_err err = GT_OK;
    deadline_set(ch, deadline_ms);
    GT_TRY_GOTO(err, deadline_check(ch, SSL_accept(ch->ssl) == 1 ? GT_OK : ssl_error("handshake"),
                                    deadline_ms),
                fail);
    // The client proves itself first; the server answers only to an accepted client. A refused
    // client learns why (the reason only: no evidence of ours goes to an unaccepted peer).
    err = deadline_check(ch, check_evidence(ch, att, GT_NET_ROLE_CLIENT), deadline_ms);
    if (err.code == GT_E_POLICY) {
        static const char prefix[] = "peer evidence refused: ";
        const char *why = err.msg;
        if (strncmp(why, prefix, sizeof prefix - 1) == 0) {
            why += sizeof prefix - 1;
        }
        size_t n = strlen(why);
        gt_err ignored = gt_channel_send(ch, FRAME_REFUSED, why, n < REFUSED_MAX ? n : REFUSED_MAX);
        (void)ignored;
    }
    GT_TRY_GOTO(err, err, fail);
    GT_TRY_GOTO(err, deadline_check(ch, send_evidence(ch, att, GT_NET_ROLE_SERVER), deadline_ms),
                fail);
    deadline_set(ch, 0);
    GT_TRY_GOTO(err, gt_channel_set_timeout(ch, 0), fail);
    *out = ch;
    return GT_OK;
fail:
    gt_channel_close(ch);
    return err;
}

gt_err gt_listener_accept(gt_listener *l, const gt_net_attestor *att, int timeout_ms,
                          gt_channel **out)
{
    *out = NULL;
    int fd = -1;
    char peer[GT_NET_PEER_MAX];
    GT_TRY(gt_listener_accept_fd(l, timeout_ms, &fd, peer));
    // The wait for a connection (timeout_ms, often short, for a server that polls a stop flag)
    // is one thing; the handshake gets its own deadline: collecting and appraising evidence can
    // take seconds.
    return gt_err_wrap(gt_channel_accept_fd(out, fd, att, GT_NET_HANDSHAKE_DEADLINE_MS), "%s",
                       peer);
}

gt_err gt_channel_connect(gt_channel **out, const char *addr, const gt_net_attestor *att)
{
    *out = NULL;
    char host[256], port[16];
    GT_TRY(split_addr(addr, host, sizeof host, port, sizeof port));
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    GT_ENSURE(rc == 0, GT_E_ARG, "address '%s': %s", addr, gai_strerror(rc));
    int fd = -1;
    for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    int saved = errno;
    freeaddrinfo(res);
    GT_ENSURE(fd >= 0, GT_E_PEER, "connect %s: %s", addr, strerror(saved));
    gt_channel *ch = NULL;
    GT_TRY(channel_new(&ch, fd, false));
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_channel_set_timeout(ch, 30000), fail);
    GT_ENSURE_GOTO(err, SSL_connect(ch->ssl) == 1, fail, GT_E_PEER, "%s",
                   ssl_error("handshake").msg);
    GT_TRY_GOTO(err, send_evidence(ch, att, GT_NET_ROLE_CLIENT), fail);
    GT_TRY_GOTO(err, check_evidence(ch, att, GT_NET_ROLE_SERVER), fail);
    GT_TRY_GOTO(err, gt_channel_set_timeout(ch, 0), fail);
    *out = ch;
    return GT_OK;
fail:
    gt_channel_close(ch);
    return gt_err_wrap(err, "%s", addr);
}

gt_err gt_channel_set_timeout(gt_channel *ch, int timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    GT_ENSURE(setsockopt(ch->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
                  setsockopt(ch->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0,
              GT_E_IO, "channel: setsockopt: %s", strerror(errno));
    return GT_OK;
}

int gt_channel_fd(const gt_channel *ch)
{
    return ch->fd;
}

void gt_channel_close(gt_channel *ch)
{
    if (ch == NULL) {
        return;
    }
    if (ch->ssl != NULL) {
        SSL_shutdown(ch->ssl);
        SSL_free(ch->ssl);
    }
    SSL_CTX_free(ch->ctx);
    if (ch->fd >= 0) {
        close(ch->fd);
    }
    free(ch);
}

// ---- frames ---------------------------------------------------------------------------------

static gt_err write_raw(gt_channel *ch, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        size_t written = 0;
        if (SSL_write_ex(ch->ssl, p, chunk, &written) != 1) {
            return ssl_error("send failed (peer gone?)");
        }
        p += written;
        len -= written;
    }
    return GT_OK;
}

static gt_err read_raw(gt_channel *ch, void *data, size_t len)
{
    uint8_t *p = data;
    while (len > 0) {
        size_t got = 0;
        if (SSL_read_ex(ch->ssl, p, len, &got) != 1) {
            int e = SSL_get_error(ch->ssl, 0);
            if (e == SSL_ERROR_ZERO_RETURN) {
                return gt_errf(GT_E_PEER, "channel closed by the peer");
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                ERR_clear_error();
                return gt_errf(GT_E_TIMEOUT, "channel: receive timed out");
            }
            return ssl_error("receive failed (peer gone?)");
        }
        p += got;
        len -= got;
    }
    return GT_OK;
}

gt_err gt_channel_send_begin(gt_channel *ch, uint32_t type, uint64_t len)
{
    GT_ENSURE(ch->send_left == 0, GT_E_STATE, "channel: previous frame not finished");
    uint8_t hdr[GT_NET_FRAME_HEADER_BYTES];
    gt_store_u32be(hdr, type);
    gt_store_u64be(hdr + 4, len);
    GT_TRY(write_raw(ch, hdr, sizeof hdr));
    ch->send_left = len;
    return GT_OK;
}

gt_err gt_channel_write(gt_channel *ch, const void *data, size_t len)
{
    GT_ENSURE(len <= ch->send_left, GT_E_STATE, "channel: %zu bytes beyond the frame's length",
              len);
    GT_TRY(write_raw(ch, data, len));
    ch->send_left -= len;
    return GT_OK;
}

gt_err gt_channel_send(gt_channel *ch, uint32_t type, const void *data, size_t len)
{
    GT_TRY(gt_channel_send_begin(ch, type, len));
    return gt_channel_write(ch, data, len);
}

gt_err gt_net_frame_header_parse(gt_reader *r, uint32_t *type, uint64_t *len)
{
    uint32_t t = 0;
    uint64_t n = 0;
    GT_TRY(gt_reader_u32be(r, &t));
    GT_TRY(gt_reader_u64be(r, &n));
    *type = t;
    *len = n;
    return GT_OK;
}

gt_err gt_channel_recv_begin(gt_channel *ch, uint32_t *type, uint64_t *len)
{
    GT_ENSURE(ch->recv_left == 0, GT_E_STATE, "channel: previous frame not fully read");
    uint8_t hdr[GT_NET_FRAME_HEADER_BYTES];
    GT_TRY(read_raw(ch, hdr, sizeof hdr));
    gt_reader r = gt_reader_init(hdr, sizeof hdr);
    GT_TRY(gt_net_frame_header_parse(&r, type, len));
    ch->recv_left = *len;
    return GT_OK;
}

gt_err gt_channel_read(gt_channel *ch, void *data, size_t len)
{
    GT_ENSURE(len <= ch->recv_left, GT_E_STATE, "channel: read past the frame's end");
    GT_TRY(read_raw(ch, data, len));
    ch->recv_left -= len;
    return GT_OK;
}

gt_err gt_channel_recv(gt_channel *ch, uint32_t *type, gt_buf *data, size_t max_len)
{
    uint64_t len = 0;
    GT_TRY(gt_channel_recv_begin(ch, type, &len));
    // An oversized frame cannot be skipped safely without reading it: end the channel.
    GT_ENSURE(len <= max_len, GT_E_LIMIT, "channel: frame of %llu bytes exceeds the limit %zu",
              (unsigned long long)len, max_len);
    data->len = 0;
    GT_TRY(gt_buf_reserve(data, (size_t)len));
    GT_TRY(gt_channel_read(ch, data->data, (size_t)len));
    data->len = (size_t)len;
    return GT_OK;
}
