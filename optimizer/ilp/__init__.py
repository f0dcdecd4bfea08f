"""Integer programs: the single-job choice (``single``), the portfolio plan (``portfolio``,
``portfolio_solve``) and the solver wrapper (``solve``).

Each model module writes its maths in its docstring with the same symbols its code uses. Nothing is
imported here: a quote reads the single-job model and the solver, never the portfolio.
"""
