/* Convolution over float32 NCHW tensors (see conv.c for the design note).
 *
 * Nothing here checks shapes: the Cython layer (_conv.pyx) validates every dimension first.
 * Functions that need scratch memory return 0, or -1 when it could not be allocated.
 */
#ifndef OM_CONV_H
#define OM_CONV_H

#include <stdint.h>

typedef struct {
    int64_t n, c, h, w;         /* input (N, C, H, W) */
    int64_t k, kh, kw;          /* weight (K, C / groups, kh, kw) */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t oh, ow;             /* output (N, K, oh, ow), computed by the caller */
    /* Autocast: half = 1 or 2 runs the products on operands rounded to bfloat16 or float16
     * (gemm.h, half.h): x as the images are loaded (x_bits: x holds those 2-byte bits, which
     * are widened instead; else x_save, if not NULL, receives x's rounded bits), w and gy
     * in their packed panels. half = 0: float32 operands, x float32. */
    int half, x_bits;
    uint16_t *x_save;
} om_conv2d_shape;

/* y = conv(x, w) + b; b may be NULL. x: float32, or 2-byte bits (s->x_bits). */
int om_conv2d_forward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                          const float *b, float *y, int nthreads);
/* Gradients for upstream gy; any of gx, gw, gb may be NULL (not wanted). */
int om_conv2d_backward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                           const float *gy, float *gx, float *gw, float *gb, int nthreads);

#endif
