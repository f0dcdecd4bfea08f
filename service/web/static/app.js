// gpucost web page: the form's state lives in the URL query under the API's field names, so a link
// reopens the same quote. No framework and no CDN: the page must work offline, served by the API.
"use strict";

const API = { quote: "/v1/quote", breakeven: "/v1/breakeven", plan: "/v1/plan" };
// Query keys that are not form fields of the workload or constraints.
const PLAN_KEYS = ["jobs", "horizon_months"];
// Accepted in a link as shorter spellings of the Constraints' names.
const ALIASES = { spot: "allow_spot", local: "include_local" };

const $ = (id) => document.getElementById(id);
const fields = () => Array.from(document.querySelectorAll("#job [name]"));
let schemas = {};
let planJobs = [];

function resolve(schema) {
  if (schema && schema.$ref) return schemas[schema.$ref.split("/").pop()] || {};
  return schema || {};
}

// Every enum value a property accepts (through anyOf / $ref), in the schema's order.
function enumValues(prop) {
  const out = [];
  const walk = (s) => {
    s = resolve(s);
    if (Array.isArray(s.enum)) out.push(...s.enum);
    if (s.const !== undefined) out.push(s.const);
    (s.anyOf || s.oneOf || []).forEach(walk);
  };
  walk(prop);
  return out.filter((v) => v !== null);
}

function schemaProps(group) {
  const name = { workload: "Workload", constraints: "Constraints" }[group];
  return name ? (resolve(schemas[name]).properties || {}) : null;
}

// Fields the running service does not know are hidden and never sent, so the page follows the API.
function fitFormToSchema() {
  for (const el of fields()) {
    const props = schemaProps(el.dataset.group);
    if (props === null) continue;
    const prop = props[el.name];
    const box = el.closest(".field, .check");
    if (!prop) {
      el.disabled = true;
      if (box) box.hidden = true;
      continue;
    }
    if (el.tagName === "SELECT") {
      const values = el.dataset.enum === "bool" ? ["auto", "true", "false"].filter(
        (v) => v !== "auto" || enumValues(prop).includes("auto")) : enumValues(prop);
      const def = prop.default === undefined ? "" : String(prop.default);
      el.replaceChildren(new Option(def ? `default (${def})` : "default", ""));
      values.forEach((v) => el.add(new Option(String(v), String(v))));
    }
  }
}

function parseValue(el, raw) {
  const text = raw.trim();
  if (text === "") return undefined;
  if (el.dataset.list !== undefined) return text.split(",").map((s) => s.trim()).filter(Boolean);
  if (text === "true") return true;
  if (text === "false") return false;
  if (el.name !== "model" && /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text)) return Number(text);
  return text;
}

function readForm() {
  const req = { workload: {}, constraints: {}, request: {}, breakeven: {} };
  for (const el of fields()) {
    if (el.disabled) continue;
    const group = req[el.dataset.group];
    if (!group) continue;
    if (el.type === "checkbox") {
      const def = el.name === "include_local";
      if (el.checked !== def) group[el.name] = el.checked;
      continue;
    }
    const v = parseValue(el, el.value);
    if (v !== undefined) group[el.name] = v;
  }
  return req;
}

function queryFromForm() {
  const q = new URLSearchParams();
  for (const el of fields()) {
    if (el.disabled || !el.dataset.group) continue;
    if (el.type === "checkbox") {
      const def = el.name === "include_local";
      if (el.checked !== def) q.set(el.name, String(el.checked));
    } else if (el.value.trim() !== "") {
      q.set(el.name, el.value.trim());
    }
  }
  if (planJobs.length) q.set("jobs", JSON.stringify(planJobs));
  if ($("horizon_months").value.trim()) q.set("horizon_months", $("horizon_months").value.trim());
  return q;
}

function fillFormFromQuery(q) {
  $("job").reset(); // back/forward to a shorter link must not keep the longer one's fields
  planJobs = [];
  for (const [rawKey, value] of q.entries()) {
    const key = ALIASES[rawKey] || rawKey;
    if (PLAN_KEYS.includes(key)) continue;
    const el = document.querySelector(`#job [name="${CSS.escape(key)}"]`);
    if (!el) continue;
    if (el.type === "checkbox") el.checked = !["false", "0", "no", "off"].includes(value.toLowerCase());
    else if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === value)) el.add(new Option(value, value));
    if (el.type !== "checkbox") el.value = value;
    if (el.closest("details")) el.closest("details").open = true;
  }
  if (q.get("horizon_months")) $("horizon_months").value = q.get("horizon_months");
  if (q.get("jobs")) {
    try {
      const jobs = JSON.parse(q.get("jobs"));
      planJobs = Array.isArray(jobs) ? jobs : [];
    } catch (e) {
      showError("jobs: the link's plan is not valid JSON");
    }
  }
  renderJobs();
}

async function call(path, body, format) {
  const url = format ? `${path}?format=${format}` : path;
  const resp = await fetch(url, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (!resp.ok) {
    let message = `${resp.status} ${resp.statusText}`;
    try {
      const doc = await resp.json();
      if (Array.isArray(doc.detail)) {
        message = doc.detail.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".")}: ${d.msg}`).join("; ");
      } else if (doc.detail) message = String(doc.detail);
    } catch (e) { /* not JSON: keep the status line */ }
    throw new Error(message);
  }
  return format && format !== "json" ? resp.text() : resp.json();
}

const usd = (x) => (x === null || x === undefined ? "-" : "$" + Number(x).toLocaleString("en-US",
  { minimumFractionDigits: 2, maximumFractionDigits: 2 }));
const hrs = (x) => (x === null || x === undefined ? "-" : Number(x).toLocaleString("en-US",
  { maximumFractionDigits: 2 }) + " h");

function where(o) {
  return o.kind === "local" ? `local build ${o.instance_type}` : `${o.provider}/${o.region || "-"} ${o.instance_type}`;
}

function gpusText(o) {
  const n = `${o.gpus_per_node}x ${o.gpu}`;
  return o.nodes > 1 ? `${o.nodes} x ${n}` : n;
}

// As the CLI and the Markdown write it: micro-batch x accumulation (x GPUs) = global batch.
function recipeText(o) {
  const r = o.recipe;
  const parts = [];
  if (r && r.micro_batch_size !== undefined) {
    const dp = r.data_parallel_gpus > 1 ? ` x ${r.data_parallel_gpus} GPUs` : "";
    parts.push(`${r.micro_batch_size} x ${r.gradient_accumulation_steps || 1}${dp}` +
      (r.global_batch_size ? ` = ${r.global_batch_size}` : "") + (r.gradient_checkpointing === true ? ", checkpointing" : ""));
  }
  const sharding = (r && r.sharding) || o.sharding;
  if (sharding) parts.push(sharding);
  if (r && r.offload && r.offload !== "none") parts.push(`offload ${r.offload}`);
  return parts.join(", ") || "-";
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function renderQuote(q) {
  const body = $("quote-table").tBodies[0];
  body.replaceChildren();
  q.options.forEach((o, i) => {
    const row = body.insertRow();
    if (i === 0 && q.best) row.className = "chosen";
    const rank = cell(row, String(i + 1), "num");
    if (i === 0 && q.best) {
      const mark = document.createElement("span");
      mark.className = "sr";
      mark.textContent = " (chosen)";
      rank.append(mark);
    }
    cell(row, where(o));
    cell(row, gpusText(o));
    cell(row, usd(o.cost_usd), "num");
    cell(row, hrs(o.hours), "num");
    cell(row, usd(o.hourly_usd), "num");
    cell(row, o.pricing.replace("_", "-"));
    cell(row, `${o.memory_need_gb_per_gpu.toFixed(1)} / ${o.vram_gb_per_gpu}`, "num");
    cell(row, recipeText(o));
  });
  const b = q.best;
  $("quote-summary").textContent = b
    ? `Cheapest: ${where(b)}, ${gpusText(b)}, ${hrs(b.hours)} per run, ${usd(b.cost_usd)} for ${q.runs} run(s).`
    : "No feasible option: see why each offer was rejected below.";
  $("quote-rejected").textContent = q.rejected.length
    ? "Rejected: " + q.rejected.map((g) => `${g.reason}: ${g.count}`).join("; ") : "";
  $("quote-sources").textContent = "Prices as of " + Object.entries(q.prices_as_of || {})
    .map(([p, d]) => `${p} ${String(d).slice(0, 10)}`).join(", ") + `; snapshot ${q.snapshot_id}.`;
  $("quote").hidden = false;
}

function breakevenRequest(req, q) {
  const be = req.breakeven;
  const cloud = q.options.find((o) => o.kind === "cloud");
  const local = q.options.find((o) => o.kind === "local");
  const rent = be.rent_gpu ? { gpu: String(be.rent_gpu) } : (cloud ? { gpu: cloud.gpu } : null);
  const buy = be.buy_gpu ? { gpu: String(be.buy_gpu) } : (local ? { build: local.instance_type } : { gpu: "RTX4090" });
  if (!rent) return null;
  const body = { workload: req.workload, rent, buy };
  if (be.runs_per_month !== undefined) body.runs_per_month = be.runs_per_month;
  return body;
}

function showSvg(container, svgText) {
  // The SVG comes from this service's own renderer; parse it rather than inject HTML.
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  const svg = doc.documentElement;
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.setAttribute("aria-hidden", "true");
  container.replaceChildren(document.importNode(svg, true));
}

let markdownParts = {};
function renderMarkdown() {
  const text = ["quote", "breakeven", "plan"].map((k) => markdownParts[k]).filter(Boolean).join("\n");
  $("markdown-text").value = text;
  $("markdown").hidden = !text;
}

async function computeBreakeven(req, q) {
  const body = breakevenRequest(req, q);
  if (!body) { $("breakeven").hidden = true; return; }
  try {
    const [r, svg, md] = await Promise.all([call(API.breakeven, body), call(API.breakeven, body, "svg"),
      call(API.breakeven, body, "markdown")]);
    const be = r.breakeven_runs === null ? "never"
      : `${r.breakeven_runs} runs (${Number(r.breakeven_months).toFixed(1)} months at ${r.runs_per_month} a month)`;
    $("breakeven-summary").textContent = `Rent ${r.rent.provider} ${r.rent.instance_type} (${r.rent.gpu}) at ` +
      `${usd(r.rent.cost_per_run_usd)} a run, or buy ${r.buy.build} for ${usd(r.buy.capex_usd)}: ` +
      `buying breaks even after ${be}.`;
    showSvg($("breakeven-chart"), svg);
    markdownParts.breakeven = md;
  } catch (e) {
    $("breakeven-summary").textContent = `No break-even: ${e.message}`;
    $("breakeven-chart").replaceChildren();
    delete markdownParts.breakeven;
  }
  $("breakeven").hidden = false;
}

function quoteBody(req) {
  return { workload: req.workload, constraints: req.constraints, ...req.request };
}

async function compute() {
  hideError();
  const req = readForm();
  if (!req.workload.model) { showError("model: choose a model preset"); $("model").focus(); return; }
  $("status").textContent = "Computing the quote…";
  $("compute").disabled = true;
  document.body.dataset.busy = "true";
  try {
    const body = quoteBody(req);
    const [q, md] = await Promise.all([call(API.quote, body), call(API.quote, body, "markdown")]);
    markdownParts = { quote: md };
    renderQuote(q);
    renderMarkdown();
    $("status").textContent = `Quoted ${q.options.length} option(s) (solver ${q.solver.name}: ${q.solver.status}).`;
    await computeBreakeven(req, q);
    renderMarkdown();
    if (planJobs.length) await computePlan();
  } catch (e) {
    showError(e.message);
    $("status").textContent = "The quote failed.";
  } finally {
    $("compute").disabled = false;
    delete document.body.dataset.busy;
    // A counter the browser test (and anyone scripting the page) can wait on.
    document.body.dataset.computed = String(Number(document.body.dataset.computed || 0) + 1);
  }
}

function renderJobs() {
  const body = $("jobs-table").tBodies[0];
  body.replaceChildren();
  planJobs.forEach((job, i) => {
    const row = body.insertRow();
    cell(row, job.name);
    const w = job.workload || {};
    cell(row, [w.model, w.method, w.tokens && `${Number(w.tokens).toExponential(1)} tokens`].filter(Boolean).join(", "));
    cell(row, String(job.runs_per_month ?? 1), "num");
    cell(row, job.deadline_hours ? String(job.deadline_hours) : "-", "num");
    const btn = document.createElement("button");
    btn.type = "button";
    btn.textContent = "Remove";
    btn.setAttribute("aria-label", `Remove job ${job.name}`);
    btn.addEventListener("click", () => { planJobs.splice(i, 1); renderJobs(); syncUrl(); });
    row.insertCell().append(btn);
  });
  $("jobs-table").hidden = planJobs.length === 0;
}

function addJob() {
  hideError();
  const req = readForm();
  if (!req.workload.model) { showError("model: choose a model preset"); $("model").focus(); return; }
  const name = $("job_name").value.trim() || `job-${planJobs.length + 1}`;
  if (planJobs.some((j) => j.name === name)) { showError(`job_name: ${name} is already in the plan`); return; }
  const job = { name, workload: req.workload, runs_per_month: req.breakeven.runs_per_month ?? 4 };
  if (req.constraints.deadline_hours !== undefined) job.deadline_hours = req.constraints.deadline_hours;
  planJobs.push(job);
  $("job_name").value = "";
  renderJobs();
  syncUrl();
}

async function computePlan() {
  hideError();
  if (!planJobs.length) { showError("jobs: add at least one job to the plan"); return; }
  const req = readForm();
  const constraints = { ...req.constraints };
  delete constraints.deadline_hours; // each job carries its own
  const body = { jobs: planJobs, constraints };
  const horizon = parseValue($("horizon_months"), $("horizon_months").value);
  if (horizon !== undefined) body.horizon_months = horizon;
  $("status").textContent = "Solving the plan…";
  try {
    const [p, svg, md] = await Promise.all([call(API.plan, body), call(API.plan, body, "svg"),
      call(API.plan, body, "markdown")]);
    $("plan-summary").textContent = `Solver ${p.solver.name}: ${p.solver.status}. Over ${p.horizon_months} months ` +
      `the plan costs ${usd(p.total_cost_usd)}; all cloud ${usd(p.all_cloud_cost_usd)}, all local ${usd(p.all_local_cost_usd)}.`;
    const buy = $("plan-buy").tBodies[0];
    buy.replaceChildren();
    p.buy.forEach((b) => {
      const row = buy.insertRow();
      cell(row, String(b.month + 1), "num"); cell(row, `${b.build} ${b.name || ""}`);
      cell(row, String(b.count), "num"); cell(row, usd(b.price_usd), "num");
    });
    if (!p.buy.length) { const row = buy.insertRow(); cell(row, "-"); cell(row, "buy nothing"); cell(row, ""); cell(row, ""); }
    showSvg($("plan-chart"), svg);
    markdownParts.plan = md;
    renderMarkdown();
    $("plan-result").hidden = false;
    $("status").textContent = "Plan solved.";
  } catch (e) {
    showError(e.message);
    $("status").textContent = "The plan failed.";
  }
}

function syncUrl() {
  const q = queryFromForm().toString();
  history.replaceState(null, "", q ? `?${q}` : location.pathname);
}

function showError(message) { const el = $("error"); el.textContent = message; el.hidden = false; }
function hideError() { $("error").hidden = true; $("error").textContent = ""; }

async function copyText(text, what) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {
    // Without clipboard permission (http, old browsers): select it for the user to copy.
    const ta = $("markdown-text");
    ta.focus();
    ta.select();
    document.execCommand && document.execCommand("copy");
  }
  $("copied").textContent = `${what} copied.`;
}

async function init() {
  try {
    const [models, openapi] = await Promise.all([
      fetch("/v1/models").then((r) => r.json()), fetch("/openapi.json").then((r) => r.json()),
    ]);
    schemas = (openapi.components || {}).schemas || {};
    const list = $("model-presets");
    models.models.forEach((m) => list.append(new Option(`${m.name} (${(m.params / 1e9).toFixed(2)}B)`, m.name)));
  } catch (e) {
    showError(`could not read the model presets: ${e.message}`);
  }
  fitFormToSchema();
  const q = new URLSearchParams(location.search);
  fillFormFromQuery(q);
  $("job").addEventListener("submit", (ev) => {
    ev.preventDefault();
    history.pushState(null, "", `?${queryFromForm()}`);
    compute();
  });
  $("add-job").addEventListener("click", addJob);
  $("compute-plan").addEventListener("click", () => { syncUrl(); computePlan(); });
  $("copy-markdown").addEventListener("click", () => copyText($("markdown-text").value, "Markdown"));
  $("copy-link").addEventListener("click", () => copyText(location.href, "Link"));
  window.addEventListener("popstate", () => { fillFormFromQuery(new URLSearchParams(location.search)); compute(); });
  if (q.get("model")) await compute();
  else if (planJobs.length) await computePlan();
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", init);
