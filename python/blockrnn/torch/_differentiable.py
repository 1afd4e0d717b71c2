"""The stack's first-order gradients as differentiable torch operations: double backward.

The custom ops' backward (blockrnn::nn_rnn_grad, blockrnn::rnn_grad) is one library call whose
result autograd cannot differentiate. When a backward runs with create_graph=True (grad mode is
on inside it: torch.autograd.grad(..., create_graph=True), gradgradcheck, gradient penalties),
the stack's autograd formula computes its gradients here instead: the recurrence is recomputed
from the saved inputs with torch operations (layers, directions, per-example lengths, dropout
masks as the library applies them) and differentiated, so autograd records a graph that a second
backward can follow. The first-order path without create_graph stays the library's.

Every gate formula is the library's (TensorFlow's BlockLSTM / BlockLSTMV2, BlockGRU,
BlockGRUResetAfter), and the layers are plain autograd graphs of their forward, whose
derivative is the library's gradient, except an LSTM with cell_clip > 0: there the library
(as TensorFlow) passes the gradient through the clip as if unclipped, which is not the
derivative of the clipped forward, so such a layer is an autograd Function whose backward is
TensorFlow's BlockLSTMGrad written out in torch operations on values recomputed (with the clip,
differentiably) from its inputs; the second derivative is then the exact derivative of that
first gradient as a function of the inputs and of the incoming gradients. Steps past an
example's length keep the state, output zero and take no gradient, as in the library.
"""
from typing import List, Optional

import torch
from torch import Tensor


def _split(z: Tensor, n: int) -> List[Tensor]:
    return list(z.chunk(n, -1))


def _lstm_values(x, h0, c0, w, b, wci, wcf, wco, m, tf_order: bool, forget_bias: float,
                 clip: float):
    """The LSTM layer's forward over x [T,B,I] (m: [T,B,1] valid steps or None): y [T,B,H],
    h_T, c_T and per step (h_prev, c_prev, i, f, ci, o, co, cs) for the backward."""
    I = x.shape[2]
    xw = torch.matmul(x, w[:I]) + b
    wh = w[I:]
    h, c = h0, c0
    ys, steps = [], []
    for t in range(x.shape[0]):
        z = xw[t] + h.matmul(wh)
        if tf_order:  # TensorFlow's BlockLSTM: i, c, f, o
            zi, zc, zf, zo = _split(z, 4)
        else:  # BlockLSTMV2 and torch: i, f, g (= c), o
            zi, zf, zc, zo = _split(z, 4)
        if wci is not None:
            zi = zi + c * wci
            zf = zf + c * wcf
        i = torch.sigmoid(zi)
        f = torch.sigmoid(zf + forget_bias)
        ci = torch.tanh(zc)
        cs = i * ci + f * c
        if clip > 0:
            cs = cs.clamp(-clip, clip)
        if wco is not None:
            zo = zo + cs * wco
        o = torch.sigmoid(zo)
        co = torch.tanh(cs)
        h_new = o * co
        steps.append((h, c, i, f, ci, o, co, cs))
        if m is None:
            h, c = h_new, cs
            ys.append(h_new)
        else:
            h = m[t] * h_new + (1 - m[t]) * h
            c = m[t] * cs + (1 - m[t]) * c
            ys.append(m[t] * h_new)
    return torch.stack(ys), h, c, steps


class _ClippedLSTMLayer(torch.autograd.Function):
    """One LSTM layer and direction with cell_clip > 0: (y [T,B,H], h_T, c_T) with TensorFlow's
    gradient (the clip passes the gradient through), which is not the derivative of the
    clipped forward, so no plain autograd graph of it computes it. The backward is written in
    torch operations on values recomputed from the inputs, so it is differentiable itself.

    x arrives twice: `x` carries the gradient (the previous layer's output from this
    Function: TensorFlow's rule) and `x_value`, the same values from a plain graph, is what the
    backward recomputes from, so that the second derivative follows the previous layer's
    clipped values exactly (through `x` it would see the pass-through rule).

    Forward and backward are torch operations, so torch.vmap maps them (generate_vmap_rule:
    per-example gradients of a clipped LSTM through torch.func)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, x_value, h0, c0, w, b, wci, wcf, wco, m, tf_order, forget_bias, clip):
        y, h, c, _ = _lstm_values(x_value, h0, c0, w, b, wci, wcf, wco, m, tf_order,
                                  forget_bias, clip)
        return y, h, c

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, x_value, h0, c0, w, b, wci, wcf, wco, m, tf_order, forget_bias, clip = inputs
        ctx.save_for_backward(x_value, h0, c0, w, b, wci, wcf, wco, m)
        ctx.attrs = (tf_order, forget_bias, clip)

    @staticmethod
    def backward(ctx, gy, gh, gc):
        x, h0, c0, w, b, wci, wcf, wco, m = ctx.saved_tensors
        tf_order, forget_bias, clip = ctx.attrs
        peep = wci is not None
        _, _, _, steps = _lstm_values(x, h0, c0, w, b, wci, wcf, wco, m, tf_order,
                                      forget_bias, clip)
        I = x.shape[2]
        wh = w[I:]
        dz_steps = [None] * len(steps)
        dci_sum = dcf_sum = dco_sum = None
        for t in range(len(steps) - 1, -1, -1):
            h_prev, c_prev, i, f, ci, o, co, cs = steps[t]
            dh_new = gy[t] + gh
            dcs_in = gc
            if m is not None:
                dh_new = m[t] * dh_new
                dcs_in = m[t] * dcs_in
            # TensorFlow's LSTMBlockCellBprop; dcs is the gradient of the (clipped) cell state,
            # passed on to the unclipped sum unchanged
            do = o * (1 - o) * dh_new * co
            dcs = (1 - co * co) * dh_new * o + dcs_in
            if peep:
                dcs = dcs + do * wco
            dci = (1 - ci * ci) * dcs * i
            df = f * (1 - f) * dcs * c_prev
            di = i * (1 - i) * dcs * ci
            dz_steps[t] = torch.cat([di, dci, df, do] if tf_order else [di, df, dci, do], -1)
            dh_prev = dz_steps[t].matmul(wh.t())
            dc_prev = dcs * f
            if peep:
                dc_prev = dc_prev + di * wci + df * wcf
                terms = ((di * c_prev).sum(0), (df * c_prev).sum(0), (do * cs).sum(0))
                if dci_sum is None:
                    dci_sum, dcf_sum, dco_sum = terms
                else:
                    dci_sum = dci_sum + terms[0]
                    dcf_sum = dcf_sum + terms[1]
                    dco_sum = dco_sum + terms[2]
            if m is not None:  # a finished example carries its state's gradient through
                dh_prev = dh_prev + (1 - m[t]) * gh
                dc_prev = dc_prev + (1 - m[t]) * gc
            gh, gc = dh_prev, dc_prev
        dz = torch.stack(dz_steps)  # [T,B,4H]
        h_prevs = torch.stack([s[0] for s in steps])
        dx = dz.matmul(w[:I].t())
        dw = torch.cat([torch.einsum("tbi,tbg->ig", x, dz),
                        torch.einsum("tbh,tbg->hg", h_prevs, dz)], 0)
        db = dz.sum((0, 1))
        return (dx, None, gh, gc, dw, db, dci_sum, dcf_sum, dco_sum, None, None, None,
                None)


def _gru_layer(reset_after: bool, x, h0, params, m):
    """A GRU layer's forward as a plain autograd graph: y [T,B,H], h_T."""
    I = x.shape[2]
    h = h0
    ys = []
    if reset_after:  # BlockGRUResetAfter (torch's GRU): w_i [I,3H], w_h [H,3H], b_i, b_h
        w_i, w_h, b_i, b_h = params
        xi = torch.matmul(x, w_i) + b_i
    else:  # BlockGRU (TensorFlow's GRUBlockCell): w_ru [I+H,2H], w_c [I+H,H], b_ru, b_c
        w_ru, w_c, b_ru, b_c = params
        xru = torch.matmul(x, w_ru[:I]) + b_ru
        xc = torch.matmul(x, w_c[:I]) + b_c
    for t in range(x.shape[0]):
        if reset_after:
            xr, xu, xn = _split(xi[t], 3)
            hr, hu, hn = _split(h.matmul(w_h) + b_h, 3)
            r = torch.sigmoid(xr + hr)
            u = torch.sigmoid(xu + hu)
            c = torch.tanh(xn + r * hn)
        else:
            r, u = _split(torch.sigmoid(xru[t] + h.matmul(w_ru[I:])), 2)
            c = torch.tanh(xc[t] + (r * h).matmul(w_c[I:]))
        h_new = u * h + (1 - u) * c
        if m is None:
            h = h_new
            ys.append(h_new)
        else:
            h = m[t] * h_new + (1 - m[t]) * h
            ys.append(m[t] * h_new)
    return torch.stack(ys), h


def _stack(cfg, x, h0, c0, params, seq_lengths: Optional[Tensor],
           dropout_mask: Optional[Tensor]):
    """The stack's forward (y, h_n, c_n or None) as torch operations; params in cfg's layout."""
    from . import _ops  # (imports this module)
    T, B = x.shape[0], x.shape[1]
    D = 2 if cfg.bidirectional else 1
    lstm = cfg.mode.startswith("lstm")
    if lstm and c0 is None:  # (the library's default initial cell state)
        c0 = torch.zeros_like(h0)
    P = _ops._per_direction(cfg)
    m = rev = None
    if seq_lengths is not None:
        lens = seq_lengths.to(torch.int64).view(1, B)
        t = torch.arange(T).view(T, 1)
        valid = t < lens
        m = valid.to(x.dtype).unsqueeze(2)
        # each example reversed within its own length (padding stays in place)
        rev = torch.where(valid, lens - 1 - t, t).unsqueeze(2)

    def reverse(s: Tensor) -> Tensor:
        return s.flip(0) if rev is None else s.gather(0, rev.expand(s.shape))

    clip = _ops._unbits(cfg.cell_clip) if lstm else 0.0
    inp = inp_value = x  # (inp_value: see _ClippedLSTMLayer; the same tensor without a clip)
    h_n, c_n = [], []
    for layer in range(cfg.L):
        outs, out_values = [], []
        for d in range(D):
            k = layer * D + d
            group = list(params[k * P:(k + 1) * P])
            if cfg.layout == "nn":
                group = _ops.nn_to_ops_layout(cfg.mode, cfg.H, *_ops._nn_group(cfg, group))
            xin = inp if d == 0 else reverse(inp)
            if not lstm:
                y, h = _gru_layer(cfg.mode == "gru_reset_after", xin, h0[k], group, m)
                y_value = y
            else:
                wci = wcf = wco = None
                if cfg.use_peephole:
                    wci, wcf, wco = group[2:5]
                args = (h0[k], c0[k], group[0], group[1], wci, wcf, wco, m, cfg.mode == "lstm",
                        _ops._unbits(cfg.forget_bias), clip)
                if clip > 0:
                    xin_value = inp_value if d == 0 else reverse(inp_value)
                    y, h, c = _ClippedLSTMLayer.apply(xin, xin_value, *args)
                    y_value = y if layer == cfg.L - 1 else _lstm_values(xin_value, *args)[0]
                else:  # a plain graph: TensorFlow's gradient is the forward's derivative
                    y, h, c, _ = _lstm_values(xin, *args)
                    y_value = y
                c_n.append(c)
            h_n.append(h)
            outs.append(y if d == 0 else reverse(y))
            out_values.append(y_value if d == 0 else reverse(y_value))
        inp = outs[0] if D == 1 else torch.cat(outs, 2)
        if dropout_mask is not None and layer < cfg.L - 1:
            inp = inp * dropout_mask[layer]
        inp_value = inp
        if clip > 0:
            inp_value = out_values[0] if D == 1 else torch.cat(out_values, 2)
            if dropout_mask is not None and layer < cfg.L - 1:
                inp_value = inp_value * dropout_mask[layer]
    return inp, torch.stack(h_n), (torch.stack(c_n) if lstm else None)


def stack_gradients(cfg, x, h0, c0, params, seq_lengths, dropout_mask, y_grad, h_n_grad,
                    c_n_grad) -> Optional[List[Optional[Tensor]]]:
    """[x_grad, h0_grad, c0_grad, *param grads] of the stack (the library's first-order
    gradients) as a graph autograd can differentiate again; None for tensors that do not
    require a gradient. None in place of the list when none of them requires one here: the
    values are then the library backward's, and there is no graph to build (torch.func.vjp's
    function, called after the transform returned, holds tensors whose level has ended)."""
    inputs = [x, h0, c0, *params]
    with torch.enable_grad():
        # aliases: the gradient is taken with respect to these nodes, so that a parameter
        # computed from another input (tied weights) is not differentiated through twice,
        # while the result stays connected to each input's own history
        alias = [None if t is None else (t.view_as(t) if t.requires_grad else t)
                 for t in inputs]
        y, h_n, c_n = _stack(cfg, alias[0], alias[1], alias[2], alias[3:], seq_lengths,
                             dropout_mask)
        outs, gouts = [y, h_n], [y_grad, h_n_grad]
        if c_n is not None:
            outs.append(c_n)
            gouts.append(c_n_grad)
        wrt = [a for a in alias if a is not None and a.requires_grad]
        if not wrt:
            return None
        grads = iter(torch.autograd.grad(outs, wrt, gouts, create_graph=True,
                                         allow_unused=True, materialize_grads=True))
    return [next(grads) if a is not None and a.requires_grad else None for a in alias]


def _stack_of_tensors(cfg, has_c0: bool, seq_lengths, dropout_mask):
    """_stack as a function of tensors only, f(x, h0, [c0,] *params) -> (y, h_n[, c_n]), for
    torch.func.vjp / jvp (c0 an argument when given; c_n a result for the LSTM modes)."""
    lstm = cfg.mode.startswith("lstm")

    def stack(x, h0, *rest):
        c, ps = (rest[0], rest[1:]) if has_c0 else (None, rest)
        y, h_n, c_n = _stack(cfg, x, h0, c, list(ps), seq_lengths, dropout_mask)
        return (y, h_n, c_n) if lstm else (y, h_n)
    return stack


def stack_vjp(cfg, x, h0, c0, params, seq_lengths, dropout_mask, y_grad, h_n_grad,
              c_n_grad) -> List[Optional[Tensor]]:
    """[x_grad, h0_grad, c0_grad (None without c0), *param grads] of the stack, as
    stack_gradients, through torch.func.vjp of the recomputed recurrence: differentiable at
    every torch.func level that encloses the call (jacfwd(jacrev(f)), hessian, jacrev of
    jacrev, vmap), whether or not the saved tensors still require grad at the level of the
    backward (a torch.func.vjp function runs after its transform has returned)."""
    has_c0 = c0 is not None
    stack = _stack_of_tensors(cfg, has_c0, seq_lengths, dropout_mask)
    _, pull = torch.func.vjp(stack, x, h0, *([c0] if has_c0 else []), *params)
    g = pull((y_grad, h_n_grad, c_n_grad) if cfg.mode.startswith("lstm") else (y_grad, h_n_grad))
    if has_c0:
        return list(g)
    return [g[0], g[1], None, *g[2:]]


def stack_jvp(cfg, x, h0, c0, params, seq_lengths, dropout_mask,
              tangents: List[Optional[Tensor]]) -> List[Tensor]:
    """The tangents [y, h_n, (c_n: LSTM)] of the stack at (x, h0, c0, params) along
    `tangents` (those of x, h0, c0, *params in that order; None: zeros; c0's ignored without
    c0): forward-mode
    AD of the recomputed recurrence. Inside a torch.func transform, torch.func.jvp; under
    torch.autograd.forward_ad's dual levels, which do not nest, the tangent is taken in
    reverse mode twice instead: the vector-Jacobian product u ↦ Jᵀu is linear in u, and its
    own vector-Jacobian product with the tangent t is J·t."""
    has_c0 = c0 is not None
    stack = _stack_of_tensors(cfg, has_c0, seq_lengths, dropout_mask)
    primals = (x, h0, *([c0] if has_c0 else []), *params)
    tx, th0, tc0, *tparams = tangents
    tangents = [torch.zeros_like(p) if t is None else t
                for p, t in zip(primals, (tx, th0, *([tc0] if has_c0 else []), *tparams))]
    if torch._C._functorch.maybe_current_level() is not None:
        return list(torch.func.jvp(stack, primals, tuple(tangents))[1])
    with torch.enable_grad():
        xs = [p.detach().requires_grad_() for p in primals]
        outs = stack(*xs)
        us = [torch.zeros_like(o, requires_grad=True) for o in outs]
        vjps = torch.autograd.grad(outs, xs, us, create_graph=True, allow_unused=True,
                                   materialize_grads=True)
        pairs = [(g, t) for g, t in zip(vjps, tangents) if g.requires_grad]
        return list(torch.autograd.grad([g for g, _ in pairs], us, [t for _, t in pairs],
                                        allow_unused=True, materialize_grads=True))
