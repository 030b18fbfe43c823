// The burrowpy dashboard: hash-routed pages over Burrow's /v3 API and the /ui/api summaries.
// Every request is a same-origin relative fetch, so the browser's credentials for the monitor apply.
"use strict";

(() => {
  const REFRESH_MS = 5000;
  const DASH = "\u2014";
  const STATUS_RANK = { NOTFOUND: 0, OK: 1, WARN: 2, ERR: 3, STOP: 4, STALL: 5, REWIND: 6 };
  const STATUS_COLOR = { OK: "#2e9d5b", WARN: "#c98a0b", ERR: "#d64545", STOP: "#d64545", STALL: "#8e44ad",
    REWIND: "#2c7be5", NOTFOUND: "#8a8f98" };
  const SERIES_COLORS = ["#2c5fd6", "#d64545", "#2e9d5b", "#c98a0b", "#8e44ad", "#17a2b8", "#e8590c", "#5f6877"];
  // The partitions drawn in the stored-window chart: the most lagging ones, so the legend stays readable.
  const WINDOW_SERIES = 8;

  const view = document.getElementById("view");
  const refreshLabel = document.getElementById("refresh");
  let page = null;
  let timer = null;

  // --- helpers ---------------------------------------------------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  async function getJSON(url) {
    // Resolved without the page's user:password@ (a page opened that way has them in its URL, and fetch
    // refuses such URLs); the browser still sends the credentials it was given for this origin.
    const target = new URL(url, window.location.href);
    target.username = "";
    target.password = "";
    const response = await fetch(target, { credentials: "same-origin", headers: { Accept: "application/json" } });
    // Burrow answers an unknown group with 404 and a JSON body that says NOTFOUND: that is an answer.
    if (!response.ok && !(response.status === 404 && (response.headers.get("Content-Type") || "").includes("json"))) {
      throw new Error(`${url}: HTTP ${response.status}`);
    }
    return response.json();
  }

  const enc = encodeURIComponent;
  const api = (cluster, ...rest) => ["../v3/kafka", enc(cluster), ...rest.map(enc)].join("/");
  const groupLink = (cluster, group) => `#/group/${enc(cluster)}/${enc(group)}`;
  const topicLink = (cluster, topic) => `#/topic/${enc(cluster)}/${enc(topic)}`;

  function fmtInt(n) {
    return n === null || n === undefined ? DASH : Number(n).toLocaleString("en-US");
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return DASH;
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${i ? n.toFixed(n < 10 ? 1 : 0) : n} ${units[i]}`;
  }

  function fmtRate(r) {
    if (r === null || r === undefined) return DASH;
    return `${r >= 10 ? Math.round(r).toLocaleString("en-US") : Number(r.toPrecision(2))}/s`;
  }

  // A topic's or partition's replication problems as words ("OK" when none), from its health figures.
  function replicationText(x) {
    const problems = [["offline", "offline"], ["under_min_isr", "under min ISR"], ["under_replicated", "under-replicated"]]
      .filter(([key]) => x[key]).map(([key, label]) => (x[key] === true ? label : `${x[key]} ${label}`));
    return problems.length ? problems.join(" \u00b7 ") : "OK";
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined || Number.isNaN(s)) return DASH;
    if (s < 10) return `${s.toFixed(1)} s`;
    if (s < 60) return `${Math.round(s)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} m ${Math.round(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  // The catch-up forecast as the notifier templates' formatcatchup writes it (burrowpy/notifier/templates.py).
  function fmtCatchUp(x) {
    switch (x.catch_up_forecast) {
      case "catching_up": return `caught up in ~${fmtAbout(x.catch_up_seconds)}`;
      case "falling_behind": {
        const rate = x.falling_behind_per_second;
        return `falling behind by ${rate >= 10 ? Math.round(rate) : Number(rate.toPrecision(2))} records/s`;
      }
      case "keeping_pace": return "keeping pace";
      case "caught_up": return "caught up";
      default: return DASH;
    }
  }

  function fmtAbout(s) {
    for (const [unit, size] of [["d", 86400], ["h", 3600], ["min", 60]]) {
      if (s >= 1.5 * size) return `${Math.round(s / size)} ${unit}`;
    }
    return `${Math.round(s)} s`;
  }

  function fmtPercent(x) {
    return x === null || x === undefined ? DASH : `${Math.round(x * 100)} %`;
  }

  function badge(status) {
    return h("span", { class: `badge status-${status}`, "data-status": status }, status);
  }

  function card(label, value, extraClass) {
    return h("div", { class: `card ${extraClass || ""}` }, h("div", { class: "label" }, label),
      h("div", { class: "value" }, value));
  }

  function sparkline(values, status) {
    const width = 120, height = 26;
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("class", "spark");
    if (values.length < 2) return svg;
    const max = Math.max(...values, 1);
    const points = values.map((v, i) =>
      `${(i / (values.length - 1) * (width - 2) + 1).toFixed(1)},${(height - 2 - v / max * (height - 4)).toFixed(1)}`);
    const line = document.createElementNS(svgNS, "polyline");
    line.setAttribute("points", points.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", STATUS_COLOR[status] || STATUS_COLOR.NOTFOUND);
    line.setAttribute("stroke-width", "1.5");
    svg.append(line);
    return svg;
  }

  function table(columns, rows, emptyText) {
    const head = h("tr", null, columns.map((c) => h("th", { class: [c.num ? "num" : "", c.cls || ""].join(" ") },
      c.label)));
    const body = h("tbody");
    if (rows.length === 0) body.append(h("tr", null, h("td", { class: "empty", colspan: columns.length }, emptyText)));
    for (const row of rows) body.append(row);
    return h("div", { class: "table-wrap" }, h("table", null, h("thead", null, head), body));
  }

  function hashQuery() {
    const hash = location.hash || "#/groups";
    const [path, query] = hash.slice(1).split("?");
    return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query || "") };
  }

  // Keeps page state (filter, sort) in the address without a hashchange, so a reload or a shared link
  // opens the same view.
  function replaceQuery(query) {
    const [path] = (location.hash || "#/groups").split("?");
    const text = query.toString();
    history.replaceState(null, "", text ? `${path}?${text}` : path);
  }

  // --- charts ----------------------------------------------------------------------------------------

  class Chart {
    constructor(container, title, seriesLabels, valueFormat) {
      this.plotEl = h("div", { class: "plot" });
      this.root = h("div", { class: "chart" }, h("h3", null, title), this.plotEl);
      container.append(this.root);
      this.valueFormat = valueFormat;
      this.labels = null;
      this.plot = null;
      this.setSeries(seriesLabels);
    }

    setSeries(labels) {
      if (this.labels && labels.join("\n") === this.labels.join("\n")) return;
      this.labels = labels;
      if (this.plot) this.plot.destroy();
      const format = this.valueFormat;
      const opts = {
        width: Math.max(this.plotEl.clientWidth, 280),
        height: 200,
        legend: { show: labels.length > 1 },
        scales: {
          // A single sample has no span: show a minute around it rather than uPlot's default of years.
          x: { time: true, range: (u, min, max) => min === max ? [min - 60, max + 60] : [min, max] },
          y: { range: (u, min, max) => [0, Math.max(max * 1.1, 1)] },
        },
        axes: [{}, { values: (u, ticks) => ticks.map(format), size: 70 }],
        series: [{}, ...labels.map((label, i) => ({
          label, stroke: SERIES_COLORS[i % SERIES_COLORS.length], width: 2, spanGaps: true,
          points: { size: 4 }, value: (u, v) => format(v),
        }))],
      };
      this.plot = new uPlot(opts, [[], ...labels.map(() => [])], this.plotEl);
    }

    setData(data) {
      let points = 0;
      for (const column of data.slice(1)) points += column.filter((v) => v !== null && v !== undefined).length;
      this.root.dataset.points = String(points);
      this.plot.setData(data);
    }

    resize() {
      if (this.plot) this.plot.setSize({ width: Math.max(this.plotEl.clientWidth, 280), height: 200 });
    }
  }

  // --- pages -----------------------------------------------------------------------------------------

  const GROUP_COLUMNS = [
    { key: "cluster", label: "Cluster", cls: "phone-hide" },
    { key: "group", label: "Group" },
    { key: "status", label: "Status" },
    { key: "partition_count", label: "Partitions", num: true, cls: "phone-hide" },
    { key: "totallag", label: "Total lag", num: true },
    { key: "max_lag_seconds", label: "Max time lag", num: true },
    { key: "trend", label: "Trend (lag)", sortable: false, cls: "phone-hide" },
  ];

  class GroupsPage {
    constructor(query) {
      this.sortKey = query.get("sort") || "status";
      this.sortDir = query.get("dir") || (this.sortKey === "status" ? "desc" : "asc");
      this.filter = h("input", { type: "search", id: "filter", placeholder: "Filter by group or cluster",
        value: query.get("q") || "", oninput: () => this.changed() });
      const wanted = query.get("status") || "";
      this.statusFilter = h("select", { id: "status-filter", onchange: () => this.changed() },
        [["", "All statuses"], ["problem", "Not OK"], ["OK", "OK"], ["WARN", "WARN"], ["ERR", "ERR"]]
          .map(([value, label]) => h("option", { value, selected: value === wanted }, label)));
      this.count = h("span", { class: "count" });
      this.cards = h("div", { class: "cards" });
      this.headRow = h("tr");
      this.body = h("tbody");
      this.data = null;
      view.replaceChildren(
        h("h1", null, "Consumer groups"),
        h("div", { class: "sub" }, "Every group the monitor tracks, evaluated with Burrow's rules."),
        this.cards,
        h("div", { class: "toolbar" }, this.filter, this.statusFilter, this.count),
        h("div", { class: "table-wrap" }, h("table", { id: "groups" }, h("thead", null, this.headRow), this.body)));
      this.renderHead();
    }

    changed() {
      const query = new URLSearchParams();
      if (this.filter.value) query.set("q", this.filter.value);
      if (this.statusFilter.value) query.set("status", this.statusFilter.value);
      query.set("sort", this.sortKey);
      query.set("dir", this.sortDir);
      replaceQuery(query);
      this.renderHead();
      this.renderRows();
    }

    renderHead() {
      this.headRow.replaceChildren(...GROUP_COLUMNS.map((c) => {
        const sortable = c.sortable !== false;
        const classes = [c.num ? "num" : "", c.cls || "", sortable ? "sortable" : "",
          c.key === this.sortKey ? `sorted-${this.sortDir}` : ""].join(" ");
        return h("th", { class: classes, "data-key": c.key, onclick: sortable ? () => {
          if (this.sortKey === c.key) this.sortDir = this.sortDir === "asc" ? "desc" : "asc";
          else { this.sortKey = c.key; this.sortDir = c.num || c.key === "status" ? "desc" : "asc"; }
          this.changed();
        } : null }, c.label);
      }));
    }

    async refresh() {
      this.data = await getJSON("api/groups");
      const counts = { OK: 0, WARN: 0, ERR: 0 };
      for (const g of this.data.groups) counts[g.status] = (counts[g.status] || 0) + 1;
      this.cards.replaceChildren(
        card("Groups", this.data.groups.length),
        card("OK", counts.OK, "status-OK"), card("WARN", counts.WARN, "status-WARN"),
        card("ERR", counts.ERR, "status-ERR"),
        card("Clusters", this.data.clusters.length));
      this.renderRows();
    }

    renderRows() {
      if (!this.data) return;
      const text = this.filter.value.trim().toLowerCase();
      const wanted = this.statusFilter.value;
      const rows = this.data.groups.filter((g) =>
        (!text || g.group.toLowerCase().includes(text) || g.cluster.toLowerCase().includes(text)) &&
        (!wanted || (wanted === "problem" ? g.status !== "OK" : g.status === wanted)));
      const key = this.sortKey;
      const sign = this.sortDir === "asc" ? 1 : -1;
      const value = (g) => key === "status" ? STATUS_RANK[g.status] : g[key];
      rows.sort((a, b) => {
        const x = value(a), y = value(b);
        // Groups without a figure sort last in either direction.
        if (x === null || x === undefined) return y === null || y === undefined ? 0 : 1;
        if (y === null || y === undefined) return -1;
        const order = typeof x === "string" ? x.localeCompare(y) : x - y;
        return order * sign || a.group.localeCompare(b.group);
      });
      this.count.textContent = `${rows.length} of ${this.data.groups.length} groups`;
      if (rows.length === 0) {
        this.body.replaceChildren(h("tr", null, h("td", { class: "empty", colspan: GROUP_COLUMNS.length },
          this.data.groups.length ? "No group matches the filter." : "No consumer groups yet.")));
        return;
      }
      this.body.replaceChildren(...rows.map((g) => h("tr", { "data-cluster": g.cluster, "data-group": g.group },
        h("td", { class: "phone-hide" }, g.cluster),
        h("td", { class: "wrap" }, h("a", { href: groupLink(g.cluster, g.group) }, g.group)),
        h("td", { class: "status" }, badge(g.status)),
        h("td", { class: "num phone-hide" }, fmtInt(g.partition_count)),
        h("td", { class: "num lag" }, fmtInt(g.totallag)),
        h("td", { class: "num lag-seconds" }, fmtSeconds(g.max_lag_seconds)),
        h("td", { class: "phone-hide" }, sparkline(g.trend, g.status)))));
    }
  }

  class GroupPage {
    constructor(cluster, group) {
      this.cluster = cluster;
      this.group = group;
      this.samples = null;
      this.title = h("div");
      this.cards = h("div", { class: "cards" });
      const charts = h("div", { class: "charts" });
      this.notes = h("div", { class: "note" });
      this.partitions = h("div");
      view.replaceChildren(this.title, this.cards, charts, this.notes, h("h2", null, "Partitions"), this.partitions);
      this.lagChart = new Chart(charts, "Total lag (messages)", ["total lag"], (v) => fmtInt(v));
      this.lagChart.root.id = "chart-lag";
      this.secondsChart = new Chart(charts, "Max time lag (age of the oldest unconsumed record)",
        ["max time lag"], fmtSeconds);
      this.secondsChart.root.id = "chart-lag-seconds";
      this.windowChart = new Chart(charts, "Lag at each stored commit (the evaluation window)", [],
        (v) => fmtInt(v));
      this.windowChart.root.id = "chart-window";
      this.onResize = () => [this.lagChart, this.secondsChart, this.windowChart].forEach((c) => c.resize());
      window.addEventListener("resize", this.onResize);
      // Each chart took the width it had when created, before its neighbours took their share of the row.
      this.onResize();
    }

    leave() {
      window.removeEventListener("resize", this.onResize);
    }

    // The whole history once, then only the samples newer than the last one held, dropping what has
    // aged past the monitor's retention.
    async history() {
      const held = this.samples;
      const last = held && held.time.length ? held.time[held.time.length - 1] : null;
      const url = `api/history/${enc(this.cluster)}/${enc(this.group)}` + (last === null ? "" : `?since=${last}`);
      const fresh = await getJSON(url);
      if (last === null) {
        this.samples = fresh;
        return fresh;
      }
      const keep = held.time.findIndex((t) => t > fresh.now - fresh.retention);
      const start = keep < 0 ? held.time.length : keep;
      for (const key of ["time", "totallag", "max_lag_seconds", "status"]) {
        held[key] = held[key].slice(start).concat(fresh[key]);
      }
      Object.assign(held, { sample_interval: fresh.sample_interval, retention: fresh.retention });
      return held;
    }

    async refresh() {
      const [lag, detail, history] = await Promise.all([
        getJSON(api(this.cluster, "consumer", this.group, "lag")),
        getJSON(api(this.cluster, "consumer", this.group)),
        this.history(),
      ]);
      const status = lag.status || {};
      const topics = [...new Set((status.partitions || []).map((p) => p.topic))].sort();
      const logEnds = Object.fromEntries(await Promise.all(topics.map(async (topic) => {
        const answer = await getJSON(api(this.cluster, "topic", topic));
        return [topic, answer.offsets || []];
      })));

      this.title.replaceChildren(
        h("h1", null, this.group, " ", badge(status.status || "NOTFOUND")),
        h("div", { class: "sub" }, "cluster ", h("a", { href: "#/clusters" }, this.cluster), " \u00b7 ",
          topics.map((t, i) => [i ? ", " : "", h("a", { href: topicLink(this.cluster, t) }, t)])));
      const maxlag = status.maxlag;
      this.cards.replaceChildren(
        card("Total lag", fmtInt(status.totallag)),
        card("Max time lag", fmtSeconds(status.max_lag_seconds)),
        card("Catch-up", fmtCatchUp(status), "catch-up"),
        card("Partitions", fmtInt(status.partition_count)),
        card("Window complete", fmtPercent(status.complete)),
        card("Most lagging", maxlag ? `${maxlag.topic}/${maxlag.partition}` : DASH));

      this.lagChart.setData([history.time, history.totallag]);
      this.secondsChart.setData([history.time, history.max_lag_seconds]);
      this.drawWindow(detail.topics || {});
      this.notes.textContent = history.time.length
        ? `Group charts: one sample every ${history.sample_interval} s, kept ${Math.round(history.retention / 60)} min` +
          " in the monitor's memory; the window chart shows the commits storage keeps for evaluation."
        : history.sample_interval === null
          ? "No chart history: the monitor keeps none (its dashboard sample-interval is 0)."
          : "Collecting samples for the group charts\u2026";

      const rows = (status.partitions || []).slice()
        .sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition)
        .map((p) => {
          const logEnd = (logEnds[p.topic] || [])[p.partition];
          return h("tr", { "data-topic": p.topic, "data-partition": p.partition },
            h("td", { class: "wrap" }, h("a", { href: topicLink(this.cluster, p.topic) }, p.topic)),
            h("td", { class: "num" }, p.partition),
            h("td", null, badge(p.status)),
            h("td", { class: "wrap" }, p.owner || DASH),
            h("td", { class: "phone-hide" }, p.client_id || DASH),
            h("td", { class: "num" }, fmtInt(p.end ? p.end.offset : null)),
            h("td", { class: "num" }, fmtInt(logEnd)),
            h("td", { class: "num lag" }, fmtInt(p.current_lag)),
            h("td", { class: "num lag-seconds", title: p.lag_seconds_method ? `method: ${p.lag_seconds_method}` : null },
              fmtSeconds(p.lag_seconds),
              p.lag_seconds_method ? h("span", { class: "method" }, p.lag_seconds_method) : null),
            h("td", { class: "catch-up phone-hide" }, fmtCatchUp(p)),
            h("td", { class: "num phone-hide" }, fmtPercent(p.complete)));
        });
      this.partitions.replaceChildren(table([
        { label: "Topic" }, { label: "Partition", num: true }, { label: "Status" }, { label: "Owner" },
        { label: "Client id", cls: "phone-hide" }, { label: "Committed offset", num: true },
        { label: "Log end offset", num: true }, { label: "Lag", num: true }, { label: "Time lag", num: true },
        { label: "Catch-up", cls: "phone-hide" }, { label: "Window", num: true, cls: "phone-hide" },
      ], rows, status.status === "NOTFOUND" ? "The monitor does not know this group." : "No partitions."));
    }

    drawWindow(topics) {
      const partitions = [];
      for (const [topic, list] of Object.entries(topics)) {
        list.forEach((p, partition) => {
          const commits = (p.offsets || []).filter((o) => o && o.lag !== null);
          if (commits.length) partitions.push({ label: `${topic}/${partition}`, commits, lag: p["current-lag"] });
        });
      }
      partitions.sort((a, b) => b.lag - a.lag || a.label.localeCompare(b.label));
      const shown = partitions.slice(0, WINDOW_SERIES).sort((a, b) => a.label.localeCompare(b.label));
      const times = [...new Set(shown.flatMap((p) => p.commits.map((o) => o.timestamp)))].sort((a, b) => a - b);
      const index = new Map(times.map((t, i) => [t, i]));
      const columns = shown.map((p) => {
        const column = new Array(times.length).fill(null);
        for (const o of p.commits) column[index.get(o.timestamp)] = o.lag;
        return column;
      });
      this.windowChart.setSeries(shown.map((p) => p.label));
      this.windowChart.setData([times.map((t) => t / 1000), ...columns]);
    }
  }

  class ClustersPage {
    constructor() {
      view.replaceChildren(h("h1", null, "Clusters"), h("div", { class: "sub" }, "The Kafka clusters the monitor reads."),
        this.sender = h("div", { class: "notifier-sender" }), this.list = h("div", { class: "clusters" }));
    }

    async refresh() {
      const [clusters, groups, notifier] = await Promise.all([getJSON("../v3/kafka"), getJSON("api/groups"),
        getJSON("../v3/admin/notifier")]);
      // with no notifier configured the API answers 404 with no notifier: there is no sender to show
      this.sender.replaceChildren(...(notifier.notifier ? [senderLine(notifier.notifier)] : []));
      const details = await Promise.all((clusters.clusters || []).map(async (name) => {
        const [detail, topics] = await Promise.all([getJSON(api(name)), getJSON(api(name, "topic"))]);
        const module = detail.module || {};
        const probe = module.probe ? (await getJSON(api(name, "probe"))).probe : null;
        const shares = await shareGroups(name);
        return { name, module, topics: topics.topics || [], probe, shares };
      }));
      this.list.replaceChildren(...details.map(({ name, module, topics, probe, shares }) => {
        const mine = groups.groups.filter((g) => g.cluster === name);
        const counts = {};
        for (const g of mine) counts[g.status] = (counts[g.status] || 0) + 1;
        return h("div", { class: "cluster", "data-cluster": name },
          h("h2", null, name),
          h("dl", null,
            h("dt", null, "Module"), h("dd", null, module["class-name"] || DASH),
            h("dt", null, "Servers"), h("dd", null, (module.servers || []).join(", ") || DASH),
            h("dt", null, "Offset refresh"), h("dd", null, module["offset-refresh"] ? `${module["offset-refresh"]} s` : DASH),
            h("dt", null, "Topics"), h("dd", null, h("a", { href: `#/topics/${enc(name)}` }, String(topics.length))),
            h("dt", null, "Groups"), h("dd", null, h("a", { href: `#/groups?q=${enc(name)}` }, String(mine.length)),
              " ", Object.entries(counts).sort().map(([s, n]) => [" ", badge(s), ` ${n}`]))),
          probe ? probeTable(probe) : null,
          shares.length ? shareGroupTable(shares) : null);
      }));
      if (!details.length) this.list.replaceChildren(h("div", { class: "empty" }, "No cluster is configured."));
    }
  }

  // Whether this instance sends the notifications or stands by (GET /v3/admin/notifier): with two or more
  // instances only the holder of the notifier lock sends, and the on-call engineer asks which one it is.
  function senderLine(n) {
    const lock = n.lock === "none" ? "no notifier lock: it assumes it is the only instance" : `${n.lock} lock`;
    const since = n.sender && n.since ? [" held since ", h("time", { datetime: new Date(n.since * 1000).toISOString() },
      `${new Date(n.since * 1000).toLocaleString()} (${fmtSeconds(Date.now() / 1000 - n.since)} ago)`)] : [];
    return h("div", { class: `sender ${n.sender ? "sending" : "standby"}`, "data-sender": String(n.sender) },
      h("strong", null, `Notifier: this instance (${n.instance || DASH}) `,
        n.sender ? "sends the notifications" : "stands by while another instance sends the notifications"),
      ` \u00b7 ${lock}`, ...since);
  }

  // The share groups of a cluster (GET /v3/kafka/:cluster/share-group, then each one's /lag).
  async function shareGroups(cluster) {
    // a cluster module that reads no share groups answers 404 with no list; a group gone since has no status
    const names = (await getJSON(api(cluster, "share-group"))).share_groups || [];
    const answers = await Promise.all(names.map((g) => getJSON(api(cluster, "share-group", g, "lag"))));
    return answers.filter((a) => a.status).map((a) => a.status);
  }

  // One row per share group: its status from the window rules on the start offsets, its member count, and per
  // partition start offset / log end (lag, and records in flight when the brokers' metrics give them) and the
  // members it is assigned to (client id @ host).
  function shareGroupTable(shares) {
    const inFlight = (p) => (p.in_flight === null || p.in_flight === undefined ? "" : `, in flight ${fmtInt(p.in_flight)}`);
    const owners = (p) => (p.owners.length ? p.owners.map((o) => `${o.client_id} @ ${o.host}`).join(", ") : "no member");
    const rows = shares.map((g) => h("tr", { "data-share-group": g.group },
      h("td", null, g.group), h("td", null, badge(g.status)), h("td", null, g.group_state || DASH),
      h("td", { class: "num" }, fmtInt(g.members)), h("td", { class: "num" }, fmtInt(g.totallag)),
      h("td", null, g.partitions.map((p) => h("div", { "data-partition": `${p.topic}/${p.partition}` },
        `${p.topic}/${p.partition} `, badge(p.status),
        ` ${fmtInt(p.start_offset)} / ${fmtInt(p.log_end_offset)} (lag ${fmtInt(p.current_lag)}${inFlight(p)}) \u00b7 `,
        h("span", { class: "owners" }, owners(p)))))));
    return h("div", { class: "share-groups" }, h("h3", null, "Share groups"),
      table([{ label: "Share group" }, { label: "Status" }, { label: "State" }, { label: "Members", num: true },
        { label: "Lag", num: true }, { label: "Partitions: start offset / log end \u00b7 members" }], rows,
      "No share group."));
  }

  // The end-to-end probes of a cluster (GET /v3/kafka/:cluster/probe): one row per broker.
  function probeTable(probe) {
    const ratio = (r) => (r === null || r === undefined ? DASH : `${Math.round(r * 1000) / 10} %`);
    const ms = (s) => (s === null || s === undefined ? DASH : `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms`);
    const rows = probe.brokers.map((b) => h("tr", { "data-broker": b.broker, class: b.success_ratio === 1 ? "" : "probe-failing" },
      h("td", null, String(b.broker)), h("td", { class: "num" }, ratio(b.success_ratio)),
      h("td", { class: "num" }, ms(b.end_to_end_seconds)), h("td", { class: "num" }, ms(b.produce_seconds)),
      h("td", { class: "num" }, ms(b.commit_seconds)), h("td", null, b.last_error || DASH)));
    return h("div", { class: "probes" }, h("h3", null, `Probes every ${probe.interval} s`),
      table([{ label: "Broker" }, { label: "Success", num: true }, { label: "End to end", num: true },
        { label: "Produce", num: true }, { label: "Commit", num: true }, { label: "Last error" }], rows,
      "No probe yet."));
  }

  class TopicsPage {
    constructor(cluster, query) {
      this.cluster = cluster;
      this.filter = h("input", { type: "search", id: "topic-filter", placeholder: "Filter topics",
        value: query.get("q") || "", oninput: () => {
          replaceQuery(new URLSearchParams(this.filter.value ? { q: this.filter.value } : {}));
          this.render();
        } });
      this.picker = h("span");
      this.list = h("div");
      view.replaceChildren(h("h1", null, "Topics"), h("div", { class: "sub" }, this.picker),
        h("div", { class: "toolbar" }, this.filter), this.list);
      this.data = null;
    }

    async refresh() {
      const clusters = (await getJSON("../v3/kafka")).clusters || [];
      if (!this.cluster) this.cluster = clusters[0];
      this.picker.replaceChildren("cluster ", ...clusters.flatMap((c, i) => [i ? " \u00b7 " : "",
        c === this.cluster ? h("strong", null, c) : h("a", { href: `#/topics/${enc(c)}` }, c)]));
      this.data = this.cluster ? await getJSON(`api/topics/${enc(this.cluster)}`) : { topics: [] };
      this.render();
    }

    render() {
      if (!this.data) return;
      const text = this.filter.value.trim().toLowerCase();
      const rows = this.data.topics.filter((t) => !text || t.topic.toLowerCase().includes(text)).map((t) => {
        const health = t.health || {};
        const bad = health.offline || health.under_min_isr || health.under_replicated;
        return h("tr", { "data-topic": t.topic, class: bad ? "unhealthy" : "" },
          h("td", { class: "wrap" }, h("a", { href: topicLink(this.cluster, t.topic) }, t.topic)),
          h("td", { class: "num" }, t.offsets.length),
          h("td", { class: "num" }, fmtInt(t.offsets.reduce((a, b) => a + b, 0))),
          h("td", { class: "num" }, fmtRate(health.produce_rate)),
          h("td", { class: "num" }, fmtBytes(health.size_bytes)),
          h("td", { class: "replication" }, t.health ? replicationText(health) : DASH),
          h("td", { class: "wrap" }, t.consumers.length ? t.consumers.map((g, i) =>
            [i ? ", " : "", h("a", { href: groupLink(this.cluster, g) }, g)]) : DASH));
      });
      const summary = this.data.health;
      this.list.replaceChildren(
        summary ? h("div", { class: "cluster-health" + (summary.offline || summary.under_min_isr
          || summary.under_replicated ? " unhealthy" : "") },
        `${summary.brokers} ${summary.brokers === 1 ? "broker" : "brokers"} \u00b7 partitions: `,
        replicationText(summary)) : "",
        table([{ label: "Topic" }, { label: "Partitions", num: true }, { label: "Log end offsets (sum)", num: true },
          { label: "Produce rate", num: true }, { label: "Size", num: true }, { label: "Replication" },
          { label: "Read by" }], rows, "No topics."));
    }
  }

  // The topic page's columns from the topic's health figures (GET /v3/kafka/:cluster/topic/:topic, "health").
  const HEALTH_COLUMNS = [{ label: "Low watermark", num: true }, { label: "Produce rate", num: true },
    { label: "Size", num: true }, { label: "Leader", num: true }, { label: "Replicas" }, { label: "ISR" },
    { label: "Replication" }];

  class TopicPage {
    constructor(cluster, topic) {
      this.cluster = cluster;
      this.topic = topic;
      view.replaceChildren(
        h("h1", null, topic),
        h("div", { class: "sub" }, "cluster ", h("a", { href: `#/topics/${enc(cluster)}` }, cluster)),
        this.list = h("div"));
    }

    async refresh() {
      const [offsets, consumers] = await Promise.all([
        getJSON(api(this.cluster, "topic", this.topic)),
        getJSON(api(this.cluster, "topic", this.topic, "consumers")),
      ]);
      const groups = consumers.consumers || [];
      const statuses = await Promise.all(groups.map((g) => getJSON(api(this.cluster, "consumer", g, "lag"))));
      const byGroup = groups.map((g, i) => {
        const partitions = new Map();
        for (const p of (statuses[i].status || {}).partitions || []) {
          if (p.topic === this.topic) partitions.set(p.partition, p);
        }
        return { group: g, partitions };
      });
      const logEnds = offsets.offsets || [];
      const health = offsets.health ? offsets.health.partitions : [];
      const nodes = (list) => (list && list.length ? list.join(", ") : DASH);
      const rows = logEnds.map((end, partition) => h("tr", { "data-partition": partition },
        h("td", { class: "num" }, partition),
        h("td", { class: "num" }, fmtInt(end)),
        ...(offsets.health ? ((p) => (p ? [
          h("td", { class: "num" }, fmtInt(p.low_watermark)), h("td", { class: "num" }, fmtRate(p.produce_rate)),
          h("td", { class: "num" }, fmtBytes(p.size_bytes)), h("td", { class: "num" }, p.leader < 0 ? "none" : p.leader),
          h("td", null, nodes(p.replicas)), h("td", null, nodes(p.isr)),
          h("td", { class: "replication" + (p.offline || p.under_min_isr || p.under_replicated ? " unhealthy" : "") },
            replicationText(p))] : HEALTH_COLUMNS.map(() => h("td", null, DASH))))(health[partition]) : []),
        byGroup.map(({ partitions }) => {
          const p = partitions.get(partition);
          return h("td", { class: "num" }, p ? [badge(p.status), " ", fmtInt(p.current_lag), " \u00b7 ",
            fmtSeconds(p.lag_seconds)] : DASH);
        })));
      this.list.replaceChildren(
        offsets.error ? h("div", { class: "error" }, offsets.message) : "",
        table([{ label: "Partition", num: true }, { label: "Log end offset", num: true },
          ...(offsets.health ? HEALTH_COLUMNS : []),
          ...groups.map((g) => ({ label: h("a", { href: groupLink(this.cluster, g) }, g), num: true }))],
        rows, "No partitions."),
        groups.length ? h("div", { class: "note" }, "Each group: partition status, lag in messages \u00b7 time lag.") : "");
    }
  }

  // --- routing and refresh ---------------------------------------------------------------------------

  function route() {
    if (page && page.leave) page.leave();
    clearTimeout(timer);
    const { parts, query } = hashQuery();
    const [name, a, b] = parts;
    if (name === "group" && a && b) page = new GroupPage(a, b);
    else if (name === "clusters") page = new ClustersPage();
    else if (name === "topics") page = new TopicsPage(a, query);
    else if (name === "topic" && a && b) page = new TopicPage(a, b);
    else page = new GroupsPage(query);
    const section = { group: "groups", topic: "topics" }[name] || name || "groups";
    for (const link of document.querySelectorAll("nav a")) {
      link.classList.toggle("active", link.dataset.nav === section);
    }
    refresh(page);
  }

  async function refresh(current) {
    try {
      await current.refresh();
      if (current !== page) return;
      refreshLabel.classList.remove("failed");
      refreshLabel.textContent = `updated ${new Date().toLocaleTimeString()} \u00b7 every ${REFRESH_MS / 1000} s`;
    } catch (error) {
      if (current !== page) return;
      refreshLabel.classList.add("failed");
      refreshLabel.textContent = `refresh failed: ${error.message}`;
    }
    if (current === page) timer = setTimeout(() => refresh(current), REFRESH_MS);
  }

  window.addEventListener("hashchange", route);
  route();
})();
