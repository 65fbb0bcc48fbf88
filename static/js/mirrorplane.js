// Small behaviours the server cannot render: confirmation dialogs, rates measured between refreshes,
// and the flow page's live charts. Everything else is server-rendered (htmx swaps fragments).
(function () {
  "use strict";

  // <button data-opens="id"> opens <dialog id="id"> as a modal (Esc closes it; focus returns).
  document.addEventListener("click", function (event) {
    var opener = event.target.closest("[data-opens]");
    if (!opener) return;
    var dialog = document.getElementById(opener.dataset.opens);
    if (dialog && !dialog.open) dialog.showModal();
  });

  // Per key: the last count and its time, and the last rate measured.
  var previous = {};

  function formatRate(perSecond) {
    if (perSecond >= 1000) return Math.round(perSecond).toLocaleString() + " rec/s";
    return perSecond.toFixed(perSecond < 10 ? 1 : 0) + " rec/s";
  }

  // Rows carry data-rate-key, data-rate-count (records replicated so far) and data-rate-at (when the
  // worker measured it): the rate is the change between two reports, shown in their .js-rate cell.
  function updateRates(scope) {
    scope.querySelectorAll("[data-rate-key]").forEach(function (row) {
      var key = row.dataset.rateKey, count = Number(row.dataset.rateCount), at = Number(row.dataset.rateAt);
      var cell = row.querySelector(".js-rate");
      var last = previous[key];
      if (!at) return;
      if (last && at > last.at && count >= last.count) {
        last.rate = (count - last.count) / (at - last.at);
        last.count = count; last.at = at;
      } else if (!last || count < last.count) {
        previous[key] = last = { count: count, at: at, rate: null };
      }
      if (cell && last.rate !== null) cell.textContent = formatRate(last.rate);
    });
  }

  var series = { at: [], rate: [], recordsBehind: [], secondsBehind: [] };
  var lastChartAt = null, lastPosition = null;

  function layout(title, extra) {
    var style = getComputedStyle(document.documentElement);
    return Object.assign({
      margin: { l: 56, r: 56, t: 8, b: 36 }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
      font: { color: style.getPropertyValue("--text").trim() || "#1d2430", size: 12 },
      xaxis: { type: "date", gridcolor: style.getPropertyValue("--line").trim() },
      yaxis: { title: { text: title }, rangemode: "tozero", gridcolor: style.getPropertyValue("--line").trim() },
      showlegend: true, legend: { orientation: "h", y: -0.2 },
    }, extra || {});
  }

  // The flow page: one chart point per new worker report (data-chart-* on #flow-live).
  function updateCharts(live) {
    var throughput = document.getElementById("chart-throughput"), lag = document.getElementById("chart-lag");
    if (!live || !throughput || !lag || !window.Plotly) return;
    var at = Number(live.dataset.chartAt), position = Number(live.dataset.chartPosition);
    if (at && at !== lastChartAt) {
      var when = new Date(at * 1000);
      if (lastChartAt !== null && at > lastChartAt && position >= lastPosition) {
        series.at.push(when);
        series.rate.push((position - lastPosition) / (at - lastChartAt));
      }
      if (live.dataset.chartRecordsBehind !== "") {
        series.recordsBehind.push({ x: when, y: Number(live.dataset.chartRecordsBehind) });
        series.secondsBehind.push({ x: when, y: live.dataset.chartSecondsBehind === "" ? null : Number(live.dataset.chartSecondsBehind) });
      }
      lastChartAt = at; lastPosition = position;
    }
    var config = { displaylogo: false, responsive: true };
    Plotly.react(throughput, [{ x: series.at, y: series.rate, name: "records/s", type: "scatter", mode: "lines+markers" }],
      layout("records/s"), config);
    Plotly.react(lag, [
      { x: series.recordsBehind.map(function (p) { return p.x; }), y: series.recordsBehind.map(function (p) { return p.y; }), name: "records behind", mode: "lines+markers" },
      { x: series.secondsBehind.map(function (p) { return p.x; }), y: series.secondsBehind.map(function (p) { return p.y; }), name: "seconds behind", mode: "lines", yaxis: "y2", line: { dash: "dot" } },
    ], layout("records", { yaxis2: { title: { text: "seconds" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false } }), config);
  }

  function refresh(root) {
    root.querySelectorAll("[data-rate-scope]").forEach(updateRates);
    if (root.matches && root.matches("[data-rate-scope]")) updateRates(root);
    updateCharts(document.getElementById("flow-live"));
  }

  document.addEventListener("DOMContentLoaded", function () { refresh(document); });
  document.addEventListener("htmx:afterSettle", function (event) { refresh(event.detail.elt.isConnected ? event.detail.elt : document); });
})();
