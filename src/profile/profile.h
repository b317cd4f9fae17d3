/* profile.h — what the planner knows about a device and a net's layers:
 * per layer and algorithm option the forward / backward time and workspace,
 * the per-layer saved state, the SGD step, the copy bandwidths. Made
 * analytically (FLOPs and bytes), from a backend's algorithm options
 * (backend/backend.h: vd_profile_backend), by measuring on the GPU
 * (backend/cuda/cuda_backend.h: vd_profile_measure), or loaded from JSON
 * (format: man vdnn-plan(1)).
 *
 * Below both plan/ and backend/: depends on util/ and net/ only. */
#ifndef VD_PROFILE_H
#define VD_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include "util/util.h"
#include "net/net.h"

/* A layer timed on a chunk of the batch (split layers: vdnn-plan(1)): an
 * option on batch / k samples. The counts a measured profile times: those
 * auto splits into (plan.c, AUTO_KS). A profile may hold others (older ones
 * hold 2 and 8): vd_profile_chunk_time takes the nearest. */
#define VD_PROFILE_MAX_CHUNKS 4
#define VD_PROFILE_CHUNK_KS {2, 4, 8}
typedef struct vd_profile_chunk {
    int k;
    double fwd_s, bwd_s;
    /* the workspace bytes each pass used on such a chunk (has_ws; JSON
     * "fwd_workspace" / "bwd_workspace", optional, both or neither): a
     * chunk's convolution needs less than the whole batch's where its
     * engine's workspace grows with the batch. vd_profile_chunk_ws */
    bool has_ws;
    uint64_t fwd_ws, bwd_ws;
} vd_profile_chunk;

typedef struct vd_profile_algo {
    char label[32];
    double fwd_s, bwd_s;        /* seconds at the profile's batch */
    /* A layer whose backward is timed in a fusion pair (a max pool and the
     * ReLU whose backward it takes, a batch norm and the ReLU after its add
     * whose backward it takes: bwd_s as the pair runs, the ReLU's a no-op):
     * its backward alone, where a plan does not pair it (a split layer; the
     * pair's other conditions unmet). 0: in no pair (bwd_s). JSON
     * "bwd_alone_s", optional. */
    double bwd_alone_s;
    uint64_t workspace;         /* bytes */
    int fwd_algo, bwd_data_algo, bwd_filter_algo; /* backend ids (-1 analytic) */
    /* Bytes of workspace the forward / the backward pass of this option
     * needs. Valid only when max(fwd_workspace, bwd_workspace) == workspace;
     * otherwise (e.g. both 0 from an old file or a profiler that does not fill
     * them) both passes use `workspace`. Read them through vd_profile_algo_ws. */
    uint64_t fwd_workspace, bwd_workspace;
    /* This option on chunks, where it runs them otherwise than option 0
     * does (a CUDA split conv option, "b/8 w": through the sub-batch plans
     * it was timed with, vdnn-plan(1)); none: option 0's chunks
     * (vd_profile_layer.chunks) price it. JSON "chunks" in the option,
     * optional. vd_profile_chunk_time */
    int n_chunks;
    vd_profile_chunk chunks[VD_PROFILE_MAX_CHUNKS];
} vd_profile_algo;

/* Workspace bytes of option a for the forward pass (bwd false; recomputes
 * too) or the backward pass (bwd true), with the fallback described above. */
uint64_t vd_profile_algo_ws(const vd_profile_algo *a, bool bwd);

#define VD_PROFILE_MAX_ALGOS 12

typedef struct vd_profile_layer {
    char name[VD_NAME_MAX];
    int n_algos;
    vd_profile_algo algos[VD_PROFILE_MAX_ALGOS]; /* [0] = fastest; conv may have several */
    /* measured on chunks (JSON "chunks": [{"k", "fwd_s", "bwd_s"}], optional;
     * none in the analytic models): vd_profile_chunk_time */
    int n_chunks;
    vd_profile_chunk chunks[VD_PROFILE_MAX_CHUNKS];
    /* seconds of a recompute (the forward run again, vd_op_io.recompute) at
     * the profile's batch where that is not its option's fwd_s: batch norm's
     * re-run only normalises (the CUDA profiler times it; JSON "rc_s",
     * optional); 0: the option's fwd_s. Read through vd_profile_rc_s. */
    double rc_s;
    uint64_t aux_bytes;         /* per-layer saved state (backend->layer_aux_bytes);
                                   analytic: BN 2*C floats, loss 1 float, else 0 */
    /* What the layer was profiled as, so that a profile of another net with
     * the same layer names is refused: the output shape per sample
     * (c, h, w; 0 = not recorded, files of older versions) and its
     * parameter floats. Filled from the net for every profile made here;
     * JSON "shape" [c, h, w] and "param_floats". */
    int64_t shape[3];
    uint64_t param_floats;
} vd_profile_layer;

typedef struct vd_device_params {
    char name[64];              /* "h200", "cpu" */
    double peak_flops;          /* effective sustained FLOP/s (fp32 conv/gemm) */
    double peak_flops_bf16;     /* the same in bf16 on tensor cores (0: = peak_flops) */
    double peak_flops_fp16;     /* the same in fp16 on tensor cores (0: = peak_flops) */
    double peak_flops_tf32;     /* the same in tf32 on tensor cores (0: = peak_flops:
                                   no tf32, or a measured profile, whose peak_flops is
                                   already the math's) */
    double mem_bw;              /* device memory bytes/s */
    /* Copy rates, bytes/s, with the compute stream idle: one way, and both =
     * the two directions' sum when they run at once (0: unknown, each runs at
     * its own). The analytic models' are the card's (profile.c, "Cards"); a
     * measured profile times them alone (files before the busy rates below
     * hold the rates beside a pass of the net instead). */
    double d2h_bw, h2d_bw, both_bw;
    /* The same while the compute stream runs: what an offload or a prefetch
     * gets during an iteration, whose compute stream is busy while copies
     * run (the simulator times copies at these; H100:
     * docs/results/2026-12-06-s19/predict-offload-model.md). Measured
     * (vd_profile_measure: the copies beside a pass of the net under load,
     * vd_device_busy_from_pass; older files hold the rates beside a
     * memory-bound kernel that runs through them); JSON
     * "d2h_bw_busy", "h2d_bw_busy", "both_bw_busy", optional; 0 = the idle
     * rate above (the analytic models, older files). Read through
     * vd_device_busy_bw. */
    double d2h_bw_busy, h2d_bw_busy, both_bw_busy;
    double launch_s;            /* per-op overhead */
    /* The per-op overhead where the iteration is a replayed CUDA graph
     * (vd_plan.captured): a kernel node's launch after the one before it
     * (measured: a graph of empty kernels); JSON "graph_launch_s",
     * optional; 0 = unknown (launch_s: the analytic models, older files). */
    double graph_launch_s;
    uint64_t mem_bytes;         /* device memory (default budget); 0 = unknown */
    /* Data parallel (vdnn-plan --gpus N): the all-reduce's bus bandwidth in
     * bytes/s (nccl-tests' "busbw": a ring moves 2 (N-1)/N of the buffer per
     * rank) and its latency per call; JSON "allreduce_bw", "allreduce_lat_s",
     * optional; 0 = unknown (vd_device_allreduce). */
    double allreduce_bw, allreduce_lat_s;
    /* Copies and compute share the device's memory: while a D2H (H2D) copy
     * runs, the compute stream takes this much longer per second of the
     * overlap (0.05: 5% slower while it lasts). Measured (vd_profile_measure:
     * a pass of the net with and without copies beside it); JSON
     * "compute_slow_d2h", "compute_slow_h2d", optional; 0 = none (the
     * analytic models, older files). */
    double compute_slow_d2h, compute_slow_h2d;
} vd_device_params;
extern const vd_device_params vd_device_h200, vd_device_cpu;
/* A copy direction: device to host, host to device, or both at once (the
 * pair's summed rate). */
typedef enum { VD_COPY_D2H, VD_COPY_H2D, VD_COPY_BOTH } vd_copy_dir;
/* d's rate in direction dir while the compute stream is busy: its busy rate
 * where set (non-zero), else its idle one (d2h_bw, h2d_bw, both_bw). */
double vd_device_busy_bw(const vd_device_params *d, vd_copy_dir dir);
/* d's busy rates from those its copies ran at beside a pass of the net
 * (bytes/s; 0: not timed, that direction's rate kept), in place of the
 * rates beside a memory-bound kernel that d holds (the fallback): an
 * iteration's copies run at the pass's rate, not the kernel's (fp32's
 * kernels slow a copy more than that kernel does, bf16's less:
 * docs/results/2026-12-07-s36). Both ways at once: the kernel's rate
 * scaled by the mean of the two directions' changes. */
void vd_device_busy_from_pass(vd_device_params *d, double d2h_pass, double h2d_pass);
/* d's all-reduce bus bandwidth and latency, or vd_device_h200's where d's
 * are unknown (allreduce_bw 0: a measured profile, an older file). */
void vd_device_allreduce(const vd_device_params *d, double *bw, double *lat_s);
/* What an op that launched a kernel saves per launch in a replayed graph:
 * launch_s - graph_launch_s where d has a graph_launch_s under launch_s,
 * else 0. */
double vd_device_launch_cut(const vd_device_params *d);
/* An op's profile time t as a replayed graph runs it: less the launch cut
 * where it was timed with a launch (t at least launch_s: the CUDA profiler
 * adds one to every op that launched a kernel), else t. */
double vd_device_replayed_s(const vd_device_params *d, double t);
/* Look up a device model: a card of vd_cards by its name, or "cpu".
 * Returns NULL if unknown. */
const vd_device_params *vd_device_find(const char *name);

/* The cards vdnn-plan --gpu-model knows (vdnn-plan --list-gpu-models): each
 * card's published figures, and the device parameters derived from them by
 * one rule (profile.c, "Cards"): the H200 is the calibration (its
 * parameters are vd_device_h200's), every other card gets its sustained
 * rates with the H200's sustained/peak factor per kind, its copy rates by
 * its PCIe generation and lanes. */
typedef struct vd_card {
    const char *name;           /* --gpu-model: "t4" */
    const char *product;        /* "NVIDIA T4" */
    double mem_gb;              /* memory as published, GB ("16 GB") */
    double mem_gib;             /* GiB the device offers (dev.mem_bytes): the
                                   GDDR6 data-centre cards (T4, L4, A10) keep
                                   15/16 with ECC on, their default; HBM cards
                                   the whole GiB the driver reports */
    double mem_bw;              /* memory bandwidth, bytes/s, as published */
    /* dense peak FLOP/s as published (half the "with sparsity" figure):
     * fp32 on the CUDA cores; tf32, fp16 and bf16 on the tensor cores with
     * fp32 accumulation; 0 = the card has none (T4: Turing, no tf32, no
     * bf16) */
    double fp32, tf32, fp16, bf16;
    int pcie_gen, pcie_lanes;   /* host link: PCIe 3 | 4 | 5, lanes */
    double nvlink_bw;           /* NVLink bytes/s (both ways, as published); 0 = none */
    const char *source;         /* where the figures come from */
    vd_device_params dev;       /* derived (the rule above) */
} vd_card;
extern const vd_card vd_cards[];
extern const int vd_n_cards;
/* The card named `name`, or NULL. */
const vd_card *vd_card_find(const char *name);
/* Device memory outside the pool: the CUDA context, the cuDNN and cuBLAS
 * handles and their workspaces' slack. A device model's default budget is
 * its memory less this (vd_config_budget). 640 MiB: VGG-16 b256 bf16 with
 * an 8 GiB pool uses 0.59 GiB besides the pool on an H200 by the driver's
 * count (docs/measurements.md), rounded up to a multiple of 128 MiB. */
#define VD_DEVICE_CONTEXT_RESERVE ((uint64_t)640 << 20)

typedef struct vd_profile {
    char source[32];            /* "analytic:h200" | "measured:cuda" | file */
    char net[VD_NAME_MAX];
    int batch;
    vd_math math;               /* the math mode it was made for (from net->train.math):
                                   feature-map bytes, times; JSON "math" (a file without
                                   it is fp32 storage: fp32 or tf32) */
    vd_device_params dev;
    double sgd_s;               /* the update step's time (the optimizer's: SGD's, AdamW's) */
    vd_optimizer optimizer;     /* the optimizer sgd_s times (from net->train.optimizer);
                                   JSON "optimizer" (a file without it: sgd) */
    int n_layers;
    vd_profile_layer *layers;   /* [n_layers] */
} vd_profile;

/* Seconds of a recompute of layer `layer` run with forward option algo at
 * the profile's batch: its rc_s where set, else the option's fwd_s. */
double vd_profile_rc_s(const vd_profile *prof, int layer, int algo);

/* The time of one pass (bwd) of layer `layer` on a chunk of n of the batch's
 * samples, given t, the pass's time on the whole batch with option algo:
 * the per-sample part of t scaled to n, the per-op launch overhead
 * (dev.launch_s) paid whole; where the option (else the layer's option 0)
 * was timed on chunks, that scaled by how much slower than so scaled it
 * ran on the timed chunk nearest n (a chunk runs through other kernels
 * than the whole batch: a runtime plan for its batch, less of the device
 * filled). Never below t's share of the chunk, so that a pass's chunks
 * take no less than it whole. */
double vd_profile_chunk_time(const vd_profile *prof, int layer, int algo, bool bwd, double t,
                             int n, int batch);
/* The workspace of one pass (bwd) of option algo of layer `layer` on each
 * of k equal chunks of the batch (k > 1 dividing the batch): what the
 * option's own timing on k chunks used (for option 0 without chunks of its
 * own: the layer's), at most the whole batch's; else (k 1, or no such
 * timing with its workspace) the whole batch's, vd_profile_algo_ws. */
uint64_t vd_profile_chunk_ws(const vd_profile *prof, int layer, int algo, bool bwd, int k,
                             int batch);
/* Layer pl's forward (bwd false) or backward times scaled by f: every
 * option's (the backward's time alone too), the chunks', and with the
 * forward its recompute's (the CUDA profile's times under load). */
void vd_profile_layer_scale(vd_profile_layer *pl, bool bwd, double f);
/* Option a's backward time: as its fusion pair runs (paired), else alone
 * (vd_profile_algo.bwd_alone_s where timed). */
static inline double vd_profile_bwd_s(const vd_profile_algo *a, bool paired) {
    return !paired && a->bwd_alone_s > 0 ? a->bwd_alone_s : a->bwd_s;
}

/* Bytes of device memory the optimizer's update moves per trainable
 * parameter (fp32): SGD reads p, g and the momentum and writes p and the
 * momentum (20); AdamW reads p, g, exp_avg and exp_avg_sq and writes p,
 * exp_avg and exp_avg_sq (28). The update is memory-bound: its time scales
 * with these. */
static inline double vd_optimizer_update_bytes(vd_optimizer o) {
    return o == VD_OPT_ADAMW ? 28.0 : 20.0;
}

/* Analytic profile from FLOPs and bytes: t = launch + max(flops/peak,
 * bytes/mem_bw); backward ~2x forward for conv/fc. Conv layers get two
 * options: "fastest" (t, workspace = im2col buffer of min(N,8) samples) and
 * "min-ws" (1.6 t, workspace 0). *out is owned by the caller (vd_profile_free). */
/* The profile is made for net->train.math (bf16 / fp16: 2-byte feature
 * maps, conv and fc at dev->peak_flops_bf16 / peak_flops_fp16; tf32: conv
 * and fc at dev->peak_flops_tf32; each when non-zero, else peak_flops). */
int vd_profile_analytic(const vd_net *net, int batch, const vd_device_params *dev,
                        vd_profile *out, vd_err *e);
/* The largest profile file read (a VGG-16 profile is about 26 KB; a net of
 * VD_SPEC_MAX_LAYERS layers with every algorithm stays far below). */
#define VD_PROFILE_MAX_BYTES (64ull << 20)
/* JSON profile (format: man vdnn-plan(1)). Load checks that the layer names
 * and the batch match net/batch (VD_EDATA otherwise, also for a file over
 * VD_PROFILE_MAX_BYTES); VD_EIO if unreadable or not a regular file. A
 * profile made for another optimizer than net->train.optimizer has its
 * update time scaled by the bytes each moves (vd_optimizer_update_bytes):
 * no re-profiling for a number the other layers' times do not depend on. */
int vd_profile_load(const char *path, const vd_net *net, int batch, vd_profile *out, vd_err *e);
/* vd_profile_load on a profile already in memory: text[0..n) (need not be
 * NUL-terminated) read as the file `name` (for messages). The same checks
 * and errors (VD_EDATA naming `name`, also when n > VD_PROFILE_MAX_BYTES);
 * vd_profile_load reads the file and calls this. */
int vd_profile_parse(const char *text, size_t n, const char *name, const vd_net *net, int batch,
                     vd_profile *out, vd_err *e);
int vd_profile_save(const char *path, const vd_profile *p, vd_err *e);
void vd_profile_free(vd_profile *p);

#endif
