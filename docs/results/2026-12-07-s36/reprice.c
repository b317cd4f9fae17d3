/* Plan under profile A, then price the same plan under profile B. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "net/net.h"
#include "spec/spec.h"
#include "profile/profile.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"
int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: spec math(0 fp32,2 bf16?) profA profB budgetGiB...\n"); return 2; }
    vd_net net; vd_err e = {0};
    vd_net_init(&net);
    if (vd_spec_load(argv[1], &net, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    net.train.batch = 256;
    net.train.math = (vd_math)atoi(argv[2]);
    if (vd_net_finalize(&net, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    vd_schedule_inplace(&net);
    vd_profile a, b;
    if (vd_profile_load(argv[3], &net, 256, &a, &e) || vd_profile_load(argv[4], &net, 256, &b, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    for (int i = 5; i < argc; i++) {
        vd_plan_opts o; vd_plan_opts_init(&o);
        o.batch = 256; o.policy = VD_POLICY_AUTO; o.graph = VD_GRAPH_AUTO;
        o.budget = (uint64_t)(atof(argv[i]) * (1ull << 30));
        vd_plan p;
        if (vd_plan_build(&net, &a, &o, &p, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
        double ta = p.sim.iter_s;
        if (vdp_simulate(&p, &b, false, NULL, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
        printf("%s GiB: planned %.4f s under A, priced %.4f s under B (%+.1f%%)\n", argv[i], ta, p.sim.iter_s, 100 * (p.sim.iter_s / ta - 1));
        vd_plan_free(&p);
    }
    return 0;
}
