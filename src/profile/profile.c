/* profile.c — per-layer timings and workspaces: analytic model, JSON
 * load/save. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile/profile.h"
#include "util/json.h"

/* ---- Cards --------------------------------------------------------------
 *
 * One table of published figures; every card's vd_device_params follow from
 * them by one rule, calibrated on the H200 (SXM, 141 GB HBM3e), whose
 * parameters it reproduces exactly:
 *
 *   peak_flops       fp32 peak x 60/67: the H200's 67e12 fp32 peak gives the
 *                    60e12 that cuDNN's fp32 convolutions sustain
 *                    (Winograd/FFT algorithms beat direct-convolution FLOP
 *                    counts, so this is an "effective" rate)
 *   peak_flops_bf16, _fp16, _tf32
 *                    tensor-core peak x 200/989.5: the H200's dense bf16
 *                    peak (989.5e12) gives the 200e12 that cuDNN's VGG/ResNet
 *                    convolutions sustain (PyTorch autocast VGG-16 b256: 0.071 s
 *                    for ~12 TFLOP of fwd+bwd, ~170e12 FLOP/s); never below
 *                    peak_flops (cuDNN may still pick an fp32-rate engine);
 *                    0 where the card has none of that kind (tf32 then runs
 *                    at peak_flops; bf16 is refused: vd_config_resolve)
 *   mem_bw           as published (H200: 4.8e12)
 *   d2h_bw, h2d_bw   lanes x the pinned-copy rate per lane of the PCIe
 *                    generation: gen5 55e9/16 (the H200's x16 measured 55e9
 *                    each way), gen4 1.56e9 (~25 GB/s x16), gen3 0.78e9
 *                    (~12.5 GB/s x16): ~87% and ~79% of the link's raw rate
 *   both_bw          one way x 99/55 (the H200: 99e9 both ways at once)
 *   allreduce_bw     NVLink (both ways, published) x 300/900: the H200's
 *                    900e9 NVLink gives the 300e9 bus bandwidth nccl-tests
 *                    reach on 25 MiB buckets (roughly 350-450e9 on large
 *                    ones); a card without NVLink all-reduces over PCIe at
 *                    its one-way copy rate; 20 us a call
 *   launch_s         5 us per op
 *   mem_bytes        mem_gib GiB
 *
 * A measured value (vdnn-train --profile-out on the card) replaces all of
 * these. Each row: name, product, published GB, GiB offered, memory
 * bytes/s, dense peak FLOP/s fp32, tf32, fp16, bf16 (tensor kinds with fp32
 * accumulation; 0 = none), PCIe generation, lanes, NVLink bytes/s, source.
 * The GeForce rows' tensor rates (fp32 accumulation is half the fp16
 * accumulation rate on GeForce) are the whitepapers' per-SM rates at the
 * card's SM count and boost clock where NVIDIA publishes no card figure. */
#define REF_FP32_PEAK 67e12         /* H200 fp32 peak ... */
#define REF_FP32_EFF 60e12          /* ... and what the model sustains */
#define REF_TC_PEAK 989.5e12        /* H200 dense bf16 tensor peak ... */
#define REF_TC_EFF 200e12           /* ... and what the model sustains */
#define REF_PCIE_ONE 55e9           /* H200 PCIe 5 x16 pinned, one way ... */
#define REF_PCIE_BOTH 99e9          /* ... and both ways at once */
#define REF_NVLINK 900e9            /* H200 NVLink (both ways) ... */
#define REF_ALLREDUCE 300e9         /* ... and the all-reduce bus bandwidth */
#define PCIE_LANE(gen) ((gen) >= 5 ? REF_PCIE_ONE / 16 : (gen) == 4 ? 1.56e9 : 0.78e9)
#define EFF_FP32(fp32) ((fp32) / REF_FP32_PEAK * REF_FP32_EFF)
#define EFF_TC(tc, fp32) ((tc) <= 0 ? 0.0 : (tc) / REF_TC_PEAK * REF_TC_EFF > EFF_FP32(fp32) \
                          ? (tc) / REF_TC_PEAK * REF_TC_EFF : EFF_FP32(fp32))
#define ONE_WAY(gen, lanes) ((lanes) * PCIE_LANE(gen))
#define CARD_DEV(nm_, gib_, bw_, f32_, t32_, f16_, b16_, gen_, lanes_, nvl_)                  \
    { .name = nm_, .peak_flops = EFF_FP32(f32_), .peak_flops_bf16 = EFF_TC(b16_, f32_),       \
      .peak_flops_fp16 = EFF_TC(f16_, f32_), .peak_flops_tf32 = EFF_TC(t32_, f32_),           \
      .mem_bw = (bw_), .d2h_bw = ONE_WAY(gen_, lanes_), .h2d_bw = ONE_WAY(gen_, lanes_),      \
      .both_bw = ONE_WAY(gen_, lanes_) / REF_PCIE_ONE * REF_PCIE_BOTH, .launch_s = 5e-6,      \
      .mem_bytes = (uint64_t)((gib_) * 1073741824.0),                                         \
      .allreduce_bw = (nvl_) > 0 ? (nvl_) / REF_NVLINK * REF_ALLREDUCE : ONE_WAY(gen_, lanes_), \
      .allreduce_lat_s = 20e-6 }
#define CARD_(nm_, prod_, gb_, gib_, bw_, f32_, t32_, f16_, b16_, gen_, lanes_, nvl_, src_)    \
    { .name = nm_, .product = prod_, .mem_gb = gb_, .mem_gib = gib_, .mem_bw = bw_,           \
      .fp32 = f32_, .tf32 = t32_, .fp16 = f16_, .bf16 = b16_, .pcie_gen = gen_,               \
      .pcie_lanes = lanes_, .nvlink_bw = nvl_, .source = src_,                                \
      .dev = CARD_DEV(nm_, gib_, bw_, f32_, t32_, f16_, b16_, gen_, lanes_, nvl_) }
#define CARD(...) CARD_(__VA_ARGS__)
/* The H200's row: the table's and vd_device_h200's. */
#define H200_ROW "h200", "NVIDIA H200 SXM 141GB", 141, 140, 4.8e12, 67e12, 494.5e12, 989.5e12, \
    989.5e12, 5, 16, 900e9, "NVIDIA H200 datasheet (the calibration: 140 GiB by the driver)"

const vd_card vd_cards[] = {
    CARD("t4", "NVIDIA T4", 16, 15, 320e9, 8.1e12, 0, 65e12, 0, 3, 16, 0,
         "NVIDIA T4 datasheet"),
    CARD("l4", "NVIDIA L4", 24, 22.5, 300e9, 30.3e12, 60e12, 121e12, 121e12, 4, 16, 0,
         "NVIDIA L4 datasheet"),
    CARD("a10", "NVIDIA A10", 24, 22.5, 600e9, 31.2e12, 62.5e12, 125e12, 125e12, 4, 16, 0,
         "NVIDIA A10 datasheet"),
    CARD("a100-40g", "NVIDIA A100 SXM4 40GB", 40, 40, 1555e9, 19.5e12, 156e12, 312e12, 312e12,
         4, 16, 600e9, "NVIDIA A100 datasheet"),
    CARD("a100-80g", "NVIDIA A100 SXM4 80GB", 80, 80, 2039e9, 19.5e12, 156e12, 312e12, 312e12,
         4, 16, 600e9, "NVIDIA A100 datasheet"),
    CARD("rtx3060", "NVIDIA GeForce RTX 3060 12GB", 12, 12, 360e9, 12.74e12, 12.74e12, 25.5e12,
         25.5e12, 4, 16, 0,
         "NVIDIA Ampere GA102 whitepaper per-SM rates; GA106: 28 SMs at 1.777 GHz"),
    CARD("rtx4060", "NVIDIA GeForce RTX 4060 8GB", 8, 8, 272e9, 15.11e12, 15.11e12, 30.2e12,
         30.2e12, 4, 8, 0,
         "NVIDIA Ada whitepaper per-SM rates; AD107: 24 SMs at 2.46 GHz"),
    CARD("rtx3090", "NVIDIA GeForce RTX 3090", 24, 24, 936e9, 35.6e12, 35.6e12, 71e12, 71e12, 4,
         16, 0, "NVIDIA Ampere GA102 GPU architecture whitepaper"),
    CARD("rtx4090", "NVIDIA GeForce RTX 4090", 24, 24, 1008e9, 82.6e12, 82.6e12, 165.2e12,
         165.2e12, 4, 16, 0, "NVIDIA Ada Lovelace GPU architecture whitepaper"),
    CARD("h100-pcie", "NVIDIA H100 PCIe 80GB", 80, 79.5, 2.0e12, 51e12, 378e12, 756e12, 756e12,
         5, 16, 0, "NVIDIA H100 datasheet"),
    CARD("h100-sxm", "NVIDIA H100 SXM5 80GB", 80, 79.5, 3.35e12, 67e12, 494.5e12, 989.5e12,
         989.5e12, 5, 16, 900e9, "NVIDIA H100 datasheet"),
    CARD(H200_ROW),
    CARD("b200", "NVIDIA B200 (HGX, 1000 W)", 180, 179, 8e12, 75e12, 1.125e15, 2.25e15, 2.25e15,
         5, 16, 1.8e12, "NVIDIA HGX B200 datasheet (an eighth of the board; PCIe 5 hosts)"),
};
const int vd_n_cards = (int)(sizeof vd_cards / sizeof vd_cards[0]);

#define ROW_DEV_(nm_, prod_, gb_, gib_, bw_, f32_, t32_, f16_, b16_, gen_, lanes_, nvl_, src_) \
    CARD_DEV(nm_, gib_, bw_, f32_, t32_, f16_, b16_, gen_, lanes_, nvl_)
#define ROW_DEV(...) ROW_DEV_(__VA_ARGS__)
/* the same parameters as vd_card_find("h200")->dev */
const vd_device_params vd_device_h200 = ROW_DEV(H200_ROW);

/* Two CPU cores with plain C loops / OpenBLAS: ~20 GFLOP/s sustained, ~10
 * GB/s memory bandwidth; "copies" are memcpy at the same bandwidth. Not a
 * card: no published figures to derive it from. */
const vd_device_params vd_device_cpu = {
    .name = "cpu", .peak_flops = 20e9, .mem_bw = 10e9,
    .d2h_bw = 10e9, .h2d_bw = 10e9, .both_bw = 12e9, .launch_s = 1e-6,
    .mem_bytes = 0,
    /* the CPU stand-in of the all-reduce (threads summing in memory at
     * about half the memory bandwidth), a barrier's 5 us per call */
    .allreduce_bw = 5e9, .allreduce_lat_s = 5e-6,
};

void vd_device_allreduce(const vd_device_params *d, double *bw, double *lat_s) {
    const vd_device_params *src = d->allreduce_bw > 0 ? d : &vd_device_h200;
    *bw = src->allreduce_bw;
    *lat_s = src->allreduce_lat_s;
}

double vd_device_launch_cut(const vd_device_params *d) {
    return d->graph_launch_s > 0 && d->graph_launch_s < d->launch_s ? d->launch_s - d->graph_launch_s
                                                                    : 0.0;
}

double vd_device_replayed_s(const vd_device_params *d, double t) {
    return t >= d->launch_s ? t - vd_device_launch_cut(d) : t;
}

double vd_device_busy_bw(const vd_device_params *d, vd_copy_dir dir) {
    double busy = dir == VD_COPY_D2H ? d->d2h_bw_busy : dir == VD_COPY_H2D ? d->h2d_bw_busy
                                                                           : d->both_bw_busy;
    if (busy > 0) return busy;
    return dir == VD_COPY_D2H ? d->d2h_bw : dir == VD_COPY_H2D ? d->h2d_bw : d->both_bw;
}

void vd_device_busy_from_pass(vd_device_params *d, double d2h_pass, double h2d_pass) {
    double f[2] = {1.0, 1.0};
    if (d2h_pass > 0 && d->d2h_bw_busy > 0) {
        f[0] = d2h_pass / d->d2h_bw_busy;
        d->d2h_bw_busy = d2h_pass;
    }
    if (h2d_pass > 0 && d->h2d_bw_busy > 0) {
        f[1] = h2d_pass / d->h2d_bw_busy;
        d->h2d_bw_busy = h2d_pass;
    }
    d->both_bw_busy *= 0.5 * (f[0] + f[1]);
}

const vd_card *vd_card_find(const char *name) {
    for (int i = 0; i < vd_n_cards; i++)
        if (strcmp(name, vd_cards[i].name) == 0) return &vd_cards[i];
    return NULL;
}

const vd_device_params *vd_device_find(const char *name) {
    if (strcmp(name, "cpu") == 0) return &vd_device_cpu;
    const vd_card *c = vd_card_find(name);
    return c ? &c->dev : NULL;
}

static uint64_t vdp_default_aux_bytes(const vd_net *net, int i, int batch) {
    return vd_op_aux_bytes(net, i, batch);
}

void vd_profile_free(vd_profile *p) {
    if (!p) return;
    vd_free(p->layers);
    memset(p, 0, sizeof *p);
}

static int in_channels(const vd_net *net, int src) {
    return src < 0 ? net->in_c : net->layers[src].c;
}

/* Bytes a layer's forward touches: inputs, output, parameters. */
static double layer_bytes(const vd_net *net, int i, int batch) {
    const vd_layer *l = &net->layers[i];
    double b = 0;
    for (int k = 0; k < l->n_in; k++) b += (double)vd_net_out_numel(net, l->in[k]);
    b += (double)vd_net_out_numel(net, i);
    b *= (double)batch * (double)vd_math_act_bytes(net->train.math);
    for (int k = 0; k < l->n_params; k++) b += (double)net->params[l->param_first + k].numel * 4.0;
    return b;
}

static double secs_at(const vd_device_params *d, double peak, double flops, double bytes) {
    double a = flops / peak, b = bytes / d->mem_bw;
    return d->launch_s + (a > b ? a : b);
}

/* im2col bytes of conv layer i for `samples` samples. */
static uint64_t im2col_bytes(const vd_net *net, int i, int samples) {
    const vd_layer *l = &net->layers[i];
    uint64_t cin = (uint64_t)in_channels(net, l->in[0]);
    return cin * (uint64_t)l->u.conv.kh * (uint64_t)l->u.conv.kw * (uint64_t)l->h *
           (uint64_t)l->w * (uint64_t)samples * vd_math_act_bytes(net->train.math);
}

static int profile_alloc(const vd_net *net, int batch, const vd_device_params *dev,
                         const char *source, vd_profile *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    if (batch <= 0) return vd_errf(e, VD_EUSAGE, "profile: batch must be positive");
    out->layers = vd_calloc((size_t)(net->n_layers ? net->n_layers : 1), sizeof *out->layers, e);
    if (!out->layers) return VD_ENOMEM;
    out->n_layers = net->n_layers;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        vd_profile_layer *pl = &out->layers[i];
        pl->shape[0] = l->c; pl->shape[1] = l->h; pl->shape[2] = l->w;
        for (int k = 0; k < l->n_params; k++)
            pl->param_floats += (uint64_t)net->params[l->param_first + k].numel;
    }
    out->batch = batch;
    out->math = net->train.math;
    out->optimizer = net->train.optimizer;
    out->dev = *dev;
    snprintf(out->source, sizeof out->source, "%s", source);
    snprintf(out->net, sizeof out->net, "%s", net->name);
    return VD_OK;
}

static void analytic_sgd(const vd_net *net, const vd_device_params *dev, vd_profile *out) {
    /* the optimizer's bytes per trainable scalar (SGD 20, AdamW 28) at the
     * memory bandwidth, one launch per contiguous trainable range */
    int ranges = 0;
    for (int k = 0; k < net->n_params; k++)
        if (net->params[k].kind == VD_PARAM_WEIGHT &&
            (k == 0 || net->params[k - 1].kind != VD_PARAM_WEIGHT)) ranges++;
    out->sgd_s = dev->launch_s * ranges +
                 (double)net->n_trainable * vd_optimizer_update_bytes(out->optimizer) / dev->mem_bw;
}

int vd_profile_analytic(const vd_net *net, int batch, const vd_device_params *dev,
                        vd_profile *out, vd_err *e) {
    char src[32];
    snprintf(src, sizeof src, "analytic:%s", dev->name);
    int rc = profile_alloc(net, batch, dev, src, out, e);
    if (rc) return rc;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        vd_profile_layer *pl = &out->layers[i];
        snprintf(pl->name, sizeof pl->name, "%s", l->name);
        pl->aux_bytes = vdp_default_aux_bytes(net, i, batch);
        double flops = vd_net_layer_flops(net, i) * (double)batch;
        /* bf16 / fp16 / tf32 conv and fc run on the tensor cores */
        double peak = dev->peak_flops;
        if (l->op == VD_OP_CONV || l->op == VD_OP_FC) {
            double tc = net->train.math == VD_MATH_BF16 ? dev->peak_flops_bf16
                      : net->train.math == VD_MATH_FP16 ? dev->peak_flops_fp16
                      : net->train.math == VD_MATH_TF32 ? dev->peak_flops_tf32 : 0.0;
            if (tc > 0) peak = tc;
        }
        double bytes = layer_bytes(net, i, batch);
        double f = secs_at(dev, peak, flops, bytes);
        double b;
        if (l->op == VD_OP_CONV || l->op == VD_OP_FC)
            b = 2.0 * dev->launch_s + (secs_at(dev, peak, 2.0 * flops, 2.0 * bytes) - dev->launch_s);
        else
            b = secs_at(dev, peak, flops, 1.5 * bytes);
        vd_profile_algo *a = &pl->algos[0];
        snprintf(a->label, sizeof a->label, "%s", l->op == VD_OP_CONV ? "fastest" : "default");
        a->fwd_s = f;
        a->bwd_s = b;
        a->fwd_algo = a->bwd_data_algo = a->bwd_filter_algo = -1;
        pl->n_algos = 1;
        if (l->op == VD_OP_CONV) {
            a->workspace = im2col_bytes(net, i, batch < 8 ? batch : 8);
            a->fwd_workspace = a->bwd_workspace = a->workspace;  /* im2col both ways */
            vd_profile_algo *m = &pl->algos[1];
            snprintf(m->label, sizeof m->label, "min-ws");
            m->fwd_s = 1.6 * f;
            m->bwd_s = 1.6 * b;
            m->workspace = 0;
            m->fwd_algo = m->bwd_data_algo = m->bwd_filter_algo = -1;
            pl->n_algos = 2;
        }
    }
    analytic_sgd(net, dev, out);
    return VD_OK;
}

uint64_t vd_profile_algo_ws(const vd_profile_algo *a, bool bwd) {
    uint64_t m = a->fwd_workspace > a->bwd_workspace ? a->fwd_workspace : a->bwd_workspace;
    if (m != a->workspace) return a->workspace;
    return bwd ? a->bwd_workspace : a->fwd_workspace;
}

double vd_profile_rc_s(const vd_profile *prof, int layer, int algo) {
    const vd_profile_layer *pl = &prof->layers[layer];
    return pl->rc_s > 0 ? pl->rc_s : pl->algos[algo].fwd_s;
}

/* t on n of batch samples, its per-sample part scaled, the launch paid whole */
static double scaled_time(const vd_profile *prof, double t, int n, int batch) {
    double fixed = prof->dev.launch_s < t ? prof->dev.launch_s : t;
    return fixed + (t - fixed) * (double)n / (double)batch;
}

static void chunks_scale(vd_profile_chunk *cs, int n, bool bwd, double f) {
    for (int q = 0; q < n; q++) {
        if (bwd) cs[q].bwd_s *= f;
        else cs[q].fwd_s *= f;
    }
}

void vd_profile_layer_scale(vd_profile_layer *pl, bool bwd, double f) {
    for (int k = 0; k < pl->n_algos; k++) {
        vd_profile_algo *a = &pl->algos[k];
        if (bwd) {
            a->bwd_s *= f;
            a->bwd_alone_s *= f;
        } else {
            a->fwd_s *= f;
        }
        chunks_scale(a->chunks, a->n_chunks, bwd, f);
    }
    chunks_scale(pl->chunks, pl->n_chunks, bwd, f);
    if (!bwd) pl->rc_s *= f;
}

double vd_profile_chunk_time(const vd_profile *prof, int layer, int algo, bool bwd, double t,
                             int n, int batch) {
    if (n >= batch) return t;
    double s = scaled_time(prof, t, n, batch);
    const vd_profile_layer *pl = &prof->layers[layer];
    if (pl->n_algos < 1) return s;
    /* the option's own chunks, else option 0's */
    const vd_profile_algo *ref = &pl->algos[0];
    const vd_profile_chunk *cs = pl->chunks;
    int nc = pl->n_chunks;
    if (algo >= 0 && algo < pl->n_algos && pl->algos[algo].n_chunks > 0) {
        ref = &pl->algos[algo];
        cs = ref->chunks;
        nc = ref->n_chunks;
    }
    const vd_profile_chunk *best = NULL;
    double dist = 0;
    for (int q = 0; q < nc; q++) {   /* the timed chunk nearest n, by ratio */
        const vd_profile_chunk *c = &cs[q];
        double d = fabs(log((double)n * c->k / (double)batch));
        if (!best || d < dist) { best = c; dist = d; }
    }
    if (!best) return s;
    /* (a split layer is never paired: its chunks are timed alone) */
    double whole = bwd ? vd_profile_bwd_s(ref, false) : ref->fwd_s;
    double want = scaled_time(prof, whole, batch / best->k, batch);
    double got = bwd ? best->bwd_s : best->fwd_s;
    return want > 0 && got > want ? s * (got / want) : s;
}

uint64_t vd_profile_chunk_ws(const vd_profile *prof, int layer, int algo, bool bwd, int k,
                             int batch) {
    const vd_profile_layer *pl = &prof->layers[layer];
    const uint64_t whole = vd_profile_algo_ws(&pl->algos[algo], bwd);
    if (k <= 1 || batch % k) return whole;
    const vd_profile_algo *a = &pl->algos[algo];
    const vd_profile_chunk *cs = a->n_chunks ? a->chunks : algo == 0 ? pl->chunks : NULL;
    const int nc = a->n_chunks ? a->n_chunks : algo == 0 ? pl->n_chunks : 0;
    for (int q = 0; q < nc; q++)
        if (cs[q].k == k && cs[q].has_ws) {
            uint64_t w = bwd ? cs[q].bwd_ws : cs[q].fwd_ws;
            return w < whole ? w : whole;
        }
    return whole;
}

/* ---- JSON --------------------------------------------------------------- */

/* obj's "chunks": the n times on chunks cs (none: no key). */
static void set_chunks(json_t *obj, const vd_profile_chunk *cs, int n, bool *ok) {
    if (n == 0 || !*ok) return;
    json_t *arr = json_array();
    for (int q = 0; *ok && q < n; q++) {
        json_t *c = json_pack("{s:i, s:o, s:o}", "k", cs[q].k, "fwd_s", vd_json_real(cs[q].fwd_s),
                              "bwd_s", vd_json_real(cs[q].bwd_s));
        if (c && cs[q].has_ws) {
            vd_json_set(c, "fwd_workspace", vd_json_uint(cs[q].fwd_ws), ok);
            vd_json_set(c, "bwd_workspace", vd_json_uint(cs[q].bwd_ws), ok);
        }
        vd_json_push(arr, c, ok);
    }
    vd_json_set(obj, "chunks", arr, ok);
}

/* A profile as a JSON object; NULL when out of memory. */
static json_t *profile_json(const vd_profile *p) {
    bool ok = true;
    const vd_device_params *d = &p->dev;
    json_t *root = json_pack("{s:s, s:i, s:o, s:o, s:i}", "format", "vdnn-profile", "version", 1,
                             "source", vd_json_text(p->source), "net", vd_json_text(p->net),
                             "batch", p->batch);
    vd_json_set(root, "device",
                json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                          "name", vd_json_text(d->name), "peak_flops", vd_json_real(d->peak_flops),
                          "mem_bw", vd_json_real(d->mem_bw), "d2h_bw", vd_json_real(d->d2h_bw),
                          "h2d_bw", vd_json_real(d->h2d_bw), "both_bw", vd_json_real(d->both_bw),
                          "launch_s", vd_json_real(d->launch_s),
                          "mem_bytes", vd_json_uint(d->mem_bytes)), &ok);
    vd_json_set(root, "math", vd_json_text(vd_math_name(p->math)), &ok);
    if (d->peak_flops_bf16 > 0)
        vd_json_set(json_object_get(root, "device"), "peak_flops_bf16",
                    vd_json_real(d->peak_flops_bf16), &ok);
    if (d->peak_flops_fp16 > 0)
        vd_json_set(json_object_get(root, "device"), "peak_flops_fp16",
                    vd_json_real(d->peak_flops_fp16), &ok);
    if (d->peak_flops_tf32 > 0)
        vd_json_set(json_object_get(root, "device"), "peak_flops_tf32",
                    vd_json_real(d->peak_flops_tf32), &ok);
    /* the busy rates where known (0: the idle ones; absent in older files) */
    static const char *const busy_key[] = {"d2h_bw_busy", "h2d_bw_busy", "both_bw_busy"};
    const double busy[] = {d->d2h_bw_busy, d->h2d_bw_busy, d->both_bw_busy};
    for (int k = 0; k < 3; k++)
        if (busy[k] > 0)
            vd_json_set(json_object_get(root, "device"), busy_key[k], vd_json_real(busy[k]), &ok);
    if (d->compute_slow_d2h > 0 || d->compute_slow_h2d > 0) {
        vd_json_set(json_object_get(root, "device"), "compute_slow_d2h",
                    vd_json_real(d->compute_slow_d2h), &ok);
        vd_json_set(json_object_get(root, "device"), "compute_slow_h2d",
                    vd_json_real(d->compute_slow_h2d), &ok);
    }
    if (d->graph_launch_s > 0)
        vd_json_set(json_object_get(root, "device"), "graph_launch_s",
                    vd_json_real(d->graph_launch_s), &ok);
    if (d->allreduce_bw > 0) {
        vd_json_set(json_object_get(root, "device"), "allreduce_bw",
                    vd_json_real(d->allreduce_bw), &ok);
        vd_json_set(json_object_get(root, "device"), "allreduce_lat_s",
                    vd_json_real(d->allreduce_lat_s), &ok);
    }
    vd_json_set(root, "sgd_s", vd_json_real(p->sgd_s), &ok);
    vd_json_set(root, "optimizer", vd_json_text(vd_optimizer_name(p->optimizer)), &ok);
    json_t *layers = json_array();
    vd_json_set(root, "layers", layers, &ok);
    for (int i = 0; ok && i < p->n_layers; i++) {
        const vd_profile_layer *l = &p->layers[i];
        json_t *algos = json_array();
        for (int k = 0; ok && k < l->n_algos; k++) {
            const vd_profile_algo *a = &l->algos[k];
            vd_json_push(algos,
                         json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i, s:i}", "label",
                                   vd_json_text(a->label), "fwd_s", vd_json_real(a->fwd_s),
                                   "bwd_s", vd_json_real(a->bwd_s),
                                   "workspace", vd_json_uint(a->workspace),
                                   "fwd_workspace", vd_json_uint(vd_profile_algo_ws(a, false)),
                                   "bwd_workspace", vd_json_uint(vd_profile_algo_ws(a, true)),
                                   "fwd_algo", a->fwd_algo, "bwd_data_algo", a->bwd_data_algo,
                                   "bwd_filter_algo", a->bwd_filter_algo), &ok);
        }
        json_t *lj = json_pack("{s:o, s:o, s:o}", "name", vd_json_text(l->name),
                               "aux_bytes", vd_json_uint(l->aux_bytes), "algos", algos);
        if (l->shape[0] > 0) {
            vd_json_set(lj, "shape", json_pack("[I, I, I]", (json_int_t)l->shape[0],
                                               (json_int_t)l->shape[1], (json_int_t)l->shape[2]), &ok);
            vd_json_set(lj, "param_floats", vd_json_uint(l->param_floats), &ok);
        }
        set_chunks(lj, l->chunks, l->n_chunks, &ok);
        for (int k = 0; ok && k < l->n_algos; k++) {
            json_t *aj = json_array_get(algos, (size_t)k);
            if (l->algos[k].bwd_alone_s > 0)
                vd_json_set(aj, "bwd_alone_s", vd_json_real(l->algos[k].bwd_alone_s), &ok);
            set_chunks(aj, l->algos[k].chunks, l->algos[k].n_chunks, &ok);
        }
        if (l->rc_s > 0) vd_json_set(lj, "rc_s", vd_json_real(l->rc_s), &ok);
        vd_json_push(layers, lj, &ok);
    }
    if (!ok) { json_decref(root); return NULL; }
    return root;
}

int vd_profile_save(const char *path, const vd_profile *p, vd_err *e) {
    json_t *root = profile_json(p);
    if (!root) return vd_errf(e, VD_ENOMEM, "out of memory writing profile");
    int rc = vd_json_save(path, root, e);
    json_decref(root);
    return rc;
}

static int num(const json_t *o, const char *key, bool required, double *out, const char *path,
               const char *ctx, vd_err *e) {
    const json_t *v = json_object_get(o, key);
    if (!v) {
        if (!required) return VD_OK;
        return vd_errf(e, VD_EDATA, "%s: %s: missing number \"%s\"", path, ctx, key);
    }
    if (!json_is_number(v))
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" must be a number", path, ctx, key);
    double d = json_number_value(v);    /* jansson rejects a real that overflows */
    if (!isfinite(d) || d < 0)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %.17g is not a finite non-negative number",
                       path, ctx, key, d);
    *out = d;
    return VD_OK;
}

/* Bounds on loaded values, so that sums over a whole plan stay finite (no
 * "inf" in the JSON outputs) and sizes convert to uint64_t exactly and
 * cannot overflow the placement arithmetic: times (seconds) at most
 * VDP_MAX_S, sizes (bytes) whole numbers at most VDP_MAX_BYTES, copy
 * bandwidths (bytes/s) at least VDP_MIN_BW. */
#define VDP_MAX_S 1e6
#define VDP_MAX_BYTES ((double)((uint64_t)1 << 48))
#define VDP_MIN_BW 1.0

/* A number at most max (after num's checks). */
static int num_max(const json_t *o, const char *key, bool required, double max, double *out,
                   const char *path, const char *ctx, vd_err *e) {
    double d = *out;
    int rc = num(o, key, required, &d, path, ctx, e);
    if (rc) return rc;
    if (d > max)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %g is too large (at most %g)", path, ctx,
                       key, d, max);
    *out = d;
    return VD_OK;
}

/* A byte count: a whole number in [0, VDP_MAX_BYTES]; *out keeps its value
 * when the key is absent and not required. */
static int bytes_val(const json_t *o, const char *key, bool required, uint64_t *out,
                     const char *path, const char *ctx, vd_err *e) {
    double d = (double)*out;
    int rc = num_max(o, key, required, VDP_MAX_BYTES, &d, path, ctx, e);
    if (rc) return rc;
    if (d != floor(d))
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %g is not a whole number of bytes", path,
                       ctx, key, d);
    *out = (uint64_t)d;
    return VD_OK;
}

static int str(const json_t *o, const char *key, char *out, size_t n, const char *path,
               const char *ctx, vd_err *e) {
    const char *v = json_string_value(json_object_get(o, key));
    if (!v) return vd_errf(e, VD_EDATA, "%s: %s: missing string \"%s\"", path, ctx, key);
    if (strlen(v) >= n)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" is too long", path, ctx, key);
    snprintf(out, n, "%s", v);
    return VD_OK;
}

static int ival(const json_t *o, const char *key, int *out, const char *path, const char *ctx,
                vd_err *e) {
    const json_t *v = json_object_get(o, key);
    if (!v) { *out = -1; return VD_OK; }
    if (!json_is_number(v))
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" must be an integer", path, ctx, key);
    double x = json_number_value(v);    /* a real: see vd_profile_load */
    if (x != floor(x) || x < -1 || x > 1000000)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %.17g is not an algorithm id", path, ctx,
                       key, x);
    *out = (int)x;
    return VD_OK;
}

/* o's optional "chunks" (a layer's or an option's: times on chunks of the
 * batch, each k from 2 to the batch, once) into cs[*n]. */
static int get_chunks(const json_t *o, int batch, vd_profile_chunk *cs, int *n, const char *path,
                      const char *ctx, vd_err *e) {
    const json_t *arr = json_object_get(o, "chunks");
    *n = 0;
    if (arr && (!json_is_array(arr) || json_array_size(arr) > VD_PROFILE_MAX_CHUNKS))
        return vd_errf(e, VD_EDATA, "%s: %s: \"chunks\" must be an array of at most %d "
                       "objects", path, ctx, VD_PROFILE_MAX_CHUNKS);
    int nc = (int)json_array_size(arr);
    for (int q = 0; q < nc; q++) {
        const json_t *cv = json_array_get(arr, (size_t)q);
        vd_profile_chunk *c = &cs[q];
        char c2[240];
        snprintf(c2, sizeof c2, "%s.chunks[%d]", ctx, q);
        if (!json_is_object(cv)) return vd_errf(e, VD_EDATA, "%s: %s must be an object", path, c2);
        int rc;
        if ((rc = ival(cv, "k", &c->k, path, c2, e)) ||
            (rc = num_max(cv, "fwd_s", true, VDP_MAX_S, &c->fwd_s, path, c2, e)) ||
            (rc = num_max(cv, "bwd_s", true, VDP_MAX_S, &c->bwd_s, path, c2, e)))
            return rc;
        c->has_ws = json_object_get(cv, "fwd_workspace") || json_object_get(cv, "bwd_workspace");
        c->fwd_ws = c->bwd_ws = 0;
        if (c->has_ws && ((rc = bytes_val(cv, "fwd_workspace", true, &c->fwd_ws, path, c2, e)) ||
                          (rc = bytes_val(cv, "bwd_workspace", true, &c->bwd_ws, path, c2, e))))
            return rc;
        bool dup = false;
        for (int r = 0; r < q; r++) dup |= cs[r].k == c->k;
        if (c->k < 2 || c->k > batch || dup)
            return vd_errf(e, VD_EDATA, "%s: %s: \"k\" must be a chunk count from 2 to the "
                           "batch (%d), each once", path, c2, batch);
    }
    *n = nc;
    return VD_OK;
}

static int load_tree(const json_t *root, const char *path, const vd_net *net, int batch,
                     vd_profile *out, vd_err *e) {
    if (!json_is_object(root)) return vd_errf(e, VD_EDATA, "%s: profile must be a JSON object", path);
    char fmt[32];
    int rc = str(root, "format", fmt, sizeof fmt, path, "profile", e);
    if (rc) return rc;
    if (strcmp(fmt, "vdnn-profile") != 0)
        return vd_errf(e, VD_EDATA, "%s: \"format\" is \"%s\", expected \"vdnn-profile\"", path, fmt);
    double ver = 0, b = 0;
    if ((rc = num(root, "version", true, &ver, path, "profile", e))) return rc;
    if (ver != 1) return vd_errf(e, VD_EDATA, "%s: profile version %g is not supported (expected 1)", path, ver);
    if ((rc = num(root, "batch", true, &b, path, "profile", e))) return rc;
    if (b != (double)batch)
        return vd_errf(e, VD_EDATA, "%s: profile was made at batch %g, the plan is for batch %d; "
                       "re-profile at this batch", path, b, batch);
    {   /* a profile is measured per math mode: times and byte counts differ */
        const json_t *mj = json_object_get(root, "math");
        const char *m = json_string_value(mj);
        vd_math want = net->train.math;
        if (mj && !m) return vd_errf(e, VD_EDATA, "%s: \"math\" must be a string", path);
        if (m ? strcmp(m, vd_math_name(want)) != 0 : vd_math_act_bytes(want) != 4)
            return vd_errf(e, VD_EDATA, "%s: profile was made for math %s, the run is %s; "
                           "re-profile with --math %s", path, m ? m : "fp32 (no \"math\" key)",
                           vd_math_name(want), vd_math_name(want));
    }
    vd_device_params dev = {0};
    const json_t *d = json_object_get(root, "device");
    if (!json_is_object(d)) return vd_errf(e, VD_EDATA, "%s: missing object \"device\"", path);
    if ((rc = str(d, "name", dev.name, sizeof dev.name, path, "device", e))) return rc;
    if ((rc = num(d, "peak_flops", false, &dev.peak_flops, path, "device", e)) ||
        (rc = num(d, "mem_bw", false, &dev.mem_bw, path, "device", e)) ||
        (rc = num(d, "d2h_bw", true, &dev.d2h_bw, path, "device", e)) ||
        (rc = num(d, "h2d_bw", true, &dev.h2d_bw, path, "device", e)) ||
        (rc = num(d, "both_bw", true, &dev.both_bw, path, "device", e)) ||
        (rc = num_max(d, "launch_s", false, VDP_MAX_S, &dev.launch_s, path, "device", e)) ||
        (rc = bytes_val(d, "mem_bytes", false, &dev.mem_bytes, path, "device", e)))
        return rc;
    if ((rc = num(d, "peak_flops_bf16", false, &dev.peak_flops_bf16, path, "device", e)) ||
        (rc = num(d, "peak_flops_fp16", false, &dev.peak_flops_fp16, path, "device", e)) ||
        (rc = num(d, "peak_flops_tf32", false, &dev.peak_flops_tf32, path, "device", e)))
        return rc;
    /* optional: the copy rates beside busy compute (absent: 0, the idle ones) */
    if ((rc = num(d, "d2h_bw_busy", false, &dev.d2h_bw_busy, path, "device", e)) ||
        (rc = num(d, "h2d_bw_busy", false, &dev.h2d_bw_busy, path, "device", e)) ||
        (rc = num(d, "both_bw_busy", false, &dev.both_bw_busy, path, "device", e)))
        return rc;
    /* optional: compute slowed by copies beside it (at most doubled) */
    if ((rc = num_max(d, "compute_slow_d2h", false, 1.0, &dev.compute_slow_d2h, path, "device",
                      e)) ||
        (rc = num_max(d, "compute_slow_h2d", false, 1.0, &dev.compute_slow_h2d, path, "device",
                      e)))
        return rc;
    /* optional: the per-op overhead of a replayed graph (absent: 0, launch_s) */
    if ((rc = num_max(d, "graph_launch_s", false, VDP_MAX_S, &dev.graph_launch_s, path, "device",
                      e)))
        return rc;
    /* optional: the all-reduce of data-parallel plans (vdnn-plan --gpus N) */
    if (json_object_get(d, "allreduce_bw") &&
        (rc = num(d, "allreduce_bw", false, &dev.allreduce_bw, path, "device", e)))
        return rc;
    if (json_object_get(d, "allreduce_lat_s") &&
        (rc = num_max(d, "allreduce_lat_s", false, VDP_MAX_S, &dev.allreduce_lat_s, path,
                      "device", e)))
        return rc;
    if (dev.allreduce_bw != 0 && dev.allreduce_bw < VDP_MIN_BW)
        return vd_errf(e, VD_EDATA, "%s: device \"allreduce_bw\" must be 0 (unknown) or at "
                       "least %g bytes/s", path, VDP_MIN_BW);
    /* both_bw 0: unknown (copies in both directions run at their own rates) */
    if (dev.d2h_bw < VDP_MIN_BW || dev.h2d_bw < VDP_MIN_BW ||
        (dev.both_bw != 0 && dev.both_bw < VDP_MIN_BW))
        return vd_errf(e, VD_EDATA, "%s: device bandwidths must be at least %g bytes/s", path,
                       VDP_MIN_BW);
    if ((dev.d2h_bw_busy != 0 && dev.d2h_bw_busy < VDP_MIN_BW) ||
        (dev.h2d_bw_busy != 0 && dev.h2d_bw_busy < VDP_MIN_BW) ||
        (dev.both_bw_busy != 0 && dev.both_bw_busy < VDP_MIN_BW))
        return vd_errf(e, VD_EDATA, "%s: device \"d2h_bw_busy\", \"h2d_bw_busy\" and "
                       "\"both_bw_busy\" must be 0 (the idle rate) or at least %g bytes/s",
                       path, VDP_MIN_BW);
    char source[32] = "";
    const char *sv = json_string_value(json_object_get(root, "source"));
    if (sv) snprintf(source, sizeof source, "%s", sv);
    else snprintf(source, sizeof source, "file");
    rc = profile_alloc(net, batch, &dev, source, out, e);
    if (rc) return rc;
    if ((rc = num_max(root, "sgd_s", true, VDP_MAX_S, &out->sgd_s, path, "profile", e))) goto fail;
    {   /* the optimizer sgd_s timed (absent: sgd, older files); another one's
         * update is scaled by the bytes it moves */
        const json_t *oj = json_object_get(root, "optimizer");
        const char *o = json_string_value(oj);
        static const char *const names[] = VD_OPTIMIZER_NAMES;
        int k = o ? -1 : VD_OPT_SGD;
        for (int i = 0; o && i < (int)VD_ARRAY_LEN(names); i++)
            if (!strcmp(o, names[i])) k = i;
        if ((oj && !o) || k < 0) {
            rc = vd_errf(e, VD_EDATA, "%s: \"optimizer\" must be \"sgd\" or \"adamw\"", path);
            goto fail;
        }
        out->sgd_s *= vd_optimizer_update_bytes(out->optimizer) /
                      vd_optimizer_update_bytes((vd_optimizer)k);
    }
    const json_t *ls = json_object_get(root, "layers");
    if (!json_is_array(ls)) { rc = vd_errf(e, VD_EDATA, "%s: missing array \"layers\"", path); goto fail; }
    if (json_array_size(ls) != (size_t)net->n_layers) {
        rc = vd_errf(e, VD_EDATA, "%s: profile has %zu layers, net '%s' has %d", path,
                     json_array_size(ls), net->name, net->n_layers);
        goto fail;
    }
    for (int i = 0; i < net->n_layers; i++) {
        const json_t *lv = json_array_get(ls, (size_t)i);
        vd_profile_layer *pl = &out->layers[i];
        char ctx[160];
        snprintf(ctx, sizeof ctx, "layers[%d]", i);
        if (!json_is_object(lv)) { rc = vd_errf(e, VD_EDATA, "%s: %s must be an object", path, ctx); goto fail; }
        if ((rc = str(lv, "name", pl->name, sizeof pl->name, path, ctx, e))) goto fail;
        if (strcmp(pl->name, net->layers[i].name) != 0) {
            rc = vd_errf(e, VD_EDATA, "%s: %s is '%s' but layer %d of net '%s' is '%s'", path, ctx,
                         pl->name, i, net->name, net->layers[i].name);
            goto fail;
        }
        /* the shape it was profiled at (absent in files of older versions) */
        const json_t *sh = json_object_get(lv, "shape");
        if (sh) {
            /* numbers are reals here (JSON_DECODE_INT_AS_REAL): whole, 0..2^53 */
            uint64_t v[4] = {0};
            const json_t *nv[4] = { json_array_get(sh, 0), json_array_get(sh, 1),
                                    json_array_get(sh, 2), json_object_get(lv, "param_floats") };
            bool shape_ok = json_is_array(sh) && json_array_size(sh) == 3;
            for (int k = 0; shape_ok && k < 4; k++) {
                double x = json_number_value(nv[k]);
                shape_ok = json_is_number(nv[k]) && x >= 0 && x <= 9007199254740992.0 &&
                           x == floor(x);
                v[k] = shape_ok ? (uint64_t)x : 0;
            }
            uint64_t pf = v[3];
            if (!shape_ok) {
                rc = vd_errf(e, VD_EDATA, "%s: %s: \"shape\" must be [c, h, w] (non-negative "
                             "integers) with \"param_floats\" beside it", path, ctx);
                goto fail;
            }
            if ((int64_t)v[0] != pl->shape[0] || (int64_t)v[1] != pl->shape[1] ||
                (int64_t)v[2] != pl->shape[2] || pf != pl->param_floats) {
                rc = vd_errf(e, VD_EDATA, "%s: %s '%s' was profiled with output %llux%llux%llu "
                             "and %llu parameters, but in net '%s' it has %lldx%lldx%lld and "
                             "%llu: the profile is of another net; re-profile (--profile-out)",
                             path, ctx, pl->name, (unsigned long long)v[0],
                             (unsigned long long)v[1], (unsigned long long)v[2],
                             (unsigned long long)pf, net->name, (long long)pl->shape[0],
                             (long long)pl->shape[1], (long long)pl->shape[2],
                             (unsigned long long)pl->param_floats);
                goto fail;
            }
        }
        pl->aux_bytes = vdp_default_aux_bytes(net, i, batch);
        if ((rc = bytes_val(lv, "aux_bytes", false, &pl->aux_bytes, path, ctx, e))) goto fail;
        if ((rc = get_chunks(lv, batch, pl->chunks, &pl->n_chunks, path, ctx, e))) goto fail;
        pl->rc_s = 0;   /* optional: a recompute's own time */
        if ((rc = num_max(lv, "rc_s", false, VDP_MAX_S, &pl->rc_s, path, ctx, e))) goto fail;
        const json_t *as = json_object_get(lv, "algos");
        size_t na = json_array_size(as);    /* 0 when not an array */
        if (na < 1 || na > VD_PROFILE_MAX_ALGOS) {
            rc = vd_errf(e, VD_EDATA, "%s: %s: \"algos\" must be an array of 1 to %d options",
                         path, ctx, VD_PROFILE_MAX_ALGOS);
            goto fail;
        }
        pl->n_algos = (int)na;
        for (int k = 0; k < pl->n_algos; k++) {
            const json_t *av = json_array_get(as, (size_t)k);
            vd_profile_algo *a = &pl->algos[k];
            char c2[200];
            snprintf(c2, sizeof c2, "%s.algos[%d]", ctx, k);
            if (!json_is_object(av)) { rc = vd_errf(e, VD_EDATA, "%s: %s must be an object", path, c2); goto fail; }
            a->workspace = 0;
            a->bwd_alone_s = 0;
            if ((rc = str(av, "label", a->label, sizeof a->label, path, c2, e)) ||
                (rc = num_max(av, "fwd_s", true, VDP_MAX_S, &a->fwd_s, path, c2, e)) ||
                (rc = num_max(av, "bwd_s", true, VDP_MAX_S, &a->bwd_s, path, c2, e)) ||
                (rc = bytes_val(av, "workspace", true, &a->workspace, path, c2, e)) ||
                (rc = ival(av, "fwd_algo", &a->fwd_algo, path, c2, e)) ||
                (rc = ival(av, "bwd_data_algo", &a->bwd_data_algo, path, c2, e)) ||
                (rc = ival(av, "bwd_filter_algo", &a->bwd_filter_algo, path, c2, e)))
                goto fail;
            if ((rc = num_max(av, "bwd_alone_s", false, VDP_MAX_S, &a->bwd_alone_s, path, c2, e)) ||
                (rc = get_chunks(av, batch, a->chunks, &a->n_chunks, path, c2, e)))
                goto fail;
            /* per-pass workspaces: optional (older files: `workspace` for both) */
            a->fwd_workspace = a->bwd_workspace = a->workspace;
            if ((rc = bytes_val(av, "fwd_workspace", false, &a->fwd_workspace, path, c2, e)) ||
                (rc = bytes_val(av, "bwd_workspace", false, &a->bwd_workspace, path, c2, e)))
                goto fail;
            if ((a->fwd_workspace > a->bwd_workspace ? a->fwd_workspace : a->bwd_workspace) !=
                a->workspace) {
                rc = vd_errf(e, VD_EDATA, "%s: %s: \"workspace\" must be the larger of "
                             "\"fwd_workspace\" and \"bwd_workspace\"", path, c2);
                goto fail;
            }
        }
    }
    return VD_OK;
fail:
    vd_profile_free(out);
    return rc;
}

int vd_profile_parse(const char *text, size_t n, const char *name, const vd_net *net, int batch,
                     vd_profile *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    if (n > VD_PROFILE_MAX_BYTES)
        return vd_errf(e, VD_EDATA, "%s: %zu bytes, more than a profile may have (%llu)", name,
                       n, (unsigned long long)VD_PROFILE_MAX_BYTES);
    char jerr[256];
    /* every number a real: a size beyond 64 bits is then rejected below by
     * name (bytes_val) instead of failing the parse without naming the key */
    json_t *root = vd_json_parse(text, n, JSON_DECODE_INT_AS_REAL, jerr, sizeof jerr);
    if (!root) return vd_errf(e, VD_EDATA, "%s: not valid JSON: %s", name, jerr);
    int rc = load_tree(root, name, net, batch, out, e);
    json_decref(root);
    return rc;
}

int vd_profile_load(const char *path, const vd_net *net, int batch, vd_profile *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t n = 0;
    int rc = vd_read_file_max(path, VD_PROFILE_MAX_BYTES, &text, &n, e);
    if (rc) return rc;
    rc = vd_profile_parse(text, n, path, net, batch, out, e);
    vd_free(text);
    return rc;
}
