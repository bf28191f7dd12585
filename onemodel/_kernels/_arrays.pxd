"""Argument checks of the kernel wrappers in a few C reads (numpy C-API, no Python calls).

A wrapper validates every argument before its kernel runs. Its fast path asks these helpers
whether an argument is a native float32, C-contiguous (and, for an output, writeable) numpy
array, and takes the data pointer of an array that passed; only when an answer is no does it run
its Python-level checks, which raise with the message naming the op and the shapes. Reading
the pointer straight from the array (instead of acquiring a typed memoryview) is safe because
dtype, layout and size are checked first, and it saves about a microsecond per argument.
"""
cimport numpy as cnp


cdef inline bint f32_array(object x, bint writeable) noexcept:
    """x is a numpy array of native-order float32, C-contiguous, writeable when asked
    (what `x.dtype == np.float32 and x.flags.c_contiguous` says from Python)."""
    return (cnp.PyArray_Check(x)
            and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_FLOAT32
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x)
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x)
            and (not writeable or cnp.PyArray_ISWRITEABLE(<cnp.ndarray>x)))


cdef inline int check_f32(str op, str name, object x, bint writeable) except -1:
    """Raises, naming op and the argument, unless f32_array(x, writeable)."""
    if f32_array(x, writeable):
        return 0
    if not cnp.PyArray_Check(x):
        raise TypeError(f"{op}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    if (cnp.PyArray_TYPE(<cnp.ndarray>x) != cnp.NPY_FLOAT32
            or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x)):
        raise TypeError(f"{op}: {name} must be float32, got {x.dtype}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x):
        raise ValueError(f"{op}: {name} of shape {x.shape} must be C-contiguous")
    raise ValueError(f"{op}: {name} is read-only")


cdef inline cnp.npy_intp size_of(object x) noexcept:
    """Element count of an array f32_array accepted."""
    return cnp.PyArray_SIZE(<cnp.ndarray>x)


cdef inline float *data_of(object x) noexcept:
    """First element of an array f32_array accepted."""
    return <float *>cnp.PyArray_DATA(<cnp.ndarray>x)


cdef inline bint overlap(object x, object y) noexcept:
    """Whether the memory of two contiguous arrays (or None) intersects: the bounds test of
    np.may_share_memory, which for contiguous arrays is exact. Empty arrays overlap nothing."""
    if x is None or y is None:
        return False
    cdef char *x0 = <char *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef char *y0 = <char *>cnp.PyArray_DATA(<cnp.ndarray>y)
    cdef cnp.npy_intp nx = cnp.PyArray_NBYTES(<cnp.ndarray>x)
    cdef cnp.npy_intp ny = cnp.PyArray_NBYTES(<cnp.ndarray>y)
    return nx > 0 and ny > 0 and x0 < y0 + ny and y0 < x0 + nx
