"""PmSVM: additive-kernel SVM on nonnegative features, trained by regression-approximated dual coordinate descent
and scored in O(d) per sample by lookup tables.

Source: J. Wu, "Power Mean SVM for Large Scale Visual Classification", CVPR 2012, and J. Wu, H. Yang,
"Linear Regression-Based Efficient SVM Learning for Large-Scale Classification", IEEE TNNLS 26(10), 2015
(the modules' equation numbers refer to the TNNLS paper); PmSVM-LUT: H. Yang, J. Wu, "Practical Large Scale
Classification with Additive Kernels", ACML 2012.

- :mod:`~svmcore.pmsvm.kernel`: the power mean kernel and its regression approximation (Eq. 25-31, 40, 41).
- :mod:`~svmcore.pmsvm.table`: the O(d) lookup-table scoring (PmSVM-LUT, :func:`lut_decision`).
- :mod:`~svmcore.pmsvm.solver`: the rows in the solvers' layout and the two compiled solvers (dual CD, SGD).
- :mod:`~svmcore.pmsvm.estimator`: the :class:`PmSVM` estimator, registered with :mod:`svmcore.persistence`.

The public names of all four are importable from here; the solvers' tuning constants (``DENSE_FROM``,
``ROWS_MAX_BYTES``, ``CHUNK_VALUES``, ``FIRST_PHASE_CAP``; ``TABLE_MAX_BYTES``) live in the module that reads them.
"""

from __future__ import annotations

from .estimator import PmSVM
from .kernel import (
    MAX_ANCHORS,
    OFFSET_B,
    PAPER_ANCHORS,
    approx_kernel,
    approximation_error,
    check_nonnegative,
    check_p,
    check_x_max,
    explanatory_variables,
    pmsvm_anchors,
    power_mean,
    power_mean_kernel,
    regression_weights,
)
from .table import lut_decision

__all__ = [
    "PmSVM",
    "lut_decision",
    "check_x_max",
    "check_p",
    "check_nonnegative",
    "power_mean",
    "power_mean_kernel",
    "pmsvm_anchors",
    "explanatory_variables",
    "regression_weights",
    "approx_kernel",
    "approximation_error",
    "PAPER_ANCHORS",
    "OFFSET_B",
    "MAX_ANCHORS",
]
