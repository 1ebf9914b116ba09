// A phone folds the runs list's filters, so its first screen shows runs (the page renders them open for
// wider screens; the fold's summary names the sort and says whether a filter is set).
const filtersFold = document.getElementById("filters-fold");
if (filtersFold && window.matchMedia("(max-width: 640px)").matches) {
  filtersFold.open = false;
}

// Run pickers: the compare page takes ?runs=3,1,2&baseline=1 (and any assumptions set on it), a short URL
// that can be bookmarked.
// Runs are compared in the order they were ticked (the first is the default baseline), and the
// baseline list offers only the ticked runs.
function bindComparePicker(form) {
  const boxes = [...form.querySelectorAll("input[name=run]")];
  const baseline = form.querySelector("select[name=baseline]");
  const names = Object.fromEntries(boxes.map((box) => [box.value, box.dataset.label || `#${box.value}`]));
  // The order the page was opened with (?runs=…), then ticks in the order they happen.
  const order = (form.dataset.selected || "").split(",").filter((id) => boxes.some((box) => box.value === id && box.checked));

  function refreshBaseline() {
    if (!baseline) return;
    const chosen = baseline.value;
    const first = new Option(order.length ? `first ticked (${names[order[0]]})` : "first ticked", "");
    baseline.replaceChildren(first, ...order.map((id) => new Option(names[id], id, false, id === chosen)));
  }

  for (const box of boxes) {
    box.addEventListener("change", () => {
      const at = order.indexOf(box.value);
      if (box.checked && at < 0) order.push(box.value);
      if (!box.checked && at >= 0) order.splice(at, 1);
      refreshBaseline();
    });
  }
  refreshBaseline();

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    if (order.length) params.set("runs", order.join(","));
    if (baseline && baseline.value && order.includes(baseline.value)) params.set("baseline", baseline.value);
    // The compare page's assumptions stay as they were set.
    const current = new URLSearchParams(window.location.search);
    for (const key of ["link_gbps", "latency_us", "ranks"]) if (current.get(key)) params.set(key, current.get(key));
    const query = params.toString().replaceAll("%2C", ",");
    // The form's action is the compare page's path (base.html's url()).
    const action = form.getAttribute("action");
    window.location.assign(query ? `${action}?${query}` : action);
  });
}

function bindComparePickers(root) {
  for (const form of root.querySelectorAll("form[data-compare-picker]")) bindComparePicker(form);
}

bindComparePickers(document);
// upload.js replaces the list after an upload of several files: the new list's picker is bound in turn.
document.addEventListener("runs-list-replaced", (event) => bindComparePickers(event.detail));
