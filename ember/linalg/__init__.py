"""``ember.linalg``: linear algebra with ``torch.linalg``'s names, batched over leading
dims and differentiable where PyTorch's is.

>>> A = ember.tensor([[4.0, 2.0], [2.0, 3.0]])
>>> ember.linalg.det(A)
tensor(8.)
"""
from ..ops.linalg import matmul  # noqa: F401
from ..ops.linalg_decomp import (LinAlgError, cholesky, det, eigh, eigvalsh, inv, qr,  # noqa: F401
                                 slogdet, solve, svd, svdvals)
from ..ops.linalg_extra import (cross, diagonal, lstsq, matrix_norm, matrix_power,  # noqa: F401
                                matrix_rank, multi_dot, norm, pinv, vecdot, vector_norm)
from ..ops.linalg_more import lu, lu_factor, matrix_exp, solve_triangular  # noqa: F401
from ..ops.linalg_solvers import linalg_lu_solve as lu_solve  # noqa: F401

__all__ = ["LinAlgError", "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv",
           "lstsq", "lu", "lu_factor", "lu_solve", "matmul", "matrix_exp", "matrix_norm",
           "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_triangular", "svd", "svdvals", "vecdot", "vector_norm"]
