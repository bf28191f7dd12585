/* Ends one instantiation of vmath_simd.h: removes its macros so another ISA's vmath header
 * can be included in the same file. No include guard: included once per ISA header. */
#undef OMV
#undef OMM
#undef OMI
#undef OMV_FN
#undef OMV_SET1
#undef OMV_ADD
#undef OMV_SUB
#undef OMV_MUL
#undef OMV_DIV
#undef OMV_LT
#undef OMV_LE
#undef OMV_EQ
#undef OMV_ISNAN
#undef OMV_SEL
#undef OMV_XOR
#undef OMV_AS_I
#undef OMV_AS_F
#undef OMV_I2F
#undef OMI_SET1
#undef OMI_ADD
#undef OMI_SUB
#undef OMI_AND
#undef OMI_SRL
#undef OMI_SRA
#undef OMI_SLL
#undef OMI_SEL
