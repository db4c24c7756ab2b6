// A small, non-variadic face on libvips for Swift: libvips' main calls take NULL-terminated
// option lists, which Swift cannot call. libvips is opened on first use, not linked.
#ifndef ROSTER_VIPS_H
#define ROSTER_VIPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Opens and starts libvips once per process (call it once, before the others; it fails with
/// a message when libvips 8 is not installed): no operation cache (it would hold decoded pictures) and
/// one worker thread per pipeline (the caller bounds how many pipelines run at once).
/// Returns 0, or -1 with a message in `error`.
int roster_vips_start(char *error, size_t error_size);

/// What `roster_vips_thumbnail` made.
typedef struct {
  /// The source picture's size in pixels.
  int width;
  int height;
  /// The JPEG thumbnail; release it with `roster_vips_free`.
  void *data;
  size_t size;
  int thumbnail_width;
  int thumbnail_height;
} roster_thumbnail;

/// Decodes the picture at `path` completely (a truncated or corrupt picture fails) and makes
/// a JPEG thumbnail `height` pixels high at `quality`, using shrink-on-load.
/// Returns 0, or -1 with libvips' message in `error`.
int roster_vips_thumbnail(
  const char *path, int height, int quality, roster_thumbnail *out, char *error, size_t error_size);

/// Makes a deterministic synthetic JPEG: a smooth gradient (hue from `seed`) plus Gaussian
/// noise of `noise` (0 to 100; more noise, larger file). Returns 0, or -1 with a message.
int roster_vips_synthetic_jpeg(
  int width, int height, uint32_t seed, double noise, int quality, void **data, size_t *size,
  char *error, size_t error_size);

/// Releases memory that libvips handed out.
void roster_vips_free(void *data);

#ifdef __cplusplus
}
#endif

#endif
