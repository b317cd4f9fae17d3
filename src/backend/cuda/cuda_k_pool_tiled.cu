/* cuda_k_pool_tiled.cu — max-pool backward with one argmax per window:
 * k_pool_bwd_tiled, its tiling and launchers. */
#include "backend/cuda/cuda_k_pool.h"

/* ---- max-pool backward, one argmax per window (k_pool_bwd_tiled) ----------
 * k_pool_bwd recomputes, for every input element, the argmax of each of the
 * (up to 4, for 3x3/2) windows covering it: ~20 loads of x per element. This
 * kernel computes each window's argmax once per tile and gathers from those.
 *
 * Work item = tile: input rows [r0, r1) x columns [c0, c1) of `planes`
 * consecutive (n, c) planes (more than one plane only when the tile is the
 * whole plane, for small planes such as 13x13 or 27x27). Grid: one wave of
 * resident blocks (occupancy query; 48 registers -> 5 blocks of CU_THREADS
 * per SM), grid-stride over the ceil(n*c / planes) * tiles work items; all
 * index math inside a plane group in 32 bits. For each work item a block:
 *  1. tables: per tile row (of each plane) the covering output rows
 *     (pool_outputs_of: first, count) and the row's offsets, per tile column
 *     the covering output columns; x halo -> shared memory: the input region
 *     of every window covering the tile (whole rows when the tile spans the
 *     width: then one contiguous, coalesced copy over all its planes);
 *  2. every window [oha, ohb] x [owa, owb] of the tile: argmax (window_max_at
 *     on the shared copy, as an int index in the plane) and its dy, into
 *     shared memory;
 *  3. every input element: acc = beta ? dx : 0, then for oh ascending, ow
 *     ascending over its covering windows: acc += dy if argmax == element;
 *     dx = acc -- k_pool_bwd's loop with its window_max replaced by the
 *     table, so dx is bitwise the same (see cuk_pool_bwd_tiled in
 *     cuda_internal.h).
 * For non-adaptive windows pool_outputs_of is exact (every o in [o0, o1]
 * contains the element; windows wholly in the padding contain none), so
 * k_pool_bwd's membership re-check never drops a term and is left out. */

/* Tiling of k_pool_bwd_tiled: tile size, and the shared-memory layout in
 * 4-byte words from the start: row table (int4 per tile row per plane) at 0,
 * column table (int2 per tile column), window argmax (int) and dy (float),
 * noh_max x now_max per plane, then the x halo. */
struct pool_tiling {
    int th, tw, planes;        /* tile: input rows, columns; planes per tile */
    int tiles_w, tiles;        /* tiles across a plane, tiles per plane group */
    int o_ct, o_arg, o_dy, o_x;
    int smem;                  /* bytes */
};

enum { POOL_TILE_INPUTS = 4096,          /* input elements per tile aimed at */
       POOL_TILE_SMEM = 48 * 1024 };     /* shared memory per block at most (no opt-in) */

static int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Shared-memory layout of t (th, tw, planes set) for g, from upper bounds
 * over all tiles: a tile of th rows meets at most ceil((th - 1 + kh) / sh)
 * output rows, whose windows span at most min((noh - 1)*sh + kh,
 * th + 2*(kh - 1)) input rows (likewise columns). False if it exceeds
 * POOL_TILE_SMEM. */
static bool pool_tiling_layout(const cu_pool_geom *g, pool_tiling *t) {
    int64_t th = t->th, tw = t->tw, np = t->planes, H = g->h, W = g->w;
    int64_t noh = min64(g->oh, cdiv64(th - 1 + g->kh, g->sh));
    int64_t now = min64(g->ow, cdiv64(tw - 1 + g->kw, g->sw));
    int64_t xr = min64(H, min64((noh - 1) * g->sh + g->kh, th + 2 * (int64_t)(g->kh - 1)));
    int64_t xwords;
    if (tw >= W) {
        xwords = (np - 1) * H * W + xr * W;
    } else {
        int64_t xc = min64(W, min64((now - 1) * g->sw + g->kw, tw + 2 * (int64_t)(g->kw - 1)));
        xwords = xr * xc;
    }
    int64_t rt = 4 * np * th, ct = 2 * tw, win = np * noh * now;
    int64_t words = rt + ct + 2 * win + xwords;
    if (words * 4 > POOL_TILE_SMEM) return false;
    t->o_ct = (int)rt;
    t->o_arg = (int)(rt + ct);
    t->o_dy = (int)(rt + ct + win);
    t->o_x = (int)(rt + ct + 2 * win);
    t->smem = (int)(words * 4);
    t->tiles_w = (int)cdiv64(W, tw);
    t->tiles = (int)(cdiv64(H, th) * t->tiles_w);
    return true;
}

/* Tiling for g, or false where k_pool_bwd_tiled cannot take it: adaptive or
 * average pooling; a stride, kernel or size < 1 or a negative padding; a
 * plane or output plane of 2^30 elements or more; a window so large that
 * even a 1x1 tile's windows and halo exceed POOL_TILE_SMEM. Automatic: tiles
 * of about POOL_TILE_INPUTS elements -- whole rows when the width is <= 256
 * (else 128 columns), rows split evenly and rounded up to the stride, and
 * several whole planes when a plane has <= POOL_TILE_INPUTS / 2 elements
 * (as long as that leaves >= 32 tiles per SM: sm, the SM count);
 * halved (planes, then rows, then columns) until the layout fits. force
 * (tests): NULL, or {rows, columns, planes}, each 0 for automatic; planes
 * > 1 needs the whole plane. */
static bool pool_tiling_plan(const cu_pool_geom *g, int64_t planes, int sm, const int *force,
                             pool_tiling *t) {
    if (g->adaptive || !g->max) return false;
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0) return false;
    if (g->h < 1 || g->w < 1 || g->oh < 1 || g->ow < 1 || planes < 1) return false;
    int64_t hw = (int64_t)g->h * g->w;
    if (!FITS32(hw) || !FITS32((int64_t)g->oh * g->ow)) return false;
    const int H = g->h, W = g->w;
    int tw = W <= 256 ? W : (int)min64(W, cdiv64(128, g->sw) * g->sw);
    int th, np = 1;
    if (tw == W && hw <= POOL_TILE_INPUTS / 2) {
        th = H;
        /* but >= 32 work items per SM, so that the last round is a small
         * part of the run */
        int64_t most = planes / ((int64_t)(sm > 0 ? sm : 132) * 32);
        np = (int)min64(POOL_TILE_INPUTS / hw, most > 1 ? most : 1);
        np = (int)cdiv64(planes, cdiv64(planes, np));     /* even groups */
    } else {
        th = POOL_TILE_INPUTS / tw;
        if (th < 1) th = 1;
        if (th >= H) {
            th = H;
        } else {
            th = (int)cdiv64(H, cdiv64(H, th));             /* even tiles */
            th = (int)min64(H, cdiv64(th, g->sh) * g->sh);
        }
    }
    if (force) {
        if (force[0]) th = force[0];
        if (force[1]) tw = force[1];
        np = force[2] ? force[2] : th == H && tw == W ? np : 1;
        if (th < 1 || th > H || tw < 1 || tw > W || np < 1 || np > planes) return false;
        if (np > 1 && (th != H || tw != W || !FITS32(np * hw))) return false;
        t->th = th; t->tw = tw; t->planes = np;
        return pool_tiling_layout(g, t);
    }
    for (;;) {
        t->th = th; t->tw = tw; t->planes = np;
        if (pool_tiling_layout(g, t)) return true;
        if (np > 1) np = (np + 1) / 2;
        else if (th > 1) th = (th + 1) / 2;
        else if (tw > 1) tw = (tw + 1) / 2;
        else return false;
    }
}

/* Five blocks of CU_THREADS (1280 threads) per SM where an SM holds them
 * (2048 threads on sm_80/90/100, 1536 on sm_86/89/120); sm_75 holds 1024,
 * where ptxas reports the hint out of range. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define POOL_BWD_TILED_MIN_BLOCKS 1
#else
#define POOL_BWD_TILED_MIN_BLOCKS 5
#endif
template <typename T>
__global__ void __launch_bounds__(CU_THREADS, POOL_BWD_TILED_MIN_BLOCKS)
k_pool_bwd_tiled(cu_pool_geom g, pool_tiling t, const T *__restrict__ x,
                 const T *__restrict__ dy, T *__restrict__ dx, float beta,
                 int64_t planes, int64_t nwork) {
    extern __shared__ int4 smem[];
    int4 *rtab = smem;
    int *words = (int *)smem;
    int2 *ctab = (int2 *)(words + t.o_ct);
    int *args = words + t.o_arg;
    float *dys = (float *)(words + t.o_dy);
    float *xs = (float *)(words + t.o_x);
    const int H = g.h, W = g.w, hw = H * W, ohw = g.oh * g.ow;
    const bool full = t.tw >= W;              /* tiles of whole rows */
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int64_t wi = blockIdx.x; wi < nwork; wi += gridDim.x) {
        const int64_t grp = wi / t.tiles;
        const int tile = (int)(wi - grp * t.tiles);
        const int ty = tile / t.tiles_w, tx = tile - ty * t.tiles_w;
        const int64_t plane0 = grp * t.planes;
        const int np = planes - plane0 < t.planes ? (int)(planes - plane0) : t.planes;
        const T *xg = x + plane0 * hw;
        const T *dyg = dy + plane0 * ohw;
        T *dxg = dx + plane0 * hw;
        const int r0 = ty * t.th, r1 = min(H, r0 + t.th), nr = r1 - r0;
        const int c0 = tx * t.tw, c1 = min(W, c0 + t.tw), nc = c1 - c0;
        /* windows meeting the tile: output rows [oha, oha + noh), columns
         * [owa, owa + now) (pool_outputs_of is monotone in the input index) */
        int oha, ohb, owa, owb, u;
        pool_outputs_of(g, true, r0, &oha, &u);
        pool_outputs_of(g, true, r1 - 1, &u, &ohb);
        pool_outputs_of(g, false, c0, &owa, &u);
        pool_outputs_of(g, false, c1 - 1, &u, &owb);
        int noh = ohb - oha + 1, now = owb - owa + 1;
        if (noh < 1 || now < 1) noh = now = 0;     /* no window meets the tile */
        /* their input region [xr0, xr1) x [xc0, xc1): whole rows when full,
         * so the planes' regions lie hw apart in shared memory as in x */
        int xr0 = 0, xr1 = 0, xc0 = 0, xc1 = full ? W : 0;
        if (noh > 0) {
            xr0 = max(0, oha * g.sh - g.ph);
            xr1 = min(H, ohb * g.sh - g.ph + g.kh);
            if (!full) {
                xc0 = max(0, owa * g.sw - g.pw);
                xc1 = min(W, owb * g.sw - g.pw + g.kw);
            }
        }
        const int xp = xc1 - xc0;
        const int xcount = noh == 0 ? 0 : full ? (np - 1) * hw + (xr1 - xr0) * W
                                               : (xr1 - xr0) * xp;

        /* 1. tables and the x halo */
        for (int r = tid; r < np * nr; r += nt) {
            int p = r / nr, ih = r0 + (r - p * nr), a, b;
            pool_outputs_of(g, true, ih, &a, &b);
            rtab[r] = make_int4((p * noh + a - oha) * now, max(0, b - a + 1), ih * W, p * hw);
        }
        for (int c = tid; c < nc; c += nt) {
            int a, b;
            pool_outputs_of(g, false, c0 + c, &a, &b);
            ctab[c] = make_int2(a - owa, max(0, b - a + 1));
        }
        if (full) {
            const T *src = xg + xr0 * W;
            int f = tid;
            for (; f + 3 * nt < xcount; f += 4 * nt) {    /* 4 loads in flight */
                float v0 = ld(src[f]), v1 = ld(src[f + nt]), v2 = ld(src[f + 2 * nt]),
                      v3 = ld(src[f + 3 * nt]);
                xs[f] = v0;
                xs[f + nt] = v1;
                xs[f + 2 * nt] = v2;
                xs[f + 3 * nt] = v3;
            }
            for (; f < xcount; f += nt) xs[f] = ld(src[f]);
        } else if (xcount > 0) {
            int r = tid / xp, c = tid - r * xp;
            const int dr = nt / xp, dc = nt - dr * xp;
            for (int f = tid; f < xcount; f += nt) {
                xs[f] = ld(xg[(xr0 + r) * W + xc0 + c]);
                r += dr;
                c += dc;
                if (c >= xp) { c -= xp; r++; }
            }
        }
        __syncthreads();

        /* 2. each window's argmax and dy: window f = (p*noh + ohl)*now + owl */
        const int nwin = np * noh * now;
        if (nwin > 0) {
            int r = tid / now, c = tid - r * now;
            const int dr = nt / now, dc = nt - dr * now;
            for (int f = tid; f < nwin; f += nt) {
                int p = np > 1 ? r / noh : 0;
                int oh = oha + r - p * noh, ow = owa + c;
                float d = ld(dyg[p * ohw + oh * g.ow + ow]);   /* load first: in flight meanwhile */
                int h0, h1, w0, w1, span, arg;
                pool_window(g, true, oh, &h0, &h1, &span);
                pool_window(g, false, ow, &w0, &w1, &span);
                window_max_at(xs + p * hw, xp, xr0, xc0, 1, W, h0, h1, w0, w1, &arg);
                args[f] = arg;
                dys[f] = d;
                r += dr;
                c += dc;
                if (c >= now) { c -= now; r++; }
            }
        }
        __syncthreads();

        /* 3. gather, in k_pool_bwd's order and rounding */
        {
            const int n3 = np * nr * nc;
            int r = tid / nc, c = tid - r * nc;
            const int dr = nt / nc, dc = nt - dr * nc;
            for (int f = tid; f < n3; f += nt) {
                const int4 rt = rtab[r];
                const int2 ct = ctab[c];
                const int idx = rt.z + c0 + c;        /* ih*W + iw */
                T *dp = dxg + (rt.w + idx);
                float acc = beta != 0.0f ? ld(*dp) : 0.0f;
                int k = rt.x + ct.x;
                for (int i = 0; i < rt.y; i++, k += now)
                    for (int j = 0; j < ct.y; j++)
                        if (args[k + j] == idx) acc += dys[k + j];
                st(dp, acc);
                r += dr;
                c += dc;
                if (c >= nc) { c -= nc; r++; }
            }
        }
        __syncthreads();          /* before the next tile overwrites shared memory */
    }
}

template <typename T>
static int pool_bwd_tiled_launch_t(cudaStream_t s, int sm, const cu_pool_geom *g,
                                   const pool_tiling *t, const T *x, const T *dy, T *dx,
                                   float beta, vd_err *e) {
    int64_t planes = (int64_t)g->n * g->c;
    int64_t nwork = cdiv64(planes, t->planes) * t->tiles;
    /* one wave of resident blocks, each taking every grid-th tile: no tail
     * wave of a few blocks (the tiles are of equal size) */
    int per_sm = 0;
    CUDA_CHECK(e, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_pool_bwd_tiled<T>,
                                                                CU_THREADS, (size_t)t->smem));
    if (per_sm < 1) per_sm = 1;
    int64_t grid = min64(nwork, (int64_t)(sm > 0 ? sm : 132) * per_sm);
    k_pool_bwd_tiled<T><<<(unsigned)grid, CU_THREADS, (size_t)t->smem, s>>>(*g, *t, x, dy, dx,
                                                                            beta, planes, nwork);
    KERNEL_CHECK(e);
    return VD_OK;
}

static int pool_bwd_tiled_launch(cudaStream_t s, int sm, const cu_pool_geom *g,
                                 const pool_tiling *t, const float *x, const float *dy, float *dx,
                                 float beta, vd_dtype dt, vd_err *e) {
    DT_DISPATCH(dt, T, return pool_bwd_tiled_launch_t(s, sm, g, t, AS<T>(x), AS<T>(dy), AS<T>(dx),
                                                      beta, e));
    return VD_OK;   /* not reached */
}

int cuk_pool_bwd_tiled(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                       const float *dy, float *dx, float beta, const int *tile, vd_dtype dt,
                       vd_err *e) {
    int64_t total = (int64_t)g->n * g->c * g->h * g->w;
    if (total <= 0) return VD_OK;
    if (g->cl)
        return vd_errf(e, VD_EUNSUPPORTED, "max-pool backward: the tiled kernel is NCHW only");
    pool_tiling t;
    if (!pool_tiling_plan(g, (int64_t)g->n * g->c, sm, tile, &t))
        return vd_errf(e, VD_EUNSUPPORTED,
                       "max-pool backward: the tiled kernel cannot take %dx%d (%dx%d/%dx%d "
                       "pad %dx%d%s)", g->h, g->w, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw,
                       tile ? ", forced tile" : "");
    return pool_bwd_tiled_launch(s, sm, g, &t, x, dy, dx, beta, dt, e);
}

int cu_pool_bwd_tiled_auto(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                           const float *dy, float *dx, float beta, vd_dtype dt, bool *taken,
                           vd_err *e) {
    pool_tiling t;
    *taken = pool_tiling_plan(g, (int64_t)g->n * g->c, sm, NULL, &t);
    if (!*taken) return VD_OK;
    return pool_bwd_tiled_launch(s, sm, g, &t, x, dy, dx, beta, dt, e);
}
