// A comparison (on /compare, /comparisons/{id} and the share page): fetches the comparison's JSON
// twin once and renders what the server computed: the notice when runs share no (collective, size),
// the per-size table, the overall table with the baseline ratios coloured by the server's verdict
// (better / worse for that metric's direction), the KS tests, and the charts. Each run is shown as its
// stored kind: size sweeps get their verdict lines, peak and average busbw, per-size ratios and overlaid
// busbw-vs-size curves; distributions the overall table, overlaid CDFs, the delay panels and KS tests.
import { drawFigure, fitPanelTitles, plotlyReady, xAxisKeys } from "./charts.js";
import { rankingText, renderStepCostTable, stepCostDetails, wirePlanForm } from "./step_cost.js";
import { asPrinted, el, fetchJSON, gbps, integer, ksStatistic, percent, pValue, ratio, table, timeIn, url } from "./util.js";

const view = document.getElementById("comparison-view");
const logBox = document.getElementById("log-x");

// Times in the page's one unit (doc.time_unit); each figure by its rule (util.js); nccl-tests cells as the
// log printed them where it did (the group's printed cells).
function metrics(doc) {
  const unit = doc.time_unit;
  // A group timed once that nccl-tests printed: its one time is the log's cell, shown as printed in µs.
  const time = (v, printed) => (unit === "µs" && printed && printed.time_us ? asPrinted(v, printed.time_us, "time_us") : timeIn(v, unit));
  return [
    ["count", "Count", (v) => integer(v)],
    ["p50_us", `p50 (${unit})`, time],
    ["p90_us", `p90 (${unit})`, time],
    ["p99_us", `p99 (${unit})`, time],
    ["p99_9_us", `p99.9 (${unit})`, time],
    ["max_us", `Max (${unit})`, time],
    ["mean_us", `Mean (${unit})`, time],
    ["p99_over_p50", "p99/p50", ratio],
    ["busbw_gbps", "busbw (GB/s)", (v, printed) => (printed ? asPrinted(v, printed.busbw_gbps) : gbps(v))],
    ["pct_of_expected", "% of expected", percent],
    ["pct_of_ideal", "% of ideal", percent],
  ];
}

const VERDICT_CLASS = { better: "delta-better", worse: "delta-worse" };

// A ratio to 3 significant figures: 3.99×, 0.000650×, never ×0.00.
const ratioText = (value) => `${ratio(value)}×`;

function cell(delta, format, isBaseline, printed = null) {
  if (!delta || delta.value === null || delta.value === undefined) return "";
  const parts = [el("span", { class: "value", text: format(delta.value, printed) })];
  if (!isBaseline && delta.ratio !== null && delta.ratio !== undefined) {
    const title = delta.verdict ? `${delta.verdict} than the baseline` : "against the baseline";
    parts.push(el("br"), el("small", { class: VERDICT_CLASS[delta.verdict] || "delta-neutral", title, text: ratioText(delta.ratio) }));
  }
  return el("span", {}, parts);
}

function originBadge(origin) {
  return el("span", { class: `badge origin-${origin}`, text: origin });
}

// Beside training (an observed run), each run says which side it is on.
function sideBadge(doc, run) {
  return doc.training_vs_emulation ? [el("span", { class: `badge side-${run.side}`, text: run.side }), " "] : [];
}

function runLabel(doc, run, isBaseline) {
  return el("span", {}, [
    `#${run.run_id} `, run.name, el("br"),
    originBadge(run.origin), run.strategy ? ` ${run.strategy} ` : " ", ...sideBadge(doc, run),
    isBaseline ? el("span", { class: "badge", text: "baseline" }) : null,
  ]);
}

// busbw and % of ideal belong to one data size: over all sizes together they have no meaning.
const PER_SIZE_ONLY = ["busbw_gbps", "pct_of_expected", "pct_of_ideal"];

// Distributions only: a size sweep's one value per size pooled over every size is no distribution.
function renderStats(doc) {
  const columns = metrics(doc).filter(([key]) => !PER_SIZE_ONLY.includes(key));
  const headers = [{ text: "Run" }, ...columns.map(([, title]) => ({ text: title, num: true }))];
  const rows = doc.runs.filter((run) => run.overall).map((run) => {
    const isBaseline = run.run_id === doc.baseline_run_id;
    const row = [runLabel(doc, run, isBaseline), ...columns.map(([key, , format]) => cell(run.overall[key], format, isBaseline))];
    row.className = isBaseline ? "baseline" : null;
    return row;
  });
  document.getElementById("compare-stats").replaceChildren(table(headers, rows));
}

const GROUP_KEYS = ["count", "p50_us", "p99_us", "p99_9_us", "max_us", "mean_us", "busbw_gbps", "pct_of_expected", "pct_of_ideal"];

// Per data size and collective, the groups every run has first: ratios only where the baseline has the group.
// A group sits under the baseline's group it was read against (a training run's communicators under the
// benchmark's collective and size), named by what its own label adds.
function renderGroups(doc) {
  const columns = metrics(doc).filter(([key]) => GROUP_KEYS.includes(key));
  const headers = [{ text: "Group" }, { text: "Run" }, ...columns.map(([, title]) => ({ text: title, num: true }))];
  const order = [];
  const byLabel = new Map();
  for (const run of doc.runs) {
    for (const group of run.groups) {
      const key = group.compared_with || group.label;
      if (!byLabel.has(key)) { byLabel.set(key, []); order.push(key); }
      byLabel.get(key).push([run, group]);
    }
  }
  const everyRun = (label) => byLabel.get(label).length === doc.runs.length;
  const labels = [...order.filter(everyRun), ...order.filter((label) => !everyRun(label))];
  const runCell = (run, group, label) => {
    const own = group.label === label ? "" : group.label.split(" · ").slice(2).join(" · ");
    return el("span", {}, [`#${run.run_id} ${run.name} `, ...sideBadge(doc, run),
      own ? el("br") : null, own ? el("small", { class: "source", text: own }) : null]);
  };
  const rows = labels.flatMap((label) => byLabel.get(label).map(([run, group], index) => {
    const isBaseline = run.run_id === doc.baseline_run_id;
    const row = [index === 0 ? label : "", runCell(run, group, label), ...columns.map(([key, , format]) => cell(group.stats[key], format, isBaseline, group.printed))];
    row.className = isBaseline ? "baseline" : null;
    return row;
  }));
  document.getElementById("compare-groups").replaceChildren(table(headers, rows));
}

// What each run's busbw and % of ideal assume, and where each figure came from.
function renderAssumptions(doc) {
  const headers = [
    { text: "Run" }, { text: "Link per rank (Gbit/s)", num: true }, { text: "α (µs)", num: true },
    { text: "Ranks", num: true }, { text: "Line rate (GB/s)", num: true },
  ];
  const names = Object.fromEntries(doc.runs.map((run) => [run.run_id, `#${run.run_id} ${run.name}`]));
  // A rank count read off the busbw/algbw factor says so: "inferred", not "from file".
  const from = (value, source) => el("span", {}, [value === null ? "unknown" : String(value), el("br"),
    el("small", { class: "source", text: source === "inferred" ? "inferred" : `from ${source}` })]);
  // The server's fallback link is never applied silently: no link, no line rate and no % of ideal.
  const link = (a) => (a.link_applied ? from(a.link_gbps, a.sources.link_gbps)
    : el("span", {}, ["none given", el("br"), el("small", { class: "source", text: `fallback ${a.link_gbps} not applied` })]));
  const rows = doc.assumptions.map((a) => [
    names[a.run_id], link(a), from(a.latency_us, a.sources.latency_us),
    from(a.ranks, a.sources.ranks), gbps(a.ceiling_gbps),
  ]);
  document.getElementById("compare-assumptions").replaceChildren(table(headers, rows));
}

// A change to one decimal with its sign, as the verdict line writes it: +3.0 %, −20.0 %, 0.0 %.
function signedPercent(change) {
  const text = `${percent(Math.abs(change))} %`;
  if (text === `${percent(0)} %`) return text;
  return `${change > 0 ? "+" : "−"}${text}`;
}

// Size sweeps: a verdict line per sweep against the reference, each one's peak and average busbw, and
// busbw per data size with its ratio to the reference's.
function renderSweeps(doc, names) {
  const { sweep } = doc;
  document.getElementById("sweep-basis").textContent =
    `Against #${sweep.reference_run_id}: ${sweep.ratio_basis}. A change within ±${sweep.same_within_pct} % is the same (run-to-run noise of one fabric). No percentiles, CDFs or KS test: one value per size has no distribution.`;
  document.getElementById("sweep-verdicts").replaceChildren(
    ...sweep.runs.filter((run) => run.verdict).map((run) => el("li", { class: "verdict", text: run.verdict })),
  );
  const headlineRows = sweep.runs.flatMap((run) => run.headline.map((entry) => [
    names[run.run_id], entry.collective,
    entry.peak_busbw_gbps === null ? "—" : `${gbps(entry.peak_busbw_gbps)} at ${integer(entry.peak_size_bytes)} B`,
    gbps(entry.average_busbw_gbps),
    entry.file_average_busbw_gbps === null ? "not in the file" : String(entry.file_average_busbw_gbps),
  ]));
  document.getElementById("sweep-headlines").replaceChildren(table(
    [{ text: "Run" }, { text: "Collective" }, { text: "Peak busbw (GB/s)", num: true },
      { text: "Average busbw (GB/s)", num: true }, { text: "Log's own average", num: true }],
    headlineRows,
  ));
  const bySize = new Map();
  for (const run of sweep.runs) {
    for (const row of run.sizes) {
      const key = `${row.collective} · ${row.size_bytes}`;
      if (!bySize.has(key)) bySize.set(key, []);
      bySize.get(key).push([run, row]);
    }
  }
  const change = (row) => (row.verdict === null ? "" : el("small", {
    class: VERDICT_CLASS[row.verdict] || "delta-neutral", title: `${row.verdict} than the reference`,
    text: `${ratioText(row.busbw_ratio)} (${signedPercent(row.change_pct)})`,
  }));
  const rows = [...bySize.values()].flatMap((entries) => entries.map(([run, row], index) => {
    const cells = [index === 0 ? `${row.collective} · ${integer(row.size_bytes)} B` : "", names[run.run_id],
      gbps(row.algbw_gbps), gbps(row.busbw_gbps), change(row)];
    cells.className = run.run_id === sweep.reference_run_id ? "baseline" : null;
    return cells;
  }));
  document.getElementById("sweep-sizes").replaceChildren(table(
    [{ text: "Size" }, { text: "Run" }, { text: "algbw (GB/s)", num: true }, { text: "busbw (GB/s)", num: true },
      { text: "busbw ÷ reference", num: true }],
    rows,
  ));
}

function renderTests(doc) {
  const names = Object.fromEntries(doc.runs.map((run) => [run.run_id, `#${run.run_id} ${run.name}`]));
  if (!doc.ks_tests.length) {
    document.getElementById("compare-tests").replaceChildren(el("p", { class: "empty", text: "Pick at least two runs to test whether they differ." }));
    return;
  }
  const headers = [
    { text: "Run A" }, { text: "Run B" }, { text: "Samples compared" }, { text: "KS statistic D", num: true },
    { text: "p-value", num: true }, { text: "At 5 %" }, { text: "Method" },
  ];
  const row = (test, runA, runB, what) => [
    runA, runB, what, ksStatistic(test.statistic), pValue(test.pvalue),
    test.pvalue < 0.05 ? "differ" : "no evidence they differ", test.method,
  ];
  // Each pair: all samples, then every data size and collective both runs have (the sharper question).
  const rows = doc.ks_tests.flatMap((test) => (test.comparable
    ? [row(test, names[test.run_a], names[test.run_b], "all samples"),
      ...(test.groups || []).map((group) => row(group, "", "", `same group: ${group.label}`))]
    : [[names[test.run_a], names[test.run_b], "not tested: no (collective, data size) in common", "", "", "", ""]]));
  document.getElementById("compare-tests").replaceChildren(table(headers, rows));
}

// The panels come asking Plotly for two x ticks, which labels a log axis by decades only: in a phone's
// ~95 px panels more ticks gave 1 2 5 10 2 5, run together. A panel with room gets four, so that a span of
// two decades is not labelled by one decade alone.
const ROOMY_PANEL_PX = 130;
const ROOMY_PANEL_TICKS = 4;

function fitPanelTicks(container, figure) {
  const { layout } = figure;
  const plotWidth = container.clientWidth - layout.margin.l - layout.margin.r;
  for (const key of xAxisKeys(layout)) {
    const [start, end] = layout[key].domain;
    if ((end - start) * plotWidth >= ROOMY_PANEL_PX) layout[key].nticks = ROOMY_PANEL_TICKS;
  }
}

function applyLogX(charts) {
  for (const chart of charts) {
    chart.dataset.logX = String(logBox.checked);
    if (chart.dataset.drawn !== "true") continue;
    const update = Object.fromEntries(xAxisKeys(chart.layout).map((key) => [`${key}.type`, logBox.checked ? "log" : "linear"]));
    window.Plotly.relayout(chart, update);
  }
}

// Only the fields the reader filled in go into the URL: an empty one means each run's own figure.
const assumptionsForm = document.getElementById("assumptions-form");
if (assumptionsForm) {
  assumptionsForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const [key, value] of new FormData(assumptionsForm)) if (String(value).trim()) params.set(key, String(value).trim());
    const query = params.toString().replaceAll("%2C", ",");
    window.location.assign(query ? `${assumptionsForm.getAttribute("action")}?${query}` : assumptionsForm.getAttribute("action"));
  });
}

// Each run's verdict on its platform (the run page says why), before anything else is read into its figures.
function renderVerdicts(doc) {
  // A share link's view reads /api/shared/<token>: the route's path up to its token.
  const shared = view.dataset.compareUrl.startsWith(url("shared_comparison", { token: "" }));
  const names = Object.fromEntries(doc.runs.map((run) => [run.run_id, `#${run.run_id} ${run.name}`]));
  const parts = doc.verdicts.flatMap((verdict, index) => [
    index ? " · " : "Verdicts: ",
    // A share link opens this comparison only: no way into the run pages from it.
    shared ? names[verdict.run_id] : el("a", { href: url("run_page", { run_id: verdict.run_id }) }, names[verdict.run_id]), " ",
    el("span", { class: `badge verdict-badge verdict-${verdict.status}`, text: verdict.status }),
    verdict.platform ? ` on ${verdict.platform.title}` : " (no platform)",
  ]);
  document.getElementById("compare-verdicts").replaceChildren(...parts);
}

// Where no run has a plan there is no step to cost: the card keeps one line and the plan picker (folded) and
// moves after the sections that answer (the sweeps' verdicts, the groups), never an empty table first.
function foldStepCost(comparison) {
  document.getElementById("step-cost-ranking").textContent = rankingText(comparison);
  const card = document.getElementById("step-cost");
  for (const id of ["step-cost-table", "step-cost-how", "step-cost-details"]) document.getElementById(id).hidden = true;
  card.classList.add("no-plan");
  const answers = ["sweep-section", "groups-section"].map((id) => document.getElementById(id)).filter((s) => !s.hidden);
  if (answers.length) answers[answers.length - 1].after(card);
}

// The answer first: what a training step of each run's plan costs on it, ranked, with the stacked chart.
async function renderStepCost(doc) {
  const comparison = doc.step_cost;
  document.getElementById("step-cost-ranking").textContent = rankingText(comparison);
  renderStepCostTable(document.getElementById("step-cost-table"), comparison);
  document.getElementById("step-cost-details").replaceChildren(...comparison.rows.filter((row) => row.cost)
    .map((row) => stepCostDetails(row.cost, `#${row.run_id} ${row.name}`)));
  if (doc.figures.step_cost) {
    const chart = document.getElementById("step-cost-chart");
    chart.hidden = false;
    await drawFigure(chart, doc.figures.step_cost);
  }
}

wirePlanForm(document.getElementById("plan-form"));

async function main() {
  const cdf = document.getElementById("cdf-chart");
  const multiples = document.getElementById("cdf-multiples");
  // The CDFs are drawn on the axis the box says from the start; later changes relayout them.
  if (logBox) {
    for (const chart of [cdf, multiples]) chart.dataset.logX = String(logBox.checked);
    logBox.addEventListener("change", () => applyLogX([cdf, multiples]));
  }
  try {
    const doc = await fetchJSON(view.dataset.compareUrl);
    const notice = document.getElementById("compare-notice");
    notice.textContent = doc.notice || "";
    notice.hidden = !doc.notice;
    const sides = document.getElementById("training-vs-emulation");
    sides.textContent = doc.training_vs_emulation ? `${doc.training_vs_emulation}.` : "";
    sides.hidden = !doc.training_vs_emulation;
    const aboveIdeal = document.getElementById("above-ideal");
    aboveIdeal.textContent = doc.above_ideal ? doc.above_ideal.warning : "";
    aboveIdeal.hidden = !doc.above_ideal;
    renderVerdicts(doc);
    renderGroups(doc);
    renderAssumptions(doc);
    const names = Object.fromEntries(doc.runs.map((run) => [run.run_id, `#${run.run_id} ${run.name}`]));
    const hasDistributions = doc.runs.some((run) => run.kind === "distribution");
    // Each kind's sections only: sweeps never get the overall percentiles, CDFs, delay panels or KS tests,
    // and sweeps alone are compared size by size in their own section (the groups table would repeat it).
    for (const id of ["groups-section", "overall-section", "distribution-charts", "delay-section"]) document.getElementById(id).hidden = !hasDistributions;
    document.getElementById("ks-section").hidden = !hasDistributions || (doc.sweep !== null && !doc.ks_tests.length);
    if (hasDistributions) {
      renderStats(doc);
      renderTests(doc);
    }
    if (doc.sweep) {
      document.getElementById("sweep-section").hidden = false;
      renderSweeps(doc, names);
    }
    const planned = doc.step_cost.ranking.length || doc.step_cost.rows.some((row) => row.step);
    if (!planned) foldStepCost(doc.step_cost);
    await plotlyReady();
    if (planned) await renderStepCost(doc);
    if (doc.figures.sweeps) await drawFigure(document.getElementById("sweep-overlay"), doc.figures.sweeps);
    if (doc.figures.cdf) {
      await drawFigure(cdf, doc.figures.cdf);
      const delays = document.getElementById("delay-panels");
      fitPanelTicks(multiples, doc.figures.small_multiples);
      fitPanelTitles(multiples, doc.figures.small_multiples);
      fitPanelTitles(delays, doc.figures.delays);
      await drawFigure(multiples, doc.figures.small_multiples);
      await drawFigure(delays, doc.figures.delays);
    }
  } catch (error) {
    document.getElementById("compare-stats").replaceChildren(el("p", { class: "error", text: error.message }));
    document.getElementById("compare-tests").replaceChildren();
  }
  document.body.dataset.chartsDrawn = "true";
}

main();
