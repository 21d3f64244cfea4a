// The aegis console. It runs under a Content-Security-Policy without
// inline script or eval, talks only to this origin's admin API
// (/admin/v1/) with the session cookie, and sends the session's CSRF token
// with every change. Text that came from an agent, a tenant or an upstream
// reaches the page only through text nodes (never the HTML parser), after
// shown() has spelled out every character that would hide or reorder text
// (the server's display.Hidden list, from /admin/console/hidden.json).
'use strict';
(function () {
  const S = { csrf: '', refresh: 0, hidden: [], tenant: '', page: '', busy: {}, seen: {}, cards: new Map(), nextCard: 0 };
  const $ = (id) => document.getElementById(id);
  const PAGES = ['approvals', 'stops', 'audit', 'registry', 'upstreams', 'pins'];

  // --- text as an operator is shown it ---------------------------------

  function isHidden(cp) {
    let lo = 0, hi = S.hidden.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, r = S.hidden[mid];
      if (cp < r[0]) hi = mid - 1;
      else if (cp > r[1]) lo = mid + 1;
      else return true;
    }
    return false;
  }
  const hex = (n, d) => n.toString(16).padStart(d, '0');
  // shown is display.Text: every hidden character spelled out as an escape.
  function shown(v) {
    const s = v === undefined || v === null ? '' : String(v);
    let out = '';
    for (const ch of s) {
      const cp = ch.codePointAt(0);
      if (cp >= 0xd800 && cp <= 0xdfff) out += '\\u' + hex(cp, 4);
      else if (!isHidden(cp)) out += ch;
      else if (cp === 9) out += '\\t';
      else if (cp === 10) out += '\\n';
      else if (cp === 13) out += '\\r';
      else if (cp < 0x80) out += '\\x' + hex(cp, 2);
      else if (cp <= 0xffff) out += '\\u' + hex(cp, 4);
      else out += '\\U' + hex(cp, 8);
    }
    return out;
  }

  // el builds an element; string children become text nodes (shown).
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'hidden' || k === 'disabled' || k === 'required' || k === 'readOnly') e[k] = v;
      else e.setAttribute(k, shown(v));
    }
    for (const c of kids) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(shown(c)));
    }
    return e;
  }
  const svgNS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of kids) e.append(c instanceof Node ? c : document.createTextNode(shown(c)));
    return e;
  }
  const when = (t) => (t ? new Date(t).toISOString().replace('.000Z', 'Z') : '-');
  const enc = encodeURIComponent;

  function say(msg) { $('status').textContent = shown(msg); }
  function fail(err) { $('error').textContent = shown(err && err.message ? err.message : err); }
  function clearError() { $('error').textContent = ''; }

  // --- the admin API ----------------------------------------------------

  async function api(method, path, body) {
    const opt = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (method !== 'GET') {
      opt.headers['X-CSRF-Token'] = S.csrf;
      opt.headers['Content-Type'] = 'application/json';
      opt.body = JSON.stringify(body || {});
    }
    const r = await fetch('/admin/v1/' + path, opt);
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (r.status === 401) {
      location.assign('/admin/console/');
      throw new Error('the console session ended; log in again');
    }
    if (!r.ok) throw new Error(data && data.error ? data.error.message : 'HTTP ' + r.status);
    return { data, text };
  }

  // rawParams returns the params of each item of an approvals answer as
  // the bytes the server sent (JSON.parse would merge duplicated members
  // and reorder numeric keys: the approvers' view shows them as sent).
  function rawParams(text) {
    const out = [], stack = [], n = text.length;
    let i = 0, expectKey = false;
    const skipString = (j) => {
      for (j++; j < n; j++) {
        if (text[j] === '\\') j++;
        else if (text[j] === '"') return j + 1;
      }
      return n;
    };
    const skipValue = (j) => {
      if (text[j] === '"') return skipString(j);
      if (text[j] === '{' || text[j] === '[') {
        let d = 0;
        while (j < n) {
          const c = text[j];
          if (c === '"') { j = skipString(j); continue; }
          if (c === '{' || c === '[') d++;
          else if (c === '}' || c === ']') { d--; if (d === 0) return j + 1; }
          j++;
        }
        return n;
      }
      while (j < n && ',}] \t\r\n'.indexOf(text[j]) < 0) j++;
      return j;
    };
    while (i < n) {
      const c = text[i];
      if (c === '{') { stack.push('o'); expectKey = true; i++; continue; }
      if (c === '[') { stack.push('a'); expectKey = false; i++; continue; }
      if (c === '}' || c === ']') { stack.pop(); i++; continue; }
      if (c === ',') { expectKey = stack[stack.length - 1] === 'o'; i++; continue; }
      if (c === '"') {
        const end = skipString(i);
        if (!expectKey) { i = end; continue; }
        expectKey = false;
        const key = JSON.parse(text.slice(i, end));
        let j = text.indexOf(':', end) + 1;
        while (j < n && ' \t\r\n'.indexOf(text[j]) >= 0) j++;
        if (key === 'params' && stack.length === 3) {
          const e = skipValue(j);
          out.push(text.slice(j, e));
          i = e;
        } else {
          i = j;
        }
        continue;
      }
      i++;
    }
    return out;
  }

  // --- pages ------------------------------------------------------------

  function route(focus) {
    let p = location.hash.replace(/^#/, '');
    if (PAGES.indexOf(p) < 0) p = 'approvals';
    S.page = p;
    for (const q of PAGES) {
      $('page-' + q).hidden = q !== p;
      const a = $('nav-' + q);
      if (q === p) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    clearError();
    say('');
    if (focus) {
      const h = $('h-' + p);
      h.tabIndex = -1;
      h.focus();
    }
    load(p);
  }

  function load(p) {
    const f = { approvals: loadApprovals, stops: loadStops, audit: loadAudit, registry: loadRegistry, upstreams: loadUpstreams, pins: loadPins }[p];
    if (S.busy[p]) return;
    S.busy[p] = true;
    f().catch(fail).finally(() => { S.busy[p] = false; });
  }

  // changed reports whether data differs from what page part k last drew.
  function changed(k, text) {
    if (S.seen[k] === text) return false;
    S.seen[k] = text;
    return true;
  }

  function byName() { return sessionStorage.getItem('aegis-console-by') || ''; }
  function rememberBy(v) {
    sessionStorage.setItem('aegis-console-by', v);
    for (const e of document.querySelectorAll('input.by')) if (!e.value) e.value = v;
  }

  // Approvals: every tenant's pending calls; cards are added and removed,
  // never redrawn, so a reason being typed keeps its focus.
  async function loadApprovals() {
    const { data, text } = await api('GET', 'approvals?status=pending');
    const raws = rawParams(text);
    const list = $('approvals-list');
    const live = new Set();
    data.approvals.forEach((a, i) => {
      live.add(a.id);
      if (!S.cards.has(a.id)) {
        const card = approvalCard(a, raws[i] === undefined ? JSON.stringify(a.params) : raws[i]);
        S.cards.set(a.id, card);
        list.append(card);
      }
    });
    for (const [id, card] of S.cards) {
      if (!live.has(id)) { card.remove(); S.cards.delete(id); }
    }
    if (S.cards.size === 0 && !$('approvals-none')) list.append(el('p', { id: 'approvals-none' }, 'No call is waiting for approval.'));
    if (S.cards.size > 0 && $('approvals-none')) $('approvals-none').remove();
    $('approvals-updated').textContent = 'Updated ' + when(new Date().toISOString()) + '.';
  }

  function approvalCard(a, raw) {
    const n = ++S.nextCard, h = 'appr-' + n;
    const reason = el('input', { id: h + '-reason', autocomplete: 'off', class: 'reason' });
    const by = el('input', { id: h + '-by', class: 'by', autocomplete: 'name' });
    by.value = byName();
    const decide = async (verb) => {
      clearError();
      if (by.value) rememberBy(by.value);
      try {
        const { data } = await api('POST', 'approvals/' + enc(a.id) + '/' + verb, { reason: reason.value, by: by.value });
        say((verb === 'approve' ? 'Approved ' : 'Denied ') + data.tool + ' (' + data.id + '): the agent may retry the same call.');
        card.remove();
        S.cards.delete(a.id);
        load('approvals');
      } catch (e) { fail(e); }
    };
    const form = el('form', { class: 'decide', onsubmit: (ev) => { ev.preventDefault(); decide('approve'); } },
      el('p', {}, el('label', { for: h + '-reason' }, 'Reason'), reason, ' ', el('label', { for: h + '-by' }, 'Your name'), by),
      el('p', {}, el('button', { type: 'submit', class: 'approve', 'aria-describedby': h + '-h' }, 'Approve'), ' ',
        el('button', { type: 'button', class: 'deny', 'aria-describedby': h + '-h', onclick: () => decide('deny') }, 'Deny')));
    const card = el('article', { class: 'approval', id: h, 'aria-labelledby': h + '-h', 'data-approval': a.id },
      el('h3', { id: h + '-h' }, a.tool + ' on ' + a.server + ' (tenant ' + a.tenant + ', caller ' + a.caller + ')'),
      el('p', { class: 'help' }, 'Approval ' + a.id + ', held ' + when(a.created) + ', expires ' + when(a.expires) + '.'),
      el('p', {}, el('span', { id: h + '-pl' }, 'Params (masked):')),
      el('pre', { class: 'params', 'aria-labelledby': h + '-pl' }, raw),
      form);
    return card;
  }

  // Kill switches.
  async function loadStops() {
    if (!S.tenant) return;
    const t = enc(S.tenant);
    const [srv, stops] = await Promise.all([api('GET', 'tenants/' + t + '/servers'), api('GET', 'tenants/' + t + '/stops')]);
    if (changed('stop-servers', srv.text)) {
      const sel = $('stop-server'), keep = sel.value;
      sel.replaceChildren(...srv.data.servers.map((s) => el('option', { value: s.name }, s.name)));
      if (keep) sel.value = keep;
    }
    if (changed('stops', stops.text)) {
      const body = $('stops-table').tBodies[0];
      body.replaceChildren(...stops.data.stops.map((s) => el('tr', { 'data-server': s.server, 'data-tool': s.tool || '' },
        el('td', {}, s.server), el('td', {}, s.tool || '(whole server)'), el('td', {}, s.reason || ''), el('td', {}, s.by || ''),
        el('td', {}, when(s.at)), el('td', { class: 'everywhere', 'data-at': s.at }),
        el('td', {}, el('button', { type: 'button', 'aria-label': 'Resume ' + (s.tool ? s.tool + ' on ' : '') + s.server, onclick: () => stopOrResume(false, s.server, s.tool || '', true) }, 'Resume')))));
      if (stops.data.stops.length === 0) body.append(el('tr', {}, el('td', { colspan: '7' }, 'No stop in force.')));
    }
    for (const td of document.querySelectorAll('#stops-table td.everywhere')) {
      const at = Date.parse(td.getAttribute('data-at'));
      if (S.refresh <= 0) { td.textContent = 'in force since ' + when(td.getAttribute('data-at')); td.className = 'everywhere inforce'; continue; }
      const by = at + S.refresh * 1000;
      if (Date.now() >= by) { td.textContent = 'in force since ' + when(new Date(by).toISOString()); td.className = 'everywhere inforce'; }
      else { td.textContent = 'by ' + when(new Date(by).toISOString()); td.className = 'everywhere pending'; }
    }
    $('stops-refresh').textContent = S.refresh > 0
      ? 'Each gateway instance re-reads the stops every ' + S.refresh + ' s (KILL_SWITCH_REFRESH_SECS): a stop or resume made at T is in force on every instance by T + ' + S.refresh + ' s.'
      : 'Every call reads the stops from this store: a stop or resume is in force on every gateway at once.';
  }

  async function stopOrResume(on, server, tool, stored) {
    clearError();
    const by = $('stop-by').value;
    if (by) rememberBy(by);
    const t = enc(S.tenant);
    const path = 'tenants/' + t + '/servers/' + enc(server) + (tool ? '/tools/' + enc(tool) : '') + (on ? '/stop' : '/resume');
    const body = { reason: on ? $('stop-reason').value : '', by };
    if (stored && tool) body.unlisted = true; // resume exactly the stop as stored
    try {
      const { data } = await api('POST', path, body);
      const what = data.stop.tool ? 'Tool ' + data.stop.tool + ' on ' + data.stop.server : 'Server ' + data.stop.server;
      const by = S.refresh > 0 ? ' on every instance by ' + when(new Date(Date.parse(data.stop.at) + S.refresh * 1000).toISOString()) : ' on every instance at once';
      say(what + (on ? ' stopped' : ' resumed') + ': in force' + by + '.');
      S.seen.stops = '';
      await loadStops();
    } catch (e) { fail(e); }
  }

  // Audit: every record of the range (bounded), filtered here.
  const MAX_RECORDS = 10000;
  const isoLocal = (d) => d.toISOString().slice(0, 19);
  async function loadAudit() {
    if (!S.tenant) return;
    if (!$('audit-from').value) {
      const now = new Date();
      $('audit-from').value = isoLocal(new Date(now.getTime() - 3600 * 1000));
      $('audit-to').value = isoLocal(new Date(now.getTime() + 60 * 1000)); // a minute ahead: calls made while the page is open
    }
    const from = new Date($('audit-from').value + 'Z'), to = new Date($('audit-to').value + 'Z');
    if (isNaN(from) || isNaN(to)) throw new Error('From and To must be times');
    let recs = [], cursor = '', cut = false;
    do {
      const q = 'from=' + enc(from.toISOString()) + '&to=' + enc(to.toISOString()) + '&limit=1000' + (cursor ? '&cursor=' + enc(cursor) : '');
      const { data } = await api('GET', 'tenants/' + enc(S.tenant) + '/audit?' + q);
      recs = recs.concat(data.records);
      cursor = data.next_cursor || '';
      if (recs.length >= MAX_RECORDS && cursor) { cut = true; break; }
    } while (cursor);
    const f = { outcome: $('audit-outcome').value, code: $('audit-code').value.trim(), tool: $('audit-tool').value.trim(), caller: $('audit-caller').value.trim() };
    const keep = recs.filter((r) => (!f.outcome || r.outcome === f.outcome) && (!f.code || String(r.code) === f.code) &&
      (!f.tool || r.tool === f.tool) && (!f.caller || r.caller === f.caller));
    $('audit-summary').textContent = keep.length + ' of ' + recs.length + ' records from ' + when(from.toISOString()) + ' to ' + when(to.toISOString()) +
      (cut ? ' (the first ' + recs.length + ' only: narrow the range to see the rest)' : '') + '.';
    chart(keep, from.getTime(), to.getTime());
    const shownRecs = keep.slice().reverse().slice(0, 500);
    $('audit-table').tBodies[0].replaceChildren(...shownRecs.map((r) => el('tr', { class: 'rec', 'data-outcome': r.outcome, 'data-method': r.method, 'data-tool': r.tool || '' },
      el('td', {}, when(r.time)), el('td', {}, r.outcome), el('td', { class: 'code' }, String(r.code)), el('td', {}, r.word || ''),
      el('td', {}, r.method), el('td', {}, r.server || ''), el('td', {}, r.tool || ''), el('td', {}, r.caller),
      el('td', {}, r.detail || ''), el('td', { class: 'code' }, r.correlation_id))));
  }

  const COLORS = ['#2e7d32', '#c62828', '#1565c0', '#ef6c00', '#6a1b9a', '#00838f', '#ad1457', '#5d4037', '#9e9d24', '#37474f'];
  // chart draws calls by outcome and code over time as stacked bars.
  function chart(recs, from, to) {
    const W = 720, H = 200, L = 40, B = 24, N = 60;
    const step = Math.max(1, (to - from) / N);
    const series = new Map(); // key → {label, counts}
    const keyOf = (r) => (r.outcome === 'allowed' ? 'allowed' : r.outcome + ' ' + r.code + (r.word ? ' ' + r.word : ''));
    for (const r of recs) {
      const k = keyOf(r);
      if (!series.has(k)) series.set(k, new Array(N).fill(0));
      const b = Math.min(N - 1, Math.max(0, Math.floor((Date.parse(r.time) - from) / step)));
      series.get(k)[b]++;
    }
    const keys = [...series.keys()].sort((a, b) => (a === 'allowed' ? -1 : b === 'allowed' ? 1 : a < b ? -1 : 1));
    let max = 1;
    for (let b = 0; b < N; b++) { let s = 0; for (const k of keys) s += series.get(k)[b]; max = Math.max(max, s); }
    const bw = (W - L) / N, plotH = H - B;
    const g = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img', 'aria-labelledby': 'audit-chart-caption', id: 'audit-svg' });
    g.append(svg('line', { x1: L, y1: plotH, x2: W, y2: plotH, stroke: '#555' }), svg('line', { x1: L, y1: 0, x2: L, y2: plotH, stroke: '#555' }),
      svg('text', { x: L - 4, y: 10, 'text-anchor': 'end', 'font-size': 10 }, String(max)), svg('text', { x: L - 4, y: plotH, 'text-anchor': 'end', 'font-size': 10 }, '0'),
      svg('text', { x: L, y: H - 6, 'font-size': 10 }, when(new Date(from).toISOString())),
      svg('text', { x: W, y: H - 6, 'font-size': 10, 'text-anchor': 'end' }, when(new Date(to).toISOString())));
    for (let b = 0; b < N; b++) {
      let y = plotH;
      keys.forEach((k, i) => {
        const c = series.get(k)[b];
        if (!c) return;
        const h = (c / max) * (plotH - 4);
        y -= h;
        g.append(svg('rect', { x: L + b * bw + 1, y, width: Math.max(1, bw - 2), height: h, fill: COLORS[i % COLORS.length], class: 'bar', 'data-series': k },
          svg('title', {}, k + ': ' + c + ' from ' + when(new Date(from + b * step).toISOString()))));
      });
    }
    $('audit-chart').replaceChildren(g);
    $('audit-legend').replaceChildren(...keys.map((k, i) => el('li', {},
      svg('svg', { width: 12, height: 12, 'aria-hidden': 'true' }, svg('rect', { width: 12, height: 12, fill: COLORS[i % COLORS.length] })),
      ' ' + k + ': ' + series.get(k).reduce((a, b) => a + b, 0))));
    if (keys.length === 0) $('audit-legend').append(el('li', {}, 'no records'));
  }

  // Tenants, servers and keys.
  async function loadRegistry() {
    const ts = await api('GET', 'tenants');
    $('tenants-table').tBodies[0].replaceChildren(...ts.data.tenants.map((t) => el('tr', {},
      el('td', {}, t.id), el('td', {}, t.tier || ''), el('td', {}, t.refusal_shape || 'error'), el('td', {}, t.webhook_url ? 'yes' : 'no'), el('td', {}, when(t.created)))));
    if (!S.tenant) return;
    const t = enc(S.tenant);
    const [srv, keys] = await Promise.all([api('GET', 'tenants/' + t + '/servers'), api('GET', 'tenants/' + t + '/keys')]);
    $('servers-table').tBodies[0].replaceChildren(...srv.data.servers.map((s) => el('tr', {},
      el('td', {}, s.name), el('td', {}, s.url), el('td', {}, s.credential ? s.credential.header : '-'),
      el('td', {}, Object.entries(s.tools || {}).filter(([, v]) => v.requires_approval).map(([k]) => k).join(', ') || '-'))));
    $('keys-table').tBodies[0].replaceChildren(...keys.data.keys.map((k) => el('tr', {},
      el('td', { class: 'code' }, k.id), el('td', {}, k.caller), el('td', {}, when(k.created)), el('td', {}, k.revoked ? 'yes' : 'no'),
      el('td', {}, k.revoked ? '' : el('button', { type: 'button', 'aria-label': 'Revoke key ' + k.id + ' of ' + k.caller, onclick: () => revoke(k) }, 'Revoke')))));
  }

  async function revoke(k) {
    if (!window.confirm('Revoke key ' + shown(k.id) + ' of ' + shown(k.caller) + '? Calls with it stop at once.')) return;
    try {
      await api('POST', 'tenants/' + enc(S.tenant) + '/keys/' + enc(k.id) + '/revoke');
      say('Revoked key ' + k.id + '.');
      await loadRegistry();
    } catch (e) { fail(e); }
  }

  async function createKey() {
    clearError();
    try {
      const { data } = await api('POST', 'tenants/' + enc(S.tenant) + '/keys', { caller: $('key-caller').value });
      await loadRegistry(); // first, so that nothing moves once the key is shown
      $('key-secret').value = data.key;
      $('key-new').hidden = false;
      $('key-secret').focus();
      $('key-secret').select();
      $('key-caller').value = '';
    } catch (e) { fail(e); }
  }

  // Upstreams: circuits and leases.
  async function loadUpstreams() {
    if (!S.tenant) return;
    const { data, text } = await api('GET', 'tenants/' + enc(S.tenant) + '/upstreams');
    if (!changed('upstreams', text)) return;
    $('upstreams-table').tBodies[0].replaceChildren(...data.upstreams.map((u) => el('tr', { 'data-server': u.server },
      el('td', {}, u.server), el('td', { class: 'circuit' }, u.circuit), el('td', {}, String(u.failures)),
      el('td', {}, u.open_until ? when(u.open_until) : '-'), el('td', {}, u.probing ? 'a probe call is running' : '-'), el('td', { class: 'inflight' }, String(u.in_flight)))));
  }

  // Pins.
  async function loadPins() {
    if (!S.tenant) return;
    const { data } = await api('GET', 'tenants/' + enc(S.tenant) + '/pins');
    const defButton = (p) => (p.current_def ? el('button', { type: 'button', 'aria-label': 'Show the definition of ' + p.tool + ' now', onclick: () => showDef(p) }, 'Show definition') : null);
    $('pins-table').tBodies[0].replaceChildren(...data.pins.map((p) => el('tr', {},
      el('td', {}, p.server), el('td', {}, p.tool), el('td', { class: 'code' }, p.hash), el('td', {}, p.listed ? 'yes' : 'no'),
      el('td', {}, p.changed ? 'CHANGED' : 'no'), el('td', { class: 'code' }, p.current || '-'), el('td', {}, p.by || ''),
      el('td', {}, defButton(p), p.changed ? el('button', { type: 'button', 'aria-label': 'Pin ' + p.tool + ' as listed now', onclick: () => pin(p, true) }, 'Pin as listed now') : null,
        el('button', { type: 'button', 'aria-label': 'Unpin ' + p.tool, onclick: () => pin(p, false) }, 'Unpin')))));
    $('unpinned-table').tBodies[0].replaceChildren(...data.unpinned.map((p) => el('tr', {},
      el('td', {}, p.server), el('td', {}, p.tool), el('td', { class: 'code' }, p.current || '-'),
      el('td', {}, defButton(p), el('button', { type: 'button', 'aria-label': 'Pin ' + p.tool, onclick: () => pin(p, true) }, 'Pin')))));
    emptyRow($('pins-table').tBodies[0], 8, 'No pin yet: tools are pinned the first time the gateway lists them.');
    emptyRow($('unpinned-table').tBodies[0], 4, 'Every listed tool is pinned.');
  }

  function emptyRow(body, cols, text) {
    if (body.rows.length === 0) body.append(el('tr', {}, el('td', { colspan: String(cols) }, text)));
  }

  function showDef(p) {
    $('pin-def-title').textContent = shown('Definition of ' + p.tool + ' on ' + p.server + ' now');
    $('pin-def-text').textContent = shown(JSON.stringify(p.current_def, null, 2));
    $('pin-def').hidden = false;
  }

  async function pin(p, on) {
    clearError();
    try {
      const path = 'tenants/' + enc(S.tenant) + '/servers/' + enc(p.server) + '/tools/' + enc(p.tool) + '/pin';
      await api(on ? 'POST' : 'DELETE', path, on ? { by: byName() } : undefined);
      say((on ? 'Pinned ' : 'Unpinned ') + p.tool + ' on ' + p.server + '.');
      await loadPins();
    } catch (e) { fail(e); }
  }

  // --- start ------------------------------------------------------------

  async function start() {
    const get = async (u) => {
      const r = await fetch(u, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      if (r.status === 401) { location.assign('/admin/console/'); throw new Error('not logged in'); }
      if (!r.ok) throw new Error(u + ': HTTP ' + r.status);
      return r.json();
    };
    const [si, hid] = await Promise.all([get('/admin/console/session'), get('/admin/console/hidden.json')]);
    S.csrf = si.csrf;
    S.refresh = si.kill_switch_refresh_secs;
    S.hidden = hid.ranges;
    $('whoami').textContent = shown('signed in as ' + si.principal + ' until ' + when(si.expires));
    const ts = await api('GET', 'tenants');
    const sel = $('tenant');
    sel.replaceChildren(...ts.data.tenants.map((t) => el('option', { value: t.id }, t.id)));
    const saved = sessionStorage.getItem('aegis-console-tenant');
    if (saved && ts.data.tenants.some((t) => t.id === saved)) sel.value = saved;
    S.tenant = sel.value;
    sel.addEventListener('change', () => {
      S.tenant = sel.value;
      sessionStorage.setItem('aegis-console-tenant', S.tenant);
      S.seen = {};
      load(S.page);
    });
    for (const e of document.querySelectorAll('input.by')) e.value = byName();
    $('logout').addEventListener('click', async () => {
      await fetch('/admin/console/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-CSRF-Token': S.csrf } });
      location.assign('/admin/console/');
    });
    $('stop-form').addEventListener('submit', (ev) => { ev.preventDefault(); stopOrResume(true, $('stop-server').value, $('stop-tool').value.trim(), false); });
    $('resume-do').addEventListener('click', () => stopOrResume(false, $('stop-server').value, $('stop-tool').value.trim(), false));
    $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); clearError(); load('audit'); });
    $('key-form').addEventListener('submit', (ev) => { ev.preventDefault(); createKey(); });
    $('key-hide').addEventListener('click', () => { $('key-secret').value = ''; $('key-new').hidden = true; $('key-caller').focus(); });
    window.addEventListener('hashchange', () => route(true));
    route(false);
    // Pages that change on their own are polled.
    setInterval(() => { if (['approvals', 'stops', 'upstreams'].indexOf(S.page) >= 0) load(S.page); }, 2000);
    document.body.setAttribute('data-ready', 'true');
  }

  document.addEventListener('DOMContentLoaded', () => { start().catch(fail); });
})();
