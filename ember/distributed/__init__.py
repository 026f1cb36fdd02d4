"""``ember.distributed``: collectives and parallel training on MPI (mpi4py), with
``torch.distributed``'s names.

>>> import ember.distributed as dist
>>> dist.init_process_group("mpi")     # under mpiexec: rank and size from MPI
>>> t = ember.ones(4)
>>> dist.all_reduce(t)                 # sum over every rank, in place
"""
from .collectives import (GroupMember, ReduceOp, all_gather, all_gather_into_tensor, all_reduce,
                          all_to_all, all_to_all_single, barrier, broadcast,
                          destroy_process_group, gather, get_backend, get_rank,
                          get_world_size, group_world, init_process_group, irecv,
                          is_available, is_initialized, isend, new_group, recv, reduce,
                          reduce_scatter, reduce_scatter_tensor, scatter, send)
from .debug import is_debug, set_debug
from .process_group import (DistributedError, ProcessGroup, Work, get_timeout,
                            set_timeout)

__all__ = ["GroupMember", "ReduceOp", "init_process_group", "is_initialized", "is_available",
           "destroy_process_group", "get_rank", "get_world_size", "get_backend",
           "new_group", "barrier", "all_reduce", "broadcast", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "reduce",
           "gather", "scatter", "all_to_all", "all_to_all_single", "send", "recv", "isend",
           "irecv", "group_world", "DistributedError", "ProcessGroup", "Work",
           "get_timeout", "set_timeout", "is_debug", "set_debug"]
from . import nn  # noqa: E402  (autograd-aware collectives: ember.distributed.nn.functional)
from .models import GPT, gpt_stages  # noqa: E402
from .tensor_parallel import (ColumnParallelLinear, ParallelGPT, ParallelMLP,  # noqa: E402
                              ParallelSelfAttention, RowParallelLinear,
                              VocabParallelEmbedding, average_gradients, parallel_slices,
                              parallelize_gpt)

__all__ += ["nn", "GPT", "gpt_stages", "ColumnParallelLinear", "RowParallelLinear",
            "VocabParallelEmbedding", "ParallelSelfAttention", "ParallelMLP", "ParallelGPT",
            "parallelize_gpt", "parallel_slices", "average_gradients"]
from .ddp import DistributedDataParallel  # noqa: E402
from .sampler import DistributedSampler  # noqa: E402
__all__ += ["DistributedDataParallel", "DistributedSampler"]
from .pipeline import Pipeline, split_stages  # noqa: E402
__all__ += ["Pipeline", "split_stages"]
from .zero import ZeroRedundancyOptimizer  # noqa: E402
__all__ += ["ZeroRedundancyOptimizer"]
from . import checkpoint  # noqa: E402
