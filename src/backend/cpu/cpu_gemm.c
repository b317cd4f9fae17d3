/* cpu_gemm.c — the one matrix product of the CPU backend (conv-as-gemm, fc).
 *
 * With VD_HAVE_BLAS it calls OpenBLAS's cblas_sgemm. For a fixed OpenBLAS
 * thread count (OPENBLAS_NUM_THREADS, default: the number of cores) and
 * machine, results are identical run to run: OpenBLAS partitions work the
 * same way every time. A different thread count (or CPU, which picks another
 * kernel) may change the last bits: measured on LeNet, 1 vs 2 threads give
 * different weights, each reproducible. Pin OPENBLAS_NUM_THREADS when bit
 * equality across machines/configurations matters; library code does not
 * change OpenBLAS's process-wide setting.
 *
 * Without BLAS: plain loops, written so that the compiler can vectorize the
 * inner loop without reassociating any sum (no fast-math needed). */
#include <string.h>
#include "vd_config.h"
#include "backend/cpu/cpu_internal.h"
#if VD_HAVE_BLAS
#include <cblas.h>
#endif

#if !VD_HAVE_BLAS
/* Dot product with 8 independent partial sums (a fixed order). */
static float dot8(const float *restrict a, const float *restrict b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}
#endif

#if !VD_HAVE_BLAS
/* c[j] += a * b[j], j < n; fixed-length blocks of 8 so -O2 vectorizes them. */
static inline void axpy(float *restrict c, float a, const float *restrict b, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) c[j + l] += a * b[j + l];
    for (; j < n; j++) c[j] += a * b[j];
}
#endif

void vd_cpu_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                 const float *A, int64_t lda, const float *B, int64_t ldb,
                 int beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!beta)
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        return;
    }
#if VD_HAVE_BLAS
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f,
                A, (blasint)lda, B, (blasint)ldb, beta ? 1.0f : 0.0f, C, (blasint)ldc);
#else
    if (!trans_b) {
        /* C[i,:] += op(A)[i,p] * B[p,:]: the inner loop runs along a row. */
        for (int64_t i = 0; i < M; i++) {
            float *restrict c = C + i * ldc;
            if (!beta) memset(c, 0, (size_t)N * sizeof *c);
            for (int64_t p = 0; p < K; p++) {
                float a = trans_a ? A[p * lda + i] : A[i * lda + p];
                axpy(c, a, B + p * ldb, N);
            }
        }
    } else if (!trans_a) {
        /* C[i,j] = A[i,:] . B[j,:]: both rows contiguous. */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float d = dot8(A + i * lda, B + j * ldb, K);
                C[i * ldc + j] = beta ? C[i * ldc + j] + d : d;
            }
    } else {
        /* A^T B^T: unused by the backend; kept correct and simple. */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float d = 0;
                for (int64_t p = 0; p < K; p++) d += A[p * lda + i] * B[j * ldb + p];
                C[i * ldc + j] = beta ? C[i * ldc + j] + d : d;
            }
    }
#endif
}
