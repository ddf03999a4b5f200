// Fuzz target: every parser of the sim device protocol (devproto.h) and the device evidence
// bundle. The first byte picks the parser; the rest is its input. A parser may fail, never crash,
// and what parses must re-serialise to the same bytes.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gputravel/devproto.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    gt_span in = {data + 1, size - 1};
    switch (data[0] % 6) {
    case 0: {
        gt_sim_msg m;
        if (gt_is_ok(gt_sim_msg_parse(in, &m))) {
            uint8_t buf[GT_SIM_MAX_REC_PLAIN + GT_SIM_MAX_STATUS_MSG + 16];
            gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
            if (!gt_is_ok(gt_sim_msg_write(&w, &m)) || w.len != in.len) {
                abort();
            }
            // STATUS text is sanitised on the way in; everything else round-trips exactly
            if (m.type != GT_SIM_REP_STATUS && memcmp(buf, in.data, in.len) != 0) {
                abort();
            }
        }
        break;
    }
    case 1: {
        gt_sim_client_hello h;
        if (gt_is_ok(gt_sim_client_hello_parse(in, &h))) {
            gt_writer w = gt_writer_init_dynamic();
            if (!gt_is_ok(gt_sim_client_hello_write(&w, &h)) || w.len != in.len ||
                memcmp(w.data, in.data, in.len) != 0) {
                abort();
            }
            gt_writer_free(&w);
        }
        break;
    }
    case 2: {
        gt_sim_server_hello h;
        if (gt_is_ok(gt_sim_server_hello_parse(in, &h))) {
            gt_writer w = gt_writer_init_dynamic();
            if (!gt_is_ok(gt_sim_server_hello_write(&w, &h)) || w.len != in.len) {
                abort();
            }
            gt_writer_free(&w);
        }
        break;
    }
    case 3: {
        gt_sim_status s;
        gt_err e = gt_sim_refuse_parse(in, &s);
        (void)e;
        break;
    }
    case 4: {
        gt_sim_device_bundle b;
        gt_err e = gt_sim_device_bundle_parse(in, &b);
        (void)e;
        break;
    }
    default: {  // a record under fixed keys: must fail unless authentic
        gt_sim_keys k;
        memset(&k, 0, sizeof k);
        k.is_client = false;
        uint8_t plain[256];
        size_t n = 0;
        if (gt_is_ok(gt_sim_record_open(&k, plain, sizeof plain, &n, in))) {
            gt_sim_msg m;
            gt_err e = gt_sim_msg_parse((gt_span){plain, n}, &m);
            (void)e;
        }
        break;
    }
    }
    return 0;
}
