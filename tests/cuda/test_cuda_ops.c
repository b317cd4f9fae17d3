/* test_cuda_ops.c — every op on the CUDA backend against the CPU reference
 * (the oracle), on the same random inputs, forward and backward, for every
 * cuDNN algorithm option, in fp32 and tf32 math; dx_beta accumulate and
 * in-place variants; deterministic mode repeats bit for bit; streams,
 * events, copies; the optimizer's kernels (SGD, AdamW; AdamW and Nesterov
 * SGD also against PyTorch's float64 results); the profiler; the tiled max-pool backward
 * kernel bit for bit against the general one (test_pool_bwd_tiled); ops run
 * on chunks of the batch against the CPU run on the same chunks
 * (test_chunked); conv, fc and batch norm backward with frozen parameters or
 * without dx, against their full backward (test_frozen_backward); batch norm
 * and add with the ReLU after them fused, against the CPU's rectified output,
 * and the batch norm's backward taking the ReLU's (masking dy as it reads
 * it), against the CPU's doing the same (test_relu_fused); a ReLU's backward
 * with its conv's bias gradient, against the unfused passes bit for bit and
 * the CPU's (test_relu_bias).
 *
 * Error measure: max|cuda - cpu| / max(max|cpu|, 1e-6) per output tensor.
 *
 * Tolerances (each use repeats the reason briefly):
 *  TOL_EXACT 0     — ops that do the same float operations in the same order
 *                   on both backends (relu, dropout, copies, max pool, add,
 *                   concat, SGD): any difference is a bug.
 *  TOL_ROUND 1e-6  — same math, but the CPU accumulates in double and rounds
 *                   once, CUDA in float (average pooling: <= k*k ulp).
 *  TOL_TRANS 1e-5  — transcendental functions (expf/logf/powf/erff: CUDA <= 2
 *                   ulp vs. libm in double) over short sums: softmax, loss,
 *                   LRN, GELU.
 *  TOL_BN 1e-4     — batch norm: cuDNN reduces N*H*W values in float, in its
 *                   own order (maybe one-pass variance), the CPU in double:
 *                   ~sqrt(M)*2^-24 relative, amplified by invstd; 1e-4 leaves
 *                   a 10x+ margin at these sizes.
 *  TOL_FP32 1e-4   — conv / fc in true fp32 (CUDNN_FMA_MATH, cuBLAS default
 *                   math): different summation orders and, for FFT / Winograd
 *                   algorithms, transformed inputs; published and observed
 *                   errors are 1e-6..1e-5 of the output scale.
 *  TOL_TF32 5e-3   — conv / fc with TF32 tensor cores: inputs rounded to a
 *                   10-bit mantissa (2^-11 = 4.9e-4 relative each), errors of
 *                   K products partly cancel; ~1e-3 of the output scale is
 *                   typical, 5e-3 bounds it for K up to a few thousand.
 *  Ops without matrix products are unaffected by the math mode, so they keep
 *  their fp32 tolerance in tf32 mode.
 *  bf16: CUDA in bf16 against the CPU backend in bf16 (the oracle rounds to
 *  bf16 exactly where CUDA stores bf16), both fed the same bf16 inputs.
 *  TOL_EXACT ops stay exact (the same float operations on the same bf16
 *  values, rounded once to nearest even on both). Every other op computes
 *  an fp32 value that differs from the CPU's by its fp32 tolerance and then
 *  rounds it to bf16: near a rounding boundary the two land one bf16 ulp
 *  apart, 2^-8 = 3.9e-3 of the element and so of the tensor's maximum; conv
 *  and fc with a bias round twice (product, then + bias), so up to two
 *  ulps: TOL_BF16 8e-3. Outputs kept in fp32 (BN statistics and running
 *  stats, the loss, weight and bias gradients other than conv's dW) are
 *  sums of the same bf16 inputs and keep their fp32 tolerance; conv's dW
 *  passes through bf16 (TOL_BF16).
 *  fp16: the same against the CPU backend in fp16 (IEEE half, 11-bit
 *  significand: unit roundoff 2^-11, one ulp at most 2^-10 = 9.8e-4 of the
 *  element and so of the tensor's maximum). Two roundings (conv / fc with a
 *  bias) are two ulps, 1.95e-3, plus the fp32 difference before rounding
 *  (<= TOL_FP32): TOL_F16 2.5e-3. Subnormal halves (below 2^-14) have an
 *  ulp of 2^-24, nothing against a maximum near 1. TOL_EXACT ops stay
 *  exact; outputs kept in fp32 keep their fp32 tolerance, as in bf16. The
 *  loss-scaled softmax backward (test_loss_scaled) multiplies by a power of
 *  two: exact scaling but where the unscaled value is subnormal.
 *  Observed on an H200 (cuDNN 9, CUDA 13): every non-exact fp32 comparison
 *  <= 2.7e-7, every tf32 one <= 3.2e-4; the exact ones exact. */
#include "cuda_common.h"
#include "vdt.h"
#include "vdt_optim.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vd_config.h"
#include "plan/plan.h"
#if VD_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#define TOL_EXACT 0.0
#define TOL_ROUND 1e-6
#define TOL_TRANS 1e-5
#define TOL_BN 1e-4
#define TOL_FP32 1e-4
#define TOL_TF32 5e-3
#define TOL_BF16 8e-3
#define TOL_F16 2.5e-3

typedef struct check_opts {
    int n;                 /* batch */
    float zeros;           /* fraction of exact zeros in x */
    double tol_fp32, tol_tf32;
    bool training, backward, inplace;
    float beta;
    bool tf32;             /* also run in tf32 math */
    const int *chunks;     /* c_run_opts.chunks (both backends), NULL: the whole batch */
    int setup_n;           /* c_run_opts.setup_n */
    int loss_n;            /* c_run_opts.loss_n */
    int relu_after;        /* > 0: the layer of a ReLU in place after this one, which
                              CUDA fuses into it (vd_cuda_relu_fused): its y is then
                              compared with max(the CPU's y, 0), exact as the ReLU is */
    bool fuse_cl;          /* relu_after: fused with channels-last maps only (tf32, bf16,
                              fp16: the batch norm kernels), whose backward then also
                              takes the ReLU's (vd_op_io.relu_mask; the CPU takes it in
                              every math, so its fp32 reference runs with no_fuse) */
} check_opts;

static void cmp(const char *label, const char *what, const float *got, const float *ref, int64_t n,
                double tol) {
    if (!got || !ref || n == 0) return;
    double err = c_nerr(got, ref, n);
    printf("  %-34s %-6s err %.3g (tol %.3g)\n", label, what, err, tol);
    ck_assert_msg(err <= tol, "%s: %s differs from the CPU reference: normalized error %g > %g",
                  label, what, err, tol);
}

/* Run layer `layer` of net on CPU and CUDA (every algorithm option, fp32 and
 * optionally tf32) and compare every output. */
static void check_layer(const vd_net *net, int layer, const char *name, const check_opts *co) {
    c_run_in in;
    c_run_init(&in, net, layer, co->n, 1000 + (uint64_t)layer, co->zeros);
    const vd_layer *l = &net->layers[layer];
    c_run_opts o = {.math = VD_MATH_FP32, .training = co->training, .backward = co->backward,
                    .inplace = co->inplace, .dx_beta = co->beta, .seed = 77, .iter = 3,
                    .chunks = co->chunks, .setup_n = co->setup_n, .loss_n = co->loss_n};
    /* ref_cl: the fp32 oracle taking the ReLU's backward in the batch norm's,
     * as CUDA does on channels-last maps (tf32); ref: not, as CUDA's fp32 */
    c_run_out ref, ref_cl;
    memset(&ref_cl, 0, sizeof ref_cl);
    bool bn_relu = co->relu_after > 0 && co->fuse_cl;
    bool cpu_was = c_cpu()->opts.no_fuse;
    c_cpu()->opts.no_fuse = bn_relu;
    c_run(c_cpu(), &in, &o, &ref);
    c_cpu()->opts.no_fuse = cpu_was;
    if (bn_relu && co->tf32) c_run(c_cpu(), &in, &o, &ref_cl);
    int64_t auxn = (int64_t)(c_cpu()->layer_aux_bytes(net, layer, co->n) / sizeof(float));
    /* the CPU oracle in bf16 and in fp16 (the CPU backend's fp16 ops are
     * there when it has the loss-scaling entry points: backend.h) */
    bool cpu_h = c_cpu()->scale_set != NULL;
    c_run_out ref_bf, ref_h;
    memset(&ref_h, 0, sizeof ref_h);
    c_run_opts obf = o;
    obf.math = VD_MATH_BF16;
    c_run(c_cpu(), &in, &obf, &ref_bf);
    obf.math = VD_MATH_FP16;
    if (cpu_h) c_run(c_cpu(), &in, &obf, &ref_h);
    static const vd_math maths[4] = {VD_MATH_FP32, VD_MATH_TF32, VD_MATH_BF16, VD_MATH_FP16};
    for (int mi = 0; mi < 4; mi++) {
        if (maths[mi] == VD_MATH_TF32 && !co->tf32) continue;
        o.math = maths[mi];
        ck_assert_msg(o.math != VD_MATH_FP16 || cpu_h, "%s: the CPU backend has no math fp16 "
                      "(the oracle of the fp16 comparisons)", name);
        bool half = vd_math_act_dtype(o.math) != VD_DT_F32;   /* bf16 / fp16 */
        double tol16 = o.math == VD_MATH_FP16 ? TOL_F16 : TOL_BF16;
        double tol = half ? (co->tol_fp32 == TOL_EXACT ? TOL_EXACT : tol16)
                   : o.math == VD_MATH_TF32 ? co->tol_tf32 : co->tol_fp32;
        /* fp32 outputs of a bf16 / fp16 run (statistics, parameter gradients but
         * conv's dW, the loss): the fp32 tolerance (see top) */
        double tol32 = half ? co->tol_fp32 : tol;
        const c_run_out *r = o.math == VD_MATH_BF16 ? &ref_bf
                           : o.math == VD_MATH_FP16 ? &ref_h
                           : o.math == VD_MATH_TF32 && bn_relu ? &ref_cl : &ref;
        int nopt = 1;
        for (int a = 0; a < nopt; a++) {
            o.algo = a;
            c_run_out got;
            nopt = c_run(c_cuda(), &in, &o, &got);
            const vd_algo_opt *opts;
            int nn;
            vd_err e = {0};
            ck_assert(c_cuda()->layer_algos(c_cuda(), layer, &opts, &nn, &e) == 0);
            char label[96];
            snprintf(label, sizeof label, "%s [%s %s]", name, vd_math_name(o.math), opts[a].label);
            const float *ry = r->y;
            float *rect = NULL;
#if VD_HAVE_CUDA
            if (co->relu_after > 0) {
                bool want = vd_math_nhwc(o.math) || !co->fuse_cl;
                ck_assert_msg(vd_cuda_relu_fused(c_cuda(), co->relu_after) == want,
                              "%s: the ReLU after it is %sfused", label, want ? "not " : "");
                bool bwd = co->fuse_cl && vd_math_nhwc(o.math);
                ck_assert_msg(vd_cuda_relu_bwd_fused(c_cuda(), co->relu_after) == bwd,
                              "%s: the ReLU's backward is %sfused", label, bwd ? "not " : "");
                if (want) {
                    rect = malloc((size_t)in.yn * sizeof *rect);
                    ck_assert(rect);
                    for (int64_t i = 0; i < in.yn; i++) rect[i] = r->y[i] <= 0.0f ? 0.0f : r->y[i];
                    ry = rect;
                }
            }
#endif
            cmp(label, "y", got.y, ry, in.yn, tol);
            free(rect);
            if (auxn && co->training) cmp(label, "aux", got.aux, r->aux, auxn, tol32);
            if (co->backward) {
                for (int k = 0; k < l->n_in; k++) cmp(label, "dx", got.dx[k], r->dx[k], in.xn[k], tol);
                cmp(label, "dparam", got.grad, r->grad, in.pn,
                    l->op == VD_OP_CONV ? tol : tol32);
            }
            cmp(label, "param", got.par, r->par, in.pn, tol32);   /* BN running stats */
            c_run_out_free(&got);
        }
    }
    c_run_out_free(&ref);
    c_run_out_free(&ref_cl);
    c_run_out_free(&ref_bf);
    c_run_out_free(&ref_h);
    c_run_in_free(&in);
}

static check_opts fwd_bwd(double tol_fp32, double tol_tf32) {
    return (check_opts){.n = 4, .tol_fp32 = tol_fp32, .tol_tf32 = tol_tf32, .training = true,
                        .backward = true, .tf32 = true};
}

/* ------------------------------------------------------------------ conv */

typedef struct conv_case {
    int c, h, w, out, k, s, p, d, g;
    bool bias;
    const char *name;
} conv_case;

static const conv_case conv_cases[] = {
    {3, 12, 12, 8, 3, 1, 1, 1, 1, true, "conv3x3 p1 bias"},
    {8, 15, 15, 16, 5, 2, 2, 1, 1, false, "conv5x5 s2 p2"},
    {8, 11, 11, 8, 3, 1, 2, 2, 4, true, "conv3x3 dil2 groups4"},
    {32, 7, 7, 64, 1, 1, 0, 1, 1, true, "conv1x1 bias"},
};

/* Each case as a one-layer net at batch 4, every option against the CPU,
 * dx overwritten and accumulated. want_split: also assert that the layer
 * has exactly the split options "b/2", "b/4", "b/2 w" and "b/4 fd". */
static void check_conv_cases(const conv_case *cases, size_t n, const char *prefix, bool want_split) {
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefix, cases[i].name);
        vd_net net;
        c_net_begin(&net, cases[i].c, cases[i].h, cases[i].w, 4);
        vdt_add(&net, c_conv(-1, cases[i].out, cases[i].k, cases[i].s, cases[i].p, cases[i].d,
                           cases[i].g, cases[i].bias));
        vdt_finish(&net, 0);
        /* matrix products: TOL_FP32 / TOL_TF32 (see top) */
        check_opts co = fwd_bwd(TOL_FP32, TOL_TF32);
        check_layer(&net, 0, name, &co);
        if (want_split) {
            const vd_algo_opt *opts;
            int nn = 0, nsplit = 0;
            vd_err e = {0};
            /* check_layer's last setup was fp16, which (as bf16 and tf32: channels-last)
             * has no split options */
            ck_assert(c_cuda()->layer_setup(c_cuda(), &net, 4, VD_MATH_FP32, false, &e) == 0);
            ck_assert(c_cuda()->layer_algos(c_cuda(), 0, &opts, &nn, &e) == 0);
            /* whole splits, and the mixed ones: b/2 splits only
             * backward-filter, b/4 only forward and backward-data */
            for (int a = 0; a < nn; a++)
                nsplit += !strcmp(opts[a].label, "b/2") || !strcmp(opts[a].label, "b/4") ||
                          !strcmp(opts[a].label, "b/2 w") || !strcmp(opts[a].label, "b/4 fd");
            ck_assert_msg(nsplit == 4, "%s: %d split options, want b/2, b/4, b/2 w, b/4 fd", name,
                          nsplit);
        }
        co.beta = 1.0f;   /* dx accumulates */
        check_layer(&net, 0, name, &co);
        vd_net_free(&net);
    }
}

START_TEST(test_conv) {
    check_conv_cases(conv_cases, VD_ARRAY_LEN(conv_cases), "", false);
}
END_TEST

/* Split options (cuda_convgraph_tune.cu): with --conv-split force every conv
 * layer also gets "b/2" and "b/4" (the batch of 4 run as 2 or 4 sub-batch
 * convolutions, backward-filter partial sums added into dw) and the mixed
 * "b/2 w" (only backward-filter split) and "b/4 fd" (forward and
 * backward-data split, backward-filter at the whole batch); check_layer
 * compares each against the CPU like every other option, dx accumulation
 * included. The count of split options is asserted, so a setup that quietly
 * dropped them fails. (The first two cases: plain and strided.) */
START_TEST(test_conv_split) {
    vd_backend *be = c_cuda();
    vd_conv_split was = be->opts.conv_split;
    be->opts.conv_split = VD_CONV_SPLIT_FORCE;   /* read by the next layer_setup */
    check_conv_cases(conv_cases, 2, "split ", true);
    be->opts.conv_split = was;
}
END_TEST

/* The cuBLAS backward-filter of 1x1 convolutions (cuda_convgraph_own.cu,
 * cg_gemm_filter): with conv_gemm_force every eligible layer (1x1, stride 1,
 * no padding, one group, fp32 or tf32 storage) gets the option "gemm w"
 * (the fastest option with the GEMM backward-filter); check_conv_cases
 * compares every option with the CPU, so the GEMM's weight gradient is
 * checked (TOL_FP32 / TOL_TF32: matrix products). The option's presence is
 * asserted (a setup that dropped it fails); a strided 1x1 layer, which the
 * GEMM does not serve, must not have it. */
#if VD_HAVE_CUDA
/* Does the layer cc get an option whose direction uses engine (the fwd_algo
 * or bwd_filter_algo of vd_algo_opt: 1000 GEMM_ENGINE, 1001 DIRECT_ENGINE)? */
static bool has_engine_option(const conv_case *cc, bool fwd, int engine) {
    vd_net net;
    c_net_begin(&net, cc->c, cc->h, cc->w, 4);
    vdt_add(&net, c_conv(-1, cc->out, cc->k, cc->s, cc->p, cc->d, cc->g, cc->bias));
    vdt_finish(&net, 0);
    const vd_algo_opt *opts;
    int nn = 0;
    vd_err e = {0};
    ck_assert(c_cuda()->layer_setup(c_cuda(), &net, 4, VD_MATH_FP32, false, &e) == 0);
    ck_assert(c_cuda()->layer_algos(c_cuda(), 0, &opts, &nn, &e) == 0);
    bool found = false;
    for (int a = 0; a < nn; a++) found |= (fwd ? opts[a].fwd_algo : opts[a].bwd_filter_algo) == engine;
    vd_net_free(&net);
    return found;
}
static bool has_gemm_option(const conv_case *cc) { return has_engine_option(cc, false, 1000); }
static bool has_direct_option(const conv_case *cc) { return has_engine_option(cc, true, 1001); }

START_TEST(test_conv_gemm) {
    vd_backend *be = c_cuda();
    bool was = be->opts.conv_gemm_force;
    be->opts.conv_gemm_force = true;   /* read by the next layer_setup */
    static const conv_case cases[] = {
        {32, 7, 7, 64, 1, 1, 0, 1, 1, true, "conv1x1 bias"},
        {48, 9, 5, 16, 1, 1, 0, 1, 1, false, "conv1x1 48->16 9x5"},
    };
    check_conv_cases(cases, VD_ARRAY_LEN(cases), "gemm ", false);
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++)
        ck_assert_msg(has_gemm_option(&cases[i]), "%s: no option with the GEMM backward-filter",
                      cases[i].name);
    const conv_case strided = {32, 8, 8, 64, 1, 2, 0, 1, 1, false, "conv1x1 s2"};
    ck_assert_msg(!has_gemm_option(&strided), "a strided 1x1 conv got the GEMM backward-filter");
    be->opts.conv_gemm_force = was;
}
END_TEST

/* The direct forward kernel for convs with few inputs per output
 * (cuda_k_conv.cu, cuk_conv_direct_fwd: at most 4 input channels and 160
 * inputs per window, fp32's NCHW maps only: tf32's are channels-last): with
 * conv_direct_force every eligible layer gets the option "direct" (the
 * fastest option with the direct forward; unless "fastest" already is).
 * check_conv_cases compares every option with the CPU (TOL_FP32; tf32 runs
 * cuDNN's channels-last options, within TOL_TF32). Cases: VGG's first layer's shape (3 channels,
 * 3x3, pad 1), stride and dilation with output channels that are not a
 * multiple of the kernel's block of 32, one channel 5x5 without bias,
 * more output channels than one block, and ResNet's 7x7 stride 2. The option's presence is asserted;
 * a layer with 8 input channels must not have it. */
START_TEST(test_conv_direct) {
    vd_backend *be = c_cuda();
    bool was = be->opts.conv_direct_force;
    be->opts.conv_direct_force = true;   /* read by the next layer_setup */
    static const conv_case cases[] = {
        {3, 12, 12, 8, 3, 1, 1, 1, 1, true, "conv3x3 p1 bias"},
        {4, 13, 11, 40, 3, 2, 2, 2, 1, true, "conv3x3 s2 p2 dil2 40 out"},
        {1, 9, 10, 33, 5, 1, 2, 1, 1, false, "conv5x5 1 channel"},
        {2, 17, 15, 96, 5, 2, 2, 1, 1, true, "conv5x5 s2 96 out"},
        {3, 17, 15, 64, 7, 2, 3, 1, 1, true, "conv7x7 s2 (ResNet's first)"},
    };
    check_conv_cases(cases, VD_ARRAY_LEN(cases), "direct ", false);
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++)
        ck_assert_msg(has_direct_option(&cases[i]), "%s: no option with the direct forward",
                      cases[i].name);
    const conv_case wide = {8, 8, 8, 16, 3, 1, 1, 1, 1, true, "conv3x3 8 channels"};
    ck_assert_msg(!has_direct_option(&wide), "an 8-channel conv got the direct forward");
    be->opts.conv_direct_force = was;
}
END_TEST

/* The conv's forward with its bias fused: one cuDNN graph conv -> add bias
 * (cu_conv_fwd_epi, CG_EPI_BIAS; cuDNN's runtime-fusion engines). With
 * conv_fuse_force every conv with a bias whose fused graph cuDNN supports
 * runs it in every option; check_conv_cases compares every option, forward
 * and backward, with the CPU in fp32, tf32, bf16 and fp16 at the conv's
 * tolerances (the fused graph adds the bias in fp32 before its one rounding
 * to 16 bits, within the two roundings TOL_BF16 / TOL_F16 allow). That the
 * fused graph ran is asserted for the 3x3 case in bf16 (cuDNN's runtime
 * fusion is documented for 16-bit channels-last on sm80+); fp32 / tf32
 * graphs may be unsupported, then the plain path is what is compared. */
START_TEST(test_conv_fused) {
    vd_backend *be = c_cuda();
    bool was = be->opts.conv_fuse_force;
    be->opts.conv_fuse_force = true;   /* read by the next layer_setup */
    static const conv_case cases[] = {
        {16, 12, 12, 32, 3, 1, 1, 1, 1, true, "conv3x3 p1 bias"},
        {32, 7, 7, 64, 1, 1, 0, 1, 1, true, "conv1x1 bias"},
        {8, 15, 15, 16, 5, 2, 2, 1, 1, true, "conv5x5 s2 p2 bias"},
    };
    check_conv_cases(cases, VD_ARRAY_LEN(cases), "fused ", false);
    vd_net net;
    c_net_begin(&net, 16, 12, 12, 4);
    vdt_add(&net, c_conv(-1, 32, 3, 1, 1, 1, 1, true));
    vdt_finish(&net, 0);
    vd_err e = {0};
    ck_assert_msg(be->layer_setup(be, &net, 4, VD_MATH_BF16, false, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_cuda_conv_fused(be, 0), "bf16 conv3x3 + bias: no fused cuDNN graph");
    be->opts.conv_fuse_force = false;
    be->opts.no_fuse = true;
    ck_assert_msg(be->layer_setup(be, &net, 4, VD_MATH_BF16, false, &e) == 0, "%s", e.msg);
    ck_assert_msg(!vd_cuda_conv_fused(be, 0), "no_fuse: the conv's forward is still fused");
    be->opts.no_fuse = false;
    vd_net_free(&net);
    be->opts.conv_fuse_force = was;
}
END_TEST
#endif

/* ------------------------------------------------------------------ pool */

/* Pooling layers of one net (each flattened into one concat, so every
 * output leads to the loss) against the CPU, beta 0 and 1. */
/* ch: 6 takes the one-channel kernels in bf16 / fp16 (channels-last), 16 the
 * eight-channel ones (and the two-pass max-pool backward) */
static void check_pools_at(const vd_layer *pools, const char *const *names, int npool, int ch,
                           int h, int w) {
    vd_net net;
    c_net_begin(&net, ch, h, w, 4);
    int ins[8], fl[8];
    ck_assert(npool <= 8);   /* concat takes at most 8 inputs */
    for (int i = 0; i < npool; i++) ins[i] = vdt_add(&net, pools[i]);
    for (int i = 0; i < npool; i++) fl[i] = vdt_add(&net, vdt_simple(ins[i], VD_OP_FLATTEN));
    int cat = vdt_add(&net, vdt_multi(VD_OP_CONCAT, npool, fl));
    vdt_finish(&net, cat);
    for (int i = 0; i < npool; i++) {
        bool mx = net.layers[ins[i]].u.pool.mode == VD_POOL_MAX;
        /* max: same comparisons, same accumulation order -> exact (with 30%
         * exact zeros in x: ties go to the first maximum, as PyTorch);
         * avg: double vs float accumulation -> TOL_ROUND */
        check_opts co = fwd_bwd(mx ? TOL_EXACT : TOL_ROUND, mx ? TOL_EXACT : TOL_ROUND);
        co.zeros = mx ? 0.3f : 0.0f;   /* tf32 too: its maps are channels-last */
        check_layer(&net, ins[i], names[i], &co);
        co.beta = 1.0f;
        check_layer(&net, ins[i], names[i], &co);
    }
    vd_net_free(&net);
}

static void check_pools(const vd_layer *pools, const char *const *names, int npool, int ch) {
    check_pools_at(pools, names, npool, ch, 13, 11);
}

START_TEST(test_pool) {
    const vd_layer a[7] = {
        c_pool(-1, VD_POOL_MAX, 2, 2, 0, false), c_pool(-1, VD_POOL_MAX, 3, 2, 1, true),
        c_pool(-1, VD_POOL_AVG, 3, 2, 1, true), vdt_adaptive(-1, VD_POOL_AVG, 4, 5, false),
        vdt_adaptive(-1, VD_POOL_AVG, 0, 0, true), vdt_adaptive(-1, VD_POOL_MAX, 5, 3, false),
        c_pool(-1, VD_POOL_AVG, 2, 2, 0, false)};
    const char *na[7] = {"maxpool2 s2", "maxpool3 s2 p1 ceil", "avgpool3 s2 p1 ceil",
                         "adaptive avg 4x5", "global avg", "adaptive max 5x3", "avgpool2 s2"};
    check_pools(a, na, 7, 6);
    check_pools(a, na, 7, 16);
    /* overlapping max pools (k_pool_bwd_tiled): AlexNet's 3x3/2, and 2x2/1 */
    const vd_layer b[2] = {c_pool(-1, VD_POOL_MAX, 3, 2, 0, false),
                           c_pool(-1, VD_POOL_MAX, 2, 1, 0, false)};
    const char *nb[2] = {"maxpool3 s2", "maxpool2 s1"};
    check_pools(b, nb, 2, 6);
    check_pools(b, nb, 2, 16);
    vd_net net;
    /* ResNet-50's stem max pool (3x3/2 pad 1) at full size: the tiled
     * kernel's row tiles against the CPU, 30% exact zeros for ties */
    c_net_begin(&net, 3, 112, 112, 4);
    vdt_add(&net, c_pool(-1, VD_POOL_MAX, 3, 2, 1, false));
    vdt_finish(&net, 0);
    check_opts co = fwd_bwd(TOL_EXACT, TOL_EXACT);   /* max: exact (see above) */
    co.zeros = 0.3f;   /* tf32: the channels-last kernels */
    check_layer(&net, 0, "maxpool3 s2 p1 112x112", &co);
    co.beta = 1.0f;
    check_layer(&net, 0, "maxpool3 s2 p1 112x112", &co);
    vd_net_free(&net);
    /* max pools whose windows tile the input (channels-last: k_pool_tile8,
     * its 2x2 path and its general one), 16 and 24 channels on 12x12 */
    const vd_layer t[2] = {c_pool(-1, VD_POOL_MAX, 2, 2, 0, false),
                           c_pool(-1, VD_POOL_MAX, 3, 3, 0, false)};
    const char *nt[2] = {"maxpool2 s2 12x12", "maxpool3 s3 12x12"};
    check_pools_at(t, nt, 2, 16, 12, 12);
    check_pools_at(t, nt, 2, 24, 12, 12);
}
END_TEST

#if VD_HAVE_CUDA
/* Test hook in src/backend/cuda/cuda_k_pool.cu (declared in cuda_internal.h,
 * which is C++ only; keep the two in step): max-pool backward of geom = {n, c,
 * h, w, oh, ow, kh, kw, sh, sw, ph, pw} on host arrays through path 0
 * (cuk_pool_bwd), 1 (the general k_pool_bwd) or 2 (k_pool_bwd_tiled, tile
 * NULL or {rows, columns, planes}, 0 automatic; VD_EUNSUPPORTED where it
 * cannot take the geometry). dx is read when beta != 0, then overwritten. */
int vd_cuda_pool_bwd_test(const int geom[12], const float *x, const float *dy, float *dx,
                          float beta, int path, const int tile[3], vd_err *e);

/* PyTorch's output length (as the op table's pool_out, src/net/ops.c). */
static int pb_len(int in, int k, int s, int p, bool ceil_mode) {
    int o = (ceil_mode ? (in + 2 * p - k + s - 1) / s : (in + 2 * p - k) / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

/* Window [*a, *b) of output o along one axis, clipped (cuda_k_pool.h's
 * pool_window). */
static void pb_window(int in, int k, int s, int p, int o, int *a, int *b) {
    int lo = o * s - p, hi = lo + k < in + p ? lo + k : in + p;
    *a = lo > 0 ? lo : 0;
    *b = hi < in ? hi : in;
}

/* Host model of k_pool_bwd, scatter form: dx = beta ? dx : 0, then for each
 * window in row-major (oh, ow) order dx[argmax] += dy -- so every element
 * gets its terms in k_pool_bwd's order, one float add each. argmax: the
 * first maximum in row-major order, a NaN always taking over (the last NaN);
 * starts at the window's first element (all -inf). */
static void pb_host(const int *g, const float *x, const float *dy, float *dx, float beta) {
    int64_t planes = (int64_t)g[0] * g[1], hw = (int64_t)g[2] * g[3], ohw = (int64_t)g[4] * g[5];
    if (beta == 0.0f)
        for (int64_t i = 0; i < planes * hw; i++) dx[i] = 0.0f;
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * hw;
        for (int oh = 0; oh < g[4]; oh++) {
            int h0, h1;
            pb_window(g[2], g[6], g[8], g[10], oh, &h0, &h1);
            for (int ow = 0; ow < g[5]; ow++) {
                int w0, w1;
                pb_window(g[3], g[7], g[9], g[11], ow, &w0, &w1);
                if (h0 >= h1 || w0 >= w1) continue;
                float m = -INFINITY;
                int64_t arg = (int64_t)h0 * g[3] + w0;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++) {
                        float v = xp[(int64_t)ih * g[3] + iw];
                        if (v > m || isnan(v)) { m = v; arg = (int64_t)ih * g[3] + iw; }
                    }
                dx[pl * hw + arg] += dy[pl * ohw + (int64_t)oh * g[5] + ow];
            }
        }
    }
}

typedef struct pool_bwd_case {
    int n, c, h, w, kh, kw, sh, sw, ph, pw;
    bool ceil_mode;
    int tile[3];       /* forced tile {rows, columns, planes}; all 0: automatic */
    bool ninf;         /* half of x -inf (windows of only -inf) */
    bool tiled;        /* the tiled kernel takes it */
    const char *name;
} pool_bwd_case;

static const pool_bwd_case pool_bwd_cases[] = {
    {2, 24, 112, 112, 3, 3, 2, 2, 1, 1, false, {0}, false, true, "ResNet stem 3x3/2 p1"},
    {4, 16, 55, 55, 3, 3, 2, 2, 0, 0, false, {0}, false, true, "AlexNet 55->27"},
    {4, 48, 27, 27, 3, 3, 2, 2, 0, 0, false, {0}, false, true, "AlexNet 27->13"},
    {4, 64, 13, 13, 3, 3, 2, 2, 0, 0, false, {0}, false, true, "AlexNet 13->6"},
    {2, 5, 33, 31, 2, 2, 1, 1, 0, 0, false, {0}, true, true, "2x2/1 odd, -inf"},
    {2, 3, 15, 17, 3, 3, 2, 2, 1, 1, true, {0}, false, true, "3x3/2 p1 ceil 15x17"},
    {1, 2, 56, 56, 3, 3, 2, 2, 0, 0, true, {0}, false, true, "3x3/2 ceil 56 (cut windows)"},
    {1, 3, 37, 301, 3, 3, 2, 2, 1, 1, false, {0}, false, true, "3x3/2 p1 37x301 (column tiles)"},
    {1, 2, 30, 300, 2, 2, 1, 1, 0, 0, false, {0}, true, true, "2x2/1 30x300 (column tiles)"},
    {1, 70000, 5, 5, 3, 3, 2, 2, 1, 1, false, {0}, false, true, "70000 planes 5x5"},
    {2, 3, 20, 23, 3, 2, 2, 1, 1, 0, false, {0}, false, true, "3x2/2x1 p1x0"},
    {2, 3, 19, 21, 3, 1, 2, 2, 1, 0, false, {0}, false, true, "3x1/2x2 (columns in no window)"},
    {2, 3, 31, 29, 5, 5, 2, 2, 2, 2, false, {0}, false, true, "5x5/2 p2"},
    {1, 3, 40, 40, 7, 7, 3, 3, 3, 3, true, {0}, false, true, "7x7/3 p3 ceil"},
    {2, 3, 24, 24, 3, 3, 1, 1, 1, 1, false, {0}, true, true, "3x3/1 p1, -inf"},
    {1, 3, 3, 3, 3, 3, 2, 2, 1, 1, false, {0}, false, true, "3x3/2 p1 on 3x3"},
    {1, 5, 2, 2, 3, 3, 2, 2, 1, 1, false, {0}, true, true, "3x3/2 p1 on 2x2"},
    {1, 3, 1, 1, 3, 3, 1, 1, 1, 1, false, {0}, false, true, "3x3/1 p1 on 1x1"},
    {1, 2, 57, 57, 3, 3, 2, 2, 1, 1, false, {4, 8, 0}, false, true, "57x57 tiles 4x8"},
    {1, 2, 57, 57, 3, 3, 2, 2, 1, 1, false, {1, 1, 0}, false, true, "57x57 tiles 1x1"},
    {1, 2, 57, 57, 3, 3, 2, 2, 1, 1, true, {3, 5, 0}, false, true, "57x57 ceil tiles 3x5"},
    {2, 50, 13, 13, 3, 3, 2, 2, 0, 0, false, {13, 13, 7}, false, true, "13x13 7 planes a tile"},
    {1, 2, 56, 56, 3, 3, 2, 2, 0, 0, false, {0, 16, 0}, false, true, "56x56 tiles of 16 columns"},
    {1, 2, 19, 21, 3, 1, 2, 2, 1, 0, false, {2, 0, 0}, false, true, "3x1/2x2 tiles of 2 rows"},
    {2, 3, 56, 56, 2, 2, 2, 2, 0, 0, false, {0}, false, true, "2x2/2 56x56 (windows tile it)"},
    {2, 3, 24, 30, 3, 3, 3, 3, 0, 0, false, {0}, true, true, "3x3/3 24x30, -inf (tile it)"},
    {2, 3, 13, 13, 2, 2, 2, 2, 0, 0, false, {0}, false, true, "2x2/2 13x13 (disjoint, gaps)"},
    {1, 1, 100, 100, 64, 64, 1, 1, 0, 0, false, {0}, false, false, "64x64/1 (general kernel)"},
};

/* k_pool_bwd_tiled against the general k_pool_bwd, bit for bit (memcmp), on
 * ResNet's and AlexNet's max pools, odd sizes, ceil mode, rectangular and
 * gapped windows, tiles of whole rows / columns / several planes / forced
 * small sizes (many tiles: the grid-stride loop), 70000 planes; x of five
 * levels (-1, -0, +0, 0.5, 1: many ties, -0 == +0), 3% NaN, optionally half
 * -inf; dy with -0 and NaN; beta 0 over a NaN-poisoned dx and beta 1 over a
 * dx with NaNs. Both also match the host model pb_host and cuk_pool_bwd (the
 * dispatcher; NCHW: k_pool_tile_nchw where the windows tile the input,
 * k_pool_bwd_disjoint for the other disjoint ones). Cases marked tiled
 * must be taken by the tiled kernel; the last
 * one is too large for it and must be refused (VD_EUNSUPPORTED). */
START_TEST(test_pool_bwd_tiled) {
    (void)c_cuda();   /* context on the backend's device */
    static const float levels[5] = {-1.0f, -0.0f, 0.0f, 0.5f, 1.0f};
    for (size_t ci = 0; ci < VD_ARRAY_LEN(pool_bwd_cases); ci++) {
        const pool_bwd_case *pc = &pool_bwd_cases[ci];
        int g[12] = {pc->n, pc->c, pc->h, pc->w,
                     pb_len(pc->h, pc->kh, pc->sh, pc->ph, pc->ceil_mode),
                     pb_len(pc->w, pc->kw, pc->sw, pc->pw, pc->ceil_mode),
                     pc->kh, pc->kw, pc->sh, pc->sw, pc->ph, pc->pw};
        int64_t xn = (int64_t)g[0] * g[1] * g[2] * g[3], yn = (int64_t)g[0] * g[1] * g[4] * g[5];
        float *x = malloc((size_t)xn * 4), *dy = malloc((size_t)yn * 4);
        float *dx0 = malloc((size_t)xn * 4), *ref = malloc((size_t)xn * 4);
        float *gen = malloc((size_t)xn * 4), *til = malloc((size_t)xn * 4);
        float *dsp = malloc((size_t)xn * 4);
        ck_assert(x && dy && dx0 && ref && gen && til && dsp);
        vd_rng r;
        vd_rng_seed(&r, 1234 + ci, 5);
        for (int64_t i = 0; i < xn; i++) {
            uint32_t u = vd_rng_u32(&r) % 100;
            x[i] = pc->ninf && u < 50 ? -INFINITY : u < (pc->ninf ? 53u : 3u) ? NAN
                                                   : levels[vd_rng_u32(&r) % 5];
        }
        for (int64_t i = 0; i < yn; i++) {
            uint32_t u = vd_rng_u32(&r) % 100;
            dy[i] = u < 2 ? NAN : u < 10 ? -0.0f : vd_rng_uniform(&r) * 2.0f - 1.0f;
        }
        for (int64_t i = 0; i < xn; i++)
            dx0[i] = vd_rng_u32(&r) % 50 == 0 ? NAN : vd_rng_uniform(&r) * 8.0f - 4.0f;
        const int *tile = pc->tile[0] || pc->tile[1] || pc->tile[2] ? pc->tile : NULL;
        for (int b = 0; b < 2; b++) {
            float beta = (float)b;
            vd_err e = {0};
            /* beta 0: dx starts as NaN everywhere and must be ignored */
            for (int64_t i = 0; i < xn; i++) ref[i] = gen[i] = til[i] = dsp[i] = b ? dx0[i] : NAN;
            pb_host(g, x, dy, ref, beta);
            ck_assert_msg(vd_cuda_pool_bwd_test(g, x, dy, gen, beta, 1, NULL, &e) == 0, "%s", e.msg);
            ck_assert_msg(vd_cuda_pool_bwd_test(g, x, dy, dsp, beta, 0, NULL, &e) == 0, "%s", e.msg);
            int rc = vd_cuda_pool_bwd_test(g, x, dy, til, beta, 2, tile, &e);
            /* the host model: bit for bit, except that a NaN result only has
             * to be a NaN (the GPU's float add returns the canonical NaN, the
             * host's keeps an operand's sign and payload) */
            int64_t hbad = 0;
            for (int64_t i = 0; i < xn; i++)
                hbad += memcmp(&gen[i], &ref[i], 4) && !(isnan(gen[i]) && isnan(ref[i]));
            ck_assert_msg(hbad == 0, "%s beta %d: general kernel differs from the host model at "
                          "%lld elements", pc->name, b, (long long)hbad);
            ck_assert_msg(!memcmp(dsp, gen, (size_t)xn * 4),
                          "%s beta %d: cuk_pool_bwd differs from the general kernel", pc->name, b);
            if (!pc->tiled) {
                ck_assert_msg(rc == VD_EUNSUPPORTED, "%s: tiled kernel rc %d, want refused",
                              pc->name, rc);
                continue;
            }
            ck_assert_msg(rc == 0, "%s: tiled kernel: %s", pc->name, e.msg);
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; i < xn; i++)
                if (memcmp(&til[i], &gen[i], 4)) { bad++; if (first < 0) first = i; }
            ck_assert_msg(bad == 0,
                          "%s beta %d: tiled kernel differs from k_pool_bwd at %lld of %lld "
                          "elements (first %lld: %g vs %g)", pc->name, b, (long long)bad,
                          (long long)xn, (long long)first, first < 0 ? 0.0 : (double)til[first],
                          first < 0 ? 0.0 : (double)gen[first]);
        }
        printf("  %-34s %dx%dx%dx%d -> %dx%d: %s == host model, beta 0 and 1\n", pc->name,
               g[0], g[1], g[2], g[3], g[4], g[5],
               pc->tiled ? "tiled == general == dispatch" : "general == dispatch (tiled refused)");
        free(x); free(dy); free(dx0); free(ref); free(gen); free(til); free(dsp);
    }
    /* a forced tile of several planes must span the whole plane */
    {
        int g[12] = {1, 4, 13, 13, 6, 6, 3, 3, 2, 2, 0, 0}, tile[3] = {5, 0, 2};
        float v[4 * 169] = {0}, d[4 * 36] = {0};
        vd_err e = {0};
        ck_assert_int_eq(vd_cuda_pool_bwd_test(g, v, d, v, 0.0f, 2, tile, &e), VD_EUNSUPPORTED);
    }
}
END_TEST
#endif

/* ------------------------------------------------------------------ relu, dropout */

START_TEST(test_relu_dropout) {
    vd_net net;
    c_net_begin(&net, 5, 7, 9, 4);
    int r = vdt_add(&net, vdt_simple(-1, VD_OP_RELU));
    vd_layer dl = vdt_simple(r, VD_OP_DROPOUT);
    dl.u.dropout.p = 0.3f;
    int d = vdt_add(&net, dl);
    vdt_finish(&net, d);
    /* elementwise, identical float operations: exact (tf32 too: dropout's
     * mask is drawn by NCHW index in its channels-last maps) */
    check_opts co = fwd_bwd(TOL_EXACT, TOL_EXACT);
    co.zeros = 0.2f;
    check_layer(&net, r, "relu", &co);
    check_layer(&net, d, "dropout p=.3", &co);
    co.inplace = true;
    check_layer(&net, r, "relu in-place", &co);
    check_layer(&net, d, "dropout in-place", &co);
    co.inplace = false;
    co.beta = 1.0f;
    check_layer(&net, r, "relu dx+=", &co);
    check_layer(&net, d, "dropout dx+=", &co);
    co.beta = 0.0f;
    co.training = false;
    co.backward = false;
    check_layer(&net, d, "dropout eval", &co);

    /* the mask drops about p of the values (independent of the CPU oracle) */
    c_run_in in;
    c_run_init(&in, &net, d, 64, 5, 0.0f);
    for (int64_t i = 0; i < in.xn[0]; i++) in.x[0][i] = 1.0f;
    c_run_opts o = {.math = VD_MATH_FP32, .training = true, .seed = 9, .iter = 11};
    c_run_out got;
    c_run(c_cuda(), &in, &o, &got);
    int64_t zeros = 0;
    float scale = 1.0f / (1.0f - 0.3f);
    for (int64_t i = 0; i < in.yn; i++) {
        ck_assert_msg(got.y[i] == 0.0f || got.y[i] == scale, "dropout value %g", got.y[i]);
        zeros += got.y[i] == 0.0f;
    }
    double frac = (double)zeros / (double)in.yn;   /* 20160 draws: sd 0.0032 */
    ck_assert_msg(fabs(frac - 0.3) < 0.02, "dropout dropped %.4f, expected 0.3", frac);
    c_run_out_free(&got);
    c_run_in_free(&in);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ gelu */

START_TEST(test_gelu) {
    vd_net net;
    c_net_begin(&net, 5, 7, 9, 4);
    int g = vdt_add(&net, vdt_simple(-1, VD_OP_GELU));
    vdt_finish(&net, g);
    /* erff / expf in float (CUDA, <= 2 ulp each) vs erf / exp in double
     * rounded once (CPU): TOL_TRANS */
    check_opts co = fwd_bwd(TOL_TRANS, TOL_TRANS);
    co.tf32 = false;
    co.zeros = 0.2f;
    check_layer(&net, g, "gelu", &co);
    co.beta = 1.0f;
    check_layer(&net, g, "gelu dx+=", &co);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ lrn */

START_TEST(test_lrn) {
    struct { int size; float alpha, beta, k; const char *name; } cases[] = {
        {5, 0.5f, 0.75f, 1.0f, "lrn 5 (strong)"},
        {4, 1e-2f, 0.75f, 2.0f, "lrn 4 (even window)"},
        {5, 1e-4f, 0.75f, 2.0f, "lrn 5 (AlexNet)"},
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        vd_net net;
        c_net_begin(&net, 12, 5, 5, 4);
        vd_layer l = vdt_simple(-1, VD_OP_LRN);
        l.u.lrn.size = cases[i].size;
        l.u.lrn.alpha = cases[i].alpha;
        l.u.lrn.beta = cases[i].beta;
        l.u.lrn.k = cases[i].k;
        vdt_add(&net, l);
        vdt_finish(&net, 0);
        check_opts co = fwd_bwd(TOL_TRANS, TOL_TRANS);   /* powf vs pow in double */
        check_layer(&net, 0, cases[i].name, &co);   /* tf32: channels-last */
        co.beta = 1.0f;
        check_layer(&net, 0, cases[i].name, &co);
        vd_net_free(&net);
    }
}
END_TEST

/* ------------------------------------------------------------------ batchnorm */

START_TEST(test_bn) {
    vd_net net;
    c_net_begin(&net, 8, 6, 6, 4);
    int b = vdt_add(&net, vdt_simple(-1, VD_OP_BATCHNORM));
    int f = vdt_add(&net, vdt_simple(b, VD_OP_FLATTEN));
    vd_layer fc = {0};
    fc.op = VD_OP_FC;
    fc.n_in = 1;
    fc.in[0] = f;
    fc.u.fc.out = 16;
    fc.u.fc.bias = true;
    int fcl = vdt_add(&net, fc);
    int b2 = vdt_add(&net, vdt_simple(fcl, VD_OP_BATCHNORM));
    vdt_finish(&net, b2);
    /* float reductions in cuDNN (fp32) or the channels-last kernels (tf32,
     * bf16, fp16) vs double: TOL_BN (see top); no matrix products */
    check_opts co = fwd_bwd(TOL_BN, TOL_BN);
    check_layer(&net, b, "batchnorm 8x6x6", &co);
    co.n = 16;
    check_layer(&net, b2, "batchnorm after fc (16x1x1)", &co);
    co.n = 4;
    co.beta = 1.0f;
    check_layer(&net, b, "batchnorm dx+=", &co);
    co.beta = 0.0f;
    co.training = false;
    co.backward = false;
    check_layer(&net, b, "batchnorm eval", &co);
    vd_net_free(&net);
    /* 6 channels: bf16 / fp16 take the one-channel kernels (8 and 16: eight-channel) */
    c_net_begin(&net, 6, 5, 7, 4);
    b = vdt_add(&net, vdt_simple(-1, VD_OP_BATCHNORM));
    vdt_finish(&net, b);
    co.training = true;
    co.backward = true;
    check_layer(&net, b, "batchnorm 6x5x7", &co);
    vd_net_free(&net);
}
END_TEST

#if VD_HAVE_CUDA
/* A ReLU in place after a batch norm (fused in bf16 / fp16: the channels-last
 * kernels) and after a residual add (fused in every math), cu_fuse_relu_setup:
 * the producer's y against the CPU's rectified, forward and backward (the
 * add's backward the fusion leaves alone; the batch norm's in bf16 / fp16
 * takes the ReLU's, dy masked where the recomputed y is <= 0, as the CPU's
 * does), 8 channels (the eight-channel kernels) and 6 (the one-channel
 * ones). Tolerances: the producer's own (TOL_BN, TOL_EXACT for the add),
 * since max(., 0) and the mask are exact on both backends and move no value
 * further from the other backend's (but where the two backends' y straddle
 * 0, an element whose dy one keeps and the other drops: not seen with these
 * inputs, and it would fail loudly). */
START_TEST(test_relu_fused) {
    static const int chans[2] = {8, 6};
    for (int ci = 0; ci < 2; ci++) {
        vd_net net;
        c_net_begin(&net, chans[ci], 5, 7, 4);
        int b = vdt_add(&net, vdt_simple(-1, VD_OP_BATCHNORM));
        int r = vdt_add(&net, vdt_simple(b, VD_OP_RELU));
        int ins[2] = {r, -1};
        int a = vdt_add(&net, vdt_multi(VD_OP_ADD, 2, ins));
        int r2 = vdt_add(&net, vdt_simple(a, VD_OP_RELU));
        vdt_finish(&net, r2);
        vd_schedule_inplace(&net);
        ck_assert(net.layers[r].inplace && net.layers[r2].inplace);
        char name[64];
        check_opts co = fwd_bwd(TOL_BN, TOL_BN);   /* batch norm: see test_bn */
        co.relu_after = r;
        co.fuse_cl = true;
        snprintf(name, sizeof name, "batchnorm+relu %dx5x7", chans[ci]);
        check_layer(&net, b, name, &co);
        co.training = false;
        co.backward = false;
        snprintf(name, sizeof name, "batchnorm+relu eval %dx5x7", chans[ci]);
        check_layer(&net, b, name, &co);
        co = fwd_bwd(TOL_EXACT, TOL_EXACT);   /* ordered float adds: exact (see top) */
        co.tf32 = false;
        co.relu_after = r2;
        snprintf(name, sizeof name, "add+relu %dx5x7", chans[ci]);
        check_layer(&net, a, name, &co);
        vd_net_free(&net);
    }
}
END_TEST
#endif

/* ------------------------------------------------------------------ fc */

START_TEST(test_fc) {
    for (int bias = 0; bias < 2; bias++) {
        vd_net net;
        c_net_begin(&net, 3, 10, 10, 8);
        vd_layer fc = {0};
        fc.op = VD_OP_FC;
        fc.n_in = 1;
        fc.in[0] = -1;
        fc.u.fc.out = 20;
        fc.u.fc.bias = bias;
        vdt_add(&net, fc);
        vdt_finish(&net, 0);
        check_opts co = fwd_bwd(TOL_FP32, TOL_TF32);   /* matrix products (K = 300) */
        co.n = 8;
        check_layer(&net, 0, bias ? "fc 300->20 bias" : "fc 300->20", &co);
        co.beta = 1.0f;
        check_layer(&net, 0, bias ? "fc dx+= bias" : "fc dx+=", &co);
        vd_net_free(&net);
    }
}
END_TEST

/* ------------------------------------------------------------------ frozen */

/* n floats all NaN, as staged (0xFF bytes, a NaN in every element type):
 * nothing was written there. */
static bool untouched(const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isnan(a[i])) return false;
    return true;
}

static bool same_bits(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* --freeze on the backends (the CPU's too, the same calls): a backward
 * without dw and db, and for conv and fc without x (only their dW reads it),
 * writes no parameter gradient and the very dx of the full backward, bit for
 * bit (deterministic algorithms, the same call but for the pointers); batch
 * norm, whose backward (cuDNN's, the channels-last kernel) writes dx, dgamma
 * and dbeta all three, puts what nobody wants into the spare front of its
 * workspace (cu_bn_spare_bytes: the layer's parameters frozen, its input the
 * net's): the gradients it is asked for are the full backward's. Every
 * option of the conv, every math. */
START_TEST(test_frozen_backward) {
    vd_net net;
    c_net_begin(&net, 8, 9, 9, 4);
    int c = vdt_add(&net, c_conv(-1, 8, 3, 1, 1, 1, 1, true));
    int b = vdt_add(&net, vdt_simple(c, VD_OP_BATCHNORM));
    int f = vdt_add(&net, vdt_simple(b, VD_OP_FLATTEN));
    vd_layer fc = {0};
    fc.op = VD_OP_FC;
    fc.n_in = 1;
    fc.in[0] = f;
    fc.u.fc.out = 12;
    fc.u.fc.bias = true;
    int fl = vdt_add(&net, fc);
    int bn0 = vdt_add(&net, vdt_simple(fl, VD_OP_BATCHNORM));   /* reads what needs no gradient */
    vdt_finish(&net, bn0);
    /* what vd_net_freeze would set: every parameter frozen, bn0's input (fc's
     * output) needing no gradient (the backends read these flags) */
    for (int k = 0; k < net.n_params; k++)
        net.params[k].frozen = net.params[k].kind == VD_PARAM_WEIGHT;
    net.layers[fl].no_grad = true;
    static const vd_math maths[3] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16};
    const int layers[4] = {c, b, fl, bn0};
    for (int be_i = 0; be_i < 2; be_i++) {
        vd_backend *be = be_i ? c_cuda() : c_cpu();
        for (int li = 0; li < 4; li++) {
            c_run_in in;
            c_run_init(&in, &net, layers[li], 4, 500 + (uint64_t)li, 0.0f);
            for (int mi = 0; mi < 3; mi++) {
                int nopt = 1;
                for (int a = 0; a < nopt; a++) {
                    c_run_opts o = {.math = maths[mi], .deterministic = true, .training = true,
                                    .backward = true, .algo = a, .seed = 5};
                    c_run_out full, part;
                    nopt = c_run(be, &in, &o, &full);
                    bool dx_less = layers[li] == bn0;   /* its input needs no gradient */
                    o.no_dw = !dx_less;
                    o.no_dx = dx_less;
                    c_run(be, &in, &o, &part);
                    const char *what = vd_op_table[net.layers[layers[li]].op].name;
                    if (o.no_dw) {
                        ck_assert_msg(untouched(part.grad, in.pn), "%s %s %s option %d: a frozen "
                                      "parameter's gradient was written", be->name, what,
                                      vd_math_name(o.math), a);
                        ck_assert_msg(same_bits(part.dx[0], full.dx[0], in.xn[0]), "%s %s %s "
                                      "option %d: dx differs without dW", be->name, what,
                                      vd_math_name(o.math), a);
                    } else {
                        ck_assert(untouched(part.dx[0], in.xn[0]));
                        ck_assert_msg(same_bits(part.grad, full.grad, in.pn), "%s %s %s: dgamma, "
                                      "dbeta differ without dx", be->name, what,
                                      vd_math_name(o.math));
                    }
                    printf("  frozen %-9s %-5s [%s option %d]: same bits\n", what, be->name,
                           vd_math_name(o.math), a);
                    c_run_out_free(&full);
                    c_run_out_free(&part);
                }
            }
            c_run_in_free(&in);
        }
    }
    vd_net_free(&net);
}
END_TEST

#if VD_HAVE_CUDA
/* The ReLU backward with the bias gradient of the conv before it
 * (vd_op_io.bias_db, cuk_relu_bwd_bias) in fp32, tf32, bf16, fp16, on 8
 * channels (channels-last tf32 / bf16 / fp16: the eight-channel kernel), 6
 * (there the two passes) and 8 on 64x64
 * (several partial sums per channel, cu_bias_grad_split): dx bit for bit
 * the unfused ReLU's, and db bit for bit what the conv's backward computes
 * from that dx as its dy, for every conv option at 5x7 (one partial sum on
 * both sides); at 64x64 the conv's split is capped by its option's
 * workspace, which a test cannot see (the 16-bit weight copies take part
 * of it), so there db is within TOL_FP32 of the conv's (the same sums,
 * reassociated where the splits differ) and the output says which options
 * gave the same bits; against the CPU's doing the same, dx exact (a select
 * on the same values) and db within TOL_FP32 (kept in fp32: float sums
 * against the CPU's double, see the top). */
START_TEST(test_relu_bias) {
    static const struct { int c, h, w; } shapes[3] = {{8, 5, 7}, {6, 5, 7}, {8, 64, 64}};
    static const vd_math maths[4] = {VD_MATH_FP32, VD_MATH_TF32, VD_MATH_BF16, VD_MATH_FP16};
    for (int si = 0; si < 3; si++) {
        const int C = shapes[si].c, N = 4;
        vd_net net;
        c_net_begin(&net, 3, shapes[si].h, shapes[si].w, N);
        int cv = vdt_add(&net, c_conv(-1, C, 3, 1, 1, 1, 1, true));
        int r = vdt_add(&net, vdt_simple(cv, VD_OP_RELU));
        vdt_finish(&net, r);
        vd_schedule_inplace(&net);
        ck_assert_int_eq(vd_op_bias_taker(&net, r), cv);
        c_run_in ri;
        c_run_init(&ri, &net, r, N, 600 + (uint64_t)si, 0.0f);
        for (int mi = 0; mi < 4; mi++) {
            const char *m = vd_math_name(maths[mi]);
            c_run_opts o = {.math = maths[mi], .deterministic = true, .training = true,
                            .backward = true, .seed = 5, .bias_db = C};
            c_run_out f, u, ref;
            c_run(c_cuda(), &ri, &o, &f);
            /* deterministic: untimed, so fused wherever it may be */
            ck_assert_msg(vd_cuda_relu_bias_fused(c_cuda(), r), "%s: the ReLU does not take "
                          "its conv's bias gradient", m);
            c_run(c_cpu(), &ri, &o, &ref);
            o.bias_db = 0;
            c_run(c_cuda(), &ri, &o, &u);
            ck_assert_msg(same_bits(f.dx[0], u.dx[0], ri.xn[0]), "%s %dx%dx%d: fused dx differs",
                          m, C, shapes[si].h, shapes[si].w);
            ck_assert_msg(same_bits(f.dx[0], ref.dx[0], ri.xn[0]), "%s: dx against the CPU", m);
            double err = c_nerr(f.db, ref.db, C);
            ck_assert_msg(err <= TOL_FP32, "%s: db against the CPU %g", m, err);
            /* the conv's own bias gradient of that dx, each option */
            c_run_in ci;
            c_run_init(&ci, &net, cv, N, 700 + (uint64_t)si, 0.0f);
            memcpy(ci.dy, u.dx[0], (size_t)ci.yn * sizeof *ci.dy);
            int nopt = 1, same = 0, tried = 0;
            for (int a = 0; a < nopt; a++) {
                c_run_opts oc = {.math = maths[mi], .deterministic = true, .training = true,
                                 .backward = true, .seed = 5, .algo = a};
                c_run_out cr;
                nopt = c_run(c_cuda(), &ci, &oc, &cr);
                if (!cr.grad) continue;   /* (the option gone after the new setup) */
                const float *cdb = cr.grad + (ci.pn - C);   /* weight, then bias */
                bool eq = same_bits(f.db, cdb, C);
                double ce = c_nerr(f.db, cdb, C);
                printf("  relu+bias %dx%dx%d %-4s conv option %d: db %s (%.2g)\n", C,
                       shapes[si].h, shapes[si].w, m, a, eq ? "same bits" : "differs", ce);
                ck_assert_msg(ce <= TOL_FP32, "%s option %d: db against the conv's %g", m, a, ce);
                same += eq;
                tried++;
                c_run_out_free(&cr);
            }
            ck_assert_int_gt(tried, 0);
            if (si < 2) ck_assert_int_eq(same, tried);
            c_run_in_free(&ci);
            c_run_out_free(&f);
            c_run_out_free(&u);
            c_run_out_free(&ref);
        }
        c_run_in_free(&ri);
        vd_net_free(&net);
    }
}
END_TEST
#endif

#if VD_HAVE_CUDA
/* The max pool + ReLU backward fusion (vd_op_io.relu_dx, pool_bwd): conv +
 * bias -> ReLU in place -> max pool, the pool's backward alone, in fp32,
 * tf32, bf16, fp16, with the ReLU's conv's bias gradient (bias_db), on
 *  - 16 channels, 2x2/2 on 8x8: k_pool_tile8 masked, with the bias sums
 *    (channels-last; fp32 NCHW: k_pool_tile_nchw masked, then cuk_chan_sum,
 *    for the 2x2/2 pools below too),
 *  - 24 channels, 2x2/2: k_pool_tile8 masked, without the sums (3 channel
 *    groups do not divide a block), then cuk_chan_sum,
 *  - 16 channels, 3x3/2 pad 1 on 9x9 (AlexNet's overlapping kind): the
 *    argmax pass and k_pool_bwd8 masked, then cuk_chan_sum (fp32 NCHW:
 *    cuk_pool_bwd, then the ReLU's kernels),
 *  - 64 channels, 2x2/2 on 32x32, batch 8: k_pool_tile8 over many blocks
 *    (many partial sums per channel);
 * x with a tenth exact zeros (ties, and x = 0 masked). Against the CPU
 * oracle doing the same (the pool, then the ReLU in place): dx bit for bit
 * (a select on the same values; the overlapping pool's sums in the same
 * order, as test_pool checks unfused), db within TOL_FP32 (float sums in
 * another order against the CPU's double, see the top); against CUDA's
 * pool backward without the ReLU: equal wherever the fused dx is not 0, and
 * not equal everywhere (the mask did something). */
START_TEST(test_pool_relu) {
    static const struct { int c, hw, k, s, p, n; } shapes[4] = {
        {16, 8, 2, 2, 0, 4}, {24, 8, 2, 2, 0, 4}, {16, 9, 3, 2, 1, 4}, {64, 32, 2, 2, 0, 8}};
    static const vd_math maths[4] = {VD_MATH_FP32, VD_MATH_TF32, VD_MATH_BF16, VD_MATH_FP16};
    for (int si = 0; si < 4; si++) {
        const int C = shapes[si].c, N = shapes[si].n;
        vd_net net;
        c_net_begin(&net, 3, shapes[si].hw, shapes[si].hw, N);
        int cv = vdt_add(&net, c_conv(-1, C, 3, 1, 1, 1, 1, true));
        int r = vdt_add(&net, vdt_simple(cv, VD_OP_RELU));
        int pl = vdt_add(&net, c_pool(r, VD_POOL_MAX, shapes[si].k, shapes[si].s, shapes[si].p,
                                      false));
        vdt_finish(&net, pl);
        vd_schedule_inplace(&net);
        ck_assert_int_eq(vd_op_pool_relu(&net, pl), r);
        ck_assert_int_eq(vd_op_bias_taker(&net, r), cv);
        c_run_in ri;
        c_run_init(&ri, &net, pl, N, 800 + (uint64_t)si, 0.1f);
        for (int mi = 0; mi < 4; mi++) {
            const char *m = vd_math_name(maths[mi]);
            c_run_opts o = {.math = maths[mi], .deterministic = true, .training = true,
                            .backward = true, .seed = 5, .bias_db = C, .relu_dx = true};
            c_run_out f, u, ref;
            c_run(c_cuda(), &ri, &o, &f);
            /* deterministic: the ReLU takes the bias gradient (so the pool does) */
            ck_assert_msg(vd_cuda_relu_bias_fused(c_cuda(), r), "%s: the ReLU does not take "
                          "its conv's bias gradient", m);
            c_run(c_cpu(), &ri, &o, &ref);
            o.bias_db = 0;
            o.relu_dx = false;
            c_run(c_cuda(), &ri, &o, &u);
            ck_assert_msg(same_bits(f.dx[0], ref.dx[0], ri.xn[0]),
                          "%s %dx%dx%d k%d: fused dx against the CPU", m, C, shapes[si].hw,
                          shapes[si].hw, shapes[si].k);
            int64_t masked = 0;
            for (int64_t i = 0; i < ri.xn[0]; i++) {
                if (f.dx[0][i] != 0.0f)
                    ck_assert_msg(f.dx[0][i] == u.dx[0][i], "%s: dx %lld %g, unfused %g", m,
                                  (long long)i, f.dx[0][i], u.dx[0][i]);
                masked += f.dx[0][i] != u.dx[0][i];
            }
            ck_assert_msg(masked > 0, "%s: the ReLU's mask changed nothing", m);
            double err = c_nerr(f.db, ref.db, C);
            printf("  pool+relu %dx%dx%d k%d %-4s: dx same bits as the CPU, %lld masked, db %.2g\n",
                   C, shapes[si].hw, shapes[si].hw, shapes[si].k, m, (long long)masked, err);
            ck_assert_msg(err <= TOL_FP32, "%s: db against the CPU %g", m, err);
            c_run_out_free(&f);
            c_run_out_free(&u);
            c_run_out_free(&ref);
        }
        c_run_in_free(&ri);
        vd_net_free(&net);
    }
}
END_TEST
#endif

/* The batch norm + add + ReLU backward fusion (vd_op_io.relu_y,
 * cu_bn_backward): batch norm -> add (+ the net input) -> ReLU in place,
 * the batch norm's forward and backward with the ReLU's y (relu_y: U(-1, 1)
 * with a tenth exact zeros) in fp32, tf32, bf16, fp16, on
 *  - 8 channels 6x6: channels-last, dy masked in the reduction pass
 *    (k_chan_red8 MODE 5), fp32 (NCHW): the ReLU's kernel then cuDNN's,
 *  - 6 channels 5x7: the ReLU's kernel in place, then the one-channel
 *    kernels (cuDNN's in fp32).
 * Against the CPU oracle doing the same (the ReLU in place, then the batch
 * norm): dy as rewritten bit for bit (a select on the same values), dx
 * within the math's tolerance and dgamma / dbeta within TOL_BN (as test_bn:
 * the batch norm's own reductions); against CUDA's batch norm backward
 * without relu_y on the dy the CPU masked: dx, dgamma, dbeta bit for bit
 * (the same sums of the same values, deterministic kernels). */
START_TEST(test_bn_add_relu) {
    static const struct { int c, h, w; } shapes[2] = {{8, 6, 6}, {6, 5, 7}};
    static const vd_math maths[4] = {VD_MATH_FP32, VD_MATH_TF32, VD_MATH_BF16, VD_MATH_FP16};
    const int N = 4;
    for (int si = 0; si < 2; si++) {
        vd_net net;
        c_net_begin(&net, shapes[si].c, shapes[si].h, shapes[si].w, N);
        int b = vdt_add(&net, vdt_simple(-1, VD_OP_BATCHNORM));
        int ins[2] = {b, -1};
        int a = vdt_add(&net, vdt_multi(VD_OP_ADD, 2, ins));
        int r = vdt_add(&net, vdt_simple(a, VD_OP_RELU));
        vdt_finish(&net, r);
        vd_schedule_inplace(&net);
        ck_assert_int_eq(vd_op_add_relu(&net, b), r);
        c_run_in ri;
        c_run_init(&ri, &net, b, N, 900 + (uint64_t)si, 0.0f);
        float *ry = malloc((size_t)ri.yn * sizeof *ry);
        ck_assert(ry);
        vd_rng g;
        vd_rng_seed(&g, 31, (uint64_t)si);
        for (int64_t i = 0; i < ri.yn; i++)
            ry[i] = vd_rng_uniform(&g) < 0.1f ? 0.0f : 2.0f * vd_rng_uniform(&g) - 1.0f;
        for (int mi = 0; mi < 4; mi++) {
            const char *m = vd_math_name(maths[mi]);
            bool half = vd_math_act_dtype(maths[mi]) != VD_DT_F32;
            double tol = !half ? TOL_BN : maths[mi] == VD_MATH_FP16 ? TOL_F16 : TOL_BF16;
            c_run_opts o = {.math = maths[mi], .deterministic = true, .training = true,
                            .backward = true, .seed = 5, .relu_y = ry};
            c_run_out f, u, ref;
            c_run(c_cuda(), &ri, &o, &f);
            c_run(c_cpu(), &ri, &o, &ref);
            c_run_in rm = ri;   /* (shares ri's arrays: not freed) */
            rm.dy = ref.dy;
            o.relu_y = NULL;
            c_run(c_cuda(), &rm, &o, &u);
            ck_assert_msg(same_bits(f.dy, ref.dy, ri.yn), "%s %dx%dx%d: dy as rewritten against "
                          "the CPU", m, shapes[si].c, shapes[si].h, shapes[si].w);
            int64_t masked = 0;
            for (int64_t i = 0; i < ri.yn; i++) masked += ref.dy[i] == 0.0f && ri.dy[i] != 0.0f;
            ck_assert_msg(masked > 0 && masked < ri.yn, "%s: %lld of %lld masked", m,
                          (long long)masked, (long long)ri.yn);
            double edx = c_nerr(f.dx[0], ref.dx[0], ri.xn[0]);
            double egr = c_nerr(f.grad, ref.grad, ri.pn);
            printf("  bn+add+relu %dx%dx%d %-4s: dy same bits as the CPU, %lld masked, dx %.2g, "
                   "dparam %.2g\n", shapes[si].c, shapes[si].h, shapes[si].w, m,
                   (long long)masked, edx, egr);
            ck_assert_msg(edx <= tol, "%s: dx against the CPU %g", m, edx);
            ck_assert_msg(egr <= TOL_BN, "%s: dgamma / dbeta against the CPU %g", m, egr);
            ck_assert_msg(same_bits(f.dx[0], u.dx[0], ri.xn[0]) &&
                              same_bits(f.grad, u.grad, ri.pn),
                          "%s: fused against CUDA's unfused on the masked dy", m);
            c_run_out_free(&f);
            c_run_out_free(&u);
            c_run_out_free(&ref);
        }
        free(ry);
        c_run_in_free(&ri);
        vd_net_free(&net);
    }
}
END_TEST

/* ------------------------------------------------------------------ flatten, add, concat */

START_TEST(test_shape_ops) {
    vd_net net;
    c_net_begin(&net, 3, 4, 5, 4);
    int a = vdt_add(&net, c_conv(-1, 5, 1, 1, 0, 1, 1, false));
    int b = vdt_add(&net, c_conv(-1, 2, 1, 1, 0, 1, 1, false));
    int ins3[3] = {-1, a, b};
    int cat = vdt_add(&net, vdt_multi(VD_OP_CONCAT, 3, ins3));
    int insadd[3] = {-1, -1, -1};
    int add = vdt_add(&net, vdt_multi(VD_OP_ADD, 3, insadd));
    int f1 = vdt_add(&net, vdt_simple(cat, VD_OP_FLATTEN));
    int f2 = vdt_add(&net, vdt_simple(add, VD_OP_FLATTEN));
    int fins[2] = {f1, f2};
    int cat2 = vdt_add(&net, vdt_multi(VD_OP_CONCAT, 2, fins));
    vdt_finish(&net, cat2);
    /* copies and ordered float adds: exact (tf32: channels-last concat and
     * flatten's NHWC -> NCHW) */
    check_opts co = fwd_bwd(TOL_EXACT, TOL_EXACT);
    for (int beta = 0; beta < 2; beta++) {
        co.beta = (float)beta;
        check_layer(&net, cat, "concat 3+5+2", &co);
        check_layer(&net, add, "add x3", &co);
        check_layer(&net, f1, "flatten", &co);
        check_layer(&net, cat2, "concat flattened", &co);
    }
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ loss */

START_TEST(test_loss) {
    int classes[2] = {10, 1000}, batch[2] = {16, 8};
    for (int i = 0; i < 2; i++) {
        vd_net net;
        c_net_begin(&net, classes[i], 1, 1, batch[i]);
        vdt_finish(&net, -1);
        check_opts co = fwd_bwd(TOL_TRANS, TOL_TRANS);   /* expf/logf vs double libm */
        co.n = batch[i];
        co.tf32 = false;
        check_layer(&net, 0, classes[i] == 10 ? "softmax xent 10" : "softmax xent 1000", &co);
        co.beta = 1.0f;
        check_layer(&net, 0, "softmax xent dx+=", &co);
        /* an evaluation's padded batch: the loss and the top-1 hits (aux)
         * count the first 5 samples only */
        co.beta = 0.0f;
        co.backward = false;
        co.loss_n = 5;
        check_layer(&net, 0, classes[i] == 10 ? "softmax xent 10 loss_n 5"
                                              : "softmax xent 1000 loss_n 5", &co);
        vd_net_free(&net);
    }
}
END_TEST

/* ------------------------------------------------------------------ chunks */

/* Chunked calls (vd_op_io's n0, n_batch, dw_beta: backend.h): a batch of 8
 * as chunks of 3, 4 and 1 (every chunk's forward, then every backward, the
 * later ones adding to dw / db), on CUDA against the CPU run on the same
 * chunks (the CPU's chunked calls equal its whole-batch ones: tests/ops/
 * test_chunk.c), for every option and math, with each op's tolerance of the
 * tests above (the same arithmetic on both sides; chunking only moves where
 * the gradient sums are split, identically on both). Conv also at chunks of
 * the setup batch (setup at 4, a batch of 8 as 4 + 4), where its setup plans
 * run: the cuDNN plans (beta 0) for the first chunk and a runtime plan of
 * beta 1 for the second, and with --conv-split force and the GEMM
 * backward-filter forced, the split options' and the GEMM's own
 * accumulation into dw; and chunks of the split options' sub-batches
 * (setup at 8, chunks 4 + 4). Dropout is exact (its mask at n0 + the sample), so
 * is max pooling; the loss's 1/n_batch and summed parts: TOL_TRANS. */
START_TEST(test_chunked) {
    static const int uneven[] = {3, 4, 1, 0}, halves[] = {4, 4, 0};
    for (int i = 0; i < 2; i++) {   /* conv3x3 p1 bias and conv1x1 bias (GEMM-eligible) */
        const conv_case *cc = &conv_cases[i ? 3 : 0];
        vd_net net;
        c_net_begin(&net, cc->c, cc->h, cc->w, 8);
        vdt_add(&net, c_conv(-1, cc->out, cc->k, cc->s, cc->p, cc->d, cc->g, cc->bias));
        vdt_finish(&net, 0);
        char name[64];
        snprintf(name, sizeof name, "chunks 3+4+1 %s", cc->name);
        check_opts co = fwd_bwd(TOL_FP32, TOL_TF32);   /* matrix products */
        co.n = 8;
        co.chunks = uneven;
        check_layer(&net, 0, name, &co);
        vd_backend *be = c_cuda();
        vd_conv_split was_split = be->opts.conv_split;
        bool was_gemm = be->opts.conv_gemm_force;
        be->opts.conv_split = VD_CONV_SPLIT_FORCE;   /* read by the next layer_setup */
        be->opts.conv_gemm_force = true;
        snprintf(name, sizeof name, "chunks 4+4 setup 4 %s", cc->name);
        co.chunks = halves;
        co.setup_n = 4;
        check_layer(&net, 0, name, &co);
        /* chunks of whole sub-batches of the split options (setup 8: each
         * 4-chunk runs as 4 / (8 / split) of their sub-batch plans) */
        snprintf(name, sizeof name, "chunks 4+4 setup 8 %s", cc->name);
        co.setup_n = 8;
        check_layer(&net, 0, name, &co);
        be->opts.conv_split = was_split;
        be->opts.conv_gemm_force = was_gemm;
        vd_net_free(&net);
    }
    for (int bias = 0; bias < 2; bias++) {   /* fc over a 3x5x5 input (flattened) */
        vd_net net;
        c_net_begin(&net, 3, 5, 5, 8);
        vd_layer fc = vdt_simple(-1, VD_OP_FC);
        fc.u.fc.out = 20;
        fc.u.fc.bias = bias;
        vdt_add(&net, fc);
        vdt_finish(&net, 0);
        check_opts co = fwd_bwd(TOL_FP32, TOL_TF32);   /* matrix products (K = 75) */
        co.n = 8;
        co.chunks = uneven;
        check_layer(&net, 0, bias ? "chunks fc 75->20 bias" : "chunks fc 75->20", &co);
        vd_net_free(&net);
    }
    {
        vd_net net;
        c_net_begin(&net, 5, 9, 9, 8);
        int mp = vdt_add(&net, c_pool(-1, VD_POOL_MAX, 3, 2, 1, true));
        int ap = vdt_add(&net, c_pool(-1, VD_POOL_AVG, 3, 2, 1, true));
        int r = vdt_add(&net, vdt_simple(-1, VD_OP_RELU));
        vd_layer dl = vdt_simple(r, VD_OP_DROPOUT);
        dl.u.dropout.p = 0.3f;
        int d = vdt_add(&net, dl);
        int fl[3] = {vdt_add(&net, vdt_simple(mp, VD_OP_FLATTEN)),
                     vdt_add(&net, vdt_simple(ap, VD_OP_FLATTEN)),
                     vdt_add(&net, vdt_simple(d, VD_OP_FLATTEN))};
        vdt_finish(&net, vdt_add(&net, vdt_multi(VD_OP_CONCAT, 3, fl)));   /* all lead to the loss */
        check_opts co = fwd_bwd(TOL_EXACT, TOL_EXACT);   /* max, relu, dropout: exact */
        co.n = 8;   /* tf32 too: chunks of channels-last maps */
        co.chunks = uneven;
        check_layer(&net, mp, "chunks maxpool3 s2 p1 ceil", &co);
        check_layer(&net, r, "chunks relu", &co);
        check_layer(&net, d, "chunks dropout p=.3", &co);
        co.tol_fp32 = co.tol_tf32 = TOL_ROUND;   /* average: double vs float sums */
        check_layer(&net, ap, "chunks avgpool3 s2 p1 ceil", &co);
        vd_net_free(&net);
    }
    {
        vd_net net;
        c_net_begin(&net, 10, 1, 1, 8);
        vdt_finish(&net, -1);
        check_opts co = fwd_bwd(TOL_TRANS, TOL_TRANS);   /* expf/logf vs double libm */
        co.n = 8;
        co.tf32 = false;
        co.chunks = uneven;
        check_layer(&net, 0, "chunks softmax xent 10", &co);
        /* loss_n 5 in chunks 3 + 4 + 1: the count ends inside the second */
        co.backward = false;
        co.loss_n = 5;
        check_layer(&net, 0, "chunks softmax xent 10 loss_n 5", &co);
        vd_net_free(&net);
    }
}
END_TEST

#if VD_HAVE_CUDA
/* The engine of the first runtime plan built for direction dir ("fwd",
 * "bwd-data", "bwd-filter") at batch n in f, --conv-debug 1's lines
 * ("vdnn conv: layer 'L' DIR: batch N, ...: runtime plan..., engine E"), or
 * -1 where none was built. */
static long long runtime_engine(FILE *f, const char *dir, int n) {
    char line[512], d[32];
    int bn;
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        const char *rp = strstr(line, ": runtime plan"), *en = strstr(line, ", engine ");
        if (rp && en && sscanf(line, "vdnn conv: layer '%*[^']' %31[^:]: batch %d", d, &bn) == 2 &&
            !strcmp(d, dir) && bn == n)
            return strtoll(en + 9, NULL, 10);
    }
    return -1;
}

/* A chunk of another batch than the setup's runs a plan built for it
 * (cuda_convgraph_run.cu, run_alt), on its option's setup engine where
 * that engine takes the call: the heuristics' first engine at a chunk's
 * batch can be several times slower than the one timed fastest at the
 * whole batch. Per conv case and option (fp32, the graph API, setup at
 * batch 8, chunks of 4), each direction's first runtime plan (--conv-debug 1's lines, stderr
 * caught in a file) must run the option's engine where that is a cuDNN one
 * (not the cuBLAS backward-filter or the direct forward, 1000 / 1001): the
 * forward and the first (overwriting) backward-filter and backward-data
 * calls, which every engine of the setup supports at a smaller batch. The
 * options differ in their engines, so the heuristics' single choice per
 * call fails this where they differ. */
START_TEST(test_chunk_setup_engine) {
    static const int halves[] = {4, 4, 0};
    vd_backend *be = c_cuda();
    int checked = 0;
    for (int i = 0; i < 2; i++) {
        const conv_case *cc = &conv_cases[i];
        vd_net net;
        c_net_begin(&net, cc->c, cc->h, cc->w, 8);
        vdt_add(&net, c_conv(-1, cc->out, cc->k, cc->s, cc->p, cc->d, cc->g, cc->bias));
        vdt_finish(&net, 0);
        c_run_in in;
        c_run_init(&in, &net, 0, 8, 77, 0.0f);
        c_run_opts o = {.math = VD_MATH_FP32, .training = true, .backward = true,
                        .chunks = halves, .setup_n = 8};
        int nopt = 1;
        for (int a = 0; a < nopt; a++) {
            o.algo = a;
            const int was = be->opts.conv_debug;
            const vd_conv_api api = be->opts.conv_api;
            be->opts.conv_debug = 1;   /* read by the next layer_setup */
            be->opts.conv_api = VD_CONV_API_GRAPH;   /* never the legacy API's algorithms */
            FILE *f = tmpfile();
            ck_assert(f);
            fflush(stderr);
            const int saved = dup(2);
            ck_assert(saved >= 0 && dup2(fileno(f), 2) >= 0);
            c_run_out got;
            nopt = c_run(be, &in, &o, &got);
            fflush(stderr);
            ck_assert(dup2(saved, 2) >= 0);
            close(saved);
            be->opts.conv_debug = was;
            be->opts.conv_api = api;
            c_run_out_free(&got);
            const vd_algo_opt *opts;
            int nn;
            vd_err e = {0};
            ck_assert(be->layer_algos(be, 0, &opts, &nn, &e) == 0);
            const struct { const char *dir; int engine; } want[] = {
                {"fwd", opts[a].fwd_algo}, {"bwd-data", opts[a].bwd_data_algo},
                {"bwd-filter", opts[a].bwd_filter_algo}};
            for (int k = 0; k < 3; k++) {
                if (want[k].engine >= 1000) continue;   /* the cuBLAS / direct kernels */
                long long got_e = runtime_engine(f, want[k].dir, 4);
                ck_assert_msg(got_e == want[k].engine, "%s [%s] %s at batch 4: engine %lld, "
                              "the option's %d", cc->name, opts[a].label, want[k].dir, got_e,
                              want[k].engine);
                checked++;
            }
            fclose(f);
        }
        c_run_in_free(&in);
        vd_net_free(&net);
    }
    /* the direct forward and the GEMM backward-filter take some directions
     * (an H200 checked 5 of the 2 cases' options' directions) */
    ck_assert_msg(checked >= 3, "only %d runtime plans checked", checked);
    printf("  chunk runtime plans on their option's setup engine: %d checked\n", checked);
}
END_TEST
#endif

/* ------------------------------------------------------------------ determinism */

static void det_layer(const vd_net *net, int layer, const char *name) {
    c_run_in in;
    c_run_init(&in, net, layer, 8, 31, 0.0f);
    c_run_opts o = {.math = VD_MATH_FP32, .deterministic = true, .training = true,
                    .backward = true, .seed = 3, .iter = 1};
    const vd_layer *l = &net->layers[layer];
    for (int mi = 0; mi < 2; mi++) {
        o.math = mi ? VD_MATH_TF32 : VD_MATH_FP32;
        int nopt = 1;
        for (int a = 0; a < nopt; a++) {
            o.algo = a;
            c_run_out r1, r2;
            nopt = c_run(c_cuda(), &in, &o, &r1);
            c_run(c_cuda(), &in, &o, &r2);
            ck_assert_msg(!memcmp(r1.y, r2.y, (size_t)in.yn * 4), "%s algo %d: y repeats", name, a);
            for (int k = 0; k < l->n_in; k++)
                ck_assert_msg(!memcmp(r1.dx[k], r2.dx[k], (size_t)in.xn[k] * 4),
                              "%s algo %d: dx repeats", name, a);
            if (in.pn)
                ck_assert_msg(!memcmp(r1.grad, r2.grad, (size_t)in.pn * 4),
                              "%s algo %d: dparam repeats", name, a);
            printf("  %-34s algo %d %s: bitwise repeat ok\n", name, a, mi ? "tf32" : "fp32");
            c_run_out_free(&r1);
            c_run_out_free(&r2);
        }
    }
    c_run_in_free(&in);
}

START_TEST(test_deterministic) {
    vd_net net;
    c_net_begin(&net, 16, 14, 14, 8);
    int cv = vdt_add(&net, c_conv(-1, 32, 3, 1, 1, 1, 1, true));
    int bn = vdt_add(&net, vdt_simple(cv, VD_OP_BATCHNORM));
    int pl = vdt_add(&net, c_pool(bn, VD_POOL_MAX, 2, 2, 0, false));
    vd_layer fc = {0};
    fc.op = VD_OP_FC;
    fc.n_in = 1;
    fc.in[0] = pl;
    fc.u.fc.out = 10;
    fc.u.fc.bias = true;
    int f = vdt_add(&net, fc);
    vdt_finish(&net, f);
    det_layer(&net, cv, "conv (deterministic)");
    det_layer(&net, bn, "batchnorm (deterministic)");
    det_layer(&net, pl, "maxpool (deterministic)");
    det_layer(&net, f, "fc (deterministic)");
    det_layer(&net, f + 1, "loss (deterministic)");
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ the optimizer */

/* The optimizer's update (backend.h's vd_optim_step) on both backends, on
 * the same inputs, over two ranges (as the executor updates per trainable
 * range): SGD (with and without momentum, the buffer poisoned where the
 * first update must not read it, Nesterov) and AdamW (its first update with
 * the state poisoned, and a later one reading a given state). */
START_TEST(test_sgd) {
    const int64_t n = 100003;
    vd_rng r;
    vd_rng_seed(&r, 5, 1);
    float *p0 = malloc(n * 4), *g = malloc(n * 4), *m0 = malloc(n * 4), *v0 = malloc(n * 4);
    ck_assert(p0 && g && m0 && v0);
    for (int64_t i = 0; i < n; i++) {
        p0[i] = vd_rng_uniform(&r) * 2 - 1;
        g[i] = vd_rng_uniform(&r) * 2 - 1;
        m0[i] = vd_rng_uniform(&r) * 2 - 1;
        v0[i] = vd_rng_uniform(&r);
    }
    struct { vd_optim_step o; bool poison_state; } cases[] = {
        {{.kind = VD_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f, .t = 2}, false},
        {{.kind = VD_OPT_SGD, .lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f, .t = 1}, true},
        {{.kind = VD_OPT_SGD, .lr = 0.05f, .momentum = 0.0f, .weight_decay = 0.0f, .t = 7}, true},
        {{.kind = VD_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f,
          .nesterov = true, .t = 3}, false},
        {{.kind = VD_OPT_ADAMW, .lr = 1e-3f, .weight_decay = 1e-2f, .beta1 = 0.9f,
          .beta2 = 0.999f, .eps = 1e-8f, .t = 1}, true},
        {{.kind = VD_OPT_ADAMW, .lr = 3e-2f, .weight_decay = 0.1f, .beta1 = 0.8f,
          .beta2 = 0.99f, .eps = 1e-6f, .t = 9}, false},
    };
    for (size_t ci = 0; ci < VD_ARRAY_LEN(cases); ci++) {
        const vd_optim_step *o = &cases[ci].o;
        bool adamw = o->kind == VD_OPT_ADAMW;
        float *res[2][3];
        for (int bi = 0; bi < 2; bi++) {
            vd_backend *be = bi ? c_cuda() : c_cpu();
            vd_err e = {0};
            void *pool;
            char *h;
            uint64_t bytes = 4 * (uint64_t)n * 4;   /* p, g, m, v */
            ck_assert(be->pool_create(be, bytes, &pool, &e) == 0);
            ck_assert(be->host_alloc(be, bytes, (void **)&h, &e) == 0);
            memcpy(h, p0, n * 4);
            memcpy(h + n * 4, g, n * 4);
            if (cases[ci].poison_state) memset(h + 2 * n * 4, 0xFF, 2 * n * 4);
            else { memcpy(h + 2 * n * 4, m0, n * 4); memcpy(h + 3 * n * 4, v0, n * 4); }
            ck_assert(be->copy_async(be, VD_STREAM_H2D, pool, h, bytes, &e) == 0);
            ck_assert(be->synchronize(be, &e) == 0);
            float *d = pool, *v = adamw ? d + 3 * n : NULL;
            /* two ranges in one launch, the second at half the lr (an lr_mult) */
            vd_update_range ur[2] = {{0, 5000, 1.0f}, {5000, n - 5000, 0.5f}};
            void *table = NULL;
            vd_step_scalars ss = vd_step_scalars_of(o, 0);
            ck_assert_msg(be->ranges_create(be, ur, 2, &table, &e) == 0, "%s", e.msg);
            ck_assert_msg(be->step_set(be, &ss, &e) == 0, "%s", e.msg);
            ck_assert_msg(be->update(be, o, d, d + n, d + 2 * n, v, table, &e) == 0, "%s",
                          e.msg);
            ck_assert(be->synchronize(be, &e) == 0);   /* the D2H stream after the update */
            ck_assert(be->copy_async(be, VD_STREAM_D2H, h, pool, bytes, &e) == 0);
            ck_assert(be->synchronize(be, &e) == 0);
            for (int k = 0; k < 3; k++) {
                res[bi][k] = malloc(n * 4);
                memcpy(res[bi][k], h + (k ? k + 1 : 0) * n * 4, n * 4);
            }
            be->ranges_free(be, table);
            be->host_free(be, h);
            be->pool_destroy(be, pool);
        }
        /* the same float (and AdamW's double) operations in the same order
         * (explicit _rn intrinsics on the device): exact */
        ck_assert_msg(!memcmp(res[0][0], res[1][0], n * 4), "case %zu: params differ", ci);
        ck_assert_msg(!memcmp(res[0][1], res[1][1], n * 4), "case %zu: momentum / exp_avg "
                      "differs", ci);
        ck_assert_msg(!adamw || !memcmp(res[0][2], res[1][2], n * 4), "case %zu: exp_avg_sq "
                      "differs", ci);
        for (int bi = 0; bi < 2; bi++)
            for (int k = 0; k < 3; k++) free(res[bi][k]);
    }
    free(p0);
    free(g);
    free(m0);
    free(v0);
}
END_TEST

/* AdamW and Nesterov SGD through the CUDA backend's update against
 * torch.optim's own float64 results (tests/train/data/adamw_reference.json,
 * made by tools/optim_reference.py): the same comparison, and the same
 * bound, as tests/train/test_optim.c on the CPU backend (see there why
 * relative 1e-6 holds after 20 steps); the CUDA kernels compute the CPU's
 * float operations, so the bound is the same. */
START_TEST(test_optim_reference) {
    vdt_optim_ref ref;
    vdt_optim_ref_load(&ref);
    for (int c = 0; c < ref.n_cases; c++)
        vdt_optim_ref_check(&ref.cases[c], c_cuda());
    vdt_optim_ref_free(&ref);
}
END_TEST

/* ------------------------------------------------------------------ streams */

START_TEST(test_streams) {
    vd_backend *be = c_cuda();
    vd_err e = {0};
    const uint64_t bytes = 64ull << 20;
    void *pool;
    unsigned char *h;
    ck_assert(be->pool_create(be, 2 * bytes, &pool, &e) == 0);
    ck_assert(be->host_alloc(be, bytes, (void **)&h, &e) == 0);
    ck_assert(be->events_create(be, 4, &e) == 0);
    for (uint64_t i = 0; i < bytes; i++) h[i] = (unsigned char)(i * 7 + 3);
    char *d = pool;
    /* H2D -> event -> compute copies device->device -> event -> D2H */
    ck_assert(be->event_record(be, 0, VD_STREAM_H2D, &e) == 0);
    ck_assert(be->copy_async(be, VD_STREAM_H2D, d, h, bytes, &e) == 0);
    ck_assert(be->event_record(be, 1, VD_STREAM_H2D, &e) == 0);
    ck_assert(be->stream_wait(be, VD_STREAM_COMPUTE, 1, &e) == 0);
    ck_assert(be->copy_async(be, VD_STREAM_COMPUTE, d + bytes, d, bytes, &e) == 0);
    ck_assert(be->event_record(be, 2, VD_STREAM_COMPUTE, &e) == 0);
    ck_assert(be->stream_wait(be, VD_STREAM_D2H, 2, &e) == 0);
    ck_assert(be->poison_async(be, VD_STREAM_COMPUTE, d, bytes, &e) == 0);   /* after the copy */
    unsigned char *back = malloc(bytes);
    ck_assert(back);
    ck_assert(be->event_sync(be, 1, &e) == 0);
    float ms = -1;
    ck_assert_msg(be->event_elapsed(be, 0, 1, &ms, &e) == 0, "%s", e.msg);
    printf("  H2D 64 MiB: %.3f ms (%.1f GB/s)\n", ms, bytes / (ms * 1e-3) / 1e9);
    ck_assert(ms > 0);
    memset(h, 0, bytes);
    ck_assert(be->copy_async(be, VD_STREAM_D2H, h, d + bytes, bytes, &e) == 0);
    ck_assert(be->event_record(be, 3, VD_STREAM_D2H, &e) == 0);
    ck_assert(be->event_sync(be, 3, &e) == 0);
    for (uint64_t i = 0; i < bytes; i++)
        if (h[i] != (unsigned char)(i * 7 + 3)) ck_abort_msg("byte %llu wrong", (unsigned long long)i);
    /* poison (issued on compute above: wait for everything before reading) and zero */
    ck_assert(be->synchronize(be, &e) == 0);
    ck_assert(be->copy_async(be, VD_STREAM_D2H, back, d, 4096, &e) == 0);
    ck_assert(be->synchronize(be, &e) == 0);
    for (int i = 0; i < 4096; i++) ck_assert_int_eq(back[i], 0xFF);
    ck_assert(be->zero_async(be, VD_STREAM_COMPUTE, d, 4096, &e) == 0);
    ck_assert(be->copy_async(be, VD_STREAM_COMPUTE, back, d, 4096, &e) == 0);
    ck_assert(be->synchronize(be, &e) == 0);
    for (int i = 0; i < 4096; i++) ck_assert_int_eq(back[i], 0);
    /* bad indices are errors, not crashes */
    ck_assert_int_eq(be->event_record(be, 4, 0, &e), VD_EINTERNAL);
    ck_assert_int_eq(be->stream_wait(be, 3, 0, &e), VD_EINTERNAL);
#if VD_HAVE_CUDA
    uint64_t fr = 0, tot = 0;
    ck_assert_msg(vd_cuda_mem_info(be, &fr, &tot, &e) == 0, "%s", e.msg);
    printf("  device memory: %.2f GiB free of %.2f GiB\n", fr / 1073741824.0, tot / 1073741824.0);
    ck_assert(tot > 0 && fr <= tot);
    ck_assert_int_eq(vd_cuda_mem_info(c_cpu(), &fr, &tot, &e), VD_EUNSUPPORTED);
#endif
    free(back);
    be->host_free(be, h);
    be->pool_destroy(be, pool);
}
END_TEST

/* ------------------------------------------------------------------ loss scaling */

/* The loss layer's backward with vd_op_io.loss_scaled (math fp16): dx times
 * the backend's scale (device memory on CUDA), against the CPU backend
 * doing the same, and against CUDA's own unscaled dx times the scale. */
START_TEST(test_loss_scaled) {
    ck_assert_msg(c_cpu()->scale_set != NULL, "the CPU backend has no math fp16 loss scaling");
    vd_net net;
    c_net_begin(&net, 10, 1, 1, 16);
    vdt_finish(&net, -1);
    c_run_in in;
    c_run_init(&in, &net, 0, 16, 4242, 0.0f);
    const float scale = 1024.0f;
    vd_loss_scale st = vd_loss_scale_init();
    st.scale = scale;
    vd_err e = {0};
    ck_assert_msg(c_cpu()->scale_set(c_cpu(), &st, &e) == 0, "%s", e.msg);
    ck_assert_msg(c_cuda()->scale_set(c_cuda(), &st, &e) == 0, "%s", e.msg);
    for (int beta = 0; beta < 2; beta++) {
        c_run_opts o = {.math = VD_MATH_FP16, .training = true, .backward = true,
                        .dx_beta = (float)beta, .seed = 5, .iter = 1, .loss_scaled = true};
        c_run_out ref, got, plain;
        c_run(c_cpu(), &in, &o, &ref);
        c_run(c_cuda(), &in, &o, &got);
        /* (softmax - onehot) / n is within 1 of the maximum: scaled by 1024 it
         * still fits fp16; expf vs libm, then one fp16 rounding: TOL_F16 */
        cmp(beta ? "softmax xent scaled dx+=" : "softmax xent scaled", "dx", got.dx[0],
            ref.dx[0], in.xn[0], TOL_F16);
        cmp("softmax xent scaled", "loss", got.aux, ref.aux, 1, TOL_TRANS);   /* unscaled */
        if (!beta) {
            o.loss_scaled = false;
            c_run(c_cuda(), &in, &o, &plain);
            float *up = malloc((size_t)in.xn[0] * sizeof(float));
            ck_assert(up);
            for (int64_t i = 0; i < in.xn[0]; i++) up[i] = plain.dx[0][i] * scale;
            /* a power of two: exact where the unscaled value is a normal half,
             * below 2^-14 the unscaled one lost bits: <= 2^-24 * 1024 absolute */
            cmp("softmax xent scaled vs unscaled", "dx", got.dx[0], up, in.xn[0], 1e-4);
            free(up);
            c_run_out_free(&plain);
        }
        c_run_out_free(&ref);
        c_run_out_free(&got);
    }
    /* the state is untouched by the forward / backward */
    vd_loss_scale back;
    ck_assert_msg(c_cuda()->scale_get(c_cuda(), &back, &e) == 0, "%s", e.msg);
    ck_assert(back.scale == scale && back.found_inf == 0 && back.first_bad == -1);
    c_run_in_free(&in);
    vd_net_free(&net);
}
END_TEST

/* One scripted GradScaler sequence on be over grads / params / momentum of
 * n floats in 3 ranges; returns the final params and momentum (malloc'd)
 * and the state after each of the 4 steps in st[]. Steps:
 *   0: an inf in range 1 (layer 11) and a NaN in range 2 (layer 12),
 *      range 0 clean (layer 10): skipped, first_bad 11, scale halved;
 *   1: clean: the first update that runs (momentum poisoned before: fresh);
 *   2: NaN in range 0 only (layer 10), grad_check called in the order
 *      range 2, 1, 0: first_bad 10; skipped;
 *   3: state set to growth VD_LOSS_SCALE_INTERVAL - 1: clean, the scale
 *      doubles and growth restarts at 0. */
static void scaler_run(vd_backend *be, vd_optimizer kind, const float *p0, const float *g0,
                       int64_t n, float **p_out, float **m_out, vd_loss_scale st[4]) {
    ck_assert_msg(be->scale_set && be->scale_get && be->grad_check && be->update_scaled &&
                      be->scale_update, "%s: no loss-scaling entry points", be->name);
    vd_err e = {0};
    void *pool;
    char *h;
    uint64_t bytes = 4 * (uint64_t)n * 4;   /* p, g, m and AdamW's v */
    ck_assert(be->pool_create(be, bytes, &pool, &e) == 0);
    ck_assert(be->host_alloc(be, bytes, (void **)&h, &e) == 0);
    float *d = pool;
    const int64_t r0 = 0, r1 = 1000, r2 = n - 7, ends[4] = {r0, r1, r2, n};
    vd_optim_step o = { .kind = kind, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f,
                        .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .t = 1 };
    float *v = kind == VD_OPT_ADAMW ? d + 3 * n : NULL;
    vd_loss_scale s = vd_loss_scale_init();
    s.scale = 4096.0f;
    ck_assert_msg(be->scale_set(be, &s, &e) == 0, "%s: %s", be->name, e.msg);
    memcpy(h, p0, (size_t)n * 4);
    memset(h + 2 * n * 4, 0xFF, 2 * (size_t)n * 4);   /* state poison: never read when fresh */
    vd_update_range ur[3];   /* the three ranges, updated in one call */
    for (int k = 0; k < 3; k++) ur[k] = (vd_update_range){ends[k], ends[k + 1] - ends[k], 1.0f};
    void *table = NULL;
    ck_assert_msg(be->ranges_create(be, ur, 3, &table, &e) == 0, "%s", e.msg);
    for (int step = 0; step < 4; step++) {
        float *g = (float *)(void *)(h + n * 4);
        memcpy(g, g0, (size_t)n * 4);
        if (step == 0) { g[r1 + 17] = INFINITY; g[n - 1] = NAN; }
        if (step == 2) g[r0 + 3] = NAN;
        if (step == 3) {
            ck_assert(be->scale_get(be, &s, &e) == 0);
            s.growth = VD_LOSS_SCALE_INTERVAL - 1;
            ck_assert(be->scale_set(be, &s, &e) == 0);
        }
        /* step 0 copies params and momentum too; later steps only the grads */
        if (step == 0) ck_assert(be->copy_async(be, VD_STREAM_H2D, pool, h, bytes, &e) == 0);
        else ck_assert(be->copy_async(be, VD_STREAM_H2D, d + n, g, (uint64_t)n * 4, &e) == 0);
        ck_assert(be->synchronize(be, &e) == 0);
        for (int k = 0; k < 3; k++) {
            int r = step == 2 ? 2 - k : k;   /* step 2: the ranges in reverse */
            ck_assert_msg(be->grad_check(be, d + n, ends[r], ends[r + 1] - ends[r], 10 + r, &e) == 0,
                          "%s grad_check: %s", be->name, e.msg);
        }
        /* the caller's count: only the updates that ran (steps 1 and 3) advance t */
        o.t = step < 2 ? 1 : 2;
        vd_step_scalars ss = vd_step_scalars_of(&o, 0);
        ck_assert_msg(be->step_set(be, &ss, &e) == 0, "%s step_set: %s", be->name, e.msg);
        ck_assert_msg(be->update_scaled(be, &o, d, d + n, d + 2 * n, v, table, &e) == 0,
                      "%s update_scaled: %s", be->name, e.msg);
        ck_assert_msg(be->scale_update(be, &e) == 0, "%s scale_update: %s", be->name, e.msg);
        ck_assert_msg(be->scale_get(be, &st[step], &e) == 0, "%s", e.msg);
    }
    ck_assert(be->copy_async(be, VD_STREAM_D2H, h, pool, bytes, &e) == 0);
    ck_assert(be->synchronize(be, &e) == 0);
    *p_out = malloc((size_t)n * 4);
    *m_out = malloc((size_t)n * 4);
    ck_assert(*p_out && *m_out);
    memcpy(*p_out, h, (size_t)n * 4);
    memcpy(*m_out, h + 2 * n * 4, (size_t)n * 4);
    be->ranges_free(be, table);
    be->host_free(be, h);
    be->pool_destroy(be, pool);
}

/* The loss-scaling entry points (backend.h, GradScaler's rule) on the
 * device: found_inf / first_bad (the first layer checked that holds an inf
 * or NaN), nothing updated on a skipped step, halving, the momentum fresh at
 * the first update that runs, growth after VD_LOSS_SCALE_INTERVAL clean
 * steps; params and momentum against a host reference of the same float
 * operations (exact: no FMA on either side) and everything against the CPU
 * backend bit for bit. */
START_TEST(test_grad_scaler) {
    const int64_t n = 300007;   /* several blocks per grad_check launch */
    vd_rng r;
    vd_rng_seed(&r, 9, 1);
    float *p0 = malloc((size_t)n * 4), *g0 = malloc((size_t)n * 4);
    ck_assert(p0 && g0);
    for (int64_t i = 0; i < n; i++) {
        p0[i] = vd_rng_uniform(&r) * 2 - 1;
        g0[i] = (vd_rng_uniform(&r) * 2 - 1) * 1000.0f;   /* scaled gradients */
    }
    float *pc, *mc;
    vd_loss_scale sc[4];
    scaler_run(c_cuda(), VD_OPT_SGD, p0, g0, n, &pc, &mc, sc);
    for (int k = 0; k < 4; k++)
        printf("  step %d: scale %g growth %d found_inf %d first_bad %d streak %d stepped %d "
               "skipped %lld\n", k, sc[k].scale, sc[k].growth, sc[k].found_inf, sc[k].first_bad,
               sc[k].streak, sc[k].stepped, (long long)sc[k].skipped);
    /* step 0: skipped, the inf of layer 11 came first */
    ck_assert(sc[0].scale == 2048.0f && sc[0].growth == 0 && sc[0].found_inf == 0);
    ck_assert_int_eq(sc[0].first_bad, 11);
    ck_assert(sc[0].streak == 1 && sc[0].stepped == 0 && sc[0].skipped == 1);
    /* step 1: clean, the first update */
    ck_assert(sc[1].scale == 2048.0f && sc[1].growth == 1 && sc[1].first_bad == -1);
    ck_assert(sc[1].streak == 0 && sc[1].stepped == 1 && sc[1].skipped == 1);
    /* step 2: skipped; layer 12's range was checked first but is clean now */
    ck_assert(sc[2].scale == 1024.0f && sc[2].growth == 0 && sc[2].first_bad == 10);
    ck_assert(sc[2].streak == 1 && sc[2].stepped == 1 && sc[2].skipped == 2);
    /* step 3: the 2000th clean step in a row doubles the scale */
    ck_assert(sc[3].scale == 2048.0f && sc[3].growth == 0 && sc[3].first_bad == -1);
    ck_assert(sc[3].streak == 0 && sc[3].skipped == 2 && sc[3].found_inf == 0);
    /* host reference: step 1 (scale 2048, fresh momentum), step 3 (scale 1024) */
    for (int64_t i = 0; i < n; i++) {
        const float lr = 0.1f, mom = 0.9f, wd = 5e-4f;
        float p = p0[i], g = g0[i] * (1.0f / 2048.0f) + wd * p, m = g;
        p = p - lr * m;
        float g3 = g0[i] * (1.0f / 1024.0f) + wd * p;
        m = mom * m + g3;
        p = p - lr * m;
        if (pc[i] != p || mc[i] != m)
            ck_abort_msg("element %lld: param %.9g momentum %.9g, want %.9g %.9g", (long long)i,
                         pc[i], mc[i], p, m);
    }
    ck_assert_msg(c_cpu()->scale_set != NULL, "the CPU backend has no loss scaling to compare");
    float *pr, *mr;
    vd_loss_scale sr[4];
    scaler_run(c_cpu(), VD_OPT_SGD, p0, g0, n, &pr, &mr, sr);
    ck_assert_msg(!memcmp(pc, pr, (size_t)n * 4), "params differ from the CPU backend's");
    ck_assert_msg(!memcmp(mc, mr, (size_t)n * 4), "momentum differs from the CPU backend's");
    for (int k = 0; k < 4; k++)
        ck_assert_msg(!memcmp(&sc[k], &sr[k], sizeof sc[k]), "state after step %d differs", k);
    free(pc); free(mc); free(pr); free(mr);
    /* AdamW through the same sequence: the CPU backend's bits (its AdamW is
     * checked against PyTorch's in tests/train/test_optim.c) */
    scaler_run(c_cuda(), VD_OPT_ADAMW, p0, g0, n, &pc, &mc, sc);
    scaler_run(c_cpu(), VD_OPT_ADAMW, p0, g0, n, &pr, &mr, sr);
    ck_assert_msg(!memcmp(pc, pr, (size_t)n * 4), "AdamW: params differ from the CPU backend's");
    ck_assert_msg(!memcmp(mc, mr, (size_t)n * 4), "AdamW: exp_avg differs from the CPU backend's");
    ck_assert_msg(memcmp(pc, p0, (size_t)n * 4) != 0, "AdamW: no update ran");
    free(pc); free(mc); free(pr); free(mr); free(p0); free(g0);
}
END_TEST

/* ------------------------------------------------------------------ synthetic */

/* fp16 synthetic batches against the float ones of the same backend:
 * element j of a sample rounded to nearest even (the test's own conversion)
 * at its channels-last position. Independent of the CPU backend. */
START_TEST(test_fill_synthetic_f16) {
    int64_t idx[5] = {0, 1, 77, 123456789, ((int64_t)1 << 33) + 5};
    vd_synth_batch b = {.seed = 42, .split = 0, .classes = 10, .sample_numel = 3 * 31 * 17,
                        .channels = 3, .n = 5, .index = idx};
    vd_backend *be = c_cuda();
    vd_err e = {0};
    uint64_t bytes = (uint64_t)b.n * (uint64_t)b.sample_numel * 6;   /* float + half */
    void *pool;
    char *h;
    ck_assert(be->pool_create(be, bytes, &pool, &e) == 0);
    ck_assert(be->host_alloc(be, bytes, (void **)&h, &e) == 0);
    char *d = pool;
    int64_t nf = (int64_t)b.n * b.sample_numel;
    ck_assert(be->fill_synthetic(be, VD_STREAM_H2D, 0, d, VD_DT_F32, &b, &e) == 0);
    ck_assert_msg(be->fill_synthetic(be, VD_STREAM_H2D, 0, d + nf * 4, VD_DT_F16, &b, &e) == 0,
                  "%s", e.msg);
    ck_assert(be->synchronize(be, &e) == 0);
    ck_assert(be->copy_async(be, VD_STREAM_D2H, h, pool, bytes, &e) == 0);
    ck_assert(be->synchronize(be, &e) == 0);
    const float *f = (const float *)(const void *)h;
    const uint16_t *hv = (const uint16_t *)(const void *)(h + nf * 4);
    int64_t hw = b.sample_numel / b.channels;
    for (int s = 0; s < b.n; s++)
        for (int64_t j = 0; j < b.sample_numel; j++) {
            int64_t c = j / hw, pos = (j - c * hw) * b.channels + c;   /* channels-last */
            uint16_t want = c_f32_to_f16(f[(int64_t)s * b.sample_numel + j]);
            ck_assert_msg(hv[(int64_t)s * b.sample_numel + pos] == want,
                          "sample %d element %lld: 0x%04x, want 0x%04x", s, (long long)j,
                          hv[(int64_t)s * b.sample_numel + pos], want);
        }
    be->host_free(be, h);
    be->pool_destroy(be, pool);
}
END_TEST

/* ------------------------------------------------------------------ synthetic */

/* fill_synthetic: the CUDA kernel writes the CPU backend's bytes, float,
 * bf16 and fp16: 300 samples, an AlexNet-sized sample, one element per
 * sample, 70000 samples (more than a grid's 65535 rows: its rows loop);
 * sample indices past 2^32, both splits. Exact: integer hashing and one
 * correctly rounded multiply on both sides. */
START_TEST(test_fill_synthetic) {
    static const struct { int64_t numel; int n, split, classes, ch; uint64_t seed; } cases[] = {
        {3 * 7 * 9, 300, 0, 10, 3, 42},
        {3 * 227 * 227, 3, 1, 1000, 3, 0xDEADBEEFCAFEull},
        {1, 5, 0, 1, 1, 7},
        {2, 70000, 0, 10, 1, 9},
    };
    for (size_t ci = 0; ci < VD_ARRAY_LEN(cases); ci++)
        for (int bf = 0; bf < 3; bf++) {   /* VD_DT_F32, VD_DT_BF16, VD_DT_F16 */
            vd_dtype dt = (vd_dtype)bf;
            int64_t *idx = malloc(sizeof(int64_t) * (size_t)cases[ci].n);
            ck_assert(idx);
            for (int i = 0; i < cases[ci].n; i++) idx[i] = (int64_t)i * 7919 + ((int64_t)1 << 33);
            vd_synth_batch b = { .seed = cases[ci].seed, .split = cases[ci].split,
                                 .classes = cases[ci].classes,
                                 .sample_numel = cases[ci].numel, .channels = cases[ci].ch,
                                 .n = cases[ci].n, .index = idx };
            uint64_t bytes = (uint64_t)b.n * (uint64_t)b.sample_numel * vd_dtype_bytes(dt);
            unsigned char *res[2];
            for (int bi = 0; bi < 2; bi++) {
                vd_backend *be = bi ? c_cuda() : c_cpu();
                vd_err e = {0};
                void *pool, *h;
                ck_assert(be->pool_create(be, bytes, &pool, &e) == 0);
                ck_assert(be->host_alloc(be, bytes, &h, &e) == 0);
                ck_assert_msg(be->fill_synthetic(be, VD_STREAM_H2D, 0, pool, dt, &b, &e) == 0,
                              "%s: %s", be->name, e.msg);
                ck_assert(be->synchronize(be, &e) == 0);
                ck_assert(be->copy_async(be, VD_STREAM_D2H, h, pool, bytes, &e) == 0);
                ck_assert(be->synchronize(be, &e) == 0);
                res[bi] = malloc(bytes);
                ck_assert(res[bi]);
                memcpy(res[bi], h, bytes);
                be->host_free(be, h);
                be->pool_destroy(be, pool);
            }
            ck_assert_msg(!memcmp(res[0], res[1], bytes), "synthetic case %zu (%s) differs", ci,
                          dt == VD_DT_F16 ? "fp16" : dt == VD_DT_BF16 ? "bf16" : "float");
            free(res[0]);
            free(res[1]);
            free(idx);
        }
}
END_TEST

/* A fill captured with samples A and launched after synth_set wrote
 * samples B into its slot generates the batch of B (the captured transfer
 * reads the slot's pinned host copy at the launch), the eager batch of B bit
 * for bit, which differs from the one of A. */
START_TEST(test_synth_slot_replay) {
    enum { N = 6, M = 3 * 5 * 7 };
    int64_t ia[N], ib[N];
    for (int i = 0; i < N; i++) {
        ia[i] = 11 * i + 1;
        ib[i] = 1000 + 3 * i;
    }
    vd_synth_batch a = {.seed = 4, .split = 0, .classes = 10, .sample_numel = M, .channels = 3,
                        .n = N, .index = ia};
    vd_synth_batch b = a;
    b.index = ib;
    vd_backend *be = c_cuda();
    vd_err e = {0};
    uint64_t one = (uint64_t)N * M * sizeof(float), bytes = 3 * one;
    void *pool, *h;
    ck_assert(be->pool_create(be, bytes, &pool, &e) == 0);
    ck_assert(be->host_alloc(be, bytes, &h, &e) == 0);
    char *d = pool;
    /* [0] eager B (slot 0), [1] eager A (slot 1), [2] captured A (slot 0: grown at [0],
     * outside the capture), launched at B */
    ck_assert_msg(be->fill_synthetic(be, VD_STREAM_H2D, 0, d, VD_DT_F32, &b, &e) == 0, "%s", e.msg);
    ck_assert_msg(be->fill_synthetic(be, VD_STREAM_H2D, 1, d + one, VD_DT_F32, &a, &e) == 0, "%s",
                  e.msg);
    ck_assert_msg(be->capture_begin(be, &e) == 0, "%s", e.msg);
    ck_assert_msg(be->fill_synthetic(be, VD_STREAM_H2D, 0, d + 2 * one, VD_DT_F32, &a, &e) == 0,
                  "%s", e.msg);
    void *graph = NULL;
    ck_assert_msg(be->capture_end(be, &graph, &e) == 0, "%s", e.msg);
    ck_assert_msg(be->synth_set(be, 0, &b, &e) == 0, "%s", e.msg);
    vd_step_scalars ss = {0};
    ck_assert_msg(be->graph_launch(be, graph, &ss, &e) == 0, "%s", e.msg);
    ck_assert(be->synchronize(be, &e) == 0);
    ck_assert(be->copy_async(be, VD_STREAM_D2H, h, pool, bytes, &e) == 0);
    ck_assert(be->synchronize(be, &e) == 0);
    const char *x = h;
    ck_assert(memcmp(x, x + one, one) != 0);
    ck_assert_msg(!memcmp(x + 2 * one, x, one), "the replayed fill is not the batch of synth_set");
    be->graph_destroy(be, graph);
    be->host_free(be, h);
    be->pool_destroy(be, pool);
}
END_TEST

/* ------------------------------------------------------------------ profiler */

#if VD_HAVE_CUDA
START_TEST(test_profile) {
    vd_net net;
    c_net_begin(&net, 3, 32, 32, 16);
    int cv = vdt_add(&net, c_conv(-1, 16, 3, 1, 1, 1, 1, true));
    int r = vdt_add(&net, vdt_simple(cv, VD_OP_RELU));
    int pl = vdt_add(&net, c_pool(r, VD_POOL_MAX, 2, 2, 0, false));
    vd_layer fc = {0};
    fc.op = VD_OP_FC;
    fc.n_in = 1;
    fc.in[0] = pl;
    fc.u.fc.out = 10;
    fc.u.fc.bias = true;
    int f = vdt_add(&net, fc);
    vdt_finish(&net, f);
    vd_backend *be = c_cuda();
    vd_err e = {0};
    ck_assert(be->layer_setup(be, &net, 16, VD_MATH_FP32, false, &e) == 0);
    vd_profile prof;
    ck_assert_int_eq(vd_profile_measure(be, &net, 8, &prof, &e), VD_EUSAGE);
    ck_assert_msg(vd_profile_measure(be, &net, 16, &prof, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(prof.n_layers, net.n_layers);
    ck_assert_int_eq(prof.batch, 16);
    for (int i = 0; i < prof.n_layers; i++) {
        const vd_algo_opt *opts;
        int nopt;
        ck_assert(be->layer_algos(be, i, &opts, &nopt, &e) == 0);
        ck_assert_int_eq(prof.layers[i].n_algos, nopt);
        for (int a = 0; a < nopt; a++) {
            const vd_profile_algo *pa = &prof.layers[i].algos[a];
            printf("  %-6s %-8s fwd %8.1f us  bwd %8.1f us  ws %llu\n", prof.layers[i].name,
                   pa->label, pa->fwd_s * 1e6, pa->bwd_s * 1e6, (unsigned long long)pa->workspace);
            ck_assert(pa->fwd_s > 0 && pa->fwd_s < 1.0);
            ck_assert(pa->bwd_s > 0 && pa->bwd_s < 1.0);
            /* an op that launched a kernel carries one launch beside its
             * device time; one that launched none, under half of one */
            double L = prof.dev.launch_s;
            ck_assert(pa->fwd_s < 0.5 * L || pa->fwd_s >= L);
            ck_assert(pa->bwd_s < 0.5 * L || pa->bwd_s >= L);
            ck_assert(pa->workspace == opts[a].workspace);
        }
    }
    printf("  d2h %.1f GB/s h2d %.1f GB/s both %.1f GB/s launch %.2f us (in a graph %.2f us) "
           "sgd %.1f us\n", prof.dev.d2h_bw / 1e9, prof.dev.h2d_bw / 1e9, prof.dev.both_bw / 1e9,
           prof.dev.launch_s * 1e6, prof.dev.graph_launch_s * 1e6, prof.sgd_s * 1e6);
    /* PCIe / NVLink-C2C pinned copies: anything below 1 GB/s is broken */
    ck_assert(prof.dev.d2h_bw > 1e9 && prof.dev.h2d_bw > 1e9 && prof.dev.both_bw > 1e9);
    ck_assert(prof.sgd_s > 0 && prof.dev.launch_s > 0 && prof.dev.launch_s < 1e-3);
    /* a replayed graph's kernel launches: measured, never slower than 1 ms */
    ck_assert(prof.dev.graph_launch_s > 0 && prof.dev.graph_launch_s < 1e-3);
    vd_free(prof.layers);
    /* with --conv-split force the conv's split options ("b/2", ...) are
     * timed on the chunks auto splits into (2, 4 and 8 of 16), each itself,
     * and no other option is; the layer's option 0 as before */
    vd_conv_split was = be->opts.conv_split;
    be->opts.conv_split = VD_CONV_SPLIT_FORCE;   /* read by the next layer_setup */
    int rc = be->layer_setup(be, &net, 16, VD_MATH_FP32, false, &e);
    be->opts.conv_split = was;
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_measure(be, &net, 16, &prof, &e) == 0, "%s", e.msg);
    const vd_profile_layer *cl = &prof.layers[cv];
    int split = 0;
    ck_assert_int_eq(cl->n_chunks, 3);
    for (int a = 0; a < cl->n_algos; a++) {
        const vd_profile_algo *pa = &cl->algos[a];
        bool is_split = !strncmp(pa->label, "b/", 2);
        split += is_split;
        ck_assert_msg(pa->n_chunks == (is_split ? 3 : 0), "option '%s': %d chunk timings",
                      pa->label, pa->n_chunks);
        for (int q = 0; q < pa->n_chunks; q++) {
            ck_assert_int_eq(pa->chunks[q].k, 2 << q);
            ck_assert(pa->chunks[q].fwd_s > 0 && pa->chunks[q].bwd_s > 0);
        }
    }
    ck_assert_msg(split >= 2, "%d split options", split);
    vd_free(prof.layers);
    ck_assert(be->layer_setup(be, &net, 16, VD_MATH_FP32, false, &e) == 0);   /* as it was */
    vd_net_free(&net);
}
END_TEST
#endif

/* Each test in a TCase of its own (vdt_case), so that CK_RUN_CASE=NAME runs one. */
static TCase *case_of(Suite *s, const TTest *t) {
    TCase *tc = vdt_case(s, t, 600);
    return tc;
}

static Suite *suite(void) {
    Suite *s = suite_create("cuda_ops");
    tcase_add_test(case_of(s, test_streams), test_streams);
    tcase_add_test(case_of(s, test_sgd), test_sgd);
    tcase_add_test(case_of(s, test_optim_reference), test_optim_reference);
    tcase_add_test(case_of(s, test_conv), test_conv);
    tcase_add_test(case_of(s, test_conv_split), test_conv_split);
    tcase_add_test(case_of(s, test_pool), test_pool);
#if VD_HAVE_CUDA
    tcase_add_test(case_of(s, test_conv_gemm), test_conv_gemm);
    tcase_add_test(case_of(s, test_conv_direct), test_conv_direct);
    tcase_add_test(case_of(s, test_relu_fused), test_relu_fused);
    tcase_add_test(case_of(s, test_relu_bias), test_relu_bias);
    tcase_add_test(case_of(s, test_pool_relu), test_pool_relu);
    tcase_add_test(case_of(s, test_conv_fused), test_conv_fused);
    tcase_add_test(case_of(s, test_pool_bwd_tiled), test_pool_bwd_tiled);
#endif
    tcase_add_test(case_of(s, test_relu_dropout), test_relu_dropout);
    tcase_add_test(case_of(s, test_gelu), test_gelu);
    tcase_add_test(case_of(s, test_lrn), test_lrn);
    tcase_add_test(case_of(s, test_bn), test_bn);
    tcase_add_test(case_of(s, test_bn_add_relu), test_bn_add_relu);
    tcase_add_test(case_of(s, test_fc), test_fc);
    tcase_add_test(case_of(s, test_frozen_backward), test_frozen_backward);
    tcase_add_test(case_of(s, test_shape_ops), test_shape_ops);
    tcase_add_test(case_of(s, test_loss), test_loss);
    tcase_add_test(case_of(s, test_chunked), test_chunked);
#if VD_HAVE_CUDA
    tcase_add_test(case_of(s, test_chunk_setup_engine), test_chunk_setup_engine);
#endif
    tcase_add_test(case_of(s, test_deterministic), test_deterministic);
    tcase_add_test(case_of(s, test_fill_synthetic), test_fill_synthetic);
    tcase_add_test(case_of(s, test_fill_synthetic_f16), test_fill_synthetic_f16);
    tcase_add_test(case_of(s, test_synth_slot_replay), test_synth_slot_replay);
    tcase_add_test(case_of(s, test_loss_scaled), test_loss_scaled);
    tcase_add_test(case_of(s, test_grad_scaler), test_grad_scaler);
#if VD_HAVE_CUDA
    tcase_add_test(case_of(s, test_profile), test_profile);
#endif
    return s;
}

int main(void) { return c_main(suite()); }
