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
  const PAGES = ['overview', 'approvals', 'stops', 'audit', 'registry', 'upstreams', 'pins', 'connections'];

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
  // when is t (a time or its text) to the second, in UTC; ago is how far
  // it is from now in words; stamp is an element with both, whose
  // relative part tick() keeps current.
  const when = (t) => (t ? new Date(t).toISOString().slice(0, 19).replace('T', ' ') + 'Z' : '-');
  function ago(t) {
    const d = Date.parse(t) - Date.now(), a = Math.abs(d) / 1000;
    let n;
    if (a < 45) return d > 0 ? 'in a few seconds' : 'just now';
    if (a < 90 * 60) n = Math.round(a / 60) + ' min';
    else if (a < 36 * 3600) n = Math.round(a / 3600) + ' h';
    else n = Math.round(a / 86400) + ' days';
    return d > 0 ? 'in ' + n : n + ' ago';
  }
  function stamp(t) {
    if (!t) return '-';
    const iso = new Date(t).toISOString();
    return el('time', { datetime: iso }, when(iso) + ' ', el('span', { class: 'rel', 'data-at': iso }, '(' + ago(iso) + ')'));
  }
  function tick() {
    for (const e of document.querySelectorAll('span.rel')) e.textContent = '(' + ago(e.getAttribute('data-at')) + ')';
  }
  const enc = encodeURIComponent;

  // Meanings of a record, each with its colour (console.css: .m-NAME),
  // the same in every view. A call held for approval is "held", not
  // refused; approval and admin events (method "approval.held",
  // "killswitch.stop", ...) are not calls and are never counted as calls.
  const MEANINGS = ['allowed', 'held', 'refused', 'error', 'indeterminate'];
  function meaning(r) {
    if (r.word === 'APPROVAL_REQUIRED') return 'held';
    return MEANINGS.indexOf(r.outcome) >= 0 ? r.outcome : 'error';
  }
  const isCall = (r) => r.method.indexOf('/') >= 0 || r.method.indexOf('.') < 0;
  const badge = (m) => el('span', { class: 'badge m-' + m }, m);

  // fill replaces the rows of table's body, labelling each cell with its
  // column's header (shown beside the value when a narrow window stacks
  // the cells: console.css).
  function fill(table, rows) {
    const heads = [...table.tHead.rows[0].cells].map((c) => c.textContent);
    for (const r of rows) [...r.cells].forEach((c, i) => { if (heads[i] && !c.hasAttribute('colspan')) c.setAttribute('data-label', heads[i]); });
    table.tBodies[0].replaceChildren(...rows);
  }

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
      // A poll answered after the log-out: the log-out's own notice stands.
      if (!S.leaving) location.assign('/admin/console/?notice=ended');
      throw new Error('the console session ended; log in again');
    }
    if (!r.ok) {
      const e = new Error(data && data.error ? data.error.message : 'HTTP ' + r.status);
      e.code = data && data.error ? data.error.code : '';
      e.field = data && data.error ? data.error.field : '';
      throw e;
    }
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
    if (PAGES.indexOf(p) < 0) p = 'overview';
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
    const f = { overview: loadOverview, approvals: loadApprovals, stops: loadStops, audit: loadAudit, registry: loadRegistry, upstreams: loadUpstreams, pins: loadPins, connections: loadConnections }[p];
    if (S.busy[p]) return;
    S.busy[p] = true;
    // data-loaded names the page last drawn (the browser test waits on it).
    f().then(() => document.body.setAttribute('data-loaded', p)).catch(fail).finally(() => { S.busy[p] = false; });
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
    $('approvals-updated').textContent = 'Updated ' + when(new Date()) + '.';
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
      el('p', { class: 'help' }, 'Approval ' + a.id + ', held ', stamp(a.created), ', expires ', stamp(a.expires), '.'),
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
      fill($('stops-table'), stops.data.stops.map((s) => el('tr', { 'data-server': s.server, 'data-tool': s.tool || '' },
        el('td', {}, s.server), el('td', {}, s.tool || '(whole server)'), el('td', {}, s.reason || ''), el('td', {}, s.by || ''),
        el('td', {}, stamp(s.at)), el('td', { class: 'everywhere', 'data-at': s.at }),
        el('td', {}, el('button', { type: 'button', 'aria-label': 'Resume ' + (s.tool ? s.tool + ' on ' : '') + s.server, onclick: () => stopOrResume(false, s.server, s.tool || '', true) }, 'Resume')))));
      if (stops.data.stops.length === 0) body.append(el('tr', {}, el('td', { colspan: '7' }, 'No stop in force.')));
    }
    for (const td of document.querySelectorAll('#stops-table td.everywhere')) {
      const at = Date.parse(td.getAttribute('data-at'));
      if (S.refresh <= 0) { td.textContent = 'in force since ' + when(td.getAttribute('data-at')); td.className = 'everywhere inforce'; continue; }
      const by = at + S.refresh * 1000;
      if (Date.now() >= by) { td.textContent = 'in force since ' + when(by); td.className = 'everywhere inforce'; }
      else { td.textContent = 'by ' + when(by); td.className = 'everywhere pending'; }
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
    // A row's Resume resumes exactly the stop as stored; the form's
    // "Not listed yet" stops (or resumes) the name as given.
    if (tool && (stored || $('stop-unlisted').checked)) body.unlisted = true;
    try {
      const { data } = await api('POST', path, body);
      const what = data.stop.tool ? 'Tool ' + data.stop.tool + ' on ' + data.stop.server : 'Server ' + data.stop.server;
      const by = S.refresh > 0 ? ' on every instance by ' + when(Date.parse(data.stop.at) + S.refresh * 1000) : ' on every instance at once';
      say(what + (on ? ' stopped' : ' resumed') + ': in force' + by + '.');
      if (!stored) { // the form is done: one stray click must not stop it again
        $('stop-tool').value = '';
        $('stop-reason').value = '';
        $('stop-unlisted').checked = false;
      }
      S.seen.stops = '';
      await loadStops();
    } catch (e) {
      if (tool && !stored && e.code === 'not_found' && e.field === 'tool') {
        fail('Server ' + server + ' lists no tool "' + tool + '". Check the name; if it is a tool the server will list later, tick "Not listed yet" and press ' + (on ? 'Stop' : 'Resume') + ' again.');
      } else fail(e);
    }
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
    if (isNaN(from) || isNaN(to)) throw new Error('From and To must both be times (UTC): fill them in or clear them for the last hour.');
    if (from >= to) throw new Error('From must be before To: ' + when(from) + ' is not before ' + when(to) + '.');
    const f = { outcome: $('audit-outcome').value, code: $('audit-code').value.trim(), tool: $('audit-tool').value.trim(), caller: $('audit-caller').value.trim() };
    if (f.code && !/^-?[0-9]{1,6}$/.test(f.code)) {
      throw new Error('Code must be a JSON-RPC error code, a whole number such as -32062 (0 for allowed calls); "' + f.code + '" is not one. Clear it to see every code.');
    }
    const recs = await auditRecords(from, to);
    const keep = recs.list.filter((r) => (!f.outcome || (isCall(r) ? meaning(r) : 'event') === f.outcome) && (!f.code || String(r.code) === String(Number(f.code))) &&
      (!f.tool || r.tool === f.tool) && (!f.caller || r.caller === f.caller));
    const calls = keep.filter(isCall);
    const by = {};
    for (const r of calls) by[meaning(r)] = (by[meaning(r)] || 0) + 1;
    const parts = MEANINGS.filter((m) => by[m]).map((m) => by[m] + ' ' + m);
    $('audit-summary').textContent = keep.length + ' of ' + recs.list.length + ' records from ' + when(from) + ' to ' + when(to) + ': ' +
      calls.length + ' calls' + (parts.length ? ' (' + parts.join(', ') + ')' : '') + ' and ' + (keep.length - calls.length) + ' approval or admin events' +
      (recs.cut ? '; the first ' + recs.list.length + ' only: narrow the range to see the rest' : '') + '.';
    if (keep.length === 0 && recs.list.length > 0) {
      $('audit-summary').textContent += ' No record matches the filter: ' + Object.entries(f).filter(([, v]) => v).map(([k, v]) => k + ' ' + v).join(', ') + '.';
    }
    chart($('audit-chart'), $('audit-legend'), 'audit-svg', calls, from.getTime(), to.getTime(), { w: 720, h: 200, n: 60, fit: true });
    const shownRecs = keep.slice().reverse().slice(0, 500);
    fill($('audit-table'), shownRecs.map((r) => el('tr', { class: 'rec', 'data-outcome': r.outcome, 'data-method': r.method, 'data-tool': r.tool || '', 'data-meaning': isCall(r) ? meaning(r) : 'event' },
      el('td', {}, stamp(r.time)), el('td', {}, isCall(r) ? badge(meaning(r)) : 'event: ' + r.outcome), el('td', { class: 'code' }, String(r.code)), el('td', {}, r.word || ''),
      el('td', {}, r.method), el('td', {}, r.server || ''), el('td', {}, r.tool || ''), el('td', {}, r.caller),
      el('td', { class: 'detail' }, r.detail || ''), el('td', { class: 'code' }, r.correlation_id))));
  }

  // auditRecords reads every record of the tenant from from to to, at
  // most MAX_RECORDS (cut: there were more).
  async function auditRecords(from, to) {
    let list = [], cursor = '', cut = false;
    do {
      const q = 'from=' + enc(from.toISOString()) + '&to=' + enc(to.toISOString()) + '&limit=1000' + (cursor ? '&cursor=' + enc(cursor) : '');
      const { data } = await api('GET', 'tenants/' + enc(S.tenant) + '/audit?' + q);
      list = list.concat(data.records);
      cursor = data.next_cursor || '';
      if (list.length >= MAX_RECORDS && cursor) { cut = true; break; }
    } while (cursor);
    return { list, cut };
  }

  // chart draws calls (records that are calls) by meaning over time as
  // stacked bars, in box and its legend in legend. The audit's (fit) has
  // 60 slices from the first call (or from) to the last (or to), so that
  // a burst in a long range is not squeezed into one bar, a slice at
  // least a second; the overview's has o.n fixed slices of from..to.
  function chart(box, legend, id, calls, from, to, o) {
    const W = o.w, H = o.h, L = 40, B = 24, N = o.n;
    if (o.fit && calls.length > 0) {
      const ts = calls.map((r) => Date.parse(r.time));
      from = Math.max(from, Math.floor(Math.min(...ts) / 1000) * 1000);
      to = Math.min(to, Math.ceil((Math.max(...ts) + 1) / 1000) * 1000);
    }
    const step = o.fit ? Math.max(1000, (to - from) / N) : (to - from) / N;
    const series = new Map(MEANINGS.map((m) => [m, new Array(N).fill(0)]));
    for (const r of calls) {
      const b = Math.min(N - 1, Math.max(0, Math.floor((Date.parse(r.time) - from) / step)));
      series.get(meaning(r))[b]++;
    }
    const keys = MEANINGS.filter((m) => series.get(m).some((c) => c > 0));
    let max = 1;
    for (let b = 0; b < N; b++) { let s = 0; for (const k of keys) s += series.get(k)[b]; max = Math.max(max, s); }
    const bw = (W - L) / N, plotH = H - B;
    const g = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'Calls by meaning from ' + when(from) + ' to ' + when(to), id, class: 'chart' });
    g.append(svg('line', { x1: L, y1: plotH, x2: W, y2: plotH, class: 'axis' }), svg('line', { x1: L, y1: 0, x2: L, y2: plotH, class: 'axis' }),
      svg('text', { x: L - 4, y: 10, 'text-anchor': 'end', 'font-size': 10 }, String(max)), svg('text', { x: L - 4, y: plotH, 'text-anchor': 'end', 'font-size': 10 }, '0'),
      svg('text', { x: L, y: H - 6, 'font-size': 10 }, when(from).slice(o.fit ? 0 : 11)),
      svg('text', { x: W, y: H - 6, 'font-size': 10, 'text-anchor': 'end' }, when(to).slice(o.fit ? 0 : 11)));
    for (let b = 0; b < N; b++) {
      let y = plotH;
      for (const k of keys) {
        const c = series.get(k)[b];
        if (!c) continue;
        const h = (c / max) * (plotH - 4);
        y -= h;
        g.append(svg('rect', { x: L + b * bw + 1, y, width: Math.max(1, bw - 2), height: h, class: 'bar m-' + k, 'data-series': k },
          svg('title', {}, k + ': ' + c + ' from ' + when(from + b * step))));
      }
    }
    box.replaceChildren(g);
    legend.replaceChildren(...keys.map((k) => el('li', { 'data-series': k },
      el('span', { class: 'swatch m-' + k, 'aria-hidden': 'true' }), k + ': ' + series.get(k).reduce((a, b) => a + b, 0))));
    if (keys.length === 0) legend.append(el('li', {}, 'no calls'));
  }

  // Overview: the tenant's last 15 minutes at a glance.
  // The audit part is read again every AUDIT_EVERY_MS only (up to ten
  // pages of records: on DynamoDB a query each), the rest at every poll.
  const OVERVIEW_MS = 15 * 60 * 1000, AUDIT_EVERY_MS = 10000;
  async function loadOverview() {
    if (!S.tenant) return;
    const t = enc(S.tenant);
    const fresh = S.ov && S.ov.tenant === S.tenant && Date.now() - S.ov.at < AUDIT_EVERY_MS;
    const at = fresh ? S.ov.at : Date.now();
    const [recs, up, appr, stops] = await Promise.all([
      fresh ? S.ov.recs : auditRecords(new Date(at - OVERVIEW_MS), new Date(at + 1000)),
      api('GET', 'tenants/' + t + '/upstreams'), api('GET', 'approvals?status=pending'), api('GET', 'tenants/' + t + '/stops')]);
    S.ov = { tenant: S.tenant, at, recs };
    const now = at;
    const calls = recs.list.filter(isCall);
    const lastMin = calls.filter((r) => Date.parse(r.time) > now - 60000).length;
    $('ov-rate').textContent = String(lastMin);
    $('ov-rate').setAttribute('data-count', String(lastMin));
    $('ov-total').textContent = String(calls.length) + (recs.cut ? '+' : '');
    $('ov-total').setAttribute('data-count', String(calls.length));
    chart($('ov-chart'), $('ov-legend'), 'ov-svg', calls, now - OVERVIEW_MS, now, { w: 400, h: 140, n: 15 }); // a bar a minute
    const words = new Map();
    for (const r of calls) {
      const m = meaning(r);
      if ((m === 'refused' || m === 'held') && r.word) words.set(r.word, (words.get(r.word) || 0) + 1);
    }
    const ws = [...words.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    $('ov-words').replaceChildren(...ws.map(([w, n]) => el('li', { 'data-word': w, 'data-count': String(n) },
      el('span', { class: 'swatch m-' + (w === 'APPROVAL_REQUIRED' ? 'held' : 'refused'), 'aria-hidden': 'true' }), w + ': ' + n)));
    if (ws.length === 0) $('ov-words').append(el('li', {}, 'No refusal in 15 minutes.'));
    $('ov-upstreams').replaceChildren(...up.data.upstreams.map((u) => el('li', { 'data-server': u.server, 'data-circuit': u.circuit },
      el('span', { class: 'badge c-' + u.circuit }, u.circuit), ' ' + u.server + ': ' + u.in_flight + ' in flight' + (u.failures ? ', ' + u.failures + ' consecutive failures' : ''))));
    if (up.data.upstreams.length === 0) $('ov-upstreams').append(el('li', {}, 'No server.'));
    const pend = appr.data.approvals.filter((a) => a.tenant === S.tenant);
    $('ov-approvals').setAttribute('data-count', String(pend.length));
    $('ov-approvals').replaceChildren(pend.length === 0 ? 'No call waits for approval.' : el('span', {},
      el('span', { class: 'badge m-held' }, String(pend.length)), ' waiting; the oldest held ', stamp(pend[0].created), '.'));
    $('ov-stops').replaceChildren(...stops.data.stops.map((s) => el('li', { 'data-server': s.server, 'data-tool': s.tool || '' },
      (s.tool ? s.tool + ' on ' + s.server : 'server ' + s.server + ' (every tool)') + (s.reason ? ': ' + s.reason : '') + ', since ', stamp(s.at))));
    if (stops.data.stops.length === 0) $('ov-stops').append(el('li', {}, 'Nothing is stopped.'));
    $('overview-updated').textContent = 'Updated ' + when(new Date()) + '.';
  }

  // Tenants, servers and keys.
  async function loadRegistry() {
    const ts = await api('GET', 'tenants');
    fill($('tenants-table'), ts.data.tenants.map((t) => el('tr', {},
      el('td', {}, t.id), el('td', {}, t.tier || ''), el('td', {}, t.refusal_shape || 'error'), el('td', {}, t.webhook_url ? 'yes' : 'no'), el('td', {}, stamp(t.created)))));
    if (!S.tenant) return;
    const t = enc(S.tenant);
    const [srv, keys] = await Promise.all([api('GET', 'tenants/' + t + '/servers'), api('GET', 'tenants/' + t + '/keys')]);
    fill($('servers-table'), srv.data.servers.map((s) => el('tr', {},
      el('td', {}, s.name), el('td', { class: 'code' }, s.url), el('td', {}, s.credential ? s.credential.header : '-'),
      el('td', {}, Object.entries(s.tools || {}).filter(([, v]) => v.requires_approval).map(([k]) => k).join(', ') || '-'))));
    fill($('keys-table'), keys.data.keys.map((k) => el('tr', {},
      el('td', { class: 'code' }, k.id), el('td', {}, k.caller), el('td', {}, stamp(k.created)), el('td', {}, k.revoked ? 'yes' : 'no'),
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
    fill($('upstreams-table'), data.upstreams.map((u) => el('tr', { 'data-server': u.server },
      el('td', {}, u.server), el('td', { class: 'circuit' }, u.circuit), el('td', {}, String(u.failures)),
      el('td', {}, u.open_until ? stamp(u.open_until) : '-'), el('td', {}, u.probing ? 'a probe call is running' : '-'), el('td', { class: 'inflight' }, String(u.in_flight)))));
  }

  // Pins.
  async function loadPins() {
    if (!S.tenant) return;
    const { data } = await api('GET', 'tenants/' + enc(S.tenant) + '/pins');
    const defButton = (p) => (p.current_def ? el('button', { type: 'button', 'aria-label': 'Show the definition of ' + p.tool + ' now', onclick: () => showDef(p) }, 'Show definition') : null);
    fill($('pins-table'), data.pins.map((p) => el('tr', {},
      el('td', {}, p.server), el('td', {}, p.tool), el('td', { class: 'code' }, short(p.hash)), el('td', {}, p.listed ? 'yes' : 'no'),
      el('td', {}, p.changed ? 'CHANGED' : 'no'), el('td', { class: 'code' }, short(p.current)), el('td', {}, p.by || ''),
      el('td', {}, defButton(p), p.changed ? el('button', { type: 'button', 'aria-label': 'Pin ' + p.tool + ' as listed now', onclick: () => pin(p, true) }, 'Pin as listed now') : null,
        el('button', { type: 'button', 'aria-label': 'Unpin ' + p.tool, onclick: () => pin(p, false) }, 'Unpin')))));
    fill($('unpinned-table'), data.unpinned.map((p) => el('tr', {},
      el('td', {}, p.server), el('td', {}, p.tool), el('td', { class: 'code' }, short(p.current)),
      el('td', {}, defButton(p), el('button', { type: 'button', 'aria-label': 'Pin ' + p.tool, onclick: () => pin(p, true) }, 'Pin')))));
    emptyRow($('pins-table').tBodies[0], 8, 'No pin yet: tools are pinned the first time the gateway lists them.');
    emptyRow($('unpinned-table').tBodies[0], 4, 'Every listed tool is pinned.');
  }

  // short is a hash's first 12 hex digits after its kind, the whole in its
  // title (select it there to copy).
  function short(h) {
    if (!h) return '-';
    const i = h.lastIndexOf(':');
    return el('abbr', { title: h }, h.slice(0, i + 1 + 12) + '…');
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

  // Connections: callers' OAuth grants to servers with auth: oauth (never
  // their tokens), filtered here by caller and server, at most
  // MAX_CONN_ROWS rows drawn; a revocation is confirmed in a dialog first.
  const MAX_CONN_ROWS = 500;
  const STATES = ['connected', 'expired', 'broken'];
  async function loadConnections() {
    if (!S.tenant) return;
    const { data, text } = await api('GET', 'tenants/' + enc(S.tenant) + '/connections');
    if (!changed('connections', text)) return;
    S.conns = data.connections;
    drawConnections();
  }

  function drawConnections() {
    const all = S.conns || [];
    const sel = $('conn-server'), keep = sel.value;
    const servers = [...new Set(all.map((c) => c.server))].sort();
    if (keep && servers.indexOf(keep) < 0) servers.push(keep);
    sel.replaceChildren(el('option', { value: '' }, 'any'), ...servers.map((v) => el('option', { value: v }, v)));
    sel.value = keep;
    const who = $('conn-caller').value.trim();
    const match = all.filter((c) => (!who || c.caller.indexOf(who) >= 0) && (!keep || c.server === keep));
    const rows = match.slice(0, MAX_CONN_ROWS);
    fill($('conn-table'), rows.map((c) => {
      const st = STATES.indexOf(c.state) >= 0 ? c.state : 'broken';
      return el('tr', { 'data-id': c.id, 'data-caller': c.caller, 'data-server': c.server, 'data-state': st },
        el('td', {}, c.caller), el('td', {}, c.server), el('td', { class: 'state' }, el('span', { class: 'badge s-' + st }, c.state)),
        el('td', {}, stamp(c.created)), el('td', {}, stamp(c.updated)), el('td', {}, c.expires ? stamp(c.expires) : 'not said'),
        el('td', { class: 'code' }, c.issuer), el('td', {}, c.scope || ''), el('td', { class: 'code' }, c.id),
        el('td', {}, el('button', { type: 'button', class: 'revoke', 'aria-label': 'Revoke the connection of ' + c.caller + ' to ' + c.server, onclick: () => askRevoke(c) }, 'Revoke')));
    }));
    emptyRow($('conn-table').tBodies[0], 10, all.length === 0 ? 'No connection: a caller connects by opening the link a call to a server with auth: oauth answers.' : 'No connection matches the filter.');
    $('conn-summary').textContent = shown(all.length + ' connections; ' + match.length + ' match the filter' +
      (match.length > rows.length ? '; the first ' + rows.length + ' are shown: narrow the filter to see the rest' : '') + '.');
  }

  // askRevoke opens the confirmation of c's revocation; the focus starts
  // on Cancel, the choice that changes nothing.
  function askRevoke(c) {
    S.revoking = c;
    $('conn-dialog-text').textContent = shown('Revoke the connection of ' + c.caller + ' to ' + c.server + ' (issuer ' + c.issuer +
      ')? Its token is revoked at the provider where the provider allows it, and the connection is deleted here; ' + c.caller +
      ' gets a new link at their next call to ' + c.server + '.');
    $('conn-dialog').showModal();
    $('conn-revoke-cancel').focus();
  }

  async function revokeConnection() {
    const c = S.revoking;
    $('conn-dialog').close();
    if (!c) return;
    S.revoking = null;
    clearError();
    try {
      const { data } = await api('POST', 'tenants/' + enc(S.tenant) + '/connections/' + enc(c.id) + '/revoke');
      say('Revoked the connection of ' + data.caller + ' to ' + data.server + (data.revoked_at_provider
        ? ': revoked at the provider and deleted here.'
        : ': deleted here; the provider did not revoke it (it has no revocation endpoint, or refused).'));
      S.seen.connections = '';
      await loadConnections();
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
    $('whoami').replaceChildren('signed in as ' + si.principal + ' until ', stamp(si.expires));
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
      S.leaving = true;
      await fetch('/admin/console/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-CSRF-Token': S.csrf } });
      location.assign('/admin/console/?notice=logged-out');
    });
    $('stop-form').addEventListener('submit', (ev) => { ev.preventDefault(); stopOrResume(true, $('stop-server').value, $('stop-tool').value.trim(), false); });
    $('resume-do').addEventListener('click', () => stopOrResume(false, $('stop-server').value, $('stop-tool').value.trim(), false));
    $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); clearError(); load('audit'); });
    $('key-form').addEventListener('submit', (ev) => { ev.preventDefault(); createKey(); });
    $('conn-form').addEventListener('submit', (ev) => ev.preventDefault());
    $('conn-caller').addEventListener('input', drawConnections);
    $('conn-server').addEventListener('change', drawConnections);
    $('conn-revoke-do').addEventListener('click', revokeConnection);
    $('conn-revoke-cancel').addEventListener('click', () => $('conn-dialog').close());
    $('key-hide').addEventListener('click', () => { $('key-secret').value = ''; $('key-new').hidden = true; $('key-caller').focus(); });
    window.addEventListener('hashchange', () => route(true));
    route(false);
    // Pages that change on their own are polled.
    setInterval(() => { if (['overview', 'approvals', 'stops', 'upstreams', 'connections'].indexOf(S.page) >= 0) load(S.page); }, 2000);
    setInterval(tick, 10000);
    document.body.setAttribute('data-ready', 'true');
  }

  document.addEventListener('DOMContentLoaded', () => { start().catch(fail); });
})();
