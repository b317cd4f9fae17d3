/* member.h — internal to src/exec: one device's executor (member.c), the
 * part of a vd_exec (exec.c) that walks the plan on one backend. A member
 * knows nothing of ranks or groups; exec.c calls it on its rank's thread.
 * Each function is the single-device meaning of its vd_exec_* namesake in
 * exec.h. */
#ifndef VD_EXEC_MEMBER_H
#define VD_EXEC_MEMBER_H

#include "exec/exec.h"

typedef struct vdx_member vdx_member;

/* As vd_exec_create (exec.h), for one device. */
int vdx_member_create(vdx_member **out, const vd_net *net, const struct vd_plan *plan,
                      vd_backend *be, const vd_exec_opts *opts, vd_err *e);
/* Call on the thread that created it (its backend's device). */
void vdx_member_destroy(vdx_member **m);
/* The batch of its plan. */
int vdx_member_batch(const vdx_member *m);

int vdx_member_set_state(vdx_member *m, const float *params, const float *state,
                         int64_t sgd_steps, vd_err *e);
int vdx_member_init_params(vdx_member *m, uint64_t seed, vd_err *e);
int vdx_member_get_state(vdx_member *m, float *params, float *state, int64_t *sgd_steps,
                         vd_err *e);
bool vdx_member_loss_scale(const vdx_member *m, vd_loss_scale *s);
int vdx_member_set_loss_scale(vdx_member *m, const vd_loss_scale *s, vd_err *e);

void *vdx_member_input_x(vdx_member *m);
int32_t *vdx_member_input_labels(vdx_member *m);
vd_dtype vdx_member_input_dtype(const vdx_member *m);
bool vdx_member_input_nhwc(const vdx_member *m);
bool vdx_member_stages(const vdx_member *m);
void *vdx_member_next_x(vdx_member *m);
int32_t *vdx_member_next_labels(vdx_member *m);
void vdx_member_next_ready(vdx_member *m);
/* fn(ctx) is called where vd_exec_stage_hook is (NULL: none). */
void vdx_member_set_stage_hook(vdx_member *m, int (*fn)(void *ctx), void *ctx);
int vdx_member_drain(vdx_member *m, vd_err *e);
void vdx_member_drop_staged(vdx_member *m);
bool vdx_member_can_synth(const vdx_member *m);
/* Whether m's training steps are captured (graph_eligible). */
bool vdx_member_captures(const vdx_member *m);
vd_synth_batch *vdx_member_input_synth(vdx_member *m);
vd_synth_batch *vdx_member_next_synth(vdx_member *m);

/* *correct: the step's top-1 hits (vd_exec_train_correct). */
int vdx_member_train_step(vdx_member *m, float lr, int64_t iter, float *loss, int *correct,
                          vd_err *e);
int vdx_member_eval_step(vdx_member *m, vd_eval_counts *out, vd_err *e);
/* The loss layer's output of the latest evaluation step as floats into
 * probs[batch * classes]; returns that count. */
size_t vdx_member_eval_probs(const vdx_member *m, float *probs);

void vdx_member_get_stats(const vdx_member *m, vd_exec_stats *st);
int vdx_member_step_times(const vdx_member *m, const double **end_ms);
int vdx_member_copy_times(const vdx_member *m, const vd_exec_copy_time **ct);

#endif
