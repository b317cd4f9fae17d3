/* plan.h — schedule, liveness, profile, policies, placement, simulator.
 *
 * The plan is a value: vdnn-plan prints exactly the object vdnn-train runs.
 *
 * Steps: forward of layers 0..L-1 (steps 0..L-1), backward of layers L-1..0
 * (steps L..2L-1), then the SGD update (step 2L). Every device tensor has one
 * or two device intervals [first_step, last_step] (two when it is offloaded
 * during forward and prefetched back for backward), an offset into the pool
 * for each interval, and a size. Memory in use at step s is the sum of sizes
 * of intervals containing s; the pool high-water mark is max(offset + size). */
#ifndef VD_PLAN_H
#define VD_PLAN_H

#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"
#include "net/net.h"

typedef enum { VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_CONV, VD_POLICY_DYN,
               VD_POLICY_COUNT } vd_policy;
const char *vd_policy_name(vd_policy p);
int vd_policy_parse(const char *s, vd_policy *out, vd_err *e);

/* ---- profile ------------------------------------------------------------ */
typedef struct vd_profile_algo {
    char label[32];
    double fwd_s, bwd_s;        /* seconds at the profile's batch */
    uint64_t workspace;         /* bytes */
    int fwd_algo, bwd_data_algo, bwd_filter_algo; /* backend ids (-1 analytic) */
} vd_profile_algo;

typedef struct vd_profile_layer {
    char name[VD_NAME_MAX];
    int n_algos;
    vd_profile_algo algos[8];   /* [0] = fastest; conv may have several */
} vd_profile_layer;

typedef struct vd_device_params {
    char name[64];              /* "h200", "cpu" */
    double peak_flops;          /* FLOP/s */
    double mem_bw;              /* device memory bytes/s */
    double d2h_bw, h2d_bw, both_bw; /* bytes/s; both = sum when concurrent */
    double launch_s;            /* per-op overhead */
} vd_device_params;
extern const vd_device_params vd_device_h200, vd_device_cpu;

typedef struct vd_profile {
    char source[32];            /* "analytic:h200" | "measured:cuda" | file */
    char net[VD_NAME_MAX];
    int batch;
    vd_device_params dev;
    double sgd_s;               /* update step time */
    int n_layers;
    vd_profile_layer *layers;   /* [n_layers] */
} vd_profile;

int vd_profile_analytic(const vd_net *net, int batch, const vd_device_params *dev,
                        vd_profile *out, vd_err *e);
int vd_profile_load(const char *path, const vd_net *net, int batch, vd_profile *out, vd_err *e);
int vd_profile_save(const char *path, const vd_profile *p, vd_err *e);
void vd_profile_free(vd_profile *p);

#endif
