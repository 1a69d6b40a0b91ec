"""CUDA's `half` (cuda_fp16.h) for the CUDA emulator: the C++ the emulator adds to its prelude.

`half` holds the 16 bits; conversions round to nearest even as __float2half/__double2half
do, by bit manipulation (no _Float16, no excess precision, any C++ compiler agrees); + - * /
compute in float and round once: correctly rounded (float's 24 bits exceed 2 * 11 + 2), as
the GPU's half instructions are. Imports nothing.
"""

HALF_PRELUDE = """\
static inline unsigned int te_float_bits(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline float te_bits_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
/* float -> half bits, round to nearest even (F. Giesen's float_to_half_fast3_rtne) */
static inline unsigned short te_f2h(float f) {
  unsigned int u = te_float_bits(f), sign = u & 0x80000000u;
  u ^= sign;
  unsigned int o;
  if (u >= (143u << 23)) {                      /* >= 65536, inf or NaN */
    o = u > (255u << 23) ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {                /* below 2^-14: a subnormal half or zero */
    const unsigned int magic = 126u << 23;      /* float's rounding does the work */
    o = te_float_bits(te_bits_float(u) + te_bits_float(magic)) - magic;
  } else {
    unsigned int odd = (u >> 13) & 1u;
    u += (unsigned int)((15 - 127) << 23) + 0xfffu + odd;   /* a carry may make it inf */
    o = u >> 13;
  }
  return (unsigned short)(o | (sign >> 16));
}
static inline float te_h2f(unsigned short h) {
  unsigned int o = (unsigned int)(h & 0x7fffu) << 13, e = o & (0x7c00u << 13);
  o += (127u - 15u) << 23;
  if (e == 0x7c00u << 13) {
    o += (128u - 16u) << 23;                    /* inf or NaN */
  } else if (e == 0) {                          /* subnormal or zero: renormalise */
    o += 1u << 23;
    o = te_float_bits(te_bits_float(o) - te_bits_float(113u << 23));
  }
  return te_bits_float(o | ((unsigned int)(h & 0x8000u) << 16));
}
/* double -> half with one rounding: to float rounding to odd (an inexact result gets its
   last bit set), then to half; two extra bits of odd rounding keep the second exact */
static inline unsigned short te_d2h(double d) {
  float f = (float)d;
  if ((double)f != d && f == f) {
    unsigned int u = te_float_bits(f);
    if (fabs((double)f) > fabs(d)) u -= 1u;     /* rounded away from zero: step back */
    f = te_bits_float(u | 1u);
  }
  return te_f2h(f);
}
struct half {
  unsigned short te_bits;
  half() = default;
  half(float f) : te_bits(te_f2h(f)) {}
  half(double d) : te_bits(te_d2h(d)) {}
  operator float() const { return te_h2f(te_bits); }
};
struct half2 { half x, y; };
typedef half __half;
typedef half2 __half2;
static inline half te_half_of(float f) { half h; h.te_bits = te_f2h(f); return h; }
static inline float te_f(half h) { return te_h2f(h.te_bits); }
static inline float __half2float(half h) { return te_f(h); }
static inline half __float2half(float f) { return te_half_of(f); }
static inline half __float2half_rn(float f) { return te_half_of(f); }
static inline half __double2half(double d) { half h; h.te_bits = te_d2h(d); return h; }
static inline half __hadd(half a, half b) { return te_half_of(te_f(a) + te_f(b)); }
static inline half __hsub(half a, half b) { return te_half_of(te_f(a) - te_f(b)); }
static inline half __hmul(half a, half b) { return te_half_of(te_f(a) * te_f(b)); }
static inline half __hdiv(half a, half b) { return te_half_of(te_f(a) / te_f(b)); }
/* a NaN operand gives the other one, as fminf/fmaxf and CUDA's __hmin/__hmax */
static inline half __hmin(half a, half b) { return te_half_of(fminf(te_f(a), te_f(b))); }
static inline half __hmax(half a, half b) { return te_half_of(fmaxf(te_f(a), te_f(b))); }
static inline bool __hlt(half a, half b) { return te_f(a) < te_f(b); }
static inline bool __hle(half a, half b) { return te_f(a) <= te_f(b); }
static inline bool __hgt(half a, half b) { return te_f(a) > te_f(b); }
static inline bool __hge(half a, half b) { return te_f(a) >= te_f(b); }
static inline bool __heq(half a, half b) { return te_f(a) == te_f(b); }
static inline bool __hneu(half a, half b) { return te_f(a) != te_f(b); }
"""
