"""Data parallelism whose bits do not depend on the worker count.

A global step is M micro-batches with global indices 0 .. M-1, M fixed by the run; worker r of
W computes indices r, r + W, r + 2W, ... (`local_indices`, the DataLoader's sharding). The mean
gradient over the step has the same bits for every W dividing M, for one process accumulating
all M, and whatever algorithm MPI picks, because it is an exact sum:

    grid       each parameter has a grid 2^G, G = P - 54, where P is a prior exponent: the
               exponent of the largest |element| of the previous step's reduced sum (0 at the
               first step). P is the same on every worker and is saved in the checkpoint.
    quantise   micro-batch i with n_i samples contributes v = n_i·g_i (exact in double) as the
               integer round(v / 2^G) (round half to even; exact for |v| >= 2^(P - 31)). |v| is
               clamped below 2^(P + 44) (2^44 times the last step's largest sum; counted and
               warned): with at most 2^20 micro-batches the sum never overflows 118 bits.
    sum        integers add exactly, so the sum of the micro-batches is one integer whatever the
               order and grouping. Locally each element's sum is one int64 ("packed"): each
               micro-batch's integers are written packed into a small scratch (a chunk at a
               time, in cache) and added in, which is exact while each lies inside 2^56 and at
               most 127 are added; a parameter with a larger integer, or more micro-batches,
               goes over to two int64 limbs, hi·2^56 + lo, for the rest of the step. Then
               MPI_Allreduce(SUM) of each integer packed whole into one int64 (contiguous
               buffers, in place, bucket by bucket). The packed sum of W workers is exact when
               no worker's integer lies outside 2^(63 - ceil(log2 W)), which holds unless a
               worker's sum grows about 2^(8 - ceil(log2 W)) times past the last step's
               largest; the workers count the integers outside in the same message as the other
               counts, and a bucket with any also sums its high limbs, from which the sum of the
               low limbs follows (the packed sum less the hi sum times 2^56, modulo 2^64).
               Either way the same integer, the same bits.
    round      the integer X is divided by the sample count N in integers, the quotient kept
               to at least 26 bits with its remainder jammed into the last bit (round to odd),
               converted to float32 and scaled by 2^G (for N a power of two, X converted
               directly): the exact mean X·2^G/N (and the sum, N = 1) rounded once to nearest
               even, except in float32's subnormal range.

    single     with one micro-batch a worker (M = W), the integers are not all-reduced: each
               worker sends shard r of every bucket's float32 gradients to worker r, straight
               from the gradients' own arrays (point-to-point messages, one per parameter
               piece), and worker r quantises the W rows of its shard as above, sums and rounds
               them in cache; the rounded shards are all-gathered. The same integers, so the
               same bits.

A non-finite element anywhere makes that element NaN or ±inf, as a float sum would (a second,
rare all-reduce of a byte per element with bitwise OR). Bytes per worker: 8 per element (one
int64), 2x float32's 4, which a ring all-reduce moves 2(W-1)/W times like float32's, plus a few
integers per parameter (16 per element in a step with wide sums); a single step moves 4 per
element (W-1)/W times each way in the exchange and again in the all-gather: a float32 ring
all-reduce's bytes. Memory: one int64 per element whatever M is (two limbs, 16 bytes, only for
a parameter whose sum outgrows it in that step, allocated for the step), and no result buffer:
the Trainer's gradients are rounded into the integers' own memory (results(reuse=True)), a chunk
at a time in the order the integers lie, each float32 over integers already rounded; a single
step has no integers (allocated at the first add): it holds the gradients it sent until the next
step and two float32 buffers, the shards received and gathered. Quantising and rounding are one
pass each in C (csrc/exact.c).

Overlap: the buckets are laid out in reverse parameter order, of about 25 MB of float32
(DDP's size); `ExactSum.add_one(..., final=True)` quantises one gradient as
backward completes it (the Trainer calls it from a post-accumulate-grad hook) and starts a
bucket's all-reduce once all its parameters are in, while backward goes on.

Faults: `init()` installs an exception hook that prints the traceback once and calls MPI Abort,
so an exception on any rank ends the job; every wait polls its requests against a deadline
(`ONEMODEL_DIST_TIMEOUT` seconds, default 300), so a rank that never arrives ends the job with
a message instead of a hang. A rank killed by a signal prints nothing itself (SIGKILL cannot be
caught) and the launcher names only its process id: on Linux `init()` starts a small watcher
process per rank (onemodel/_rank_watch.py) that prints "rank R of W (pid P) was killed by
signal SIGKILL (9)" on the rank's stderr; only the first death of a job on a host is reported,
not the other ranks the launcher then kills. Without mpi4py, or outside mpiexec, there is one
worker.
"""
from __future__ import annotations

# torch.distributed's process-group calls (onemodel/process_group.py, which reads this package)
from ..process_group import (  # noqa: F401
    ReduceOp,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
)
from .data_parallel import all_reduce_gradients, gradients, local_indices
from .exact import ExactSum, _round, max_exponent, to_float32, tree_sum  # noqa: F401
from .world import (  # noqa: F401
    _allreduce,
    _launcher_size,
    abort,
    abort_on,
    broadcast_arrays,
    broadcast_buffer,
    broadcast_bytes,
    broadcast_int,
    init,
    launched,
    rank,
    wait,
    world_size,
)
from .zero import OptimizerShards

__all__ = ["launched", "init", "rank", "world_size", "abort", "abort_on", "wait",
           "broadcast_buffer", "broadcast_arrays", "broadcast_int", "broadcast_bytes",
           "local_indices", "gradients", "tree_sum", "max_exponent", "to_float32", "ExactSum",
           "all_reduce_gradients", "OptimizerShards"]
