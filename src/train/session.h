/* session.h — the run setup shared by vdnn-train and vdnn-bench.
 *
 * A session is: a backend (cpu | cuda | auto), the layers set up on it for
 * one net and batch (math mode, determinism), the profile the plans are made
 * from, and the driver's view of the process's device memory. Plans and
 * executors are made from it, one at a time or one after another (vdnn-bench
 * makes one per sweep point from the same session and profile).
 *
 *     vd_session s;
 *     vd_session_opts so;  vd_session_opts_init(&so);  so.backend = "auto"; ...
 *     vd_session_open(&s, net, batch, &so, &e);        // backend, layer_setup, profile
 *     vd_plan_opts po;     vd_plan_opts_init(&po);
 *     po.policy = ...; po.budget = b;  // or vd_session_default_budget(&s, &po)
 *     vd_plan plan;        vd_session_plan(&s, &po, &plan, &e);
 *     vd_exec *ex;         vd_session_exec(&s, &plan, false, &ex, &e);
 *     ... train ...        vd_session_mem_sample(&s);  // now and then
 *     vd_session_mem_report r; vd_session_mem_check(&s, plan.budget, &r);
 *     vd_exec_destroy(&ex); vd_plan_free(&plan); vd_session_close(&s);
 *
 * Device memory (CUDA only; from cudaMemGetInfo, so "used" = total - free
 * counts everything on the device, other processes' memory included on a
 * shared GPU): the session samples it after the backend exists (CUDA context
 * + cuDNN/cuBLAS handles), after the layers are set up and the profile is
 * measured, inside each vd_session_exec once the executor's pinned host
 * buffers exist and before its pool is allocated (the "overhead":
 * everything outside the pool; pinning host memory costs the driver device
 * memory for its mappings, about 2 MiB per GiB pinned, so the overhead is
 * per executor and grows with its host store), right after the executor is
 * created, and whenever the caller asks. The process must stay within
 * budget + overhead; vd_session_mem_check says whether it did. */
#ifndef VD_SESSION_H
#define VD_SESSION_H

#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"
#include "net/net.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "exec/exec.h"

/* Safety margin kept free below the driver's free memory when the budget
 * defaults to "all the device can give": room for what CUDA, cuDNN and
 * cuBLAS may still allocate lazily, and for the pool's rounding to the
 * allocation granularity. */
#define VD_SESSION_MARGIN ((uint64_t)512 << 20)
/* cudaMalloc rounds every allocation up to this granularity (2 MiB pages);
 * the memory check allows the pool that much. */
#define VD_SESSION_GRANULE ((uint64_t)2 << 20)
/* The most the driver's page tables for a pool of b bytes may add beyond it
 * (1/4096 of the pool, rounded up to the granularity): measured on an H200,
 * 0 for pools up to 16 GiB and 2 MiB for a 138 GiB pool. */
#define VD_SESSION_POOL_TABLES(b) VD_ALIGN_UP((uint64_t)(b) / 4096u, VD_SESSION_GRANULE)

typedef struct vd_session_opts {
    const char *backend;        /* "cpu" | "cuda" | "auto" (NULL = "auto": cuda if
                                   this build has it and a device is present) */
    int device;                 /* CUDA device index */
    vd_math math;               /* passed to layer_setup (and so to the profile) */
    bool deterministic;         /* passed to layer_setup */
    const char *profile_path;   /* non-NULL: load this profile (must match net/batch) */
    bool analytic;              /* no profile_path: analytic profile from the
                                   backend's algorithm options even on CUDA
                                   (default: measured on CUDA, analytic on cpu) */
    const char *profile_out;    /* non-NULL: save the profile used to this file */
    vd_backend_opts backend_opts; /* the backend's options (CUDA: --conv-*, --no-fuse,
                                     --sync-debug) */
    bool step_times;            /* measure when each training step ends on the compute
                                   stream (vd_exec_opts.step_times; vdnn-train --step-times) */
    vd_graph_mode graph;        /* capture the training iteration and replay it
                                   (vd_exec_opts.graph; --graph, VD_GRAPH_AUTO the
                                   default of vd_session_opts_init); off with mem_trace */
    bool mem_trace;             /* CUDA, debugging: after every step of every pass,
                                   synchronize and sample device memory; growth is
                                   recorded in vd_session_memory.growth (slows
                                   training: a device-wide sync per step) */
    /* Data parallel (train/dp.h): this rank's handle on the all-reduce (NULL:
     * a single rank), the gradient bucket size (0: VD_DP_BUCKET_BYTES) and
     * the rank; passed to every executor of the session (vd_exec_opts). */
    vd_allreduce *allreduce;
    uint64_t bucket_bytes;
    int rank;
    /* A line to show before a long phase ("measuring the profile on the
     * device..."); NULL: none. */
    void (*note)(void *ctx, const char *msg);
    void *note_ctx;
} vd_session_opts;
void vd_session_opts_init(vd_session_opts *o);

#define VD_SESSION_MAX_GROWTH 8   /* growth records kept by the memory trace */

typedef struct vd_session_memory {
    bool known;                 /* the driver was asked (CUDA backend) */
    uint64_t total;             /* device memory, bytes */
    uint64_t used_backend;      /* total - free after the backend was created:
                                   CUDA context + cuDNN/cuBLAS handles */
    uint64_t used_setup;        /* after layer_setup and profiling, before any
                                   executor (no pinned host buffers, no pool) */
    uint64_t free_setup;        /* free bytes at that point */
    uint64_t used_pinned;       /* in the latest vd_session_exec, after the pinned
                                   host buffers, before the pool: the overhead the
                                   budget check uses; 0 = not sampled (no executor
                                   yet, or its creation failed) */
    uint64_t used_created;      /* right after the latest vd_session_exec created
                                   the executor (pool and pinned host buffers
                                   exist, no iteration has run); 0 = not sampled */
    uint64_t pool_created;      /* the pool bytes of that executor (plan budget) */
    uint64_t used_last;         /* at the latest sample */
    uint64_t used_max;          /* max over the samples since open / the last reset */
    int n_samples;              /* samples taken since open / the last reset */
    /* mem_trace: the steps after which the process's device memory grew
     * (the first VD_SESSION_MAX_GROWTH of them), counted from the executor's
     * creation; n_growth counts them all */
    struct vd_session_growth {
        int64_t pass;           /* training / evaluation pass of the executor, from 0 */
        bool eval;              /* an evaluation pass */
        int step;               /* the plan's step (n_steps: SGD / end of the pass) */
        uint64_t bytes;         /* growth since the previous sample */
        uint64_t used;          /* the process's device memory after it */
    } growth[VD_SESSION_MAX_GROWTH];
    int n_growth;
    uint64_t trace_last;        /* the previous trace sample */
    int64_t trace_train, trace_eval;   /* passes started */
    /* Kernel code loaded at first use. With CUDA's lazy module loading (the
     * default since CUDA 12.2; CUDA_MODULE_LOADING=EAGER turns it off) the
     * driver loads a kernel's code into device memory the first time it is
     * launched, in 2 MiB pieces of the context; a kernel first run in the
     * training loop (all of them when the profile is loaded from a file, not
     * measured) grows the context there. The session samples the device at
     * the end of every pass of the latest executor; the growth during its
     * first training pass and its first evaluation pass is counted as
     * context (first_use) when loading is lazy, never later growth. */
    bool lazy_loading;          /* CUDA_MODULE_LOADING is not EAGER: CUDA's own variable,
                                   read (for this report only) in vd_session_open, the one
                                   place vdnn reads the environment; documented in
                                   vdnn-train(1) ENVIRONMENT */
    uint64_t first_use;         /* growth during the first pass of each kind */
    /* The captured iterations' graphs (vd_exec_opts.graph): the driver keeps
     * each graph's executable in device memory outside the pool; the growth
     * during a training pass that captured one (vd_exec_opts.after_step's
     * captured) counts as context. */
    uint64_t graph_bytes;
    uint64_t pool_growth;       /* growth beyond the (rounded) pool when the
                                   latest executor created it: the driver's page
                                   tables for it (pool_tables allows at most
                                   pool / 4096) */
    uint64_t pass_mark;         /* sample at the end of the previous pass */
    bool seen_train, seen_eval; /* a pass of that kind has ended */
    int train_steps, eval_steps;/* the latest executor's plans' step counts */
} vd_session_memory;

typedef struct vd_session {
    const vd_net *net;          /* borrowed; must outlive the session */
    int batch;
    vd_backend *be;             /* owned */
    const char *backend_why;    /* why "auto" chose be (vd_backend_resolve); NULL when
                                   the backend was named */
    vd_math math;
    bool deterministic;
    vd_profile prof;            /* owned */
    char prof_how[32];          /* "loaded" | "measured" | "analytic" */
    int prof_raised;            /* loaded: options whose workspace was raised to this
                                   setup's (see vd_session_open) */
    uint64_t prof_raised_max;   /* the largest of those raises, bytes */
    int prof_dropped;           /* loaded: options this setup does not offer (its cuDNN
                                   tuning kept fewer), dropped from the profile */
    double prof_s;              /* seconds spent loading/measuring the profile */
    vd_session_memory mem;
    bool mem_trace;             /* from vd_session_opts */
    bool step_times;            /* from vd_session_opts */
    vd_graph_mode graph;        /* from vd_session_opts */
    vd_allreduce *allreduce;    /* from vd_session_opts (data parallel) */
    uint64_t bucket_bytes;
    int rank;
} vd_session;

/* Open a session for net (finalized, vd_schedule_inplace applied) at batch:
 * create the backend, run layer_setup(net, batch, o->math, o->deterministic),
 * get the profile (o->profile_path: load, each option's workspace raised to
 * this setup's where its engine needs more, counted in prof_raised; else
 * the backend's profile_measure unless o->analytic or it has none; else
 * vd_profile_backend with the backend's device model), save it to
 * o->profile_out, and
 * sample device memory. o may be NULL (defaults). On failure *s holds
 * nothing (vd_session_close on it is harmless). Errors: the backend's
 * (VD_EUNSUPPORTED for cuda in a CPU-only build, VD_EDEVICE), the
 * profile's (VD_EIO, VD_EDATA, VD_EDEVICE), VD_EUSAGE for a bad backend name. */
int vd_session_open(vd_session *s, const vd_net *net, int batch, const vd_session_opts *o,
                    vd_err *e);
/* A note on a loaded profile's options that this setup changed
 * (prof_raised, prof_dropped) into buf; false (buf untouched) when none. */
bool vd_session_profile_note(const vd_session *s, char *buf, size_t n);
/* Free the profile and destroy the backend. Executors and plans made from
 * the session must be destroyed first. Safe on a zeroed or closed session. */
void vd_session_close(vd_session *s);

/* The largest budget the device can give: CUDA: free memory after setup
 * minus VD_SESSION_MARGIN (0 if less); cpu: UINT64_MAX (no limit). */
uint64_t vd_session_max_budget(const vd_session *s);
/* The budget when the user gave none, into po: a device's all it can give
 * (vd_session_max_budget), else 0 (the plan's own need), and either only
 * as a cap: po->pool_to_need, the pool is what the plan needs. */
void vd_session_default_budget(const vd_session *s, vd_plan_opts *po);

/* Build the plan for po (po->batch is set to the session's batch; every
 * other field is the caller's, so new plan options flow through). Returns
 * what vd_plan_build returns; in addition VD_EBUDGET when the pool is
 * larger than vd_session_max_budget (message says so): checked before
 * planning when po->budget is given (no long auto search for a budget the
 * device cannot give), and after it for the plan's own need (budget 0). *plan is a
 * valid plan the caller frees with vd_plan_free when the return is 0 or
 * VD_EBUDGET, and zeroed otherwise. */
int vd_session_plan(vd_session *s, vd_plan_opts *po, vd_plan *plan, vd_err *e);

/* Create the executor for plan (layers are already set up: layers_ready).
 * Samples device memory after its pinned host buffers exist and before its
 * pool is allocated (mem.used_pinned: this executor's overhead), and after
 * it is created (mem.used_created); both are reset first, so with several
 * executors one after another they describe the latest. plan must outlive
 * *ex. */
int vd_session_exec(vd_session *s, const vd_plan *plan, bool poison, vd_exec **ex, vd_err *e);

/* Ask the driver for the process's device memory now (CUDA; no-op on cpu);
 * updates used_last / used_max / n_samples. Never fails: a driver error
 * leaves the numbers as they were. Does not synchronize the device. */
void vd_session_mem_sample(vd_session *s);
/* Start a new max: used_max = a fresh sample, n_samples = 1 (vdnn-bench,
 * per sweep point). */
void vd_session_mem_reset(vd_session *s);

typedef struct vd_session_mem_report {
    bool known;                 /* CUDA: the fields below are meaningful */
    uint64_t budget;            /* the pool's bytes */
    uint64_t overhead;          /* what lives outside the pool: used_pinned (context,
                                   handles, setup and the executor's pinned host
                                   buffers) when sampled, else used_setup */
    uint64_t pool_tables;       /* the driver's page tables for the pool: the growth
                                   beyond the pool at its creation, at most
                                   VD_SESSION_POOL_TABLES(budget) */
    uint64_t first_use;         /* kernel code loaded at first use (mem.first_use) */
    uint64_t graph_bytes;       /* the captured iterations' graphs (mem.graph_bytes) */
    uint64_t used_max;          /* max observed process usage */
    uint64_t used_end;          /* usage at the last sample */
    uint64_t limit;             /* round_up(budget, VD_SESSION_GRANULE) + overhead
                                   + pool_tables + first_use + graph_bytes */
    bool within;                /* used_max <= limit */
    uint64_t excess;            /* used_max - limit when !within, else 0 */
    int n_samples;
} vd_session_mem_report;
/* Compare the observed usage with budget + overhead (takes one more sample
 * first). On cpu, r->known is false and r->within true. */
void vd_session_mem_check(vd_session *s, uint64_t budget, vd_session_mem_report *r);

#endif
