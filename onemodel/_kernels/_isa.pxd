# The selected instruction-set path (csrc/isa.h).
cdef extern from "isa.h" nogil:
    int om_set_isa(int isa)
    int om_active_isa()
    int om_isa_available(int isa)
    const char *om_compiler()
    int OM_HAVE_OPENMP
