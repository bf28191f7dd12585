# cython: freethreading_compatible = True
"""CPU features, the compiler and the OpenMP runtime of this build."""
from onemodel._kernels._isa cimport (OM_HAVE_OPENMP, om_active_isa, om_compiler, om_isa_available,
                                     om_set_isa)

cdef extern from "isa.h":
    int om_conv_path()
    int om_ctc_path()
    int om_exact_path()
    int om_gemm_path()
    int om_optim_path()
    int om_reduce_path()
    int om_rnn_path()
    int om_sr4_path()
    int om_vmath_path()

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


def active_isa() -> int:
    return om_active_isa()


def kernel_paths() -> dict:
    """For tests: the path each kernel family's code runs now, by family."""
    return {"conv": om_conv_path(), "ctc": om_ctc_path(), "exact": om_exact_path(),
            "gemm": om_gemm_path(), "optim": om_optim_path(), "reduce": om_reduce_path(),
            "rnn": om_rnn_path(), "sr4": om_sr4_path(), "vmath": om_vmath_path()}


def compiler() -> str:
    return om_compiler().decode()


def openmp() -> bool:
    return OM_HAVE_OPENMP != 0


def omp_num_procs() -> int:
    return om_omp_procs()
