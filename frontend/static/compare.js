// A comparison (on /compare, /comparisons/{id} and the share page): fetches the comparison's JSON
// twin once, draws its overlaid CDFs and per-run CDF panels, each run's delay chart, and renders the
// statistics with the baseline ratios and the KS tests exactly as the server computed them.
import { drawAll, drawFigure } from "./charts.js";
import { el, fetchJSON, fixed, integer, table } from "./util.js";

const view = document.getElementById("comparison-view");
const logBox = document.getElementById("log-x");

const METRICS = [
  ["count", "Count", (v) => integer(v)],
  ["p50_us", "p50 µs", (v) => fixed(v, 1)],
  ["p90_us", "p90 µs", (v) => fixed(v, 1)],
  ["p99_us", "p99 µs", (v) => fixed(v, 1)],
  ["p99_9_us", "p99.9 µs", (v) => fixed(v, 1)],
  ["max_us", "Max µs", (v) => fixed(v, 1)],
  ["mean_us", "Mean µs", (v) => fixed(v, 1)],
  ["p99_over_p50", "p99/p50", (v) => fixed(v, 2)],
  ["busbw_gbps", "busbw GB/s", (v) => fixed(v, 3)],
  ["pct_of_ideal", "% of ideal", (v) => fixed(v, 1)],
];

function cell(delta, format, isBaseline) {
  if (!delta || delta.value === null || delta.value === undefined) return "";
  const parts = [el("span", { class: "value", text: format(delta.value) })];
  if (!isBaseline && delta.ratio !== null && delta.ratio !== undefined) {
    const worse = delta.ratio > 1;
    parts.push(el("br"), el("small", { class: worse ? "delta-worse" : "delta-better", text: `×${fixed(delta.ratio, 2)}` }));
  }
  return el("span", {}, parts);
}

function originBadge(origin) {
  return el("span", { class: `badge origin-${origin}`, text: origin });
}

function renderStats(doc) {
  const headers = [{ text: "Run" }, ...METRICS.map(([, title]) => ({ text: title, num: true }))];
  const rows = doc.runs.map((run) => {
    const isBaseline = run.run_id === doc.baseline_run_id;
    const row = [
      el("span", {}, [
        `#${run.run_id} `, run.name, el("br"),
        originBadge(run.origin), run.strategy ? ` ${run.strategy} ` : " ",
        isBaseline ? el("span", { class: "badge", text: "baseline" }) : null,
      ]),
      ...METRICS.map(([key, , format]) => cell(run.overall[key], format, isBaseline)),
    ];
    row.className = isBaseline ? "baseline" : null;
    return row;
  });
  document.getElementById("compare-stats").replaceChildren(table(headers, rows));
}

const GROUP_METRICS = METRICS.filter(([key]) => ["count", "p50_us", "p99_us", "p99_9_us", "max_us", "busbw_gbps", "pct_of_ideal"].includes(key));

// Per data size and collective: ratios only where the baseline run has the same group.
function renderGroups(doc) {
  const headers = [{ text: "Run" }, { text: "Group" }, ...GROUP_METRICS.map(([, title]) => ({ text: title, num: true }))];
  const rows = doc.runs.flatMap((run) => run.groups.map((group) => {
    const isBaseline = run.run_id === doc.baseline_run_id;
    const row = [`#${run.run_id} ${run.name}`, group.label, ...GROUP_METRICS.map(([key, , format]) => cell(group.stats[key], format, isBaseline))];
    row.className = isBaseline ? "baseline" : null;
    return row;
  }));
  document.getElementById("compare-groups").replaceChildren(table(headers, rows));
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
  const pvalue = (p) => (p === 0 ? "< 1e-300" : p < 1e-4 ? Number(p).toExponential(2) : fixed(p, 4));
  const row = (test, runA, runB, what) => [
    runA, runB, what, fixed(test.statistic, 4), pvalue(test.pvalue),
    test.pvalue < 0.05 ? "differ" : "no evidence they differ", test.method,
  ];
  // Each pair: all samples, then every data size and collective both runs have (the sharper question).
  const rows = doc.ks_tests.flatMap((test) => [
    row(test, names[test.run_a], names[test.run_b], "all samples"),
    ...(test.groups || []).map((group) => row(group, "", "", `same group: ${group.label}`)),
  ]);
  document.getElementById("compare-tests").replaceChildren(table(headers, rows));
}

function applyLogX(charts) {
  for (const chart of charts) {
    if (chart.dataset.drawn !== "true") continue;
    const update = {};
    for (const key of Object.keys(chart.layout)) if (/^xaxis\d*$/.test(key)) update[`${key}.type`] = logBox.checked ? "log" : "linear";
    window.Plotly.relayout(chart, update);
  }
}

async function main() {
  const cdf = document.getElementById("cdf-chart");
  const multiples = document.getElementById("cdf-multiples");
  const delays = drawAll(view);
  try {
    const doc = await fetchJSON(view.dataset.compareUrl);
    renderStats(doc);
    renderGroups(doc);
    renderTests(doc);
    await Promise.all([drawFigure(cdf, doc.figures.cdf), drawFigure(multiples, doc.figures.small_multiples)]);
  } catch (error) {
    document.getElementById("compare-stats").replaceChildren(el("p", { class: "error", text: error.message }));
    document.getElementById("compare-tests").replaceChildren();
  }
  await delays;
  if (logBox) {
    applyLogX([cdf, multiples]);
    logBox.addEventListener("change", () => applyLogX([cdf, multiples]));
  }
  document.body.dataset.chartsDrawn = "true";
}

main();
