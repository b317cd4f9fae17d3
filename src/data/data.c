/* data.c — dataset dispatch, epoch permutations, and the batch loader. It
 * calls the readers (data_impl.h's vd_data_open_*); they call only the
 * shared helpers of data_util.c, never this file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include "data/data_impl.h"

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

static int parse_count(const char *s, size_t len, int64_t *out, vd_err *e) {
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return vd_errf(e, VD_EUSAGE, "bad sample count '%.*s' in --data synthetic:TRAIN[,TEST]",
                       (int)len, s);
    memcpy(buf, s, len);
    buf[len] = 0;
    int64_t v;
    if (vd_parse_i64(buf, &v, NULL) != 0 || v < 1 || v > ((int64_t)1 << 40))
        return vd_errf(e, VD_EUSAGE, "bad sample count '%s' in --data synthetic:TRAIN[,TEST] "
                       "(a positive integer)", buf);
    *out = v;
    return VD_OK;
}

const char *vd_data_dir(const char *spec) {
    static const char *const with_dir[] = { "mnist:", "cifar10:", "folder:" };
    for (int i = 0; spec && i < (int)VD_ARRAY_LEN(with_dir); i++)
        if (!strncmp(spec, with_dir[i], strlen(with_dir[i]))) return spec + strlen(with_dir[i]);
    return NULL;
}

int vd_data_open(const char *spec, const vd_net *net, int batch, uint64_t seed,
                 bool augment, vd_dataset **out, vd_err *e) {
    *out = NULL;
    if (batch < 1) return vd_errf(e, VD_EUSAGE, "batch size must be >= 1 (got %d)", batch);
    if (net->in_c < 1 || net->in_h < 1 || net->in_w < 1 || net->classes < 1)
        return vd_errf(e, VD_EINTERNAL, "net '%s' has no input shape/classes", net->name);
    if (!spec || !*spec) spec = "synthetic";
    const char *colon = strchr(spec, ':');
    size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *arg = colon ? colon + 1 : "";
    static const char *const kinds[] = { "mnist", "cifar10", "folder", "synthetic" };
    int kind = -1;
    for (int i = 0; i < (int)VD_ARRAY_LEN(kinds); i++)
        if (strlen(kinds[i]) == klen && strncmp(spec, kinds[i], klen) == 0) kind = i;
    if (kind < 0) {
        char k[64];
        snprintf(k, sizeof k, "%.*s", (int)(klen < 63 ? klen : 63), spec);
        const char *s = vd_suggest(k, kinds, (int)VD_ARRAY_LEN(kinds));
        return vd_errf(e, VD_EUSAGE,
                       "unknown data kind '%s' in --data %s%s%s%s (expected mnist:DIR, "
                       "cifar10:DIR, folder:DIR or synthetic[:TRAIN[,TEST]])", k, spec,
                       s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
    }
    if (kind != 3 && !*arg)
        return vd_errf(e, VD_EUSAGE, "--data %s needs a directory: %s:DIR", spec, kinds[kind]);
    if (augment && kind != 2)
        return vd_errf(e, VD_EUSAGE, "augmentation is only available for folder:DIR data");

    vd_dataset *ds = vd_calloc(1, sizeof *ds, e);
    if (!ds) return VD_ENOMEM;
    ds->seed = seed;
    ds->augment = augment;
    snprintf(ds->info.kind, sizeof ds->info.kind, "%s", kinds[kind]);
    int rc;
    switch (kind) {
    case 0: rc = vd_data_open_mnist(ds, arg, net, e); break;
    case 1: rc = vd_data_open_cifar10(ds, arg, net, e); break;
    case 2: rc = vd_data_open_folder(ds, arg, net, e); break;
    default: {
        int64_t ntr = (int64_t)batch * 1024, nte = 0;
        rc = VD_OK;
        if (*arg) {
            const char *comma = strchr(arg, ',');
            rc = parse_count(arg, comma ? (size_t)(comma - arg) : strlen(arg), &ntr, e);
            if (!rc && comma) rc = parse_count(comma + 1, strlen(comma + 1), &nte, e);
            if (!rc && !comma) nte = ntr / 8 > 0 ? ntr / 8 : 1;
        } else {
            nte = (int64_t)batch * 16;
        }
        if (!rc) rc = vd_data_open_synthetic(ds, ntr, nte, net, e);
        break;
    }
    }
    if (rc) { vd_free(ds); return rc; }
    if (ds->info.n[VD_SPLIT_TRAIN] < 1) {
        rc = vd_errf(e, VD_EDATA, "%s: the training split is empty", spec);
        vd_data_close(&ds);
        return rc;
    }
    *out = ds;
    return VD_OK;
}

void vd_data_close(vd_dataset **ds) {
    if (!ds || !*ds) return;
    if ((*ds)->close) (*ds)->close(*ds);
    VD_FREE(*ds);
}

const vd_data_info *vd_data_get_info(const vd_dataset *ds) { return &ds->info; }

bool vd_data_is_synthetic(const vd_dataset *ds) { return strcmp(ds->info.kind, "synthetic") == 0; }

int vd_data_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                   float *x, int32_t *label, vd_err *e) {
    if (index < 0 || index >= ds->info.n[split])
        return vd_errf(e, VD_EINTERNAL, "sample %lld out of range (split has %lld)",
                       (long long)index, (long long)ds->info.n[split]);
    return ds->sample(ds, split, index, aug_key, x, label, e);
}

/* Uniform integer in [0, bound) without modulo bias (bound >= 1). */
static uint64_t rng_below(vd_rng *r, uint64_t bound) {
    uint64_t lim = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
        uint64_t v = ((uint64_t)vd_rng_u32(r) << 32) | vd_rng_u32(r);
        if (v < lim) return v % bound;
    }
}

/* A Fisher-Yates permutation of [0, n) drawn from vd_rng(seed, stream). */
static void draw_perm(int64_t n, uint64_t seed, uint64_t stream, int64_t *perm) {
    vd_rng r;
    vd_rng_seed(&r, seed, stream);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

void vd_data_epoch_perm(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm) {
    draw_perm(n, seed, 0x5EED000000000000ull ^ (uint64_t)epoch, perm);
}

int vd_data_hold_out(vd_dataset *ds, double fraction, vd_err *e) {
    if (!(fraction > 0 && fraction < 1))
        return vd_errf(e, VD_EUSAGE, "--val-split %g: the fraction held out must be between 0 "
                       "and 1 (exclusive)", fraction);
    int64_t n = ds->info.n[VD_SPLIT_TRAIN], nt = ds->info.n[VD_SPLIT_TEST];
    if (!ds->hold_out || nt > 0)
        return vd_errf(e, VD_EUSAGE, "--val-split: %s has a held-out split of its own%s; "
                       "--val-split is for a folder:DIR without val/", ds->info.desc,
                       ds->hold_out ? " (its val/ directory)" : "");
    int64_t k = llround(fraction * (double)n);
    if (k < 1 || k >= n)
        return vd_errf(e, VD_EUSAGE, "--val-split %g of the %lld training images holds out "
                       "%lld: each split needs at least one image", fraction, (long long)n,
                       (long long)k);
    int64_t *perm = vd_malloc(sizeof(int64_t) * (size_t)n, e);
    bool *held = vd_calloc((size_t)n, sizeof(bool), e);
    int rc = perm && held ? VD_OK : VD_ENOMEM;
    if (!rc) {
        draw_perm(n, ds->seed, 0x7A1D5011700000ull, perm);
        for (int64_t i = 0; i < k; i++) held[perm[i]] = true;
        rc = ds->hold_out(ds, held, fraction, e);
    }
    vd_free(perm);
    vd_free(held);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Loader                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct slot {
    float *x;                   /* [batch * c*h*w] floats, or as many 16-bit values */
    vd_dtype dt;                /* x's elements: floats, or 16-bit channels-last samples
                                   (made for a consumer that takes them: vd_loader_next_as) */
    int32_t *labels;            /* [batch] */
    int64_t batch_no;           /* batch being filled / held (valid when claimed) */
    int chunks_done;            /* chunks finished (the batch is ready at n_chunks) */
    int rc;                     /* error of the failing chunk with the lowest sample */
    int err_pos;                /* that chunk's first sample (INT32_MAX: none) */
    vd_err err;
} slot;

/* Work is claimed in chunks of a batch (chunk samples each, the last
 * shorter), oldest batch first, so that all threads fill the same batch and
 * a few slots suffice however many threads there are. A sample's content
 * depends only on its sample counter, so the batches do not depend on the
 * number of threads or on who filled what. */
struct vd_loader {
    vd_dataset *ds;
    vd_loader_cfg cfg;
    int64_t sample_floats;      /* c*h*w */
    int chunk, n_chunks;        /* samples per chunk, chunks per batch */
    int n_slots;
    slot *slots;                /* [n_slots] */
    int n_threads;
    pthread_t *threads;         /* [n_threads] */
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* workers wait here for a free slot */
    pthread_cond_t cv_ready;    /* vd_loader_next waits here for its batch */
    int64_t next_claim;         /* batch of the next chunk a worker takes */
    int next_chunk;             /* that chunk's number within the batch */
    int64_t next_consume;       /* next batch number vd_loader_next returns */
    vd_dtype want_dt;           /* the type the consumer's last vd_loader_next_as took: the
                                   batches opened from then on are made in it */
    bool stop;
    /* permutation cache (shuffle): two epochs, guarded by mu */
    int64_t perm_epoch[2];
    int64_t *perm[2];           /* [n] each */
    int perm_victim;
};

/* The batch of the whole sequence that this loader's batch b is (cfg.ranks
 * shards). */
static int64_t shard_batch(const vd_loader *ld, int64_t b) {
    return b * ld->cfg.ranks + ld->cfg.rank;
}

/* Dataset index of sample counter s. Caller holds mu. */
static int64_t index_of(vd_loader *ld, uint64_t s) {
    int64_t n = ld->ds->info.n[ld->cfg.split];
    int64_t epoch = (int64_t)(s / (uint64_t)n), pos = (int64_t)(s % (uint64_t)n);
    if (!ld->cfg.shuffle) return pos;
    for (int k = 0; k < 2; k++)
        if (ld->perm_epoch[k] == epoch) return ld->perm[k][pos];
    int k = ld->perm_victim;
    ld->perm_victim ^= 1;
    vd_data_epoch_perm(n, ld->cfg.seed, epoch, ld->perm[k]);
    ld->perm_epoch[k] = epoch;
    return ld->perm[k][pos];
}

/* cfg.pad: the label of sample counter s past the split's end is padding. */
static void pad_label(const vd_loader *ld, uint64_t s, int32_t *label) {
    if (ld->cfg.pad && s >= (uint64_t)ld->ds->info.n[ld->cfg.split]) *label = VD_LABEL_PAD;
}

/* Sample index (aug_key s) into x [sample_floats]: floats CHW (dt F32), or
 * 16-bit dt HWC; tmp [sample_floats] (may be NULL: allocated on first need,
 * the caller's to free) holds the floats that are converted where the data
 * set makes no samples of dt itself (it may make bf16 ones: sample_bf16). */
static int make_sample(vd_loader *ld, int64_t index, uint64_t s, vd_dtype dt, void *x,
                       int32_t *label, float **tmp, vd_err *e) {
    vd_dataset *ds = ld->ds;
    if (dt == VD_DT_F32) return vd_data_sample(ds, ld->cfg.split, index, s, x, label, e);
    if (dt == VD_DT_BF16 && ds->sample_bf16) {
        if (index < 0 || index >= ds->info.n[ld->cfg.split])
            return vd_errf(e, VD_EINTERNAL, "sample %lld out of range", (long long)index);
        return ds->sample_bf16(ds, ld->cfg.split, index, s, x, label, e);
    }
    if (!*tmp && !(*tmp = vd_malloc(sizeof(float) * (size_t)ld->sample_floats, e)))
        return VD_ENOMEM;
    int rc = vd_data_sample(ds, ld->cfg.split, index, s, *tmp, label, e);
    if (!rc)
        vd_nchw_f32_to_nhwc_h16(dt, *tmp, x, 1, ds->info.c, (int64_t)ds->info.h * ds->info.w);
    return rc;
}

static void *worker(void *arg) {
    vd_loader *ld = arg;
    int CH = ld->chunk;
    int64_t *idx = vd_malloc(sizeof(int64_t) * (size_t)CH, NULL);
    float *tmp = NULL;          /* make_sample's floats */
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        while (!ld->stop && ld->next_claim >= ld->next_consume + ld->n_slots)
            pthread_cond_wait(&ld->cv, &ld->mu);
        if (ld->stop) break;
        int64_t b = ld->next_claim;
        int c = ld->next_chunk++;
        if (ld->next_chunk == ld->n_chunks) { ld->next_chunk = 0; ld->next_claim++; }
        slot *sl = &ld->slots[b % ld->n_slots];
        if (c == 0) {           /* the first chunk claimed opens the slot for batch b */
            sl->batch_no = b;
            sl->dt = ld->want_dt;
            sl->chunks_done = 0;
            sl->rc = VD_OK;
            sl->err_pos = INT32_MAX;
        }
        int i0 = c * CH, n = ld->cfg.batch - i0 < CH ? ld->cfg.batch - i0 : CH;
        uint64_t s0 = ld->cfg.start + (uint64_t)shard_batch(ld, b) * (uint64_t)ld->cfg.batch +
                      (uint64_t)i0;
        if (idx)
            for (int i = 0; i < n; i++) idx[i] = index_of(ld, s0 + (uint64_t)i);
        /* more work claimable: pass the wake-up on to another worker (the
         * consumer wakes one, so its own thread is not crowded out) */
        bool more = ld->next_claim < ld->next_consume + ld->n_slots;
        vd_dtype dt = sl->dt;
        pthread_mutex_unlock(&ld->mu);
        if (more) pthread_cond_signal(&ld->cv);

        int rc = VD_OK;
        vd_err err = { 0 };
        if (!idx) {
            rc = vd_errf(&err, VD_ENOMEM, "out of memory in the data loader");
        } else {
            for (int i = 0; i < n && !rc; i++) {
                int64_t at = (int64_t)(i0 + i) * ld->sample_floats;
                rc = make_sample(ld, idx[i], s0 + (uint64_t)i, dt,
                                 dt != VD_DT_F32 ? (void *)((uint16_t *)sl->x + at)
                                                 : (void *)(sl->x + at),
                                 &sl->labels[i0 + i], &tmp, &err);
                pad_label(ld, s0 + (uint64_t)i, &sl->labels[i0 + i]);
            }
        }
        pthread_mutex_lock(&ld->mu);
        if (rc && i0 < sl->err_pos) {
            sl->rc = rc;
            sl->err = err;
            sl->err_pos = i0;
        }
        if (++sl->chunks_done == ld->n_chunks) pthread_cond_signal(&ld->cv_ready);
    }
    pthread_mutex_unlock(&ld->mu);
    vd_free(idx);
    vd_free(tmp);
    return NULL;
}

/* Ask for transparent huge pages for the 2 MiB-aligned interior of p [n]
 * (a batch buffer: 154 MB for a b256 ImageNet batch in floats). Its first
 * writes otherwise fault in 4 KiB pages one by one: 650 ms for 154 MB on a
 * virtual machine where a page fault costs 17 us (the build machine; with
 * huge pages 30 ms), paid by the loader threads on the first batches of
 * every run. Advice only: without THP (a kernel without it, or set to
 * "never") nothing changes, so the result is ignored. */
static void want_huge_pages(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + n) & ~(huge - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

int vd_loader_default_threads(void) {
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    if (nc < 1) return 1;
    return nc > VD_LOADER_MAX_DEFAULT_THREADS ? VD_LOADER_MAX_DEFAULT_THREADS : (int)nc;
}

int vd_loader_create(vd_loader **out, vd_dataset *ds, const vd_loader_cfg *cfg,
                     vd_err *e) {
    *out = NULL;
    if (cfg->batch < 1) return vd_errf(e, VD_EUSAGE, "batch must be >= 1");
    if (ds->info.n[cfg->split] < 1)
        return vd_errf(e, VD_EDATA, "%s: the %s split is empty", ds->info.desc,
                       cfg->split == VD_SPLIT_TRAIN ? "train" : "test");
    if (cfg->synth_device && !vd_data_is_synthetic(ds))
        return vd_errf(e, VD_EUSAGE, "%s: only synthetic data can be generated on the device",
                       ds->info.desc);
    if (cfg->rank < 0 || (cfg->rank > 0 && cfg->rank >= cfg->ranks))
        return vd_errf(e, VD_EINTERNAL, "loader shard %d of %d", cfg->rank, cfg->ranks);
    vd_loader *ld = vd_calloc(1, sizeof *ld, e);
    if (!ld) return VD_ENOMEM;
    ld->ds = ds;
    ld->cfg = *cfg;
    if (ld->cfg.ranks < 1) ld->cfg.ranks = 1;   /* not sharded */
    ld->sample_floats = (int64_t)ds->info.c * ds->info.h * ds->info.w;
    /* synth_device: no workers and no slots (n_slots 0), only the order */
    int nt = cfg->synth_device ? 0 : cfg->threads > 0 ? cfg->threads : vd_loader_default_threads();
    ld->n_threads = nt;
    /* about four chunks per thread and batch: threads share the batch
     * evenly, and the lock is taken once per chunk, not per sample */
    ld->chunk = nt ? (cfg->batch + 4 * nt - 1) / (4 * nt) : cfg->batch;
    ld->n_chunks = (cfg->batch + ld->chunk - 1) / ld->chunk;
    /* one slot being consumed, the others being filled: double buffering
     * with one thread, four slots (three batches ahead) with more */
    ld->n_slots = nt == 0 ? 0 : nt == 1 ? 2 : 4;
    ld->perm_epoch[0] = ld->perm_epoch[1] = -1;
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv, NULL);
    pthread_cond_init(&ld->cv_ready, NULL);
    int rc = VD_OK;
    uint64_t xbytes;
    if (!vd_mul_u64((uint64_t)ld->sample_floats * sizeof(float), (uint64_t)cfg->batch, &xbytes)) {
        rc = vd_errf(e, VD_ENOMEM, "batch buffer size overflows");
        goto fail;
    }
    ld->slots = nt ? vd_calloc((size_t)ld->n_slots, sizeof(slot), e) : NULL;
    if (nt && !ld->slots) { rc = VD_ENOMEM; goto fail; }
    for (int i = 0; i < ld->n_slots; i++) {
        ld->slots[i].batch_no = -1;
        ld->slots[i].x = vd_malloc(xbytes, e);
        if (ld->slots[i].x) want_huge_pages(ld->slots[i].x, xbytes);
        ld->slots[i].labels = vd_malloc(sizeof(int32_t) * (size_t)cfg->batch, e);
        if (!ld->slots[i].x || !ld->slots[i].labels) { rc = VD_ENOMEM; goto fail; }
    }
    if (cfg->shuffle)
        for (int k = 0; k < 2; k++) {
            ld->perm[k] = vd_malloc(sizeof(int64_t) * (size_t)ds->info.n[cfg->split], e);
            if (!ld->perm[k]) { rc = VD_ENOMEM; goto fail; }
        }
    ld->threads = nt ? vd_calloc((size_t)nt, sizeof(pthread_t), e) : NULL;
    if (nt && !ld->threads) { rc = VD_ENOMEM; goto fail; }
    for (int i = 0; i < nt; i++) {
        if (pthread_create(&ld->threads[i], NULL, worker, ld) != 0) {
            rc = vd_errf(e, VD_ENOMEM, "cannot start data loader thread");
            goto fail;
        }
        ld->n_started++;
    }
    *out = ld;
    return VD_OK;
fail:
    vd_loader_destroy(&ld);
    return rc;
}

int vd_loader_threads(const vd_loader *ld) { return ld->n_threads; }

/* Copying a large batch into the caller's buffer (pinned host memory that a
 * single thread fills at well under the memory bandwidth): in parallel
 * parts, the calling thread doing the first. To 16 bits: the parts are
 * converted (rounded to nearest even) instead of copied; n counts source
 * bytes. */
typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
    int64_t cl_c, cl_hw;        /* > 0: convert to channels-last samples of c x hw */
    vd_dtype dt;                /* ... of this type (float: relaid out only) */
} copy_part;

static void *copy_run(void *arg) {
    copy_part *p = arg;
    if (p->cl_c > 0) {
        int64_t per = p->cl_c * p->cl_hw;
        vd_nchw_f32_to_nhwc(p->dt, (const float *)p->src, p->dst, (int64_t)(p->n / 4) / per,
                            p->cl_c, p->cl_hw);
    } else {
        memcpy(p->dst, p->src, p->n);
    }
    return NULL;
}

enum { COPY_PART_MIN = 4 << 20, COPY_MAX_PARTS = 8 };

/* n source bytes; c > 0: float NCHW samples converted to dt channels-last
 * samples of c x hw (then the parts are whole samples). */
static void copy_parallel(void *dst, const void *src, size_t n, int max_parts, int64_t c,
                          int64_t hw, vd_dtype dt) {
    int parts = (int)(n / COPY_PART_MIN);
    if (parts > max_parts) parts = max_parts;
    if (parts > COPY_MAX_PARTS) parts = COPY_MAX_PARTS;
    if (parts < 2) { copy_run(&(copy_part){ dst, src, n, c, hw, dt }); return; }
    size_t unit = c > 0 ? (size_t)(c * hw) * 4 : 64;   /* parts start at multiples */
    copy_part p[COPY_MAX_PARTS];
    pthread_t th[COPY_MAX_PARTS];
    bool started[COPY_MAX_PARTS] = { false };
    size_t per = (n / (size_t)parts + unit - 1) / unit * unit;
    for (int i = 0; i < parts; i++) {
        size_t off = per * (size_t)i < n ? per * (size_t)i : n;
        size_t len = n - off < per ? n - off : per;
        size_t doff = c > 0 ? off / 4 * (size_t)vd_dtype_bytes(dt) : off;
        p[i] = (copy_part){ (char *)dst + doff, (const char *)src + off, len, c, hw, dt };
        if (i > 0) started[i] = pthread_create(&th[i], NULL, copy_run, &p[i]) == 0;
    }
    copy_run(&p[0]);
    for (int i = 1; i < parts; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else copy_run(&p[i]);       /* no thread: copy that part here */
    }
}

int vd_loader_next(vd_loader *ld, float *x, int32_t *labels, vd_err *e) {
    return vd_loader_next_as(ld, x, VD_DT_F32, false, labels, e);
}

/* Batch b (held in sl, made in a 16-bit type) again, in floats, into x: a
 * consumer that took 16 bits and now takes floats or the other 16-bit type
 * (no caller switches; kept exact). The samples are the slot's (the same
 * sample counters and indices). */
static int remake_f32(vd_loader *ld, int64_t b, float *x, int32_t *labels, vd_err *e) {
    int n = ld->cfg.batch;
    uint64_t s0 = ld->cfg.start + (uint64_t)shard_batch(ld, b) * (uint64_t)n;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&ld->mu);    /* index_of's permutation cache */
        int64_t index = index_of(ld, s0 + (uint64_t)i);
        pthread_mutex_unlock(&ld->mu);
        int rc = vd_data_sample(ld->ds, ld->cfg.split, index, s0 + (uint64_t)i,
                                x + (int64_t)i * ld->sample_floats, &labels[i], e);
        if (rc) return rc;
        pad_label(ld, s0 + (uint64_t)i, &labels[i]);
    }
    return VD_OK;
}

int vd_loader_next_as(vd_loader *ld, void *x, vd_dtype dt, bool nhwc, int32_t *labels,
                      vd_err *e) {
    if (dt != VD_DT_F32 && !nhwc)
        return vd_errf(e, VD_EINTERNAL, "the data loader: 16-bit batches are channels-last");
    if (ld->cfg.synth_device)
        return vd_errf(e, VD_EINTERNAL, "the data loader describes synthetic batches only "
                       "(vd_loader_next_synth)");
    pthread_mutex_lock(&ld->mu);
    /* the batches opened from now on are made in the format asked for */
    ld->want_dt = dt;
    int64_t b = ld->next_consume;
    slot *sl = &ld->slots[b % ld->n_slots];
    while (!(sl->batch_no == b && sl->chunks_done == ld->n_chunks))
        pthread_cond_wait(&ld->cv_ready, &ld->mu);
    int rc = sl->rc;
    if (rc) {
        if (e) *e = sl->err;
        pthread_mutex_unlock(&ld->mu);
        return rc;          /* sticky: the batch is never consumed */
    }
    pthread_mutex_unlock(&ld->mu);
    size_t n = (size_t)(ld->sample_floats * ld->cfg.batch);
    int64_t hw = (int64_t)ld->ds->info.h * ld->ds->info.w;
    if (sl->dt != VD_DT_F32 && sl->dt != dt) {
        float *f = !nhwc ? x : vd_malloc(sizeof(float) * n, e);
        if (!f) return VD_ENOMEM;
        rc = remake_f32(ld, b, f, labels, e);
        if (!rc && f != x) vd_nchw_f32_to_nhwc(dt, f, x, ld->cfg.batch, ld->ds->info.c, hw);
        if (f != x) vd_free(f);
        if (rc) return rc;  /* not consumed either */
    } else {
        /* made in the format asked for: copied; made in floats, taken
         * channels-last (float NHWC always; 16 bits for the batches made
         * before the consumer's first call): converted as it is copied */
        int64_t c = nhwc && sl->dt == VD_DT_F32 ? ld->ds->info.c : 0;
        copy_parallel(x, sl->x, (size_t)vd_dtype_bytes(sl->dt) * n, ld->n_threads, c, hw, dt);
        memcpy(labels, sl->labels, sizeof(int32_t) * (size_t)ld->cfg.batch);
    }
    pthread_mutex_lock(&ld->mu);
    ld->next_consume++;
    pthread_mutex_unlock(&ld->mu);
    /* wake one worker, after unlocking (woken, it needs the lock); it wakes
     * the next if there is more to do */
    pthread_cond_signal(&ld->cv);
    return VD_OK;
}

int vd_loader_next_synth(vd_loader *ld, vd_synth_batch *b, int32_t *labels, vd_err *e) {
    if (!ld->cfg.synth_device || !b || !b->index)
        return vd_errf(e, VD_EINTERNAL, "vd_loader_next_synth on a loader that makes batches, "
                       "or without an index array");
    const vd_dataset *ds = ld->ds;
    int n = ld->cfg.batch;
    uint64_t s0 = ld->cfg.start + (uint64_t)shard_batch(ld, ld->next_consume) * (uint64_t)n;
    *b = (vd_synth_batch){ .seed = ds->seed, .split = (int)ld->cfg.split,
                           .classes = ds->info.classes, .sample_numel = ld->sample_floats,
                           .channels = ds->info.c, .n = n, .index = b->index };
    pthread_mutex_lock(&ld->mu);    /* index_of's permutation cache */
    for (int i = 0; i < n; i++) b->index[i] = index_of(ld, s0 + (uint64_t)i);
    pthread_mutex_unlock(&ld->mu);
    for (int i = 0; i < n; i++) {
        labels[i] = vd_synth_label(vd_synth_key(ds->seed, b->split, b->index[i]), ds->info.classes);
        pad_label(ld, s0 + (uint64_t)i, &labels[i]);
    }
    ld->next_consume++;
    return VD_OK;
}

uint64_t vd_loader_position(const vd_loader *ld) {
    return ld->cfg.start + (uint64_t)ld->next_consume * (uint64_t)ld->cfg.ranks *
           (uint64_t)ld->cfg.batch;
}

void vd_loader_destroy(vd_loader **pld) {
    if (!pld || !*pld) return;
    vd_loader *ld = *pld;
    pthread_mutex_lock(&ld->mu);
    ld->stop = true;
    pthread_cond_broadcast(&ld->cv);
    pthread_mutex_unlock(&ld->mu);
    for (int i = 0; i < ld->n_started; i++) pthread_join(ld->threads[i], NULL);
    vd_free(ld->threads);
    if (ld->slots)
        for (int i = 0; i < ld->n_slots; i++) {
            vd_free(ld->slots[i].x);
            vd_free(ld->slots[i].labels);
        }
    vd_free(ld->slots);
    vd_free(ld->perm[0]);
    vd_free(ld->perm[1]);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->cv);
    pthread_cond_destroy(&ld->cv_ready);
    vd_free(ld);
    *pld = NULL;
}
