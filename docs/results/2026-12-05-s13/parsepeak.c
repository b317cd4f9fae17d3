/* parsepeak SPEC: vd_spec_load alone; prints the counted high-water mark */
#include <stdio.h>
#include "spec/spec.h"
int main(int argc, char **argv) {
    vd_net net; vd_err e = {0};
    vd_net_init(&net);
    int rc = vd_spec_load(argv[1], &net, &e);
    vd_mem_stats m; vd_mem_stats_get(&m);
    printf("rc=%d counted-peak=%.1f MiB layers=%d %.120s\n", rc, m.peak / 1048576.0, net.n_layers, rc ? e.msg : "");
    vd_net_free(&net);
    return rc;
}
