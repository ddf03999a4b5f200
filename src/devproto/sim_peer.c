// The PEER_* records of the sim protocol (devproto.h; docs/device-sim.md "Peers"): fixed layouts,
// read only through gt_reader. The hello and the sealed chunk themselves travel in device buffers
// (copy_in / copy_out through the AEAD bounce slots), never in a record.
#include <gputravel/devproto.h>

#include <string.h>

bool gt_sim_peer_type(uint16_t type)
{
    switch (type) {
    case GT_SIM_REQ_PEER_HELLO:
    case GT_SIM_REQ_PEER_ADMIT:
    case GT_SIM_REQ_PEER_RUN_ID:
    case GT_SIM_REQ_PEER_SEAL:
    case GT_SIM_REQ_PEER_OPEN:
    case GT_SIM_REP_PEER_RUN:
        return true;
    default:
        return false;
    }
}

static gt_err hdr_write(gt_writer *w, const gt_sim_peer *p)
{
    GT_TRY(gt_writer_bytes(w, p->run, sizeof p->run));
    GT_TRY(gt_writer_u64le(w, p->step));
    GT_TRY(gt_writer_u32le(w, p->bucket));
    GT_TRY(gt_writer_u32le(w, p->hop));
    GT_TRY(gt_writer_u32le(w, p->src));
    GT_TRY(gt_writer_u32le(w, p->dst));
    GT_TRY(gt_writer_u64le(w, p->elem_off));
    return gt_writer_u64le(w, p->nelem);
}

static gt_err hdr_parse(gt_reader *r, gt_sim_peer *p)
{
    GT_TRY(gt_reader_bytes(r, p->run, sizeof p->run));
    GT_TRY(gt_reader_u64le(r, &p->step));
    GT_TRY(gt_reader_u32le(r, &p->bucket));
    GT_TRY(gt_reader_u32le(r, &p->hop));
    GT_TRY(gt_reader_u32le(r, &p->src));
    GT_TRY(gt_reader_u32le(r, &p->dst));
    GT_TRY(gt_reader_u64le(r, &p->elem_off));
    return gt_reader_u64le(r, &p->nelem);
}

gt_err gt_sim_peer_msg_write(gt_writer *w, const gt_sim_msg *m)
{
    const gt_sim_peer *p = &m->peer;
    switch (m->type) {
    case GT_SIM_REQ_PEER_HELLO:
        GT_TRY(gt_writer_u32le(w, p->rank));
        return gt_writer_u32le(w, p->nranks);
    case GT_SIM_REQ_PEER_ADMIT:
        GT_TRY(gt_writer_u32le(w, p->rank));
        GT_TRY(gt_writer_u64le(w, m->handle));
        return gt_writer_u64le(w, m->len);
    case GT_SIM_REQ_PEER_RUN_ID:
        return GT_OK;
    case GT_SIM_REP_PEER_RUN:
        return gt_writer_bytes(w, p->run, sizeof p->run);
    case GT_SIM_REQ_PEER_SEAL:
        GT_TRY(hdr_write(w, p));
        return gt_writer_u64le(w, m->handle);
    case GT_SIM_REQ_PEER_OPEN:
        GT_TRY(hdr_write(w, p));
        GT_TRY(gt_writer_u64le(w, m->handle));
        GT_TRY(gt_writer_u32le(w, p->mode));
        GT_TRY(gt_writer_u64le(w, p->chunk));
        return gt_writer_u64le(w, p->chunk_len);
    default:
        return gt_errf(GT_E_ARG, "sim: 0x%04x is no peer message", m->type);
    }
}

gt_err gt_sim_peer_msg_parse(gt_reader *r, gt_sim_msg *m)
{
    gt_sim_peer *p = &m->peer;
    switch (m->type) {
    case GT_SIM_REQ_PEER_HELLO:
        GT_TRY(gt_reader_u32le(r, &p->rank));
        return gt_reader_u32le(r, &p->nranks);
    case GT_SIM_REQ_PEER_ADMIT:
        GT_TRY(gt_reader_u32le(r, &p->rank));
        GT_TRY(gt_reader_u64le(r, &m->handle));
        return gt_reader_u64le(r, &m->len);
    case GT_SIM_REQ_PEER_RUN_ID:
        return GT_OK;
    case GT_SIM_REP_PEER_RUN:
        return gt_reader_bytes(r, p->run, sizeof p->run);
    case GT_SIM_REQ_PEER_SEAL:
        GT_TRY(hdr_parse(r, p));
        return gt_reader_u64le(r, &m->handle);
    case GT_SIM_REQ_PEER_OPEN:
        GT_TRY(hdr_parse(r, p));
        GT_TRY(gt_reader_u64le(r, &m->handle));
        GT_TRY(gt_reader_u32le(r, &p->mode));
        GT_TRY(gt_reader_u64le(r, &p->chunk));
        GT_TRY(gt_reader_u64le(r, &p->chunk_len));
        GT_ENSURE(p->mode == 1 || p->mode == 2, GT_E_FORMAT, "peer_open: mode %u", p->mode);
        return GT_OK;
    default:
        return gt_errf(GT_E_FORMAT, "sim: unknown message type 0x%04x", m->type);
    }
}
