#include "roster_vips.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

// libvips is opened on first use (dlopen), not linked: linked, it and the hundred libraries
// it pulls in (glib, librsvg, poppler, OpenEXR, ...) were mapped at every start and held
// much of the server's RSS (docs/performance.md, "What each part saved") although a server
// that is not making thumbnails never calls them. So the shim declares the little of libvips' C API it uses itself, from libvips 8's
// headers (ABI 42), and takes each function from the library by name.

typedef struct VipsImage VipsImage;
typedef struct VipsObject VipsObject;
enum { vips_access_sequential = 1 };  // VIPS_ACCESS_SEQUENTIAL
enum { vips_fail_on_error = 2 };      // VIPS_FAIL_ON_ERROR
enum { vips_max_coord = 10000000 };   // VIPS_MAX_COORD
enum { vips_abi = 42 };               // VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE
enum { g_log_level_warning = 1 << 4 };  // G_LOG_LEVEL_WARNING

typedef void (*log_function)(const char *domain, int level, const char *message, void *data);

// Every function the shim calls, filled once by roster_vips_start.
static struct {
  int (*version)(int flag);
  int (*init)(const char *argv0);
  unsigned (*log_set_handler)(const char *domain, int levels, log_function handler, void *data);
  const char *(*error_buffer)(void);
  void (*error_clear)(void);
  void (*cache_set_max)(int max);
  void (*cache_set_max_mem)(size_t max);
  void (*concurrency_set)(int concurrency);
  VipsImage *(*image_new_from_file)(const char *name, ...);
  VipsImage *(*image_new)(void);
  int (*image_get_width)(const VipsImage *image);
  int (*image_get_height)(const VipsImage *image);
  int (*thumbnail)(const char *name, VipsImage **out, int width, ...);
  int (*jpegsave_buffer)(VipsImage *in, void **buffer, size_t *length, ...);
  VipsObject **(*object_local_array)(VipsObject *parent, int n);
  int (*xyz)(VipsImage **out, int width, int height, ...);
  int (*extract_band)(VipsImage *in, VipsImage **out, int band, ...);
  int (*add)(VipsImage *left, VipsImage *right, VipsImage **out, ...);
  int (*bandjoin)(VipsImage **in, VipsImage **out, int n, ...);
  int (*linear)(VipsImage *in, VipsImage **out, const double *a, const double *b, int n, ...);
  int (*gaussnoise)(VipsImage **out, int width, int height, ...);
  int (*cast_uchar)(VipsImage *in, VipsImage **out, ...);
  void (*object_unref)(void *object);
  void (*free)(void *memory);
} vips;

static void take_error(char *error, size_t error_size) {
  const char *message = vips.error_buffer();
  snprintf(error, error_size, "%s", message && *message ? message : "libvips failed");
  size_t length = strlen(error);
  while (length > 0 && (error[length - 1] == '\n' || error[length - 1] == ' ')) {
    error[--length] = '\0';
  }
  vips.error_clear();
}

// libvips' own warnings ("error in tile ...") would go to stderr; the caller logs the
// error that matters, from the error buffer.
static void drop_warning(const char *domain, int level, const char *message, void *data) {
  (void) domain;
  (void) level;
  (void) message;
  (void) data;
}

// Takes `name` from the library into `slot`; false (with dlerror's message) when missing.
static int take(void *library, const char *name, void *slot, char *error, size_t error_size) {
  void *found = dlsym(library, name);
  if (found == NULL) {
    snprintf(error, error_size, "libvips: %s is missing: %s", name, dlerror());
    return 0;
  }
  memcpy(slot, &found, sizeof(found));
  return 1;
}

int roster_vips_start(char *error, size_t error_size) {
  void *library = dlopen("libvips.so.42", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    snprintf(error, error_size, "libvips is not installed: %s", dlerror());
    return -1;
  }
#define TAKE(field, name) take(library, name, &vips.field, error, error_size)
  if (!(TAKE(version, "vips_version") && TAKE(init, "vips_init") &&
        TAKE(log_set_handler, "g_log_set_handler") && TAKE(error_buffer, "vips_error_buffer") &&
        TAKE(error_clear, "vips_error_clear") && TAKE(cache_set_max, "vips_cache_set_max") &&
        TAKE(cache_set_max_mem, "vips_cache_set_max_mem") &&
        TAKE(concurrency_set, "vips_concurrency_set") &&
        TAKE(image_new_from_file, "vips_image_new_from_file") &&
        TAKE(image_new, "vips_image_new") && TAKE(image_get_width, "vips_image_get_width") &&
        TAKE(image_get_height, "vips_image_get_height") && TAKE(thumbnail, "vips_thumbnail") &&
        TAKE(jpegsave_buffer, "vips_jpegsave_buffer") &&
        TAKE(object_local_array, "vips_object_local_array") && TAKE(xyz, "vips_xyz") &&
        TAKE(extract_band, "vips_extract_band") && TAKE(add, "vips_add") &&
        TAKE(bandjoin, "vips_bandjoin") && TAKE(linear, "vips_linear") &&
        TAKE(gaussnoise, "vips_gaussnoise") && TAKE(cast_uchar, "vips_cast_uchar") &&
        TAKE(object_unref, "g_object_unref") && TAKE(free, "g_free"))) {
    return -1;
  }
#undef TAKE
  if (vips.version(3) - vips.version(5) != vips_abi) {
    snprintf(error, error_size, "libvips has ABI %d, Roster needs %d",
      vips.version(3) - vips.version(5), vips_abi);
    return -1;
  }
  vips.log_set_handler("VIPS", g_log_level_warning, drop_warning, NULL);
  if (vips.init("roster")) {
    take_error(error, error_size);
    return -1;
  }
  vips.cache_set_max(0);
  vips.cache_set_max_mem(0);
  vips.concurrency_set(1);
  return 0;
}

int roster_vips_thumbnail(
  const char *path, int height, int quality, roster_thumbnail *out, char *error,
  size_t error_size) {
  memset(out, 0, sizeof(*out));
  VipsImage *source = vips.image_new_from_file(
    path, "access", vips_access_sequential, "fail_on", vips_fail_on_error, NULL);
  if (source == NULL) {
    take_error(error, error_size);
    return -1;
  }
  out->width = vips.image_get_width(source);
  out->height = vips.image_get_height(source);
  vips.object_unref(source);

  VipsImage *thumbnail = NULL;
  if (vips.thumbnail(path, &thumbnail, vips_max_coord, "height", height, "fail_on",
        vips_fail_on_error, NULL)) {
    take_error(error, error_size);
    return -1;
  }
  void *data = NULL;
  size_t size = 0;
  int failed = vips.jpegsave_buffer(thumbnail, &data, &size, "Q", quality, "strip", 1, NULL);
  out->thumbnail_width = vips.image_get_width(thumbnail);
  out->thumbnail_height = vips.image_get_height(thumbnail);
  vips.object_unref(thumbnail);
  if (failed) {
    take_error(error, error_size);
    return -1;
  }
  out->data = data;
  out->size = size;
  return 0;
}

int roster_vips_synthetic_jpeg(
  int width, int height, uint32_t seed, double noise, int quality, void **data, size_t *size,
  char *error, size_t error_size) {
  // Bands x, y and x + y, scaled per seed into a gradient, plus Gaussian noise with a fixed
  // seed: every step is a pure function of the arguments, so the same arguments give the
  // same bytes. Intermediates belong to `scope` and go with it.
  VipsObject *scope = (VipsObject *) vips.image_new();
  VipsImage **t = (VipsImage **) vips.object_local_array(scope, 9);
  double scale[3] = {
    (1 + ((seed >> 0) & 0xFF)) / 256.0 * 200.0 / width,
    (1 + ((seed >> 8) & 0xFF)) / 256.0 * 200.0 / height,
    (1 + ((seed >> 16) & 0xFF)) / 256.0 * 100.0 / (width + height),
  };
  double offset[3] = {30, 40, 50};
  int failed =
    vips.xyz(&t[0], width, height, NULL) ||
    vips.extract_band(t[0], &t[1], 0, NULL) ||
    vips.extract_band(t[0], &t[2], 1, NULL) ||
    vips.add(t[1], t[2], &t[3], NULL) ||
    vips.bandjoin((VipsImage *[]){t[1], t[2], t[3]}, &t[4], 3, NULL) ||
    vips.linear(t[4], &t[5], scale, offset, 3, NULL) ||
    vips.gaussnoise(&t[6], width, height, "mean", 0.0, "sigma", noise,
      "seed", (int) (seed & 0x7FFFFFFF), NULL) ||
    vips.add(t[5], t[6], &t[7], NULL) ||
    vips.cast_uchar(t[7], &t[8], NULL) ||
    vips.jpegsave_buffer(t[8], data, size, "Q", quality, "strip", 1, NULL);
  vips.object_unref(scope);
  if (failed) {
    take_error(error, error_size);
    return -1;
  }
  return 0;
}

void roster_vips_free(void *data) { vips.free(data); }
