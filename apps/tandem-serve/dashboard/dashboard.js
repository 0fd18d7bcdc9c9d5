// tandem-serve's dashboard: polls /health, /jobs, /jobs/{id}/metrics and /gpus every 2 s and draws
// the jobs table, the selected job's curves (SVG polylines) or why it failed, and the GPU gauges.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;
// The job whose curves are drawn: "#job=3" in the address, else the latest running (or latest) job.
const fromHash = /^#job=(\d+)$/.exec(location.hash);
let selected = fromHash ? fromHash[1] : null;

const tokenInput = document.getElementById("token");
tokenInput.value = localStorage.getItem("tandem-serve-token") || "";
tokenInput.addEventListener("change", () => localStorage.setItem("tandem-serve-token", tokenInput.value));

function headers() {
  const h = {};
  if (tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
  return h;
}

async function api(path, options = {}) {
  const res = await fetch(path, Object.assign({headers: headers()}, options));
  const text = await res.text();
  if (!res.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error; } catch (e) {}
    throw new Error(res.status + ": " + msg);
  }
  return text;
}

function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(x, digits = 4) {
  return typeof x === "number" ? Number(x.toPrecision(digits)).toString() : "-";
}

// One curve (or several) on an SVG of 600 x 150 user units: the line, the y range and a title.
function drawChart(svg, title, series, yRange) {
  svg.replaceChildren();
  const pts = series.flatMap(s => s.points);
  svg.appendChild(el("svg:text", {x: 8, y: 14}, title));
  if (pts.length === 0) {
    svg.appendChild(el("svg:text", {x: 260, y: 80}, "no data yet"));
    return;
  }
  const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
  let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (yRange) [y0, y1] = yRange;
  const one = x1 === x0;  // a single step: the point in the middle, one label
  if (one) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const L = 50, R = 590, T = 22, B = 130;
  const px = x => L + (x - x0) / (x1 - x0) * (R - L), py = y => B - (y - y0) / (y1 - y0) * (B - T);
  svg.appendChild(el("svg:line", {x1: L, y1: B, x2: R, y2: B, stroke: "#c5c9d3"}));
  svg.appendChild(el("svg:line", {x1: L, y1: T, x2: L, y2: B, stroke: "#c5c9d3"}));
  svg.appendChild(el("svg:text", {x: 4, y: T + 8}, fmt(y1, 3)));
  svg.appendChild(el("svg:text", {x: 4, y: B}, fmt(y0, 3)));
  if (one) {
    svg.appendChild(el("svg:text", {x: (L + R) / 2 - 25, y: 146}, "step " + (x0 + 1)));
  } else {
    svg.appendChild(el("svg:text", {x: L, y: 146}, "step " + x0));
    svg.appendChild(el("svg:text", {x: R - 60, y: 146}, "step " + x1));
  }
  let lx = 200;
  for (const s of series) {
    if (s.points.length === 0) continue;
    const line = el("svg:polyline", {fill: "none", stroke: s.color, "stroke-width": 2,
                                     points: s.points.map(p => px(p[0]).toFixed(1) + "," + py(p[1]).toFixed(1)).join(" ")});
    line.setAttribute("class", "series");
    svg.appendChild(line);
    if (s.points.length === 1) svg.appendChild(el("svg:circle", {cx: px(s.points[0][0]), cy: py(s.points[0][1]), r: 3, fill: s.color}));
    svg.appendChild(el("svg:text", {x: lx, y: 14, style: "fill:" + s.color}, s.name));
    lx += 140;
  }
}

// Why a failed (or lost) job ended, in place of its curves when it has none.
function drawErrors(job, hasRecords) {
  const box = document.getElementById("job-errors");
  box.replaceChildren();
  const bad = job && (job.state === "failed" || job.state === "lost");
  box.hidden = !bad;
  document.querySelector(".charts").hidden = bad && !hasRecords;
  if (!bad) return;
  box.appendChild(el("div", {class: "reason"}, "Job " + job.id + " " + job.state + ": " + (job.reason || "")));
  const lines = job.errors && job.errors.length ? job.errors : ["no error lines in its log; see /jobs/" + job.id + "/log"];
  box.appendChild(el("pre", {}, lines.join("\n")));
}

async function drawJob(job) {
  document.getElementById("chart-title").textContent = job ? "Job " + job.id + " (" + job.state + ")" : "Job";
  let records = [];
  if (job) {
    const text = await api("/jobs/" + job.id + "/metrics");
    records = text.split("\n").filter(l => l.trim()).map(l => JSON.parse(l));
  }
  drawErrors(job, records.length > 0);
  const steps = records.filter(r => r.event === "step"), epochs = records.filter(r => r.event === "epoch");
  drawChart(document.getElementById("chart-loss"), "loss", [
    {name: "step loss (rank 0)", color: "#1565c0", points: steps.map(r => [r.step, r.loss])},
    {name: "epoch train loss", color: "#ef6c00", points: epochs.map(r => [r.steps, r.train_loss])}]);
  drawChart(document.getElementById("chart-accuracy"), "test accuracy", [
    {name: "test accuracy", color: "#2e7d32", points: epochs.filter(r => r.test_acc !== undefined).map(r => [r.steps, r.test_acc])}], [0, 1]);
  drawChart(document.getElementById("chart-throughput"), "samples/s", [
    {name: "samples/s (all ranks)", color: "#6a1b9a", points: steps.map(r => [r.step, r.samples_per_s])}]);
}

function drawJobs(jobs) {
  const tbody = document.querySelector("#jobs tbody");
  tbody.replaceChildren();
  for (const j of jobs.slice().reverse()) {
    const tr = el("tr", {"data-job-id": j.id});
    if (selected === j.id) tr.className = "selected";
    const last = j.last_metrics || {};
    const loss = last.loss !== undefined ? last.loss : last.train_loss;
    const pct = typeof j.progress === "number" ? Math.floor(j.progress * 100) : null;
    tr.appendChild(el("td", {}, j.id));
    tr.appendChild(el("td", {class: "state state-" + j.state, title: j.reason || ""}, j.state));
    tr.appendChild(el("td", {}, j.request.model || "mlp"));
    tr.appendChild(el("td", {}, j.ranks));
    const prog = el("td");
    const bar = el("span", {class: "bar"});
    bar.appendChild(el("span", {style: "width:" + (pct || 0) + "%"}));
    prog.appendChild(bar);
    prog.appendChild(document.createTextNode(pct === null ? " -" : " " + pct + "%"));
    tr.appendChild(prog);
    tr.appendChild(el("td", {}, fmt(loss)));
    const act = el("td");
    if (j.state === "queued" || j.state === "running") {
      const b = el("button", {}, "cancel");
      b.addEventListener("click", ev => {
        ev.stopPropagation();
        api("/jobs/" + j.id, {method: "DELETE"}).then(refresh, e => message(e.message));
      });
      act.appendChild(b);
    }
    tr.appendChild(act);
    const select = () => { selected = j.id; history.replaceState(null, "", "#job=" + j.id); refresh(); };
    tr.addEventListener("click", select);
    tbody.appendChild(tr);
    if ((j.state === "failed" || j.state === "lost") && j.errors && j.errors.length) {
      // The first reason under the failed job's row; all of them in its panel.
      const er = el("tr", {class: "job-error", "data-error-of": j.id});
      er.appendChild(el("td", {colspan: 7, title: j.errors.join("\n")}, j.errors[0]));
      er.addEventListener("click", select);
      tbody.appendChild(er);
    }
  }
}

function gauge(label, value, max, unit) {
  // A half-circle gauge: the arc's length is value / max.
  const svg = el("svg:svg", {width: 110, height: 70, viewBox: "0 0 110 70", class: "gauge"});
  const arc = (f) => {
    const a = Math.PI * (1 - f), x = 55 + 40 * Math.cos(a), y = 55 - 40 * Math.sin(a);
    return "M 15 55 A 40 40 0 0 1 " + x.toFixed(1) + " " + y.toFixed(1);
  };
  svg.appendChild(el("svg:path", {d: arc(0.999), stroke: "#e3e5ea", "stroke-width": 8, fill: "none"}));
  if (value !== null && value !== undefined) {
    const f = Math.max(0.001, Math.min(0.999, value / max));
    svg.appendChild(el("svg:path", {d: arc(f), stroke: f > 0.9 ? "#c62828" : "#1565c0", "stroke-width": 8, fill: "none"}));
  }
  svg.appendChild(el("svg:text", {x: 55, y: 52, "text-anchor": "middle"}, value === null || value === undefined ? "n/a" : fmt(value, 3) + unit));
  svg.appendChild(el("svg:text", {x: 55, y: 68, "text-anchor": "middle"}, label));
  return svg;
}

function drawGpus(gpus) {
  const box = document.getElementById("gpus");
  box.replaceChildren();
  if (gpus.length === 0) {
    box.appendChild(el("span", {class: "muted", id: "no-gpus"}, "no GPUs"));
    return;
  }
  for (const g of gpus) {
    const d = el("div", {class: "gpu"});
    d.appendChild(el("div", {}, "GPU " + g.index + ": " + g.name));
    const mib = b => b === null ? null : b / 1048576;
    d.appendChild(gauge("utilisation", g.utilization_gpu_percent, 100, "%"));
    d.appendChild(gauge("memory (MiB)", mib(g.memory_used_bytes), mib(g.memory_total_bytes) || 1, ""));
    d.appendChild(gauge("temperature", g.temperature_c, 100, "C"));
    d.appendChild(gauge("power", g.power_w, g.power_limit_w || 700, "W"));
    box.appendChild(d);
  }
}

function message(m) { document.getElementById("message").textContent = m || ""; }

// One round: the three reads go out at once and each part is drawn as soon as its answer is in
// (the first round right at load, not a poll period later); the job's curves follow its list.
async function refresh() {
  const fail = e => { document.getElementById("health").textContent = "error: " + e.message; };
  const health = api("/health").then(t => {
    const h = JSON.parse(t);
    document.getElementById("health").textContent =
      "tandem " + h.version + " - " + h.jobs + (h.jobs === 1 ? " job, " : " jobs, ") + h.slots_used + "/" + h.slots + " slots in use";
  }, fail);
  const gpus = api("/gpus").then(t => drawGpus(JSON.parse(t)), fail);
  const jobs = api("/jobs").then(async t => {
    const list = JSON.parse(t);
    if (selected === null || !list.some(j => j.id === selected)) {
      const running = list.filter(j => j.state === "running");
      selected = running.length ? running[running.length - 1].id : (list.length ? list[list.length - 1].id : null);
    }
    drawJobs(list);
    await drawJob(list.find(j => j.id === selected));
  }).catch(fail);
  await Promise.all([health, gpus, jobs]);
  document.body.dataset.rendered = "1";  // every part drawn once: what a screenshot or a test waits for
}

// The next round a poll period after this one ended: a slow server never has rounds piling up.
async function poll() {
  await refresh();
  setTimeout(poll, POLL_MS);
}

document.getElementById("submit").addEventListener("click", () => {
  let body;
  try { body = JSON.parse(document.getElementById("request").value); } catch (e) { return message("not JSON: " + e.message); }
  api("/jobs", {method: "POST", body: JSON.stringify(body), headers: Object.assign({"Content-Type": "application/json"}, headers())})
    .then(t => { selected = JSON.parse(t).id; message(""); refresh(); }, e => message(e.message));
});

poll();
