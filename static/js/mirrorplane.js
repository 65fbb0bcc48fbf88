// Small behaviours the server cannot render: confirmation dialogs, rates measured between refreshes,
// and the flow page's live charts. Everything else is server-rendered (htmx swaps fragments).
(function () {
  "use strict";

  // <button data-opens="id"> opens <dialog id="id"> as a modal (Esc closes it; focus returns). A dialog
  // shared by the rows of a list is filled from the button that opens it: data-action is its form's
  // action, and each [data-fills="name"] in it shows the button's data-name (as text, never as markup).
  document.addEventListener("click", function (event) {
    var opener = event.target.closest("[data-opens]");
    if (!opener) return;
    var dialog = document.getElementById(opener.dataset.opens);
    if (!dialog || dialog.open) return;
    if (opener.dataset.action) dialog.querySelector("form").action = opener.dataset.action;
    dialog.querySelectorAll("[data-fills]").forEach(function (slot) {
      slot.textContent = opener.dataset[slot.dataset.fills] || "";
    });
    dialog.showModal();
  });

  // <select data-autosubmit>: choosing an option submits its form (no inline handler: the CSP allows none).
  document.addEventListener("change", function (event) {
    var select = event.target.closest("select[data-autosubmit]");
    if (select && select.form) select.form.requestSubmit();
  });

  // List and report filters are GET forms: empty fields stay out of the URL (?q=dc not ?q=dc&state=).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("form[method=get]")) return;
    form.querySelectorAll("input[name], select[name]").forEach(function (field) {
      if (!field.value && !field.disabled) { field.disabled = true; field.dataset.emptied = "1"; }
    });
  });
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("[data-emptied]").forEach(function (field) { field.disabled = false; delete field.dataset.emptied; });
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
  var MAX_POINTS = 720;  // an hour of 5-second refreshes

  function cssVar(name, fallback) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
  }

  // Any Plotly layout in the page's colours (light or dark, from the CSS variables): transparent
  // backgrounds, text and grid lines from the theme; the server's figure template is dropped.
  function themed(layout) {
    var text = cssVar("--text", "#1d2430"), line = cssVar("--line", "#dde2e8"), card = cssVar("--card", "#fff");
    var out = Object.assign({}, layout);
    delete out.template;
    out.paper_bgcolor = "rgba(0,0,0,0)"; out.plot_bgcolor = "rgba(0,0,0,0)";
    out.font = Object.assign({}, out.font, { color: text });
    out.hoverlabel = Object.assign({ bgcolor: card, bordercolor: line, font: { color: text } }, out.hoverlabel);
    out.legend = Object.assign({}, out.legend, { font: { color: text } });
    if (!out.xaxis) out.xaxis = {};
    if (!out.yaxis) out.yaxis = {};
    Object.keys(out).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        out[key] = Object.assign({}, out[key], { gridcolor: line, zerolinecolor: line, linecolor: line });
      }
    });
    if (out.title && typeof out.title === "object") out.title = Object.assign({}, out.title, { font: Object.assign({}, out.title.font, { color: text }) });
    return out;
  }

  function hasPoints(data) {
    return data.some(function (trace) {
      return ["x", "y", "z"].some(function (axis) { return trace[axis] && trace[axis].length; });
    });
  }

  // A chart without points says so on a blank plot: Plotly's default axes would show 2000-2001 (a date
  // axis) or -1..6. Live charts keep a date axis on the last minutes instead.
  function emptyLayout(layout, message, live) {
    var out = Object.assign({}, layout);
    out.annotations = [{ text: message, xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, font: { size: 14, color: cssVar("--muted", "#5b6675") } }];
    if (live) {
      var now = Date.now();
      out.xaxis = Object.assign({}, out.xaxis, { type: "date", range: [new Date(now - 5 * 60000), new Date(now)] });
      out.yaxis = Object.assign({}, out.yaxis, { range: [0, 1] });
    } else {
      out.xaxis = Object.assign({}, out.xaxis, { visible: false });
      out.yaxis = Object.assign({}, out.yaxis, { visible: false });
    }
    return out;
  }

  function layout(title, extra) {
    return themed(Object.assign({
      margin: { l: 56, r: 56, t: 8, b: 36 },
      xaxis: { type: "date" },
      yaxis: { title: { text: title }, rangemode: "tozero" },
      showlegend: true, legend: { orientation: "h", y: -0.2 },
    }, extra || {}));
  }

  var CONFIG = { displaylogo: false, responsive: true };

  function plot(element, data, chartLayout, emptyMessage, live) {
    if (!hasPoints(data)) chartLayout = emptyLayout(chartLayout, emptyMessage, live);
    Plotly.react(element, data, chartLayout, CONFIG);
    element.dataset.points = String(data.reduce(function (n, t) { return n + ((t.x && t.x.length) || 0); }, 0));
  }

  function keepLast(list) { if (list.length > MAX_POINTS) list.splice(0, list.length - MAX_POINTS); }

  // The flow page: one chart point per new worker report (data-chart-* on #flow-live). Plotly.react
  // redraws only data it sees as new: each call gets fresh arrays (the same array, grown in place, left
  // the throughput chart frozen on its first point) and a datarevision.
  function updateCharts(live) {
    var throughput = document.getElementById("chart-throughput"), lag = document.getElementById("chart-lag");
    if (!live || !throughput || !lag || !window.Plotly) return;
    var at = Number(live.dataset.chartAt), position = Number(live.dataset.chartPosition);
    if (at && at !== lastChartAt) {
      var when = new Date(at * 1000);
      if (lastChartAt !== null && at > lastChartAt && position >= lastPosition) {
        series.at.push(when);
        series.rate.push((position - lastPosition) / (at - lastChartAt));
        keepLast(series.at); keepLast(series.rate);
      }
      if (live.dataset.chartRecordsBehind !== "") {
        series.recordsBehind.push({ x: when, y: Number(live.dataset.chartRecordsBehind) });
        series.secondsBehind.push({ x: when, y: live.dataset.chartSecondsBehind === "" ? null : Number(live.dataset.chartSecondsBehind) });
        keepLast(series.recordsBehind); keepLast(series.secondsBehind);
      }
      lastChartAt = at; lastPosition = position;
    }
    var revision = series.at.length + ":" + series.recordsBehind.length;
    plot(throughput, [{ x: series.at.slice(), y: series.rate.slice(), name: "records/s", type: "scatter", mode: "lines+markers" }],
      layout("records/s", { datarevision: revision }), "Waiting for two worker reports…", true);
    plot(lag, [
      { x: series.recordsBehind.map(function (p) { return p.x; }), y: series.recordsBehind.map(function (p) { return p.y; }), name: "records behind", mode: "lines+markers" },
      { x: series.secondsBehind.map(function (p) { return p.x; }), y: series.secondsBehind.map(function (p) { return p.y; }), name: "seconds behind", mode: "lines", yaxis: "y2", line: { dash: "dot" } },
    ], layout("records", { datarevision: revision, yaxis2: { title: { text: "seconds" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false } }),
      "Waiting for the first worker report…", true);
  }

  // Report charts: server-built figures (data-figure), themed here; zooming on a date axis offers the
  // zoomed range as the page's custom time range (#zoom-apply), so the rows beneath follow it too.
  function minute(value) { return String(value).replace(" ", "T").slice(0, 16); }

  function renderFigure(element) {
    var figure = JSON.parse(element.dataset.figure);
    var chartLayout = themed(Object.assign(figure.layout || {}, { autosize: true }));
    plot(element, figure.data || [], chartLayout, "No data in this range", false);
    if (element.dataset.zoomBound) return;
    element.dataset.zoomBound = "1";
    element.on("plotly_relayout", function (change) {
      var apply = document.getElementById("zoom-apply");
      if (!apply || !change["xaxis.range[0]"] || (element.layout.xaxis || {}).type !== "date") return;
      var params = new URLSearchParams(window.location.search);
      params.delete("range"); params.delete("hours");
      params.set("from", minute(change["xaxis.range[0]"])); params.set("to", minute(change["xaxis.range[1]"]));
      apply.href = "?" + params.toString();
      apply.hidden = false;
    });
  }

  function renderFigures() {
    if (!window.Plotly) return;
    document.querySelectorAll(".report-chart[data-figure]").forEach(renderFigure);
  }

  // Light and dark follow the system: charts are re-themed when it changes.
  if (window.matchMedia) {
    var scheme = window.matchMedia("(prefers-color-scheme: dark)");
    var retheme = function () { renderFigures(); updateCharts(document.getElementById("flow-live")); };
    if (scheme.addEventListener) scheme.addEventListener("change", retheme);
  }

  function refresh(root) {
    root.querySelectorAll("[data-rate-scope]").forEach(updateRates);
    if (root.matches && root.matches("[data-rate-scope]")) updateRates(root);
    updateCharts(document.getElementById("flow-live"));
  }

  document.addEventListener("DOMContentLoaded", function () { refresh(document); renderFigures(); });
  // A fragment that explains its own failure (a 4xx naming the field, a 502 naming the cluster) is shown,
  // not dropped as htmx does with error answers: its target says so with data-swap-errors.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (event.detail.isError && target && target.hasAttribute("data-swap-errors")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  // A live tail keeps its newest rows only (its tbody's data-keep): one left open does not grow the page
  // without end.
  document.addEventListener("htmx:afterSwap", function (event) {
    var rows = event.detail.target;
    var keep = rows && rows.getAttribute("data-keep");
    if (keep) { while (rows.rows.length > Number(keep)) { rows.deleteRow(-1); } }
  });
  document.addEventListener("htmx:afterSettle", function (event) { refresh(event.detail.elt.isConnected ? event.detail.elt : document); });
})();
