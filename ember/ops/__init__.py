"""ember's operator library: the registry and one module per op family."""
from .registry import OPS, Op, apply, register  # noqa: F401
from . import creation, random, elementwise_composite, elementwise, logical, reduce, shape, index  # noqa: F401
from . import linalg, movement, scan, selection  # noqa: F401
from . import complex_support  # noqa: F401  (which ops take complex tensors)
from . import methods  # noqa: F401  (attaches Tensor methods)
from . import methods_extra  # noqa: F401  (methods of the op files below)
from . import methods_more  # noqa: F401  (strided views, in-place shape ops, ...)
