/* builder.h — the state of one plan build (build.c) and the steps that work
 * on it, one file per concern. Not API: only src/plan/ includes it.
 *
 *   tensors.c   tensors, gradient aliasing through adds and ReLUs, liveness
 *   disp.c      offload and recompute decisions
 *   prefetch.c  prefetch issue steps, fitting the live bytes to a cap
 *   actions.c   intervals, events, per-step action lists, statistics
 *   stage.c     input staging (the next batch's copy)
 *   build.c     one build from these steps (vdp_build_fixed) */
#ifndef VD_PLAN_BUILDER_H
#define VD_PLAN_BUILDER_H

#include <string.h>
#include "plan/plan_internal.h"

typedef struct bld {
    const vd_net *net;
    const vd_profile *prof;
    const vd_plan_opts *opts;
    const vd_plan *pin; /* the training plan whose persistent regions an evaluation
                           plan keeps (vdp_build_fixed's pin), or NULL */
    vd_plan *p;
    int L;             /* units (vd_plan.n_units): the builder's steps are the units' */
    int NL;            /* net layers */
    int *run_a, *run_b; /* [NL] the first and last layer of each layer's run (itself
                           when it is not split) */
    int variant;       /* see build_variants (build.c) */
    int cap_t, cap_iv;
    int *act_of;       /* [L] ACT tensor each unit writes its output to */
    int *dact_of;      /* [L] DACT tensor of each unit's output gradient (-1) */
    int *lact;         /* [NL] the whole-batch ACT tensor of each layer's output (-1:
                          only its chunks exist, inside a run) */
    int *ldact;        /* [NL] the same of its gradient */
    int *bn_fold;      /* [NL] the batch norm + add fusion's pairs (vd_plan_opts.fuse_bn_add,
                          training): an add's batch norm (vd_op_bn_folded), a batch
                          norm's add (vd_op_bn_folder), else -1 (vdp_build_tensors) */
    int *add_relu;     /* [NL] the batch norm + add + ReLU backward pairs (training): a
                          batch norm's ReLU (vd_op_add_relu), else -1 (vdp_build_tensors) */
    int *fwd_write;    /* [n_tensors cap] last forward step writing the tensor */
    int *first_touch;  /* [cap_t] min step */
    int *last_touch;   /* [cap_t] max step */
    int *extra;        /* scratch: in-place flags [L] (vdp_build_tensors), then
                          pf_item[cap_t] */
    int *bucket_head;  /* [6 * (n_steps + 1)] build_actions */
    int *bucket_next;  /* [5 * max(cap_iv, cap_t)] */
    const vd_disp *disp; /* opts->disp ([L + 1]) or NULL */
    int *rc_ops;       /* [L] build_actions: the next layer recomputed at the same step */
    bool alias;        /* adds and in-place ReLUs may share their dy tensor with
                          their inputs' gradients (alias_grads; build_fixed) */
    uint64_t *mem;     /* [n_steps + 1] live bytes per step (scratch) */
    double *t_start;   /* [n_steps + 1] stall-free start of each step */
    double *d2h;       /* [cap_t] completion of each tensor's offload */
    bool *pinned;      /* [cap_iv] intervals whose offset the placement keeps */
    int *fit_steps;    /* [5 * cap_t] vdp_fit_memory's scratch (vdp_build_actions' too) */
    const char **tname; /* [2 * cap_t] each tensor's name and suffix (NULL: none), copied
                           into the plan by vdp_name_tensors */
    double screen_s;   /* vdp_build_screened's screen (0: none) */
    double *cost;      /* NULL, or where the build adds up its work (vdp_build_screened) */
    double *effort;    /* NULL, or the same with the placement's own count (vdp_build_screened) */
    double *early;     /* NULL, or where the build adds up its cost up to each variant's
                          first screen replay (build_fixed's screen.early) */
    double screen_lb;  /* fit_and_place: the replay that dropped this variant */
    double replay0;    /* fit_and_place: the screen's first replay (INFINITY: none) */
    bool stage_quick;  /* vdp_add_staging: no search of the latest issue step
                          (vdp_build_screened's quick_stage) */
    bool unplaced_over;  /* a variant whose live bytes exceed the budget is not placed
                            (vdp_build_unplaced_over) */
    bool unplaced;       /* fit_and_place: this variant was not placed */
    uint64_t unplaced_live; /* then the most live bytes at a step (plan_top's top) */
    bool unfinished;     /* build_suffix (defer): stopped at its top, not replayed */
    bool fit_only;       /* vdp_build_fits: whether it fits is all that is read */
    void *scratch;     /* the one block every array above is in (bld_init) */
    struct tc_ent *tce;  /* the search's tensors this build's came from (build_tensors), or
                            NULL; its names are this build's while its gen is tc_gen */
    unsigned tc_gen;
} bld;

/* scratch of vdp_schedule_prefetch (in bld.extra): tensor, consumer step */
typedef struct pf_item { int t; int c; } pf_item;

static inline int vdp_bwd_step(int L, int unit) { return 2 * L - 1 - unit; }

/* The net layer of unit u. */
static inline const vd_layer *vdp_ul(const bld *b, int u) {
    return &b->net->layers[b->p->layers[u].layer];
}


/* snprintf(dst, n, "%s", src) without the formatted print (n > 0): every
 * build copies the net's name, and each finished one its units' option
 * labels; the formatting was a tenth of an auto search's time. */
static inline void vdp_copy_str(char *dst, size_t n, const char *src) {
    size_t k = strnlen(src, n - 1);
    memcpy(dst, src, k);
    dst[k] = '\0';
}

/* Count work w toward the build's cost (vdp_build_screened's *cost). */
static inline void vdp_cost(bld *b, double w) {
    if (b->cost) *b->cost += w;
    if (b->effort) *b->effort += w;
}

/* ---- tensors.c ---------------------------------------------------------- */

/* Append a tensor (no intervals, no touches yet); returns its index. */
int vdp_add_tensor(bld *b, vd_tensor_kind kind, int layer, uint64_t bytes,
                   const char *name, const char *suffix);
/* Write the names of tensors first.. (vdp_add_tensor only notes them)
 * and, when first is 0, the units' option labels (vd_plan_layer.algo_label,
 * algo_bwd_label): most builds of the auto search are dropped unread. */
void vdp_name_tensors(bld *b, int first);
/* Tensor t is resident at step s (touch), read at s (rd: also its forward /
 * backward reader steps). t < 0: nothing. */
void vdp_touch(bld *b, int t, int s);
void vdp_rd(bld *b, int t, int s);
/* Pool bytes of a tensor: 256-aligned, at least 256. */
static inline uint64_t vdp_iv_size(uint64_t bytes) {
    uint64_t a = VD_ALIGN_UP(bytes, (uint64_t)VD_PLAN_ALIGN);
    return a ? a : VD_PLAN_ALIGN;
}
/* Append an interval [first, last] of tensor t; returns its index. Inline:
 * every build writes its intervals several times (a call each was a tenth
 * of an auto search). */
static inline int vdp_add_interval(bld *b, int t, int first, int last, vd_fill fill, int need) {
    vd_plan *p = b->p;
    int k = p->n_intervals++;
    vd_interval *iv = &p->intervals[k];
    vd_tensor *T = &p->tensors[t];
    memset(iv, 0, sizeof *iv);
    iv->tensor = t;
    iv->first = first;
    iv->last = last;
    iv->bytes = vdp_iv_size(T->bytes);
    iv->fill = fill;
    iv->need_step = need;
    iv->ev_h2d = -1;
    T->iv[T->n_iv++] = k;
    return k;
}
/* Create tensors and liveness (no decisions yet) with options algos[2L]. */
int vdp_build_tensors(bld *b, const int *algos, vd_err *e);
/* Whether unit u's backward runs in a fusion pair its build formed
 * (vdp_build_tensors): a max pool that takes its ReLU's backward
 * (takes_relu), that ReLU, a batch norm that takes the backward of the ReLU
 * after its add (takes_add_relu), that ReLU, a conv whose bias gradient
 * the ReLU after it reduces (that ReLU's db_unit; the profile times the
 * ReLU reducing it either way). */
bool vdp_unit_paired(const vd_plan *p, int u);

/* ---- disp.c ------------------------------------------------------------- */

/* Recompute decisions from b->disp (writers get rc_step and workspace). */
void vdp_decide_recompute(bld *b);
/* Offload decisions under offload_pol and b->disp (release right after the
 * last forward use, prefetch at the first backward use). Returns whether
 * any tensor is offloaded. */
bool vdp_decide_offload(bld *b, vd_policy offload_pol);

/* ---- prefetch.c --------------------------------------------------------- */

/* Choose release and prefetch steps of the offloaded tensors. t_start:
 * stall-free compute start time per step; d2h_done: offload completion per
 * tensor. */
void vdp_schedule_prefetch(bld *b, const double *t_start, const double *d2h_done);
/* Make every step's live bytes fit cap (releases earlier, prefetches later),
 * then rebuild the intervals; mem: scratch [n_steps + 1]. Returns true if
 * every step fits. */
bool vdp_fit_memory(bld *b, uint64_t cap, uint64_t *mem);

/* ---- actions.c ---------------------------------------------------------- */

/* Intervals from the decisions recorded in the tensors (clears old ones). */
void vdp_build_intervals(bld *b);
/* Live bytes per step from the intervals. */
void vdp_mem_per_step(const vd_plan *p, uint64_t *mem);
/* Events and per-step action lists. */
void vdp_build_actions(bld *b);
/* Memory and copy statistics after placement. */
void vdp_finish_stats(vd_plan *p);

/* ---- stage.c ------------------------------------------------------------ */

/* Input staging for a feasible, placed and simulated training plan; the
 * region must fit below limit. Sets p->stage. */
int vdp_add_staging(bld *b, uint64_t limit, vd_err *e);

#endif
