// Run pickers: the compare page takes ?runs=1,2,3&baseline=1, a short URL that can be bookmarked.
for (const form of document.querySelectorAll("form[data-compare-picker]")) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    // Oldest first, whatever order the list shows: the first is the default baseline.
    const ids = [...form.querySelectorAll("input[name=run]:checked")].map((box) => box.value).sort((a, b) => a - b);
    const params = new URLSearchParams();
    if (ids.length) params.set("runs", ids.join(","));
    const baseline = form.querySelector("select[name=baseline]");
    if (baseline && baseline.value && ids.includes(baseline.value)) params.set("baseline", baseline.value);
    const query = params.toString().replaceAll("%2C", ",");
    window.location.assign(query ? `/compare?${query}` : "/compare");
  });
}
