#include "roster_vips.h"

#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

static void take_error(char *error, size_t error_size) {
  const char *message = vips_error_buffer();
  snprintf(error, error_size, "%s", message && *message ? message : "libvips failed");
  size_t length = strlen(error);
  while (length > 0 && (error[length - 1] == '\n' || error[length - 1] == ' ')) {
    error[--length] = '\0';
  }
  vips_error_clear();
}

// libvips' own warnings ("error in tile ...") would go to stderr; the caller logs the
// error that matters, from the error buffer.
static void drop_warning(const gchar *domain, GLogLevelFlags level, const gchar *message,
  gpointer data) {
  (void) domain;
  (void) level;
  (void) message;
  (void) data;
}

int roster_vips_start(char *error, size_t error_size) {
  g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, drop_warning, NULL);
  if (VIPS_INIT("roster")) {
    take_error(error, error_size);
    return -1;
  }
  vips_cache_set_max(0);
  vips_cache_set_max_mem(0);
  vips_concurrency_set(1);
  return 0;
}

int roster_vips_thumbnail(
  const char *path, int height, int quality, roster_thumbnail *out, char *error,
  size_t error_size) {
  memset(out, 0, sizeof(*out));
  VipsImage *source = vips_image_new_from_file(
    path, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
  if (source == NULL) {
    take_error(error, error_size);
    return -1;
  }
  out->width = vips_image_get_width(source);
  out->height = vips_image_get_height(source);
  g_object_unref(source);

  VipsImage *thumbnail = NULL;
  if (vips_thumbnail(path, &thumbnail, VIPS_MAX_COORD, "height", height, "fail_on",
        VIPS_FAIL_ON_ERROR, NULL)) {
    take_error(error, error_size);
    return -1;
  }
  void *data = NULL;
  size_t size = 0;
  int failed = vips_jpegsave_buffer(thumbnail, &data, &size, "Q", quality, "strip", TRUE, NULL);
  out->thumbnail_width = vips_image_get_width(thumbnail);
  out->thumbnail_height = vips_image_get_height(thumbnail);
  g_object_unref(thumbnail);
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
  VipsObject *scope = VIPS_OBJECT(vips_image_new());
  VipsImage **t = (VipsImage **) vips_object_local_array(scope, 9);
  double scale[3] = {
    (1 + ((seed >> 0) & 0xFF)) / 256.0 * 200.0 / width,
    (1 + ((seed >> 8) & 0xFF)) / 256.0 * 200.0 / height,
    (1 + ((seed >> 16) & 0xFF)) / 256.0 * 100.0 / (width + height),
  };
  double offset[3] = {30, 40, 50};
  int failed =
    vips_xyz(&t[0], width, height, NULL) ||
    vips_extract_band(t[0], &t[1], 0, NULL) ||
    vips_extract_band(t[0], &t[2], 1, NULL) ||
    vips_add(t[1], t[2], &t[3], NULL) ||
    vips_bandjoin((VipsImage *[]){t[1], t[2], t[3]}, &t[4], 3, NULL) ||
    vips_linear(t[4], &t[5], scale, offset, 3, NULL) ||
    vips_gaussnoise(&t[6], width, height, "mean", 0.0, "sigma", noise,
      "seed", (int) (seed & 0x7FFFFFFF), NULL) ||
    vips_add(t[5], t[6], &t[7], NULL) ||
    vips_cast_uchar(t[7], &t[8], NULL) ||
    vips_jpegsave_buffer(t[8], data, size, "Q", quality, "strip", TRUE, NULL);
  g_object_unref(scope);
  if (failed) {
    take_error(error, error_size);
    return -1;
  }
  return 0;
}

void roster_vips_free(void *data) { g_free(data); }

struct roster_sha256 {
  GChecksum *checksum;
};

roster_sha256 *roster_sha256_new(void) {
  roster_sha256 *hash = g_new(roster_sha256, 1);
  hash->checksum = g_checksum_new(G_CHECKSUM_SHA256);
  return hash;
}

void roster_sha256_update(roster_sha256 *hash, const void *data, size_t size) {
  const unsigned char *bytes = data;
  while (size > 0) {
    gssize part = size > G_MAXSSIZE ? G_MAXSSIZE : (gssize) size;
    g_checksum_update(hash->checksum, bytes, part);
    bytes += part;
    size -= (size_t) part;
  }
}

void roster_sha256_finish(roster_sha256 *hash, char hex[65]) {
  snprintf(hex, 65, "%s", g_checksum_get_string(hash->checksum));
  roster_sha256_discard(hash);
}

void roster_sha256_discard(roster_sha256 *hash) {
  g_checksum_free(hash->checksum);
  g_free(hash);
}
