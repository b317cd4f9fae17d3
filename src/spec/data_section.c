/* data_section.c — the spec's data: section: settings of the data the net
 * is fed, documented in man/vdnn-net.5 (DATA SETTINGS). One key so far,
 * normalize: { mean: M, std: S }, each a number or a list of one number
 * per input channel, read into net->norm (one value per channel). */
#include <string.h>
#include "spec/spec_internal.h"

/* mean or std (key) of normalize n: a number, or a list of 1 or C numbers,
 * each in the range; into out[C] (a single value for every channel). */
static int norm_values(sp *s, yd_node *n, const char *key, double lo, bool lo_open,
                       const char *range, int C, float *out) {
    int cnt = n->type == YD_SEQ ? (int)n->n : 1;
    if (n->type != YD_SEQ && n->type != YD_SCALAR)
        return vds_err_at(s, mk(n), "'%s' must be a number or a list of numbers", key);
    if (cnt != 1 && cnt != C)
        return vds_err_at(s, mk(n), "'%s' has %d values; give one, or one per input channel (%d)",
                          key, cnt, C);
    for (int i = 0; i < cnt; i++) {
        double d;
        int rc = vds_get_float(s, NULL, n->type == YD_SEQ ? ITEM(n, i) : n, key, lo, lo_open,
                               1e30, false, range, &d);
        if (rc) return rc;
        out[i] = (float)d;
    }
    for (int c = cnt; c < C; c++) out[c] = out[0];
    return VD_OK;
}

static int parse_normalize(sp *s, yd_node *n) {
    static const char *const keys[] = {"mean", "std"};
    yd_node *v[2];
    int rc = vds_map_keys(s, n, "'normalize'", keys, 2, NULL, NULL, v);
    if (rc) return rc;
    for (int k = 0; k < 2; k++)
        if (!v[k]) return vds_err_at(s, mk(n), "missing key '%s' in 'normalize'", keys[k]);
    vd_net *net = s->net;
    int C = net->in_c;
    if (C > VD_NORM_MAX_CHANNELS)
        return vds_err_at(s, mk(n), "'normalize' applies to images of 1 to %d channels; the "
                          "input has %d", VD_NORM_MAX_CHANNELS, C);
    if ((rc = norm_values(s, v[0], "mean", -1e30, false, "a number", C, net->norm.mean)) ||
        (rc = norm_values(s, v[1], "std", 0, true, "positive", C, net->norm.std)))
        return rc;
    net->norm.n = C;
    return VD_OK;
}

int vds_parse_data(sp *s, yd_node *n) {
    static const char *const keys[] = {"normalize"};
    yd_node *v[1];
    int rc = vds_map_keys(s, n, "'data'", keys, 1, NULL, NULL, v);
    if (rc) return rc;
    if (v[0] && (rc = parse_normalize(s, v[0]))) return rc;
    return VD_OK;
}
