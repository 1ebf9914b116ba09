// How a plan document is drawn, on the plan form (both modes side by side) and on a saved plan's
// read-only page: KCCB settings, the workload table with its network assumptions, the notes.
import { copyButton, el, integer, plural, table, timeIn } from "./util.js";

// "[2600, 33024]" that wraps only between numbers: each number with its comma or bracket is unbreakable.
export function sizesNode(sizes) {
  const pieces = sizes.map((size, i) => `${i === 0 ? "[" : ""}${size}${i === sizes.length - 1 ? "]" : ","}`);
  const children = pieces.flatMap((piece, i) => [i ? " " : null, el("span", { class: "size", text: piece })]);
  return el("code", { class: "data-sizes" }, sizes.length ? children : "[]");
}

const decimal = (value) => Number(value).toLocaleString("en-US", { maximumFractionDigits: 3 });

// The network the ideal times assume, in the words of the form's Network fields.
export function networkText(network) {
  return `${decimal(network.link_gbps)} Gbit/s per rank, α = ${decimal(network.latency_us)} µs`;
}

export function renderKccb(container, documentForMode) {
  const kccbList = [].concat(documentForMode.kccb);
  const blocks = [
    el("div", { class: "copy-row" }, [
      el("span", { text: "Trials (KCCB iterations):" }),
      el("code", { class: "trial-count", text: String(documentForMode.trials) }),
      copyButton(String(documentForMode.trials), "Copy trials"),
    ]),
  ];
  if (kccbList.length > 1) blocks.push(el("p", { class: "sub", text: `${kccbList.length} trial configurations in total.` }));
  blocks.push(el("p", {
    class: "sub kccb-source",
    text: documentForMode.kccb_source === "captured"
      ? "Built from the collectives PyTorch itself issued (captured below), not the analytic list."
      : "Built from the analytic collectives in the workload table.",
  }));
  for (const trial of kccbList) {
    blocks.push(el("h3", { text: `${trial.algorithm} (${trial.algorithm_id})` }));
    blocks.push(el("div", { class: "copy-row" }, [
      el("span", { text: "Data sizes, bytes:" }),
      sizesNode(trial.data_sizes),
      copyButton(trial.data_sizes.join(", "), "Copy sizes"),
    ]));
    blocks.push(el("dl", { class: "kv" }, [
      el("dt", { text: "iterations" }), el("dd", { text: integer(trial.iterations) }),
      el("dt", { text: "hosts × GPUs per host" }), el("dd", { text: `${plural(trial.hosts, "host")} × ${integer(trial.gpus_per_host)}` }),
      el("dt", { text: "group" }), el("dd", { text: `${trial.parallel_dim} · ${plural(trial.group_size, "rank")}` }),
    ]));
    if (trial.note) blocks.push(el("p", { class: "sub", text: trial.note }));
  }
  container.replaceChildren(...blocks);
}

function collectivesTable(collectives, network) {
  const headers = [
    { text: "Collective" }, { text: "Op" }, { text: "Phase" }, { text: "Group" },
    { text: "Bytes per rank", num: true }, { text: "Bytes (nccl-tests size)", num: true },
    { text: "Per step", num: true }, { text: "Ideal µs", sub: `${decimal(network.link_gbps)} Gbit/s, α ${decimal(network.latency_us)} µs`, num: true },
  ];
  const rows = collectives.map((c) => [
    c.label, c.op, c.phase, `${c.parallel_dim} × ${c.group_size}`, integer(c.bytes_per_rank),
    integer(c.bytes_total), integer(c.count_per_step), timeIn(c.ideal_time_us),
  ]);
  return table(headers, rows);
}

// PyTorch source models in framework mode also carry what PyTorch itself issued in the sandbox.
function capturedSection(documentForMode) {
  if (!documentForMode.captured || !documentForMode.captured.length) return null;
  const differences = documentForMode.capture_differences || [];
  return el("div", { class: "captured" }, [
    el("h3", { text: "Captured from PyTorch (fake process group, in the sandbox)" }),
    el("p", { class: "sub", text: differences.length
      ? "The captured list is the truth; it differs from the analytic one above:"
      : "Captured and analytic collectives agree." }),
    differences.length ? el("ul", { class: "notes capture-differences" }, differences.map((d) => el("li", { text: d }))) : null,
    collectivesTable(documentForMode.captured, documentForMode.network),
  ]);
}

export function renderWorkload(container, documentForMode) {
  const model = documentForMode.model;
  const notes = (documentForMode.notes || []).map((note) => el("li", { text: note }));
  const parts = [
    el("p", { class: "sub", text: `${model.name}: ${integer(model.parameter_count)} parameters, ${integer(model.parameter_bytes)} bytes` }),
    el("p", { class: "network-assumption", text: `Ideal time: the α-β ring model at ${networkText(documentForMode.network)}; lower is better, and a measured run's % of ideal compares against it.` }),
    collectivesTable(documentForMode.collectives, documentForMode.network),
    capturedSection(documentForMode),
    notes.length ? el("ul", { class: "notes" }, notes) : null,
  ];
  container.replaceChildren(...parts.filter(Boolean)); // replaceChildren would print a null as "null"
}
