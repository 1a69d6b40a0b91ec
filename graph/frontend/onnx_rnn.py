"""ONNX converters of the recurrent ops RNN, GRU and LSTM, unrolled over the static sequence
length into builder ops: one gemm X @ W^T (+ the biases) for every step and direction at
once, then per step a gemm h @ R^T of the whole batch, the gates' activations and the state
update. sequence_lens is taken only as a constant equal to the sequence length everywhere.

Imports numpy, graph's builder, nn and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import builder, nn, transform
from ..builder import apply
from .onnx_base import Refused, const, only, row

# the graph grows by a few nodes per step and direction: longer sequences would make
# graphs (and O0/O1 kernel counts) that a loop operator should run instead
MAX_STEPS = 256
MAX_CONCAT = 32


def _plain(op: str, *params: str):
    def fn(x, ab, name):
        return apply(op, [x], dict(zip(params, ab)), name)
    return fn


def _affine(x, ab, name):
    scaled = apply("multiply", [x, ab[0]], {}, f"{name}/alpha")
    return apply("add", [scaled, ab[1]], {}, name)


def _scaled_tanh(x, ab, name):
    inner = apply("multiply", [x, ab[1]], {}, f"{name}/beta")
    return apply("multiply", [apply("tanh", [inner], {}, f"{name}/tanh"), ab[0]], {}, name)


# ONNX activation (lower case) -> (builder call on (x, (alpha, beta), name), the defaults of
# the alpha and beta it takes: None where the value has no default and must be given)
ACTIVATIONS = {
    "sigmoid": (_plain("sigmoid"), ()),
    "tanh": (_plain("tanh"), ()),
    "relu": (_plain("relu"), ()),
    "softsign": (_plain("softsign"), ()),
    "softplus": (_plain("softplus"), ()),
    "leakyrelu": (_plain("leaky_relu", "alpha"), (0.01,)),
    "thresholdedrelu": (_plain("thresholded_relu", "alpha"), (1.0,)),
    "elu": (_plain("elu", "alpha"), (1.0,)),
    "hardsigmoid": (_plain("hard_sigmoid", "alpha", "beta"), (0.2, 0.5)),
    "affine": (_affine, (None, None)),
    "scaledtanh": (_scaled_tanh, (None, None)),
}


@dataclass(frozen=True)
class _Kind:
    op: str
    gates: int              # gate blocks in W and R
    activations: tuple      # the default activations of one direction
    step: Callable          # (state, xw_t, r_d, extras, acts, clip, name) -> new state


def _activations(attrs, kind: _Kind, dirs: int) -> list:
    """Per direction, the activation functions as callables (x, name) -> Value; alpha and
    beta are consumed in order by the activations that take them."""
    names = list(attrs.get("activations") or kind.activations * dirs)
    if len(names) != len(kind.activations) * dirs:
        raise Refused("activations", f"{kind.op} needs {len(kind.activations)} activations "
                                     f"per direction ({dirs * len(kind.activations)} in all), "
                                     f"got {names}")
    alphas = list(attrs.get("activation_alpha", ()))
    betas = list(attrs.get("activation_beta", ()))
    funcs = []
    for name in names:
        if name.lower() not in ACTIVATIONS:
            raise Refused("activations", f"activation {name!r} not supported (supported: "
                                         f"{sorted(ACTIVATIONS)}, in any case)")
        fn, defaults = ACTIVATIONS[name.lower()]
        given = [alphas, betas][:len(defaults)]
        ab = tuple(float(src.pop(0)) if src else d for src, d in zip(given, defaults))
        if None in ab:
            raise Refused("activation_alpha", f"activation {name!r} needs activation_alpha "
                                              f"and activation_beta values")
        funcs.append(lambda x, label, fn=fn, ab=ab: fn(x, ab, label))
    n = len(kind.activations)
    return [funcs[d * n:(d + 1) * n] for d in range(dirs)]


def _gate(x, act, clip, name):
    """act(x), x first clipped to [-clip, clip] where the node has a clip."""
    if clip is not None:
        x = transform.clip(x, -clip, clip, name=f"{name}/clip")
    return act(x, name)


def _rnn_step(state, xw, r, extras, acts, clip, name):
    (h,) = state
    pre = nn.gemm(h, r, xw, trans_b=True, name=f"{name}/pre")
    return (_gate(pre, acts[0], clip, f"{name}/h"),)


def _gru_step(state, xw, r, extras, acts, clip, name):
    """Gates z, r and the candidate n: with linear_before_reset the candidate is
    g(xw_n + r * (h @ Rn^T + Rbn)), else g(xw_n + (r * h) @ Rn^T) with Rbn in xw."""
    (h,) = state
    hidden = h.shape[1]
    xw_zr, xw_n = transform.split(xw, (2 * hidden, hidden), 1, name=f"{name}/xw")
    if extras["linear_before_reset"]:
        rec = nn.gemm(h, r, extras["rb"], trans_b=True, name=f"{name}/rec")
        rec_zr, rec_n = transform.split(rec, (2 * hidden, hidden), 1, name=f"{name}/recs")
        pre_zr = apply("add", [xw_zr, rec_zr], {}, f"{name}/pre_zr")
    else:
        r_zr, r_n = extras["r_split"]
        pre_zr = nn.gemm(h, r_zr, xw_zr, trans_b=True, name=f"{name}/pre_zr")
    z_pre, r_pre = transform.split(pre_zr, (hidden, hidden), 1, name=f"{name}/zr")
    z = _gate(z_pre, acts[0], clip, f"{name}/z")
    reset = _gate(r_pre, acts[0], clip, f"{name}/r")
    if extras["linear_before_reset"]:
        gated = apply("multiply", [reset, rec_n], {}, f"{name}/r_rec")
        pre_n = apply("add", [xw_n, gated], {}, f"{name}/pre_n")
    else:
        rh = apply("multiply", [reset, h], {}, f"{name}/rh")
        pre_n = nn.gemm(rh, r_n, xw_n, trans_b=True, name=f"{name}/pre_n")
    n = _gate(pre_n, acts[1], clip, f"{name}/n")
    # (1 - z) * n + z * h as n + z * (h - n)
    diff = apply("subtract", [h, n], {}, f"{name}/h_n")
    return (apply("add", [n, apply("multiply", [z, diff], {}, f"{name}/z_diff")], {},
                  f"{name}/h"),)


def _lstm_step(state, xw, r, extras, acts, clip, name):
    """Gates i, o, f, c (ONNX's order) with peepholes P = (Pi, Po, Pf) where given; with
    input_forget the forget gate is 1 - i."""
    h, c = state
    pre = nn.gemm(h, r, xw, trans_b=True, name=f"{name}/pre")
    hidden = h.shape[1]
    i_pre, o_pre, f_pre, c_pre = transform.split(pre, (hidden,) * 4, 1, name=f"{name}/gates")
    peep = extras["peepholes"]

    def peephole(x, k, cell, tag):
        if peep is None:
            return x
        return apply("add", [x, apply("multiply", [peep[k], cell], {}, f"{name}/p{tag}")],
                     {}, f"{name}/{tag}_peep")
    i = _gate(peephole(i_pre, 0, c, "i"), acts[0], clip, f"{name}/i")
    if extras["input_forget"]:
        f = apply("subtract", [1.0, i], {}, f"{name}/f")
    else:
        f = _gate(peephole(f_pre, 2, c, "f"), acts[0], clip, f"{name}/f")
    cand = _gate(c_pre, acts[1], clip, f"{name}/g")
    c_new = apply("add", [apply("multiply", [f, c], {}, f"{name}/fc"),
                          apply("multiply", [i, cand], {}, f"{name}/ig")], {}, f"{name}/c")
    o = _gate(peephole(o_pre, 1, c_new, "o"), acts[0], clip, f"{name}/o")
    h_new = apply("multiply", [o, acts[2](c_new, f"{name}/hc")], {}, f"{name}/h")
    return (h_new, c_new)


RNN = _Kind("RNN", 1, ("Tanh",), _rnn_step)
GRU = _Kind("GRU", 3, ("Sigmoid", "Tanh"), _gru_step)
LSTM = _Kind("LSTM", 4, ("Sigmoid", "Tanh", "Tanh"), _lstm_step)


def _check_shapes(kind: _Kind, ins, attrs, dirs: int, layout: int) -> tuple:
    """(steps, batch, hidden) once X, W, R, B, the initial states and P have the shapes
    ONNX gives them, X is static and of a float type, and the sequence is short enough."""
    x, w, r, b, _, h0, c0, p = ins
    if len(x.shape) != 3 or any(not isinstance(d, int) for d in x.shape):
        raise Refused("", f"input X must be 3-d with a static shape, got {list(x.shape)}")
    if x.dtype not in ("float32", "float64"):
        raise Refused("", f"dtype {x.dtype} is not supported (float32 and float64 only)")
    steps, batch, size = (x.shape[1], x.shape[0], x.shape[2]) if layout else x.shape
    hidden = int(attrs.get("hidden_size", r.shape[-1]))
    gh = kind.gates * hidden
    batch_first = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    want = {"W": (w, (dirs, gh, size)), "R": (r, (dirs, gh, hidden)),
            "B": (b, (dirs, 2 * gh)), "initial_h": (h0, batch_first),
            "initial_c": (c0, batch_first), "P": (p, (dirs, 3 * hidden))}
    for what, (v, shape) in want.items():
        if v is not None and tuple(v.shape) != shape:
            raise Refused("", f"input {what} must have shape {list(shape)} (hidden_size "
                              f"{hidden}, {dirs} direction(s)), got {list(v.shape)}")
        if v is not None and v.dtype != x.dtype:
            raise Refused("", f"input {what} must have X's dtype {x.dtype}, got {v.dtype}")
    if steps > MAX_STEPS:
        raise Refused("", f"a sequence of {steps} steps is longer than supported "
                          f"({MAX_STEPS}): {kind.op} is unrolled into the graph step by "
                          f"step, which grows with the sequence length")
    return steps, batch, hidden


def _check_lengths(lens, steps: int, batch: int) -> None:
    if lens is None:
        return
    why = (f"input 'sequence_lens' must be a constant equal to the sequence length {steps} "
           f"for every batch entry (shorter sequences are not supported)")
    try:
        data = np.asarray(const(lens, "sequence_lens"))
    except Refused as e:
        raise Refused("", why, e.needs) from None
    if data.reshape(-1).shape != (batch,) or (data != steps).any():
        raise Refused("", f"{why}, got {data.tolist()}")


def _direction(v, d: int, shape: tuple, name: str):
    """v[d] (one direction of W, R, B, P or an initial state) reshaped to `shape`."""
    if v.shape[0] == 1:
        return transform.reshape(v, shape, name=name)
    part = transform.slice(v, [d], [d + 1], [0], name=f"{name}/slice")
    return transform.reshape(part, shape, name=name)


def _projection(kind: _Kind, x, w, b, gru_linear: bool, dirs: int, hidden: int, name: str):
    """X @ W^T + Wb + Rb for every step and direction: (steps, batch, dirs * gates *
    hidden). With linear_before_reset GRU's Rb stays out (it is added inside the reset)."""
    steps, batch, size = x.shape
    gh = kind.gates * hidden
    bias = None
    if b is not None:
        wb = transform.slice(b, [0], [gh], [1], name=f"{name}/Wb")
        bias = wb if gru_linear else apply(
            "add", [wb, transform.slice(b, [gh], [2 * gh], [1], name=f"{name}/Rb")], {},
            f"{name}/bias2d")
        bias = transform.reshape(bias, (dirs * gh,), name=f"{name}/bias")
    flat = transform.reshape(x, (steps * batch, size), name=f"{name}/x2d")
    weights = transform.reshape(w, (dirs * gh, size), name=f"{name}/w2d")
    xw = nn.gemm(flat, weights, bias, trans_b=True, name=f"{name}/2d")
    return transform.reshape(xw, (steps, batch, dirs * gh), name=name)


def _extras(kind: _Kind, attrs, r_d, b, p, d: int, hidden: int, name: str) -> dict:
    """The per-direction values a step reads besides its state and R."""
    if kind is GRU:
        linear = bool(attrs.get("linear_before_reset", 0))
        gh = 3 * hidden
        if not linear:  # Rb is in the projection
            rb = None
        elif b is None:
            rb = builder.constant(np.zeros(gh, r_d.dtype), name=f"{name}/Rb")
        else:
            rb = transform.reshape(transform.slice(b, [d, gh], [d + 1, 2 * gh], [0, 1],
                                                   name=f"{name}/Rb2d"), (gh,),
                                   name=f"{name}/Rb")
        r_split = None if linear else transform.split(r_d, (2 * hidden, hidden), 0,
                                                      name=f"{name}/Rzr_n")
        return {"linear_before_reset": linear, "rb": rb, "r_split": r_split}
    if kind is LSTM:
        peep = None if p is None else transform.split(
            _direction(p, d, (3 * hidden,), f"{name}/P"), (hidden,) * 3, 0,
            name=f"{name}/Piof")
        return {"input_forget": bool(attrs.get("input_forget", 0)), "peepholes": peep}
    return {}


def _initial(v, d: int, batch: int, hidden: int, dtype: str, name: str):
    if v is None:
        return builder.constant(np.zeros((batch, hidden), dtype), name=name)
    return _direction(v, d, (batch, hidden), name)


def _concatenate(values: list, name: str):
    """The values joined along axis 0 by concatenates of at most MAX_CONCAT inputs each
    (one kernel over hundreds of inputs nests its selects too deep to lower)."""
    level = 0
    while len(values) > 1:
        values = [values[k] if len(values) - k == 1 else transform.concatenate(
                      values[k:k + MAX_CONCAT], 0, name=f"{name}/cat{level}_{k}")
                  for k in range(0, len(values), MAX_CONCAT)]
        level += 1
    return values[0]


def _stack(values: list, shape: tuple, perm, name: str):
    """The 2-d values one after another as `shape`, transposed by `perm` (layout 1)."""
    joined = _concatenate(values, name)
    if perm is None:
        return transform.reshape(joined, shape, name=name)
    return transform.transpose(transform.reshape(joined, shape, name=f"{name}/seq_first"),
                               perm, name=name)


def _unroll(kind: _Kind, ins, attrs, outs):
    ins = (list(ins) + [None] * 8)[:8]
    direction = only(attrs, "direction", ("forward", "reverse", "bidirectional"), "forward")
    dirs = 2 if direction == "bidirectional" else 1
    layout = only(attrs, "layout", (0, 1), 0)
    steps, batch, hidden = _check_shapes(kind, ins, attrs, dirs, layout)
    x, w, r, b, lens, h0, c0, p = ins
    _check_lengths(lens, steps, batch)
    acts = _activations(attrs, kind, dirs)
    clip = float(attrs["clip"]) if attrs.get("clip") is not None else None
    name = next((o for o in outs if o), kind.op)
    if layout:  # batch first: the steps below read sequence-first values
        x, h0, c0 = (None if v is None else transform.transpose(v, (1, 0, 2),
                                                                name=f"{name}/{tag}_sbh")
                     for v, tag in ((x, "X"), (h0, "h0"), (c0, "c0")))
    gru_linear = kind is GRU and bool(attrs.get("linear_before_reset", 0))
    xw = _projection(kind, x, w, b, gru_linear, dirs, hidden, f"{name}/xw")
    seqs, finals = [], []
    gh = kind.gates * hidden
    for d in range(dirs):
        tag = f"{name}/d{d}"
        r_d = _direction(r, d, (gh, hidden), f"{tag}/R")
        states = tuple(_initial(v, d, batch, hidden, x.dtype, f"{tag}/{k}0")
                       for v, k in ((h0, "h"), (c0, "c"))[:2 if kind is LSTM else 1])
        seq, final = _direction_steps(kind, xw, d, direction == "reverse" or d == 1, r_d,
                                      _extras(kind, attrs, r_d, b, p, d, hidden, tag),
                                      states, acts[d], clip, tag)
        seqs.append(seq)
        finals.append(final)
    result = [None] * len(outs)
    if outs and outs[0]:
        result[0] = _stack([seq[t] for t in range(steps) for seq in seqs],
                           (steps, dirs, batch, hidden), (2, 0, 1, 3) if layout else None,
                           outs[0])
    for k in range(1, len(outs)):
        if outs[k]:
            result[k] = _stack([state[k - 1] for state in finals], (dirs, batch, hidden),
                               (1, 0, 2) if layout else None, outs[k])
    return result


def _direction_steps(kind: _Kind, xw, d: int, reverse: bool, r_d, extras: dict,
                     state: tuple, acts: list, clip, name: str) -> tuple:
    """Direction d's steps over the projected input xw (its columns d * gates * hidden on):
    (its h per step in time order, its final state)."""
    steps, batch, _ = xw.shape
    gh = r_d.shape[0]
    seq = [None] * steps
    for t in reversed(range(steps)) if reverse else range(steps):
        at = transform.slice(xw, [t, d * gh], [t + 1, (d + 1) * gh], [0, 2],
                             name=f"{name}/t{t}/xw3d")
        xw_t = transform.reshape(at, (batch, gh), name=f"{name}/t{t}/xw")
        state = kind.step(state, xw_t, r_d, extras, acts, clip, f"{name}/t{t}")
        seq[t] = state[0]
    return seq, state


def _converter(kind: _Kind, *own_attrs: str):
    def fn(ins, attrs, opset, outs):
        return _unroll(kind, ins, attrs, outs)
    # output_sequence (before opset 7) only said whether Y may be omitted
    return row(fn, "activation_alpha", "activation_beta", "activations", "clip", "direction",
               "hidden_size", "layout", "output_sequence", *own_attrs)


RNN_CONVERTERS = {
    "RNN": _converter(RNN),
    "GRU": _converter(GRU, "linear_before_reset"),
    "LSTM": _converter(LSTM, "input_forget"),
}
