// gputravel/net.h: attested TLS 1.3 channels with message framing.
//
// Certificates are ephemeral and self-signed: TLS gives confidentiality and integrity, and each
// side proves who it is with TEE evidence bound to this very TLS session. Right after the
// handshake both sides derive the same 64-byte binding from the TLS exporter
// (RFC 8446 §7.5, label "EXPORTER-gputravel-attested-tls") and the two certificates' public keys,
// hand it to their attestor to produce evidence, exchange the evidence, and appraise the peer's
// against the binding computed from the peer's side. Evidence replayed from another session, or
// relayed by a man in the middle (who must terminate TLS with its own key), does not match.
//
// Frames: u32be type | u64be length | payload. A receiver names its limit; a larger frame ends
// the channel. Every frame is parsed through gt_reader.
//
// The process must ignore SIGPIPE (the CLI's main does): a peer that disconnects mid-write then
// shows up as a GT_E_PEER error instead of killing the process.
#ifndef GPUTRAVEL_NET_H
#define GPUTRAVEL_NET_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>

#define GT_NET_BINDING_BYTES 64
#define GT_NET_FRAME_HEADER_BYTES 12
#define GT_NET_EVIDENCE_MAX (1u << 20)

typedef enum { GT_NET_ROLE_CLIENT = 0, GT_NET_ROLE_SERVER = 1 } gt_net_role;

// The binding both sides compute for the evidence of `role`:
//   SHA-512("gputravel/tls-binding/v1" || role || exporter(32) || SHA-256(own SPKI) ||
//           SHA-256(peer SPKI))  with "own" = the side whose evidence it is.
// Attestors put it in their evidence's report_data (directly or hashed with more context).
typedef struct {
    // Produces our evidence for the binding. Writes into ev (caller frees).
    gt_err (*collect)(void *ctx, const uint8_t binding[GT_NET_BINDING_BYTES], gt_buf *ev);
    // Appraises the peer's evidence against the binding expected for the peer. Returns GT_OK to
    // accept; any error refuses, and its message is sent to the log (not to the peer).
    gt_err (*appraise)(void *ctx, const uint8_t *ev, size_t ev_len,
                       const uint8_t binding[GT_NET_BINDING_BYTES]);
    void *ctx;
} gt_net_attestor;

typedef struct gt_channel gt_channel;    // opaque
typedef struct gt_listener gt_listener;  // opaque

// addr: "HOST:PORT" (numeric or name; port 0 picks a free port, see gt_listener_port), or
// "fd:N": serve on descriptor N, a listening TCP socket this process inherited (its parent bound
// it, so the port never stood free between choosing it and serving on it).
GT_MUST_USE gt_err gt_listener_open(gt_listener **l, const char *addr);
int gt_listener_port(const gt_listener *l);
// The listening socket, to hand to a child process that serves on it as "fd:N".
int gt_listener_fd(const gt_listener *l);
// Accepts one connection and runs the TLS handshake and the evidence exchange. timeout_ms < 0
// waits forever. GT_E_TIMEOUT when no connection came in time or a signal interrupted the wait.
GT_MUST_USE gt_err gt_listener_accept(gt_listener *l, const gt_net_attestor *att, int timeout_ms,
                                      gt_channel **ch);
// The two halves of gt_listener_accept, for a server that handshakes on worker threads.
// accept_fd takes one TCP connection off the queue (no handshake) and names the peer
// "HOST:PORT" (for logs and per-address limits; not authenticated). GT_E_TIMEOUT as above;
// GT_E_LIMIT when the process is out of descriptors.
#define GT_NET_PEER_MAX 64
#define GT_NET_HANDSHAKE_DEADLINE_MS 30000  // gt_listener_accept's deadline
GT_MUST_USE gt_err gt_listener_accept_fd(gt_listener *l, int timeout_ms, int *fd,
                                         char peer[GT_NET_PEER_MAX]);
// Runs the TLS handshake and the evidence exchange on fd (taken over: closed on failure) as the
// server, all of it within deadline_ms (<= 0: no deadline; a stalled peer then waits on the
// socket's timeouts, none by default). GT_E_TIMEOUT when the deadline ended it.
GT_MUST_USE gt_err gt_channel_accept_fd(gt_channel **ch, int fd, const gt_net_attestor *att,
                                        int deadline_ms);
void gt_listener_close(gt_listener *l);

GT_MUST_USE gt_err gt_channel_connect(gt_channel **ch, const char *addr,
                                      const gt_net_attestor *att);
GT_MUST_USE gt_err gt_channel_send(gt_channel *ch, uint32_t type, const void *data, size_t len);
// Streams one frame whose payload arrives in pieces: begin with the total length, then write
// exactly that many bytes.
GT_MUST_USE gt_err gt_channel_send_begin(gt_channel *ch, uint32_t type, uint64_t len);
GT_MUST_USE gt_err gt_channel_write(gt_channel *ch, const void *data, size_t len);
// Receives a whole frame of at most max_len bytes into data (replacing its contents).
GT_MUST_USE gt_err gt_channel_recv(gt_channel *ch, uint32_t *type, gt_buf *data, size_t max_len);
// Receives a frame header only; the payload is then read with gt_channel_read (exactly len).
GT_MUST_USE gt_err gt_channel_recv_begin(gt_channel *ch, uint32_t *type, uint64_t *len);
GT_MUST_USE gt_err gt_channel_read(gt_channel *ch, void *data, size_t len);
// Parses one frame header (the peer's bytes) from r. The caller still owns the length check
// against its own limit: a header says nothing about what the receiver will accept.
GT_MUST_USE gt_err gt_net_frame_header_parse(gt_reader *r, uint32_t *type, uint64_t *len);
// Sets a receive/send timeout in milliseconds for the underlying socket (0: none).
GT_MUST_USE gt_err gt_channel_set_timeout(gt_channel *ch, int timeout_ms);
// The socket under the channel, to poll() for "the peer sent something or left" while waiting on
// something else (e.g. a trip the peer should attach to). Read nothing from it directly; bytes
// OpenSSL already buffered are not seen by poll().
int gt_channel_fd(const gt_channel *ch);
// The binding of this channel for the evidence of `role` (the value above): both ends compute
// the same bytes, no other TLS session has them. For messages that must be tied to this very
// connection after the handshake (e.g. an enclave quote sent inside it).
GT_MUST_USE gt_err gt_channel_binding(const gt_channel *ch, gt_net_role role,
                                      uint8_t out[GT_NET_BINDING_BYTES]);
void gt_channel_close(gt_channel *ch);

#endif
