# cython: freethreading_compatible = True
"""CRC-32C of checkpoint format version 2 (csrc/crc32c.c): every path gives the same value, so
this module has no instruction-set selection of its own (the fastest path this CPU has runs)."""
from libc.stdint cimport uint32_t

cdef extern from "crc32c.h" nogil:
    int OM_CRC_PATHS
    void om_crc32c_init()
    int om_crc32c_available(int path)
    uint32_t om_crc32c_path(int path, uint32_t crc, const void *p, size_t n)
    uint32_t om_crc32c(uint32_t crc, const void *p, size_t n)

om_crc32c_init()

PATHS = ("table", "instruction", "fold")


def available_paths() -> list:
    return [name for i, name in enumerate(PATHS) if om_crc32c_available(i)]


def crc32c(const unsigned char[::1] data, unsigned int crc=0, path=None) -> int:
    """The CRC-32C of `data` continued from `crc`, on the best path or the named one."""
    cdef int index = -1 if path is None else PATHS.index(path)
    if index >= 0 and not om_crc32c_available(index):
        raise ValueError(f"crc32c: path {path!r} is not available on this CPU")
    cdef size_t n = data.shape[0]
    cdef const unsigned char *p = &data[0] if n else NULL
    with nogil:
        crc = om_crc32c(crc, p, n) if index < 0 else om_crc32c_path(index, crc, p, n)
    return crc
