"""What nccl-tests / rccl-tests output says of the collective it timed, shared by its two formats: the stdout
table (``formats.nccl_tests``) and the ``-J`` JSON report (``formats.nccl_tests_json``).

Which collective a test ran comes from the file's content first: the ``<op>_perf`` binary its preamble or
command line names (``args[0]`` in JSON), else what its ``redop``/``root`` cells and the ratio of ``size`` to
``count`` × the type's bytes allow (``collectives_fitting_cells``). Then the caller's explicit choice — refused
when the content says otherwise — then the file name, else ``unknown``.
"""

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from emuplan.results.canonical import ResultFileError, collective_from_file_name
from emuplan.workload.collectives import CollectiveOp, normalise_op_name

_TEST_NAME = re.compile(r"\b([a-z_]+_perf)(?:_mpi)?\b")


def collective_from_text(text: str) -> str | None:
    """The op of a ``<op>_perf`` binary named anywhere in the text (preamble, command line)."""
    for match in _TEST_NAME.finditer(text):
        op = normalise_op_name(match.group(1))
        if op is not None:
            return op.value
    return None


# Bytes per element of the ``type`` names nccl-tests and rccl-tests print.
_TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
               "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}  # fmt: skip

# What each test passes to nccl-tests' TimeTest (src/<test>.cu): a reduction op name or "none" as the redop
# cell, a root ≥ 0 or -1, and as ``count`` either the whole buffer's elements (size = count × type bytes) or
# one rank's piece (size = n × that). sendrecv prints the op it was given (sum by default) in some versions
# and "none" in others; gather, scatter and hypercube are not collectives emuplan models.
# Keyed by (a reduction in the redop cell, a root ≥ 0, count is the whole buffer).
_CELL_SIGNATURES: dict[tuple[bool, bool, bool], tuple[CollectiveOp, ...]] = {
    (True, False, True): (CollectiveOp.ALL_REDUCE, CollectiveOp.SEND_RECV),
    (True, False, False): (CollectiveOp.REDUCE_SCATTER,),
    (True, True, True): (CollectiveOp.REDUCE,),
    (True, True, False): (),
    (False, False, True): (CollectiveOp.SEND_RECV,),
    (False, False, False): (CollectiveOp.ALL_GATHER, CollectiveOp.ALL_TO_ALL),
    (False, True, True): (CollectiveOp.BROADCAST,),
    (False, True, False): (),
}
# busbw ÷ algbw: all-reduce 2(n−1)/n ≥ 1, the split ops (n−1)/n < 1, the others exactly 1. The cells carry
# two decimals, so from 1 GB/s of algbw on the factor is known to ±0.02.
_FACTOR_TOLERANCE = 0.02


@dataclass(frozen=True)
class Cells:
    """What one row of a test says of its collective: the ``redop`` and ``root`` cells (None when the header
    has no such column, as before NCCL 2.13), ``size``, ``count`` and ``type``, and the bandwidths."""

    redop: str | None
    root: str | None
    size: int
    count: int | None
    type_name: str
    algbw: float
    busbw: float


def collectives_fitting_cells(cells: Cells) -> tuple[str, ...]:
    """The collectives whose nccl-tests output has these cells (empty: none emuplan models)."""
    reduces = cells.redop not in (None, "", "none")
    try:
        rooted = cells.root is not None and int(cells.root) >= 0
    except ValueError:
        rooted = False
    element_bytes = _TYPE_BYTES.get(cells.type_name.lower())
    whole = (
        [cells.size == cells.count * element_bytes]
        if element_bytes and cells.count and cells.size
        else [True, False]  # the type or count is unknown: both kinds
    )
    fitting = [op for kind in whole for op in _CELL_SIGNATURES[(reduces, rooted, kind)]]
    if cells.redop is None and cells.root is None and fitting == [CollectiveOp.ALL_GATHER, CollectiveOp.ALL_TO_ALL]:
        # Before NCCL 2.13 only all_gather printed neither column (alltoall kept a blank redop column).
        fitting = [CollectiveOp.ALL_GATHER]
    if np.isfinite(cells.algbw) and np.isfinite(cells.busbw) and cells.algbw >= 1.0:
        factor = cells.busbw / cells.algbw
        fitting = [op for op in fitting if _factor_fits(op, factor)]
    return tuple(op.value for op in fitting)


def _factor_fits(op: CollectiveOp, factor: float) -> bool:
    if op is CollectiveOp.ALL_REDUCE:
        return factor > 1 - _FACTOR_TOLERANCE
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL):
        return factor < 1 + _FACTOR_TOLERANCE
    return abs(factor - 1) <= _FACTOR_TOLERANCE


def choose_collective(
    where: str, named: str | None, fitting: tuple[str, ...] | None, explicit: str | None, file_name: str | None
) -> tuple[str | None, list[str]]:
    """(the collective, warnings) of one test, in this order: the binary the content names, the one collective
    its cells fit, the explicit choice, the file name (when it names one of the collectives the cells fit).

    An explicit choice the content contradicts is refused (``ResultFileError``) rather than stored: it would
    give every busbw and ideal time the wrong factor. A run stored with the content's choice can still be
    relabelled (``services.runs.relabel_collectives``). None when nothing decides."""
    known = normalise_op_name(explicit) if explicit else None
    chosen = known.value if known is not None else explicit
    by_name = collective_from_file_name(file_name) if file_name else None
    if named is not None:
        evidence = f"the file itself names the {named} test (its '<op>_perf' binary)"
        content = (named,)
    elif fitting:
        evidence = f"its redop/root/count cells fit only {' or '.join(fitting)}"
        content = fitting
    else:
        return chosen or by_name, []
    if chosen is not None and chosen not in content:
        raise ResultFileError(
            f"{where}: collective {chosen!r} was given, but {evidence}; leave the collective out (a run can be "
            "relabelled after import)"
        )
    if len(content) == 1:
        op = content[0]
        if by_name is None or by_name == op:
            return op, []
        return op, [f"{where}: the file name says {by_name}, but {evidence}: {op} is used"]
    if chosen is not None:
        return chosen, []
    if by_name in content:
        return by_name, []
    return None, [f"{where}: {evidence}; pass the collective explicitly"]


def ranks_and_hosts(rank_hosts: dict[int, str]) -> tuple[int | None, int | None]:
    if not rank_hosts:
        return None, None
    return len(rank_hosts), len(set(rank_hosts.values()))


# How a run's warnings say its rank count was inferred (from the busbw/algbw factor, or the highest rank of
# elided rank lines) rather than read from the log's rank lines: the assumptions name the figure "inferred"
# where they find it (results.analysis.run_analysis.resolve_assumptions).
RANKS_INFERRED = "ranks inferred from"


def ranks_were_inferred(warnings: list[str]) -> bool:
    return any(RANKS_INFERRED in warning for warning in warnings)


def ranks_from_bandwidths(op: str, algbws: list[float], busbws: list[float]) -> int | None:
    """The rank count nccl-tests' busbw/algbw factor implies (2(n−1)/n, (n−1)/n), from the row with the
    largest algbw (the least rounded); None when the factor says nothing (broadcast, send/recv, n unclear)."""
    pairs = [(a, b) for a, b in zip(algbws, busbws, strict=True) if np.isfinite(a) and np.isfinite(b) and a > 0]
    if not pairs:
        return None
    algbw, busbw = max(pairs)
    factor = busbw / algbw
    scale = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}.get(op)
    if scale is None or algbw < 1.0 or not 0 < factor < scale:
        return None
    ranks = round(scale / (scale - factor))
    # The cells carry two decimals: the implied factor must match n's to that precision.
    return ranks if ranks > 1 and abs(scale * (ranks - 1) / ranks * algbw - busbw) <= 0.01 else None


def nan_to_null(values: list[float]) -> pa.Array:
    array = np.array(values, dtype=np.float64)
    return pa.array(array, mask=np.isnan(array))
