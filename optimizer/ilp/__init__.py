"""Integer programs: the single-job choice and the portfolio plan, and the solver wrapper.

Each model module writes its maths in its docstring with the same symbols its code uses.
"""

from optimizer.ilp.portfolio import (
    BuildUse,
    PortfolioBuild,
    PortfolioJob,
    PortfolioModel,
    RentalChoice,
    build_portfolio,
)
from optimizer.ilp.single import SingleModel, build_single
from optimizer.ilp.solve import SolveResult, solve, solver_name

__all__ = [
    "BuildUse",
    "PortfolioBuild",
    "PortfolioJob",
    "PortfolioModel",
    "RentalChoice",
    "SingleModel",
    "SolveResult",
    "build_portfolio",
    "build_single",
    "solve",
    "solver_name",
]
