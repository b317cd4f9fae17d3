/* summary.h — per-layer summary of a finalized net (vdnn-plan --summary). */
#ifndef VD_SUMMARY_H
#define VD_SUMMARY_H

#include <stdbool.h>
#include <stdio.h>
#include "util/util.h"
#include "net/net.h"

/* Write a summary of the finalized `net` at batch size `batch` (> 0) to f.
 *
 * Text (json == false): one row per layer — index, name, type, output shape
 * (N x C x H x W), trainable parameters, forward FLOPs and output activation
 * bytes at the batch — then totals (trainable parameters and their bytes,
 * buffers, FLOPs, activation bytes).
 *
 * JSON (json == true): one object
 *   {"net": NAME, "batch": N, "params": TRAINABLE (integer),
 *    "param_bytes": B, "buffers": N, "flops": F, "activation_bytes": B,
 *    "input": [N, C, H, W],
 *    "layers": [{"name", "type", "inputs": [names], "shape": [N, C, H, W],
 *                "params", "bytes", "flops"}, ...]}
 * where per-layer "params" counts trainable scalars, "bytes" is the output
 * activation at the batch (fp32), "flops" the forward FLOPs at the batch
 * (multiply-add = 2). Totals: "flops" and "activation_bytes" are sums over
 * layers. Integers are exact; FLOPs are written as integers too.
 *
 * Returns 0, VD_EUSAGE (batch <= 0), VD_EINTERNAL (net not finalized) or
 * VD_EIO (write error). */
int vd_summary_write(FILE *f, const vd_net *net, int batch, bool json, vd_err *e);

#endif
