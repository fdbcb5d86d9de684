// The TF jobs page: reads the app's JSON rows every few seconds and renders them.
// Every value from a run (names, reasons, nodes: pods and DAGs write them) is set as text,
// never as HTML; links come from the server and are only ever relative or http(s).
"use strict";

const REFRESH_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";

// The query's parameters, each decoded with decodeURIComponent only: a run id keeps its "+"
// ("manual__...+00:00") whether or not the tab's link encoded it.
function queryParams(search) {
  const out = new Map();
  for (const part of search.replace(/^\?/, "").split("&")) {
    if (!part) continue;
    const at = part.indexOf("=");
    const [key, value] = at < 0 ? [part, ""] : [part.slice(0, at), part.slice(at + 1)];
    try {
      out.set(decodeURIComponent(key), decodeURIComponent(value));
    } catch (err) {
      out.set(key, value);
    }
  }
  return out;
}

const params = queryParams(window.location.search);
const oneRun = params.get("dag_id") && params.get("run_id");
// The task-instance tab: the job of this task is marked (and, for a replica task, that replica).
const taskQuery = oneRun && params.get("task_id")
  ? `?task_id=${encodeURIComponent(params.get("task_id"))}`
    + (/^-?[0-9]+$/.test(params.get("map_index") || "") ? `&map_index=${params.get("map_index")}` : "")
  : "";
const dataUrl = oneRun
  ? `api/runs/${encodeURIComponent(params.get("dag_id"))}/${encodeURIComponent(params.get("run_id"))}/jobs${taskQuery}`
  : "api/jobs" + (params.get("dag_id") ? `?dag_id=${encodeURIComponent(params.get("dag_id"))}` : "");
let scrolled = false;

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

// A chart the server computed (ui/charts.py): the points of one polyline in its box, drawn as SVG.
function renderChart(chart, name) {
  const figure = el("figure", null, "chart");
  figure.dataset.chart = name;
  if (!chart) {
    figure.append(el("figcaption", `${name === "loss" ? "loss" : "examples/s"}: no chart before two points`, "muted"));
    return figure;
  }
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${chart.width} ${chart.height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${chart.label} from step ${chart.from_step} to ${chart.to_step}`);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", chart.points);
  line.setAttribute("vector-effect", "non-scaling-stroke");
  svg.append(line);
  figure.append(svg, el("figcaption",
    `${chart.label} ${fmt(chart.last)} (${fmt(chart.min)}–${fmt(chart.max)}), steps ${chart.from_step}–${chart.to_step}`));
  figure.dataset.points = String(chart.count);
  return figure;
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
  const line = el("div", null, "progress-line");
  const step = el("span", `step ${p.step}` + (p.target_step ? ` / ${p.target_step}` : ""));
  step.dataset.field = "step";
  step.dataset.step = String(p.step);
  line.append(step);
  if (p.percent !== null && p.percent !== undefined) {
    const bar = el("div", null, "bar");
    bar.dataset.field = "bar";
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    bar.setAttribute("aria-valuenow", String(p.percent));
    const fill = el("div");
    fill.style.width = `${p.percent}%`;
    bar.append(fill);
    line.append(bar, el("span", `${fmt(p.percent, 0)}%`));
  }
  line.append(el("span", `loss ${fmt(p.loss, 4)}`), el("span", `${fmt(p.examples_per_sec, 1)} examples/s`),
    el("span", `ETA ${duration(p.eta_s)}`));
  const charts = el("div", null, "charts");
  charts.dataset.field = "charts";
  const given = p.charts || {};
  charts.append(renderChart(given.loss, "loss"), renderChart(given.examples_per_sec, "examples_per_sec"));
  box.append(line, charts);
}

function renderJob(job) {
  const node = document.getElementById("job-template").content.firstElementChild.cloneNode(true);
  node.dataset.dagId = job.dag_id;
  node.dataset.runId = job.run_id;
  node.dataset.job = job.job;
  if (job.marked) node.classList.add("marked");
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
    if (r.marked) {
      tr.classList.add("marked");
      tr.setAttribute("aria-current", "true");
    }
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
      // A run with no TF job (the run's tab on any DAG) is an answer, not an error.
      status.className = resp.status === 404 && oneRun ? "" : "error";
      document.getElementById("jobs").replaceChildren();
      return;
    }
    const data = await resp.json();
    const jobs = document.getElementById("jobs");
    jobs.replaceChildren(...data.jobs.map(renderJob));
    if (!data.jobs.length) jobs.append(el("p", "No TF job in the runs you may read.", "muted"));
    const task = params.get("task_id");
    const mapIndex = Number(params.get("map_index") || "-1");
    document.getElementById("scope").textContent = (oneRun ? `run ${params.get("run_id")} · ` : "")
      + (task ? `task ${task}` + (mapIndex >= 0 ? ` [${mapIndex}]` : "")
        + (data.jobs.some((j) => j.marked) ? " · " : " (of no TF job) · ") : "")
      + `signed in as ${data.user}`;
    const marked = jobs.querySelector("tr.marked") || jobs.querySelector("section.marked");
    if (marked && !scrolled) {  // into view once, vertically only: a row wider than the frame stays put
      const box = marked.getBoundingClientRect();
      if (box.top < 0 || box.bottom > window.innerHeight) window.scrollTo(window.scrollX, window.scrollY + box.top - 40);
      scrolled = true;
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.className = "";
  } catch (err) {
    status.textContent = `cannot read the jobs: ${err}`;
    status.className = "error";
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
