"""SciPy's nonlinear conjugate gradient (``scipy.optimize.minimize(method="CG")``) in JAX.

GLAD's M-step ([BDA] Appendix B.1 lists GLAD among the crowd baselines; Whitehill et al. 2009)
is crowd-kit's ``minimize(-Q, method="CG", tol=m_step_tol, options={"maxiter":
m_step_max_iter})``, truncated after a few iterations from the current point. crowd-kit's
stopping rule compares the losses of successive EM iterations, so its labels depend on where
those truncated runs land, not only on the optimum: a different optimizer gives a different EM
path. With optax's L-BFGS (zoom line search) as the M-step, 22 of crowd-kit's 24 sets keep
their accuracy, but ActiveCrowdToolkit's ZenCrowd "in" set stops after 2 EM iterations
instead of 19 and loses 0.012 of accuracy. This module therefore keeps a port of SciPy's
algorithm, iterate for iterate, for one jitted ``lax.while_loop``:

* ``scipy.optimize._minimize_cg``: Polak-Ribiere+ directions, ``gtol`` on the max-norm of the
  gradient, at most ``maxiter`` iterations, initial step ``min(1, 2.02 (f_k - f_{k-1}) / g.p)``
  (``f_{-1} = f_0 + |g_0|_2 / 2``), the sufficient-descent check ``p_{k+1}.g_{k+1} <= -0.01
  |g_{k+1}|^2``;
* line search ``line_search_wolfe12``: MINPACK DCSRCH (``line_search_wolfe1``, Moré-Thuente;
  ``c1 = 1e-4``, ``c2 = 0.4``, ``xtol = 1e-14``, 100 steps); where it fails or the descent check
  rejects its step, ``line_search_wolfe2`` (doubling bracket, then ``_zoom`` with cubic /
  quadratic interpolation; same c1, c2); if that fails too the run stops at the current point
  (SciPy's "precision loss" exit).

In float64 it reproduces SciPy's iterates to ~1e-10 (tests/crowd/test_glad_mace.py). The objective
enters through a *line*: ``line(x, p, aux, stp) -> (f(x + stp p) - f(x), grad f(x + stp p),
aux')``, with ``aux`` what the objective caches at the base point ``x``. Handing the line
search differences rather than values lets an objective compute them without cancellation, so
float32 resolves the small decreases the Wolfe tests compare (GLAD sums them row by row);
:func:`difference_line` builds a plain line from a value-and-gradient function. Positions,
gradients and directions are pytrees of arrays.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["CGResult", "difference_line", "minimize_cg"]

# scipy.optimize._minimize_cg / line_search_wolfe1 / DCSRCH constants.
_C1, _C2, _XTOL, _SIGMA3, _LS_MAXITER = 1e-4, 0.4, 1e-14, 0.01, 100


def _dcstep(stx, fx, dx, sty, fy, dy, stp, fp, dp, brackt, stpmin, stpmax):
    """MINPACK DCSTEP (scipy.optimize._dcsrch.dcstep), branch-free."""
    sgnd = jnp.sign(dp) * jnp.sign(dx)
    amax3 = lambda a, b, c: jnp.maximum(jnp.maximum(jnp.abs(a), jnp.abs(b)), jnp.abs(c))
    theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp
    s = amax3(theta, dx, dp)
    disc = (theta / s) ** 2 - (dx / s) * (dp / s)
    # case 1: higher function value -> bracketed, cubic or mid cubic/quadratic
    root = s * jnp.sqrt(disc)
    g1 = jnp.where(stp < stx, -root, root)
    r1 = ((g1 - dx) + theta) / (((g1 - dx) + g1) + dp)
    stpc1 = stx + r1 * (stp - stx)
    stpq1 = stx + ((dx / ((fx - fp) / (stp - stx) + dx)) / 2.0) * (stp - stx)
    stpf1 = jnp.where(jnp.abs(stpc1 - stx) <= jnp.abs(stpq1 - stx), stpc1,
                      stpc1 + (stpq1 - stpc1) / 2.0)
    # case 2: derivatives of opposite sign -> bracketed
    g2 = jnp.where(stp > stx, -root, root)
    r2 = ((g2 - dp) + theta) / (((g2 - dp) + g2) + dx)
    stpc2 = stp + r2 * (stx - stp)
    stpq2 = stp + (dp / (dp - dx)) * (stx - stp)
    stpf2 = jnp.where(jnp.abs(stpc2 - stp) > jnp.abs(stpq2 - stp), stpc2, stpq2)
    # case 3: same sign, derivative magnitude decreases
    g3 = s * jnp.sqrt(jnp.maximum(0.0, disc))
    g3 = jnp.where(stp > stx, -g3, g3)
    r3 = ((g3 - dp) + theta) / ((g3 + (dx - dp)) + g3)
    stpc3 = jnp.where((r3 < 0) & (g3 != 0), stp + r3 * (stx - stp),
                      jnp.where(stp > stx, stpmax, stpmin))
    stpq3 = stp + (dp / (dp - dx)) * (stx - stp)
    near = jnp.where(jnp.abs(stpc3 - stp) < jnp.abs(stpq3 - stp), stpc3, stpq3)
    near = jnp.where(stp > stx, jnp.minimum(stp + 0.66 * (sty - stp), near),
                     jnp.maximum(stp + 0.66 * (sty - stp), near))
    far = jnp.clip(jnp.where(jnp.abs(stpc3 - stp) > jnp.abs(stpq3 - stp), stpc3, stpq3),
                   stpmin, stpmax)
    stpf3 = jnp.where(brackt, near, far)
    # case 4: same sign, derivative magnitude does not decrease
    theta4 = 3.0 * (fp - fy) / (sty - stp) + dy + dp
    s4 = amax3(theta4, dy, dp)
    g4 = s4 * jnp.sqrt((theta4 / s4) ** 2 - (dy / s4) * (dp / s4))
    g4 = jnp.where(stp > sty, -g4, g4)
    r4 = ((g4 - dp) + theta4) / (((g4 - dp) + g4) + dy)
    stpf4 = jnp.where(brackt, stp + r4 * (sty - stp), jnp.where(stp > stx, stpmax, stpmin))

    c1 = fp > fx
    c2 = ~c1 & (sgnd < 0)
    c3 = ~c1 & ~c2 & (jnp.abs(dp) < jnp.abs(dx))
    stpf = jnp.where(c1, stpf1, jnp.where(c2, stpf2, jnp.where(c3, stpf3, stpf4)))
    brackt = brackt | c1 | c2
    to_y = c1 | (sgnd < 0)
    src = lambda a_x, a_p: jnp.where(c1, a_p, a_x)        # y <- p if c1 else x
    sty, fy, dy = (jnp.where(to_y, src(stx, stp), sty), jnp.where(to_y, src(fx, fp), fy),
                   jnp.where(to_y, src(dx, dp), dy))
    stx, fx, dx = (jnp.where(c1, stx, stp), jnp.where(c1, fx, fp), jnp.where(c1, dx, dp))
    return stx, fx, dx, sty, fy, dy, stpf, brackt


class _Search(NamedTuple):
    stp: jax.Array
    stage: jax.Array
    brackt: jax.Array
    width: jax.Array
    width1: jax.Array
    stx: jax.Array
    fx: jax.Array
    gx: jax.Array
    sty: jax.Array
    fy: jax.Array
    gy: jax.Array
    stmin: jax.Array
    stmax: jax.Array


def _dcsrch_iterate(st: _Search, f, g, ginit, stpmin, stpmax):
    """One ``DCSRCH._iterate`` after START (finit = 0: f is a difference). Returns (state,
    status) with status 0 = evaluate the new ``stp``, 1 = converged, 2 = warning (failure)."""
    gtest = _C1 * ginit
    stp = st.stp
    ftest = stp * gtest
    stage = jnp.where((st.stage == 1) & (f <= ftest) & (g >= 0), 2, st.stage)
    warn = ((st.brackt & ((stp <= st.stmin) | (stp >= st.stmax)))
            | (st.brackt & (st.stmax - st.stmin <= _XTOL * st.stmax))
            | ((stp == stpmax) & (f <= ftest) & (g <= gtest))
            | ((stp == stpmin) & ((f > ftest) | (g >= gtest))))
    conv = (f <= ftest) & (jnp.abs(g) <= _C2 * -ginit)
    status = jnp.where(conv, 1, jnp.where(warn, 2, 0)).astype(jnp.int32)

    mod = (stage == 1) & (f <= st.fx) & (f > ftest)
    sh = lambda v, s_: jnp.where(mod, v - s_ * gtest, v)
    shg = lambda v: jnp.where(mod, v - gtest, v)
    stx, fx, gx, sty, fy, gy, stp_new, brackt = _dcstep(
        st.stx, sh(st.fx, st.stx), shg(st.gx), st.sty, sh(st.fy, st.sty), shg(st.gy), stp,
        sh(f, stp), shg(g), st.brackt, st.stmin, st.stmax)
    fx = jnp.where(mod, fx + stx * gtest, fx)
    fy = jnp.where(mod, fy + sty * gtest, fy)
    gx = jnp.where(mod, gx + gtest, gx)
    gy = jnp.where(mod, gy + gtest, gy)
    bisect = brackt & (jnp.abs(sty - stx) >= 0.66 * st.width1)
    stp_new = jnp.where(bisect, stx + 0.5 * (sty - stx), stp_new)
    width1 = jnp.where(brackt, st.width, st.width1)
    width = jnp.where(brackt, jnp.abs(sty - stx), st.width)
    stmin = jnp.where(brackt, jnp.minimum(stx, sty), stp_new + 1.1 * (stp_new - stx))
    stmax = jnp.where(brackt, jnp.maximum(stx, sty), stp_new + 4.0 * (stp_new - stx))
    stp_new = jnp.clip(stp_new, stpmin, stpmax)
    stp_new = jnp.where((brackt & ((stp_new <= stmin) | (stp_new >= stmax)))
                        | (brackt & (stmax - stmin <= _XTOL * stmax)), stx, stp_new)
    status = jnp.where((status == 0) & ~jnp.isfinite(stp_new), 2, status).astype(jnp.int32)
    new = _Search(stp_new, stage, brackt, width, width1, stx, fx, gx, sty, fy, gy, stmin, stmax)
    keep = status != 0
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), st._replace(stage=stage),
                                 new)
    return new, status


class _Point(NamedTuple):
    """The objective along the search line at one step: ``f`` (difference to the base point),
    ``g`` (directional derivative), ``grad`` (pytree) and the objective's cache ``aux``."""

    f: jax.Array
    g: jax.Array
    grad: Any
    aux: Any


def _zeros_point(ev, stp):
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(ev, stp))


def _wolfe1(ev, g0, alpha1):
    """``scipy.optimize.line_search_wolfe1`` (MINPACK DCSRCH, c1 = 1e-4, c2 = 0.4, at most 100
    steps) for ``phi(a) = ev(a).f`` with ``phi(0) = 0``, ``phi'(0) = g0``. Returns (ok, stp,
    point at stp)."""
    dt = alpha1.dtype
    stpmin = jnp.asarray(max(1e-100, float(jnp.finfo(dt).tiny)), dt)
    stpmax = jnp.asarray(min(1e100, float(jnp.finfo(dt).max)), dt)
    zero = jnp.zeros((), dt)
    st = _Search(alpha1, jnp.int32(1), jnp.bool_(False), stpmax - stpmin,
                 (stpmax - stpmin) / 0.5, zero, zero, g0, zero, zero, g0, zero,
                 alpha1 + 4.0 * alpha1)
    bad_start = (alpha1 < stpmin) | (alpha1 > stpmax) | (g0 >= 0)

    def cond(c):
        i, status, *_ = c
        return (status == 0) & (i < _LS_MAXITER)

    def body(c):
        i, _, st, _ = c
        pt = ev(st.stp)
        st, status = _dcsrch_iterate(st, pt.f, pt.g, g0, stpmin, stpmax)
        return i + 1, status, st, pt

    _, status, st, pt = jax.lax.while_loop(
        cond, body, (jnp.int32(1), jnp.where(bad_start, 2, 0).astype(jnp.int32), st,
                     _zeros_point(ev, alpha1)))
    return status == 1, st.stp, pt


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """scipy.optimize._linesearch._cubicmin; NaN where SciPy returns None."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    u, v = fb - fa - fpa * db, fc - fa - fpa * dc
    A = (dc ** 2 * u - db ** 2 * v) / denom
    B = (-dc ** 3 * u + db ** 3 * v) / denom
    radical = B * B - 3 * A * fpa
    xmin = a + (-B + jnp.sqrt(radical)) / (3 * A)
    ok = (denom != 0) & (A != 0) & (radical >= 0) & jnp.isfinite(xmin)
    return jnp.where(ok, xmin, jnp.nan)


def _quadmin(a, fa, fpa, b, fb):
    """scipy.optimize._linesearch._quadmin; NaN where SciPy returns None."""
    db = b - a
    B = (fb - fa - fpa * db) / (db * db)
    xmin = a - fpa / (2.0 * B)
    ok = (db != 0) & (B != 0) & jnp.isfinite(xmin)
    return jnp.where(ok, xmin, jnp.nan)


class _W2(NamedTuple):
    phase: jax.Array      # 0 bracketing, 1 zoom, 2 accepted, 3 failed
    i: jax.Array          # bracketing steps (doublings)
    j: jax.Array          # zoom steps
    a0: jax.Array         # bracketing: previous point, value, slope; trial point a1
    f0: jax.Array
    d0: jax.Array
    a1: jax.Array
    lo: jax.Array         # zoom: a_lo, a_hi, phi_lo, phi_hi, derphi_lo, a_rec, phi_rec
    hi: jax.Array
    flo: jax.Array
    fhi: jax.Array
    dlo: jax.Array
    arec: jax.Array
    frec: jax.Array
    stp: jax.Array


def _wolfe2(ev, g0, alpha1, extra):
    """``scipy.optimize.line_search_wolfe2`` (bracketing by doubling, at most 10 steps, then
    ``_zoom`` with cubic/quadratic interpolation, at most 11 steps; c1 = 1e-4, c2 = 0.4) with
    SciPy's ``extra_condition`` as ``extra(point)``. One evaluation per loop step (the trial point
    is chosen first), so the objective is traced once. Returns (ok, stp, point at stp)."""
    z = jnp.zeros((), alpha1.dtype)
    i0 = jnp.int32(0)
    sel = lambda m, x, y: jax.tree_util.tree_map(lambda u, v: jnp.where(m, u, v), x, y)

    def body(c):
        st, best = c
        bracketing = st.phase == 0
        # zoom trial point (scipy _zoom: cubic, else quadratic, else bisection)
        dalpha = st.hi - st.lo
        lo_end, hi_end = jnp.minimum(st.lo, st.hi), jnp.maximum(st.lo, st.hi)
        aj = _cubicmin(st.lo, st.flo, st.dlo, st.hi, st.fhi, st.arec, st.frec)
        aj = jnp.where((st.j == 0) | jnp.isnan(aj) | (aj > hi_end - 0.2 * dalpha)
                       | (aj < lo_end + 0.2 * dalpha), jnp.nan, aj)
        aq = _quadmin(st.lo, st.flo, st.dlo, st.hi, st.fhi)
        aq = jnp.where(jnp.isnan(aq) | (aq > hi_end - 0.1 * dalpha)
                       | (aq < lo_end + 0.1 * dalpha), st.lo + 0.5 * dalpha, aq)
        aj = jnp.where(jnp.isnan(aj), aq, aj)
        a = jnp.where(bracketing, st.a1, aj)
        pt = ev(a)
        f, d = pt.f, pt.g
        ok_curv = jnp.abs(d) <= -_C2 * g0
        # bracketing update (pt is the point at a1)
        capped = st.i >= 10                                  # SciPy's for-else: take a1
        high_b = (f > _C1 * a * g0) | ((f >= st.f0) & (st.i > 0))
        accept_b = capped | (~high_b & ok_curv & extra(pt))
        flip_b = ~high_b & ~accept_b & (d >= 0)
        zoom_b = high_b | flip_b
        b = st._replace(a0=a, f0=f, d0=d, a1=2.0 * a, i=st.i + 1)
        b = sel(zoom_b, st._replace(
            phase=jnp.int32(1), j=i0, arec=z, frec=z,
            lo=jnp.where(high_b, st.a0, a), hi=jnp.where(high_b, a, st.a0),
            flo=jnp.where(high_b, st.f0, f), fhi=jnp.where(high_b, f, st.f0),
            dlo=jnp.where(high_b, st.d0, d)), b)
        b = b._replace(phase=jnp.where(st.a1 == 0, 3, jnp.where(accept_b, 2, b.phase)),
                       stp=a)
        # zoom update (pt is the point at aj)
        high = (f > _C1 * a * g0) | (f >= st.flo)
        accept_z = ~high & ok_curv & extra(pt)
        flip = d * (st.hi - st.lo) >= 0
        zz = st._replace(
            hi=jnp.where(high, a, jnp.where(flip, st.lo, st.hi)),
            fhi=jnp.where(high, f, jnp.where(flip, st.flo, st.fhi)),
            frec=jnp.where(high | flip, st.fhi, st.flo),
            arec=jnp.where(high | flip, st.hi, st.lo),
            lo=jnp.where(high, st.lo, a), flo=jnp.where(high, st.flo, f),
            dlo=jnp.where(high, st.dlo, d), j=st.j + 1, stp=a)
        zz = zz._replace(phase=jnp.where(accept_z, 2, jnp.where(st.j + 1 > 10, 3, 1)))
        accept = jnp.where(bracketing, accept_b & (st.a1 != 0), accept_z)
        return sel(bracketing, b, zz), sel(accept, pt, best)

    st = _W2(jnp.int32(0), i0, i0, z, z, g0, alpha1, z, z, z, z, z, z, z, z)
    st, best = jax.lax.while_loop(lambda c: c[0].phase < 2, body,
                                  (st, _zeros_point(ev, alpha1)))
    return st.phase == 2, st.stp, best


def _dot(a, b):
    """``sum_leaves a . b`` of two pytrees of arrays, leaf by leaf in order."""
    return functools.reduce(operator.add, [x.reshape(-1) @ y.reshape(-1) for x, y in
                                           zip(jax.tree_util.tree_leaves(a),
                                               jax.tree_util.tree_leaves(b))])


def _gnorm(grad):
    """Max-norm of a pytree gradient (SciPy's default ``norm=inf``)."""
    return functools.reduce(jnp.maximum, [jnp.abs(x).max(initial=0.0)
                                          for x in jax.tree_util.tree_leaves(grad)])


def _axpy(alpha, x, y):
    """``alpha * x + y`` over pytrees."""
    return jax.tree_util.tree_map(lambda u, v: alpha * u + v, x, y)


class _CG(NamedTuple):
    x: Any
    grad: Any
    p: Any
    aux: Any
    gnorm: jax.Array
    df: jax.Array
    k: jax.Array
    failed: jax.Array


class CGResult(NamedTuple):
    """``x`` (the last accepted point, a pytree like ``x0``), ``n_iter`` (CG iterations) and
    ``failed`` (the line search found no acceptable step: SciPy's precision-loss exit)."""

    x: Any
    n_iter: jax.Array
    failed: jax.Array


def minimize_cg(line: Callable, x0, grad0, aux0, gtol, maxiter) -> CGResult:
    """``scipy.optimize.minimize(f, x0, method="CG", jac=..., options={"gtol": gtol,
    "maxiter": maxiter})`` (module docstring), traceable: call it inside ``jax.jit``.

    Args:
      line: ``line(x, p, aux, stp) -> (f(x + stp p) - f(x), grad f(x + stp p), aux')``; ``aux``
        is the objective's cache at ``x`` (returned as ``aux'`` for ``x + stp p``).
      x0: the start (a pytree of float arrays); grad0, aux0: the gradient and the cache at
        ``x0``.
      gtol: stop when the max-norm of the gradient is ``<= gtol``; maxiter: iteration cap
        (both may be traced).
    """
    dt = jax.tree_util.tree_leaves(x0)[0].dtype
    neg = lambda t: jax.tree_util.tree_map(jnp.negative, t)
    s0 = _CG(x0, grad0, neg(grad0), aux0, _gnorm(grad0), -jnp.sqrt(_dot(grad0, grad0)) / 2.0,
             jnp.int32(0), jnp.bool_(False))

    def cond(s):
        return (s.gnorm > gtol) & (s.k < maxiter) & ~s.failed

    def body(s):
        deltak = _dot(s.grad, s.grad)
        g0 = _dot(s.grad, s.p)
        alpha1 = jnp.where(g0 != 0, jnp.minimum(1.0, 1.01 * 2 * s.df / g0), 1.0)
        alpha1 = jnp.where(alpha1 < 0, 1.0, alpha1).astype(dt)

        def ev(stp):
            f, grad, aux = line(s.x, s.p, s.aux, stp)
            return _Point(f, _dot(grad, s.p), grad, aux)

        def step(pt):                                   # polak_ribiere_powell_step
            diff = jax.tree_util.tree_map(operator.sub, pt.grad, s.grad)
            beta = jnp.maximum(0.0, _dot(diff, pt.grad) / deltak)
            return _axpy(beta, s.p, neg(pt.grad))

        def descent(pt):                                # descent_condition
            return (_gnorm(pt.grad) <= gtol) | (_dot(step(pt), pt.grad)
                                                <= -_SIGMA3 * _dot(pt.grad, pt.grad))

        ok, stp, pt = _wolfe1(ev, g0, alpha1)
        ok = ok & descent(pt)
        ok, stp, pt = jax.lax.cond(ok, lambda: (ok, stp, pt),
                                   lambda: _wolfe2(ev, g0, alpha1, descent))
        new = _CG(_axpy(stp, s.p, s.x), pt.grad, step(pt), pt.aux, _gnorm(pt.grad), pt.f,
                  s.k + 1, jnp.bool_(False))
        return jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), new,
                                      s._replace(failed=jnp.bool_(True)))

    s = jax.lax.while_loop(cond, body, s0)
    return CGResult(s.x, s.k, s.failed)


def difference_line(value_and_grad: Callable) -> Callable:
    """A line for :func:`minimize_cg` from ``value_and_grad(x) -> (f(x), grad f(x))``; its
    cache is ``f`` at the base point (start with ``aux0 = f(x0)``). The differences are then
    plain differences of values.

    >>> import jax, jax.numpy as jnp
    >>> vg = jax.value_and_grad(lambda x: ((x - 3.0) ** 2).sum())
    >>> x0 = jnp.zeros(2)
    >>> f0, g0 = vg(x0)
    >>> r = jax.jit(lambda: minimize_cg(difference_line(vg), x0, g0, f0, 1e-6, 50))()
    >>> [round(float(v), 6) for v in r.x], int(r.n_iter)
    ([3.0, 3.0], 1)
    """
    def line(x, p, f_base, stp):
        f, grad = value_and_grad(_axpy(stp, p, x))
        return f - f_base, grad, f

    return line
