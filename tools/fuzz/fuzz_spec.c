/* fuzz_spec.c — libFuzzer target: arbitrary bytes -> vd_spec_parse ->
 * vd_net_finalize -> vd_summary_write. Must never crash, hang or leak, and
 * must keep its contracts: an error always has a "fuzz.yaml:LINE:COL: "
 * message, a success always yields a consistent, finalized net.
 *
 * Build: see tools/fuzz/meson.build (-Dfuzz=true, clang). Run:
 *   ./fuzz_spec -max_len=4096 -timeout=5 CORPUS_DIR tools/fuzz/corpus */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spec/spec.h"
#include "spec/summary.h"

static void check(int cond, const char *what, const vd_err *e) {
    if (!cond) {
        fprintf(stderr, "fuzz_spec: contract broken: %s (%s)\n", what, e ? e->msg : "");
        abort();
    }
}

/* "fuzz.yaml:" LINE ":" COL ": " with LINE, COL >= 1 */
static int well_formed(const char *m) {
    if (strncmp(m, "fuzz.yaml:", 10)) return 0;
    m += 10;
    for (int part = 0; part < 2; part++) {
        if (*m < '1' || *m > '9') return 0;
        while (*m >= '0' && *m <= '9') m++;
        if (*m++ != ':') return 0;
    }
    return *m == ' ';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vd_net net;
    vd_err e;
    memset(&e, 0, sizeof e);
    vd_net_init(&net);
    int rc = vd_spec_parse((const char *)data, size, "fuzz.yaml", &net, &e);
    if (rc) {
        check(rc == VD_ESPEC || rc == VD_ENOMEM, "unexpected error code", &e);
        check(e.code == rc, "e.code differs from the return value", &e);
        if (rc == VD_ESPEC) check(well_formed(e.msg), "message is not FILE:LINE:COL: ...", &e);
    } else {
        check(net.n_layers > 0 && net.n_layers <= VD_SPEC_MAX_LAYERS, "layer count", &e);
        for (int i = 0; i < net.n_layers; i++) {
            const vd_layer *l = &net.layers[i];
            check(l->line >= 1 && l->col >= 1, "layer without a location", &e);
            check(l->n_in >= 1 && l->n_in <= VD_MAX_INPUTS, "input count", &e);
            for (int k = 0; k < l->n_in; k++) check(l->in[k] >= -1 && l->in[k] < i, "input order", &e);
            check(l->c > 0 && l->h > 0 && l->w > 0, "empty shape", &e);
        }
        check(vd_net_finalize(&net, &e) == 0, "finalize is not idempotent", &e);
        FILE *f = fopen("/dev/null", "w");
        if (f) {
            check(vd_summary_write(f, &net, net.train.batch, (size & 1) != 0, &e) == 0, "summary failed", &e);
            fclose(f);
        }
    }
    vd_net_free(&net);
    return 0;
}
