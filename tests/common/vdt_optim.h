/* vdt_optim.h — the optimizer reference of tools/optim_reference.py
 * (tests/train/data/adamw_reference.json: PyTorch's AdamW and Nesterov SGD
 * in float64 on fixed inputs), read and fed through a backend's update:
 * tests/train/test_optim.c on the CPU backend, tests/cuda/test_cuda_ops.c
 * on the CUDA backend. */
#ifndef VD_TESTS_COMMON_VDT_OPTIM_H
#define VD_TESTS_COMMON_VDT_OPTIM_H

#include <stdint.h>
#include "backend/backend.h"

enum { VDT_OPTIM_MAX_STEPS = 64, VDT_OPTIM_MAX_TENSORS = 8 };

typedef struct vdt_optim_tensor {
    int n;                      /* values */
    float *init;                /* [n], float32 values */
    float *grads;               /* [steps][n], float32 values */
    double *params;             /* [steps][n]: PyTorch's values after each step */
} vdt_optim_tensor;

typedef struct vdt_optim_case {
    char name[64];
    vd_optim_step o;            /* the optimizer and its settings (lr and t set per step) */
    int steps;
    float lr[VDT_OPTIM_MAX_STEPS];   /* each step's learning rate */
    int n_tensors;
    vdt_optim_tensor t[VDT_OPTIM_MAX_TENSORS];
} vdt_optim_case;

typedef struct vdt_optim_ref {
    char generator[256];        /* what made the file: torch's version, or the transcription */
    int n_cases;
    vdt_optim_case *cases;      /* [n_cases] */
} vdt_optim_ref;

/* Read $VD_SRCDIR/tests/train/data/adamw_reference.json into r (fails the
 * test on a missing or malformed file: every field checked). */
void vdt_optim_ref_load(vdt_optim_ref *r);
void vdt_optim_ref_free(vdt_optim_ref *r);

/* Run case c through be->update (device memory: the tensors one after
 * another in a pool, each updated as its own range, as the executor
 * updates the net's trainable ranges; the optimizer's state poisoned before
 * the first step, which must not read it) and fail the test unless every
 * value after every step is within relative VDT_OPTIM_TOL of PyTorch's
 * (tests/train/test_optim.c says why that holds, and asserts its premises
 * on the data: every reference value of magnitude in [1.5, 2), no step
 * changing one by more than VDT_OPTIM_MAX_STEP). Returns the largest
 * relative error after the last step. */
#define VDT_OPTIM_TOL 1e-6
#define VDT_OPTIM_MAX_STEP 2.5e-3
double vdt_optim_ref_check(const vdt_optim_case *c, vd_backend *be);

#endif
