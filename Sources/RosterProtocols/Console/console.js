// Roster's web console: the EmployeeDirectory app as a page, in plain JavaScript over the
// server's Connect protocol (JSON). No build step and no dependencies: unary calls are one
// fetch each; streams (GetPicture, WatchChanges) read Connect's envelopes from the response
// body as they arrive.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const PAGE_SIZE = 30;
  let token = sessionStorage.getItem('roster-token') || '';

  // --- The Connect protocol ------------------------------------------------------------------

  class RPCError extends Error {
    constructor(code, message, status) {
      super(message || code);
      this.code = code;
      this.status = status;
    }
  }

  function headers(contentType) {
    const result = { 'content-type': contentType };
    // With a token, the server records its holder as the author of a change; without one
    // (a server that takes no tokens), the console names itself.
    if (token) result.authorization = 'Bearer ' + token;
    else result['x-roster-author'] = 'web console';
    return result;
  }

  async function errorOf(response) {
    let body = { code: 'unknown', message: response.statusText };
    try {
      body = await response.json();
    } catch (_) {
      // Not JSON: keep the status text.
    }
    return new RPCError(body.code, body.message, response.status);
  }

  /** One unary call: the request message as JSON, the reply message parsed. */
  async function unary(method, message, signal) {
    const response = await fetch('/' + method, {
      method: 'POST',
      headers: headers('application/json'),
      body: JSON.stringify(message),
      signal,
    });
    if (!response.ok) throw await errorOf(response);
    return response.json();
  }

  function envelope(message) {
    const bytes = new TextEncoder().encode(JSON.stringify(message));
    const framed = new Uint8Array(5 + bytes.length);
    new DataView(framed.buffer).setUint32(1, bytes.length);
    framed.set(bytes, 5);
    return framed;
  }

  /** A server stream: yields each reply message as its envelope arrives. */
  async function* serverStream(method, message, signal) {
    const response = await fetch('/' + method, {
      method: 'POST',
      headers: headers('application/connect+json'),
      body: envelope(message),
      signal,
    });
    if (!response.ok) throw await errorOf(response);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = new Uint8Array(0);
    for (;;) {
      while (buffer.length >= 5) {
        const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
        const flags = view.getUint8(0);
        const length = view.getUint32(1);
        if (buffer.length < 5 + length) break;
        const payload = JSON.parse(decoder.decode(buffer.subarray(5, 5 + length)));
        buffer = buffer.subarray(5 + length);
        if (flags & 2) {
          if (payload.error) throw new RPCError(payload.error.code, payload.error.message, response.status);
          return;
        }
        yield payload;
      }
      const { value, done } = await reader.read();
      if (done) throw new RPCError('unavailable', 'the stream ended without its end message');
      const joined = new Uint8Array(buffer.length + value.length);
      joined.set(buffer);
      joined.set(value, buffer.length);
      buffer = joined;
    }
  }

  // --- Tokens --------------------------------------------------------------------------------

  let tokenPrompt = null;

  /** Shows the token dialog once, however many calls were refused; true if a token was given. */
  function askForToken() {
    if (tokenPrompt) return tokenPrompt;
    tokenPrompt = new Promise((resolve) => {
      const dialog = $('token-dialog');
      const input = $('token-input');
      input.value = token;
      const finish = (given) => {
        dialog.close();
        tokenPrompt = null;
        resolve(given);
      };
      $('token-form').onsubmit = (event) => {
        event.preventDefault();
        token = input.value.trim();
        sessionStorage.setItem('roster-token', token);
        finish(true);
      };
      $('token-cancel').onclick = () => finish(false);
      dialog.oncancel = () => finish(false);
      dialog.showModal();
      input.focus();
    });
    return tokenPrompt;
  }

  // --- Sign-in with the company's provider (OpenID Connect, authorization code with PKCE) -----

  /** What the server says of sign-in through the provider: `{}` when it offers none. */
  const consoleConfig = () => fetch('/console-config.json').then((reply) => reply.json());

  /** The provider's settings: the server's, and the provider's discovery document. */
  async function providerSettings() {
    const settings = await consoleConfig();
    const discovery = await fetch(settings.issuer.replace(/\/$/, '') + '/.well-known/openid-configuration');
    if (!discovery.ok) throw new Error(`the provider's discovery answered ${discovery.status}`);
    return { ...settings, ...(await discovery.json()) };
  }

  const base64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

  /** Leaves for the provider's sign-in page; it sends the browser back here with a code. */
  async function startProviderSignIn() {
    const settings = await providerSettings();
    const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
    const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
    const challenge = base64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
    sessionStorage.setItem('roster-sign-in', JSON.stringify({ verifier, state }));
    const url = new URL(settings.authorization_endpoint);
    url.search = new URLSearchParams({
      response_type: 'code', client_id: settings.clientId, redirect_uri: location.origin + '/',
      scope: settings.scope, state, code_challenge: challenge, code_challenge_method: 'S256',
    }).toString();
    location.assign(url.toString());
  }

  /** Back from the provider with a code: trades it for an access token, the console's token. */
  async function finishProviderSignIn() {
    const params = new URLSearchParams(location.search);
    if (!params.has('code') && !params.has('error')) return;
    const started = JSON.parse(sessionStorage.getItem('roster-sign-in') || 'null');
    sessionStorage.removeItem('roster-sign-in');
    history.replaceState(null, '', location.pathname);
    if (params.has('error')) throw new Error(`the provider refused: ${params.get('error')}`);
    if (!started || params.get('state') !== started.state) throw new Error('the sign-in was not started here');
    const settings = await providerSettings();
    const reply = await fetch(settings.token_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code', code: params.get('code'), redirect_uri: location.origin + '/',
        client_id: settings.clientId, code_verifier: started.verifier,
      }),
    });
    if (!reply.ok) throw new Error(`the provider's token endpoint answered ${reply.status}`);
    token = (await reply.json()).access_token || '';
    sessionStorage.setItem('roster-token', token);
  }

  /** Runs `call`, asking for a token and trying once more if the server wants one. */
  async function authorized(call) {
    try {
      return await call();
    } catch (error) {
      if (error.code === 'unauthenticated' && (await askForToken())) return call();
      throw error;
    }
  }

  function say(text, isError) {
    const status = $('status');
    status.textContent = text;
    status.className = isError ? 'error' : '';
  }

  function failed(what, error) {
    if (error.name === 'AbortError') return;
    say(`${what}: ${error.message} (${error.code || 'error'})`, true);
  }

  // --- Search and pages ------------------------------------------------------------------------

  const search = { nextPageToken: '', loading: false, controller: null, shown: 0, generation: 0 };

  function employeeRow(employee) {
    const item = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.dataset.guid = employee.guid;
    if (employee.thumbnail) {
      const image = document.createElement('img');
      image.src = 'data:image/jpeg;base64,' + employee.thumbnail;
      image.alt = '';
      button.append(image);
    } else {
      const blank = document.createElement('span');
      blank.className = 'no-picture';
      button.append(blank);
    }
    const text = document.createElement('span');
    const name = document.createElement('span');
    name.className = 'employee-name';
    name.textContent = employee.name || '(no name)';
    const department = document.createElement('span');
    department.className = 'department';
    department.textContent = employee.department ? ' · ' + employee.department : '';
    text.append(name, department);
    button.append(text);
    button.addEventListener('click', () => openEmployee(employee.guid, button));
    item.append(button);
    return item;
  }

  /** The first page of a new search (reset), or the next page of the current one. */
  async function loadPage(reset) {
    if (reset) {
      search.controller?.abort();
      search.generation += 1;
      search.nextPageToken = '';
      search.shown = 0;
      search.loading = false;
    } else if (search.loading || !search.nextPageToken) {
      return;
    }
    const generation = search.generation;
    const controller = new AbortController();
    search.controller = controller;
    search.loading = true;
    const request = {
      pageSize: PAGE_SIZE,
      readMask: 'guid,name,department,thumbnail',
      nameContains: $('search').value.trim(),
      department: $('department-filter').value,
      pageToken: search.nextPageToken,
    };
    try {
      const page = await authorized(() => unary('roster.v1.Directory/ListEmployees', request, controller.signal));
      if (generation !== search.generation) return;
      const results = $('results');
      if (reset) results.replaceChildren();
      for (const employee of page.employees || []) results.append(employeeRow(employee));
      search.shown += (page.employees || []).length;
      search.nextPageToken = page.nextPageToken || '';
      $('result-count').textContent =
        search.shown === 0 ? 'No employees match.' :
        `${search.shown} employees shown${search.nextPageToken ? '; scroll for more' : ''}.`;
      say('');
    } catch (error) {
      failed('Search', error);
    } finally {
      if (generation === search.generation) search.loading = false;
    }
    fillIfShort();
  }

  /** Loads more while the list does not fill its box, so scrolling can reach the next page. */
  function fillIfShort() {
    const results = $('results');
    if (search.nextPageToken && results.scrollHeight <= results.clientHeight) loadPage(false);
  }

  let typing = null;
  function searchSoon() {
    clearTimeout(typing);
    typing = setTimeout(() => loadPage(true), 120);
  }

  // --- An employee's card --------------------------------------------------------------------

  const FIELDS = [
    ['email', 'E-mail'], ['phone', 'Phone'], ['address', 'Address'], ['startDate', 'Started'],
    ['vacationDays', 'Vacation days'], ['active', 'Active'], ['salesCount', 'Sales'], ['about', 'About'],
  ];
  let current = null;
  let pictureURL = null;

  async function openEmployee(guid, from) {
    document.querySelectorAll('#results button[aria-current]').forEach((b) => b.removeAttribute('aria-current'));
    from?.setAttribute('aria-current', 'true');
    try {
      const employee = await authorized(() => unary('roster.v1.Directory/GetEmployee', { guid }));
      showEmployee(employee);
    } catch (error) {
      failed('Opening the employee', error);
    }
  }

  function showEmployee(employee) {
    const same = current?.guid === employee.guid;
    current = employee;
    $('card').hidden = false;
    $('card-name').textContent = employee.name || '';
    $('card-department').textContent = employee.department || '';
    const thumbnail = $('card-thumbnail');
    thumbnail.hidden = !employee.thumbnail;
    if (employee.thumbnail) {
      thumbnail.src = 'data:image/jpeg;base64,' + employee.thumbnail;
      thumbnail.alt = 'Thumbnail of ' + (employee.name || 'the employee');
    }
    const fields = $('card-fields');
    fields.replaceChildren();
    for (const [key, label] of FIELDS) {
      if (employee[key] === undefined) continue;
      const term = document.createElement('dt');
      term.textContent = label;
      const value = document.createElement('dd');
      value.textContent = typeof employee[key] === 'boolean' ? (employee[key] ? 'yes' : 'no') : String(employee[key]);
      fields.append(term, value);
    }
    if (!same) $('picture').hidden = true;
    $('picture-button').hidden = !employee.hasPicture;
    const form = $('edit-form');
    form.elements.name.value = employee.name || '';
    form.elements.department.value = employee.department || '';
    form.elements.email.value = employee.email || '';
    form.elements.phone.value = employee.phone || '';
    form.elements.vacation_days.value = employee.vacationDays ?? 0;
    form.elements.active.checked = employee.active !== false;
    $('edit-status').textContent = '';
    $('card-title').focus?.();
  }

  /** The full picture, fetched on demand: GetPicture's chunks, streamed, then shown. */
  async function showPicture() {
    if (!current) return;
    const button = $('picture-button');
    button.disabled = true;
    try {
      const chunks = [];
      let type = 'image/jpeg';
      let size = 0;
      for await (const part of serverStream('roster.v1.Pictures/GetPicture', { guid: current.guid })) {
        if (part.contentType) type = part.contentType;
        if (part.width) size = `${part.width} × ${part.height}`;
        const bytes = Uint8Array.from(atob(part.data || ''), (c) => c.charCodeAt(0));
        chunks.push(bytes);
      }
      if (pictureURL) URL.revokeObjectURL(pictureURL);
      pictureURL = URL.createObjectURL(new Blob(chunks, { type }));
      $('picture-image').src = pictureURL;
      $('picture-image').alt = 'Picture of ' + (current.name || 'the employee');
      $('picture-caption').textContent = `${size} · ${chunks.reduce((n, c) => n + c.length, 0)} bytes`;
      $('picture').hidden = false;
    } catch (error) {
      failed('The picture', error);
    } finally {
      button.disabled = false;
    }
  }

  /** Saves the fields that changed, with an update mask naming them. */
  async function saveEmployee(event) {
    event.preventDefault();
    if (!current) return;
    const form = event.target;
    const edited = {
      name: form.elements.name.value.trim(),
      department: form.elements.department.value.trim(),
      email: form.elements.email.value.trim(),
      phone: form.elements.phone.value.trim(),
      vacationDays: Number(form.elements.vacation_days.value),
      active: form.elements.active.checked,
    };
    const changed = Object.keys(edited).filter((key) => edited[key] !== (current[key] ?? (key === 'active' ? true : key === 'vacationDays' ? 0 : '')));
    if (changed.length === 0) {
      $('edit-status').textContent = 'Nothing changed.';
      return;
    }
    const employee = { guid: current.guid };
    for (const key of changed) employee[key] = edited[key];
    try {
      const saved = await authorized(() =>
        unary('roster.v1.Directory/UpdateEmployee', { employee, updateMask: changed.join(',') }));
      showEmployee({ ...current, ...saved, thumbnail: current.thumbnail });
      $('edit-status').textContent = `Saved: ${changed.join(', ')}.`;
      const row = document.querySelector(`#results button[data-guid="${current.guid}"] .employee-name`);
      if (row) row.textContent = saved.name;
    } catch (error) {
      $('edit-status').textContent = `Not saved: ${error.message}`;
    }
  }

  // --- Departments ---------------------------------------------------------------------------

  async function loadDepartments() {
    try {
      const reply = await authorized(() => unary('roster.v1.Analytics/DepartmentHeadcounts', {}));
      const rows = $('department-rows');
      const filter = $('department-filter');
      rows.replaceChildren();
      for (const department of reply.departments || []) {
        const row = document.createElement('tr');
        const name = document.createElement('td');
        const button = document.createElement('button');
        button.type = 'button';
        button.textContent = department.department;
        button.addEventListener('click', () => summarize(department.department));
        name.append(button);
        const headcount = document.createElement('td');
        headcount.className = 'number';
        headcount.textContent = department.headcount || '0';
        const active = document.createElement('td');
        active.className = 'number';
        active.textContent = department.activeCount || '0';
        row.append(name, headcount, active);
        rows.append(row);
        const option = document.createElement('option');
        option.value = option.textContent = department.department;
        filter.append(option);
      }
    } catch (error) {
      failed('Departments', error);
    }
  }

  async function summarize(department) {
    try {
      const summary = await authorized(() => unary('roster.v1.Analytics/DepartmentSummary', { department }));
      $('department-summary').textContent =
        `${department}: ${summary.total || 0} employees, ${summary.active || 0} active` +
        // Vacation days are personal: absent for a caller who may not see them.
        ('vacationDaysAvg' in summary ? `, ${Number(summary.vacationDaysAvg).toFixed(1)} vacation days on average.` : '.');
    } catch (error) {
      failed('Department summary', error);
    }
  }

  // --- The sales calendar: year, then month, then day, each level loaded when opened ----------

  const money = (cents) => (Number(cents || 0) / 100).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

  function disclosure(label, onOpen) {
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = label;
    details.append(summary);
    let loaded = false;
    details.addEventListener('toggle', () => {
      if (details.open && !loaded) {
        loaded = true;
        onOpen(details);
      }
    });
    return details;
  }

  // A bar chart as inline SVG, one bar per entry ({ label, value, title }), each bar's numbers
  // in its <title>, which browsers show on hover and screen readers read.
  function barChart(name, bars) {
    const svgNS = 'http://www.w3.org/2000/svg';
    const width = 600, height = 160, gap = 2, axis = 18;
    const svg = document.createElementNS(svgNS, 'svg');
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', name);
    svg.classList.add('chart');
    const top = Math.max(1, ...bars.map((bar) => bar.value));
    const step = width / Math.max(1, bars.length);
    bars.forEach((bar, index) => {
      const group = document.createElementNS(svgNS, 'g');
      const rect = document.createElementNS(svgNS, 'rect');
      const barHeight = Math.round((bar.value / top) * (height - axis - 4));
      rect.setAttribute('x', String(index * step + gap / 2));
      rect.setAttribute('y', String(height - axis - barHeight));
      rect.setAttribute('width', String(Math.max(1, step - gap)));
      rect.setAttribute('height', String(barHeight));
      const title = document.createElementNS(svgNS, 'title');
      title.textContent = bar.title;
      rect.append(title);
      const text = document.createElementNS(svgNS, 'text');
      text.setAttribute('x', String(index * step + step / 2));
      text.setAttribute('y', String(height - 4));
      text.setAttribute('text-anchor', 'middle');
      text.textContent = bar.label;
      group.append(rect, text);
      svg.append(group);
    });
    return svg;
  }

  async function loadCalendar() {
    try {
      const reply = await authorized(() => unary('roster.v1.Analytics/SalesCalendar', {}));
      const years = $('calendar-years');
      years.replaceChildren();
      if (!(reply.years || []).length) years.textContent = 'No sales recorded.';
      // Newest first.
      for (const year of (reply.years || []).slice().reverse()) {
        years.append(disclosure(`${year.year}: ${year.count || 0} sales, ${money(year.amountCents)}`, (details) => {
          details.append(barChart(`Sales by month, ${year.year}`, (year.months || []).map((month) => ({
            label: MONTHS[month.month - 1].slice(0, 3),
            value: Number(month.amountCents || 0),
            title: `${MONTHS[month.month - 1]} ${year.year}: ${month.count || 0} sales, ${money(month.amountCents)}`,
          }))));
          for (const month of year.months || []) {
            details.append(disclosure(
              `${MONTHS[month.month - 1]} ${year.year}: ${month.count || 0} sales, ${money(month.amountCents)}`,
              (monthDetails) => loadDays(monthDetails, year.year, month.month)));
          }
        }));
      }
    } catch (error) {
      failed('Sales calendar', error);
    }
  }

  async function loadDays(details, year, month) {
    const list = document.createElement('ul');
    list.setAttribute('aria-label', `Days of ${MONTHS[month - 1]} ${year}`);
    details.append(list);
    try {
      const reply = await authorized(() => unary('roster.v1.Analytics/SalesCalendar', { year, month }));
      list.before(barChart(`Sales by day, ${MONTHS[month - 1]} ${year}`, (reply.days || []).map((day) => ({
        label: String(day.day),
        value: Number(day.amountCents || 0),
        title: `${MONTHS[month - 1]} ${day.day}: ${day.count || 0} sales, ${money(day.amountCents)}`,
      }))));
      for (const day of reply.days || []) {
        const item = document.createElement('li');
        item.textContent = `${MONTHS[month - 1]} ${day.day}: ${day.count || 0} sales, ${money(day.amountCents)}`;
        list.append(item);
      }
    } catch (error) {
      failed('Days', error);
    }
  }

  // --- Live changes --------------------------------------------------------------------------

  async function watchChanges() {
    const state = $('changes-state');
    let after = '';
    for (;;) {
      try {
        state.textContent = 'Watching for changes…';
        for await (const event of serverStream('roster.v1.Directory/WatchChanges', { afterToken: after })) {
          after = event.token || after;
          if (event.heartbeat) {
            state.textContent = `Watching; quiet since ${new Date().toLocaleTimeString()}.`;
            continue;
          }
          showChange(event);
        }
      } catch (error) {
        if (error.code === 'unauthenticated') {
          state.textContent = 'Changes need a token.';
          if (!(await askForToken())) return;
          continue;
        }
        if (error.code === 'out_of_range') {
          // The log no longer holds the changes after our position (pruned while we were
          // away, a bulk load logged as a gap, another database at this address): what we
          // missed cannot be replayed, so list the directory again and watch from now.
          after = '';
          showGap();
          loadPage(true);
          continue;
        }
        state.textContent = `Reconnecting (${error.message})…`;
      }
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }

  /** A line in the change list where changes were missed; the directory was listed again. */
  function showGap() {
    const item = document.createElement('li');
    item.className = 'gap';
    item.textContent = `${new Date().toLocaleTimeString()} changes missed here: listed again`;
    showItem(item);
  }

  function showChange(event) {
    const item = document.createElement('li');
    item.dataset.guid = event.guid;
    const kind = (event.kind || '').replace('CHANGE_KIND_', '').toLowerCase();
    const entity = (event.entity || '').replace('ENTITY_KIND_', '').toLowerCase();
    const when = event.updateTime ? new Date(event.updateTime).toLocaleTimeString() : '';
    const fields = event.fields?.length ? ` (${event.fields.join(', ')})` : '';
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = `${when} ${entity} ${kind}${fields} by ${event.author || 'unknown'}` +
      (event.onBehalfOf ? ` for ${event.onBehalfOf}` : '');
    button.title = event.guid;
    if (kind !== 'deleted') button.addEventListener('click', () => openEmployee(event.guid));
    item.append(button);
    showItem(item);
  }

  function showItem(item) {
    const list = $('change-list');
    list.prepend(item);
    while (list.children.length > 50) list.lastChild.remove();
  }

  // --- Wiring --------------------------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', async () => {
    try {
      await finishProviderSignIn();
      if ((await consoleConfig()).issuer) {
        $('provider-sign-in-row').hidden = false;
        $('provider-sign-in').addEventListener('click', () =>
          startProviderSignIn().catch((error) => failed('Signing in', error)));
      }
    } catch (error) {
      failed('Signing in', error);
    }
    $('search').addEventListener('input', searchSoon);
    $('department-filter').addEventListener('change', () => loadPage(true));
    $('results').addEventListener('scroll', () => {
      const results = $('results');
      if (results.scrollTop + results.clientHeight >= results.scrollHeight - 80) loadPage(false);
    });
    $('picture-button').addEventListener('click', showPicture);
    $('edit-form').addEventListener('submit', saveEmployee);
    $('token-button').addEventListener('click', async () => {
      if (await askForToken()) {
        loadPage(true);
        loadDepartments();
        loadCalendar();
      }
    });
    loadPage(true);
    loadDepartments();
    loadCalendar();
    watchChanges();
  });
})();
