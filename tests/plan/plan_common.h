/* plan_common.h — helpers shared by the plan / exec test binaries: the CPU
 * backend and its profile, minimum budgets, analytic profiles, plan options,
 * shipped specs, the gradient flow check, and running vdnn-plan through the
 * shell. Every helper fails
 * the current test (ck_assert) on a setup error instead of returning one. */
#ifndef VD_PLAN_COMMON_H
#define VD_PLAN_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"
#include "net/net.h"
#include "plan/plan.h"

/* The CPU backend set up for net at batch (net->train.math, training), and its profile
 * timed with device dev's model (NULL: cpu; the algorithm options are the
 * backend's either way). The caller frees prof and destroys the backend. */
vd_backend *cpu_for_dev(const vd_net *net, int batch, const vd_device_params *dev, vd_profile *prof);

/* vd_plan_min_budget of net under o (o->batch) with the CPU backend's
 * profile timed with dev's model (NULL: cpu). */
uint64_t cpu_min_budget(const vd_net *net, const vd_plan_opts *o, const vd_device_params *dev);

/* net's analytic profile at batch on device dev into *prof. */
void analytic_profile(const vd_net *net, int batch, const vd_device_params *dev, vd_profile *prof);

/* vd_plan_opts_init's options with batch and policy set. */
vd_plan_opts plan_opts(int batch, vd_policy policy);

/* The shipped spec $VD_SRCDIR/nets/<file> into *net (initialised here),
 * trained at batch, finalized. */
void load_shipped_net(vd_net *net, const char *file, int batch);

/* The gradient flow of training plan p (ck_assert on a failure): every
 * layer's backward reads, as dy, exactly the gradient it would read with one
 * gradient tensor per layer output and today's order of accumulation, when
 * an add may share its dy tensor with the gradients of its inputs and an
 * in-place ReLU with its input's (dx == dy). Replays
 * the backward steps' writes (dx, dx_beta) and reads (dy) on the plan's
 * tensors symbolically, values as expressions: an add passes its dy, any
 * other layer's dx[k] is a term of its own, beta 1 adds (in order). Also: no
 * layer but an in-place ReLU (beta 0) writes the tensor it reads as dy, a
 * beta-1 write finds its tensor
 * written, only an add leaves an input's gradient unwritten (dx -1), but
 * where nothing needs it (the net input, a no_grad layer's output: --freeze;
 * a no_grad layer reads no dy either). Returns
 * the number of such add inputs (0 for a forward-only plan). */
int check_grad_flow(const vd_plan *p, const vd_net *net);

/* Runs cmd through the shell (popen); its stdout, truncated to n - 1 bytes,
 * goes to out (NUL-terminated). Returns the exit status, -1 unless it exited
 * normally. The command's own redirections apply (2>&1, >/dev/full, ...). */
int run_cmd(const char *cmd, char *out, size_t n);

#endif
