/* group.h — internal to src/exec: an executor group's calls (group.c), which
 * exec.c's public functions forward to when their vd_exec is a group. */
#ifndef VD_EXEC_GROUP_H
#define VD_EXEC_GROUP_H

#include "exec/exec.h"

typedef struct vdx_group vdx_group;

/* A zeroed vd_exec whose only field is grp = g (exec.c). */
vd_exec *vdx_exec_wrap(vdx_group *g, vd_err *e);
/* The batch of a single executor's plan (exec.c). */
int vdx_exec_batch(const vd_exec *ex);
void vdx_group_free(vdx_group *g);
int vdx_group_size(const vdx_group *g);
int vdx_group_set_procs(vdx_group *g, int proc, int procs,
                        int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e),
                        vd_err *e);
int vdx_group_procs(const vdx_group *g, int *proc);
vd_exec *vdx_group_member(const vdx_group *g, int r);
bool vdx_group_stages(const vdx_group *g);
void vdx_group_next_ready(vdx_group *g);
void vdx_group_drop_staged(vdx_group *g);
int vdx_group_set_state(vdx_group *g, const float *params, const float *momentum,
                        int64_t sgd_steps, vd_err *e);
int vdx_group_init_params(vdx_group *g, uint64_t seed, vd_err *e);
int vdx_group_train_step(vdx_group *g, float lr, int64_t iter, float *loss, vd_err *e);
int vdx_group_eval_step(vdx_group *g, int *correct, float *loss, vd_err *e);

#endif
