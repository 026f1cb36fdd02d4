"""The short-time Fourier transform and its inverse, as ``torch.stft`` and
``torch.istft``: compositions of ``ember.fft``'s transforms with framing (``unfold``),
windowing and overlap-add (``index_add``), so gradients and ``ember.jit`` come from
those ops.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import fft as _fft
from .errors import EmberError, EmberTypeError, ShapeError
from .ops import elementwise as ew
from .ops import registry
from .ops.complex_support import view_as_real
from .ops.creation import ones, tensor, zeros
from .ops.movement import _CONSTANT_PAD, _pad_index
from .ops.registry import apply, autocast_inputs
from .ops.selection import index_add, index_select
from .tensor import Tensor

__all__ = ["stft", "istft"]

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _int_arg(name: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise EmberTypeError(f"{name}: argument '{arg}' must be int, not "
                             f"{type(value).__name__}")
    return int(value)


def _lengths(name, n_fft, hop_length, win_length):
    n_fft = _int_arg(name, "n_fft", n_fft)
    hop = n_fft // 4 if hop_length is None else _int_arg(name, "hop_length", hop_length)
    win = n_fft if win_length is None else _int_arg(name, "win_length", win_length)
    if n_fft <= 0:
        raise EmberError(f"{name}: expected n_fft > 0, but got n_fft={n_fft}")
    if hop <= 0:
        raise EmberError(f"{name}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise EmberError(f"{name}: expected 0 < win_length <= n_fft, but got "
                         f"win_length={win} (n_fft={n_fft})")
    return n_fft, hop, win


def _window(name, window, win, n_fft, dtype, device):
    """The window as a tensor of ``n_fft`` points (zero-padded on both sides, centred)."""
    if window is None:
        window = ones(win, dtype=dtype, device=device)
    elif not isinstance(window, Tensor):
        raise EmberTypeError(f"{name}: window must be a Tensor or None, got "
                             f"{type(window).__name__}")
    elif window.ndim != 1 or window.shape[0] != win:
        raise ShapeError(f"{name}: expected a 1D window tensor of size equal to "
                         f"win_length={win}, but got window with shape "
                         f"{tuple(window.shape)}")
    elif not (window.dtype.is_floating_point or window.dtype.is_complex):
        raise EmberTypeError(f"{name}: expected a floating point or complex window, got "
                             f"{window.dtype.name}")
    left = (n_fft - win) // 2
    if left or n_fft - win - left:
        window = apply(_CONSTANT_PAD, window, pads=((left, n_fft - win - left),), value=0)
    return window


def _pad_last(x, lo, hi, mode):
    """``x`` padded by ``lo``/``hi`` elements along its last dim (``mode`` as F.pad)."""
    if mode == "constant":
        pads = ((0, 0),) * (x.ndim - 1) + ((lo, hi),)
        return apply(_CONSTANT_PAD, x, pads=pads, value=0)
    index = _pad_index(np, x.shape[-1], lo, hi, mode)
    return index_select(x, -1, tensor(index.astype(np.int64), device=x.device))


def _positions(n_frames: int, size: int, hop: int):
    """Where each of ``n_frames`` frames of ``size`` elements, ``hop`` apart, reads."""
    return (np.arange(n_frames)[:, None] * hop + np.arange(size)[None, :]).reshape(-1)


def _frames(x, n_fft: int, hop: int):
    """The ``(B, T, n_fft)`` frames of the signals ``x`` (``(B, L)``)."""
    if not x.dtype.is_complex:
        return x.unfold(-1, n_fft, hop)  # (a view)
    # (unfold's gradient takes no complex tensors yet: gather the frames instead)
    b, length = x.shape
    n_frames = 1 + (length - n_fft) // hop
    index = tensor(_positions(n_frames, n_fft, hop), device=x.device)
    return index_select(x, 1, index).reshape(b, n_frames, n_fft)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """The short-time Fourier transform: the Fourier transforms of overlapping
    windowed frames of ``input``.

    ``X[w, m] = sum_k window[k] input[m * hop_length + k] exp(-2 pi i w k / n_fft)``.

    Args:
        input: a 1-D signal ``(L,)`` or a batch ``(B, L)`` (float or complex).
        n_fft: the frame (and transform) length.
        hop_length: the distance between frames (default ``n_fft // 4``).
        win_length: the window length (default ``n_fft``); the window is zero-padded on
            both sides to ``n_fft``.
        window: a 1-D tensor of ``win_length`` points (default: all ones), e.g.
            :func:`ember.hann_window`.
        center: pad ``input`` by ``n_fft // 2`` on both sides (with ``pad_mode``:
            ``"reflect"``, ``"constant"``, ``"replicate"`` or ``"circular"``) so that
            frame ``m`` is centred at ``m * hop_length``.
        normalized: scale by ``n_fft ** -0.5``.
        onesided: only the ``n_fft // 2 + 1`` non-negative frequencies (the default for a
            real input and window; impossible for complex ones).
        return_complex: must be given for real inputs, as in PyTorch 2.x; True returns a
            complex tensor, False (deprecated there) its :func:`view_as_real`.
        align_to_window: with ``center=False``, start the frames where the window
            starts (not where the zero-padded frame of ``n_fft`` points does).

    Shape: ``(B?, N, T)`` with ``N`` frequencies and ``T = 1 + (L' - n_fft) //
    hop_length`` frames, ``L'`` the (padded) signal length.

    >>> ember.stft(ember.ones(64), 16, window=ember.hann_window(16),
    ...            return_complex=True).shape
    ember.Size([9, 17])
    """
    name = "stft"
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor as input, got "
                             f"{type(input).__name__}")
    input, window = autocast_inputs(name, input, window)
    if input.ndim not in (1, 2):
        raise ShapeError(f"{name}: expected a 1D or 2D tensor, got shape "
                         f"{tuple(input.shape)}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise EmberTypeError(f"{name}: expected a tensor of floating point or complex "
                             f"values, got {input.dtype.name}")
    if center and align_to_window is not None:
        raise EmberError(f"{name}: align_to_window should only be set when center = False")
    n_fft, hop, win = _lengths(name, n_fft, hop_length, win_length)
    window = _window(name, window, win, n_fft, input.dtype.to_real(), input.device)
    is_complex = input.dtype.is_complex or window.dtype.is_complex
    if return_complex is None:
        if not is_complex:
            raise EmberError(f"{name} requires the return_complex parameter be given for "
                             "real inputs (return_complex=True; view_as_real recovers the "
                             "old real format)")
        return_complex = True
    if onesided is None:
        onesided = not is_complex
    elif onesided and is_complex:
        raise EmberError(f"{name}: Cannot have onesided output if window or input is "
                         "complex")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if center:
        if pad_mode not in _PAD_MODES:
            raise EmberError(f"{name}: Unrecognised padding mode {pad_mode!r}; expected "
                             f"one of {', '.join(_PAD_MODES)}")
        pad = n_fft // 2
        if pad_mode == "reflect" and pad >= x.shape[-1]:
            raise ShapeError(f"{name}: reflect padding of {pad} on both sides needs a "
                             f"signal longer than {pad}, got length {x.shape[-1]}")
        x = _pad_last(x, pad, pad, pad_mode)
    elif align_to_window:
        offset = (n_fft - win) // 2
        x = _pad_last(x, offset, offset, "constant")
    if not 0 < n_fft <= x.shape[-1]:
        raise EmberError(f"{name}: expected 0 < n_fft <= {x.shape[-1]} (the padded signal "
                         f"length), but got n_fft={n_fft}")
    frames = ew.mul(_frames(x, n_fft, hop), window)  # (B, T, n_fft)
    norm = "ortho" if normalized else "backward"
    spectrum = (_fft.rfft if onesided else _fft.fft)(frames, dim=-1, norm=norm)
    spectrum = spectrum.transpose(-1, -2)
    if input.ndim == 1:
        spectrum = spectrum.squeeze(0)
    return spectrum if return_complex else view_as_real(spectrum)


def _overlap_add(frames, hop: int):
    """``(B, T, n)`` frames summed into ``(B, n + hop * (T - 1))`` signals, frame ``t``
    starting at ``t * hop``."""
    b, t, n = frames.shape
    out = zeros(b, n + hop * (t - 1), dtype=frames.dtype, device=frames.device)
    return index_add(out, 1, tensor(_positions(t, n, hop), device=frames.device),
                     frames.reshape(b, t * n))


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of :func:`stft`: the least-squares signal whose STFT is ``input``
    (overlap-add of the inverse transforms of the frames, divided by the overlapped
    squared window, which must be nonzero everywhere: the NOLA condition).

    Args:
        input: a complex tensor ``(B?, N, T)``, as ``stft(..., return_complex=True)``
            gives.
        n_fft, hop_length, win_length, window, center, normalized: as given to
            :func:`stft` (``hop_length`` at most ``win_length``).
        onesided: whether ``input`` holds one side of the spectrum (default: when
            ``N != n_fft``).
        length: the output length (default ``n_fft + hop_length * (T - 1)``, less
            ``2 * (n_fft // 2)`` when ``center``); longer pads with zeros.
        return_complex: return a complex signal (needs a two-sided ``input``).

    Shape: ``(B?, length)``.

    >>> x = ember.randn(64)
    >>> w = ember.hann_window(16)
    >>> y = ember.istft(ember.stft(x, 16, window=w, return_complex=True), 16, window=w)
    >>> bool((y - x).abs().max() < 1e-5)
    True
    """
    name = "istft"
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor as input, got "
                             f"{type(input).__name__}")
    if not input.dtype.is_complex:
        raise EmberTypeError(f"{name} requires a complex-valued input tensor matching the "
                             f"output from stft with return_complex=True (got "
                             f"{input.dtype.name})")
    input, window = autocast_inputs(name, input, window)
    if input.ndim not in (2, 3):
        raise ShapeError(f"{name}: expected a tensor with 2 or 3 dimensions (B?, N, T), "
                         f"but got shape {tuple(input.shape)}")
    n_fft, hop, win = _lengths(name, n_fft, hop_length, win_length)
    if hop > win:
        raise EmberError(f"{name}: expected 0 < hop_length <= win_length, but got "
                         f"hop_length={hop} and win_length={win}")
    x = input if input.ndim == 3 else input.unsqueeze(0)
    bins, n_frames = x.shape[-2], x.shape[-1]
    if x.numel() == 0:
        raise EmberError(f"{name}: input tensor cannot be empty (shape "
                         f"{tuple(input.shape)})")
    window = _window(name, window, win, n_fft, input.dtype.to_real(), input.device)
    if onesided is None:
        onesided = bins != n_fft
    if onesided:
        if bins != n_fft // 2 + 1:
            raise ShapeError(f"{name}: expected the frequency dimension (3rd to the last) "
                             f"of the input tensor to match n_fft / 2 + 1 = "
                             f"{n_fft // 2 + 1} when onesided=True, but got {bins}")
        if return_complex:
            raise EmberError(f"{name}: Cannot have onesided output if window or input is "
                             "complex (return_complex=True)")
    elif bins != n_fft:
        raise ShapeError(f"{name}: expected the frequency dimension (3rd to the last) of "
                         f"the input tensor to match n_fft = {n_fft} when onesided=False, "
                         f"but got {bins}")
    norm = "ortho" if normalized else "backward"
    spectra = x.transpose(-1, -2)  # (B, T, N)
    if return_complex:
        frames = _fft.ifft(spectra, dim=-1, norm=norm)
    else:
        if window.dtype.is_complex:
            raise EmberTypeError(f"{name}: Complex windows are incompatible with "
                                 "return_complex=False")
        if not onesided:
            spectra = spectra[..., : n_fft // 2 + 1]
        frames = _fft.irfft(spectra, n=n_fft, dim=-1, norm=norm)
    frames = ew.mul(frames, window)
    signal = _overlap_add(frames, hop)
    square = ew.mul(window, window)  # (PyTorch's window.pow(2), complex windows too)
    envelope = _overlap_add(square.expand(1, n_frames, n_fft), hop)
    expected = n_fft + hop * (n_frames - 1)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + _int_arg(name, "length", length)
    else:
        end = expected - n_fft // 2 if center else expected
    signal = signal[:, start:min(end, expected)]
    envelope = envelope[:, start:min(end, expected)]
    if registry._trace is None:  # (a value check: skipped while ember.jit traces)
        smallest = float(envelope.abs().min().item()) if envelope.numel() else 1.0
        if smallest <= 1e-11:
            raise EmberError(f"{name}: window overlap add min: {smallest:.3g} (the squared "
                             "window, overlapped every hop_length, must be nonzero: choose "
                             "a smaller hop_length or another window)")
    signal = ew.div(signal, envelope)
    if end > expected:
        signal = apply(_CONSTANT_PAD, signal, pads=((0, 0), (0, end - expected)), value=0)
    if input.ndim == 2:
        signal = signal.squeeze(0)
    return signal


Tensor.stft = stft
Tensor.istft = istft
