/* spec.h — YAML network spec (NET.yaml) -> vd_net.
 *
 * The format is documented completely in man/vdnn-net.5. In short: top-level
 * keys name, description, input, train, templates, layers. Layers are listed
 * in topological order; a layer's input defaults to the layer above it.
 * Templates (with parameters, ${expressions}, repeat: and if:) keep ResNet
 * and Inception nets short; the layers they expand to carry names prefixed by
 * the using entry's name ("layer1.0" + "conv1" -> "layer1.0.conv1").
 *
 * Every error is VD_ESPEC with a message "FILE:LINE:COL: message" (1-based)
 * that points at the offending key or value; errors inside a template also
 * say which use expanded it. The parser is strict: unknown keys and layer
 * types are rejected with a "did you mean" suggestion. */
#ifndef VD_SPEC_H
#define VD_SPEC_H

#include <stddef.h>
#include "util/util.h"
#include "net/net.h"

/* Limits that keep hostile specs (fuzzing) cheap. */
#define VD_SPEC_MAX_LAYERS 16384      /* layers after template expansion */
#define VD_SPEC_MAX_DEPTH 32          /* nested template uses */
#define VD_SPEC_MAX_REPEAT 4096       /* repeat: count */
#define VD_SPEC_MAX_TEXT (16 << 20)   /* spec file size in bytes */
#define VD_SPEC_MAX_NEST 64           /* YAML collections nested in each other */

/* Parse the spec text[0..len) and build a finalized net: layers appended in
 * order, net->name/path/input/train filled, then vd_net_finalize() run (shape
 * inference, validation, parameter table). `name_for_messages` (may be NULL:
 * "<spec>") is the FILE part of error messages and is copied to net->path.
 * text need not be NUL-terminated and may contain any bytes. The parsed YAML
 * takes at most 8 times len plus 1 MiB (ydoc.h); a denser spec is refused
 * (VD_ESPEC) before its tree is built.
 * `net` must be vd_net_init()ed (empty) by the caller; the caller owns it and
 * calls vd_net_free() afterwards, on success and on failure alike.
 * Calling vd_net_finalize() again afterwards is harmless (it is idempotent),
 * e.g. after changing net->train.batch.
 * Returns 0, or VD_ESPEC / VD_ENOMEM with e filled. */
int vd_spec_parse(const char *text, size_t len, const char *name_for_messages,
                  vd_net *net, vd_err *e);

/* Read the file at `path` and vd_spec_parse() it (messages name `path`).
 * Returns 0, VD_EIO (unreadable file), VD_ESPEC or VD_ENOMEM. */
int vd_spec_load(const char *path, vd_net *net, vd_err *e);

#endif
