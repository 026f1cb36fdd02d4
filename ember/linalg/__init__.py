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
from ..ops.linalg_eig import eig, eigvals  # noqa: F401
from ..ops.linalg_solvers import linalg_lu_solve as lu_solve  # noqa: F401
from .checked import cholesky_ex, cond, inv_ex, lu_factor_ex, solve_ex  # noqa: F401
from .householder import householder_product  # noqa: F401
from .ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: F401
from .tensor_ops import tensorinv, tensorsolve, vander  # noqa: F401

__all__ = ["LinAlgError", "cholesky", "cross", "det", "diagonal", "eig", "eigvals", "eigh",
           "eigvalsh", "inv",
           "lstsq", "lu", "lu_factor", "lu_solve", "matmul", "matrix_exp", "matrix_norm",
           "matrix_power",
           "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_triangular", "svd", "svdvals", "vecdot", "vector_norm", "cholesky_ex",
           "cond", "householder_product", "inv_ex", "ldl_factor", "ldl_factor_ex",
           "ldl_solve", "lu_factor_ex", "solve_ex", "tensorinv", "tensorsolve", "vander"]
