// Live runs over server-sent events (/admin/api/events): the table is rebuilt from each
// "runs" message, "run" messages feed the activity list. No framework, no build step.
"use strict";

(function () {
  const state = document.getElementById("live-state");
  const table = document.getElementById("runs");
  if (!state || !table) return;
  const prefix = table.dataset.prefix || "";
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const body = table.querySelector("tbody");
  const empty = document.getElementById("no-runs");
  const activity = document.getElementById("activity");

  function cell(row, text, className) {
    const td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function age(started) {
    const seconds = Math.max(0, (Date.now() - Date.parse(started)) / 1000);
    return Math.round(seconds) + " s";
  }

  function render(runs) {
    body.replaceChildren();
    for (const run of runs) {
      const row = body.insertRow();
      row.dataset.runId = run.run_id;
      cell(row, run.agent_id);
      cell(row, run.channel);
      cell(row, run.chat_type + " " + run.chat_id + (run.thread_id ? " / " + run.thread_id : ""));
      cell(row, age(run.started_at), "age").dataset.started = run.started_at;
      cell(row, run.current_tool || run.phase || "", "tool");
      const link = document.createElement("a");
      link.href = prefix + "/traces/" + encodeURIComponent(run.run_id);
      const code = document.createElement("code");
      code.textContent = run.run_id.slice(0, 12);
      link.append(code);
      const runCell = row.insertCell();
      runCell.append(link);
      if (run.parent_run_id) {
        const child = document.createElement("small");
        child.textContent = " (child of " + run.parent_run_id.slice(0, 12) + ")";
        runCell.append(child);
      }
      const form = document.createElement("form");
      form.method = "post";
      form.action = prefix + "/runs/" + encodeURIComponent(run.run_id) + "/stop";
      const token = document.createElement("input");
      token.type = "hidden";
      token.name = "csrf_token";
      token.value = csrf;
      const button = document.createElement("button");
      button.type = "submit";
      button.className = "danger";
      button.textContent = "Stop";
      form.append(token, button);
      row.insertCell().append(form);
    }
    empty.hidden = runs.length > 0;
  }

  function note(event) {
    const item = document.createElement("li");
    const p = event.payload || {};
    const what = p.name ? " " + p.name + (p.is_error ? " (error)" : "") : p.phase ? " " + p.phase : "";
    item.textContent = new Date().toLocaleTimeString() + " " + event.type + what +
      " · run " + event.run_id.slice(0, 12);
    activity.prepend(item);
    while (activity.children.length > 50) activity.lastChild.remove();
  }

  const source = new EventSource(state.dataset.liveUrl);
  source.addEventListener("open", () => { state.textContent = "on"; });
  source.addEventListener("error", () => { state.textContent = "reconnecting…"; });
  source.addEventListener("runs", (message) => render(JSON.parse(message.data)));
  source.addEventListener("run", (message) => note(JSON.parse(message.data)));
  setInterval(() => {
    for (const td of body.querySelectorAll("td.age")) td.textContent = age(td.dataset.started);
  }, 1000);
  window.addEventListener("pagehide", () => source.close());
})();
