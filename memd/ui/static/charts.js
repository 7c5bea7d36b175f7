/* memd ui: draws the project page's charts with uPlot (vendored beside this file, docs/ui.md).
   The figures come from the page's <script type="application/json" id="chart-data"> block (rendered
   with Jinja's tojson, so a name in it cannot close the block); every text reaches the page through
   textContent (uPlot's title and legend too), never as markup. The tables under the charts hold the
   same figures for a page without JavaScript. */
(function () {
  "use strict";
  if (typeof uPlot === "undefined") {
    return;
  }

  /* The first screen: a sparkline of each project's cost per night (#spark-data), in its link. */
  var sparkBlock = document.getElementById("spark-data");
  if (sparkBlock) {
    var spark = JSON.parse(sparkBlock.textContent);
    Array.prototype.forEach.call(document.querySelectorAll(".spark[data-row]"), function (el) {
      var costs = spark.rows[Number(el.getAttribute("data-row"))] || [];
      if (!costs.length || costs.every(function (v) { return v === null; })) {
        return;  // no model run in these nights: the cell's "-" and link say it
      }
      new uPlot({
        width: 112, height: 26, legend: { show: false }, cursor: { show: false },
        scales: { x: { time: false, range: function (u, min, max) { return [min - 0.6, max + 0.6]; } }, y: { range: function (u, min, max) { return [0, Math.max(max, 0.0001)]; } } },
        axes: [{ show: false }, { show: false }],
        series: [{}, { stroke: "#36c", fill: "rgba(51, 102, 204, 0.5)", points: { show: false },
                       paths: uPlot.paths.bars({ size: [0.7, 8] }) }]
      }, [spark.x.map(function (x, i) { return i; }), costs], el);
      el.setAttribute("data-points", String(costs.length));
      el.setAttribute("data-values", String(costs.filter(function (v) { return v !== null; }).length));
      el.classList.add("drawn");
    });
  }

  var block = document.getElementById("chart-data");
  if (!block) {
    return;
  }
  var data = JSON.parse(block.textContent);
  var charts = {};

  function width(el) {
    return Math.max(320, Math.min(960, el.clientWidth || 800));
  }

  function count(values) {
    return values.filter(function (v) { return v !== null; }).length;
  }

  function usd(v) {
    return v === null || v === undefined ? "-" : "$" + v.toFixed(4);
  }

  function draw(name, el, opts, series) {
    el.textContent = "";
    var u = new uPlot(opts, series, el);
    el.setAttribute("data-points", String(series[0].length));
    el.setAttribute("data-values", String(count(series[1])));
    el.classList.add("drawn");
    charts[name] = u;
    return u;
  }

  var costEl = document.getElementById("cost-chart");
  if (costEl && data.cost && data.cost.x.length) {
    draw("cost", costEl, {
      title: "Cost per night, last " + data.cost.x.length + " nights (" + data.project + ")",
      width: width(costEl),
      height: 240,
      scales: { x: { time: true, range: function (u, min, max) { return [min - 43200, max + 43200]; } }, usd: { range: function (u, min, max) { return [0, Math.max(max * 1.15, 0.01)]; } },
                tok: { range: function (u, min, max) { return [0, Math.max(max * 1.15, 10)]; } } },
      series: [
        { label: "night", value: function (u, v, si, i) { return i === null ? "--" : data.cost.labels[i]; } },
        { label: "cost (USD)", scale: "usd", stroke: "#36c", fill: "rgba(51, 102, 204, 0.35)",
          paths: uPlot.paths.bars({ size: [0.6, 40] }), points: { show: false },
          value: function (u, v) { return usd(v); } },
        { label: "tokens", scale: "tok", stroke: "#a60", width: 1.5, spanGaps: false,
          points: { show: true, size: 5 },
          value: function (u, v) { return v === null || v === undefined ? "-" : v.toLocaleString(); } }
      ],
      axes: [
        {},
        { scale: "usd", values: function (u, vals) { return vals.map(function (v) { return "$" + v; }); } },
        { scale: "tok", side: 1, size: 70, grid: { show: false } }
      ]
    }, [data.cost.x, data.cost.cost, data.cost.tokens]);
  }

  var sizeEl = document.getElementById("size-chart");
  if (sizeEl && data.size && data.size.x.length) {
    /* The limit (100 %) is drawn across the whole plot by a hook, not as a series: a series is a line
       between its points, and a project with one run has one point in time (no line at all). */
    var drawLimit = function (u) {
      var y = Math.round(u.valToPos(100, "pct", true)) + 0.5;
      var ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = "#b00";
      ctx.lineWidth = 1.5 * (window.devicePixelRatio || 1);
      ctx.setLineDash([6, 4]);
      ctx.beginPath();
      ctx.moveTo(u.bbox.left, y);
      ctx.lineTo(u.bbox.left + u.bbox.width, y);
      ctx.stroke();
      ctx.restore();
      u.root.parentNode.setAttribute("data-limit-y", String(y));
      u.root.parentNode.setAttribute("data-x-min", String(u.scales.x.min));
      u.root.parentNode.setAttribute("data-x-max", String(u.scales.x.max));
    };
    var sizeRange = function (xs) {
      var min = Math.min.apply(null, xs), max = Math.max.apply(null, xs), pad = Math.max((max - min) / 20, 3600);
      return [min - pad, max + pad];
    };
    draw("size", sizeEl, {
      title: "Index size, % of Claude Code's limits; the dashed line is the limit (" + data.project + ")",
      width: width(sizeEl),
      height: 240,
      /* x: the points' own span, padded by a twentieth and at least an hour each side (uPlot's own range
         for a single instant spanned years) */
      scales: { x: { time: true, auto: false, range: sizeRange(data.size.x) },
                pct: { range: function (u, min, max) { return [0, Math.max(110, max * 1.1)]; } } },
      series: [
        {},
        { label: "lines %", scale: "pct", stroke: "#36c", width: 2, points: { show: true, size: 5 },
          value: function (u, v) { return v === null || v === undefined ? "-" : v + " %"; } },
        { label: "characters %", scale: "pct", stroke: "#070", width: 2, points: { show: true, size: 5 },
          value: function (u, v) { return v === null || v === undefined ? "-" : v + " %"; } }
      ],
      hooks: { draw: [drawLimit] },
      axes: [{}, { scale: "pct", values: function (u, vals) { return vals.map(function (v) { return v + " %"; }); } }]
    }, [data.size.x, data.size.lines, data.size.chars]);
  }

  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (k) {
      var u = charts[k];
      u.setSize({ width: width(u.root.parentNode), height: 240 });
    });
  });
}());
