"""CSV text of whole Arrow columns: what :func:`warehouse.output.write_csv` writes, per column.

:func:`warehouse.history.streaming.write_csv_batches` writes a batch as one string built by
pyarrow.compute (each column's cells as text, joined with ``,``, lines with ``\\n``), instead
of handing every cell to :mod:`csv`: 1M sample rows go out several times faster. The cells
are the ones ``csv.writer`` writes for :func:`warehouse.output.csv_cell`'s values:

- floats as Python's ``repr`` (shortest round trip): Arrow's own float-to-text gives the same
  digits in another notation (``1`` for ``1.0``, ``0.00001`` for ``1e-05``, ``1e+15``
  where Python writes ``1000000000000000.0``); :func:`float_reprs` rewrites the notation in
  bulk, and hands what it does not know (numbers of 1e11 to 1e16 Arrow writes in exponent
  form) to ``repr`` itself. Non-finite and missing values are empty;
- integers as ``str``; booleans ``true``/``false``; text as it is, quoted (``"`` doubled) when
  it holds ``,``, ``"`` or a line feed, as ``csv.writer``'s minimal quoting does;
- dictionary columns: their (few) values are formatted, then taken by index;
- anything else (times, nested values) through ``csv_cell``, one value at a time.

``tests/history/test_streaming.py`` checks the bytes against ``write_csv`` and :func:`float_reprs`
against ``repr`` over a million floats of every magnitude.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_NEEDS_QUOTES = r'[,"\n]'


def float_reprs(values: np.ndarray) -> pa.Array:
    """``repr`` of each float64 (None where not finite), as a string array."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    finite = np.isfinite(values)
    text = pc.cast(pa.array(values, pa.float64()), pa.string())
    with np.errstate(invalid="ignore", divide="ignore"):
        magnitude = np.abs(values)
        python_exp = finite & (((magnitude < 1e-4) & (values != 0)) | (magnitude >= 1e16))
        arrow_exp = pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
        whole = finite & ~python_exp & ~arrow_exp & (values == np.floor(values))
        small = python_exp & ~arrow_exp & (magnitude < 1e-4)
        zeros = np.where(small, -np.floor(np.log10(np.where(small, magnitude, 1.0))) - 1, 0)
    out = text
    if whole.any():  # 1 → 1.0
        mask = pa.array(whole)
        fixed = pc.binary_join_element_wise(pc.filter(text, mask), ".0", "")
        out = pc.replace_with_mask(out, mask, fixed)
    both = python_exp & arrow_exp
    if both.any():  # 1e-7 → 1e-07
        mask = pa.array(both)
        fixed = pc.replace_substring_regex(pc.filter(text, mask), r"e([+-])(\d)$", r"e\1" r"0\2")
        out = pc.replace_with_mask(out, mask, fixed)
    rest = finite & (python_exp != arrow_exp) & ~small
    for k in np.unique(zeros[small]).astype(int).tolist():  # 0.0000123 → 1.23e-05
        these = small & (zeros == k)
        mask = pa.array(these)
        fixed, certain = _small_in_exponent_form(pc.filter(text, mask), values[these] < 0, k)
        out = pc.replace_with_mask(out, mask, fixed)
        rest[np.flatnonzero(these)[~certain]] = True  # log10 near a power of ten: unsure
    if rest.any():  # a notation not rewritten above: Python's own repr
        mask = pa.array(rest)
        out = pc.replace_with_mask(out, mask, pa.array([repr(v) for v in values[rest].tolist()]))
    return pc.if_else(pa.array(finite), out, pa.nulls(len(values), pa.string()))


def _small_in_exponent_form(
    text: pa.Array, negative: np.ndarray, k: int
) -> tuple[pa.Array, np.ndarray]:
    """``[-]0.<k zeros>D[DDD]`` → ``[-]D[.DDD]e-<k+1>`` (slices, no regex), and which of them
    had that form for certain (the others are left to ``repr``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    body = pc.utf8_ltrim(text, "-")
    prefix = "0." + "0" * k
    digits = pc.utf8_slice_codeunits(body, len(prefix))
    first = pc.utf8_slice_codeunits(digits, 0, 1)
    rest = pc.utf8_slice_codeunits(digits, 1)
    certain = pc.and_(pc.starts_with(body, prefix), pc.not_equal(first, "0"))
    mantissa = pc.if_else(
        pc.greater(pc.utf8_length(rest), 0), pc.binary_join_element_wise(first, rest, "."), first
    )
    sign = pc.if_else(pa.array(negative), "-", "")
    fixed = pc.binary_join_element_wise(sign, mantissa, f"e-{k + 1:02d}", "")
    return fixed, certain.to_numpy(zero_copy_only=False)


def quoted(text: pa.Array) -> pa.Array:
    """Text cells as ``csv.writer`` writes them (minimal quoting); missing → empty."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = text.fill_null("")
    needs = pc.match_substring_regex(text, _NEEDS_QUOTES)
    if not pc.any(needs).as_py():
        return text
    escaped = pc.binary_join_element_wise(
        '"', pc.replace_substring(pc.filter(text, needs), '"', '""'), '"', ""
    )
    return pc.replace_with_mask(text, needs, escaped.cast(pa.string()))


def quote_one(cell: str) -> str:
    """One text cell as ``csv.writer`` writes it (a constant column's value)."""
    if any(c in cell for c in ',"\n'):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def csv_text(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column's CSV cells as one string array without nulls (see the module docstring)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from warehouse.output import csv_cell

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if pa.types.is_dictionary(kind):
        values = csv_text(column.dictionary)
        return values.take(column.indices).fill_null("")
    if pa.types.is_floating(kind):
        floats = column.cast(pa.float64()).to_numpy(zero_copy_only=False)  # nulls come as NaN
        return float_reprs(np.asarray(floats, dtype=np.float64)).fill_null("")
    if pa.types.is_integer(kind):
        return pc.cast(column, pa.string()).fill_null("")
    if pa.types.is_boolean(kind):
        return pc.if_else(column, "true", "false").fill_null("")
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return quoted(column.cast(pa.string()))
    if pa.types.is_null(kind):
        return pa.array([""] * len(column), pa.string())
    cells: list[Any] = [csv_cell(v) for v in column.to_pylist()]
    return quoted(pa.array(cells, pa.string()))


__all__ = ["csv_text", "float_reprs", "quote_one", "quoted"]
