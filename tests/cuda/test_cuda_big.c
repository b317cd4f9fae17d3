/* test_cuda_big.c — layers whose feature maps pass 2^31 elements at the
 * call's batch, on the CUDA backend: a conv 3->64 3x3 pad 1 with bias (fp32
 * and bf16; cuDNN's tensors refuse more than INT32_MAX elements, so the
 * backend describes the layer at a sub-batch and runs the call as
 * sub-batches, cuda_cudnn.cu), a ReLU in place and a 2x2 max pooling (int64
 * indices in the kernels), each at 56x56 and batch 10752 = 21 x 512: the
 * 64-channel map holds 2.16e9 elements (the conv's describe batch is 5376,
 * two sub-batches).
 *
 * Reference: the same layer on the same backend at batch 512 (one period).
 * The big batch's inputs (x, dy) are that period repeated 21 times, so its
 * output sample s must equal the reference's sample s % 512, and parameter
 * gradients 21 times the reference's. 512 does not divide the conv's
 * sub-batch boundary (5376 = 10.5 periods): a sub-batch read or written at
 * a wrong offset shows. The conv then runs backward again with dx_beta and
 * dw_beta 1 (dx, dw, db double; every sub-batch's dW then goes through the
 * accumulation). Device memory: at most about 18 GB of tensors plus the
 * workspace of the option run (option 0 only where that is at most 8 GiB;
 * "min-ws" always); a device with less free memory skips the case (printed).
 *
 * Error measure: max|big - ref| / max|ref| per tensor and period.
 * Tolerances:
 *  TOL_EXACT 0    — ReLU and max pooling: per-element float operations that
 *                   do not depend on the batch; any difference is a bug.
 *  TOL_FP32 1e-4  — conv y and dx (sums of 27 / 576 products): the two
 *                   batches may run different cuDNN engines (each chosen at
 *                   its own setup batch), which differ by ~1e-6 of the output
 *                   scale (test_cuda_ops.c's TOL_FP32).
 *  TOL_SUM 1e-3   — conv dw and db: fp32 sums of 10752 x 3136 = 3.4e7 terms
 *                   against 21 x a sum of 1.6e6, each in its engine's order.
 *                   The terms have random signs, so a sum is ~sqrt(n) times
 *                   a term and its rounding error, relative to it, about
 *                   sqrt(n) ulps for a plain sequential sum (1.3e3 x 6e-8 =
 *                   8e-5 at the reference's n); 1e-3 leaves a 10x margin,
 *                   while a sub-batch lost, doubled or read at a wrong offset
 *                   moves them by >= 3e-2 (half a period of 21 periods).
 *  TOL_BF16 8e-3  — bf16 y and dx: the fp32 differences above, rounded to
 *                   bf16: where the two values straddle a rounding boundary
 *                   they land one bf16 ulp (2^-8 of the element) apart; two
 *                   roundings with the bias (test_cuda_ops.c's TOL_BF16).
 *  TOL_DW_BF16 1e-2 — bf16 dw: each sub-batch's dW passes through bf16
 *                   (2^-9 relative) before the fp32 sum, the reference's once:
 *                   about 4e-3 of the element, plus TOL_SUM's part. db is
 *                   summed in fp32 from the bf16 dy: TOL_SUM.
 *
 * CK_RUN_CASE=test_conv_big_fp32 build-h100/tests/cuda/cuda_test_cuda_big
 * runs one case. */
#include "cuda_common.h"
#include "vdt.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_EXACT 0.0
#define TOL_FP32 1e-4
#define TOL_SUM 1e-3
#define TOL_BF16 8e-3
#define TOL_DW_BF16 1e-2

enum { PERIOD = 512, REPS = 21, SIDE = 56, WIDE = 64 };
static const uint64_t WS_MAX = 8ull << 30;   /* option 0 only within this workspace */

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", n);
    return p;
}

/* One period of layer 0's data: x and dy of PERIOD samples (NCHW float),
 * the parameters (weight, bias). */
typedef struct period {
    int64_t xc, xhw, yc, yhw;       /* channels and pixels per sample: input, output */
    int64_t xs, ys, pn;             /* elements per sample: x, y; parameter elements */
    float *x, *dy, *par;            /* [PERIOD*xs], [PERIOD*ys], [pn] */
} period;

static void period_init(period *p, const vd_net *net, uint64_t seed) {
    const vd_layer *l = &net->layers[0];
    memset(p, 0, sizeof *p);
    p->xc = net->in_c;
    p->xhw = (int64_t)net->in_h * net->in_w;
    p->yc = l->c;
    p->yhw = (int64_t)l->h * l->w;
    p->xs = p->xc * p->xhw;
    p->ys = p->yc * p->yhw;
    for (int q = 0; q < l->n_params; q++) p->pn += net->params[l->param_first + q].numel;
    vd_rng r;
    vd_rng_seed(&r, seed, 3);
    p->x = xmalloc((size_t)(PERIOD * p->xs) * sizeof(float));
    p->dy = xmalloc((size_t)(PERIOD * p->ys) * sizeof(float));
    p->par = xmalloc((size_t)p->pn * sizeof(float));
    for (int64_t i = 0; i < PERIOD * p->xs; i++) p->x[i] = 2.0f * vd_rng_uniform(&r) - 1.0f;
    for (int64_t i = 0; i < PERIOD * p->ys; i++) p->dy[i] = 2.0f * vd_rng_uniform(&r) - 1.0f;
    /* weights of a 3x3x3 fan-in: U(-0.2, 0.2) keeps y of the order of x */
    for (int64_t i = 0; i < p->pn; i++) p->par[i] = 0.4f * vd_rng_uniform(&r) - 0.2f;
}

static void period_free(period *p) {
    free(p->x);
    free(p->dy);
    free(p->par);
    memset(p, 0, sizeof *p);
}

/* Layer 0's outputs over one period (the reference's), NCHW float. */
typedef struct outs {
    float *y, *dx, *grad;           /* [PERIOD*ys], [PERIOD*xs], [pn] */
} outs;

static void outs_free(outs *o) {
    free(o->y);
    free(o->dx);
    free(o->grad);
    memset(o, 0, sizeof *o);
}

typedef struct run_opts {
    vd_math math;
    int algo;                       /* option; -1: the last one ("min-ws") */
    bool inplace;                   /* y aliases x, dx aliases dy (ReLU) */
    bool acc;                       /* then backward again with dx_beta and dw_beta 1 */
    double tol_y, tol_dx, tol_dw, tol_db;
} run_opts;

/* Device offsets of the run's buffers (256-aligned). */
typedef struct layout {
    uint64_t x, dx, y, dy, par, grad, ws, total, ws_bytes;
} layout;

static uint64_t take(uint64_t *off, uint64_t bytes) {
    uint64_t at = *off;
    *off += VD_ALIGN_UP(bytes ? bytes : 1, 256);
    return at;
}

/* Stage PERIOD samples of src (float NCHW, c x hw each) reps times at dev:
 * through the pinned stage, converted to the maps' type and layout (dt says
 * both for the maths these tests run, fp32 NCHW and bf16 channels-last; a
 * tf32 case, float channels-last, would pass vd_math_nhwc too). */
static void stage_repeat(vd_backend *be, char *dev, char *stage, const float *src, int64_t c,
                         int64_t hw, int reps, vd_dtype dt) {
    vd_err e = {0};
    uint64_t es = vd_dtype_bytes(dt), bytes = (uint64_t)PERIOD * (uint64_t)(c * hw) * es;
    if (dt == VD_DT_F32) memcpy(stage, src, bytes);
    else vd_nchw_f32_to_nhwc_h16(dt, src, (uint16_t *)(void *)stage, PERIOD, c, hw);
    for (int r = 0; r < reps; r++)
        ck_assert_msg(be->copy_async(be, VD_STREAM_H2D, dev + (uint64_t)r * bytes, stage, bytes,
                                     &e) == 0, "copy_async: %s", e.msg);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
}

/* Period r of the map at dev (c x hw per sample) into host float NCHW out. */
static void fetch_period(vd_backend *be, const char *dev, char *stage, float *out, int64_t c,
                         int64_t hw, int r, vd_dtype dt) {
    vd_err e = {0};
    uint64_t es = vd_dtype_bytes(dt), bytes = (uint64_t)PERIOD * (uint64_t)(c * hw) * es;
    ck_assert_msg(be->copy_async(be, VD_STREAM_D2H, stage, dev + (uint64_t)r * bytes, bytes, &e) == 0,
                  "copy_async: %s", e.msg);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
    if (dt == VD_DT_F32) memcpy(out, stage, bytes);
    else vd_nhwc_h16_to_nchw_f32(dt, (const uint16_t *)(const void *)stage, out, PERIOD, c, hw);
}

static void cmp(const char *label, const char *what, int r, const float *got, const float *want,
                int64_t n, double tol) {
    double err = c_nerr(got, want, n);
    if (r <= 0 || err > tol)   /* one line per tensor, and every failure */
        printf("  %-30s %-5s period %2d err %.3g (tol %.3g)\n", label, what, r, err, tol);
    ck_assert_msg(err <= tol, "%s: %s of period %d differs from the reference: normalized error "
                  "%g > %g", label, what, r, err, tol);
}

/* Each period of the big run's map at dev against want scaled by scale. */
static void check_map(vd_backend *be, const char *label, const char *what, const char *dev,
                      char *stage, const float *want, int64_t c, int64_t hw, float scale,
                      vd_dtype dt, double tol) {
    int64_t n = (int64_t)PERIOD * c * hw;
    float *got = xmalloc((size_t)n * sizeof(float)), *w = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) w[i] = scale * want[i];
    for (int r = 0; r < REPS; r++) {
        fetch_period(be, dev, stage, got, c, hw, r, dt);
        cmp(label, what, r, got, w, n, tol);
    }
    free(got);
    free(w);
}

/* The parameter gradients at dev against want (weight then bias) scaled. */
static void check_grad(vd_backend *be, const char *label, const vd_net *net, const char *dev,
                       const float *want, int64_t pn, float scale, const run_opts *o) {
    vd_err e = {0};
    float *got = xmalloc((size_t)pn * sizeof(float)), *w = xmalloc((size_t)pn * sizeof(float));
    ck_assert(be->copy_async(be, VD_STREAM_D2H, got, dev, (uint64_t)pn * 4, &e) == 0);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
    for (int64_t i = 0; i < pn; i++) w[i] = scale * want[i];
    const vd_layer *l = &net->layers[0];
    int64_t off = 0;
    for (int q = 0; q < l->n_params; q++) {
        const vd_param *p = &net->params[l->param_first + q];
        bool bias = p->role == VD_ROLE_BIAS;
        cmp(label, bias ? "db" : "dw", -1, got + off, w + off, p->numel, bias ? o->tol_db : o->tol_dw);
        off += p->numel;
    }
    free(got);
    free(w);
}

/* Layer 0 of net at batch reps * PERIOD on the CUDA backend, the period's
 * x and dy repeated: forward, backward (dx, dw, db overwritten), and with
 * o->acc a second backward adding to them. reps 1 (the reference): the
 * outputs into *ref. Else every period and the gradients checked against
 * *ref. Returns false (printed) where the device lacks the memory, or the
 * option's workspace is over WS_MAX. */
static bool run_layer(const vd_net *net, const period *p, int reps, const run_opts *o,
                      const char *label, outs *ref) {
    vd_backend *be = c_cuda();
    vd_err e = {0};
    const vd_layer *l = &net->layers[0];
    const int n = reps * PERIOD;
    ck_assert_msg(be->layer_setup(be, net, n, o->math, false, &e) == 0, "%s layer_setup: %s",
                  label, e.msg);
    const vd_algo_opt *opts;
    int nopt = 0;
    ck_assert_msg(be->layer_algos(be, 0, &opts, &nopt, &e) == 0, "layer_algos: %s", e.msg);
    int algo = o->algo < 0 ? nopt - 1 : o->algo;
    ck_assert_msg(algo >= 0 && algo < nopt, "%s: option %d of %d", label, algo, nopt);
    if (o->algo < 0 && algo == 0) {
        printf("  %s: the only option is option 0 (run already)\n", label);
        return false;
    }
    layout lo;
    memset(&lo, 0, sizeof lo);
    lo.ws_bytes = opts[algo].workspace;
    if (reps > 1 && lo.ws_bytes > WS_MAX) {
        printf("  %s: option %d (%s) needs %llu bytes of workspace: not run\n", label, algo,
               opts[algo].label, (unsigned long long)lo.ws_bytes);
        return false;
    }
    const vd_dtype dt = vd_math_act_dtype(o->math);
    const uint64_t es = vd_dtype_bytes(dt);
    const uint64_t xb = (uint64_t)n * (uint64_t)p->xs * es, yb = (uint64_t)n * (uint64_t)p->ys * es;
    uint64_t off = 0;
    lo.x = take(&off, xb);
    lo.dx = o->inplace ? 0 : take(&off, xb);
    lo.y = o->inplace ? lo.x : take(&off, yb);
    lo.dy = take(&off, yb);
    if (o->inplace) lo.dx = lo.dy;
    lo.par = take(&off, (uint64_t)p->pn * 4);
    lo.grad = take(&off, (uint64_t)p->pn * 4);
    lo.ws = take(&off, lo.ws_bytes);
    lo.total = off;
    uint64_t fr = 0, tot = 0;
    if (!be->mem_info) {   /* VD_CUDA_TESTS_ON_CPU: days at this batch on the CPU */
        printf("  %s: a backend without device memory: not run\n", label);
        return false;
    }
    ck_assert_msg(be->mem_info(be, &fr, &tot, &e) == 0, "mem_info: %s", e.msg);
    if (lo.total + (1ull << 30) > fr) {
        printf("  %s: needs %llu bytes of device memory, %llu free: not run\n", label,
               (unsigned long long)lo.total, (unsigned long long)fr);
        return false;
    }
    printf("  %s: batch %d, option %d (%s, workspace %llu), %.1f GB of device memory\n", label, n,
           algo, opts[algo].label, (unsigned long long)lo.ws_bytes, (double)lo.total / 1e9);
    void *pool = NULL;
    char *stage = NULL;
    uint64_t sb = (uint64_t)PERIOD * (uint64_t)(p->xs > p->ys ? p->xs : p->ys) * 4;
    ck_assert_msg(be->pool_create(be, lo.total, &pool, &e) == 0, "pool_create: %s", e.msg);
    ck_assert_msg(be->host_alloc(be, sb, (void **)&stage, &e) == 0, "host_alloc: %s", e.msg);
    char *d = (char *)pool;
    /* NaN (0xFF) wherever nothing is written, then the inputs */
    ck_assert(be->poison_async(be, VD_STREAM_COMPUTE, d, lo.total, &e) == 0);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
    stage_repeat(be, d + lo.x, stage, p->x, p->xc, p->xhw, reps, dt);
    stage_repeat(be, d + lo.dy, stage, p->dy, p->yc, p->yhw, reps, dt);
    if (p->pn) {
        ck_assert(be->copy_async(be, VD_STREAM_H2D, d + lo.par, p->par, (uint64_t)p->pn * 4, &e) == 0);
        ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
    }
    vd_op_io io;
    memset(&io, 0, sizeof io);
    io.n = n;
    io.x[0] = (const float *)(const void *)(d + lo.x);
    io.y = (float *)(void *)(d + lo.y);
    io.dy = (const float *)(const void *)(d + lo.dy);
    io.dx[0] = (float *)(void *)(d + lo.dx);
    int64_t poff = 0;
    for (int q = 0; q < l->n_params; q++) {
        const vd_param *pp = &net->params[l->param_first + q];
        vd_op_io_bind_param(&io, pp->role, (float *)(void *)(d + lo.par) + poff,
                            (float *)(void *)(d + lo.grad) + poff);
        poff += pp->numel;
    }
    io.ws = lo.ws_bytes ? d + lo.ws : NULL;
    io.ws_bytes = lo.ws_bytes;
    io.algo = algo;
    io.training = true;
    io.act = dt;
    ck_assert_msg(be->forward(be, net, 0, &io, &e) == 0, "%s forward: %s", label, e.msg);
    ck_assert_msg(be->backward(be, net, 0, &io, &e) == 0, "%s backward: %s", label, e.msg);
    ck_assert_msg(be->synchronize(be, &e) == 0, "%s: %s", label, e.msg);
    if (reps == 1) {   /* the reference */
        ref->y = xmalloc((size_t)(PERIOD * p->ys) * sizeof(float));
        ref->dx = xmalloc((size_t)(PERIOD * p->xs) * sizeof(float));
        ref->grad = xmalloc((size_t)(p->pn ? p->pn : 1) * sizeof(float));
        fetch_period(be, d + lo.y, stage, ref->y, p->yc, p->yhw, 0, dt);
        fetch_period(be, d + lo.dx, stage, ref->dx, p->xc, p->xhw, 0, dt);
        if (p->pn) {
            ck_assert(be->copy_async(be, VD_STREAM_D2H, ref->grad, d + lo.grad,
                                     (uint64_t)p->pn * 4, &e) == 0);
            ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
        }
    } else {
        check_map(be, label, "y", d + lo.y, stage, ref->y, p->yc, p->yhw, 1.0f, dt, o->tol_y);
        check_map(be, label, "dx", d + lo.dx, stage, ref->dx, p->xc, p->xhw, 1.0f, dt, o->tol_dx);
        if (p->pn) check_grad(be, label, net, d + lo.grad, ref->grad, p->pn, (float)reps, o);
        if (o->acc) {   /* again, adding: dx, dw and db double */
            io.dx_beta[0] = 1.0f;
            io.dw_beta = 1.0f;
            ck_assert_msg(be->backward(be, net, 0, &io, &e) == 0, "%s backward (+=): %s", label,
                          e.msg);
            ck_assert_msg(be->synchronize(be, &e) == 0, "%s: %s", label, e.msg);
            char lab[96];
            snprintf(lab, sizeof lab, "%s +=", label);
            check_map(be, lab, "dx", d + lo.dx, stage, ref->dx, p->xc, p->xhw, 2.0f, dt, o->tol_dx);
            if (p->pn) check_grad(be, lab, net, d + lo.grad, ref->grad, p->pn, 2.0f * reps, o);
        }
    }
    be->host_free(be, stage);
    be->pool_destroy(be, pool);
    return true;
}

/* Layer 0 of net at batch PERIOD (the reference, option 0), then at
 * REPS * PERIOD with option 0 (within WS_MAX) and the last option (where
 * there are several). */
static void check_big(const vd_net *net, const char *name, run_opts o) {
    period p;
    period_init(&p, net, 4242);
    outs ref;
    memset(&ref, 0, sizeof ref);
    run_opts ro = o;
    ro.algo = 0;
    char label[96];
    snprintf(label, sizeof label, "%s [%s] reference", name, vd_math_name(o.math));
    int ran = 0;
    if (!run_layer(net, &p, 1, &ro, label, &ref)) {
        period_free(&p);
        return;
    }
    for (int a = 0; a < 2; a++) {
        o.algo = a == 0 ? 0 : -1;
        snprintf(label, sizeof label, "%s [%s] %s", name, vd_math_name(o.math),
                 a == 0 ? "option 0" : "last option");
        ran += run_layer(net, &p, REPS, &o, label, &ref);
    }
    printf("  %s: %d of 2 big runs made\n", name, ran);
    outs_free(&ref);
    period_free(&p);
}

/* conv 3->64 3x3 pad 1 with bias at 56x56 */
static void conv_net(vd_net *net) {
    c_net_begin(net, 3, SIDE, SIDE, REPS * PERIOD);
    vdt_add(net, c_conv(-1, WIDE, 3, 1, 1, 1, 1, true));
    vdt_finish(net, 0);
}

START_TEST(test_conv_big_fp32) {
    vd_net net;
    conv_net(&net);
    /* conv sums: TOL_FP32 for the maps, TOL_SUM for dw / db (see top) */
    run_opts o = {.math = VD_MATH_FP32, .acc = true, .tol_y = TOL_FP32, .tol_dx = TOL_FP32,
                  .tol_dw = TOL_SUM, .tol_db = TOL_SUM};
    check_big(&net, "conv 3->64 b10752", o);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_conv_big_bf16) {
    vd_net net;
    conv_net(&net);
    /* bf16 maps and dW: TOL_BF16, TOL_DW_BF16; db summed in fp32: TOL_SUM (see top) */
    run_opts o = {.math = VD_MATH_BF16, .acc = true, .tol_y = TOL_BF16, .tol_dx = TOL_BF16,
                  .tol_dw = TOL_DW_BF16, .tol_db = TOL_SUM};
    check_big(&net, "conv 3->64 b10752", o);
    vd_net_free(&net);
}
END_TEST

/* ReLU in place and 2x2/2 max pooling on a 64x56x56 map at batch 10752:
 * exact (see top) */
START_TEST(test_relu_pool_big) {
    vd_net net;
    c_net_begin(&net, WIDE, SIDE, SIDE, REPS * PERIOD);
    vdt_add(&net, vdt_simple(-1, VD_OP_RELU));
    vdt_finish(&net, 0);
    run_opts o = {.math = VD_MATH_FP32, .inplace = true, .tol_y = TOL_EXACT, .tol_dx = TOL_EXACT};
    check_big(&net, "relu 64x56x56 b10752", o);
    vd_net_free(&net);
    c_net_begin(&net, WIDE, SIDE, SIDE, REPS * PERIOD);
    vdt_add(&net, c_pool(-1, VD_POOL_MAX, 2, 2, 0, false));
    vdt_finish(&net, 0);
    o.inplace = false;
    check_big(&net, "maxpool 2x2 64x56x56 b10752", o);
    vd_net_free(&net);
}
END_TEST

/* Each test in a TCase of its own (vdt_case), so that CK_RUN_CASE=NAME runs one. */
static Suite *suite(void) {
    Suite *s = suite_create("cuda_big");
    tcase_add_test(vdt_case(s, test_conv_big_fp32, 600), test_conv_big_fp32);
    tcase_add_test(vdt_case(s, test_conv_big_bf16, 600), test_conv_big_bf16);
    tcase_add_test(vdt_case(s, test_relu_pool_big, 600), test_relu_pool_big);
    return s;
}

int main(void) { return c_main(suite()); }
