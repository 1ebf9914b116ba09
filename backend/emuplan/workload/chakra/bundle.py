"""Encode per-rank traces as Chakra ``.et`` files and bundle them with the communicator groups.

An ``.et`` file is Chakra's stream format: a ``GlobalMetadata`` message, then the rank's ``Node``
messages, each preceded by its length as a protobuf varint.
"""

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.schedule import NodeKind, RankTrace, TraceNode, TraceSet
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanDocument

SCHEMA_VERSION = "0.0.4"
TRACE_PREFIX = "workload"
GROUPS_FILE = "comm_groups.json"
GROUP_NAMES_FILE = "comm_group_names.json"
README_FILE = "README.txt"

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
            et.AttributeProto(name="pg_name", string_val=str(node.group_id)),
            et.AttributeProto(name="bytes_total", int64_val=node.bytes_total),
        ]
    if node.kind in (NodeKind.SEND, NodeKind.RECV):
        attrs += [
            et.AttributeProto(name="comm_src", int32_val=node.src),
            et.AttributeProto(name="comm_dst", int32_val=node.dst),
            et.AttributeProto(name="comm_tag", int32_val=node.tag),
        ]
    message.attr.extend(attrs)
    return message


def _metadata(trace_set: TraceSet, trace: RankTrace) -> et.GlobalMetadata:
    role = trace.role
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


def trace_bytes(trace_set: TraceSet, trace: RankTrace) -> bytes:
    parts = [delimited(_metadata(trace_set, trace))]
    parts += [delimited(_node_message(node)) for node in trace.nodes]
    return b"".join(parts)


def readme_text(document: PlanDocument, trace_set: TraceSet, plan_label: str) -> str:
    inputs = document.inputs
    compute = trace_set.compute
    ranks = [trace.role.rank for trace in trace_set.traces]
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
        f"  {TRACE_PREFIX}.<rank>.et   ranks {', '.join(map(str, ranks))}: a GlobalMetadata message (schema "
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
        "",
        "Schedule (dependencies: a node starts when all its data_deps and ctrl_deps are done)",
        "  Compute nodes form one chain per rank (ctrl_deps). TP collectives sit between the matmuls they join;",
        "  the weight-gradient compute overlaps the input-gradient collective. Pipeline micro-batches follow 1F1B;",
        "  activations and gradients travel as COMM_SEND_NODE / COMM_RECV_NODE pairs with matching comm_tag, so",
        "  the bubble shows. DDP bucket all-reduces (last micro-batch) start after the backward of their last",
        "  gradient and overlap later backward compute; the optimizer waits for all of them. Mixture-of-experts",
        "  layers run top-k experts per token; with expert parallelism their tokens go out (dispatch all-to-all)",
        "  before the experts and come back (combine) after, and the experts' buckets reduce over the edp group.",
        "",
        "ASTRA-sim: --workload-configuration=<this folder>/workload --comm-group-configuration=<this "
        f"folder>/{GROUPS_FILE}",
    ]
    if trace_set.notes:
        lines += ["", "Notes", *(f"  {note}" for note in trace_set.notes)]
    return "\n".join(lines) + "\n"


def bundle_files(document: PlanDocument, trace_set: TraceSet, plan_label: str) -> dict[str, bytes]:
    """File name → content of the whole bundle."""
    files = {f"{TRACE_PREFIX}.{trace.role.rank}.et": trace_bytes(trace_set, trace) for trace in trace_set.traces}
    files[GROUPS_FILE] = json.dumps({str(k): v for k, v in trace_set.groups.ranks.items()}, indent=1).encode()
    files[GROUP_NAMES_FILE] = json.dumps({str(k): v for k, v in trace_set.groups.names.items()}, indent=1).encode()
    files[README_FILE] = readme_text(document, trace_set, plan_label).encode()
    return files


def bundle_zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def write_bundle(files: dict[str, bytes], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_bytes(content)
