// The console's pages: the path names the page (/cluster, /topics, /topics/NAME, /groups,
// /groups/NAME, /messages), which is drawn from the JSON API under /api/. Every element is
// built with textContent, never from HTML strings, so names and message bodies cannot inject
// markup. An API error or an unreachable console is shown in the error banner, never as a
// blank page.
"use strict";

const page = document.getElementById("page");

// h("a", {href: "/"}, "text", child...): an element with attributes and children.
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function showError(message) {
  const b = document.getElementById("error");
  b.textContent = message;
  b.hidden = false;
}

function clearError() {
  document.getElementById("error").hidden = true;
}

function showNotice(message) {
  const b = document.getElementById("notice");
  b.textContent = message;
  b.hidden = false;
}

// The API's answer as JSON; throws an Error with the server's message when there is one.
async function api(path, options) {
  let resp;
  try {
    resp = await fetch(path, options);
  } catch (e) {
    throw new Error(`The console did not answer (${e.message}). Is ringmq still running?`);
  }
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    throw new Error(`The console answered ${resp.status} without JSON.`);
  }
  if (!resp.ok) throw new Error(body && body.error ? body.error : `HTTP ${resp.status}`);
  return body;
}

function postJson(path, value) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(value),
  });
}

function fmtTime(ms) {
  if (!ms || ms <= 0) return "–";
  return new Date(ms).toLocaleString();
}

function fmtRate(v) {
  return v === null || v === undefined ? "–" : Number(v).toFixed(1);
}

function table(headers, rows, attrs) {
  return h("table", attrs || {},
    h("thead", {}, h("tr", {}, headers.map((c) =>
      h("th", { class: c.endsWith("#") ? "num" : null }, c.replace(/#$/, ""))))),
    h("tbody", {}, rows));
}

function td(v, num) {
  return h("td", { class: num ? "num" : null }, v);
}

function stat(label, value, id) {
  return h("div", { class: "stat" }, h("div", { class: "v", id }, value), h("div", { class: "k" }, label));
}

// ---- Cluster ---------------------------------------------------------------------------

const RATE_SPAN_MS = 120000;

async function clusterPage() {
  const history = { put: [], get: [] };
  const stats = h("div", { class: "stats" });
  const chart = h("div", { class: "chart", id: "rate-chart" });
  const brokers = h("div", { id: "brokers" });
  page.replaceChildren(
    h("h1", {}, "Cluster"),
    stats,
    h("section", { class: "card" }, h("h2", {}, "Send and pull rates (messages/s, live)"), chart,
      h("div", { class: "legend" },
        h("span", {}, h("i", { style: "background:#2563eb" }), "send (putTps)"),
        h("span", {}, h("i", { style: "background:#f59e0b" }), "pull (getTransferredTps)"))),
    h("section", { class: "card" }, h("h2", {}, "Brokers"), brokers));
  drawLineChart(chart, [], RATE_SPAN_MS);
  const refresh = async () => {
    let c;
    try {
      c = await api("/api/cluster");
      clearError();
    } catch (e) {
      showError(e.message);
      return;
    }
    let put = 0, get = 0, up = 0, all = 0;
    const rows = [];
    for (const cl of c.clusters) {
      for (const b of cl.brokers) {
        all++;
        if (b.error) {
          rows.push(h("tr", { class: "down" }, td(cl.name), td(b.brokerName), td(b.brokerId, true),
            td(b.addr), h("td", { colspan: 5 }, `unreachable: ${b.error}`)));
          continue;
        }
        up++;
        put += b.putTps || 0;
        get += b.getTransferredTps || 0;
        rows.push(h("tr", { class: "broker-row" }, td(cl.name), td(b.brokerName), td(b.brokerId, true),
          td(b.addr), td(b.version), td(fmtRate(b.putTps), true), td(fmtRate(b.getTransferredTps), true),
          td(b.msgPutTotalTodayNow, true), td(b.msgGetTotalTodayNow, true)));
      }
    }
    const now = Date.now();
    history.put.push([now, put]);
    history.get.push([now, get]);
    for (const s of [history.put, history.get]) while (s.length && s[0][0] < now - RATE_SPAN_MS) s.shift();
    stats.replaceChildren(
      stat("brokers up", `${up} / ${all}`, "brokers-up"),
      stat("send rate (msg/s)", fmtRate(put), "put-rate"),
      stat("pull rate (msg/s)", fmtRate(get), "get-rate"),
      stat("name servers", c.namesrv.join(", ")));
    if (up < all) showError(`${all - up} of ${all} brokers did not answer: their rows say why.`);
    brokers.replaceChildren(rows.length ? table(["cluster", "broker", "id#", "address", "version",
      "send/s#", "pull/s#", "put today#", "got today#"], rows, { id: "broker-table" })
      : h("p", { class: "muted" }, "No broker is registered with the name server."));
    drawLineChart(chart, [
      { name: "put", color: "#2563eb", points: history.put },
      { name: "get", color: "#f59e0b", points: history.get },
    ], RATE_SPAN_MS);
  };
  await refresh();
  setInterval(refresh, 2000);
}

// ---- Topics ----------------------------------------------------------------------------

async function topicsPage() {
  const list = h("div", { id: "topic-list" }, h("p", { class: "muted" }, "Loading…"));
  const filter = h("input", { type: "search", placeholder: "Filter topics", id: "topic-filter" });
  const showSys = h("input", { type: "checkbox", id: "show-system" });
  const form = topicForm();
  page.replaceChildren(h("h1", {}, "Topics"),
    h("section", { class: "card" },
      h("div", { class: "toolbar" }, filter, h("label", { style: "flex-direction:row;gap:.3rem" }, showSys, "system topics")),
      list),
    form);
  let topics = [];
  const render = () => {
    const f = filter.value.trim().toLowerCase();
    const shown = topics.filter((t) => (showSys.checked || !t.system) && t.topic.toLowerCase().includes(f));
    list.replaceChildren(shown.length
      ? table(["topic", "kind"], shown.map((t) => h("tr", {},
        h("td", {}, h("a", { class: "topic-link", href: `/topics/${encodeURIComponent(t.topic)}`, "data-name": t.topic }, t.topic)),
        h("td", {}, h("span", { class: t.system ? "tag sys" : "tag" }, t.system ? "system" : "normal")))))
      : h("p", { class: "muted" }, "No topic matches."));
  };
  filter.addEventListener("input", render);
  showSys.addEventListener("change", render);
  try {
    topics = (await api("/api/topics")).topics;
    render();
  } catch (e) {
    list.replaceChildren(h("p", { class: "muted" }, "Topics could not be listed."));
    showError(e.message);
  }
}

function topicForm(existing) {
  const name = h("input", { name: "topic", id: "new-topic", required: true, value: existing ? existing.topic : "", readonly: !!existing });
  const r = h("input", { name: "readQueueNums", id: "read-queues", type: "number", min: 1, max: 1024, value: existing ? existing.readQueueNums : 4 });
  const w = h("input", { name: "writeQueueNums", id: "write-queues", type: "number", min: 1, max: 1024, value: existing ? existing.writeQueueNums : 4 });
  const perm = h("select", { name: "perm", id: "perm" },
    [[6, "read and write"], [4, "read only"], [2, "write only"]].map(([v, l]) =>
      h("option", { value: v, selected: existing && existing.perm === v }, l)));
  const button = h("button", { type: "submit", id: "create-topic" }, existing ? "Update" : "Create");
  const form = h("form", { class: "inline", id: "topic-form" },
    h("label", {}, "topic", name), h("label", {}, "read queues", r), h("label", {}, "write queues", w),
    h("label", {}, "permission", perm), button);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    button.disabled = true;
    try {
      const res = await postJson("/api/topics", {
        topic: name.value.trim(), readQueueNums: Number(r.value), writeQueueNums: Number(w.value), perm: Number(perm.value),
      });
      clearError();
      showNotice(`Topic ${res.topic} ${existing ? "updated" : "created"} on ${res.brokers.join(", ")}.`);
      if (!existing) window.location.assign(`/topics/${encodeURIComponent(res.topic)}`);
    } catch (e) {
      showError(e.message);
    } finally {
      button.disabled = false;
    }
  });
  return h("section", { class: "card" }, h("h2", {}, existing ? "Update this topic" : "Create a topic"), form);
}

async function topicPage(topic) {
  page.replaceChildren(h("h1", {}, `Topic ${topic}`), h("p", { class: "muted" }, "Loading…"));
  let t;
  try {
    t = await api(`/api/topics/${encodeURIComponent(topic)}`);
  } catch (e) {
    page.replaceChildren(h("h1", {}, `Topic ${topic}`), h("p", {}, h("a", { href: "/topics" }, "All topics")));
    showError(e.message);
    return;
  }
  const queues = t.queues.map((q) => h("tr", { class: "queue-row" }, td(q.brokerName), td(q.queueId, true),
    td(q.minOffset, true), td(q.maxOffset, true), td(q.maxOffset - q.minOffset, true), td(fmtTime(q.lastUpdateTimestamp))));
  const first = t.brokers[0];
  page.replaceChildren(
    h("h1", {}, "Topic ", h("span", { id: "topic-name" }, t.topic)),
    h("div", { class: "stats" }, stat("messages stored", t.totalMessages, "topic-total"),
      stat("queues", t.queues.length, "topic-queues"), stat("brokers", t.brokers.length)),
    h("section", { class: "card" }, h("h2", {}, "Brokers"),
      table(["broker", "address", "read queues#", "write queues#", "perm#"], t.brokers.map((b) =>
        h("tr", {}, td(b.brokerName), td(b.addr), td(b.readQueueNums, true), td(b.writeQueueNums, true), td(b.perm, true))))),
    h("section", { class: "card" }, h("h2", {}, "Queues"),
      table(["broker", "queue#", "min offset#", "max offset#", "messages#", "last stored"], queues, { id: "queue-table" })),
    h("p", {}, h("a", { href: `/messages?topic=${encodeURIComponent(t.topic)}` }, "Look up this topic's messages by key")),
    ...(first ? [topicForm({ topic: t.topic, readQueueNums: first.readQueueNums, writeQueueNums: first.writeQueueNums, perm: first.perm })] : []));
}

// ---- Consumer groups -------------------------------------------------------------------

async function groupsPage() {
  const list = h("div", { id: "group-list" }, h("p", { class: "muted" }, "Loading…"));
  const showSys = h("input", { type: "checkbox", id: "show-system" });
  page.replaceChildren(h("h1", {}, "Consumer groups"),
    h("section", { class: "card" }, h("div", { class: "toolbar" },
      h("label", { style: "flex-direction:row;gap:.3rem" }, showSys, "system groups")), list));
  let groups = [];
  const render = () => {
    const shown = groups.filter((g) => showSys.checked || !g.system);
    list.replaceChildren(shown.length
      ? table(["group", "clients#", "total lag#", "consume/s#", "note"], shown.map((g) => h("tr", {},
        h("td", {}, h("a", { class: "group-link", href: `/groups/${encodeURIComponent(g.group)}`, "data-name": g.group }, g.group)),
        td(g.clients, true), td(g.totalLag === null ? "–" : g.totalLag, true), td(fmtRate(g.consumeTps), true),
        td(g.error || ""))))
      : h("p", { class: "muted" }, "No consumer group yet."));
  };
  showSys.addEventListener("change", render);
  try {
    groups = (await api("/api/groups")).groups;
    render();
  } catch (e) {
    list.replaceChildren(h("p", { class: "muted" }, "Groups could not be listed."));
    showError(e.message);
  }
}

async function groupPage(group) {
  page.replaceChildren(h("h1", {}, `Consumer group ${group}`), h("p", { class: "muted" }, "Loading…"));
  let g;
  try {
    g = await api(`/api/groups/${encodeURIComponent(group)}`);
  } catch (e) {
    page.replaceChildren(h("h1", {}, `Consumer group ${group}`), h("p", {}, h("a", { href: "/groups" }, "All groups")));
    showError(e.message);
    return;
  }
  const chart = h("div", { class: "chart", id: "lag-chart" });
  // The topics it has offsets on, and those its online clients subscribe to.
  const topics = [...new Set([...g.queues.map((q) => q.topic), ...(g.subscriptions || []).map((s) => s.topic)])];
  page.replaceChildren(
    h("h1", {}, "Consumer group ", h("span", { id: "group-name" }, g.group)),
    h("div", { class: "stats" }, stat("total lag", g.totalLag, "group-lag"), stat("clients", g.clients.length, "group-clients"),
      stat("consume rate (msg/s)", fmtRate(g.consumeTps))),
    h("section", { class: "card" }, h("h2", {}, "Lag per queue"), chart),
    h("section", { class: "card" }, h("h2", {}, "Queues"),
      table(["topic", "broker", "queue#", "broker offset#", "consumer offset#", "lag#", "last consumed"],
        g.queues.map((q) => h("tr", { class: "queue-row" }, td(q.topic), td(q.brokerName), td(q.queueId, true),
          td(q.brokerOffset, true), td(q.consumerOffset, true), td(q.lag, true), td(fmtTime(q.lastTimestamp)))),
        { id: "group-queue-table" })),
    h("section", { class: "card" }, h("h2", {}, "Connected clients"),
      g.clients.length ? table(["client id", "address", "language", "version#"], g.clients.map((c) =>
        h("tr", { class: "client-row" }, td(c.clientId), td(c.clientAddr), td(c.language), td(c.version, true))), { id: "client-table" })
        : h("p", { class: "muted", id: "no-clients" }, "No client of this group is connected.")),
    resetForm(g.group, topics));
  drawBarChart(chart, g.queues.map((q) => ({ label: `${q.brokerName}:${q.queueId}`, value: q.lag })), "#2563eb");
}

function resetForm(group, topics) {
  const topic = h("select", { id: "reset-topic" }, topics.map((t) => h("option", { value: t }, t)));
  const pad = (n) => String(n).padStart(2, "0");
  const d = new Date();
  const local = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const when = h("input", { type: "datetime-local", id: "reset-time", value: local, step: 1 });
  const button = h("button", { type: "submit", id: "reset-offset" }, "Reset offset");
  const result = h("div", { id: "reset-result" });
  const form = h("form", { class: "inline", id: "reset-form" },
    h("label", {}, "topic", topic), h("label", {}, "to the first message stored at or after", when), button);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const timestamp = new Date(when.value).getTime();
    if (!Number.isFinite(timestamp)) {
      showError("Pick a date and time to reset to.");
      return;
    }
    button.disabled = true;
    try {
      const res = await postJson(`/api/groups/${encodeURIComponent(group)}/reset-offset`, { topic: topic.value, timestamp });
      clearError();
      showNotice(`Offsets of ${group} on ${topic.value} reset for ${res.queues.length} queues.`);
      result.replaceChildren(table(["broker", "queue#", "new offset#"],
        res.queues.map((q) => h("tr", {}, td(q.brokerName), td(q.queueId, true), td(q.offset, true)))));
    } catch (e) {
      showError(e.message);
    } finally {
      button.disabled = false;
    }
  });
  return h("section", { class: "card" }, h("h2", {}, "Reset the consumer offset"),
    topics.length ? [form, result] : h("p", { class: "muted" }, "The group has no queue to reset."));
}

// ---- Message lookup --------------------------------------------------------------------

async function messagesPage() {
  const params = new URLSearchParams(window.location.search);
  const id = h("input", { id: "lookup-id", name: "id", placeholder: "message id", size: 36, value: params.get("id") || "" });
  const idTopic = h("input", { id: "lookup-id-topic", name: "topic", placeholder: "topic (optional)", value: params.get("topic") || "" });
  const byId = h("form", { class: "inline", id: "by-id" }, h("label", {}, "message id (msgId or offsetMsgId)", id),
    h("label", {}, "topic", idTopic), h("button", { type: "submit", id: "lookup-by-id" }, "Look up"));
  const topic = h("input", { id: "lookup-topic", name: "topic", placeholder: "topic", value: params.get("topic") || "" });
  const key = h("input", { id: "lookup-key", name: "key", placeholder: "key", value: params.get("key") || "" });
  const byKey = h("form", { class: "inline", id: "by-key" }, h("label", {}, "topic", topic), h("label", {}, "key", key),
    h("button", { type: "submit", id: "lookup-by-key" }, "Look up"));
  const results = h("div", { id: "results" });
  page.replaceChildren(h("h1", {}, "Message lookup"),
    h("div", { class: "grid2" }, h("section", { class: "card" }, h("h2", {}, "By id"), byId),
      h("section", { class: "card" }, h("h2", {}, "By key"), byKey)),
    results);
  const run = async (query) => {
    results.replaceChildren(h("p", { class: "muted" }, "Looking up…"));
    try {
      const res = await api(`/api/messages?${new URLSearchParams(query)}`);
      clearError();
      history.replaceState(null, "", `/messages?${new URLSearchParams(query)}`);
      results.replaceChildren(h("p", { class: "muted", id: "result-count" }, `${res.messages.length} message(s) found.`),
        ...res.messages.map(messageCard));
    } catch (e) {
      results.replaceChildren();
      showError(e.message);
    }
  };
  byId.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = { id: id.value.trim() };
    if (idTopic.value.trim()) q.topic = idTopic.value.trim();
    run(q);
  });
  byKey.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run({ topic: topic.value.trim(), key: key.value.trim() });
  });
  if (params.get("id")) run(Object.fromEntries(params));
  else if (params.get("key") && params.get("topic")) run({ topic: params.get("topic"), key: params.get("key") });
}

function messageCard(m) {
  const props = Object.entries(m.properties).sort(([a], [b]) => a.localeCompare(b));
  return h("section", { class: "card message" },
    h("h2", {}, "Message ", h("span", { class: "msg-id" }, m.msgId)),
    h("dl", { class: "props" },
      [["topic", m.topic], ["offset msg id", m.offsetMsgId], ["tags", m.tags], ["keys", m.keys],
        ["queue", `${m.brokerName || ""} ${m.queueId} @ ${m.queueOffset}`], ["stored", fmtTime(m.storeTimestamp)],
        ["born", `${fmtTime(m.bornTimestamp)} from ${m.bornHost}`], ["store host", m.storeHost],
        ["body size", `${m.bodySize} bytes${m.bodyTruncated ? " (shown cut)" : ""}`]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v === undefined || v === null || v === "" ? "–" : v)])),
    h("h2", { style: "margin-top:1rem" }, "Properties"),
    h("dl", { class: "props msg-props" }, props.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", { style: "margin-top:1rem" }, `Body (${m.bodyEncoding})`),
    h("pre", { class: "body" }, m.body));
}

// ---- Router ----------------------------------------------------------------------------

function route() {
  const path = window.location.pathname;
  const nav = path === "/" ? "cluster" : path.split("/")[1];
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.nav === nav);
  const named = path.match(/^\/(topics|groups)\/([^/]+)$/);
  if (named) {
    const name = decodeURIComponent(named[2]);
    document.title = `${name} · ringmq console`;
    return named[1] === "topics" ? topicPage(name) : groupPage(name);
  }
  const pages = { "/": clusterPage, "/cluster": clusterPage, "/topics": topicsPage, "/groups": groupsPage, "/messages": messagesPage };
  const p = pages[path];
  if (!p) {
    showError(`There is no page at ${path}.`);
    return Promise.resolve();
  }
  return p();
}

route().catch((e) => showError(`This page failed to draw: ${e.message}`));
