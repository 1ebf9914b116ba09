"""Encode per-rank traces as Chakra ``.et`` files and bundle them with the communicator groups.

An ``.et`` file is Chakra's stream format: a ``GlobalMetadata`` message, then the rank's ``Node``
messages, each preceded by its length as a protobuf varint.

Every rank of a pipeline stage runs the same nodes; only a collective's ``pg_name`` and a send's or
receive's ``comm_src`` / ``comm_dst`` differ. Each stage's nodes are serialised once without those
attributes, and a rank's file appends its own to each such node (protobuf merges a repeated field's
entries across concatenated encodings). A bundle encodes each file when it is read, and the zip
streams file by file, so a bundle of 16,384 ranks is never whole in memory.
"""

import json
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.schedule import NodeKind, RankRole, TraceNode, TraceSet, rank_ranges
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanDocument

SCHEMA_VERSION = "0.0.4"
TRACE_PREFIX = "workload"
GROUPS_FILE = "comm_groups.json"
GROUP_NAMES_FILE = "comm_group_names.json"
README_FILE = "README.txt"
# Deflate's fastest level: on a 70B stage's trace level 6 took 2.2x as long for a zip 16 % smaller.
ZIP_LEVEL = 1

_COMM_TYPES = {
    CollectiveOp.ALL_REDUCE: et.ALL_REDUCE,
    CollectiveOp.ALL_GATHER: et.ALL_GATHER,
    CollectiveOp.REDUCE_SCATTER: et.REDUCE_SCATTER,
    CollectiveOp.ALL_TO_ALL: et.ALL_TO_ALL,
    CollectiveOp.BROADCAST: et.BROADCAST,
    CollectiveOp.REDUCE: et.REDUCE,
}
_NODE_TYPES = {
    NodeKind.COMPUTE: et.COMP_NODE,
    NodeKind.COLLECTIVE: et.COMM_COLL_NODE,
    NodeKind.SEND: et.COMM_SEND_NODE,
    NodeKind.RECV: et.COMM_RECV_NODE,
}


class TraceFormatError(ValueError):
    """Bytes that are not a Chakra stream."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@cache
def _length_prefix(length: int) -> bytes:
    return _varint(length)


def delimited(message) -> bytes:
    payload = message.SerializeToString()
    return _varint(len(payload)) + payload


def split_delimited(data: bytes) -> Iterator[bytes]:
    """The payloads of a varint-length-delimited stream."""
    position = 0
    while position < len(data):
        length, shift = 0, 0
        while True:
            if position >= len(data) or shift > 63:
                raise TraceFormatError(f"truncated length prefix at byte {position}")
            byte = data[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if position + length > len(data):
            raise TraceFormatError(f"message at byte {position} runs {length} bytes past the end")
        yield data[position : position + length]
        position += length


def decode_trace(data: bytes) -> tuple[et.GlobalMetadata, list[et.Node]]:
    payloads = split_delimited(data)
    metadata = et.GlobalMetadata.FromString(next(payloads, b""))
    return metadata, [et.Node.FromString(payload) for payload in payloads]


def attribute(node, name: str):
    """The value of a node's attribute by name (whichever oneof field holds it)."""
    for attr in node.attr:
        if attr.name == name:
            return getattr(attr, attr.WhichOneof("value"))
    raise KeyError(name)


def _node_message(node: TraceNode) -> et.Node:
    """The node with every attribute its stage's ranks share (``_rank_attributes`` adds the rest)."""
    message = et.Node(
        id=node.id,
        name=node.name,
        type=_NODE_TYPES[node.kind],
        ctrl_deps=node.ctrl_deps,
        data_deps=node.data_deps,
        duration_micros=node.duration_micros,
    )
    attrs = [et.AttributeProto(name="is_cpu_op", bool_val=False)]
    if node.kind is NodeKind.COMPUTE:
        attrs.append(et.AttributeProto(name="num_ops", uint64_val=node.flops))
    else:
        attrs.append(et.AttributeProto(name="comm_size", int64_val=node.comm_size))
    if node.kind is NodeKind.COLLECTIVE:
        attrs += [
            et.AttributeProto(name="comm_type", int64_val=_COMM_TYPES[node.op]),
            et.AttributeProto(name="bytes_total", int64_val=node.bytes_total),
        ]
    if node.kind in (NodeKind.SEND, NodeKind.RECV):
        attrs.append(et.AttributeProto(name="comm_tag", int32_val=node.tag))
    message.attr.extend(attrs)
    return message


def _rank_key(node: TraceNode) -> tuple | None:
    """What a node's rank-specific attributes depend on; None for a node every rank writes alike."""
    if node.kind is NodeKind.COLLECTIVE:
        return ("group", node.group)
    if node.kind in (NodeKind.SEND, NodeKind.RECV):
        return (node.kind, node.peer_stage)
    return None


@dataclass(frozen=True)
class _StageTemplate:
    """A stage's file serialised once: ``parts`` joined make a rank's file once each slot is filled, the
    metadata at 0 and, for each node that takes a rank's attributes, its length prefix at ``index`` and
    the attributes at ``index + 2`` around its body (whose length ``slots`` keeps, by attribute key)."""

    parts: list[bytes]
    slots: dict[tuple, list[tuple[int, int]]]


def _encode_stage(nodes: list[TraceNode]) -> _StageTemplate:
    parts: list[bytes] = [b""]
    slots: dict[tuple, list[tuple[int, int]]] = {}
    run: list[bytes] = []
    for node in nodes:
        key = _rank_key(node)
        if key is None:
            run.append(delimited(_node_message(node)))
            continue
        parts.append(b"".join(run))
        run = []
        body = _node_message(node).SerializeToString()
        slots.setdefault(key, []).append((len(parts), len(body)))
        parts += (b"", body, b"")
    parts.append(b"".join(run))
    return _StageTemplate(parts, slots)


def _rank_attributes(trace_set: TraceSet, role: RankRole, key: tuple) -> bytes:
    """``key``'s attributes for ``role``, encoded as a Node holding only them (to append to a node body)."""
    if key[0] == "group":
        attrs = [et.AttributeProto(name="pg_name", string_val=str(trace_set.rank_groups(role)[key[1]]))]
    else:
        peer = trace_set.peer(role, key[1])
        src, dst = (role.rank, peer) if key[0] is NodeKind.SEND else (peer, role.rank)
        attrs = [et.AttributeProto(name="comm_src", int32_val=src), et.AttributeProto(name="comm_dst", int32_val=dst)]
    return et.Node(attr=attrs).SerializeToString()


def _metadata(trace_set: TraceSet, role: RankRole) -> et.GlobalMetadata:
    metadata = et.GlobalMetadata(version=SCHEMA_VERSION)
    metadata.attr.extend(
        [
            et.AttributeProto(name="generator", string_val="emuplan"),
            et.AttributeProto(name="gpu", string_val=trace_set.compute.gpu.label),
            et.AttributeProto(name="gpu_peak_tflops", double_val=trace_set.compute.gpu.peak_tflops),
            et.AttributeProto(name="utilisation", double_val=trace_set.compute.utilisation),
            et.AttributeProto(name="rank", int64_val=role.rank),
            et.AttributeProto(name="world_size", int64_val=trace_set.world_size),
            et.AttributeProto(name="dp_index", int64_val=role.dp_index),
            et.AttributeProto(name="pp_stage", int64_val=role.stage),
            et.AttributeProto(name="tp_index", int64_val=role.tp_index),
        ]
    )
    return metadata


def readme_text(document: PlanDocument, trace_set: TraceSet, plan_label: str) -> str:
    inputs = document.inputs
    compute = trace_set.compute
    lines = [
        f"Chakra execution traces of one training step, made by emuplan from {plan_label}.",
        "",
        f"Model {document.model.name}; {inputs.gpus} GPUs as tp {inputs.tp} x pp {inputs.pp} x dp {inputs.dp} "
        "(rank = dp_index*pp*tp + stage*tp + tp_index: TP innermost, then PP, then DP); "
        f"micro-batch {inputs.micro_batch} x {inputs.micro_batches} per step and data-parallel rank"
        + (f", sequence length {inputs.seq_len}" if inputs.seq_len else "")
        + f"; {inputs.dp_impl.value} with gradients in {inputs.grad_dtype}.",
        "",
        "Files",
        f"  {TRACE_PREFIX}.<rank>.et   ranks {rank_ranges(trace_set.ranks)}: a GlobalMetadata message (schema "
        f"{SCHEMA_VERSION}), then the rank's Node messages, each preceded by its length as a protobuf varint.",
        f"  {GROUPS_FILE}   communicator group id -> ranks (pg_name of every collective node is its group id).",
        f"  {GROUP_NAMES_FILE}   group id -> what the group is (tp / dp / ep / edp / tied-embedding, with indices).",
        "",
        "Compute",
        f"  duration_micros = FLOPs / ({compute.gpu.label} dense bf16 peak {compute.gpu.peak_tflops:g} TFLOP/s x "
        f"utilisation {compute.utilisation:g}), at least 1 us; num_ops holds the FLOPs.",
        "  Forward: 2 FLOPs per local weight element and sample (token for transformers; per output position for",
        "  convolutions), plus 4 x tokens x seq_len x hidden / tp for attention scores; embedding lookups 0.",
        "  Backward: an input-gradient node (as forward) and a weight-gradient node (the weight FLOPs) per block.",
        "  Optimizer: 12 FLOPs per local parameter (AdamW), once per step.",
        "",
        "Communication",
        "  comm_size is the buffer as ASTRA-sim's system layer and Chakra's PyTorch converter read it: one rank's",
        "  piece for all-gather, the whole input buffer for all-reduce, reduce-scatter, all-to-all, broadcast and",
        "  point-to-point; bytes_total holds nccl-tests' whole-buffer size. is_cpu_op is false on every node.",
        "  ASTRA-sim replays a BROADCAST for its duration_micros rather than simulating it: here the plan's",
        "  alpha-beta time at its link speed and latency.",
        "",
        "Schedule (dependencies: a node starts when all its data_deps and ctrl_deps are done)",
        "  Compute nodes form one chain per rank (ctrl_deps), and so do the collectives of each communicator, in",
        "  the order every member launches them. TP collectives sit between the matmuls they join; the",
        "  weight-gradient compute overlaps the input-gradient collective (sequence parallel: the input-gradient",
        "  compute overlaps the weight gradient's input all-gather). Pipeline micro-batches follow 1F1B;",
        "  activations and gradients travel as COMM_SEND_NODE / COMM_RECV_NODE pairs with matching comm_tag, so",
        "  the bubble shows. DDP broadcasts module buffers before the first forward; its bucket all-reduces",
        "  (ZeRO-1/2: reduce-scatters) start in the last micro-batch after the backward of their last gradient",
        "  and overlap later backward compute; the optimizer waits for them (ZeRO-1/2 then all-gather the updated",
        "  parameters). FSDP2 / ZeRO-3 all-gather each unit's parameters before its forward and its backward",
        "  (one unit prefetched ahead; the root stays gathered through backward) in every micro-batch, and",
        "  reduce-scatter its gradients after its last micro-batch's backward, the root's last. Then, as",
        "  Megatron's finalize_model_grads, the layer-norm gradients (sequence parallel) are all-reduced over",
        "  TP, then the tied embedding's, once the data-parallel reductions are done. Mixture-of-experts",
        "  layers run top-k experts per token; with expert parallelism their tokens go out (dispatch all-to-all)",
        "  before the experts and come back (combine) after, with TP all-gathered after the dispatch and",
        "  reduce-scattered before the combine; the experts' buckets reduce over the edp group.",
        "",
        "ASTRA-sim: --workload-configuration=<this folder>/workload --comm-group-configuration=<this "
        f"folder>/{GROUPS_FILE}",
    ]
    if trace_set.notes:
        lines += ["", "Notes", *(f"  {note}" for note in trace_set.notes)]
    return "\n".join(lines) + "\n"


class TraceBundle(Mapping[str, bytes]):
    """File name → content of the whole bundle: ``workload.<rank>.et`` per rank (encoded when read, not
    kept), the communicator groups and README.txt."""

    def __init__(self, document: PlanDocument, trace_set: TraceSet, plan_label: str) -> None:
        self.trace_set = trace_set
        self._ranks = {f"{TRACE_PREFIX}.{rank}.et": rank for rank in trace_set.ranks}
        groups = trace_set.groups
        self._small = {
            GROUPS_FILE: json.dumps({str(k): v for k, v in groups.ranks.items()}, indent=1).encode(),
            GROUP_NAMES_FILE: json.dumps({str(k): v for k, v in groups.names.items()}, indent=1).encode(),
            README_FILE: readme_text(document, trace_set, plan_label).encode(),
        }

    @cached_property
    def _stages(self) -> dict[int, _StageTemplate]:
        return {stage: _encode_stage(nodes) for stage, nodes in self.trace_set.stage_nodes.items()}

    def trace(self, rank: int) -> bytes:
        """Rank ``rank``'s ``.et`` file: its stage's nodes with its own groups and peers."""
        role = self.trace_set.role(rank)
        template = self._stages[role.stage]
        parts = template.parts.copy()
        parts[0] = delimited(_metadata(self.trace_set, role))
        for key, slots in template.slots.items():
            attributes = _rank_attributes(self.trace_set, role, key)
            extra = len(attributes)
            for index, body_length in slots:
                parts[index] = _length_prefix(body_length + extra)
                parts[index + 2] = attributes
        return b"".join(parts)

    def __getitem__(self, name: str) -> bytes:
        if name in self._ranks:
            return self.trace(self._ranks[name])
        return self._small[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._ranks
        yield from self._small

    def __len__(self) -> int:
        return len(self._ranks) + len(self._small)


def bundle_files(document: PlanDocument, trace_set: TraceSet, plan_label: str) -> TraceBundle:
    """File name → content of the whole bundle, each trace encoded as it is read."""
    return TraceBundle(document, trace_set, plan_label)


class _Pipe:
    """A write-only, non-seekable file whose bytes are taken as they come (zipfile then writes each
    member's sizes after its data)."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []

    def write(self, data) -> int:
        self._chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data


def zip_stream(files: Mapping[str, bytes]) -> Iterator[bytes]:
    """The bundle zipped, member by member: memory holds one member at a time."""
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
            yield pipe.take()
    yield pipe.take()


def write_zip(files: Mapping[str, bytes], path: Path) -> None:
    """The zip written as ``zip_stream`` makes it, one member in memory at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        for chunk in zip_stream(files):
            file.write(chunk)


def write_bundle(files: Mapping[str, bytes], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_bytes(content)
