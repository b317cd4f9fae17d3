/* search.h — the auto policy's search as an object (auto.c and the
 * search_*.c files; docs/planner.md says how the search works). Not API. */
#ifndef VD_PLAN_SEARCH_H
#define VD_PLAN_SEARCH_H

#include "plan/plan_internal.h"

/* What one call of vdp_build_auto carries through all its searches: the
 * progress they report as one, how deep it is nested and the effort it may
 * spend. A nested search (the room, the gradient array, a second opinion)
 * is a child (vdp_search_child) whose progress goes back to its parent
 * (vdp_search_join). */
typedef struct vdp_search {
    int evals;          /* plans built by the searches finished so far */
    double best_s;      /* their fastest fitting plan's iteration (0: none) */
    int update_depth;   /* > 0: a search with the room (the update in the backward pass) */
    int array_phase;    /* > 0: the search with the gradient array, before the update's */
    int jitter_depth;   /* > 0: a second opinion's search, on a jittered profile */
    double cap;         /* the effort cap of the whole search (0: AUTO_EFFORT_CAP) */
} vdp_search;

/* The effort cap s may spend. */
static inline double vdp_search_cap(const vdp_search *s) {
    return s->cap > 0 ? s->cap : AUTO_EFFORT_CAP;
}

/* A child of s: the same progress so far, the same depths and cap (the
 * caller then sets its own). */
static inline vdp_search vdp_search_child(const vdp_search *s) { return *s; }

/* Take back a finished child's progress into its parent s. */
static inline void vdp_search_join(vdp_search *s, const vdp_search *child) {
    s->evals = child->evals;
    s->best_s = child->best_s;
}

#endif
