# cython: freethreading_compatible = True
"""CPU features, the compiler and the OpenMP runtime of this build."""
from onemodel._kernels._isa cimport om_set_isa, om_isa_available, om_compiler, OM_HAVE_OPENMP

cdef extern from *:
    """
    #if OM_HAVE_OPENMP
    #include <omp.h>
    static int om_omp_procs(void) { return omp_get_num_procs(); }
    #else
    static int om_omp_procs(void) { return 1; }
    #endif
    """
    int om_omp_procs()


def isa_available(int isa) -> bool:
    return om_isa_available(isa) != 0


def set_isa(int isa) -> None:
    if om_set_isa(isa) != 0:
        raise ValueError(f"instruction-set path {isa} is not available on this CPU")


def compiler() -> str:
    return om_compiler().decode()


def openmp() -> bool:
    return OM_HAVE_OPENMP != 0


def omp_num_procs() -> int:
    return om_omp_procs()
