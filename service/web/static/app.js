// gpucost web page: the form's state lives in the URL query under the API's field names, so a link
// reopens the same quote. No framework and no CDN: the page must work offline, served by the API.
"use strict";

const API = { quote: "/v1/quote", breakeven: "/v1/breakeven", plan: "/v1/plan", estimate: "/v1/estimate",
  spend: "/v1/spend?by=team-month", spendRuns: "/v1/spend?by=run", runs: "/v1/runs", calibration: "/v1/calibration" };
// Accepted in a link as shorter spellings of the Constraints' names.
const ALIASES = { spot: "allow_spot", local: "include_local" };

const $ = (id) => document.getElementById(id);
const fields = () => Array.from(document.querySelectorAll("#job [name]"));
let schemas = {};
let planJobs = [];

// A link's query is untrusted: bounded before it is read, checked field by field against the schemas.
const MAX_QUERY_CHARS = 16384;

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

// The schema of the request field a form element fills, or null where the service has none.
function fieldSchema(el) {
  const group = el.dataset.group;
  if (group === "workload" || group === "constraints") return schemaProps(group)[el.name] || null;
  if (group === "request") return (resolve(schemas.QuoteRequest).properties || {})[el.name] || null;
  if (el.name === "runs_per_month") return (resolve(schemas.BreakevenRequest).properties || {}).runs_per_month || null;
  if (el.name === "horizon_months") return (resolve(schemas.PlanRequest).properties || {}).horizon_months || null;
  return { type: "string", minLength: 1, maxLength: 100 }; // rent_gpu, buy_gpu: a GPU name
}

// Reads a link's query into the form. Unknown keys are dropped (noted); a value its field's schema
// rejects is not put in the form (an error naming the field), so nothing is posted as given.
// Returns {notes, errors}.
function fillFormFromQuery(q) {
  $("job").reset(); // back/forward to a shorter link must not keep the longer one's fields
  planJobs = [];
  const notes = [];
  const errors = [];
  if (q.toString().length > MAX_QUERY_CHARS) {
    errors.push(`the link's query is over ${MAX_QUERY_CHARS} characters; it was not read`);
    renderJobs();
    return { notes, errors };
  }
  for (const [rawKey, value] of q.entries()) {
    const key = ALIASES[rawKey] || rawKey;
    if (key === "jobs") continue;
    const el = key === "horizon_months" ? $("horizon_months")
      : document.querySelector(`#job [name="${CSS.escape(key)}"]`);
    if (!el || el.disabled) { notes.push(`${key.slice(0, 60)}: not a field of this page, ignored`); continue; }
    if (el.type === "checkbox") {
      const v = value.toLowerCase();
      if (!["true", "false", "1", "0", "yes", "no", "on", "off", ""].includes(v)) {
        errors.push(`${key}: must be true or false`);
        continue;
      }
      el.checked = !["false", "0", "no", "off"].includes(v);
      continue;
    }
    const parsed = parseValue(el, value);
    const schema = fieldSchema(el);
    const problems = parsed === undefined || !schema ? [] : GpucostSchema.errors(parsed, schema, key);
    if (problems.length) { errors.push(...problems); continue; }
    if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === value)) {
      errors.push(`${key}: ${value.slice(0, 60)} is not one of the choices`);
      continue;
    }
    el.value = value;
    if (el.closest("details")) el.closest("details").open = true;
  }
  if (q.get("jobs")) {
    const read = jobsFromLink(q.get("jobs"));
    planJobs = read.jobs;
    notes.push(...read.notes);
    errors.push(...read.errors);
  }
  renderJobs();
  return { notes, errors };
}

// A shared plan's jobs: each checked against the service's JobSpec; unknown fields are dropped,
// a job with an invalid field is left out, each with the reason.
function jobsFromLink(text) {
  const out = { jobs: [], notes: [], errors: [] };
  let jobs;
  try {
    jobs = JSON.parse(text);
  } catch (e) {
    out.errors.push("jobs: the link's plan is not valid JSON");
    return out;
  }
  const spec = schemas.JobSpec;
  if (!spec) { out.errors.push("jobs: the service's schema could not be read, so the link's plan was not used"); return out; }
  if (!Array.isArray(jobs)) { out.errors.push("jobs: must be a list of jobs"); return out; }
  const most = (resolve(schemas.PlanRequest).properties || {}).jobs?.maxItems ?? 500;
  if (jobs.length > most) { out.errors.push(`jobs: at most ${most} jobs`); return out; }
  jobs.forEach((job, i) => {
    const clean = GpucostSchema.withoutUnknown(job, spec, `jobs[${i}]`, out.notes);
    const problems = GpucostSchema.errors(clean, spec, `jobs[${i}]`);
    if (!problems.length && out.jobs.some((j) => j.name === clean.name)) problems.push(`jobs[${i}].name: ${clean.name} is twice in the plan`);
    if (problems.length) out.errors.push(...problems.map((p) => `${p} (job left out)`));
    else out.jobs.push(clean);
  });
  return out;
}

// The request checked against its schema before it is posted: the error messages, if any.
function requestErrors(body, schemaName) {
  const schema = schemas[schemaName];
  return schema ? GpucostSchema.errors(body, schema, "").map((e) => e.replace(/^\./, "")) : [];
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

// "vast/, CN, AS" reads as "vast/CN, AS": empty parts of a catalog's region are dropped.
function regionLabel(region) {
  return String(region || "").split(",").map((s) => s.trim()).filter(Boolean).join(", ") || "-";
}

function where(o) {
  return o.kind === "local" ? `local build ${o.instance_type}` : `${o.provider}/${regionLabel(o.region)} ${o.instance_type}`;
}

// "2025-11-30, 12 months old": a price's date and how old it is now.
function ageText(asOf) {
  if (!asOf) return "-";
  const days = Math.floor((Date.now() - Date.parse(asOf)) / 86400000);
  const day = String(asOf).slice(0, 10);
  if (!Number.isFinite(days)) return day;
  const age = days < 1 ? "today" : days < 60 ? `${days} day${days === 1 ? "" : "s"} old` : `${Math.round(days / 30.44)} months old`;
  return `${day}, ${age}`;
}

const pricingLabel = (p) => String(p || "-").replace("_", "-");

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

function renderWarnings(list, warnings) {
  list.replaceChildren(...(warnings || []).map((w) => { const li = document.createElement("li"); li.textContent = w; return li; }));
  list.hidden = !(warnings || []).length;
}

// The cheapest commitment of an option (reserved, savings plan, ...): rate and the use it needs.
function commitmentText(c) {
  const term = c.term_months >= 1 ? `${c.term_months} months` : `${Math.round(c.term_months * 730)} h block`;
  const use = c.breakeven_utilization == null ? "per hour used"
    : `pays above ${Math.round(c.breakeven_utilization * 100)}% use`;
  return `Committed (${c.kind.replace("_", " ")}, ${term}, ${c.payment.replace("_", " ")}): ` +
    `${usd(c.effective_hourly_usd)}/h per instance, ${use} (as of ${String(c.as_of).slice(0, 10)}).`;
}

// Which figures were measured (CONTRACT v3 `basis`): a mark next to the hours, with the measurement's
// id in its tooltip; the model's own figures carry none.
function basisText(basis, id) {
  if (basis === "measured") return `speed and memory measured on this GPU (measurement ${id})`;
  if (basis === "scaled") return `speed and memory scaled from measurement ${id} on another GPU by the model's ratio`;
  return "the model's figures";
}

function basisBadge(basis, id) {
  if (basis !== "measured" && basis !== "scaled") return null;
  const mark = document.createElement("span");
  mark.className = `badge basis-${basis}`;
  mark.textContent = basis;
  mark.title = basisText(basis, id);
  mark.dataset.measurementId = id || "";
  return mark;
}

// As service/render/risk.py writes them: a quota's state with the code, need and limit where known,
// and a spot option's reclaim rate, expected and p90 cost and hours, and chance of the deadline.
function quotaText(o) {
  const state = o.quota || "unknown";
  const d = o.quota_detail || {};
  if (!d.code) return `quota ${state}`;
  const num = (x) => Number(x).toLocaleString("en-US", { maximumFractionDigits: 2 });
  const limit = d.limit === null || d.limit === undefined ? "?" : num(d.limit);
  return `quota ${state} (${d.code}: need ${num(d.need)} / limit ${limit}${d.unit ? " " + d.unit : ""})`;
}

function spotText(r) {
  const source = r.bucket || (String(r.source || "").startsWith("prior") ? "prior" : r.source || "?");
  const pct = (x) => `${Math.round(Number(x) * 100)}%`;
  let meets = r.p_meets_deadline === null || r.p_meets_deadline === undefined ? "" : `; meets the deadline ${pct(r.p_meets_deadline)}`;
  if (meets && r.fallback && r.p_fallback) meets += ` (on demand in ${pct(r.p_fallback)})`;
  return `spot: ${Number(r.interruptions_per_hour).toFixed(4)} reclaims/h (${source}); cost ${usd(r.expected_cost_usd)} ` +
    `expected, ${usd(r.p90_cost_usd)} p90; ${hrs(r.expected_hours)} expected, ${hrs(r.p90_hours)} p90${meets}`;
}

function riskCell(row, o) {
  const td = row.insertCell();
  td.className = "risk";
  if (o.kind !== "cloud") { td.textContent = "-"; return td; }
  const quota = document.createElement("span");
  quota.className = `badge quota-${o.quota || "unknown"}`;
  quota.textContent = quotaText(o);
  const d = o.quota_detail || {};
  quota.title = d.code ? `the ${d.code} quota of ${d.provider || o.provider} ${d.region || regionLabel(o.region)}`
    : "no quota data: gpucost quotas refresh, or GPUCOST_QUOTAS";
  td.append(quota);
  if (o.spot_risk) {
    const spot = document.createElement("span");
    spot.className = "spot-risk";
    spot.textContent = spotText(o.spot_risk);
    spot.title = `reclaim rate from ${o.spot_risk.source}`;
    td.append(spot);
  }
  return td;
}

function renderQuote(q) {
  // Providers whose prices the service called stale: their rows' price dates are marked.
  const stale = new Set((q.warnings || []).map((w) => (/^stale prices: (\S+) prices/.exec(w) || [])[1]).filter(Boolean));
  // Each option's own risks (a tight fit, idle GPUs, a slow host) follow the quote's, numbered by
  // row as the CLI and the Markdown number them.
  const optionWarnings = q.options.flatMap((o, i) => (o.warnings || []).map((w) => `#${i + 1}: ${w}`));
  renderWarnings($("quote-warnings"), [...(q.warnings || []), ...optionWarnings]);
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
    cell(row, where(o), "wrap");
    cell(row, gpusText(o));
    cell(row, usd(o.cost_usd), "num");
    const hoursCell = cell(row, hrs(o.hours), "num");
    const mark = basisBadge(o.basis, o.measurement_id);
    if (mark) hoursCell.append(" ", mark);
    cell(row, usd(o.hourly_usd), "num");
    cell(row, pricingLabel(o.pricing));
    const fit = cell(row, `${o.memory_need_gb_per_gpu.toFixed(1)} / ${o.vram_gb_per_gpu}`, "num");
    if ((o.warnings || []).length) {
      fit.classList.add("warned");
      fit.title = o.warnings.join("\n");
      fit.append(" ⚠");
    }
    cell(row, recipeText(o), "recipe");
    cell(row, ageText(o.as_of), stale.has(o.provider) ? "age old" : "age");
    riskCell(row, o);
  });
  const b = q.best;
  $("quote-summary").textContent = b
    ? `Cheapest: ${where(b)}, ${gpusText(b)}, ${hrs(b.hours)} per run, ${usd(b.cost_usd)} for ${q.runs} run(s).`
    : "No feasible option: see why each offer was rejected below.";
  if (b && b.basis && b.basis !== "model") $("quote-summary").textContent += ` Its hours: ${basisText(b.basis, b.measurement_id)}.`;
  if (b && b.kind === "cloud") $("quote-summary").textContent += ` ${quotaText(b)[0].toUpperCase()}${quotaText(b).slice(1)}.`;
  if (b && b.spot_risk) $("quote-summary").textContent += ` ${spotText(b.spot_risk)}.`;
  if (b && (b.commitments || []).length) $("quote-summary").textContent += " " + commitmentText(b.commitments[0]);
  $("quote-rejected").textContent = q.rejected.length
    ? "Rejected: " + q.rejected.map((g) => `${g.reason}: ${g.count}`).join("; ") : "";
  $("quote-sources").textContent = "Prices as of " + Object.entries(q.prices_as_of || {})
    .map(([p, d]) => `${p} ${ageText(d)}`).join("; ") + `; snapshot ${q.snapshot_id}.`;
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

// As the CLI and the Markdown say it (service/render/labels.py): a break-even the build does not
// live to see is "past its life".
function breakevenPhrase(r) {
  if (r.breakeven_runs === null || r.breakeven_runs === undefined) {
    return "never (a rented run costs no more than the energy of an owned one)";
  }
  if (!r.within_lifetime) return `past its ${r.buy.lifetime_months}-month life`;
  return `after ${r.breakeven_runs} runs = ${Number(r.breakeven_months).toFixed(1)} months at ${r.runs_per_month} runs/month`;
}

function showSvg(container, svgText) {
  // The SVG comes from this service's own renderer; parse it rather than inject HTML. Under a strict
  // CSP (style-src 'self') style attributes and <style> elements are refused even while parsing, so
  // the text's style attributes are renamed first and applied as CSSOM properties, which the policy
  // allows; the renderer's one <style> rule is in style.css.
  const text = svgText.replace(/<style[\s\S]*?<\/style>/g, "").replace(/\sstyle="/g, ' data-style="');
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const svg = doc.documentElement;
  if (svg.nodeName !== "svg") throw new Error("the chart is not an SVG");
  svg.querySelectorAll("script, foreignObject").forEach((el) => el.remove());
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.setAttribute("aria-hidden", "true");
  const live = document.importNode(svg, true);
  live.querySelectorAll("[data-style]").forEach((el) => {
    el.style.cssText = el.getAttribute("data-style");
    el.removeAttribute("data-style");
  });
  container.replaceChildren(live);
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
    const problems = requestErrors(body, "BreakevenRequest");
    if (problems.length) throw new Error(problems.join("; "));
    const [r, svg, md] = await Promise.all([call(API.breakeven, body), call(API.breakeven, body, "svg"),
      call(API.breakeven, body, "markdown")]);
    $("breakeven-summary").textContent = `Rent ${r.rent.provider} ${r.rent.instance_type} (${r.rent.gpu}) at ` +
      `${usd(r.rent.cost_per_run_usd)} a run, or buy ${r.buy.build} for ${usd(r.buy.capex_usd)}; break-even: ${breakevenPhrase(r)}. ` +
      `Cheaper over ${r.horizon_months} months: ${r.cheaper_at_horizon}.`;
    renderWarnings($("breakeven-notes"), r.notes);
    showSvg($("breakeven-chart"), svg);
    markdownParts.breakeven = md;
  } catch (e) {
    $("breakeven-summary").textContent = `No break-even: ${e.message}`;
    $("breakeven-chart").replaceChildren();
    delete markdownParts.breakeven;
  }
  $("breakeven").hidden = false;
}

// The estimate of the chosen option's GPU (POST /v1/estimate): its hours, memory and speed, and
// whether they were measured, scaled from a measurement or the model's.
async function computeEstimate(req, q) {
  const box = $("estimate-summary");
  const b = q.best;
  box.replaceChildren();
  box.hidden = !b;
  if (!b) return;
  // The chosen option's recipe, pinned: the estimate is then of the very run the quote priced
  // (with "auto" the estimator may pick another micro-batch for the bare GPU).
  const workload = { ...req.workload };
  const r = b.recipe;
  const known = schemaProps("workload") || {};
  if (r) {
    const pinned = { micro_batch_size: r.micro_batch_size, global_batch_size: r.requested_global_batch_size,
      gradient_checkpointing: r.gradient_checkpointing, sharding: r.sharding, precision: r.precision };
    for (const [k, v] of Object.entries(pinned)) if (v !== null && v !== undefined && known[k]) workload[k] = v;
  }
  const body = { workload, gpu: b.gpu, gpu_count: Math.max(1, Math.round(b.gpus_per_node * b.nodes)) };
  try {
    const problems = requestErrors(body, "EstimateRequest");
    if (problems.length) throw new Error(problems.join("; "));
    const e = await call(API.estimate, body);
    box.append(`Estimate of the chosen recipe on ${e.gpu_count}x ${e.gpu}: ${hrs(e.hours)} per run, ${Number(e.memory_gb.total_per_gpu).toFixed(1)} GB ` +
      `per GPU, ${Math.round(e.tokens_per_second).toLocaleString("en-US")} tokens/s; ${basisText(e.basis, e.measurement_id)}.`);
    const mark = basisBadge(e.basis, e.measurement_id);
    if (mark) box.append(" ", mark);
    box.dataset.basis = e.basis || "model";
  } catch (err) {
    box.textContent = `No estimate for ${b.gpu}: ${err.message}`;
    delete box.dataset.basis;
  }
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
    const problems = requestErrors(body, "QuoteRequest");
    if (problems.length) throw new Error(problems.join("; "));
    const [q, md] = await Promise.all([call(API.quote, body), call(API.quote, body, "markdown")]);
    markdownParts = { quote: md };
    renderQuote(q);
    renderMarkdown();
    $("status").textContent = `Quoted ${q.options.length} option(s) (solver ${q.solver.name}: ${q.solver.status}).`;
    await Promise.all([computeBreakeven(req, q), computeEstimate(req, q)]);
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
    const problems = requestErrors(body, "PlanRequest");
    if (problems.length) throw new Error(problems.join("; "));
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

// Quoted vs billed (issue 25): GET /v1/spend?by=team-month, the runs and the learnt corrections.
const MAX_SPEND_ROWS = 500; // the page shows this many rows of each table; the CSV export has them all
let spend = null;

async function getJson(path) {
  const resp = await fetch(path, { headers: { accept: "application/json" } });
  if (!resp.ok) {
    let message = `${resp.status} ${resp.statusText}`;
    try { const doc = await resp.json(); if (doc.detail) message = String(typeof doc.detail === "string" ? doc.detail : JSON.stringify(doc.detail)); } catch (e) { /* keep */ }
    throw new Error(`${path}: ${message}`);
  }
  return resp.json();
}

function signedUsd(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "-";
  return (x > 0 ? "+" : x < 0 ? "−" : "") + usd(Math.abs(x));
}

function renderSpend() {
  if (!spend) return;
  const team = $("spend-team").value;
  const mine = (t) => !team || t === team;
  const rows = spend.months.filter((r) => mine(r.x_Team));
  const body = $("spend-table").tBodies[0];
  body.replaceChildren();
  let quoted = 0, billed = 0, effective = 0;
  rows.slice(0, MAX_SPEND_ROWS).forEach((r) => {
    const row = body.insertRow();
    const diff = r.EffectiveCost - r.x_PlannedCost;
    cell(row, r.x_Team || "-", "wrap");
    cell(row, r.x_Month || "-");
    cell(row, usd(r.x_PlannedCost), "num");
    cell(row, usd(r.BilledCost), "num");
    cell(row, usd(r.EffectiveCost), "num");
    const share = r.x_PlannedCost > 0 ? Math.abs(diff / r.x_PlannedCost * 100) : null;
    const pct = share === null ? "" : ` (${diff >= 0 ? "+" : "−"}${share < 10 ? share.toFixed(1) : Math.round(share)}%)`;
    cell(row, signedUsd(diff) + pct, "num " + (diff > 0.005 ? "over" : diff < -0.005 ? "under" : ""));
    cell(row, hrs(r.x_PlannedHours), "num");
    cell(row, hrs(r.x_BilledHours), "num");
    cell(row, String(r.x_Lines ?? 0), "num");
  });
  rows.forEach((r) => { quoted += r.x_PlannedCost || 0; billed += r.BilledCost || 0; effective += r.EffectiveCost || 0; });
  if (!rows.length) { const row = body.insertRow(); cell(row, "no saved runs or imported bills yet", "wrap"); }
  const billedByRun = new Map(spend.byRun.map((r) => [r.x_RunId, r]));
  const runs = spend.runs.filter((r) => mine(r.team || "(unmatched)"));
  const rbody = $("runs-table").tBodies[0];
  rbody.replaceChildren();
  runs.slice(0, MAX_SPEND_ROWS).forEach((r) => {
    const row = rbody.insertRow();
    const bill = billedByRun.get(r.run_id);
    cell(row, r.run_id, "wrap");
    cell(row, r.team || "-", "wrap");
    cell(row, r.job || "-", "wrap");
    cell(row, r.option ? `${where(r.option)}, ${gpusText(r.option)}` : "-", "wrap");
    cell(row, usd(r.quoted_usd), "num");
    cell(row, bill && bill.x_Lines ? usd(bill.BilledCost) : "not billed yet", "num");
    cell(row, bill && bill.x_Lines ? usd(bill.EffectiveCost) : "-", "num");
    cell(row, hrs(r.quoted_hours), "num");
    cell(row, bill && bill.x_Lines ? hrs(bill.x_BilledHours) : "-", "num");
    cell(row, String(r.created_at || "").slice(0, 10) || "-");
  });
  const shown = (n) => (n > MAX_SPEND_ROWS ? ` (the first ${MAX_SPEND_ROWS} shown; gpucost spend --csv has all)` : "");
  $("spend-summary").textContent = `${team ? `Team ${team}` : "All teams"}: quoted ${usd(quoted)}, billed ${usd(billed)}, ` +
    `effective ${usd(effective)} (${signedUsd(effective - quoted)} against the quotes) over ${rows.length} team-month(s)` +
    `${shown(rows.length)}; ${runs.length} saved run(s)${shown(runs.length)}.`;
  const list = $("calibration-list");
  list.replaceChildren(...spend.calibration.map((c) => {
    const li = document.createElement("li");
    li.textContent = `${c.provider} ${c.gpu}: hours x${c.hours_factor}, rate x${c.rate_factor} (from ${(c.runs || []).join(", ")})`;
    return li;
  }));
  if (!spend.calibration.length) {
    const li = document.createElement("li");
    li.textContent = "none yet: corrections come from reconciled, non-provisional runs";
    list.append(li);
  }
}

async function loadSpend() {
  hideError();
  $("load-spend").disabled = true;
  $("status").textContent = "Reading quoted and billed spend…";
  try {
    const [months, byRun, runs, calibration] = await Promise.all([getJson(API.spend), getJson(API.spendRuns),
      getJson(API.runs), getJson(API.calibration)]);
    spend = { months: months.rows || [], byRun: byRun.rows || [], runs: runs.runs || [], calibration: calibration.calibration || [] };
    const select = $("spend-team");
    const chosen = select.value;
    const teams = [...new Set([...spend.months.map((r) => r.x_Team), ...spend.runs.map((r) => r.team)].filter(Boolean))].sort();
    select.replaceChildren(new Option("all teams", ""), ...teams.map((t) => new Option(t, t)));
    if (teams.includes(chosen)) select.value = chosen;
    renderSpend();
    $("spend-result").hidden = false;
    $("status").textContent = "Quoted vs billed shown.";
  } catch (e) {
    showError(`quoted vs billed: ${e.message}`);
    $("status").textContent = "Quoted vs billed could not be read.";
  } finally {
    $("load-spend").disabled = false;
    document.body.dataset.spendLoaded = String(Number(document.body.dataset.spendLoaded || 0) + 1);
  }
}

function syncUrl() {
  const q = queryFromForm().toString();
  history.replaceState(null, "", q ? `?${q}` : location.pathname);
}

function showQueryNotes({ notes, errors }) {
  const box = $("query-notes");
  box.textContent = notes.length ? `From the link: ${notes.join("; ")}.` : "";
  box.hidden = !notes.length;
  if (errors.length) showError(`The link's ${errors.join("; ")}`);
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
    GpucostSchema.use(schemas);
    const list = $("model-presets");
    models.models.forEach((m) => list.append(new Option(`${m.name} (${(m.params / 1e9).toFixed(2)}B)`, m.name)));
  } catch (e) {
    showError(`could not read the model presets: ${e.message}`);
  }
  fitFormToSchema();
  const q = new URLSearchParams(location.search);
  const read = fillFormFromQuery(q);
  showQueryNotes(read);
  $("job").addEventListener("submit", (ev) => {
    ev.preventDefault();
    $("query-notes").hidden = true; // they were about the link; the form is the question now
    history.pushState(null, "", `?${queryFromForm()}`);
    compute();
  });
  $("add-job").addEventListener("click", addJob);
  $("compute-plan").addEventListener("click", () => { syncUrl(); computePlan(); });
  $("copy-markdown").addEventListener("click", () => copyText($("markdown-text").value, "Markdown"));
  $("copy-link").addEventListener("click", () => copyText(location.href, "Link"));
  $("load-spend").addEventListener("click", loadSpend);
  $("spend-team").addEventListener("change", renderSpend);
  window.addEventListener("popstate", () => {
    const again = fillFormFromQuery(new URLSearchParams(location.search));
    showQueryNotes(again);
    if (!again.errors.length) compute();
  });
  // A link with an invalid field is shown, named, and not computed: the user fixes it and presses Quote.
  if (read.errors.length) $("status").textContent = "The link has invalid fields: fix them and press Quote.";
  else if (q.get("model")) await compute();
  else if (planJobs.length) await computePlan();
  // A link to /#spend opens on the quoted-vs-billed view.
  if (location.hash === "#spend") await loadSpend();
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", init);
