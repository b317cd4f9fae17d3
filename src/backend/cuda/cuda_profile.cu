/* cuda_profile.cu — vd_profile_measure: time every layer on the GPU.
 *
 * Runs before planning, outside the pool: it takes one scratch cudaMalloc
 * sized for the largest layer (its inputs, output, gradients, parameters,
 * workspace), fills it with uniform [-1, 1) values, times each layer's
 * forward and backward per algorithm option with CUDA events on the compute
 * stream (one warm-up, median of PROF_REPS, each run queued whole before the
 * device reaches it: time_op), then the SGD step and pinned
 * copy bandwidths, and frees everything.
 *
 * Timed alone, with the device idle between runs, a layer runs at the
 * boost clock; a training iteration keeps the device busy, and a device at
 * its power limit lowers its clock (docs/results/2026-12-06-s24 has the
 * clocks and power of an H200 profiling and training VGG-16). So the
 * layers are timed once more under load, a second of passes of the net
 * before them (time_sustained), and their times scaled to that.
 *
 * The copy bandwidths are measured twice: alone (d2h_bw, h2d_bw, both_bw)
 * and beside a memory-bound kernel that runs on the compute stream from
 * before the copies start until after they end. A D2H copy beside the
 * net's kernels is slower than alone
 * (docs/results/2026-12-06-s19/predict-offload-model.md), and a plan timed
 * at the idle rate has its offloads end late, stalling the steps that
 * reuse their regions. The copies use buffers of their
 * own, after the layers' scratch; the kernel beside them a ReLU in place
 * over the scratch's first 2 x COPY_BYTES (the layers' part of the scratch
 * is at least that), 10 times the H100's and H200's 50 MB of L2, so it
 * streams from device memory.
 * Last, under load (after time_sustained), runs of a pass of the net with
 * copies beside it and alone, both starting together behind such kernels,
 * time what the copies cost the compute stream
 * (vd_device_params.compute_slow_*) and the rate the copies ran at beside
 * the pass: that rate is the busy one the simulator times an iteration's
 * copies at (d2h_bw_busy, ...; vd_device_busy_from_pass), the kernel's
 * where the pass is too short for a copy. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_convgraph.h"   /* cg_dbg */

enum { PROF_REPS = 5, COPY_REPS = 3, LAUNCH_REPS = 200 };
static const uint64_t COPY_BYTES = 256ull << 20;
static const uint64_t ALIGN = 256;

typedef struct prof {
    cu_ctx *c;
    vd_backend *be;
    const vd_net *net;
    int batch;
    char *scratch;          /* device, scratch_bytes */
    uint64_t scratch_bytes;
    uint64_t copy_off;      /* the copies' two device buffers: scratch + copy_off */
    void *host[2];          /* pinned, COPY_BYTES each */
    cudaEvent_t ev[4];
    void *table;            /* the update's one-range table (be->ranges_create) */
    double launch_s;        /* one kernel launch on the device (vd_device_params.launch_s),
                               measured before the layers: time_op adds it */
} prof;

static void prof_free(prof *p) {
    if (p->table) p->be->ranges_free(p->be, p->table);
    for (int i = 0; i < 4; i++)
        if (p->ev[i]) cudaEventDestroy(p->ev[i]);
    for (int i = 0; i < 2; i++)
        if (p->host[i]) cudaFreeHost(p->host[i]);
    if (p->scratch) cudaFree(p->scratch);
    memset(p, 0, sizeof *p);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return v[n / 2];
}

static int64_t in_numel(const vd_net *net, int src) { return vd_net_out_numel(net, src); }

/* Layout of one layer's buffers inside the scratch region. */
typedef struct layer_buf {
    uint64_t x[VD_MAX_INPUTS], dx[VD_MAX_INPUTS], y, dy, par, grad, aux, labels, ws, bias, bn,
        end;
} layer_buf;

static uint64_t take(uint64_t *off, uint64_t bytes) {
    uint64_t at = *off;
    *off += VD_ALIGN_UP(bytes ? bytes : 1, ALIGN);
    return at;
}

/* Elements of layer li's parameter of role r; 0 if it has none. */
static int64_t role_numel(const vd_net *net, int li, vd_param_role r) {
    const vd_layer *l = &net->layers[li];
    for (int p = l->param_first; p < l->param_first + l->n_params; p++)
        if (net->params[p].role == r) return net->params[p].numel;
    return 0;
}

static int64_t layer_param_floats(const vd_net *net, int li) {
    const vd_layer *l = &net->layers[li];
    int64_t n = 0;
    for (int p = l->param_first; p < l->param_first + l->n_params; p++) n += net->params[p].numel;
    return n;
}

/* Does ReLU li take the bias gradient of the conv before it, as the plan
 * pairs them (vd_plan_layer.db_unit: in place, and whole, as timed here)? */
static bool takes_bias(const vd_net *net, int li) {
    return net->layers[li].inplace && vd_op_bias_taker(net, li) >= 0;
}

/* The batch norm + add fusion as the CLI's plans fold (vd_plan_opts.
 * fuse_bn_add: not no_fuse, channels-last maps, the batch norm and the add
 * whole, as timed here): batch norm li computes its statistics alone
 * (vd_op_io.bn_stats) and its add normalises its x; bn_folded(add) is that
 * batch norm, or -1. */
static bool bn_fold_on(const prof *p) { return !p->c->no_fuse && vd_math_nhwc(p->c->math); }
static bool bn_stats_only(const prof *p, int li) {
    return bn_fold_on(p) && vd_op_bn_folder(p->net, li) >= 0;
}
static int bn_folded(const prof *p, int li) {
    return bn_fold_on(p) ? vd_op_bn_folded(p->net, li) : -1;
}

static void plan_layer(const prof *p, int li, layer_buf *b) {
    const vd_net *net = p->net;
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &p->c->layers[li];
    uint64_t off = 0, n = (uint64_t)p->batch;
    memset(b, 0, sizeof *b);
    for (int k = 0; k < l->n_in; k++) {
        uint64_t bytes = n * (uint64_t)in_numel(net, l->in[k]) * sizeof(float);
        b->x[k] = take(&off, bytes);
        b->dx[k] = take(&off, bytes);
    }
    uint64_t ybytes = n * (uint64_t)vd_net_out_numel(net, li) * sizeof(float);
    b->y = take(&off, ybytes);
    b->dy = take(&off, ybytes);
    uint64_t pbytes = (uint64_t)layer_param_floats(net, li) * sizeof(float);
    b->par = take(&off, pbytes);
    b->grad = take(&off, pbytes);
    b->aux = take(&off, p->be->layer_aux_bytes(net, li, p->batch));
    b->labels = take(&off, n * sizeof(int32_t));
    uint64_t ws = 0;
    for (int k = 0; k < L->n_opts; k++)
        if (L->opts[k].workspace > ws) ws = L->opts[k].workspace;
    b->ws = take(&off, ws);
    /* a ReLU that takes its conv's bias gradient: that gradient (make_io) */
    int r = vd_op_pool_relu(net, li);   /* a max pool that takes its ReLU's: that one too */
    b->bias = take(&off, takes_bias(net, li) || (r >= 0 && takes_bias(net, r))
                             ? (uint64_t)l->c * sizeof(float) : 0);
    /* an add that applies a batch norm: its statistics, gamma and beta */
    b->bn = take(&off, bn_folded(p, li) >= 0 ? 4u * (uint64_t)l->c * sizeof(float) : 0);
    b->end = off;
}

/* Whether backward accumulates into input k's gradient of layer li (dx_beta
 * 1), as the plan has it (tensors.c): backward runs the layers L-1..0, the
 * inputs of each in order, and only the first writer of a gradient
 * overwrites it. ResNet's bottleneck conv1 adds its dx to the gradient its
 * block's skip path wrote, and an accumulating backward-data can run other,
 * slower kernels than an overwriting one: it is timed as it runs. */
static bool dx_accumulates(const vd_net *net, int li, int k) {
    int src = net->layers[li].in[k];
    if (src < 0) return false;
    for (int q = 0; q < k; q++)
        if (net->layers[li].in[q] == src) return true;
    for (int j = li + 1; j < net->n_layers; j++)
        for (int q = 0; q < net->layers[j].n_in; q++)
            if (net->layers[j].in[q] == src) return true;
    return false;
}

/* Does the plan give input k of add li the add's own dy tensor, so that
 * the add's backward writes nothing for it (tensors.c alias_grads: the add
 * is the first backward writer of that gradient, the input appears once and
 * has the add's size; the tree rules there refuse it only in DAGs where
 * another consumer would read the shared tensor out of order: none in the
 * shipped nets, ResNet-50's 32 inputs all share, test_alias_resnet50)?
 * Timed as the plan runs it: no copy. */
static bool add_shares_dy(const vd_net *net, int li, int k) {
    const vd_layer *l = &net->layers[li];
    int src = l->in[k];
    if (l->op != VD_OP_ADD || src < 0 || net->layers[src].no_grad) return false;
    if (dx_accumulates(net, li, k)) return false;
    for (int q = 0; q < l->n_in; q++)
        if (q != k && l->in[q] == src) return false;
    return vd_net_out_numel(net, src) == vd_net_out_numel(net, li);
}

/* The batch norm + add + ReLU backward pair as the plan pairs it
 * (vd_plan_layer.takes_add_relu: the three whole, as timed here, the add
 * writing no input's gradient, add_shares_dy; with the batch norm + add
 * fusion on, bn_fold_on, as the plan's vd_plan_opts.fuse_bn_add): the ReLU
 * whose backward batch norm li runs (vd_op_io.relu_y), or -1. */
static int add_relu_of(const prof *p, int li) {
    const vd_net *net = p->net;
    int r = bn_fold_on(p) ? vd_op_add_relu(net, li) : -1;
    if (r < 0) return -1;
    const vd_layer *la = &net->layers[li + 1];
    for (int k = 0; k < la->n_in; k++)
        if (la->in[k] >= 0 && !net->layers[la->in[k]].no_grad && !add_shares_dy(net, li + 1, k))
            return -1;
    return r;
}

/* Whether ReLU li's backward is its fusion partner's where a plan pairs
 * them whole: a max pool's after it, or a batch norm's before its add
 * (the plan's vd_plan_unit_taken). */
static bool relu_taken(const prof *p, int li) {
    const vd_net *net = p->net;
    return (li + 1 < net->n_layers && vd_op_pool_relu(net, li + 1) == li) ||
           (li >= 2 && add_relu_of(p, li - 2) == li);
}

/* Does conv li's bias gradient go to the ReLU after it (takes_bias)? */
static bool bias_taken(const vd_net *net, int li) {
    return li + 1 < net->n_layers && takes_bias(net, li + 1) && vd_op_bias_taker(net, li + 1) == li;
}

/* Whether layer li's backward runs in a fusion pair where a plan pairs it
 * whole (vd_plan_layer.takes_relu, takes_add_relu, db_unit): a max pool
 * that takes its ReLU's backward, a batch norm that takes the backward of
 * the ReLU after its add, or that ReLU (relu_taken); a conv whose bias
 * gradient the ReLU after it reduces. A split member runs alone: it is
 * timed alone too (make_io's paired false: vd_profile_algo.bwd_alone_s,
 * the chunks; a split conv reduces its own bias gradient). The ReLU of
 * that last pair is timed reducing it, paired or not: a ReLU in a max
 * pool's pair is timed alone as it runs where the pool does not take it,
 * still paired with its conv. */
static bool in_pair(const prof *p, int li) {
    return vd_op_pool_relu(p->net, li) >= 0 || add_relu_of(p, li) >= 0 || relu_taken(p, li) ||
           bias_taken(p->net, li);
}

/* Layer li's operands in b with option algo; paired: its fusion pair's
 * (in_pair) as the plan runs it whole, else the layer alone. */
static void make_io(const prof *p, int li, const layer_buf *b, int algo, bool paired,
                    vd_op_io *io) {
    const vd_net *net = p->net;
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &p->c->layers[li];
    char *s = p->scratch;
    memset(io, 0, sizeof *io);
    io->n = p->batch;
    for (int k = 0; k < l->n_in; k++) {
        io->x[k] = (const float *)(s + b->x[k]);
        /* the net input gets no gradient (batch norm then writes its dx into its
         * workspace: cu_bn_spare_bytes) */
        if (l->in[k] >= 0 && !add_shares_dy(net, li, k)) io->dx[k] = (float *)(s + b->dx[k]);
        io->dx_beta[k] = dx_accumulates(net, li, k) ? 1.0f : 0.0f;
    }
    io->y = (float *)(s + b->y);
    /* a layer that runs in place is timed in place (a ReLU fused into its
     * conv is then a no-op, as in training: cu_layer.relu_fused); a ReLU
     * whose backward a batch norm may take writes its dy tensor, as the plan
     * has it (tensors.c; a no-op where the batch norm takes it:
     * cu_layer.relu_bwd_fused) */
    if (l->inplace && l->n_in == 1) io->y = (float *)io->x[0];
    if (vd_op_relu_taker(net, li) >= 0) io->dx[0] = (float *)(s + b->dy);
    io->dy = (const float *)(s + b->dy);
    /* the ReLU backward + conv bias gradient pair is timed as it runs: the
     * ReLU reduces it (a no-op with no_fuse), the conv skips it (alone, it
     * reduces its own: in_pair) */
    if (takes_bias(net, li)) io->bias_db = (float *)(s + b->bias);
    io->db_taken = paired && bias_taken(net, li);
    /* the batch norm + add fusion is timed as it runs: the batch norm's
     * statistics alone in place, the add normalising its x (bn_fold_on) */
    if (bn_stats_only(p, li)) {
        io->bn_stats = true;
        io->y = (float *)io->x[0];
    }
    int bn = bn_folded(p, li);
    if (bn >= 0) {
        float *f = (float *)(s + b->bn);
        for (int k = 0; k < l->n_in; k++)
            if (l->in[k] == bn) io->bn_k = k;
        io->bn_aux = f;
        io->bn_w = f + 2 * l->c;
        io->bn_b = f + 3 * l->c;
    }
    /* the max pool + ReLU backward pair as the plan pairs them
     * (vd_plan_layer.takes_relu: whole, the ReLU's dx its dy tensor): the
     * pool runs both (with the ReLU's bias gradient), the ReLU nothing
     * (each as it would alone with no_fuse) */
    int r = paired ? vd_op_pool_relu(net, li) : -1;
    if (r >= 0) {
        io->relu_dx = true;
        if (takes_bias(net, r)) io->bias_db = (float *)(s + b->bias);
    }
    /* the batch norm + add + ReLU backward pair (add_relu_of): the batch
     * norm runs both, on a y of the add's size (its own y's buffer, not x
     * even where it runs in place), the
     * ReLU nothing, in place (each as it would alone with no_fuse) */
    if (paired && add_relu_of(p, li) >= 0) io->relu_y = (const float *)(s + b->y);
    if (paired && relu_taken(p, li)) {   /* either pair's ReLU */
        io->dx[0] = (float *)(s + b->dy);
        io->bwd_done = true;
    }
    /* parameters in the net's order: conv/fc weight [bias]; bn weight bias rm rv */
    float *par = (float *)(s + b->par), *grad = (float *)(s + b->grad);
    int64_t off = 0;
    for (int q = 0; q < l->n_params; q++) {
        const vd_param *pp = &net->params[l->param_first + q];
        vd_op_io_bind_param(io, pp->role, par + off, grad + off);
        off += pp->numel;
    }
    io->aux = p->be->layer_aux_bytes(net, li, p->batch) ? (float *)(s + b->aux) : NULL;
    io->labels = (const int32_t *)(s + b->labels);
    io->ws = s + b->ws;
    io->ws_bytes = L->n_opts ? L->opts[algo].workspace : 0;
    io->algo = algo;
    io->seed = 1;
    io->iter = 0;
    io->training = true;
    io->act = vd_math_act_dtype(p->c->math);
}

/* Seconds of layer li's forward (bwd: backward) as a captured iteration
 * runs it: the median over PROF_REPS after one warm-up, each timed run
 * queued behind a spin kernel lasting twice the host's enqueue of the op
 * (timed on the run before; at most SPIN_MAX_NS, a first run's setup) plus
 * SPIN_MARGIN_NS, so the start event is reached after the op's kernels are
 * all queued: the device's time alone, without the launch latency of the
 * op's first kernel or the host's work between its kernels. A replayed
 * graph still pays one launch on the device (p->launch_s, the rate of
 * back-to-back launches) where each op's first kernel waits for the op
 * before it, which the spin hides here: it is added to every op that
 * launched a kernel. One that launched none (a ReLU its producer applied,
 * a backward its fusion partner took) times at the two events' own gap,
 * well under one launch, and is left as timed. */
static int time_op(prof *p, int li, const vd_op_io *io, bool bwd, double *sec, vd_err *e) {
    const double SPIN_MARGIN_NS = 20e3, SPIN_MAX_NS = 10e6;
    float t[PROF_REPS];
    cudaStream_t s = cu_compute(p->c);
    double host_s = 0;
    for (int r = -1; r < PROF_REPS; r++) {
        if (r >= 0) {
            double ns = 2e9 * host_s < SPIN_MAX_NS ? 2e9 * host_s : SPIN_MAX_NS;
            int rc = cuk_spin(s, (uint64_t)(ns + SPIN_MARGIN_NS), e);
            if (rc) return rc;
        }
        CUDA_CHECK(e, cudaEventRecord(p->ev[0], s));
        double t0 = vd_now();
        int rc = bwd ? p->be->backward(p->be, p->net, li, io, e)
                     : p->be->forward(p->be, p->net, li, io, e);
        if (rc) return rc;
        host_s = vd_now() - t0;
        CUDA_CHECK(e, cudaEventRecord(p->ev[1], s));
        CUDA_CHECK(e, cudaEventSynchronize(p->ev[1]));
        if (r >= 0) CUDA_CHECK(e, cudaEventElapsedTime(&t[r], p->ev[0], p->ev[1]));
    }
    *sec = median(t, PROF_REPS) * 1e-3;
    if (*sec >= 0.5 * p->launch_s) *sec += p->launch_s;
    return VD_OK;
}

/* The launch overhead of a kernel in a replayed graph
 * (vd_device_params.graph_launch_s): LAUNCH_REPS empty kernels captured in
 * stream order, the graph replayed once to load it, then timed. */
static int time_graph_launch(prof *p, double *sec, vd_err *e) {
    cudaStream_t s = cu_compute(p->c);
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    int rc = VD_OK;
    float ms = 0;
    CUDA_CHECK(e, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < LAUNCH_REPS && !rc; r++) rc = cuk_empty(s, e);
    cudaError_t st = cudaStreamEndCapture(s, &g);
    if (rc) goto done;
    if (st != cudaSuccess) {
        rc = cu_cuda_err(e, st, __func__, __FILE__, __LINE__, "cudaStreamEndCapture(s, &g)");
        goto done;
    }
    CUDA_GOTO(e, rc, done, cudaGraphInstantiate(&x, g, 0));
    CUDA_GOTO(e, rc, done, cudaGraphLaunch(x, s));
    CUDA_GOTO(e, rc, done, cudaEventRecord(p->ev[0], s));
    CUDA_GOTO(e, rc, done, cudaGraphLaunch(x, s));
    CUDA_GOTO(e, rc, done, cudaEventRecord(p->ev[1], s));
    CUDA_GOTO(e, rc, done, cudaEventSynchronize(p->ev[1]));
    CUDA_GOTO(e, rc, done, cudaEventElapsedTime(&ms, p->ev[0], p->ev[1]));
    *sec = ms * 1e-3 / LAUNCH_REPS;
done:
    if (x) cudaGraphExecDestroy(x);
    if (g) cudaGraphDestroy(g);
    return rc;
}

/* Issue n COPY_BYTES copies in mode's direction (0 D2H, 1 H2D, 2 both at
 * once, n each way) between events ev[0] and ev[1], both on the first copy
 * stream (the other joins it); after_ev2: they start once event ev[2] has
 * (the caller's, recorded before). Does not wait. */
static int enqueue_copies(prof *p, int mode, int n, bool after_ev2, vd_err *e) {
    cu_ctx *c = p->c;
    cudaStream_t d2h = c->stream[VD_STREAM_D2H], h2d = c->stream[VD_STREAM_H2D];
    cudaStream_t first = mode == 1 ? h2d : d2h;
    char *dev0 = p->scratch + p->copy_off, *dev1 = dev0 + COPY_BYTES;
    if (after_ev2) CUDA_CHECK(e, cudaStreamWaitEvent(first, p->ev[2], 0));
    CUDA_CHECK(e, cudaEventRecord(p->ev[0], first));
    if (mode == 2) CUDA_CHECK(e, cudaStreamWaitEvent(h2d, p->ev[0], 0));
    for (int k = 0; k < n; k++) {
        if (mode == 0 || mode == 2)
            CUDA_CHECK(e, cudaMemcpyAsync(p->host[0], dev0, COPY_BYTES, cudaMemcpyDeviceToHost, d2h));
        if (mode == 1 || mode == 2)
            CUDA_CHECK(e, cudaMemcpyAsync(dev1, p->host[1], COPY_BYTES, cudaMemcpyHostToDevice, h2d));
    }
    if (mode == 2) {
        CUDA_CHECK(e, cudaEventRecord(p->ev[2], h2d));
        CUDA_CHECK(e, cudaStreamWaitEvent(d2h, p->ev[2], 0));
    }
    CUDA_CHECK(e, cudaEventRecord(p->ev[1], first));
    return VD_OK;
}

/* One copy direction (or both at once) of COPY_BYTES: bytes/s. */
static int time_copies(prof *p, int mode, double *bw, vd_err *e) {
    float t[COPY_REPS];
    for (int r = -1; r < COPY_REPS; r++) {
        int rc = enqueue_copies(p, mode, 1, false, e);
        if (rc) return rc;
        CUDA_CHECK(e, cudaEventSynchronize(p->ev[1]));
        if (r >= 0) CUDA_CHECK(e, cudaEventElapsedTime(&t[r], p->ev[0], p->ev[1]));
    }
    double s = median(t, COPY_REPS) * 1e-3;
    *bw = (double)COPY_BYTES * (mode == 2 ? 2.0 : 1.0) / (s > 0 ? s : 1e-9);
    return VD_OK;
}

/* The memory-bound kernel beside the busy copies (see the top): an fp32
 * ReLU in place over the scratch's first 2 x COPY_BYTES (reads and writes
 * 1 GiB). In place, the layers' values there stay valid for the passes
 * timed after it: each fp32 word (or pair of 16-bit values, the sign in the
 * upper one) is kept or zeroed, never made a NaN. */
static int enqueue_load(prof *p, vd_err *e) {
    const int64_t n = (int64_t)(2 * COPY_BYTES / sizeof(float));
    return cuk_relu_fwd(cu_compute(p->c), p->c->sm_count, (const float *)p->scratch,
                        (float *)p->scratch, n, VD_DT_F32, e);
}

/* *load_s: one enqueue_load's time alone (the mean of 8 launches). */
static int time_load(prof *p, double *load_s, vd_err *e) {
    enum { LOAD_TIMING = 8 };
    cudaStream_t s = cu_compute(p->c);
    CUDA_CHECK(e, cudaEventRecord(p->ev[2], s));
    for (int k = 0; k < LOAD_TIMING; k++) {
        int rc = enqueue_load(p, e);
        if (rc) return rc;
    }
    CUDA_CHECK(e, cudaEventRecord(p->ev[3], s));
    CUDA_CHECK(e, cudaEventSynchronize(p->ev[3]));
    float ms = 0;
    CUDA_CHECK(e, cudaEventElapsedTime(&ms, p->ev[2], p->ev[3]));
    *load_s = ms > 0 ? ms * 1e-3 / LOAD_TIMING : 1e-6;
    return VD_OK;
}

/* One copy direction (or both at once, mode as enqueue_copies) of
 * COPY_BYTES beside the memory-bound kernel: bytes/s, the median of
 * COPY_REPS after a warm-up. bw_idle (the rate alone) sizes the kernel's
 * run: launches enough for three times the copies' idle time, the copies
 * starting once the first has ended; a run whose copies end after the
 * kernels is repeated with twice the launches (three tries, up to twelve
 * times the idle time; then VD_EDEVICE: copies at under a twelfth of their
 * idle rate, a broken device). */
static int time_copies_busy(prof *p, int mode, double bw_idle, double *bw, vd_err *e) {
    cudaStream_t s = cu_compute(p->c);
    double load_s;
    int rc = time_load(p, &load_s, e);
    if (rc) return rc;
    double per = mode == 2 ? 2.0 : 1.0;
    double copy_s = (double)COPY_BYTES * per / (bw_idle > 0 ? bw_idle : 1.0);
    int launches = 2 + (int)ceil(3.0 * copy_s / load_s);
    float t[COPY_REPS];
    for (int r = -1; r < COPY_REPS; r++) {
        for (int tries = 0;; tries++) {
            if (tries == 3)
                return vd_errf(e, VD_EDEVICE, "profiling: the %s copies beside the memory-bound "
                               "kernel outlasted %d launches of it", mode == 0 ? "D2H"
                               : mode == 1 ? "H2D" : "both-way", launches);
            if ((rc = enqueue_load(p, e))) return rc;
            CUDA_CHECK(e, cudaEventRecord(p->ev[2], s));   /* the copies start here */
            for (int k = 1; k < launches; k++)
                if ((rc = enqueue_load(p, e))) return rc;
            if ((rc = enqueue_copies(p, mode, 1, true, e))) return rc;
            CUDA_CHECK(e, cudaEventRecord(p->ev[3], s));
            CUDA_CHECK(e, cudaEventSynchronize(p->ev[1]));
            CUDA_CHECK(e, cudaEventSynchronize(p->ev[3]));
            float tail_ms = 0;   /* kernels' end after the copies' end */
            CUDA_CHECK(e, cudaEventElapsedTime(&tail_ms, p->ev[1], p->ev[3]));
            if (tail_ms > 0) break;
            launches *= 2;
        }
        if (r >= 0) CUDA_CHECK(e, cudaEventElapsedTime(&t[r], p->ev[0], p->ev[1]));
    }
    double sec = median(t, COPY_REPS) * 1e-3;
    *bw = (double)COPY_BYTES * per / (sec > 0 ? sec : 1e-9);
    return VD_OK;
}

/* Enqueue layer i's forward (bwd false) or backward on the compute stream
 * with its fastest option, on the layers' shared scratch (the values do not
 * matter; the loss layer, whose labels must be valid, is left out). */
static int enqueue_layer(prof *p, int i, bool bwd, vd_err *e) {
    if (p->net->layers[i].op == VD_OP_SOFTMAX_XENT) return VD_OK;
    layer_buf b;
    plan_layer(p, i, &b);
    vd_op_io io;
    make_io(p, i, &b, 0, true, &io);
    return bwd ? p->be->backward(p->be, p->net, i, &io, e) : p->be->forward(p->be, p->net, i, &io, e);
}

/* The timings of enqueue_pass's forward and backward passes: each layer's
 * option 0 (the loss layer left out, as there). */
static void pass_times(const vd_net *net, const vd_profile *out, double *fwd_s, double *bwd_s) {
    *fwd_s = *bwd_s = 0;
    for (int i = 0; i < net->n_layers; i++) {
        if (net->layers[i].op == VD_OP_SOFTMAX_XENT || out->layers[i].n_algos < 1) continue;
        *fwd_s += out->layers[i].algos[0].fwd_s;
        *bwd_s += out->layers[i].algos[0].bwd_s;
    }
}

/* One pass of the net: every layer's forward, or in reverse its backward. */
static int enqueue_pass(prof *p, bool bwd, vd_err *e) {
    const int L = p->net->n_layers;
    for (int k = 0; k < L; k++) {
        int rc = enqueue_layer(p, bwd ? L - 1 - k : k, bwd, e);
        if (rc) return rc;
    }
    return VD_OK;
}

/* The layers' times under a training iteration's load (see the top): the
 * device runs SUSTAIN_WARM_S of passes (each layer's forward, then each
 * one's backward in reverse, enqueue_pass), then SUSTAIN_REPS more with an
 * event before each op, queued whole before the device reaches them; each
 * op's time is the median of its event gaps. Each layer's option times
 * (and its chunks' and recompute's) are scaled by its sustained time over
 * its option 0's timing: by at least 1 (a back-to-back op that ran faster
 * keeps its own timing) and at most SUSTAIN_MAX (a gap that long is not the
 * clock). The loss layer (enqueue_pass leaves it out) keeps its timings. */
enum { SUSTAIN_REPS = 3, SUSTAIN_WARM_PASSES = 50 };
static const double SUSTAIN_WARM_S = 1.0, SUSTAIN_MAX = 2.0;
/* Op j of a pass of L layers, forward then backward: layer j's forward
 * (j < L), else the backward of layer 2L-1-j; *bwd says which. */
static int sustained_op(int L, int j, bool *bwd) {
    *bwd = j >= L;
    return *bwd ? 2 * L - 1 - j : j;
}
static int time_sustained(prof *p, vd_profile *out, vd_err *e) {
    const vd_net *net = p->net;
    cudaStream_t s = cu_compute(p->c);
    const int L = net->n_layers, n_ev = 2 * L + 1;
    double fwd_s, bwd_s;
    pass_times(net, out, &fwd_s, &bwd_s);
    const double pass_s = fwd_s + bwd_s;
    if (!(pass_s > 0)) return VD_OK;
    /* (at most SUSTAIN_WARM_PASSES: a small net's passes are its launches) */
    int warm = (int)fmin(ceil(SUSTAIN_WARM_S / pass_s), SUSTAIN_WARM_PASSES);
    cudaEvent_t *ev = (cudaEvent_t *)vd_calloc((size_t)n_ev, sizeof *ev, e);
    float *t = (float *)vd_calloc((size_t)SUSTAIN_REPS * 2 * L, sizeof *t, e);
    int rc = ev && t ? VD_OK : VD_ENOMEM;
    for (int k = 0; k < n_ev && !rc; k++)
        if (cudaEventCreate(&ev[k]) != cudaSuccess) rc = vd_errf(e, VD_EDEVICE, "cudaEventCreate failed");
    for (int w = 0; w < warm && !rc; w++) {
        rc = enqueue_pass(p, false, e);
        if (!rc) rc = enqueue_pass(p, true, e);
    }
    for (int r = 0; r < SUSTAIN_REPS && !rc; r++) {
        for (int j = 0; j < 2 * L && !rc; j++) {
            bool bwd;
            const int i = sustained_op(L, j, &bwd);
            if (cudaEventRecord(ev[j], s) != cudaSuccess) {
                rc = vd_errf(e, VD_EDEVICE, "cudaEventRecord failed");
                break;
            }
            rc = enqueue_layer(p, i, bwd, e);
        }
        if (rc) break;
        if (cudaEventRecord(ev[2 * L], s) != cudaSuccess || cudaEventSynchronize(ev[2 * L]) != cudaSuccess) {
            rc = vd_errf(e, VD_EDEVICE, "the sustained pass failed: %s",
                         cudaGetErrorString(cudaGetLastError()));
            break;
        }
        for (int j = 0; j < 2 * L && !rc; j++)
            if (cudaEventElapsedTime(&t[(size_t)j * SUSTAIN_REPS + r], ev[j], ev[j + 1]) != cudaSuccess)
                rc = vd_errf(e, VD_EDEVICE, "cudaEventElapsedTime failed");
    }
    double before = 0, after = 0;
    for (int j = 0; j < 2 * L && !rc; j++) {
        bool bwd;
        const int i = sustained_op(L, j, &bwd);
        vd_profile_layer *pl = &out->layers[i];
        if (net->layers[i].op == VD_OP_SOFTMAX_XENT || pl->n_algos < 1) continue;
        double own = bwd ? pl->algos[0].bwd_s : pl->algos[0].fwd_s;
        double got = median(&t[(size_t)j * SUSTAIN_REPS], SUSTAIN_REPS) * 1e-3;
        double f = own > 0 ? got / own : 1.0;
        f = f < 1.0 ? 1.0 : f > SUSTAIN_MAX ? SUSTAIN_MAX : f;
        before += own;
        after += own * f;
        vd_profile_layer_scale(pl, bwd, f);
        if (f > 1.0)
            cg_dbg(p->c, 2, "profile: layer '%s' %s x%.3f under load", pl->name,
                   bwd ? "backward" : "forward", f);
    }
    if (!rc)
        cg_dbg(p->c, 1, "profile: a pass of the net (option 0) %.3f ms timed alone, %.3f ms under "
               "load (%d passes before)", before * 1e3, after * 1e3, warm);
    for (int k = 0; ev && k < n_ev; k++)
        if (ev[k]) cudaEventDestroy(ev[k]);
    vd_free(ev);
    vd_free(t);
    return rc;
}

/* Option algo of layer li (operands in b) on the chunks auto splits into
 * (vd_profile_chunk_time), with the workspace each pass's convolutions
 * used there (cu_ctx.conv_ws_used; a chunk's plan needs less than the
 * whole batch's where its engine's grows with the batch: the planner gives
 * a split layer's steps that, vd_profile_chunk_ws): the first batch / k
 * samples of the same buffers, alone (a split layer is in no fusion pair:
 * in_pair), into cs[*n]. Option 0 prices every option's chunks but those
 * timed here themselves: a split
 * conv option runs a chunk of whole sub-batches through the sub-batch plans
 * it was timed with, not through a plan built for the chunk's batch as
 * option 0 does. The backward of a layer with parameters is timed
 * overwriting their gradients, as the first chunk runs, and adding to them,
 * as the other k - 1 do (dw_beta: a convolution's filter gradient that
 * accumulates may run other kernels), and priced at the chunks' mean. A
 * refinement: where a chunk cannot be timed the option keeps the scaled
 * time (the error is dropped; a CUDA error is still caught by the next
 * checked call). */
static void time_chunks(prof *p, int li, const layer_buf *b, int algo, vd_profile_chunk *cs,
                        int *n) {
    static const int chunk_ks[] = VD_PROFILE_CHUNK_KS;
    const vd_layer *l = &p->net->layers[li];
    const bool params = layer_param_floats(p->net, li) > 0;
    *n = 0;
    for (size_t q = 0; q < VD_ARRAY_LEN(chunk_ks) && chunk_ks[q] <= p->batch &&
                       *n < VD_PROFILE_MAX_CHUNKS; q++) {
        vd_op_io io;
        make_io(p, li, b, algo, false, &io);
        io.n = p->batch / chunk_ks[q];
        io.n_batch = p->batch;
        vd_profile_chunk *pc = &cs[*n];
        vd_err ce;
        memset(&ce, 0, sizeof ce);
        pc->k = chunk_ks[q];
        double add_s = 0;
        p->c->conv_ws_used = 0;
        bool timed = !time_op(p, li, &io, false, &pc->fwd_s, &ce);
        pc->fwd_ws = p->c->conv_ws_used;
        p->c->conv_ws_used = 0;
        timed = timed && !time_op(p, li, &io, true, &pc->bwd_s, &ce);
        if (timed && params) {
            io.dw_beta = 1.0f;
            timed = !time_op(p, li, &io, true, &add_s, &ce);
        }
        pc->bwd_ws = p->c->conv_ws_used;
        /* every call of a graph-API conv layer counts its workspace */
        pc->has_ws = l->op == VD_OP_CONV && p->c->layers[li].g;
        if (!timed) {
            cg_dbg(p->c, 1, "layer '%s' option %d: not timed on %d chunks: %s", l->name, algo,
                   pc->k, ce.msg);
            return;
        }
        if (params) pc->bwd_s = (pc->bwd_s + (pc->k - 1) * add_s) / pc->k;
        (*n)++;
    }
}

/* How much copies slow a pass of the net, per second of copying beside it
 * (vd_device_params.compute_slow_d2h / _h2d): mode 0 D2H copies beside the
 * forward pass, 1 H2D beside the backward. As many COPY_BYTES copies as
 * fit in 80% of the pass (pass_s) at rate bw (their busy rate); the pass
 * timed with them and alone, SLOW_PAIRS times each in turn, the median of
 * the pairs' ratios (extra pass time over the time the copies ran beside
 * it). It runs right after time_sustained, with the device under load:
 * at its power limit a copy's power lowers the clock of the kernels beside
 * it, which on an idle device it does not (docs/results/2026-12-07-s25).
 * Pass and copies start together: each run is held back by memory-bound
 * kernels lasting twice the host's enqueue of the pass and the copies
 * (timed on a first, warm-up run), and both start at the event after them,
 * so neither the copies' overlap nor the pass's time depends on how fast
 * the host issues the pass (issued behind the pass, the copies overlapped
 * only its tail where the host barely keeps ahead of its kernels). *copy_bw:
 * the copies' rate beside the pass (bytes/s, the median of the runs with
 * them). *slow and *copy_bw are left alone when the pass is too short for
 * one copy. */
enum { SLOW_PAIRS = 3 };
static int time_compute_slow(prof *p, int mode, double pass_s, double bw, double *slow,
                             double *copy_bw, vd_err *e) {
    cudaStream_t s = cu_compute(p->c);
    int n = (int)(0.8 * pass_s * bw / (double)COPY_BYTES);
    if (n < 1) return VD_OK;
    if (n > 64) n = 64;
    double load_s, host_s = 0;
    int rc = time_load(p, &load_s, e);
    if (rc) return rc;
    float ratio[SLOW_PAIRS], rate[SLOW_PAIRS];
    double with_s = 0, beside_s = 0;
    /* r -1: the warm-up, ungated, which times the host's enqueue of the
     * pass and the copies; then pairs: even r with the copies, odd alone */
    for (int r = -1; r < 2 * SLOW_PAIRS; r++) {
        bool copies = r < 0 || r % 2 == 0;
        int gate = r < 0 ? 0 : 1 + (int)ceil(2.0 * host_s / load_s);
        for (int k = 0; k < gate; k++)
            if ((rc = enqueue_load(p, e))) return rc;
        CUDA_CHECK(e, cudaEventRecord(p->ev[2], s));   /* the pass and the copies start here */
        double t0 = vd_now();
        rc = enqueue_pass(p, mode != 0, e);
        if (!rc && copies) rc = enqueue_copies(p, mode, n, true, e);
        if (rc) return rc;
        if (r < 0) host_s = vd_now() - t0;
        CUDA_CHECK(e, cudaEventRecord(p->ev[3], s));
        CUDA_CHECK(e, cudaStreamSynchronize(s));
        if (copies) CUDA_CHECK(e, cudaEventSynchronize(p->ev[1]));
        if (r < 0) continue;
        float pass_ms = 0;
        CUDA_CHECK(e, cudaEventElapsedTime(&pass_ms, p->ev[2], p->ev[3]));
        if (copies) {
            float copy_ms = 0;
            CUDA_CHECK(e, cudaEventElapsedTime(&copy_ms, p->ev[0], p->ev[1]));
            with_s = pass_ms * 1e-3;
            beside_s = fmin(copy_ms * 1e-3, with_s);
            rate[r / 2] = copy_ms > 0 ? (float)(n * (double)COPY_BYTES / (copy_ms * 1e-3)) : 0.0f;
            continue;
        }
        ratio[r / 2] = beside_s > 0 ? (float)((with_s - pass_ms * 1e-3) / beside_s) : 0.0f;
    }
    double f = median(ratio, SLOW_PAIRS);
    *slow = f > 1 ? 1 : f > 0 ? f : 0;   /* noise below zero, the file's limit above */
    *copy_bw = median(rate, SLOW_PAIRS);
    return VD_OK;
}

static void device_params(const cu_ctx *c, vd_device_params *d) {
    memset(d, 0, sizeof *d);
    if (strstr(c->dev_name, "H200")) snprintf(d->name, sizeof d->name, "h200");
    else if (strstr(c->dev_name, "H100")) snprintf(d->name, sizeof d->name, "h100");
    else {
        size_t j = 0;
        for (const char *s = c->dev_name; *s && j + 1 < sizeof d->name; s++)
            d->name[j++] = isalnum((unsigned char)*s) ? (char)tolower((unsigned char)*s) : '-';
        d->name[j] = 0;
    }
    int clk = 0, mclk = 0, bus = 0;
    if (cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, c->device) != cudaSuccess) clk = 0;
    if (cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, c->device) != cudaSuccess) mclk = 0;
    if (cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, c->device) != cudaSuccess)
        bus = 0;
    cudaGetLastError();
    /* 128 fp32 FMA lanes per SM on sm_80/sm_90; TF32 tensor cores ~7.4x that
     * (H100 SXM datasheet: 494 vs 67 TFLOP/s dense) */
    d->peak_flops = (double)c->sm_count * clk * 1e3 * 128 * 2;
    if (c->math == VD_MATH_TF32) d->peak_flops *= 7.4;
    /* bf16 dense tensor cores ~14.8x (H100 SXM: 989 TFLOP/s) */
    d->peak_flops_bf16 = d->peak_flops * (c->math == VD_MATH_TF32 ? 2.0 : 14.8);
    d->peak_flops_fp16 = d->peak_flops_bf16;   /* the same tensor-core rate (fp32 accumulation) */
    d->mem_bw = 2.0 * mclk * 1e3 * bus / 8.0;
    d->mem_bytes = c->total_mem;
}

extern "C" int vd_profile_measure(vd_backend *be, const vd_net *net, int batch, vd_profile *out,
                                  vd_err *e) {
    memset(out, 0, sizeof *out);
    if (!be || !be->name || strcmp(be->name, "cuda") != 0)
        return vd_errf(e, VD_EUNSUPPORTED, "measuring a profile needs the cuda backend");
    cu_ctx *c = (cu_ctx *)be->ctx;
    if (c->net != net || c->batch != batch)
        return vd_errf(e, VD_EUSAGE,
                       "vd_profile_measure: the backend is not set up for this net at batch %d",
                       batch);
    prof p;
    memset(&p, 0, sizeof p);
    p.c = c;
    p.be = be;
    p.net = net;
    p.batch = batch;
    int rc = VD_OK;
    cudaStream_t s = cu_compute(c);
    /* scratch: the largest layer, the optimizer's arrays (at least the
     * memory-bound kernel's 2 x COPY_BYTES: enqueue_load), two copy buffers */
    uint64_t need = 2 * COPY_BYTES;
    for (int i = 0; i < net->n_layers; i++) {
        layer_buf b;
        plan_layer(&p, i, &b);
        if (b.end > need) need = b.end;
    }
    /* the update's arrays: parameters, gradients and the optimizer's state
     * (SGD: the momentum; AdamW: exp_avg, exp_avg_sq), each of param_floats */
    uint64_t sgd_floats = (uint64_t)net->param_floats;
    uint64_t sgd_arrays = 2 + (uint64_t)vd_optimizer_state_arrays(net->train.optimizer);
    uint64_t sgd_bytes = sgd_arrays * VD_ALIGN_UP(sgd_floats * sizeof(float), ALIGN);
    if (sgd_bytes > need) need = sgd_bytes;
    p.copy_off = VD_ALIGN_UP(need, ALIGN);   /* the copies' buffers after everything else */
    need = p.copy_off + 2 * COPY_BYTES;
    {
        size_t fr = 0, tot = 0;
        CUDA_CHECK(e, cudaMemGetInfo(&fr, &tot));
        if (need + (256ull << 20) > fr) {
            char b1[32], b2[32];
            return vd_errf(e, VD_EDEVICE,
                           "profiling needs %s of scratch device memory for its largest layer at "
                           "batch %d, but only %s is free; profile at a smaller batch",
                           vd_fmt_bytes(need, b1, sizeof b1), batch, vd_fmt_bytes(fr, b2, sizeof b2));
        }
    }
#define TRY(expr) CUDA_GOTO(e, rc, done, expr)
#define TRYRC(expr)                                                                          \
    do {                                                                                     \
        if ((rc = (expr))) goto done;                                                        \
    } while (0)
    {
        TRY(cudaMalloc((void **)&p.scratch, need));
        p.scratch_bytes = need;
        for (int i = 0; i < 2; i++) TRY(cudaMallocHost(&p.host[i], COPY_BYTES));
        for (int i = 0; i < 4; i++) TRY(cudaEventCreate(&p.ev[i]));
        TRYRC(cuk_fill_uniform(s, c->sm_count, (float *)p.scratch, (int64_t)(need / sizeof(float)),
                               12345, -1.0f, 1.0f, vd_math_act_dtype(c->math), e));
        memset(p.host[0], 0, COPY_BYTES);
        memset(p.host[1], 0, COPY_BYTES);

        snprintf(out->source, sizeof out->source, "measured:cuda");
        snprintf(out->net, sizeof out->net, "%s", net->name);
        out->batch = batch;
        out->math = c->math;
        device_params(c, &out->dev);
        /* launch overhead: back-to-back empty kernels (before the layers:
         * time_op adds it) */
        {
            TRYRC(cuk_empty(s, e));
            TRY(cudaEventRecord(p.ev[0], s));
            for (int r = 0; r < LAUNCH_REPS; r++) TRYRC(cuk_empty(s, e));
            TRY(cudaEventRecord(p.ev[1], s));
            TRY(cudaEventSynchronize(p.ev[1]));
            float ms = 0;
            TRY(cudaEventElapsedTime(&ms, p.ev[0], p.ev[1]));
            out->dev.launch_s = p.launch_s = ms * 1e-3 / LAUNCH_REPS;
        }
        TRYRC(time_graph_launch(&p, &out->dev.graph_launch_s, e));
        out->n_layers = net->n_layers;
        out->layers = (vd_profile_layer *)vd_calloc((size_t)net->n_layers, sizeof *out->layers, e);
        if (!out->layers) { rc = VD_ENOMEM; goto done; }

        for (int i = 0; i < net->n_layers; i++) {
            if (be->opts.stop && *be->opts.stop) {
                rc = vd_errf(e, VD_ESTOP, "profiling stopped at layer %d of %d", i,
                             net->n_layers);
                goto done;
            }
            const vd_layer *l = &net->layers[i];
            const cu_layer *L = &c->layers[i];
            vd_profile_layer *pl = &out->layers[i];
            snprintf(pl->name, sizeof pl->name, "%s", l->name);
            pl->aux_bytes = be->layer_aux_bytes(net, i, batch);
            layer_buf b;
            plan_layer(&p, i, &b);
            if (l->op == VD_OP_SOFTMAX_XENT) {   /* valid labels */
                TRYRC(cuk_fill_labels(s, c->sm_count, (int32_t *)(p.scratch + b.labels), batch,
                                      net->classes, e));
            }
            int nopt = L->n_opts < VD_PROFILE_MAX_ALGOS ? L->n_opts : VD_PROFILE_MAX_ALGOS;
            pl->n_algos = nopt;
            for (int k = 0; k < nopt; k++) {
                vd_op_io io;
                make_io(&p, i, &b, k, true, &io);
                if (io.rv)   /* a running variance is positive (its inverse square root scales) */
                    TRYRC(cuk_fill_uniform(s, c->sm_count, io.rv,
                                           role_numel(net, i, VD_ROLE_RUNNING_VAR), 7, 0.5f, 1.5f,
                                           VD_DT_F32, e));
                vd_profile_algo *pa = &pl->algos[k];
                snprintf(pa->label, sizeof pa->label, "%s", L->opts[k].label);
                pa->workspace = L->opts[k].workspace;
                pa->fwd_workspace = vd_algo_ws(&L->opts[k], false);
                pa->bwd_workspace = vd_algo_ws(&L->opts[k], true);
                pa->fwd_algo = L->opts[k].fwd_algo;
                pa->bwd_data_algo = L->opts[k].bwd_data_algo;
                pa->bwd_filter_algo = L->opts[k].bwd_filter_algo;
                TRYRC(time_op(&p, i, &io, false, &pa->fwd_s, e));
                TRYRC(time_op(&p, i, &io, true, &pa->bwd_s, e));
                pa->bwd_alone_s = 0;
                if (in_pair(&p, i)) {
                    make_io(&p, i, &b, k, false, &io);
                    TRYRC(time_op(&p, i, &io, true, &pa->bwd_alone_s, e));
                }
            }
            /* a recompute that re-runs with the state its forward saved
             * (batch norm: normalising with the saved statistics, which the
             * forward timing above left in aux) costs its own time */
            if (nopt > 0 && vd_op_table[l->op].recomputable && pl->aux_bytes > 0) {
                vd_op_io io;
                make_io(&p, i, &b, 0, true, &io);
                io.recompute = true;
                TRYRC(time_op(&p, i, &io, false, &pl->rc_s, e));
            }
            /* option 0 on the chunks auto splits into, and each split conv
             * option, which runs a chunk otherwise (time_chunks) */
            if (nopt > 0 && vd_op_table[l->op].chunkable && l->op != VD_OP_SOFTMAX_XENT) {
                time_chunks(&p, i, &b, 0, pl->chunks, &pl->n_chunks);
                for (int k = 1; l->op == VD_OP_CONV && k < nopt; k++)
                    if (L->conv_opts[k].split > 1)
                        time_chunks(&p, i, &b, k, pl->algos[k].chunks, &pl->algos[k].n_chunks);
            }
        }

        /* the run's optimizer's update over every parameter (its hyperparameters
         * do not change its time; a step past the first reads the state) */
        {
            uint64_t arr = VD_ALIGN_UP(sgd_floats * sizeof(float), ALIGN);
            float *par = (float *)p.scratch;
            float *grad = (float *)(p.scratch + arr);
            float *m = (float *)(p.scratch + 2 * arr);
            float *v = sgd_arrays > 3 ? (float *)(p.scratch + 3 * arr) : NULL;
            const vd_train_cfg *tc = &net->train;
            vd_optim_step o;
            memset(&o, 0, sizeof o);
            o.kind = tc->optimizer;
            o.lr = 1e-6f;
            o.weight_decay = 5e-4f;
            o.momentum = 0.9f;
            o.nesterov = tc->nesterov;
            o.beta1 = 0.9f;
            o.beta2 = 0.999f;
            o.eps = 1e-8f;
            o.t = 2;
            vd_update_range ur = {0, (int64_t)sgd_floats, 1.0f};
            vd_step_scalars ss = vd_step_scalars_of(&o, 0);
            TRYRC(be->ranges_create(be, &ur, 1, &p.table, e));
            TRYRC(be->step_set(be, &ss, e));
            float t[PROF_REPS];
            for (int r = -1; r < PROF_REPS; r++) {
                TRY(cudaEventRecord(p.ev[0], s));
                TRYRC(be->update(be, &o, par, grad, m, v, p.table, e));
                TRY(cudaEventRecord(p.ev[1], s));
                TRY(cudaEventSynchronize(p.ev[1]));
                if (r >= 0) TRY(cudaEventElapsedTime(&t[r], p.ev[0], p.ev[1]));
            }
            out->sgd_s = median(t, PROF_REPS) * 1e-3;
        }

        vd_device_params *d = &out->dev;
        TRYRC(time_copies(&p, 0, &d->d2h_bw, e));
        TRYRC(time_copies(&p, 1, &d->h2d_bw, e));
        TRYRC(time_copies(&p, 2, &d->both_bw, e));
        /* then as an iteration's copies run: beside busy compute (see the top) */
        TRYRC(time_copies_busy(&p, 0, d->d2h_bw, &d->d2h_bw_busy, e));
        TRYRC(time_copies_busy(&p, 1, d->h2d_bw, &d->h2d_bw_busy, e));
        TRYRC(time_copies_busy(&p, 2, d->both_bw, &d->both_bw_busy, e));
        /* last, under load: the layers' times, then what copies cost beside them */
        TRYRC(time_sustained(&p, out, e));
        double fwd_s, bwd_s;
        pass_times(net, out, &fwd_s, &bwd_s);
        double d2h_pass = 0, h2d_pass = 0;
        TRYRC(time_compute_slow(&p, 0, fwd_s, d->d2h_bw_busy, &d->compute_slow_d2h, &d2h_pass, e));
        TRYRC(time_compute_slow(&p, 1, bwd_s, d->h2d_bw_busy, &d->compute_slow_h2d, &h2d_pass, e));
        cg_dbg(c, 1, "profile: copies beside a pass (under load) slow it by %.3f s per second of "
               "D2H, %.3f of H2D; they ran at %.1f / %.1f GB/s (%.1f / %.1f beside the memory-bound "
               "kernel)", d->compute_slow_d2h, d->compute_slow_h2d, 1e-9 * d2h_pass, 1e-9 * h2d_pass,
               1e-9 * d->d2h_bw_busy, 1e-9 * d->h2d_bw_busy);
        vd_device_busy_from_pass(d, d2h_pass, h2d_pass);
        TRY(cudaStreamSynchronize(s));
    }
#undef TRY
#undef TRYRC
done:
    prof_free(&p);
    if (rc) {
        vd_free(out->layers);
        out->layers = NULL;
        out->n_layers = 0;
    }
    return rc;
}
