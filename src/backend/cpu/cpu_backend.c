/* cpu_backend.c — the CPU reference backend: memory, lazy streams, events,
 * op dispatch, the optimizer's update (SGD, AdamW). The correctness oracle
 * for the CUDA backend and for the executor's schedule.
 *
 * Memory. pool_create makes one 256-byte-aligned allocation of exactly the
 * requested bytes and fills it with 0xFF bytes (float NaN); host_alloc does
 * the same. Anything read before it was written therefore shows up as NaN.
 * Blocks of 2 MiB and more are mapped (mmap; not under AddressSanitizer,
 * which checks the bounds of heap blocks) 2 MiB-aligned with transparent
 * huge pages asked for before the fill touches them: the fill then faults
 * 2 MiB at a time, not 4 KiB (AlexNet's 700 MiB pool: ~180,000 faults
 * fewer), and with MALLOC_PERTURB_ set, as meson sets it for tests, malloc
 * would first fill a block with its own byte (a LeNet run: 90 -> 73 ms).
 *
 * Streams (the point of this backend). Compute runs immediately on the
 * calling thread; so do copy/poison/zero/fill_synthetic issued on
 * VD_STREAM_COMPUTE. Those issued on VD_STREAM_D2H or VD_STREAM_H2D are only appended
 * to that stream's queue. They run, in issue order, as late as the contract
 * allows and no later:
 *   - event_record(ev, D2H|H2D) appends a mark to the queue;
 *   - stream_wait(COMPUTE, ev) and event_sync(ev) run the recording stream's
 *     queue up to that mark, right now;
 *   - stream_wait(D2H|H2D, ev) (ev recorded on the other copy stream) appends
 *     a "wait" entry: when the waiting queue reaches it, the other queue is
 *     run up to the mark captured at the time of the wait;
 *   - synchronize runs both queues to the end.
 * Consequences, all deterministic: a kernel that reads a prefetched tensor
 * without waiting on the prefetch's event sees the stale (or poisoned)
 * contents; a region reused before the offload that drains it was waited on
 * is copied out AFTER it was overwritten, so the host copy is wrong and the
 * error surfaces when it is prefetched back. What this cannot catch: a copy
 * that misses a wait on a COMPUTE event (compute has always finished already).
 * An event recorded on COMPUTE completes at once. Re-recording an event
 * moves it; waits capture the position current at the time of the wait.
 *
 * Queues are arrays that grow by doubling when full (rarely: they drain at
 * every wait/sync and restart from index 0 when empty); no allocation per op
 * once they reached their working size.
 *
 * event_elapsed: wall time (vd_now) between the moments two events
 * completed: the record call for COMPUTE events, the moment the queue ran
 * past the mark for copy-stream events.
 *
 * Captures (capture_begin .. capture_end) are emulated faithfully, so that
 * the executor's capture logic is tested here: while capturing, every call
 * that issues work (ops, updates, copies, fills, event records and waits,
 * step_set, the loss-scaling calls) is recorded with its arguments copied
 * (an op's vd_op_io: what CUDA bakes into a graph's kernel parameters) and
 * not run; a host wait (event_sync, synchronize, scale_get, event_elapsed)
 * is an error there, as under stream capture. graph_launch writes the step
 * scalars' host-side copy and replays the records in order through the same
 * calls; a recorded step_set reads that copy as it is at the replay, as
 * CUDA's captured transfer does, and a recorded fill_synthetic reads its
 * slot's host-side copy of the indices as it is then (synth_set writes it).
 * So a value baked into a recorded argument that should have come from the
 * step scalars or a synthetic slot shows as a replay that differs from the
 * eager step.
 *
 * Synthetic slots (backend.h's fill_synthetic): each keeps its host-side
 * copy of the indices, which a fill's queue entry reads when it runs (on
 * CUDA the transfer at that stream position), and where the slot's last
 * fill sits in each queue; the copy is rewritten only after those ran (run
 * up to there, as CUDA's host waits for the slot's events). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "backend/cpu/cpu_internal.h"

/* ------------------------------------------------------------------ context */

enum { Q_COPY, Q_FILL, Q_MARK, Q_WAIT, Q_SYNTH };

typedef struct qentry {
    int kind;              /* Q_* */
    void *dst;             /* COPY, FILL */
    const void *src;       /* COPY */
    uint64_t bytes;        /* COPY, FILL */
    int fill;              /* FILL: byte value (0 or 0xFF) */
    int event;             /* MARK: event index */
    int wstream;           /* WAIT: stream to run ... */
    int64_t pos;           /* MARK: its own position; WAIT: ... up to this position */
    vd_synth_batch synth;  /* SYNTH: the batch (dst: x) */
    vd_dtype dt;           /* SYNTH: element type */
} qentry;

typedef struct cpu_queue {
    qentry *e;             /* [cap], live entries are [head, len) */
    int64_t cap, head, len;
    int64_t enq, done;     /* entries ever appended / ever run (absolute positions) */
} cpu_queue;

typedef struct cpu_event {
    bool recorded;         /* ever recorded */
    int stream;            /* where it was last recorded */
    int64_t pos;           /* copy streams: complete when queue.done >= pos */
    bool timed;            /* t is valid (the event completed) */
    double t;              /* vd_now() at completion */
} cpu_event;

typedef struct cpu_ctx {
    cpu_queue q[VD_N_STREAMS];  /* q[VD_STREAM_COMPUTE] unused */
    cpu_event *ev;              /* [n_ev] */
    int n_ev;
    const vd_net *net;          /* from layer_setup */
    int batch;
    int n_layers;
    vd_algo_opt *opts;          /* [n_layers][VD_CPU_CONV_N_ALGOS] */
    int *n_opts;                /* [n_layers] */
    double *scratch;            /* the most any layer's op needs (vd_cpu_op.scratch_doubles) */
    size_t scratch_n;
    bool f32_nhwc;              /* float maps are channels-last: layer_setup's math is tf32
                                   (vd_math_nhwc); 16-bit maps are so always, and float ones
                                   after another math's setup NCHW (the fp32 oracle calls of
                                   tests next to 16-bit ones) */
    float *bf_buf;              /* channels-last maps: the float NCHW copies of one call's
                                   operands (cpu_run_cl), [bf_n]; grows to the largest call's
                                   need */
    size_t bf_n;
    struct cpu_map { void *p; size_t n; } *maps;   /* [n_maps] the mapped blocks (big_alloc) */
    int n_maps, cap_maps;
    vd_loss_scale ls;           /* math fp16's loss scaling (scale_set ... scale_update) */
    vd_step_scalars steps;      /* what ops and updates read (step_set) */
    vd_step_scalars steps_host; /* step_set's host-side copy (graph_launch writes it) */
    struct cpu_graph *cap;      /* the graph being captured, NULL when not capturing */
    int capture_no;             /* captures begun (numbered from 1) */
    int n_graphs;               /* graphs captured and not destroyed (a slot grows only at 0) */
    struct cpu_synth_slot {     /* the synthetic slots (backend.h's fill_synthetic) */
        int64_t *index;         /* [cap] the host-side copy: what the slot's fills read */
        int n, cap;             /* indices held, room */
        int64_t pos[VD_N_STREAMS];   /* the slot's last fill in each copy queue (absolute) */
        int capture_no;         /* the capture that last filled it (0: none) */
    } synth[VD_SYNTH_SLOTS];
    bool *bias_once;            /* [n_bias_once] vd_backend_cpu_bias_rounding's layers (kept
                                   across layer_setup) */
    int n_bias_once;
} cpu_ctx;

/* ------------------------------------------------------------------ captures */

enum { R_FWD, R_BWD, R_UPDATE, R_UPDATE_SCALED, R_STEP_SET, R_COPY, R_POISON, R_ZERO, R_SYNTH,
       R_RECORD, R_WAIT, R_GRAD_CHECK, R_SCALE_UPDATE };

/* One recorded call: its arguments by value. */
typedef struct cpu_rec {
    int kind;                   /* R_* */
    int stream, event, layer;   /* copies, fills, synth / record, wait / ops, grad_check */
    int slot;                   /* synth */
    const vd_net *net;          /* ops */
    vd_op_io io;                /* ops: the operands as issued */
    vd_optim_step o;            /* updates */
    float *p, *m, *v;           /* updates */
    const float *g;             /* updates, grad_check */
    const void *table;          /* updates */
    void *dst;                  /* copies, fills, synth */
    const void *src;            /* copies */
    uint64_t bytes;             /* copies, fills */
    int64_t off, cnt;           /* grad_check */
    vd_synth_batch synth;       /* synth: the batch (index NULL: the slot's at the replay) */
    vd_dtype dt;                /* synth */
} cpu_rec;

typedef struct cpu_graph {
    cpu_rec *r;                 /* [n] in issue order */
    int n, cap;
} cpu_graph;

/* Append x to the capture. */
static int rec_push(cpu_ctx *c, const cpu_rec *x, vd_err *e) {
    cpu_graph *g = c->cap;
    if (g->n == g->cap) {
        int nc = g->cap ? 2 * g->cap : 64;
        cpu_rec *nr = vd_realloc(g->r, (size_t)nc * sizeof *nr, e);
        if (!nr) return VD_ENOMEM;
        g->r = nr;
        g->cap = nc;
    }
    g->r[g->n++] = *x;
    return VD_OK;
}

static int no_wait_in_capture(const cpu_ctx *c, const char *what, vd_err *e) {
    if (!c->cap) return VD_OK;
    return vd_errf(e, VD_EINTERNAL, "cpu backend: %s inside a capture (a host wait)", what);
}

static cpu_ctx *ctx_of(vd_backend *be) { return be->ctx; }

/* ------------------------------------------------------------------ memory */

enum { HUGE_ALIGN = 2 << 20, MAP_MIN = 2 << 20 };

/* Under AddressSanitizer every block stays a heap block, whose bounds it
 * checks (it ignores MALLOC_PERTURB_ anyway). */
#if defined(__SANITIZE_ADDRESS__)
#define VD_CPU_MAP_BIG 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VD_CPU_MAP_BIG 0
#endif
#endif
#ifndef VD_CPU_MAP_BIG
#define VD_CPU_MAP_BIG 1
#endif

/* A mapping of n bytes (n >= MAP_MIN), 2 MiB-aligned, huge pages asked for;
 * recorded in c->maps. NULL when out of memory. */
static void *big_alloc(cpu_ctx *c, size_t n) {
    if (c->n_maps == c->cap_maps) {
        int cap = c->cap_maps ? 2 * c->cap_maps : 8;
        struct cpu_map *m = vd_realloc(c->maps, (size_t)cap * sizeof *m, NULL);
        if (!m) return NULL;
        c->maps = m;
        c->cap_maps = cap;
    }
    size_t len = VD_ALIGN_UP(n, (size_t)4096), span = len + HUGE_ALIGN;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *a = (char *)VD_ALIGN_UP((uintptr_t)m, (uintptr_t)HUGE_ALIGN);
    if (a > m) munmap(m, (size_t)(a - m));                   /* the slack before and after */
    if (m + span > a + len) munmap(a + len, (size_t)(m + span - (a + len)));
#ifdef MADV_HUGEPAGE
    (void)madvise(a, len, MADV_HUGEPAGE);                    /* a hint: refused is fine */
#endif
    c->maps[c->n_maps++] = (struct cpu_map){a, len};
    return a;
}

/* Release a block of aligned_poisoned. */
static void poisoned_free(cpu_ctx *c, void *p) {
    for (int k = 0; k < c->n_maps; k++)
        if (c->maps[k].p == p) {
            munmap(p, c->maps[k].n);
            c->maps[k] = c->maps[--c->n_maps];
            return;
        }
    vd_free_uncounted(p);   /* posix_memalign'd */
}

static int aligned_poisoned(cpu_ctx *c, uint64_t bytes, void **p, const char *what, vd_err *e) {
    void *m = NULL;
    size_t n = bytes ? (size_t)bytes : 1;
    bool ok = (uint64_t)n == (bytes ? bytes : 1);
    if (ok && VD_CPU_MAP_BIG && n >= MAP_MIN) ok = (m = big_alloc(c, n)) != NULL;
    /* uncounted: the device pool, or host memory that vd_mem_track counts */
    else if (ok) ok = posix_memalign(&m, 256, n) == 0 && m;
    if (!ok) {
        char buf[32];
        return vd_errf(e, VD_ENOMEM, "cpu backend: cannot allocate %s of %s", what,
                       vd_fmt_bytes(bytes, buf, sizeof buf));
    }
    memset(m, 0xFF, n);
    *p = m;
    return VD_OK;
}

static int cpu_pool_create(vd_backend *be, uint64_t bytes, void **base, vd_err *e) {
    return aligned_poisoned(ctx_of(be), bytes, base, "the device pool", e);
}

static void cpu_pool_destroy(vd_backend *be, void *base) {
    if (base) poisoned_free(ctx_of(be), base);
}

static int cpu_host_alloc(vd_backend *be, uint64_t bytes, void **p, vd_err *e) {
    int rc = aligned_poisoned(ctx_of(be), bytes, p, "host memory", e);
    if (rc == VD_OK) vd_mem_track(*p, bytes);   /* host memory accounting (util.h) */
    return rc;
}

static void cpu_host_free(vd_backend *be, void *p) {
    if (!p) return;
    vd_mem_untrack(p);
    poisoned_free(ctx_of(be), p);   /* counted by vd_mem_track */
}

/* ------------------------------------------------------------------ queues */

static int check_stream(int s, vd_err *e) {
    if (s < 0 || s >= VD_N_STREAMS)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: stream %d does not exist", s);
    return VD_OK;
}

static int check_event(cpu_ctx *c, int ev, vd_err *e) {
    if (ev < 0 || ev >= c->n_ev)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: event %d does not exist (%d created)", ev,
                       c->n_ev);
    return VD_OK;
}

static int q_push(cpu_queue *q, const qentry *x, vd_err *e) {
    if (q->len == q->cap) {
        if (q->head > 0) {
            memmove(q->e, q->e + q->head, (size_t)(q->len - q->head) * sizeof *q->e);
            q->len -= q->head;
            q->head = 0;
        } else {
            int64_t nc = q->cap ? q->cap * 2 : 256;
            qentry *ne = vd_realloc(q->e, (size_t)nc * sizeof *ne, e);
            if (!ne) return VD_ENOMEM;
            q->e = ne;
            q->cap = nc;
        }
    }
    q->e[q->len++] = *x;
    q->enq++;
    return VD_OK;
}

/* fill_synthetic's work (data/synth.h): 16-bit batches are the float
 * values rounded to nearest even, bf16 by synth.h's vd_synth_bf16 (the CUDA
 * kernel's), fp16 by vd_f32_to_f16 (__float2half_rn's rounding), in
 * channels-last positions; float ones there too with b->nhwc. */
static void synth_run(void *x, vd_dtype dt, const vd_synth_batch *b) {
    int64_t m = b->sample_numel;
    for (int s = 0; s < b->n; s++) {
        uint64_t k = vd_synth_key(b->seed, b->split, b->index[s]);
        uint64_t t = vd_synth_template_key(b->seed, vd_synth_label(k, b->classes));
        if (dt != VD_DT_F32) {
            uint16_t *y = (uint16_t *)x + (int64_t)s * m;
            for (int64_t j = 0; j < m; j++) {
                float v = vd_synth_value(k, t, j);
                y[vd_synth_bf16_pos(j, m, b->channels)] =
                    dt == VD_DT_BF16 ? vd_synth_bf16(v) : vd_f32_to_f16(v);
            }
        } else {
            float *y = (float *)x + (int64_t)s * m;
            for (int64_t j = 0; j < m; j++)
                y[b->nhwc ? vd_synth_bf16_pos(j, m, b->channels) : j] = vd_synth_value(k, t, j);
        }
    }
}

/* synth_run on a large batch: its samples in parts on several threads (up
 * to the online cores; each sample is a pure function of its index, so the
 * bytes do not depend on the split). AlexNet's batch of 256 is 40 M
 * elements: ~0.2 s on one core, where the step's convolutions use them all. */
typedef struct synth_part { void *x; vd_dtype dt; vd_synth_batch b; } synth_part;

static void *synth_part_run(void *arg) {
    synth_part *p = arg;
    synth_run(p->x, p->dt, &p->b);
    return NULL;
}

enum { SYNTH_PART_MIN = 1 << 20, SYNTH_MAX_PARTS = 16 };   /* elements per part, parts */

static void synth_run_parallel(void *x, vd_dtype dt, const vd_synth_batch *b) {
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t parts = (int64_t)b->n * b->sample_numel / SYNTH_PART_MIN;
    if (parts > nc) parts = nc;
    if (parts > SYNTH_MAX_PARTS) parts = SYNTH_MAX_PARTS;
    if (parts > b->n) parts = b->n;
    if (parts < 2) { synth_run(x, dt, b); return; }
    synth_part p[SYNTH_MAX_PARTS];
    pthread_t th[SYNTH_MAX_PARTS];
    bool started[SYNTH_MAX_PARTS] = { false };
    size_t esz = (size_t)vd_dtype_bytes(dt);
    for (int i = 0; i < (int)parts; i++) {
        int s0 = (int)((int64_t)b->n * i / parts), s1 = (int)((int64_t)b->n * (i + 1) / parts);
        p[i] = (synth_part){ (char *)x + (size_t)s0 * (size_t)b->sample_numel * esz, dt, *b };
        p[i].b.index = b->index + s0;
        p[i].b.n = s1 - s0;
        if (i > 0) started[i] = pthread_create(&th[i], NULL, synth_part_run, &p[i]) == 0;
    }
    synth_run(p[0].x, dt, &p[0].b);
    for (int i = 1; i < (int)parts; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else synth_run(p[i].x, dt, &p[i].b);   /* no thread: this part here */
    }
}

/* Run stream s's queue until `upto` entries (absolute) have run. */
static void q_run(cpu_ctx *c, int s, int64_t upto) {
    cpu_queue *q = &c->q[s];
    while (q->done < upto && q->head < q->len) {
        qentry x = q->e[q->head++];
        q->done++;
        if (q->head == q->len) q->head = q->len = 0;
        switch (x.kind) {
        case Q_COPY: memmove(x.dst, x.src, (size_t)x.bytes); break;
        case Q_FILL: memset(x.dst, x.fill, (size_t)x.bytes); break;
        case Q_SYNTH: synth_run_parallel(x.dst, x.dt, &x.synth); break;
        case Q_MARK:
            if (x.event < c->n_ev && c->ev[x.event].stream == s && c->ev[x.event].pos == x.pos) {
                c->ev[x.event].timed = true;
                c->ev[x.event].t = vd_now();
            }
            break;
        case Q_WAIT: q_run(c, x.wstream, x.pos); break;
        }
    }
}

static void q_run_all(cpu_ctx *c) {
    for (int s = 1; s < VD_N_STREAMS; s++) q_run(c, s, c->q[s].enq);
}

/* ------------------------------------------------------------------ events */

static int cpu_events_create(vd_backend *be, int n_events, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (n_events < 0) return vd_errf(e, VD_EINTERNAL, "cpu backend: %d events", n_events);
    q_run_all(c);  /* old marks refer to old events */
    cpu_event *ne = vd_calloc(n_events ? (size_t)n_events : 1, sizeof *ne, e);
    if (!ne) return VD_ENOMEM;
    vd_free(c->ev);
    c->ev = ne;
    c->n_ev = n_events;
    return VD_OK;
}

static int cpu_event_record(vd_backend *be, int event, int stream, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, event, e)) || (rc = check_stream(stream, e))) return rc;
    if (c->cap) return rec_push(c, &(cpu_rec){.kind = R_RECORD, .event = event, .stream = stream}, e);
    cpu_event *ev = &c->ev[event];
    ev->recorded = true;
    ev->stream = stream;
    if (stream == VD_STREAM_COMPUTE) {
        ev->pos = 0;
        ev->timed = true;
        ev->t = vd_now();
        return VD_OK;
    }
    cpu_queue *q = &c->q[stream];
    qentry m = {.kind = Q_MARK, .event = event, .pos = q->enq + 1};
    if ((rc = q_push(q, &m, e))) return rc;
    ev->pos = m.pos;
    ev->timed = false;
    return VD_OK;
}

static int cpu_stream_wait(vd_backend *be, int stream, int event, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, event, e)) || (rc = check_stream(stream, e))) return rc;
    if (c->cap) return rec_push(c, &(cpu_rec){.kind = R_WAIT, .event = event, .stream = stream}, e);
    cpu_event *ev = &c->ev[event];
    if (!ev->recorded || ev->stream == VD_STREAM_COMPUTE || ev->stream == stream) return VD_OK;
    if (stream == VD_STREAM_COMPUTE) {
        q_run(c, ev->stream, ev->pos);
        return VD_OK;
    }
    qentry w = {.kind = Q_WAIT, .wstream = ev->stream, .pos = ev->pos};
    return q_push(&c->q[stream], &w, e);
}

static int cpu_event_sync(vd_backend *be, int event, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    int rc = check_event(c, event, e);
    if (rc || (rc = no_wait_in_capture(c, "event_sync", e))) return rc;
    cpu_event *ev = &c->ev[event];
    if (ev->recorded && ev->stream != VD_STREAM_COMPUTE) q_run(c, ev->stream, ev->pos);
    return VD_OK;
}

static int cpu_synchronize(vd_backend *be, vd_err *e) {
    int rc = no_wait_in_capture(ctx_of(be), "synchronize", e);
    if (rc) return rc;
    q_run_all(ctx_of(be));
    return VD_OK;
}

static int cpu_event_elapsed(vd_backend *be, int ev_start, int ev_end, float *ms, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, ev_start, e)) || (rc = check_event(c, ev_end, e)) ||
        (rc = no_wait_in_capture(c, "event_elapsed", e)))
        return rc;
    int bad = !c->ev[ev_start].timed ? ev_start : !c->ev[ev_end].timed ? ev_end : -1;
    if (bad >= 0)
        return vd_errf(e, VD_EINTERNAL,
                       "cpu backend: event %d has not completed (sync on it before timing)", bad);
    *ms = (float)((c->ev[ev_end].t - c->ev[ev_start].t) * 1000.0);
    return VD_OK;
}

/* ------------------------------------------------------------------ copies */

static int enqueue_or_run(cpu_ctx *c, int stream, const qentry *x, vd_err *e) {
    int rc = check_stream(stream, e);
    if (rc) return rc;
    if (x->bytes && !x->dst)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: copy/fill to a NULL pointer");
    if (stream != VD_STREAM_COMPUTE) return q_push(&c->q[stream], x, e);
    if (x->kind == Q_COPY) memmove(x->dst, x->src, (size_t)x->bytes);
    else if (x->kind == Q_SYNTH) synth_run_parallel(x->dst, x->dt, &x->synth);
    else memset(x->dst, x->fill, (size_t)x->bytes);
    return VD_OK;
}

static int cpu_copy_async(vd_backend *be, int stream, void *dst, const void *src, uint64_t bytes,
                          vd_err *e) {
    if (bytes && !src) return vd_errf(e, VD_EINTERNAL, "cpu backend: copy from a NULL pointer");
    if (ctx_of(be)->cap)
        return rec_push(ctx_of(be), &(cpu_rec){.kind = R_COPY, .stream = stream, .dst = dst,
                                                .src = src, .bytes = bytes}, e);
    qentry x = {.kind = Q_COPY, .dst = dst, .src = src, .bytes = bytes};
    return enqueue_or_run(ctx_of(be), stream, &x, e);
}

static int cpu_poison_async(vd_backend *be, int stream, void *dst, uint64_t bytes, vd_err *e) {
    if (ctx_of(be)->cap)
        return rec_push(ctx_of(be), &(cpu_rec){.kind = R_POISON, .stream = stream, .dst = dst,
                                                .bytes = bytes}, e);
    qentry x = {.kind = Q_FILL, .dst = dst, .bytes = bytes, .fill = 0xFF};
    return enqueue_or_run(ctx_of(be), stream, &x, e);
}

static int cpu_zero_async(vd_backend *be, int stream, void *dst, uint64_t bytes, vd_err *e) {
    if (ctx_of(be)->cap)
        return rec_push(ctx_of(be), &(cpu_rec){.kind = R_ZERO, .stream = stream, .dst = dst,
                                                .bytes = bytes}, e);
    qentry x = {.kind = Q_FILL, .dst = dst, .bytes = bytes, .fill = 0};
    return enqueue_or_run(ctx_of(be), stream, &x, e);
}

/* ------------------------------------------------------------------ synthetic slots */

/* Runs the slot's fills still queued (CUDA: the host waits for its events). */
static void slot_wait(cpu_ctx *c, const struct cpu_synth_slot *S) {
    for (int s = 1; s < VD_N_STREAMS; s++) q_run(c, s, S->pos[s]);
}

/* b's indices into slot's host-side copy (backend.h's fill_synthetic and
 * synth_set): after the slot's fills ran, unless it holds them already;
 * inside a capture capture_begin ran them. */
static int slot_write(cpu_ctx *c, int slot, const vd_synth_batch *b, vd_err *e) {
    struct cpu_synth_slot *S = &c->synth[slot];
    if (S->n == b->n && (b->n == 0 || !memcmp(S->index, b->index, (size_t)b->n * sizeof *b->index)))
        return VD_OK;
    if (c->cap && S->capture_no == c->capture_no)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: two batches into synthetic slot %d in one "
                       "capture", slot);
    if (!c->cap) slot_wait(c, S);
    if (b->n > S->cap) {
        if (c->cap || c->n_graphs > 0)
            return vd_errf(e, VD_EINTERNAL, "cpu backend: synthetic slot %d grows to %d samples "
                           "while a graph lives (it holds the slot's address)", slot, b->n);
        int64_t *ni = vd_realloc(S->index, (size_t)b->n * sizeof *ni, e);
        if (!ni) return VD_ENOMEM;
        S->index = ni;
        S->cap = b->n;
    }
    if (b->n) memcpy(S->index, b->index, (size_t)b->n * sizeof *b->index);
    S->n = b->n;
    return VD_OK;
}

/* The generation of batch b into x on a stream (queued, or run now on
 * COMPUTE), its indices the slot's host-side copy as it is when it runs. */
static int synth_issue(cpu_ctx *c, int stream, int slot, void *x, vd_dtype dt,
                       const vd_synth_batch *b, vd_err *e) {
    struct cpu_synth_slot *S = &c->synth[slot];
    uint64_t bytes = (uint64_t)b->n * (uint64_t)b->sample_numel * vd_dtype_bytes(dt);
    qentry q = {.kind = Q_SYNTH, .dst = x, .bytes = bytes, .synth = *b, .dt = dt};
    q.synth.index = S->index;
    int rc = enqueue_or_run(c, stream, &q, e);
    if (!rc && stream != VD_STREAM_COMPUTE) S->pos[stream] = c->q[stream].enq;
    return rc;
}

static int check_synth(int slot, const vd_synth_batch *b, vd_err *e) {
    if (slot < 0 || slot >= VD_SYNTH_SLOTS || b->n < 0 || b->sample_numel < 0 ||
        b->classes < 1 || (b->n && !b->index))
        return vd_errf(e, VD_EINTERNAL, "cpu backend: bad synthetic batch (slot %d)", slot);
    return VD_OK;
}

static int cpu_fill_synthetic(vd_backend *be, int stream, int slot, void *x, vd_dtype dt,
                              const vd_synth_batch *b, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_synth(slot, b, e)) || (rc = check_stream(stream, e)) ||
        (rc = slot_write(c, slot, b, e)))
        return rc;
    if (!c->cap) return synth_issue(c, stream, slot, x, dt, b, e);
    c->synth[slot].capture_no = c->capture_no;
    cpu_rec r = {.kind = R_SYNTH, .stream = stream, .slot = slot, .dst = x, .synth = *b, .dt = dt};
    r.synth.index = NULL;
    return rec_push(c, &r, e);
}

static int cpu_synth_set(vd_backend *be, int slot, const vd_synth_batch *b, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    int rc = check_synth(slot, b, e);
    if (rc) return rc;
    if (c->cap) return vd_errf(e, VD_EINTERNAL, "cpu backend: synth_set inside a capture");
    return slot_write(c, slot, b, e);
}

/* ------------------------------------------------------------------ layers */

static int cpu_layer_setup(vd_backend *be, const vd_net *net, int batch, vd_math math,
                           bool deterministic, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (batch <= 0) return vd_errf(e, VD_EINTERNAL, "cpu backend: batch %d", batch);
    int rc;
    size_t max_scratch = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        if (!be->supports_op(be, l->op, math))
            return vd_errf(e, VD_EUNSUPPORTED, "layer '%s': the cpu backend has no %s op", l->name,
                           vd_op_table[l->op].name);
        if ((rc = vd_cpu_check_shape(net, i, e))) return rc;
        const vd_cpu_op *op = &vd_cpu_ops[l->op];
        size_t need = op->scratch_doubles ? op->scratch_doubles(net, i) : 0;
        if (need > max_scratch) max_scratch = need;
    }
    int n = net->n_layers;
    vd_algo_opt *opts = vd_calloc((size_t)(n ? n : 1) * VD_CPU_CONV_N_ALGOS, sizeof *opts, e);
    int *n_opts = vd_calloc((size_t)(n ? n : 1), sizeof *n_opts, e);
    if (!opts || !n_opts) {
        vd_free(opts);
        vd_free(n_opts);
        return VD_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        vd_algo_opt *o = opts + (size_t)i * VD_CPU_CONV_N_ALGOS;
        if (net->layers[i].op == VD_OP_CONV) {
            /* im2col reuses one column buffer in both passes */
            uint64_t ws = vd_cpu_conv_ws_bytes(net, i, VD_CPU_CONV_IM2COL);
            o[0] = (vd_algo_opt){VD_CPU_CONV_IM2COL, VD_CPU_CONV_IM2COL, VD_CPU_CONV_IM2COL,
                                 ws, "im2col", ws, ws};
            o[1] = (vd_algo_opt){VD_CPU_CONV_DIRECT, VD_CPU_CONV_DIRECT, VD_CPU_CONV_DIRECT,
                                 0, "direct", 0, 0};
            n_opts[i] = 2;
        } else {
            o[0] = (vd_algo_opt){0, 0, 0, 0, "default", 0, 0};
            n_opts[i] = 1;
        }
    }
    if (max_scratch > c->scratch_n) {
        double *s = vd_realloc(c->scratch, max_scratch * sizeof *s, e);
        if (!s) {
            vd_free(opts);
            vd_free(n_opts);
            return VD_ENOMEM;
        }
        c->scratch = s;
        c->scratch_n = max_scratch;
    }
    vd_free(c->opts);
    vd_free(c->n_opts);
    c->opts = opts;
    c->n_opts = n_opts;
    c->n_layers = n;
    c->net = net;
    c->batch = batch;
    c->f32_nhwc = vd_math_nhwc(math) && vd_math_act_dtype(math) == VD_DT_F32;
    return VD_OK;
}

static int cpu_layer_algos(vd_backend *be, int layer, const vd_algo_opt **opts, int *n, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (!c->net) return vd_errf(e, VD_EINTERNAL, "cpu backend: layer_algos before layer_setup");
    if (layer < 0 || layer >= c->n_layers)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: layer %d does not exist", layer);
    *opts = c->opts + (size_t)layer * VD_CPU_CONV_N_ALGOS;
    *n = c->n_opts[layer];
    return VD_OK;
}

/* Every op of the table, in fp32 (TF32 math is a permission, not a demand:
 * fp32 satisfies it), bf16 and fp16 (cpu_run_h16). */
static bool cpu_supports_op(vd_backend *be, vd_op op, vd_math math) {
    return (unsigned)op < VD_OP_COUNT && vd_cpu_ops[op].fwd && vd_cpu_ops[op].bwd;
}

static int missing(const vd_net *net, int layer, const char *pass, const char *what, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    return vd_errf(e, VD_EINTERNAL, "cpu backend: layer '%s' (%s) %s: %s is NULL", l->name,
                   vd_op_table[l->op].name, pass, what);
}

/* What layer's backward reads of its input(s) and output with io's
 * operands: the op's reads (vd_op_bwd_reads_unfrozen), but conv and fc read
 * x for their weight's gradient alone (bwd_x_for_weight): none without dw
 * (a frozen weight, backend.h). */
static void bwd_reads(const vd_net *net, int layer, const vd_op_io *io, bool *x, bool *y) {
    vd_op_bwd_reads_unfrozen(net, layer, x, y);
    if (vd_op_table[net->layers[layer].op].bwd_x_for_weight && !io->dw) *x = false;
}

/* Pointers each op reads or writes; a NULL among them is an executor bug. */
static int check_io(const vd_net *net, int layer, const vd_op_io *io, bool bwd, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    const char *pass = bwd ? "backward" : "forward";
    if (io->n <= 0) return vd_errf(e, VD_EINTERNAL, "cpu backend: layer '%s': batch %d", l->name, io->n);
    bool needs_x = true, needs_y = true;   /* forward reads x and writes y */
    if (bwd) bwd_reads(net, layer, io, &needs_x, &needs_y);
    if (needs_x)
        for (int k = 0; k < l->n_in; k++)
            if (!io->x[k]) return missing(net, layer, pass, "x[k]", e);
    if (needs_y && !io->y) return missing(net, layer, pass, "y", e);
    if (bwd && l->op != VD_OP_SOFTMAX_XENT && !io->dy) return missing(net, layer, pass, "dy", e);
    switch (l->op) {
    case VD_OP_CONV: case VD_OP_FC:
        if (!io->w) return missing(net, layer, pass, "w", e);
        if ((l->op == VD_OP_CONV ? l->u.conv.bias : l->u.fc.bias) && !io->b && !bwd)
            return missing(net, layer, pass, "b", e);
        break;
    case VD_OP_BATCHNORM:
        if (!io->w || !io->b) return missing(net, layer, pass, "w/b", e);
        if (!io->aux) return missing(net, layer, pass, "aux", e);
        if (!bwd && !io->training && (!io->rm || !io->rv))
            return missing(net, layer, pass, "rm/rv", e);
        break;
    case VD_OP_SOFTMAX_XENT:
        if (!io->labels) return missing(net, layer, pass, "labels", e);
        if (!bwd && !io->aux) return missing(net, layer, pass, "aux", e);
        break;
    default: break;
    }
    return VD_OK;
}

static double *op_scratch(cpu_ctx *c, const vd_net *net, int layer, vd_err *e) {
    const vd_cpu_op *op = &vd_cpu_ops[net->layers[layer].op];
    size_t need = op->scratch_doubles ? op->scratch_doubles(net, layer) : 0;
    if (need > c->scratch_n) {  /* only without layer_setup for this net */
        double *s = vd_realloc(c->scratch, need * sizeof *s, e);
        if (!s) return NULL;
        c->scratch = s;
        c->scratch_n = need;
    }
    return c->scratch;
}

/* ---- channels-last maps: tf32 (float), bf16 and fp16 (math bf16, math
 * fp16: the oracle of the CUDA backend's mixed precision). Every feature-map
 * operand is copied to a float NCHW array, the fp32 op runs, and what it
 * wrote goes back channels-last. Math tf32 does only that (the CPU has no
 * tf32: fp32 products satisfy it, cpu_supports_op), so its results are
 * fp32's, relaid out: the layout is exercised, the values are the NCHW
 * run's. In 16 bits the copies also round: both 16-bit types take the same
 * path, only the rounding differs (io->act: vd_f32_to_bf16 or
 * vd_f32_to_f16, nearest even).
 * Every feature-map operand is expanded from 16 bits to a float copy, the
 * fp32 op runs, and what the op wrote (y forward, dx backward) is rounded to
 * nearest even back into 16-bit storage: a value is rounded exactly where the
 * CUDA path stores 16 bits. Conv and fc see 16-bit-rounded weights (the CUDA
 * path converts the fp32 master weights before cuDNN / cuBLAS); a conv
 * or fc bias is added after the product was stored (CUDA: a separate bias
 * kernel on the 16-bit output), so y is rounded twice as there, but for the
 * convs vd_backend_cpu_bias_rounding names (a CUDA conv whose cuDNN graph
 * adds the bias before its one store: y rounded once). Conv weight
 * gradients pass through 16 bits (cuDNN's 16-bit wgrad writes 16-bit), fc's
 * do not (cuBLAS writes fp32); bias, batch-norm and loss values stay fp32.
 * A chunk's conv dW that is added to dw (dw_beta 1) is rounded on its own
 * before the add, as the CUDA path adds its 16-bit dW to the fp32 gradient;
 * the other fields of a chunk (n0, n_batch) pass to the fp32 op unchanged.
 * Operands that alias (in-place layers) share one float copy. The float
 * copies are NCHW, converted both ways, so every fp32 op runs unchanged. */
typedef struct bf_map {
    const void *bf[2 * VD_MAX_INPUTS + 2];
    float *f[2 * VD_MAX_INPUTS + 2];
    int n;
    float *next;                /* the unused rest of the call's arena */
} bf_map;

/* The float NCHW copy of channels-last tensor p of type dt of n elements, c
 * channels of hw (converted when load), carved from the arena that
 * cpu_run_cl sized for the call. */
static float *bf_get(bf_map *m, vd_dtype dt, const void *p, int64_t n, int64_t c, int64_t hw,
                     bool load) {
    if (!p) return NULL;
    for (int i = 0; i < m->n; i++)
        if (m->bf[i] == p) return m->f[i];
    float *f = m->next;
    m->next += n;
    if (load) vd_nhwc_to_nchw_f32(dt, p, f, n / (c * hw), c, hw);
    m->bf[m->n] = p;
    m->f[m->n++] = f;
    return f;
}

/* The arena of one call: at least n floats (the sum of every operand's
 * size, aliases counted twice), kept in the context between calls: a
 * malloc and free of whole feature maps per call made a bf16 LeNet run page
 * fault (mmap'd chunks) for most of its time. */
static float *bf_arena(cpu_ctx *c, size_t n, vd_err *e) {
    if (n > c->bf_n) {
        vd_free(c->bf_buf);   /* nothing to keep: no realloc copy */
        c->bf_n = 0;
        if (!(c->bf_buf = vd_malloc(n * sizeof *c->bf_buf, e))) return NULL;
        c->bf_n = n;
    }
    return c->bf_buf;
}

/* The fp32 op of layer `layer`: the table's, or the loss's backward scaled
 * by the current loss scale (io->loss_scaled; only the loss layer may ask). */
static int run_op(cpu_ctx *ctx, const vd_net *net, int layer, const vd_op_io *io, bool bwd,
                  double *scratch, vd_err *e) {
    vd_op op = net->layers[layer].op;
    if (bwd && io->loss_scaled) {
        if (op != VD_OP_SOFTMAX_XENT)
            return vd_errf(e, VD_EINTERNAL, "cpu backend: loss_scaled on layer '%s', not the loss",
                           net->layers[layer].name);
        return vd_cpu_xent_backward_scaled(net, layer, io, ctx->ls.scale, e);
    }
    return (bwd ? vd_cpu_ops[op].bwd : vd_cpu_ops[op].fwd)(net, layer, io, scratch, e);
}

static int cpu_run_cl(cpu_ctx *ctx, const vd_net *net, int layer, const vd_op_io *io, bool bwd,
                      double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    vd_dtype dt = io->act;
    const bool h16 = dt != VD_DT_F32;   /* rounds where CUDA stores 16 bits */
    int64_t ny = (int64_t)io->n * vd_net_out_numel(net, layer), nx[VD_MAX_INPUTS];
    bool needs_x = true, needs_y = !bwd;
    if (bwd) bwd_reads(net, layer, io, &needs_x, &needs_y);
    bool gemm = h16 && (l->op == VD_OP_CONV || l->op == VD_OP_FC);
    int64_t nw = gemm ? net->params[l->param_first].numel : 0;
    /* 16-bit conv backward adding to dw: the chunk's dw and db apart first */
    bool acc = h16 && bwd && l->op == VD_OP_CONV && io->dw_beta != 0.0f;
    int64_t nb = acc && io->db ? l->c : 0;
    size_t total = (size_t)(2 * ny + nw) + 1;   /* y, dy, the weight copy */
    if (acc) total += (size_t)(nw + nb);        /* the chunk's dw, db */
    for (int k = 0; k < l->n_in; k++) {
        nx[k] = (int64_t)io->n * vd_net_out_numel(net, l->in[k]);
        total += 2 * (size_t)nx[k];                /* x[k], dx[k] */
    }
    bf_map m = {.n = 0, .next = bf_arena(ctx, total, e)};
    if (!m.next) return VD_ENOMEM;
    vd_op_io f = *io;
    f.act = VD_DT_F32;
    /* what the op reads: x (forward, or backward when it needs it), y (backward
     * when it needs it), dy, and dx when accumulating */
    int64_t yc = l->c, yhw = (int64_t)l->h * l->w, xc[VD_MAX_INPUTS], xhw[VD_MAX_INPUTS];
    for (int k = 0; k < l->n_in; k++) {
        vd_cpu_shape sh = vd_cpu_in_shape(net, layer, k);
        xc[k] = sh.c;
        xhw[k] = (int64_t)sh.h * sh.w;
        f.x[k] = io->x[k] && (!bwd || needs_x) ? bf_get(&m, dt, io->x[k], nx[k], xc[k], xhw[k], true)
                                               : NULL;
    }
    f.y = io->y && (!bwd || needs_y) ? bf_get(&m, dt, io->y, ny, yc, yhw, bwd) : NULL;
    f.dy = bf_get(&m, dt, io->dy, ny, yc, yhw, true);
    for (int k = 0; bwd && k < l->n_in; k++)     /* after dy: dx may be dy's storage */
        f.dx[k] = bf_get(&m, dt, io->dx[k], nx[k], xc[k], xhw[k], io->dx_beta[k] != 0.0f);
    if (gemm) {                              /* the 16-bit copy of the weight */
        float *wr = m.next;
        m.next += nw;
        memcpy(wr, io->w, (size_t)nw * sizeof *wr);
        vd_round_h16_n(dt, wr, (size_t)nw);
        f.w = wr;
        if (!bwd) f.b = NULL;                /* added after the stored product, below */
    }
    if (acc) {
        f.dw_beta = 0.0f;
        if (io->dw) { f.dw = m.next; m.next += nw; }
        if (io->db) { f.db = m.next; m.next += nb; }
    }
    /* the batch norm + add fusion (vd_op_io.bn_aux): input bn_k's float copy
     * (bf_get's, the add's alone: its batch norm's input is no other input
     * of it, vd_op_bn_folded) becomes the batch norm's y as the batch norm's
     * forward would have stored it, rounded to dt; then the plain sum */
    if (!bwd && f.bn_aux) {
        vd_cpu_bn_apply(net, l->in[f.bn_k], f.x[f.bn_k], (float *)f.x[f.bn_k], io->n, f.bn_aux,
                        f.bn_w, f.bn_b, dt);
        f.bn_aux = NULL;
    }
    int rc = run_op(ctx, net, layer, &f, bwd, scratch, e);
    if (rc) return rc;
    if (!bwd && io->bn_stats) return VD_OK;   /* (y is x, unwritten) */
    if (!bwd) {
        if (gemm && io->b) {                 /* (else the store below rounds once) */
            /* the product stored first, unless CUDA's graph adds the bias
             * before its one store (vd_backend_cpu_bias_rounding) */
            if (layer >= ctx->n_bias_once || !ctx->bias_once[layer])
                vd_round_h16_n(dt, f.y, (size_t)ny);
            int64_t ch = yc, hw = yhw;
            for (int64_t n = 0; n < io->n; n++)
                for (int64_t c = 0; c < ch; c++)
                    for (int64_t j = 0; j < hw; j++) f.y[(n * ch + c) * hw + j] += io->b[c];
        }
        vd_nchw_f32_to_nhwc(dt, f.y, io->y, io->n, yc, yhw);
    } else {
        if (gemm && l->op == VD_OP_CONV && io->dw) vd_round_h16_n(dt, f.dw, (size_t)nw);
        for (int64_t i = 0; acc && io->dw && i < nw; i++) io->dw[i] += f.dw[i];
        for (int64_t i = 0; acc && io->db && i < nb; i++) io->db[i] += f.db[i];
        for (int k = 0; k < l->n_in; k++)
            if (io->dx[k])
                vd_nchw_f32_to_nhwc(dt, f.dx[k], io->dx[k], io->n, xc[k], xhw[k]);
    }
    return VD_OK;
}

static int cpu_run(vd_backend *be, const vd_net *net, int layer, const vd_op_io *issued, bool bwd,
                   vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (layer < 0 || layer >= net->n_layers)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: layer %d does not exist", layer);
    if (c->cap)
        return rec_push(c, &(cpu_rec){.kind = bwd ? R_BWD : R_FWD, .net = net, .layer = layer,
                                      .io = *issued}, e);
    /* dropout's iteration: the call's plus the step scalars' (backend.h) */
    vd_op_io w = *issued;
    w.iter += c->steps.iter;
    /* the backward of a ReLU in place after a batch norm runs in the batch
     * norm's (vd_op_io.relu_mask; not with no_fuse): nothing to do where it
     * would write its dy tensor, as the CUDA backend's 16-bit path */
    if (bwd && !be->opts.no_fuse) {
        if (vd_op_relu_taker(net, layer) >= 0 && issued->dx[0] == issued->dy) return VD_OK;
        /* the backward of a ReLU that its max pool took (vd_op_io.relu_dx) */
        if (issued->bwd_done) return VD_OK;
        if (vd_op_relu_taken(net, layer) >= 0) {
            w.relu_mask = true;
            w.relu_store = issued->act;
        }
    }
    /* a conv's bias gradient in its ReLU's backward (vd_op_io.bias_db): the
     * ReLU reduces it, the conv skips it; with no_fuse the conv does */
    if (!bwd || be->opts.no_fuse) w.bias_db = NULL;
    else if (issued->db_taken) w.db = NULL;
    /* a max pool that takes its ReLU's backward (vd_op_io.relu_dx): the
     * pool's own, then the ReLU's on the dx it wrote, in place (y is the
     * pool's x), with the bias gradient: the calls of the two steps, in one */
    if (bwd && w.relu_dx && !be->opts.no_fuse) {
        w.relu_dx = false;
        w.bias_db = NULL;
        int r = vd_op_pool_relu(net, layer);
        if (r < 0 || !issued->dx[0] || issued->dx_beta[0] != 0.0f)
            return vd_errf(e, VD_EINTERNAL, "cpu backend: layer '%s' takes no ReLU's backward",
                           net->layers[layer].name);
        int rc = cpu_run(be, net, layer, &w, true, e);
        if (rc) return rc;
        vd_op_io ri = {.n = issued->n, .n0 = issued->n0, .n_batch = issued->n_batch,
                       .act = issued->act, .training = issued->training,
                       .y = (float *)issued->x[0], .dy = issued->dx[0],
                       .bias_db = issued->bias_db};   /* (y is read, not written) */
        ri.x[0] = issued->x[0];
        ri.dx[0] = issued->dx[0];
        return cpu_run(be, net, r, &ri, true, e);
    }
    /* a batch norm that takes the backward of the ReLU after its add
     * (vd_op_io.relu_y): the ReLU's call first, in place on dy (y is
     * relu_y), then the batch norm's on what it wrote: the calls of the two
     * steps, in one */
    if (bwd && w.relu_y && !be->opts.no_fuse) {
        int r = vd_op_add_relu(net, layer);
        if (r < 0 || !issued->dy)
            return vd_errf(e, VD_EINTERNAL, "cpu backend: layer '%s' takes no ReLU's backward",
                           net->layers[layer].name);
        vd_op_io ri = {.n = issued->n, .n0 = issued->n0, .n_batch = issued->n_batch,
                       .act = issued->act, .training = issued->training,
                       .y = (float *)issued->relu_y, .dy = issued->dy};   /* (y is read) */
        ri.x[0] = issued->relu_y;
        ri.dx[0] = (float *)issued->dy;
        int rc = cpu_run(be, net, r, &ri, true, e);
        if (rc) return rc;
    }
    w.relu_y = NULL;
    const vd_op_io *io = &w;
    vd_op op = net->layers[layer].op;
    if ((unsigned)op >= VD_OP_COUNT || !vd_cpu_ops[op].fwd || !vd_cpu_ops[op].bwd)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: unknown op %d", (int)op);
    int rc = check_io(net, layer, io, bwd, e);
    if (rc || (rc = vd_op_io_check_chunk(net, layer, io, bwd, e))) return rc;
    double *scratch = op_scratch(ctx_of(be), net, layer, e);
    if (!scratch && vd_cpu_ops[op].scratch_doubles) return VD_ENOMEM;
    if (io->act != VD_DT_F32 || c->f32_nhwc) return cpu_run_cl(c, net, layer, io, bwd, scratch, e);
    return run_op(ctx_of(be), net, layer, io, bwd, scratch, e);
}

static int cpu_forward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io, vd_err *e) {
    return cpu_run(be, net, layer, io, false, e);
}

static int cpu_backward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io, vd_err *e) {
    return cpu_run(be, net, layer, io, true, e);
}

/* ------------------------------------------------------------------ optimizer */

/* backend.h's vd_optim_step, element by element in float (AdamW's last
 * line in double; the C11 build contracts nothing into fused multiply-adds),
 * with the gradient multiplied by inv first (update_scaled's unscaling;
 * update: inv 1, exact). */
static void sgd_run(const vd_optim_step *o, const vd_step_scalars *st, float lr, float *p,
                    const float *g, float *m, int64_t count, float inv) {
    const float mu = o->momentum, wd = o->weight_decay;
    /* the buffer starts at the first update; with momentum 0 it is d (a
     * poisoned buffer is never read then) */
    bool fresh = st->t == 1 || mu == 0.0f;
    for (int64_t i = 0; i < count; i++) {
        float gi = g[i] * inv;
        float d = wd != 0.0f ? gi + wd * p[i] : gi;
        float buf = fresh ? d : mu * m[i] + d;
        m[i] = buf;
        float step = o->nesterov ? d + mu * buf : buf;
        p[i] = p[i] - lr * step;
    }
}

/* torch's lerp (ATen's Lerp.h) in float: exact at both ends, the branch on
 * the weight keeps its rounding small. */
static inline float lerp_torch(float a, float b, float w) {
    return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

static void adamw_run(const vd_optim_step *o, const vd_step_scalars *st, float lr, float *p,
                      const float *g, float *m, float *v, int64_t count, float inv) {
    const vd_adamw_scalars k = vd_adamw_scalars_at(o, lr, st);
    bool fresh = st->t == 1;   /* the state starts at zero: not read */
    for (int64_t i = 0; i < count; i++) {
        float gi = g[i] * inv;
        float mi = lerp_torch(fresh ? 0.0f : m[i], gi, k.w1);
        float vi = (fresh ? 0.0f : v[i]) * k.beta2 + (k.c2 * gi) * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
        float u = (k.neg_step * mi) / denom;
        p[i] = (float)((double)p[i] * k.decay + (double)u);
    }
}

/* ranges_create's table: the ranges copied. */
typedef struct cpu_ranges {
    int n;
    vd_update_range r[];
} cpu_ranges;

static int cpu_ranges_create(vd_backend *be, const vd_update_range *r, int n, void **table,
                             vd_err *e) {
    (void)be;
    *table = NULL;
    if (n < 0) return vd_errf(e, VD_EINTERNAL, "cpu backend: a table of %d ranges", n);
    for (int k = 0; k < n; k++)
        if (r[k].offset < 0 || r[k].count < 0)
            return vd_errf(e, VD_EINTERNAL, "cpu backend: update range [%lld, +%lld)",
                           (long long)r[k].offset, (long long)r[k].count);
    cpu_ranges *t = vd_malloc(sizeof *t + (size_t)n * sizeof *r, e);
    if (!t) return VD_ENOMEM;
    t->n = n;
    if (n) memcpy(t->r, r, (size_t)n * sizeof *r);
    *table = t;
    return VD_OK;
}

static void cpu_ranges_free(vd_backend *be, void *table) {
    (void)be;
    vd_free(table);
}

/* Every range of table at the step scalars' lr x its lr_mult (and t). */
static int update_run(cpu_ctx *c, const vd_optim_step *o, float *params, const float *grads,
                      float *m, float *v, const void *table, float inv, vd_err *e) {
    const cpu_ranges *t = table;
    const vd_step_scalars *st = &c->steps;
    if (!t || st->t < 1 || (o->kind == VD_OPT_ADAMW && !v))
        return vd_errf(e, VD_EINTERNAL, "cpu backend: %s update at step %lld%s",
                       vd_optimizer_name(o->kind), (long long)st->t, t ? "" : " without a table");
    for (int k = 0; k < t->n; k++) {
        int64_t off = t->r[k].offset, cnt = t->r[k].count;
        float lr = st->lr * t->r[k].lr_mult;
        if (o->kind == VD_OPT_ADAMW)
            adamw_run(o, st, lr, params + off, grads + off, m + off, v + off, cnt, inv);
        else
            sgd_run(o, st, lr, params + off, grads + off, m + off, cnt, inv);
    }
    return VD_OK;
}

static int cpu_update(vd_backend *be, const vd_optim_step *o, float *params, const float *grads,
                      float *m, float *v, const void *table, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (c->cap)
        return rec_push(c, &(cpu_rec){.kind = R_UPDATE, .o = *o, .p = params, .g = grads, .m = m,
                                      .v = v, .table = table}, e);
    return update_run(c, o, params, grads, m, v, table, 1.0f, e);
}

/* step_set: the host-side copy written, then "transferred" (read now:
 * compute runs on the calling thread). */
static int cpu_step_set(vd_backend *be, const vd_step_scalars *s, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    c->steps_host = *s;
    if (c->cap) return rec_push(c, &(cpu_rec){.kind = R_STEP_SET}, e);
    c->steps = c->steps_host;
    return VD_OK;
}

/* ------------------------------------------------------------------ loss scaling */

/* backend.h's contract; the state is ctx->ls, read and written at once
 * (compute runs on the calling thread). */
static int cpu_scale_set(vd_backend *be, const vd_loss_scale *s, vd_err *e) {
    if (!(s->scale > 0.0f) || !isfinite(s->scale))
        return vd_errf(e, VD_EINTERNAL, "cpu backend: loss scale %g", (double)s->scale);
    ctx_of(be)->ls = *s;
    ctx_of(be)->ls.found_inf = 0;
    return VD_OK;
}

static int cpu_scale_get(vd_backend *be, vd_loss_scale *s, vd_err *e) {
    int rc = no_wait_in_capture(ctx_of(be), "scale_get", e);
    if (rc) return rc;
    *s = ctx_of(be)->ls;
    return VD_OK;
}

static int cpu_grad_check(vd_backend *be, const float *grads, int64_t offset, int64_t count,
                          int layer, vd_err *e) {
    if (count < 0 || offset < 0)
        return vd_errf(e, VD_EINTERNAL, "cpu backend: grad_check range [%lld, +%lld)",
                       (long long)offset, (long long)count);
    if (ctx_of(be)->cap)
        return rec_push(ctx_of(be), &(cpu_rec){.kind = R_GRAD_CHECK, .g = grads, .off = offset,
                                                .cnt = count, .layer = layer}, e);
    vd_loss_scale *ls = &ctx_of(be)->ls;
    if (ls->found_inf) return VD_OK;    /* this step is skipped already */
    const float *g = grads + offset;
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(g[i])) {
            ls->found_inf = 1;
            if (ls->first_bad < 0) ls->first_bad = layer;
            break;
        }
    return VD_OK;
}

static int cpu_update_scaled(vd_backend *be, const vd_optim_step *o, float *params,
                             const float *grads, float *m, float *v, const void *table,
                             vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (c->cap)
        return rec_push(c, &(cpu_rec){.kind = R_UPDATE_SCALED, .o = *o, .p = params, .g = grads,
                                      .m = m, .v = v, .table = table}, e);
    const vd_loss_scale *ls = &c->ls;
    if (ls->found_inf) return VD_OK;
    /* torch's unscale factor: the reciprocal in double, rounded to float */
    return update_run(c, o, params, grads, m, v, table, (float)(1.0 / (double)ls->scale), e);
}

static int cpu_scale_update(vd_backend *be, vd_err *e) {
    if (ctx_of(be)->cap) return rec_push(ctx_of(be), &(cpu_rec){.kind = R_SCALE_UPDATE}, e);
    vd_loss_scale_step(&ctx_of(be)->ls);
    return VD_OK;
}

/* ------------------------------------------------------------------ capture calls */

static void graph_free(cpu_graph *g) {
    if (!g) return;
    vd_free(g->r);
    vd_free(g);
}

static void cpu_graph_destroy(vd_backend *be, void *graph) {
    if (graph) ctx_of(be)->n_graphs--;
    graph_free(graph);
}

static int cpu_capture_begin(vd_backend *be, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    if (c->cap) return vd_errf(e, VD_EINTERNAL, "cpu backend: capture_begin inside a capture");
    /* the capture's fills rewrite the slots' host-side copies: their
     * earlier fills must have run (CUDA waits here) */
    for (int k = 0; k < VD_SYNTH_SLOTS; k++) slot_wait(c, &c->synth[k]);
    c->cap = vd_calloc(1, sizeof *c->cap, e);
    if (!c->cap) return VD_ENOMEM;
    c->capture_no++;
    return VD_OK;
}

static int cpu_capture_end(vd_backend *be, void **graph, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    *graph = c->cap;
    c->cap = NULL;
    if (!*graph) return vd_errf(e, VD_EINTERNAL, "cpu backend: capture_end without a capture");
    c->n_graphs++;
    return VD_OK;
}

/* The records in order, through the calls that made them (now not capturing). */
static int cpu_graph_launch(vd_backend *be, void *graph, const vd_step_scalars *s, vd_err *e) {
    cpu_ctx *c = ctx_of(be);
    const cpu_graph *g = graph;
    if (c->cap || !g) return vd_errf(e, VD_EINTERNAL, "cpu backend: graph_launch %s",
                                     g ? "inside a capture" : "of no graph");
    c->steps_host = *s;
    int rc = VD_OK;
    for (int k = 0; k < g->n && !rc; k++) {
        const cpu_rec *r = &g->r[k];
        switch (r->kind) {
        case R_FWD: rc = cpu_run(be, r->net, r->layer, &r->io, false, e); break;
        case R_BWD: rc = cpu_run(be, r->net, r->layer, &r->io, true, e); break;
        case R_UPDATE: rc = cpu_update(be, &r->o, r->p, r->g, r->m, r->v, r->table, e); break;
        case R_UPDATE_SCALED:
            rc = cpu_update_scaled(be, &r->o, r->p, r->g, r->m, r->v, r->table, e);
            break;
        case R_STEP_SET: c->steps = c->steps_host; break;
        case R_COPY: rc = cpu_copy_async(be, r->stream, r->dst, r->src, r->bytes, e); break;
        case R_POISON: rc = cpu_poison_async(be, r->stream, r->dst, r->bytes, e); break;
        case R_ZERO: rc = cpu_zero_async(be, r->stream, r->dst, r->bytes, e); break;
        case R_SYNTH: rc = synth_issue(c, r->stream, r->slot, r->dst, r->dt, &r->synth, e); break;
        case R_RECORD: rc = cpu_event_record(be, r->event, r->stream, e); break;
        case R_WAIT: rc = cpu_stream_wait(be, r->stream, r->event, e); break;
        case R_GRAD_CHECK: rc = cpu_grad_check(be, r->g, r->off, r->cnt, r->layer, e); break;
        case R_SCALE_UPDATE: rc = cpu_scale_update(be, e); break;
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ lifecycle */

static void cpu_destroy(vd_backend *be) {
    if (!be) return;
    cpu_ctx *c = be->ctx;
    if (c) {
        graph_free(c->cap);   /* a capture left open by an error */
        for (int s = 0; s < VD_N_STREAMS; s++) vd_free(c->q[s].e);
        vd_free(c->ev);
        vd_free(c->opts);
        vd_free(c->n_opts);
        vd_free(c->scratch);
        vd_free(c->bf_buf);
        vd_free(c->maps);
        vd_free(c->bias_once);
        for (int k = 0; k < VD_SYNTH_SLOTS; k++) vd_free(c->synth[k].index);
        vd_free(c);
    }
    vd_free(be);
}

int vd_backend_cpu_bias_rounding(vd_backend *be, int n_layers, const bool *once, vd_err *e) {
    if (!be || strcmp(be->name, "cpu") != 0 || n_layers < 0)
        return vd_errf(e, VD_EINTERNAL, "vd_backend_cpu_bias_rounding: not a CPU backend");
    cpu_ctx *c = be->ctx;
    bool *b = once && n_layers ? vd_malloc((size_t)n_layers * sizeof *b, e) : NULL;
    if (once && n_layers && !b) return VD_ENOMEM;
    if (b) memcpy(b, once, (size_t)n_layers * sizeof *b);
    vd_free(c->bias_once);
    c->bias_once = b;
    c->n_bias_once = b ? n_layers : 0;
    return VD_OK;
}

int vd_backend_cpu_create(vd_backend **out, vd_err *e) {
    *out = NULL;
    vd_backend *be = vd_calloc(1, sizeof *be, e);
    if (!be) return VD_ENOMEM;
    cpu_ctx *c = vd_calloc(1, sizeof *c, e);
    if (!c) {
        vd_free(be);
        return VD_ENOMEM;
    }
    /* Pre-size the copy queues so that steady-state training never grows them. */
    for (int s = 1; s < VD_N_STREAMS; s++) {
        c->q[s].e = vd_malloc(1024 * sizeof *c->q[s].e, e);
        if (!c->q[s].e) {
            be->ctx = c;
            cpu_destroy(be);
            return VD_ENOMEM;
        }
        c->q[s].cap = 1024;
    }
    c->ls = vd_loss_scale_init();
    *be = (vd_backend){
        .name = "cpu",
        .ctx = c,
        .destroy = cpu_destroy,
        .model = &vd_device_cpu,
        .pool_create = cpu_pool_create,
        .pool_destroy = cpu_pool_destroy,
        .host_alloc = cpu_host_alloc,
        .host_free = cpu_host_free,
        .events_create = cpu_events_create,
        .event_record = cpu_event_record,
        .stream_wait = cpu_stream_wait,
        .event_sync = cpu_event_sync,
        .synchronize = cpu_synchronize,
        .event_elapsed = cpu_event_elapsed,
        .copy_async = cpu_copy_async,
        .poison_async = cpu_poison_async,
        .zero_async = cpu_zero_async,
        .fill_synthetic = cpu_fill_synthetic,
        .synth_set = cpu_synth_set,
        .layer_setup = cpu_layer_setup,
        .layer_algos = cpu_layer_algos,
        .supports_op = cpu_supports_op,
        .layer_aux_bytes = vd_op_aux_bytes,
        .forward = cpu_forward,
        .backward = cpu_backward,
        .step_set = cpu_step_set,
        .ranges_create = cpu_ranges_create,
        .ranges_free = cpu_ranges_free,
        .update = cpu_update,
        .capture_begin = cpu_capture_begin,
        .capture_end = cpu_capture_end,
        .graph_launch = cpu_graph_launch,
        .graph_destroy = cpu_graph_destroy,
        .scale_set = cpu_scale_set,
        .scale_get = cpu_scale_get,
        .grad_check = cpu_grad_check,
        .update_scaled = cpu_update_scaled,
        .scale_update = cpu_scale_update,
    };
    *out = be;
    return VD_OK;
}
