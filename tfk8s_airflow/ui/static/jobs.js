// The TF jobs page: reads the app's JSON rows every few seconds and renders them.
// Every value from a run (names, reasons, nodes: pods and DAGs write them) is set as text,
// never as HTML; links come from the server and are only ever relative or http(s).
"use strict";

const REFRESH_MS = 5000;
const params = new URLSearchParams(window.location.search);
const oneRun = params.get("dag_id") && params.get("run_id");
const dataUrl = oneRun
  ? `api/runs/${encodeURIComponent(params.get("dag_id"))}/${encodeURIComponent(params.get("run_id"))}/jobs`
  : "api/jobs" + (params.get("dag_id") ? `?dag_id=${encodeURIComponent(params.get("dag_id"))}` : "");

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function safeHref(url) {
  if (typeof url !== "string" || url === "") return null;
  const parsed = new URL(url, window.location.href);
  return ["http:", "https:"].includes(parsed.protocol) ? parsed.href : null;
}

// Inside the Airflow UI this page is a sandboxed frame that may not navigate the top window;
// a link into the Airflow UI (same origin) is handed to the UI's own router instead.
function openInAirflow(event) {
  if (window.top === window || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  try {
    const top = window.top;
    const url = new URL(event.currentTarget.href, top.location.href);
    if (url.origin !== top.location.origin) return;
    event.preventDefault();
    const state = top.history.state || {};
    const idx = typeof state.idx === "number" ? state.idx + 1 : 0;
    top.history.pushState({ usr: null, key: Math.random().toString(36).slice(2, 10), idx }, "",
      url.pathname + url.search + url.hash);
    top.dispatchEvent(new PopStateEvent("popstate", { state: top.history.state }));
  } catch (err) {
    // The top window is not reachable: the link opens in this frame.
  }
}

// A link out of Airflow (TensorBoard) opens in a new tab. Inside the Airflow UI this page is a
// sandboxed frame that may open no window, so the link is handed to the UI's window, which opens
// it; opened on its own, the page opens it itself.
function openOutside(event) {
  if (window.top === window || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  try {
    const doc = window.top.document;
    const a = doc.createElement("a");
    a.href = event.currentTarget.href;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    event.preventDefault();
    doc.body.append(a);
    a.click();
    a.remove();
  } catch (err) {
    // The top window is not reachable: the link opens in this frame.
  }
}

function link(text, url, airflowUi, outside) {
  const href = safeHref(url);
  if (!href) return el("span", text);
  const a = el("a", text);
  a.href = href;
  if (airflowUi) a.addEventListener("click", openInAirflow);
  if (outside) {
    if (window.top === window) {
      a.target = "_blank";
      a.rel = "noopener noreferrer";
    }
    a.addEventListener("click", openOutside);
  }
  return a;
}

function fmt(value, digits) {
  if (value === null || value === undefined) return "–";
  return typeof value === "number" && digits !== undefined ? value.toFixed(digits) : String(value);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, Math.round(seconds));
  return s >= 3600 ? `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
    : s >= 60 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${s}s`;
}

function renderProgress(box, job) {
  box.replaceChildren();
  const p = job.progress;
  if (!p || p.step === null || p.step === undefined) {
    const why = ["running", "queued", "held"].includes(job.state) ? "no progress reported yet: the replicas' phases come from "
      + (job.replica_source === "pods" ? "a LIST of the job's pods" : `the ${job.replica_source}`)
      : "no progress was reported";
    box.append(el("span", why, "muted"));
    return;
  }
  const step = el("span", `step ${p.step}` + (p.target_step ? ` / ${p.target_step}` : ""));
  step.dataset.field = "step";
  step.dataset.step = String(p.step);
  box.append(step);
  if (p.target_step) {
    const bar = el("div", null, "bar");
    const fill = el("div");
    fill.style.width = `${Math.min(100, (100 * p.step) / p.target_step)}%`;
    bar.append(fill);
    box.append(bar);
  }
  box.append(el("span", `loss ${fmt(p.loss, 4)}`), el("span", `${fmt(p.examples_per_sec, 1)} examples/s`),
    el("span", `ETA ${duration(p.eta_s)}`));
}

function renderJob(job) {
  const node = document.getElementById("job-template").content.firstElementChild.cloneNode(true);
  node.dataset.dagId = job.dag_id;
  node.dataset.runId = job.run_id;
  node.dataset.job = job.job;
  node.querySelector("[data-field=run]").replaceWith(link(`${job.dag_id} / ${job.run_id}`, job.run_url, true));
  const state = node.querySelector("[data-field=state]");
  state.textContent = job.state;
  state.classList.add(job.state);
  node.querySelector("[data-field=meta]").textContent =
    `job ${job.job} in ${job.namespace}` + (job.group ? `, group ${job.group}` : "") + `, attempt ${job.attempt}`;
  node.querySelector("[data-field=reason]").textContent = job.reason || "";
  renderProgress(node.querySelector("[data-field=progress]"), job);
  const links = node.querySelector("[data-field=links]");
  const tb = job.tensorboard_url ? link("TensorBoard", job.tensorboard_url, false, true)
    : el("span", job.tensorboard_note || "no TensorBoard");
  tb.dataset.field = "tensorboard";
  links.append(tb, el("span", ` · logs ${job.archive}`));
  const body = node.querySelector("tbody");
  for (const r of job.replicas) {
    const tr = el("tr");
    tr.dataset.replica = r.key;
    const cells = [el("td", r.key + (r.tracked ? "" : " (untracked)")), el("td", r.pod, "pod"),
      el("td", fmt(r.phase)), el("td", fmt(r.restarts)), el("td", fmt(r.exit_code)), el("td", fmt(r.attempt)),
      el("td", fmt(r.node)), el("td", fmt(r.task_state))];
    const logCell = el("td");
    logCell.append(link("task log", r.log_url, true));
    logCell.firstChild.dataset.field = "log";
    const archiveCell = el("td");
    archiveCell.append(r.archive_url ? link("archived", r.archive_url, false) : el("span", "not archived", "muted"));
    archiveCell.firstChild.dataset.field = "archive";
    tr.append(...cells, logCell, archiveCell);
    body.append(tr);
  }
  return node;
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const resp = await fetch(dataUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({}));
      status.textContent = `${resp.status}: ${body.detail || resp.statusText}`;
      status.className = "error";
      document.getElementById("jobs").replaceChildren();
      return;
    }
    const data = await resp.json();
    const jobs = document.getElementById("jobs");
    jobs.replaceChildren(...data.jobs.map(renderJob));
    if (!data.jobs.length) jobs.append(el("p", "No TF job in the runs you may read.", "muted"));
    document.getElementById("scope").textContent = (oneRun ? `run ${params.get("run_id")} · ` : "")
      + `signed in as ${data.user}`;
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.className = "";
  } catch (err) {
    status.textContent = `cannot read the jobs: ${err}`;
    status.className = "error";
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
