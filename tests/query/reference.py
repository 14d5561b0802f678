"""Independent reference computations for the tests: the matrices behind the closed forms in
:mod:`warehouse.query.stats`, built by hand, and scipy's non-negative least squares."""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls


def bell_mccaffrey_df(weights: np.ndarray, variances: np.ndarray) -> float:
    """Satterthwaite's degrees of freedom of the CR2 variance of ``sum(num)/sum(den)`` from
    its G x G matrices: residuals ``r = (I - h 1') e``, estimator ``r' D r`` with
    ``D = diag(1/(1-h))``, ``e ~ N(0, diag(variances))``."""
    h = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    size = h.size
    m = np.eye(size) - np.outer(h, np.ones(size))
    a = m.T @ np.diag(1 / (1 - h)) @ m
    p = a @ np.diag(variances)
    return float(np.trace(p) ** 2 / np.trace(p @ p))


def working_variances(residual: np.ndarray, share: np.ndarray) -> np.ndarray:
    """``a*h + b*h^2`` fitted to ``residual^2/(1-h)`` by non-negative least squares."""
    target = residual * residual / (1 - share)
    basis = np.column_stack([share, share * share])
    coef = nnls(basis, target)[0]
    fitted: np.ndarray = basis @ coef
    return fitted if np.any(coef > 0) else share


def linearized_df(residual: np.ndarray, share: np.ndarray) -> float:
    """The degrees of freedom the package should give a linearized sum."""
    if np.all(share == share[0]):
        return float(share.size - 1)
    return bell_mccaffrey_df(share, working_variances(residual, share))
