// The Usage page's charts: tokens and cost per UTC day, drawn with uPlot from the report the
// page embeds (#usage-data, the same JSON as /admin/api/usage). No framework, no build step.
"use strict";

(function () {
  const data = document.getElementById("usage-data");
  if (!data || typeof uPlot === "undefined") return;
  const report = JSON.parse(data.textContent);
  const days = report.days || [];
  const x = days.map((d) => Date.parse(d.day + "T00:00:00Z") / 1000);
  const width = () => Math.max(320, Math.min(960, document.querySelector("main").clientWidth - 16));

  function chart(id, series, columns) {
    const target = document.getElementById(id);
    if (!target) return null;
    const options = {
      width: width(),
      height: 220,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
      scales: { x: { time: true } },
      series: [{ label: "day", value: "{YYYY}-{MM}-{DD}" }, ...series],
      // one tick per day at most: the data are per UTC day
      axes: [{ space: 50, incrs: [86400, 86400 * 7, 86400 * 30], values: "{M}/{D}" }, { size: 70 }],
    };
    const plot = new uPlot(options, [x, ...columns], target);
    target.dataset.points = String(x.length);
    return plot;
  }

  const plots = [
    chart(
      "tokens-chart",
      [
        { label: "input", stroke: "#2563eb", width: 2 },
        { label: "cached input", stroke: "#16a34a", width: 2 },
        { label: "output", stroke: "#dc2626", width: 2 },
      ],
      [
        days.map((d) => d.input_tokens),
        days.map((d) => d.cached_input_tokens),
        days.map((d) => d.output_tokens),
      ],
    ),
    chart(
      "cost-chart",
      [
        {
          label: "cost (USD)",
          stroke: "#9333ea",
          fill: "rgba(147, 51, 234, 0.35)",
          paths: uPlot.paths.bars({ size: [0.6, 40] }),
          value: (u, v) => (v == null ? "—" : v.toFixed(4)),
        },
      ],
      [days.map((d) => d.cost_usd)],
    ),
  ].filter(Boolean);
  window.addEventListener("resize", () => {
    for (const plot of plots) plot.setSize({ width: width(), height: 220 });
  });
})();
