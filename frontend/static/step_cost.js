// What one training step costs on a run (results/analysis/step_cost.py computes every figure; this only lays them
// out): the comparison's leading table with each run's step × the baseline's, the ranking line, and per
// run the plan's collectives with the time each was read at and how (measured, interpolated, ...).
import { el, integer, plural, ratio, table, timeIn } from "./util.js";

const ratioText = (value) => (value === null || value === undefined ? "" : `${ratio(value)}×`);
const BASIS_TEXT = {
  measured: "measured",
  interpolated: "interpolated (log–log between the sizes beside it)",
  "platform-scaled": "platform-scaled (its expected curve × the run's ratio to it at the nearest size)",
  extrapolated: "extrapolated (α-β fit to the run's sizes; no platform)",
  missing: "missing",
};

// Step times in the unit the server chose for these steps (µs, ms or s), by the page-wide rule for it.
const timeFormat = (unit) => (us) => timeIn(us, unit);

function missingText(step) {
  const parts = [];
  if (step.missing_collectives) parts.push(`${integer(step.missing_collectives)} per step not measured`);
  if (step.estimated_collectives) parts.push(`${integer(step.estimated_collectives)} read off the curve`);
  return parts.join("; ");
}

// The run, the plan it is read with and what the step's figures lack, in one cell: the numbers keep the width.
function runAndPlan(row) {
  const plan = row.plan;
  const planText = plan
    ? `plan #${plan.id} ${plan.name} (${plan.source === "chosen" ? "chosen here" : "linked"}, ${integer(plan.trials)} steps)`
    : "no plan: pick one below";
  const caveat = row.step && missingText(row.step);
  return el("span", {}, [`#${row.run_id} ${row.name}`, el("br"), el("small", { class: "source", text: planText }),
    caveat ? [el("br"), el("small", { class: "caveat", text: caveat })] : null].flat());
}

export function renderStepCostTable(container, comparison) {
  const unit = comparison.time_unit;
  const time = timeFormat(unit);
  const headers = [
    { text: "Run and plan" }, { text: `p50 / step (${unit})`, num: true }, { text: "× baseline", num: true, sub: "p50" },
    { text: `p99 / step (${unit})`, num: true, sub: "all at p99" }, { text: "Collectives / step", num: true },
    { text: "Bytes / step (B)", num: true, sub: "whole buffers" }, { text: "Training (s)", num: true, sub: "p50 × steps" },
  ];
  const rows = comparison.rows.map((row) => {
    const isBaseline = row.run_id === comparison.baseline_run_id;
    const step = row.step;
    const cells = step
      ? [time(step.p50_us), isBaseline ? el("span", { class: "badge", text: "baseline" }) : ratioText(row.ratio_p50),
        time(step.p99_us), integer(step.collectives_per_step), integer(step.bytes_per_step),
        timeIn(row.training.p50_s === null ? null : row.training.p50_s * 1e6, "s")]
      : ["", "", "", "", "", ""];
    const cellsRow = [runAndPlan(row), ...cells];
    cellsRow.className = isBaseline ? "baseline" : null;
    return cellsRow;
  });
  container.replaceChildren(table(headers, rows));
}

// "Per training step (p50, lower is better): #1 data 14.00 ms < #3 pipeline 86.16 ms < #2 tensor 100.03 ms"
export function rankingText(comparison) {
  const time = timeFormat(comparison.time_unit);
  const byId = Object.fromEntries(comparison.rows.map((row) => [row.run_id, row]));
  const parts = comparison.ranking.map((id) => {
    const row = byId[id];
    return `#${id} ${row.strategy || row.name} ${time(row.step.p50_us)} ${comparison.time_unit}`;
  });
  if (!parts.length) return "No run has a plan yet: pick the plan each run ran (or a plan to try on its fabric) below.";
  return `Communication per training step (p50, lower is better): ${parts.join(" < ")}`;
}

// A run page's headline: the step at p50 and p99, its bytes and collectives, the whole training.
export function renderStepCostHeadline(container, cost) {
  const time = timeFormat(cost.time_unit);
  const { step, training } = cost;
  const pair = (term, value) => [el("dt", { text: term }), el("dd", {}, value)];
  const caveat = missingText(step);
  container.replaceChildren(el("dl", { class: "kv headline" }, [
    ...pair("Comm time per step", el("strong", { text: `${time(step.p50_us)} ${cost.time_unit} at p50` })),
    ...pair("Per step, all at p99", step.p99_us === null ? "— (a sweep has one time per size)" : `${time(step.p99_us)} ${cost.time_unit}`),
    ...pair("Collectives per step", `${integer(step.collectives_per_step)} (${integer(step.bytes_per_step)} B of whole buffers; ${integer(Math.round(step.wire_bytes_per_rank_per_step))} B sent per rank on a ring)`),
    ...pair("Whole training", `${integer(training.steps)} steps: ${timeIn(training.p50_s === null ? null : training.p50_s * 1e6, "s")} s at p50`),
    // A pipelined plan: its stages communicate concurrently, and the step is the longest of them on this run.
    ...(cost.stages.length ? pair("Pipeline stages", cost.stages.map((stage) =>
      `stage ${stage.stage} ${time(stage.p50_us)} ${cost.time_unit}${stage.bounds_step ? " (the step: the longest)" : ""}`).join("; ")) : []),
    ...(caveat ? pair("Caveats", caveat) : []),
  ]));
}

// One run's plan, collective by collective.
export function stepCostDetails(cost, title) {
  const unit = cost.time_unit;
  const time = timeFormat(unit, cost.us_per_unit);
  const headers = [
    { text: "Collective" }, { text: "Dim" }, { text: "Count per step", num: true }, { text: "Whole buffer (B)", num: true },
    { text: "Size looked up (B)", num: true, sub: cost.size_convention }, { text: `Per call, p50 (${unit})`, num: true },
    { text: `Per step, p50 (${unit})`, num: true }, { text: `Per step, p99 (${unit})`, num: true }, { text: "Time read as" },
  ];
  const rows = cost.rows.map((row) => [
    el("span", {}, [row.op, el("br"), el("small", { class: "source", text: row.label })]), row.parallel_dim,
    integer(row.count_per_step), integer(row.bytes_total), integer(row.run_size_bytes), time(row.time_p50_us),
    time(row.step_p50_us), time(row.step_p99_us),
    el("span", { class: `basis basis-${row.basis}` }, [row.missing_reason || BASIS_TEXT[row.basis],
      ...row.notes.map((note) => [el("br"), el("small", { class: "source", text: note })]).flat()]),
  ]);
  return el("details", { class: "step-details" }, [
    el("summary", { text: `${title}: the ${plural(cost.rows.length, "collective")} of plan #${cost.plan.id} ${cost.plan.name}` }),
    el("p", { class: "sub", text: `${cost.time_source}${cost.variant ? `; nccl-tests ${cost.variant} timings` : ""}.` }),
    table(headers, rows),
  ]);
}

// The plan chooser: the reader's plan per run goes into the URL (plans=run:plan,...), the rest of it kept.
export function wirePlanForm(form) {
  if (!form) return;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams(window.location.search);
    const pairs = [...form.querySelectorAll("select[data-plan-for]")]
      .filter((select) => select.value)
      .map((select) => `${select.dataset.planFor}:${select.value}`);
    params.delete("plan");
    if (pairs.length) params.set("plans", pairs.join(",")); else params.delete("plans");
    const query = params.toString().replaceAll("%2C", ",").replaceAll("%3A", ":");
    window.location.assign(query ? `${form.getAttribute("action")}?${query}` : form.getAttribute("action"));
  });
}
