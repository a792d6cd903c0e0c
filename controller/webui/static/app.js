// skillopt WebUI: renders JSON snapshots (embedded in the page, then pushed over SSE) and
// posts actions. No framework, no build step; text is always set with textContent.
"use strict";

// The script runs: the "needs JavaScript" notice of base.html goes.
document.getElementById("needs-js")?.remove();

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const $ = (sel) => document.querySelector(sel);
const put = (node, ...kids) => node.replaceChildren(...kids.filter((k) => k !== null && k !== undefined));
const score = (v) => (v === null || v === undefined ? "-" : Number(v).toFixed(3));
// A score with its 95% interval, as the CLI prints it: 0.625 [0.521, 0.719].
const scoreCI = (v, ci) => (v === null || v === undefined ? "-" : score(v) + (Array.isArray(ci) ? ` [${score(ci[0])}, ${score(ci[1])}]` : ""));
const tokens = (n) => (!n ? "0" : n >= 1e6 ? (n / 1e6).toFixed(2) + "M" : n >= 1e3 ? (n / 1e3).toFixed(1) + "k" : String(n));
const money = (x) => "$" + Number(x || 0).toFixed(4);
const when = (t) => (t ? new Date(t * 1000).toLocaleString() : "-");
const secs = (s) => (s === null || s === undefined ? "" : s < 10 ? s.toFixed(1) + "s" : Math.round(s) + "s");

function snapshotFromPage() {
  const node = document.getElementById("snapshot");
  return node ? JSON.parse(node.textContent) : null;
}

// Follow an SSE stream of snapshots; `render` gets each one.
function follow(url, render) {
  const source = new EventSource(url);
  source.addEventListener("open", () => { document.body.dataset.sse = "open"; });
  source.addEventListener("error", () => { document.body.dataset.sse = "reconnecting"; });
  source.addEventListener("snapshot", (ev) => {
    const snap = JSON.parse(ev.data);
    document.body.dataset.received = String(Date.now());
    render(snap);
  });
  return source;
}

async function post(url, body) {
  const resp = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body || {}),
    credentials: "same-origin",
  });
  let data = {};
  try { data = await resp.json(); } catch (e) { data = { error: "HTTP " + resp.status }; }
  if (!resp.ok && !data.error) data.error = "HTTP " + resp.status;
  data.httpStatus = resp.status;
  return data;
}

function showError(node, message) {
  node.hidden = !message;
  node.textContent = message || "";
}

function statusLabel(info) {
  if (info.status !== "running") return info.status;
  if (info.stop_requested) return "stopping";
  return ["done", "stopped"].includes(info.phase) ? "finishing" : "running";
}

// -- runs list --------------------------------------------------------------------------------

// Runs picked for comparison (kept across the list's live re-renders).
const picked = new Set();

function updateCompare() {
  const button = $("#compare-runs");
  if (!button) return;
  const names = [...picked];
  button.hidden = names.length < 2;
  button.href = "/compare?runs=" + names.map(encodeURIComponent).join(",");
  button.textContent = `Compare ${names.length} runs`;
}

// The list's view: sort column and direction, filters, search (kept across live re-renders).
const view = { sort: "started_at", desc: true, q: "", status: "", env: "", agent: "", mode: "", archived: false };
let lastRuns = { runs: [] };

function modeOf(r) {
  return r.simulated === null ? "-" : r.simulated ? (r.noisy ? "noisy sim" : "simulated") : "real";
}

const SORT_KEYS = {
  name: (r) => r.name, status: (r) => statusLabel(r), env: (r) => r.env || "", agent: (r) => r.agent || "",
  models: (r) => (r.target || "") + "/" + (r.optimizer || ""), mode: modeOf, best_score: (r) => r.best_score ?? -1,
  steps: (r) => r.steps_done, tokens: (r) => r.tokens, cost_usd: (r) => r.cost_usd, started_at: (r) => r.started_at,
  hosts: (r) => (r.hosts || []).join(","),
};

function visibleRuns(runs) {
  const q = view.q.trim().toLowerCase();
  const out = runs.filter((r) => (view.archived || !r.notes.archived) &&
    (!view.status || statusLabel(r) === view.status) && (!view.env || r.env === view.env) &&
    (!view.agent || r.agent === view.agent) && (!view.mode || modeOf(r) === view.mode) &&
    (!q || [r.name, r.notes.note, ...r.notes.tags].join(" ").toLowerCase().includes(q)));
  const key = SORT_KEYS[view.sort] || SORT_KEYS.started_at;
  out.sort((a, b) => { const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (view.desc ? -1 : 1); });
  return out;
}

function fillFilter(select, values) {
  const keep = select.value;
  select.replaceChildren(el("option", { value: "", text: select.dataset.all }), ...[...new Set(values)].filter(Boolean).sort().map((v) => el("option", { value: v, text: v })));
  select.value = [...select.options].some((o) => o.value === keep) ? keep : "";
}

function initRunsControls() {
  for (const th of document.querySelectorAll("#runs th[data-sort]")) {
    th.addEventListener("click", () => {
      view.desc = view.sort === th.dataset.sort ? !view.desc : ["best_score", "tokens", "cost_usd", "started_at", "steps"].includes(th.dataset.sort);
      view.sort = th.dataset.sort;
      renderRuns(lastRuns);
    });
  }
  $("#runs-search").addEventListener("input", (e) => { view.q = e.target.value; renderRuns(lastRuns); });
  for (const key of ["status", "env", "agent", "mode"]) {
    $("#f-" + key).addEventListener("change", (e) => { view[key] = e.target.value; renderRuns(lastRuns); });
  }
  $("#f-archived").addEventListener("change", (e) => { view.archived = e.target.checked; renderRuns(lastRuns); });
}

function renderRuns(snap) {
  lastRuns = snap;
  fillFilter($("#f-status"), snap.runs.map(statusLabel));
  fillFilter($("#f-env"), snap.runs.map((r) => r.env));
  fillFilter($("#f-agent"), snap.runs.map((r) => r.agent));
  fillFilter($("#f-mode"), snap.runs.map(modeOf));
  for (const th of document.querySelectorAll("#runs th[data-sort]")) {
    th.dataset.dir = th.dataset.sort === view.sort ? (view.desc ? "desc" : "asc") : "";
  }
  const body = $("#runs tbody");
  const present = new Set(snap.runs.map((r) => r.name));
  for (const name of [...picked]) if (!present.has(name)) picked.delete(name);
  const shown = visibleRuns(snap.runs);
  body.replaceChildren(...shown.map((r) => {
    const st = statusLabel(r);
    const box = el("input", { type: "checkbox", class: "pick", "aria-label": "compare " + r.name, checked: picked.has(r.name) });
    box.addEventListener("change", () => { box.checked ? picked.add(r.name) : picked.delete(r.name); updateCompare(); });
    return el("tr", { "data-run": r.name, class: r.notes.archived ? "archived" : "" },
      el("td", {}, box),
      el("td", { title: r.notes.note || "" }, el("a", { href: "/runs/" + encodeURIComponent(r.name), text: r.name }),
        ...r.notes.tags.map((t) => el("span", { class: "tag", text: t }))),
      el("td", {}, el("span", { class: "pill " + st, text: st, title: r.damage ? r.damage.headline + " — " + r.damage.advice : "" })),
      el("td", { text: r.env || "-" }),
      el("td", { text: r.agent || (r.kind === "eval" ? "eval" : "-") }),
      el("td", { text: (r.target || "-") + " / " + (r.optimizer || "-") }),
      el("td", {}, r.simulated === null ? "-" : el("span", { class: "badge" + (r.simulated ? " sim" : ""), title: r.mode_reason, text: modeOf(r) })),
      el("td", { class: "num", text: scoreCI(r.best_score, r.best_score_ci95) }),
      el("td", { class: "num", text: r.total_steps ? r.steps_done + "/" + r.total_steps : String(r.steps_done || "-") }),
      el("td", { class: "num", text: tokens(r.tokens) }),
      el("td", { class: "num", text: money(r.cost_usd) }),
      el("td", { text: when(r.started_at) }),
      el("td", { text: (r.hosts || []).join(", ") || "-" }),
    );
  }));
  $("#runs-count").textContent = shown.length === snap.runs.length ? `${snap.runs.length} runs` : `${shown.length} of ${snap.runs.length} runs`;
  $("#no-runs").hidden = snap.runs.length > 0;
  updateCompare();
}

// -- new run ----------------------------------------------------------------------------------

function initNew() {
  const form = $("#new-run");
  const select = $("#config");
  const error = $("#form-error");

  async function load() {
    const wanted = select.value;
    delete form.dataset.loaded;
    const resp = await fetch("/api/configs/" + encodeURIComponent(wanted), { headers: { Accept: "application/json" } });
    const data = await resp.json();
    if (select.value !== wanted) return; // a later choice's answer fills the form, not this one
    if (!resp.ok) { showError(error, data.error); return; }
    showError(error, "");
    for (const input of form.querySelectorAll("[data-key]")) {
      const f = data.values[input.dataset.key];
      if (!f) continue;
      if (input.type === "checkbox") input.checked = Boolean(f.value);
      else if (input.tagName === "SELECT") {
        input.replaceChildren(...f.choices.map((c) => el("option", { value: c, text: c })));
        input.value = f.value;
      } else input.value = f.value;
    }
    form.dataset.loaded = select.value;
  }

  function collect() {
    const values = {};
    for (const input of form.querySelectorAll("[data-key]")) {
      values[input.dataset.key] = input.type === "checkbox" ? input.checked : input.value;
    }
    return { config: select.value, name: $("#run-name").value, values, extra: $("#extra").value };
  }

  // The config system's messages start with the key they are about ("train.batch_size (from
  // --set): ..."): such a message is also shown next to that field.
  function showFieldError(message) {
    for (const n of form.querySelectorAll(".field-error")) n.remove();
    for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
    const key = /^([a-z_]+(?:\.[a-z_]+)+)/.exec(message || "");
    const input = key && form.querySelector(`[data-key="${key[1]}"]`);
    if (!input) return;
    input.setAttribute("aria-invalid", "true");
    input.closest("label").append(el("small", { class: "field-error", text: message }));
  }

  function showChecks(data) {
    const list = $("#checks");
    list.replaceChildren(...(data.checks || []).map((c) =>
      el("li", { class: c.ok ? "ok" : "bad", "data-check": c.name }, el("b", { text: c.name }), c.detail)));
    const cmd = $("#command");
    cmd.hidden = !data.command;
    cmd.textContent = data.command || "";
  }

  $("#preflight").addEventListener("click", async () => {
    const data = await post("/api/preflight", collect());
    showError(error, data.error);
    showFieldError(data.error);
    showChecks(data);
    form.dataset.preflight = data.error ? "error" : data.ok ? "ok" : "failed";
  });
  $("#launch").addEventListener("click", async () => {
    $("#launch").disabled = true;
    const data = await post("/api/launch", collect());
    $("#launch").disabled = false;
    showError(error, data.error);
    showFieldError(data.error);
    showChecks(data);
    if (data.ok) window.location.assign(data.url);
  });
  select.addEventListener("change", load);
  load();
}

// -- one run ----------------------------------------------------------------------------------

const STAGES = ["rollout", "reflect", "aggregate", "select", "update", "evaluate"];
const PHASES = {
  starting: "starting", baseline: "baseline: initial skill on the selection split", training: "",
  epoch_end: "end of epoch", test: "test evaluation", done: "done", stopped: "stopped", failed: "failed",
};

// A mark's tooltip: what the gate decided at that step, with the candidate's interval.
function markTitle(r) {
  const ci = Array.isArray(r.candidate_gate_score_ci95) ? ` [${r.candidate_gate_score_ci95.map((v) => v.toFixed(3)).join(", ")}]` : "";
  return `step ${r.step} (epoch ${r.epoch ?? "-"}): candidate ${r.candidate_gate_score.toFixed(3)}${ci} → ${r.action}` +
    (r.current_score !== null && r.current_score !== undefined ? `; current skill ${r.current_score.toFixed(3)}` : "") +
    (r.gate_reason ? ` (${r.gate_reason})` : "") + ". Click: the step.";
}

function svgText(mk, attrs, text) { const t = mk("text", attrs); t.textContent = text; return t; }

function drawCurve(svg, history, baseline) {
  const W = 640, H = 260, L = 52, R = 12, T = 12, B = 36;
  const n = Math.max(1, history.length ? history[history.length - 1].step : 1);
  const x = (s) => L + (s / n) * (W - L - R);
  const y = (v) => T + (1 - v) * (H - T - B);
  const ns = "http://www.w3.org/2000/svg";
  const mk = (tag, attrs) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); return e; };
  svg.replaceChildren();
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(mk("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "gridline" }));
    const t = mk("text", { x: 18, y: y(v) + 3 }); t.textContent = v.toFixed(2); svg.append(t);
  }
  svg.append(mk("line", { x1: L, x2: W - R, y1: y(0), y2: y(0), class: "axis" }));
  for (let s = 0; s <= n; s += Math.max(1, Math.ceil(n / 12))) {
    const t = mk("text", { x: x(s) - 3, y: H - 18 }); t.textContent = String(s); svg.append(t);
  }
  svg.append(svgText(mk, { x: (L + W - R) / 2 - 12, y: H - 3, class: "axis-title" }, "step"),
    svgText(mk, { x: 10, y: T, class: "axis-title", transform: `rotate(-90 10 ${T})`, "text-anchor": "end" }, "selection score"));
  const pts = [[0, baseline ?? 0]];
  for (const r of history) pts.push([r.step, r.current_score ?? pts[pts.length - 1][1]]);
  // The current skill's 95% interval as a band (steps without one: the line itself).
  const bands = [history.length ? history[0].current_score_before_ci95 : null, ...history.map((r) => r.current_score_ci95)];
  if (bands.some((b) => Array.isArray(b))) {
    const lo = pts.map(([, v], i) => (Array.isArray(bands[i]) ? bands[i][0] : v));
    const hi = pts.map(([, v], i) => (Array.isArray(bands[i]) ? bands[i][1] : v));
    let band = `M${x(pts[0][0])},${y(hi[0])}`;
    for (let i = 1; i < pts.length; i++) band += `H${x(pts[i][0])}V${y(hi[i])}`;
    band += `H${x(n)}V${y(lo[lo.length - 1])}`;
    for (let i = pts.length - 1; i > 0; i--) band += `H${x(pts[i][0])}V${y(lo[i - 1])}`;
    band += `H${x(pts[0][0])}Z`;
    svg.append(mk("path", { d: band, class: "band" }));
  }
  let d = "";
  pts.forEach(([s, v], i) => {
    d += i === 0 ? `M${x(s)},${y(v)}` : `H${x(s)}V${y(v)}`;
  });
  svg.append(mk("path", { d, class: "cur" }));
  const roll = history.filter((r) => r.rollout_hard !== null && r.rollout_hard !== undefined);
  if (roll.length) {
    svg.append(mk("path", { d: roll.map((r, i) => (i ? "L" : "M") + x(r.step) + "," + y(r.rollout_hard)).join(""), class: "roll" }));
    for (const r of roll) svg.append(mk("circle", { cx: x(r.step), cy: y(r.rollout_hard), r: 2.5, class: "rolldot" }));
  }
  for (const r of history) {
    if (r.candidate_gate_score === null || r.candidate_gate_score === undefined) continue;
    const cx = x(r.step), cy = y(r.candidate_gate_score);
    const ci = r.candidate_gate_score_ci95;
    if (Array.isArray(ci)) svg.append(mk("line", { x1: cx, x2: cx, y1: y(ci[0]), y2: y(ci[1]), class: "cibar" }));
    const title = mk("title", {});
    title.textContent = markTitle(r);
    if (String(r.action).includes("accept")) {
      const c = mk("circle", { cx, cy, r: 5, class: "acc mark", "data-step": r.step });
      c.append(title);
      svg.append(c);
    } else {
      const g = mk("g", { class: "rej mark", "data-step": r.step });
      // A transparent hit area: the cross's thin lines are hard to point at.
      g.append(mk("circle", { cx, cy, r: 7, class: "hit" }), mk("line", { x1: cx - 5, y1: cy - 5, x2: cx + 5, y2: cy + 5 }), mk("line", { x1: cx - 5, y1: cy + 5, x2: cx + 5, y2: cy - 5 }), title);
      svg.append(g);
    }
  }
}

// "81% (target 92%, optimizer 3%)" from a summary's cacheable prefix share; "-" before it.
function prefixShare(sm) {
  if (!sm || sm.cacheable_prefix_share === null || sm.cacheable_prefix_share === undefined) return "-";
  const pct = (x) => `${Math.round(x * 100)}%`;
  const roles = Object.entries(sm.cacheable_prefix || {}).map(([role, m]) => `${role} ${pct(m.share)}`);
  return pct(sm.cacheable_prefix_share) + (roles.length > 1 ? ` (${roles.join(", ")})` : "");
}

// Tokens per step (bars: the optimizer's calls and the target's rollouts of the step) and the
// run's cost so far (line, right axis; from the run's prices).
function drawTokens(svg, history) {
  const W = 640, H = 200, L = 60, R = 60, T = 12, B = 36;
  const per = history.map((r) => (r.optimizer_tokens || 0) + (r.target_tokens || 0));
  const total = history.reduce((acc, r) => [...acc, (acc.length ? acc[acc.length - 1] : 0) + (r.cost_usd || 0)], []);
  const n = Math.max(1, history.length ? history[history.length - 1].step : 1);
  // The cost axis spans the run's own cost (cents are common); a run without prices costs 0.
  const maxPer = Math.max(1, ...per), spent = Math.max(0, ...total), maxTotal = spent || 1;
  const x = (s) => L + (s / n) * (W - L - R);
  const ns = "http://www.w3.org/2000/svg";
  const mk = (tag, attrs) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); return e; };
  svg.replaceChildren();
  const yb = (v) => T + (1 - v / maxPer) * (H - T - B), yl = (v) => T + (1 - v / maxTotal) * (H - T - B);
  svg.append(mk("line", { x1: L, x2: W - R, y1: yb(0), y2: yb(0), class: "axis" }));
  svg.append(svgText(mk, { x: 4, y: yb(maxPer) + 4 }, tokens(maxPer)), svgText(mk, { x: W - R + 4, y: yl(maxTotal) + 4 }, spent ? money(maxTotal) : "no cost"));
  for (let s = 0; s <= n; s += Math.max(1, Math.ceil(n / 12))) svg.append(svgText(mk, { x: x(s) - 3, y: H - 18 }, String(s)));
  svg.append(svgText(mk, { x: (L + W - R) / 2 - 12, y: H - 3, class: "axis-title" }, "step"),
    svgText(mk, { x: 10, y: T, class: "axis-title", transform: `rotate(-90 10 ${T})`, "text-anchor": "end" }, "tokens per step"),
    svgText(mk, { x: W - 8, y: T, class: "axis-title", transform: `rotate(-90 ${W - 8} ${T})`, "text-anchor": "end" }, "cost so far"));
  const bw = Math.max(2, (W - L - R) / n * 0.6);
  history.forEach((r, i) => {
    const bar = mk("rect", { x: x(r.step) - bw / 2, y: yb(per[i]), width: bw, height: yb(0) - yb(per[i]), class: "tokbar mark", "data-step": r.step });
    const t = mk("title", {});
    t.textContent = `step ${r.step}: ${per[i].toLocaleString()} tokens (optimizer ${(r.optimizer_tokens || 0).toLocaleString()}, target ${(r.target_tokens || 0).toLocaleString()}), ${money(r.cost_usd || 0)}; ${money(total[i])} so far. Click: the step.`;
    bar.append(t);
    svg.append(bar);
  });
  if (history.length) svg.append(mk("path", { d: history.map((r, i) => (i ? "L" : "M") + x(r.step) + "," + yl(total[i])).join(""), class: "toktotal" }));
}

// Options follow the run; the choice stays the user's once made, else follows `preferred`.
function fillSelect(select, items, preferred) {
  if (!select.dataset.watched) {
    select.dataset.watched = "1";
    select.addEventListener("change", () => { select.dataset.touched = "1"; });
  }
  const key = JSON.stringify(items);
  if (select.dataset.items === key) return;
  const current = select.dataset.touched ? select.value : preferred;
  select.replaceChildren(...items.map((s) => el("option", { value: s.rel, text: s.label })));
  select.dataset.items = key;
  if ([...select.options].some((o) => o.value === current)) select.value = current;
}

// A damaged run directory: which files, what it still proves, what to do (controller/rundir/damage.py).
function renderDamage(damage) {
  const box = $("#damage");
  if (!box) return;
  box.hidden = !damage;
  if (!damage) return;
  box.replaceChildren(
    el("strong", { text: "Damaged: " }), el("span", { text: damage.advice + "." }),
    el("ul", {}, ...damage.problems.map((d) => el("li", {},
      el("code", { text: d.file }), el("span", { text: " " + d.problem + ". " }), el("em", { text: d.repair }))))
  );
}

function renderRun(snap) {
  const info = snap.info, live = snap.live || {}, name = info.name;
  const st = statusLabel(info);
  const pill = $("#status");
  pill.textContent = st;
  pill.className = "pill " + st;
  const mode = $("#mode");
  mode.textContent = info.simulated === null ? "" : info.simulated ? "SIMULATION" : "REAL MODELS";
  mode.className = "badge" + (info.simulated ? " sim" : "");
  mode.title = info.mode_reason || "";
  const models = info.target || info.optimizer ? ["target " + (info.target || "-"), "optimizer " + (info.optimizer || "-")]
    : [st === "starting" || st === "running" ? "starting: the config is not read yet" : "no config read"];
  $("#subtitle").textContent = [info.env, info.agent, ...models,
    "started " + when(info.started_at), info.pid && (st === "running" || st === "stopping" || st === "starting") ? "pid " + info.pid : ""].filter(Boolean).join(" · ");
  const alive = ["running", "starting"].includes(info.status);
  $("#stop").hidden = !alive || info.stop_requested;
  $("#resume").hidden = alive || info.status === "finished" || info.kind !== "train" ||
    (info.status === "damaged" && !info.damage.resumable);
  renderDamage(info.damage);
  const notice = $("#stop-reason");
  const reason = info.stop_requested ? "Stop requested: the run stops at the next stage boundary." :
    info.status === "stopped" ? "Stopped: " + (snap.stop_reason || "") :
    info.status === "failed" ? "Failed: the process ended without a summary (crashed, killed, or refused at startup; see the console). Resume continues from the last committed step." : "";
  notice.hidden = !reason;
  notice.textContent = reason;

  const step = live.step || info.steps_done, total = live.total_steps || info.total_steps;
  const lastRec = snap.history.length ? snap.history[snap.history.length - 1] : null;
  const epoch = (alive && live.epoch) || (lastRec ? lastRec.epoch : live.epoch);
  $("#where").textContent = `epoch ${epoch || "-"}/${live.num_epochs || snap.num_epochs || "-"} · step ${step || 0}/${total || "-"}`;
  const phase = alive ? live.phase : info.status;
  let phaseText = PHASES[phase] ?? phase ?? "";
  if (alive && live.phase === "epoch_end" && live.stage) phaseText = "end of epoch: " + live.stage.replace("_", " ");
  if (alive && live.phase === "failed") phaseText = "failing: " + (live.error || "");
  $("#phase").textContent = phaseText;
  const done = new Map((live.stages || []).map((s) => [s.name, s.seconds]));
  for (const li of document.querySelectorAll("#pipeline li")) {
    const s = li.dataset.stage;
    const active = alive && live.phase === "training" && live.stage === s;
    li.classList.toggle("active", active);
    li.classList.toggle("done", !active && done.has(s) && live.phase === "training");
    li.querySelector(".secs").textContent = active ? "running" : done.has(s) && live.phase === "training" ? secs(done.get(s)) : "";
  }
  $("#pipeline").dataset.stage = alive ? live.stage || "" : "";
  $("#steps-bar").style.width = total ? (100 * info.steps_done / total).toFixed(1) + "%" : "0";
  const batch = $("#batch");
  const b = alive ? live.batch : null;
  if (b) {
    put(batch,
      el("span", { class: "muted", text: b.label }),
      el("span", {}, el("span", { class: "n", id: "rows-done", text: b.done }), " / " + b.total + " done"),
      el("span", { class: "ok" }, el("span", { class: "n", id: "rows-pass", text: b.pass }), " pass"),
      el("span", { class: "bad" }, el("span", { class: "n", id: "rows-fail", text: b.fail }), " fail"),
      el("span", { class: "infra" }, el("span", { class: "n", text: b.infra }), " infrastructure"),
      el("span", { class: "run" }, el("span", { class: "n", id: "rows-running", text: live.running || 0 }), " running"),
      b.resumed ? el("span", { class: "muted", text: `(${b.resumed} kept from before)` }) : null,
    );
  } else batch.replaceChildren(el("span", { class: "muted", text: alive ? "no rollouts in flight" : "" }));

  drawCurve($("#curve"), snap.history, snap.baseline_score);
  drawTokens($("#tokens-chart"), snap.history);
  $("#curve").dataset.points = String(snap.history.length);
  $("#best").textContent = scoreCI(info.best_score, info.best_score_ci95);
  $("#baseline").textContent = score(snap.baseline_score);
  const last = live.last_gate || (snap.history.length ? snap.history[snap.history.length - 1] : null);
  $("#last-gate").textContent = last ? `${last.action} (${score(last.candidate_score ?? last.candidate_gate_score)})` : "-";
  $("#tokens").textContent = tokens(info.tokens);
  $("#cost").textContent = money(info.cost_usd);
  const sm = snap.summary;
  $("#prefix-share").textContent = prefixShare(sm);
  $("#test").textContent = sm && sm.test_hard !== null && sm.test_hard !== undefined ? `${score(sm.baseline_test_hard)} → ${score(sm.test_hard)}` : "-";

  const hosts = alive && live.hosts && live.hosts.length ? live.hosts :
    (info.hosts || []).map((h) => ({ host: h, address: "", health: "-", in_flight: null, capacity: null }));
  $("#hosts tbody").replaceChildren(...hosts.map((h) => el("tr", {},
    el("td", { title: h.address, text: h.host || h.address }), el("td", { text: h.health }),
    el("td", { class: "num", text: h.in_flight === null ? "-" : `${h.in_flight} / ${h.capacity}` }))));

  const rows = snap.history.map((r) => {
    const ap = r.edit_apply_summary ? r.edit_apply_summary.applied : "-";
    return el("tr", { "data-step": r.step },
      el("td", {}, el("a", { href: `/runs/${encodeURIComponent(name)}/steps/${r.step}`, text: r.step })),
      el("td", { text: r.epoch }),
      el("td", { class: "num", text: `${score(r.rollout_hard)} on ${r.rollout_n}` }),
      el("td", { class: "num", text: `${r.n_edits_merged ?? "-"} / ${r.n_edits_ranked ?? "-"} / ${ap}` }),
      el("td", { class: "num", text: r.edit_budget ?? "-" }),
      el("td", { class: "num", text: scoreCI(r.candidate_gate_score, r.candidate_gate_score_ci95) }),
      el("td", { class: "num", text: scoreCI(r.current_score, r.current_score_ci95) }),
      el("td", {}, el("span", { class: "pill action-" + r.action, text: r.action }),
        r.gate_reason ? el("small", { class: "muted", text: " " + r.gate_reason }) : null,
        r.gate_test ? el("small", { class: "muted gate-test", text: ` p=${Number(r.gate_test.p_value).toPrecision(2)} (${r.gate_test.name}, ${r.gate_test.mode})` }) : null),
      el("td", {}, el("a", { href: `/runs/${encodeURIComponent(name)}/steps/${r.step}`, text: "view" })));
  });
  const committed = snap.history.length ? snap.history[snap.history.length - 1].step : 0;
  for (const s of snap.steps.filter((s) => s > committed)) {
    rows.push(el("tr", { "data-step": s, class: "pending" },
      el("td", {}, el("a", { href: `/runs/${encodeURIComponent(name)}/steps/${s}`, text: s })),
      el("td", { colspan: 7, class: "muted", text: alive && s === live.step ? "in progress: " + (live.stage || "") : "not committed (reruns on resume)" }),
      el("td", {}, el("a", { href: `/runs/${encodeURIComponent(name)}/steps/${s}`, text: "view" }))));
  }
  $("#steps tbody").replaceChildren(...rows);

  const skills = snap.skills;
  const versions = skills.filter((s) => s.rel.startsWith("skills/"));
  fillSelect($("#skill-a"), skills, versions.length ? versions[0].rel : "");
  fillSelect($("#skill-b"), skills, versions.length ? versions[versions.length - 1].rel : "");
  fillSelect($("#eval-skill"), skills, "best_skill.md");
  $("#evals tbody").replaceChildren(...snap.evals.map((e) => el("tr", {},
    el("td", { text: e.name }), el("td", {}, el("span", { class: "pill " + e.status, text: e.status })),
    el("td", { class: "num", text: scoreCI(e.best_score, e.best_score_ci95) }),
    el("td", {}, el("a", { href: e.status === "finished" ? `/runs/${encodeURIComponent(name)}/evals/${encodeURIComponent(e.name)}` : `/runs/${encodeURIComponent(name)}/files/evals/${encodeURIComponent(e.name)}/console.log`, text: e.status === "finished" ? "open" : "console" })))));

  const log = $("#log");
  const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  log.replaceChildren(...snap.log.map((l) => el("span", { class: "line " + (l.level || "") }, el("span", { class: "t", text: l.time }), l.text)));
  if (atBottom) log.scrollTop = log.scrollHeight;
  const con = $("#console");
  const conBottom = con.scrollTop + con.clientHeight >= con.scrollHeight - 4;
  con.textContent = snap.console.length ? snap.console.join("\n") : "(no console output here: the run was started in a terminal)";
  if (conBottom) con.scrollTop = con.scrollHeight;
  document.body.dataset.status = st;
  if (live.updated_at) document.body.dataset.liveUpdated = String(live.updated_at);
}

// A run's note and tags, archive (hide from the list) and delete (asks, then names the run).
function initNotes(name, notes, api) {
  const error = $("#notes-error");
  let archived = notes.archived;
  $("#note").value = notes.note;
  $("#tags").value = notes.tags.join(", ");
  const label = () => { $("#archive").textContent = archived ? "Unarchive" : "Archive"; };
  label();
  $("#save-notes").addEventListener("click", async () => {
    const data = await post(api("notes"), { note: $("#note").value, tags: $("#tags").value });
    showError(error, data.error);
    if (data.ok) { $("#tags").value = data.notes.tags.join(", "); $("#notes-saved").textContent = "saved"; }
  });
  $("#archive").addEventListener("click", async () => {
    const data = await post(api("notes"), { archived: !archived });
    showError(error, data.error);
    if (data.ok) { archived = data.notes.archived; label(); $("#notes-saved").textContent = archived ? "archived: hidden from the list" : "back in the list"; }
  });
  $("#delete").addEventListener("click", async () => {
    if (!window.confirm(`Delete the run directory ${name} and everything in it? This cannot be undone.`)) return;
    const data = await post(api("delete"), { confirm: name });
    showError(error, data.error);
    if (data.ok) window.location.assign("/");
  });
}

function initRun() {
  const name = $("#run-head").dataset.run;
  const error = $("#action-error");
  const api = (what) => `/api/runs/${encodeURIComponent(name)}/${what}`;
  const first = snapshotFromPage();
  // A chart's marks open their step (the charts are redrawn on every push: one listener each).
  for (const chart of [$("#curve"), $("#tokens-chart")]) {
    chart.addEventListener("click", (e) => {
      const mark = e.target.closest("[data-step]");
      if (mark) window.location.assign(`/runs/${encodeURIComponent(name)}/steps/${mark.dataset.step}`);
    });
  }
  renderRun(first);
  follow(`/events/runs/${encodeURIComponent(name)}`, renderRun);
  initNotes(name, first.info.notes, api);
  $("#stop").addEventListener("click", async () => {
    const data = await post(api("stop"), { reason: "stopped from the WebUI" });
    showError(error, data.error);
  });
  $("#resume").addEventListener("click", async () => {
    $("#resume").disabled = true;
    const data = await post(api("resume"), {});
    $("#resume").disabled = false;
    showError(error, data.error);
  });
  $("#eval-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const data = await post(api("eval"), { skill: $("#eval-skill").value, split: $("#eval-split").value });
    showError(error, data.error);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "runs") {
    initRunsControls();
    renderRuns(snapshotFromPage());
    follow("/events/runs", renderRuns);
  } else if (page === "new") initNew();
  else if (page === "run") initRun();
  else if (page === "compare") initCompare();
});

// -- compare runs -----------------------------------------------------------------------------

// The colours of style.css's .s0-.s7 (a presentation attribute: CSP allows no inline style).
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

// Each run's selection curve (the current skill's score per step) on the same axes.
function initCompare() {
  const data = JSON.parse($("#compare-data").textContent);
  const svg = $("#compare-curve");
  const W = 640, H = 280, L = 52, R = 12, T = 12, B = 40;
  const n = Math.max(1, ...data.runs.flatMap((r) => r.history.map((h) => h.step)));
  const x = (s) => L + (s / n) * (W - L - R);
  const y = (v) => T + (1 - v) * (H - T - B);
  const ns = "http://www.w3.org/2000/svg";
  const mk = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(mk("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "gridline" }), mk("text", { x: 18, y: y(v) + 3 }, v.toFixed(2)));
  }
  for (let s = 0; s <= n; s += Math.max(1, Math.ceil(n / 12))) svg.append(mk("text", { x: x(s) - 3, y: H - 22 }, String(s)));
  svg.append(mk("text", { x: (L + W - R) / 2 - 12, y: H - 4, class: "axis-title" }, "step"),
    mk("text", { x: 10, y: T + 2, class: "axis-title", transform: `rotate(-90 10 ${T + 2})`, "text-anchor": "end" }, "selection score"));
  const legend = $("#compare-legend");
  data.runs.forEach((run, i) => {
    const pts = [[0, run.baseline ?? 0]];
    for (const h of run.history) pts.push([h.step, h.current_score ?? pts[pts.length - 1][1]]);
    const d = pts.map(([s, v], j) => (j === 0 ? `M${x(s)},${y(v)}` : `H${x(s)}V${y(v)}`)).join("");
    const path = mk("path", { d, class: "cur", stroke: PALETTE[i % PALETTE.length], "data-run": run.name });
    path.append(mk("title", {}, run.name));
    svg.append(path);
    legend.append(el("li", { "data-run": run.name }, el("span", { class: `swatch s${i}` }), el("a", { href: "/runs/" + encodeURIComponent(run.name), text: run.name })));
  });
}
