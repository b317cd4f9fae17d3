/* test_tune.c — fine-tuning through vdnn-train: a ResNet-18 in torchvision's
 * names, its 1000-class weights written here (seeded, by vdnn's own
 * checkpoint writer: tools/make_resnet18_init.py writes torchvision's on a
 * machine with PyTorch), fine-tuned to a 10-class head on an image folder
 * with the backbone frozen; --init-skip and --freeze's bad input. Runs
 * $VD_BUILDDIR/vdnn-train and vdnn-plan. */
#include <sys/stat.h>
#include <jansson.h>
#include "tutil.h"
#include "spec/spec.h"
#include "train/ckpt.h"

static char g_bin[1024], g_plan[1024], g_src[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_bin, sizeof g_bin, "%s/vdnn-train", b);
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", b);
    snprintf(g_src, sizeof g_src, "%s", s);
}

/* text with its one occurrence of `from` replaced by `to` (fails the test
 * unless there is exactly one); release with vd_free. */
static char *replace_once(char *text, const char *from, const char *to) {
    char *at = strstr(text, from);
    ck_assert_msg(at && !strstr(at + 1, from), "'%s' is not in the spec exactly once", from);
    char *out = vd_strfmt(NULL, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    ck_assert_ptr_nonnull(out);
    vd_free(text);
    return out;
}

/* The spec `file` of $VD_SRCDIR with replacements (from, to pairs, n of
 * them) written to path. */
static void spec_variant(const char *file, const char *path, const char *const *rep, int n) {
    char src[1200];
    snprintf(src, sizeof src, "%s/%s", g_src, file);
    size_t len;
    char *text = vdt_slurp(src, &len);
    for (int k = 0; k < n; k++) text = replace_once(text, rep[2 * k], rep[2 * k + 1]);
    tu_write(path, text, strlen(text));
    vd_free(text);
}

/* The net of spec `path` with seeded initial weights (vd_net_init_params)
 * saved as a checkpoint (the model file alone) at ck. */
static void seeded_checkpoint(const char *path, uint64_t seed, const char *ck) {
    vd_net net;
    vd_err e = {0};
    vd_net_init(&net);
    ck_assert_msg(vd_spec_load(path, &net, &e) == 0, "%s", e.msg);
    float *p = malloc((size_t)net.param_floats * sizeof *p);
    ck_assert_ptr_nonnull(p);
    vd_net_init_params(&net, p, seed);
    vd_train_state st = {.seed = seed, .batch = net.train.batch};
    ck_assert_msg(vd_ckpt_save(ck, &net, p, NULL, &st, &e) == 0, "%s", e.msg);
    free(p);
    vd_net_free(&net);
}

/* An image folder DIR/train/cNN/K.ppm: `classes` classes of `per` 32x32 RGB
 * images each; class c a colour of its own with a checker pattern of its
 * own period, each pixel jittered (so that no two images are the same). */
static void image_folder(const char *dir, int classes, int per) {
    char p[1200];
    snprintf(p, sizeof p, "%s/train", dir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    vd_rng r;
    vd_rng_seed(&r, 11, 0);
    unsigned char img[15 + 32 * 32 * 3];
    memcpy(img, "P6\n32 32\n255\n", 13);
    for (int c = 0; c < classes; c++) {
        snprintf(p, sizeof p, "%s/train/c%02d", dir, c);
        ck_assert_int_eq(mkdir(p, 0755), 0);
        int base[3] = {c * 53 % 256, (255 - c * 29) % 256, (c * 97 + 40) % 256};
        for (int k = 0; k < per; k++) {
            unsigned char *px = img + 13;
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    for (int ch = 0; ch < 3; ch++) {
                        int v = base[ch] + ((x / (4 + c % 3) + y / (3 + c / 3)) % 2 ? 40 : -40) +
                                (int)(vd_rng_u32(&r) % 41) - 20;
                        *px++ = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
                    }
            snprintf(p, sizeof p, "%s/train/c%02d/%d.ppm", dir, c, k);
            tu_write(p, img, 13 + 32 * 32 * 3);
        }
    }
}

/* The "loss" of each record of a --metrics file, in order, into loss[n]. */
static int metrics_losses(const char *path, double *loss, int n) {
    size_t len;
    char *text = vdt_slurp(path, &len);
    int k = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        ck_assert_msg(j != NULL, "%s: not JSON: %s", path, line);
        json_t *l = json_object_get(j, "loss");
        if (l && k < n) loss[k++] = json_real_value(l);
        json_decref(j);
    }
    vd_free(text);
    return k;
}

/* The test. nets/examples/resnet18.yaml (torchvision's resnet18) at
 * a 32x32 input (the weights do not depend on it; ResNet-18's five halvings
 * leave 1x1 before its global pool), its 1000-class weights seeded, then
 * fine-tuned on 10 classes: --init-skip '^fc\.' leaves the new head at its
 * initialisation (its shapes differ from the file's), --freeze the whole
 * backbone (its backward pass then does not run at all). Four iterations
 * of batch 10 over 20 images are two epochs of two; each epoch sees every
 * image once, so the mean loss of an epoch is over the same 20 images
 * whatever the batches held: the second's below 0.8 times the first's is a
 * comparison that no batch's luck decides (measured: 2.90 then 1.68; the
 * same bits every run, the CPU backend being deterministic). Most of its
 * time is moving ResNet-18's 47 MB of weights: written, read, loaded. */
START_TEST(resnet18_finetune_loss_falls) {
    setup();
    char *d = vdt_tmpdir("vdnn-tune");
    char a[1200], b[1200], ck[1200], img[1200], met[1200];
    snprintf(a, sizeof a, "%s/resnet18-1000.yaml", d);
    snprintf(b, sizeof b, "%s/resnet18-10.yaml", d);
    snprintf(ck, sizeof ck, "%s/resnet18-1000.safetensors", d);
    snprintf(img, sizeof img, "%s/img", d);
    snprintf(met, sizeof met, "%s/m.jsonl", d);
    static const char *const small[] = {"height: 224, width: 224", "height: 32, width: 32"};
    static const char *const head10[] = {"height: 224, width: 224", "height: 32, width: 32",
                                         "classes: 1000", "classes: 10",
                                         "type: fc, out: 1000", "type: fc, out: 10"};
    spec_variant("nets/examples/resnet18.yaml", a, small, 1);
    spec_variant("nets/examples/resnet18.yaml", b, head10, 3);
    seeded_checkpoint(a, 7, ck);
    ck_assert_int_eq(mkdir(img, 0755), 0);
    image_folder(img, 10, 2);
    char args[6000], *out;
    snprintf(args, sizeof args, "%s --backend cpu --data folder:%s --init %s --init-skip '^fc\\.' "
             "--freeze '^(conv1|bn1|layer[1-4])\\.' --batch 10 --iters 4 --lr 0.03 "
             "--momentum 0 --log-every 1 --metrics %s --eval-every -1", b, img, ck, met);
    int rc = vdt_run_bin(g_bin, args, true, &out);
    ck_assert_msg(rc == 0, "vdnn-train %s: exit %d:\n%s", args, rc, out);
    ck_assert_msg(strstr(out, "loaded 100 of the 102 tensors of net 'resnet18'") &&
                  strstr(out, "skipped in the file (--init-skip '^fc\\.'): fc.weight [1000, 512], "
                         "fc.bias [1000]; left at initialisation: fc.weight, fc.bias") &&
                  strstr(out, "60 of 62 parameter tensors frozen"), "%s", out);
    vd_free(out);
    double loss[4];
    ck_assert_int_eq(metrics_losses(met, loss, 4), 4);
    double e1 = (loss[0] + loss[1]) / 2, e2 = (loss[2] + loss[3]) / 2;
    ck_assert_msg(e2 < 0.8 * e1, "the loss did not fall: epoch means %g then %g (%g %g %g %g)",
                  e1, e2, loss[0], loss[1], loss[2], loss[3]);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Bad --init-skip and --freeze input: a pattern that matches nothing is
 * exit 2 naming it (before any mismatch it would hide), a shape mismatch
 * the skip list does not cover stays exit 5, and so does a tensor of the
 * file that the net lacks; a renamed head loads with the old one skipped.
 * tiny-resnet's weights (10 classes) into a 5-class variant, one whose head
 * is named "head", and one whose head has no bias. (vd_net_freeze's other
 * refusals: tests/plan/test_freeze.c.) */
START_TEST(init_and_freeze_bad_input) {
    setup();
    char *d = vdt_tmpdir("vdnn-tune");
    char tiny[1200], five[1200], head[1200], nob[1200], ck[1200];
    snprintf(tiny, sizeof tiny, "%s/nets/tiny-resnet.yaml", g_src);
    snprintf(five, sizeof five, "%s/five.yaml", d);
    snprintf(head, sizeof head, "%s/head.yaml", d);
    snprintf(nob, sizeof nob, "%s/nobias.yaml", d);
    snprintf(ck, sizeof ck, "%s/tiny.safetensors", d);
    static const char *const r5[] = {"classes: 10", "classes: 5",
                                     "type: fc, out: 10", "type: fc, out: 5"};
    static const char *const rh[] = {"name: fc, type: fc", "name: head, type: fc"};
    static const char *const rb[] = {"type: fc, out: 10", "type: fc, out: 10, bias: false"};
    spec_variant("nets/tiny-resnet.yaml", five, r5, 2);
    spec_variant("nets/tiny-resnet.yaml", head, rh, 1);
    spec_variant("nets/tiny-resnet.yaml", nob, rb, 1);
    seeded_checkpoint(tiny, 3, ck);
    static const struct { int code; const char *tool, *args, *says; } cases[] = {
        {2, "train", "%s --init %s --init-skip '^zzz'", "--init-skip '^zzz' matches no tensor"},
        {2, "train", "%s --freeze 'layer9'", "--freeze 'layer9' matches no parameter"},
        {2, "plan", "%s --freeze 'layer9'", "--freeze 'layer9' matches no parameter"},
        {2, "train", "%s --init %s --init-skip '('", "not a regular expression"},
        {2, "train", "%s --init-skip '^fc'", "--init-skip needs --init"},
        {2, "train", "%s --freeze a --freeze b", "--freeze given twice"},
        {5, "five", "%s --init %s", "tensor 'fc.weight' has shape [10, 16] but net"},
        {5, "five", "%s --init %s --init-skip '^fc\\.weight'", "tensor 'fc.bias' has shape [10]"},
        {5, "head", "%s --init %s", "tensor 'head.weight' is missing"},
        {5, "nob", "%s --init %s", "unexpected tensor 'fc.bias' (net 'tiny-resnet' has no such"},
        {0, "nob", "%s --init %s --init-skip 'fc\\.bias$'", "loaded 41 of the 41 tensors of net "
         "'tiny-resnet' from %s; skipped in the file (--init-skip 'fc\\.bias$'): fc.bias [10]; "
         "left at initialisation: none"},
        {0, "head", "%s --init %s --init-skip '^(fc|head)\\.'",
         "loaded 40 of the 42 tensors of net 'tiny-resnet' from %s; skipped in the file "
         "(--init-skip '^(fc|head)\\.'): fc.weight [10, 16], fc.bias [10]; left at "
         "initialisation: head.weight, head.bias"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bool plan = !strcmp(cases[k].tool, "plan");
        const char *spec = !strcmp(cases[k].tool, "five") ? five
                         : !strcmp(cases[k].tool, "head") ? head
                         : !strcmp(cases[k].tool, "nob") ? nob : tiny;
        char args[4000], fmt[600], says[1200], *out;
        snprintf(fmt, sizeof fmt, "%s --backend cpu --iters 0 --eval-every -1", cases[k].args);
        snprintf(args, sizeof args, plan ? cases[k].args : fmt, spec, ck);
        snprintf(says, sizeof says, cases[k].says, ck);
        int rc = vdt_run_bin(plan ? g_plan : g_bin, args, true, &out);
        ck_assert_msg(rc == cases[k].code && strstr(out, says), "%s %s: exit %d, expected %d "
                      "and '%s':\n%s", cases[k].tool, args, rc, cases[k].code, says, out);
        vd_free(out);
    }
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("tune", 300, resnet18_finetune_loss_falls, init_and_freeze_bad_input)
