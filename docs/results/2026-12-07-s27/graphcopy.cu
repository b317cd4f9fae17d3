// Session 27: do a CUDA graph's memcpy nodes run slower than the same
// cudaMemcpyAsync calls issued eagerly? (Session 26: the replayed ResNet-152
// iterations' D2H ran 48 GB/s against 55 eager on an H100.) The same work
// -- K memory-bound kernels on a compute stream, N device-to-pinned-host
// copies on one stream and N pinned-host-to-device copies on another, all
// forked from the compute stream and joined back, as vdnn's executor
// captures them -- run eagerly, captured, captured from priority streams
// and instantiated with node priorities, with the copies cut in 8 MiB
// pieces, and with only the kernels captured and the copies issued eagerly
// after the graph's launch (waiting on an external event record node in it;
// a first test checks such a wait waits for that launch's record). Each
// copy is timed by its own events (external record nodes inside a graph).
// Prints what cutting an iteration into graphs costs (cut_cost), then one
// line per variant: the span of the whole and each direction's rate over
// its stream's busy span.
// build: nvcc -O2 -arch=sm_90 -o .carry/graphcopy docs/results/2026-12-07-s27/graphcopy.cu
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t st_ = (x);                                                             \
        if (st_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(st_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

enum { N = 16, K = 48, MAXPIECES = N * 8 };
static const size_t SZ = (size_t)48 << 20;     // one copy: 48 MiB, a mid-size feature map
static const size_t PIECE = (size_t)8 << 20;
static const size_t LOAD = (size_t)512 << 20;  // the kernels stream 2 x 512 MiB each

__global__ void stream_kernel(const float4 *a, float4 *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = a[i];
        v.x += 1.f; v.w *= 0.5f;
        b[i] = v;
    }
}

struct bufs {
    void *dsrc[N], *ddst[N], *hdst[N], *hsrc[N];
    float4 *la, *lb;
};
struct timing {
    cudaEvent_t t0, t1, d0[MAXPIECES], d1[MAXPIECES], h0[MAXPIECES], h1[MAXPIECES];
    cudaEvent_t fork, joind, joinh;
};

static int npieces(int chunked) { return chunked ? (int)(SZ / PIECE) : 1; }

// One iteration's work on (c, d, h); records timing events (external marks
// when capturing, so each launch records them).
// part: 1 the compute stream's share only (the fork event recorded as an
// external node), 2 the copies only (issued eagerly after that graph's
// launch, waiting on its fork event), 3 both.
static void enqueue(const bufs &B, timing &T, cudaStream_t c, cudaStream_t d, cudaStream_t h, bool capture,
                    bool kernels, bool d2h, bool h2d, int chunked, int part = 3) {
    unsigned fl = capture ? cudaEventRecordExternal : cudaEventRecordDefault;
    if (part & 1) {
        CK(cudaEventRecordWithFlags(T.t0, c, fl));
        CK(cudaEventRecordWithFlags(T.fork, c, part == 1 ? cudaEventRecordExternal : 0));
    }
    if (part & 2) {
        CK(cudaStreamWaitEvent(d, T.fork, 0));
        CK(cudaStreamWaitEvent(h, T.fork, 0));
    }
    int np = npieces(chunked);
    if (kernels && (part & 1))
        for (int k = 0; k < K; k++) {
            stream_kernel<<<132 * 8, 256, 0, c>>>(B.la, B.lb, LOAD / sizeof(float4));
            CK(cudaGetLastError());
        }
    if (part == 1) return;
    for (int i = 0; i < N; i++)
        for (int p = 0; p < np; p++) {
            size_t off = p * (SZ / np), n = SZ / np;
            int j = i * np + p;
            if (d2h) {
                if (j == 0 || j == N * np - 1 || !chunked) CK(cudaEventRecordWithFlags(T.d0[j], d, part == 3 ? fl : 0));
                CK(cudaMemcpyAsync((char *)B.hdst[i] + off, (char *)B.dsrc[i] + off, n, cudaMemcpyDefault, d));
                if (j == 0 || j == N * np - 1 || !chunked) CK(cudaEventRecordWithFlags(T.d1[j], d, part == 3 ? fl : 0));
            }
            if (h2d) {
                if (j == 0 || j == N * np - 1 || !chunked) CK(cudaEventRecordWithFlags(T.h0[j], h, part == 3 ? fl : 0));
                CK(cudaMemcpyAsync((char *)B.ddst[i] + off, (char *)B.hsrc[i] + off, n, cudaMemcpyDefault, h));
                if (j == 0 || j == N * np - 1 || !chunked) CK(cudaEventRecordWithFlags(T.h1[j], h, part == 3 ? fl : 0));
            }
        }
    CK(cudaEventRecord(T.joind, d));
    CK(cudaStreamWaitEvent(c, T.joind, 0));
    CK(cudaEventRecord(T.joinh, h));
    CK(cudaStreamWaitEvent(c, T.joinh, 0));
    CK(cudaEventRecordWithFlags(T.t1, c, part == 3 ? fl : 0));
}

__global__ void spin_then_set(int *flag, int *counter, long long cycles) {
    long long t = clock64();
    while (clock64() - t < cycles) {}
    *flag = ++*counter;
}

// Does an eager cudaStreamWaitEvent issued after cudaGraphLaunch wait for
// that launch's external record node (not the one before)? The graph spins
// ~5 ms, then writes its launch count, then records ev; the eager copy of
// the count waits on ev. Returns the launches whose copy saw a stale count.
static int external_wait_semantics(cudaStream_t c, cudaStream_t d) {
    int *flag, *counter, *host;
    cudaEvent_t ev;
    CK(cudaMalloc(&flag, sizeof(int)));
    CK(cudaMalloc(&counter, sizeof(int)));
    CK(cudaMemset(counter, 0, sizeof(int)));
    CK(cudaMallocHost(&host, sizeof(int)));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaGraph_t g;
    cudaGraphExec_t x;
    CK(cudaStreamBeginCapture(c, cudaStreamCaptureModeThreadLocal));
    spin_then_set<<<1, 1, 0, c>>>(flag, counter, 10000000LL);
    CK(cudaGetLastError());
    CK(cudaEventRecordWithFlags(ev, c, cudaEventRecordExternal));
    CK(cudaStreamEndCapture(c, &g));
    CK(cudaGraphInstantiateWithFlags(&x, g, 0));
    int stale = 0;
    for (int i = 1; i <= 5; i++) {
        CK(cudaGraphLaunch(x, c));
        CK(cudaStreamWaitEvent(d, ev, 0));
        CK(cudaMemcpyAsync(host, flag, sizeof(int), cudaMemcpyDefault, d));
        CK(cudaStreamSynchronize(d));
        stale += *host != i;
        CK(cudaStreamSynchronize(c));
    }
    CK(cudaGraphExecDestroy(x));
    CK(cudaGraphDestroy(g));
    return stale;
}

static float el(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

// gb/s over the stream's span (first copy's start to last copy's end) and the
// mean of the per-copy rates (unchunked only).
static void rates(cudaEvent_t *s, cudaEvent_t *e, int np, float *span_rate, float *copy_rate) {
    int last = N * np - 1;
    float span = el(s[0], e[last]);
    *span_rate = (float)(N * SZ / 1e9 / (span / 1e3));
    *copy_rate = 0;
    if (np == 1) {
        double sum = 0;
        for (int i = 0; i < N; i++) sum += SZ / 1e9 / (el(s[i], e[i]) / 1e3);
        *copy_rate = (float)(sum / N);
    }
}

// What cutting a captured iteration into graphs costs: 480 short kernels
// (2 x 4 MiB each) issued eagerly, as one graph, and as G graphs launched
// back to back with an eager event record and wait (on another stream)
// between them, as the executor's cut graphs are. Returns ms per iteration.
static float cut_cost(const bufs &B, cudaStream_t c, cudaStream_t d, int graphs) {
    enum { KS = 480 };
    size_t n = ((size_t)4 << 20) / sizeof(float4);
    cudaEvent_t a, b, x;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventCreateWithFlags(&x, cudaEventDisableTiming));
    cudaGraphExec_t *ex = (cudaGraphExec_t *)calloc(graphs ? graphs : 1, sizeof *ex);
    for (int g = 0; g < graphs; g++) {
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(c, cudaStreamCaptureModeThreadLocal));
        for (int k = 0; k < KS / graphs; k++) stream_kernel<<<132 * 4, 256, 0, c>>>(B.la, B.lb, n);
        CK(cudaGetLastError());
        CK(cudaStreamEndCapture(c, &gr));
        CK(cudaGraphInstantiateWithFlags(&ex[g], gr, 0));
        CK(cudaGraphDestroy(gr));
    }
    float best = 1e30f;
    for (int rep = 0; rep < 6; rep++) {
        CK(cudaEventRecord(a, c));
        if (graphs == 0)
            for (int k = 0; k < KS; k++) stream_kernel<<<132 * 4, 256, 0, c>>>(B.la, B.lb, n);
        for (int g = 0; g < graphs; g++) {
            CK(cudaGraphLaunch(ex[g], c));
            if (g + 1 < graphs) {   // the cut: c waits for d, which waited for c
                CK(cudaEventRecord(x, c));
                CK(cudaStreamWaitEvent(d, x, 0));
                CK(cudaEventRecord(x, d));
                CK(cudaStreamWaitEvent(c, x, 0));
            }
        }
        CK(cudaEventRecord(b, c));
        CK(cudaEventSynchronize(b));
        if (rep > 0 && el(a, b) < best) best = el(a, b);
    }
    for (int g = 0; g < graphs; g++) CK(cudaGraphExecDestroy(ex[g]));
    free(ex);
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaEventDestroy(x));
    return best;
}

int main(void) {
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    printf("%s, %d async engines, driver/runtime:", pr.name, pr.asyncEngineCount);
    int dv, rv;
    CK(cudaDriverGetVersion(&dv));
    CK(cudaRuntimeGetVersion(&rv));
    printf(" %d/%d\n", dv, rv);
    bufs B;
    for (int i = 0; i < N; i++) {
        CK(cudaMalloc(&B.dsrc[i], SZ));
        CK(cudaMalloc(&B.ddst[i], SZ));
        CK(cudaMallocHost(&B.hdst[i], SZ));
        CK(cudaMallocHost(&B.hsrc[i], SZ));
        CK(cudaMemset(B.dsrc[i], 1, SZ));
        memset(B.hsrc[i], 2, SZ);
        memset(B.hdst[i], 0, SZ);
    }
    CK(cudaMalloc(&B.la, LOAD));
    CK(cudaMalloc(&B.lb, LOAD));
    CK(cudaMemset(B.la, 0, LOAD));
    timing T;
    cudaEvent_t *all[] = {&T.t0, &T.t1, &T.fork, &T.joind, &T.joinh};
    for (auto p : all) CK(cudaEventCreate(p));
    for (int i = 0; i < MAXPIECES; i++) {
        CK(cudaEventCreate(&T.d0[i])); CK(cudaEventCreate(&T.d1[i]));
        CK(cudaEventCreate(&T.h0[i])); CK(cudaEventCreate(&T.h1[i]));
    }
    int lo, hi;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t c, d, h, pc, pd, ph;
    CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&d, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithPriority(&pc, cudaStreamNonBlocking, lo));
    CK(cudaStreamCreateWithPriority(&pd, cudaStreamNonBlocking, hi));
    CK(cudaStreamCreateWithPriority(&ph, cudaStreamNonBlocking, hi));

    struct { const char *name; bool kernels, d2h, h2d; } work[] = {
        {"d2h alone", false, true, false},  {"h2d alone", false, false, true},
        {"both", false, true, true},        {"kernels alone", true, false, false},
        {"d2h+kernels", true, true, false}, {"h2d+kernels", true, false, true},
        {"all three", true, true, true},
    };
    printf("external record node, eager wait after the launch: %d of 5 copies stale\n",
           external_wait_semantics(c, d));
    printf("480 short kernels: eager %.3f ms", cut_cost(B, c, d, 0));
    for (int g : {1, 10, 40, 120, 240}) printf(", %d graphs %.3f", g, cut_cost(B, c, d, g));
    printf("\n");
    // mode: 0 eager, 1 graph, 2 graph from priority streams + node priority, 3 graph 8 MiB pieces,
    // 4 eager 8 MiB pieces, 5 the kernels a graph and the copies eager after its launch
    const char *mname[] = {"eager", "graph", "graph-prio", "graph-pieces", "eager-pieces", "graph+eager"};
    printf("%-14s %-13s %9s %9s %9s %9s %9s\n", "work", "mode", "span ms", "d2h GB/s", "(copy)", "h2d GB/s", "(copy)");
    for (auto &w : work)
        for (int m = 0; m < 6; m++) {
            if (!w.d2h && !w.h2d && m > 1) continue;
            bool cap = (m >= 1 && m <= 3) || m == 5;
            int chunked = m == 3 || m == 4, part = m == 5 ? 1 : 3;
            cudaStream_t sc = m == 2 ? pc : c, sd = m == 2 ? pd : d, sh = m == 2 ? ph : h;
            cudaGraphExec_t x = NULL;
            if (cap) {
                cudaGraph_t g;
                CK(cudaStreamBeginCapture(sc, cudaStreamCaptureModeThreadLocal));
                enqueue(B, T, sc, sd, sh, true, w.kernels, w.d2h, w.h2d, chunked, part);
                CK(cudaStreamEndCapture(sc, &g));
                CK(cudaGraphInstantiateWithFlags(&x, g, m == 2 ? cudaGraphInstantiateFlagUseNodePriority : 0));
                CK(cudaGraphDestroy(g));
            }
            float best[5] = {1e30f, 0, 0, 0, 0};
            for (int rep = 0; rep < 6; rep++) {
                if (cap) CK(cudaGraphLaunch(x, sc));
                if (m == 5) enqueue(B, T, sc, sd, sh, false, w.kernels, w.d2h, w.h2d, chunked, 2);
                else if (!cap) enqueue(B, T, sc, sd, sh, false, w.kernels, w.d2h, w.h2d, chunked);
                CK(cudaStreamSynchronize(sc));
                if (rep == 0) continue;   // warm
                float span = el(T.t0, T.t1), r[4] = {0, 0, 0, 0};
                if (w.d2h) rates(T.d0, T.d1, npieces(chunked), &r[0], &r[1]);
                if (w.h2d) rates(T.h0, T.h1, npieces(chunked), &r[2], &r[3]);
                if (span < best[0]) { best[0] = span; memcpy(best + 1, r, sizeof r); }
            }
            printf("%-14s %-13s %9.2f %9.1f %9.1f %9.1f %9.1f\n", w.name, mname[m], best[0], best[1], best[2],
                   best[3], best[4]);
            if (x) CK(cudaGraphExecDestroy(x));
        }
    return 0;
}
