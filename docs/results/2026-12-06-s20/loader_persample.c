/* loader_persample.c — thread CPU time of one folder sample (vd_data_sample,
 * float CHW) on one thread: the best of PASSES passes over the first N
 * images, so that other processes on a shared machine (which raise
 * vdnn-loader-bench's wall and process-CPU figures) barely move it.
 * Linked with a tree's libvdnn.a (loader.md has the command).
 *
 *   loader_persample NET.yaml folder:DIR [--augment] [--passes P] [--n N]
 * prints: ms/sample best and median of the passes, and a checksum of the
 * first pass's samples (to compare two trees' pixels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "util/util.h"
#include "net/net.h"
#include "spec/spec.h"
#include "data/data.h"

static double now_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s NET.yaml folder:DIR [--augment] [--passes P] [--n N]\n", argv[0]); return 2; }
    bool augment = false;
    int passes = 20, n = 64;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--augment")) augment = true;
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
    }
    vd_err e = { 0 };
    vd_net net;
    vd_net_init(&net);
    vd_dataset *ds = NULL;
    if (vd_spec_load(argv[1], &net, &e) || vd_data_open(argv[2], &net, 32, 1, augment, &ds, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const vd_data_info *di = vd_data_get_info(ds);
    if (n > di->n[VD_SPLIT_TRAIN]) n = (int)di->n[VD_SPLIT_TRAIN];
    float *x = malloc(sizeof(float) * (size_t)di->c * di->h * di->w);
    double *t = malloc(sizeof(double) * (size_t)passes), sum = 0;
    for (int p = -1; p < passes; p++) {     /* pass -1: warm-up (page cache, scratch) */
        double t0 = now_cpu();
        for (int i = 0; i < n; i++) {
            int32_t y;
            /* the key as a loader would give it: a new one per sample and pass */
            if (vd_data_sample(ds, VD_SPLIT_TRAIN, i, (uint64_t)(p + 1) * 100003u + (uint64_t)i,
                               x, &y, &e)) {
                fprintf(stderr, "%s\n", e.msg);
                return 1;
            }
        }
        if (p >= 0) t[p] = (now_cpu() - t0) / n * 1e3;
        else
            for (int i = 0; i < n; i++) {   /* a checksum of the warm-up pass's samples */
                int32_t y;
                vd_data_sample(ds, VD_SPLIT_TRAIN, i, (uint64_t)i, x, &y, &e);
                for (size_t k = 0; k < (size_t)di->c * di->h * di->w; k++)
                    sum += x[k] * (double)(k % 7 + 1);
            }
    }
    qsort(t, (size_t)passes, sizeof *t, cmp_d);
    printf("%.3f %.3f sum %.6e\n", t[0], t[passes / 2], sum);
    free(x);
    free(t);
    vd_data_close(&ds);
    vd_net_free(&net);
    return 0;
}
