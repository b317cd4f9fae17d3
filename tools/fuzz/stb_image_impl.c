/* stb_image_impl.c — stb_image's code for the fuzz targets, compiled here
 * with libFuzzer's instrumentation (coverage and the sanitizers), in place
 * of the uninstrumented libstb.a that vdnn links: the same header (libstb-dev),
 * the same defaults. */
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
