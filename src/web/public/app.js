// study-helper's page: keys and provider order, upload → job → progress over SSE → notes and quizzes,
// the attempts of every call, the live breakers (SSE), the demo fault panel and the live machine diagrams.
// Plain ES module, no framework, nothing loaded from outside this service.
import { highlightState, markTransition, renderMachines } from './machines.js';
import { icon } from './icons.js';

const providerIds = ['claude', 'gpt', 'timelygpt'];
const providerLabels = { claude: 'Claude', gpt: 'GPT', timelygpt: 'TimelyGPT' };
const keyHeaders = { claude: 'x-claude-key', gpt: 'x-gpt-key', timelygpt: 'x-timelygpt-key' };
const stateLabels = { closed: 'closed', open: 'open', halfOpen: 'half-open' };
const sampleText =
  'Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs mostly blue and red light. ' +
  'The light reactions take place in the thylakoid membranes; the Calvin cycle fixes carbon dioxide in the stroma.';

/**
 * One item of GET /v1/providers as the page reads it (docs/api.md "Providers").
 * @typedef {{
 *   id: string,
 *   model: string,
 *   breaker: { state: string, forced: boolean, consecutiveFailures: number, threshold: number,
 *     minDistinctKeys: number, distinctKeys: number, retryAt: string | null },
 *   stats: { calls: number, successes: number, failures: number, ignored: number, rejected: number, opens: number },
 *   keys?: { quarantined: number, cooling: number },
 * }} ProviderStatus
 */

/** Everything the page holds. Keys live here only: never in storage, never in a URL. */
const page = {
  order: [...providerIds],
  enabled: { claude: true, gpt: true, timelygpt: true },
  keys: { claude: '', gpt: '', timelygpt: '' },
  /** What GET /v1/keys/status said of each key entered here (its owner's view): null until asked. */
  keyHealth: /** @type {Record<string, null | {state: string, errorClass?: string, until?: string}>} */ ({ claude: null, gpt: null, timelygpt: null }),
  demo: /** @type {null | {keys: Record<string,string>, rateLimitedKeys: Record<string,string>}} */ (null),
  providers: /** @type {ProviderStatus[]} */ ([]),
  faults: /** @type {Record<string, string>} */ ({}),
  jobId: /** @type {string | null} */ (null),
  jobEvents: /** @type {EventSource | null} */ (null),
  runs: 0,
  /** The uploaded document the plan is made for (its id, pages read and outline), null before an upload. */
  document: /** @type {null | {documentId: string, pagesUsed: number, outline: {title: string, page: number, level: number}[]}} */ (null),
  /** USD the running job has spent so far (the sum of its attempts' costUsd). */
  jobCost: 0,
};

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

function element(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'text') node.textContent = String(value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) node.append(child);
  return node;
}

async function readJson(response) {
  const text = await response.text();
  try {
    return text === '' ? {} : JSON.parse(text);
  } catch {
    return { error: { code: `HTTP_${response.status}`, message: text.slice(0, 200) } };
  }
}

function describeError(body, status) {
  const error = body && body.error;
  if (error && typeof error === 'object') return `${error.code ?? `HTTP ${status}`}: ${error.message ?? ''}`;
  return `HTTP ${status}`;
}

// ------------------------------------------------------------------ providers and keys

function chosenOrder() {
  return page.order.filter((id) => page.enabled[id]);
}

function keyHeadersFor() {
  const headers = {};
  for (const id of chosenOrder()) {
    const key = page.keys[id].trim();
    if (key !== '') headers[keyHeaders[id]] = key;
  }
  return headers;
}

function move(id, delta) {
  const index = page.order.indexOf(id);
  const target = index + delta;
  if (target < 0 || target >= page.order.length) return;
  page.order.splice(index, 1);
  page.order.splice(target, 0, id);
  renderProviderOrder();
  const again = document.getElementById(`move-${delta < 0 ? 'up' : 'down'}-${id}`);
  (again && !(/** @type {HTMLButtonElement} */ (again).disabled) ? again : document.getElementById(`use-${id}`))?.focus();
}

function renderProviderOrder() {
  const list = $('provider-order');
  list.replaceChildren();
  page.order.forEach((id, index) => {
    const label = providerLabels[id];
    // Icons, not arrow characters: a browser without a font that has them draws empty boxes.
    const up = element('button', { type: 'button', class: 'secondary icon-button', id: `move-up-${id}`, 'aria-label': `Move ${label} up`, disabled: index === 0 }, [icon('up')]);
    const down = element('button', { type: 'button', class: 'secondary icon-button', id: `move-down-${id}`, 'aria-label': `Move ${label} down`, disabled: index === page.order.length - 1 }, [icon('down')]);
    up.addEventListener('click', () => move(id, -1));
    down.addEventListener('click', () => move(id, 1));
    const use = element('input', { type: 'checkbox', id: `use-${id}`, checked: page.enabled[id] });
    use.addEventListener('change', () => {
      page.enabled[id] = /** @type {HTMLInputElement} */ (use).checked;
    });
    const key = element('input', { type: 'password', id: `key-${id}`, autocomplete: 'off', spellcheck: 'false', placeholder: `${label} API key`, value: page.keys[id] });
    key.addEventListener('input', () => {
      page.keys[id] = /** @type {HTMLInputElement} */ (key).value;
      setKeyHealth(id, null);
    });
    const health = element('span', { class: 'key-health', id: `key-health-${id}`, 'aria-live': 'polite' });
    list.append(
      element('li', { 'data-provider': id }, [
        element('span', { class: 'moves' }, [up, down]),
        element('label', { for: `use-${id}` }, [use, document.createTextNode(` ${index + 1}. ${label}`)]),
        element('span', { class: 'key' }, [element('label', { for: `key-${id}`, class: 'visually-hidden', text: `${label} key` }), key]),
        health,
      ]),
    );
    renderKeyHealth(id);
  });
}

function setKey(id, value) {
  page.keys[id] = value;
  const input = /** @type {HTMLInputElement | null} */ (document.getElementById(`key-${id}`));
  if (input) input.value = value;
  setKeyHealth(id, null);
}

// ------------------------------------------------------------------ key health (the owner's view)

function setKeyHealth(id, health) {
  page.keyHealth[id] = health;
  renderKeyHealth(id);
  highlightState($('machines'), 'key-health', id, health ? health.state : null);
}

/** Beside the key field: healthy, or quarantined / cooling with the class and until when calls with it are skipped. */
function renderKeyHealth(id) {
  const node = document.getElementById(`key-health-${id}`);
  if (!node) return;
  const health = page.keyHealth[id];
  node.setAttribute('data-state', health ? health.state : 'unknown');
  if (!health) {
    node.textContent = '';
    return;
  }
  const until = health.until ? new Date(health.until).toLocaleTimeString() : '';
  node.textContent =
    health.state === 'healthy' ? 'key healthy' : `key ${health.state} (${health.errorClass ?? ''}) until ${until}: skipped, no call`;
}

/** Asks GET /v1/keys/status about the keys entered here, in the same headers as a generation. */
async function refreshKeyHealth() {
  const headers = {};
  for (const id of providerIds) {
    const key = page.keys[id].trim();
    if (key !== '') headers[keyHeaders[id]] = key;
  }
  if (Object.keys(headers).length === 0) return;
  try {
    const response = await fetch('/v1/keys/status', { headers });
    if (!response.ok) return;
    const body = await readJson(response);
    for (const item of body.providers ?? []) setKeyHealth(item.provider, item);
  } catch {
    // The status is a convenience: a failed look-up leaves the last one shown.
  }
}

// ------------------------------------------------------------------ attempts

/** A call's end state in the attempt machine, for an Attempt of the API (null: none to show). */
function attemptStateOf(attempt) {
  if (attempt.outcome === 'succeeded') return ['done'];
  if (attempt.outcome === 'failed') return ['failed'];
  if (attempt.outcome === 'skipped') return [attempt.errorClass === 'circuit_open' ? 'rejected' : 'skipped'];
  if (attempt.outcome === 'aborted' || attempt.outcome === 'cancelled') return ['aborted'];
  return null;
}

function addAttempts(run, attempts) {
  const body = /** @type {HTMLTableElement} */ ($('attempts')).tBodies[0];
  const last = attempts.at(-1);
  if (last) highlightState($('machines'), 'attempt', '', attemptStateOf(last));
  for (const attempt of attempts) {
    const counted = attempt.outcome === 'failed' ? (attempt.countedByBreaker ? 'yes' : 'no') : '—';
    const outcome = attempt.outcome === 'skipped' ? `skipped (${attempt.reason ?? ''})` : `${attempt.outcome}${attempt.continuation ? ' (continued)' : ''}`;
    body.append(
      element('tr', { class: attempt.outcome, title: attempt.message ?? '' }, [
        element('td', { text: `${run}: ${attempt.task ?? ''}` }),
        element('td', { text: providerLabels[attempt.provider] ?? attempt.provider }),
        element('td', { text: outcome }),
        element('td', { text: attempt.errorClass ?? '' }),
        element('td', { text: attempt.httpStatus ?? '' }),
        element('td', { text: counted }),
        element('td', { text: attempt.retry ?? 0 }),
        element('td', { text: Math.round(attempt.durationMs ?? 0) }),
      ]),
    );
  }
}

// ------------------------------------------------------------------ upload and job

function setProgress(progress, text) {
  /** @type {HTMLProgressElement} */ ($('progress')).value = progress;
  $('progress-text').textContent = text;
  $('progress').setAttribute('aria-valuetext', text);
}

function showJobError(message) {
  const node = $('job-error');
  node.textContent = message;
  node.hidden = message === '';
}

function setRunState(state) {
  highlightState($('machines'), 'fallback', '', state);
  if (state === 'calling') highlightState($('machines'), 'attempt', '', ['calling']);
}

/** The job machine's state from the job's status and stage (docs/jobs.md). */
function setJobState(status, stage) {
  const path = status === 'running' ? (['notes', 'mcq', 'fill'].includes(stage) ? `running.${stage}` : 'running') : status;
  highlightState($('machines'), 'job', '', path);
}

async function onUpload(event) {
  event.preventDefault();
  const input = /** @type {HTMLInputElement} */ ($('upload-file'));
  const file = input.files && input.files[0];
  if (!file) {
    showJobError('Choose a PDF first.');
    input.focus();
    return;
  }
  showJobError('');
  $('results').hidden = true;
  setProgress(0, 'Uploading…');
  const button = /** @type {HTMLButtonElement} */ ($('upload-button'));
  button.disabled = true;
  try {
    const form = new FormData();
    form.append('file', file, file.name);
    const uploaded = await fetch('/v1/documents', { method: 'POST', body: form });
    const document_ = await readJson(uploaded);
    if (!uploaded.ok) {
      setProgress(0, 'Upload failed.');
      showJobError(describeError(document_, uploaded.status));
      return;
    }
    const warnings = (document_.warnings ?? []).length > 0 ? ` Warnings: ${document_.warnings.join(' ')}` : '';
    $('document-info').textContent = `${document_.fileName}: ${document_.pagesUsed} of ${document_.pageCount} pages, ${document_.wordCount} words.${warnings}`;
    setProgress(0, 'Pick the chapter or pages to study, estimate the cost, then start.');
    showPlan(document_);
  } catch (error) {
    showJobError(`The service did not answer: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    button.disabled = false;
  }
}

// ------------------------------------------------------------------ the plan: chapter or pages, estimate, budget

/**
 * The pages a bookmark covers: from its page to the page before the next bookmark at its level or above
 * (the end of the document when none follows).
 */
function chapterRange(outline, index, pagesUsed) {
  const entry = outline[index];
  const next = outline.slice(index + 1).find((other) => other.level <= entry.level && other.page > entry.page);
  return { from: entry.page, to: Math.max(entry.page, Math.min(pagesUsed, next ? next.page - 1 : pagesUsed)) };
}

function setPages(from, to) {
  /** @type {HTMLInputElement} */ ($('page-from')).value = String(from);
  /** @type {HTMLInputElement} */ ($('page-to')).value = String(to);
  $('estimate').replaceChildren();
}

/** After an upload: the document's chapters (its outline) to pick from, or a page range, then estimate and start. */
function showPlan(document_) {
  const outline = (document_.outline ?? []).filter((entry) => entry.page >= 1 && entry.page <= document_.pagesUsed);
  page.document = { documentId: document_.documentId, pagesUsed: document_.pagesUsed, outline };
  const list = $('chapter-list');
  list.replaceChildren();
  const choice = (id, title, range, level, checked) => {
    const input = element('input', { type: 'radio', name: 'chapter', id, value: `${range.from}-${range.to}`, checked });
    input.addEventListener('change', () => setPages(range.from, range.to));
    const pagesText = range.from === range.to ? `p. ${range.from}` : `pp. ${range.from}–${range.to}`;
    const label = element('label', { for: id, class: 'chapter', 'data-level': level }, [input, element('span', { text: title }), element('span', { class: 'chapter-page', text: pagesText })]);
    // Nested chapters indented by their level, through CSSOM (the page's CSP allows no inline style attribute).
    label.style.paddingLeft = `${(level - 1) * 1.25}rem`;
    return label;
  };
  list.append(choice('chapter-all', 'The whole document', { from: 1, to: document_.pagesUsed }, 1, true));
  outline.forEach((entry, index) => list.append(choice(`chapter-${index}`, entry.title, chapterRange(outline, index, document_.pagesUsed), entry.level, false)));
  $('chapters').hidden = outline.length === 0;
  for (const id of ['page-from', 'page-to']) /** @type {HTMLInputElement} */ ($(id)).max = String(document_.pagesUsed);
  setPages(1, document_.pagesUsed);
  $('job-cost').hidden = true;
  $('plan').hidden = false;
}

/** The job's body as the plan stands: the chosen pages (none for the whole document) and the budget. */
function planBody() {
  const count = (id) => Math.min(50, Math.max(1, Number(/** @type {HTMLInputElement} */ ($(id)).value) || 5));
  const documentInfo = page.document;
  const from = Number(/** @type {HTMLInputElement} */ ($('page-from')).value);
  const to = Number(/** @type {HTMLInputElement} */ ($('page-to')).value);
  const whole = documentInfo === null || (from === 1 && to === documentInfo.pagesUsed);
  const budget = Number(/** @type {HTMLInputElement} */ ($('budget')).value);
  return {
    documentId: documentInfo?.documentId ?? '',
    providers: chosenOrder(),
    ...(whole ? {} : { pages: { from, to } }),
    options: {
      lang: /** @type {HTMLSelectElement} */ ($('lang')).value,
      mcqCount: count('mcq-count'),
      fillCount: count('fill-count'),
      ...(budget > 0 ? { maxCostUsd: budget } : {}),
    },
  };
}

/** Dollars as people read them: cents above a dollar, four decimals below (a call costs fractions of a cent). */
function usd(amount) {
  return amount >= 1 ? `$${amount.toFixed(2)}` : `$${amount.toFixed(4)}`;
}

/** POST /v1/jobs with `estimate: true`: the most the job can cost with each provider; no job, no call. */
async function onEstimate() {
  showJobError('');
  const list = $('estimate');
  list.replaceChildren(element('li', { text: 'Estimating…' }));
  const response = await fetch('/v1/jobs', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...keyHeadersFor() },
    body: JSON.stringify({ ...planBody(), estimate: true }),
  });
  const body = await readJson(response);
  list.replaceChildren();
  if (!response.ok) {
    showJobError(describeError(body, response.status));
    return;
  }
  const { estimate } = body;
  for (const [provider, cost] of Object.entries(estimate.costUsdMax)) {
    const label = providerLabels[provider] ?? provider;
    list.append(element('li', { class: 'estimate-item', 'data-provider': provider, text: cost === null ? `${label}: no price for its model` : `${label}: at most ${usd(cost)}` }));
  }
  list.append(element('li', { class: 'hint', text: `${estimate.parts} part${estimate.parts === 1 ? '' : 's'}; the worst case: every call re-asked and retried, writing all it may. Put a figure in the budget to cap the job.` }));
}

function showJobCost(text) {
  const node = $('job-cost');
  node.textContent = text;
  node.hidden = false;
}

async function onStart(event) {
  event.preventDefault();
  if (page.document === null) return;
  showJobError('');
  const button = /** @type {HTMLButtonElement} */ ($('start-button'));
  button.disabled = true;
  try {
    await startJob(planBody());
  } catch (error) {
    showJobError(`The service did not answer: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    button.disabled = false;
  }
}

async function startJob(jobBody) {
  const response = await fetch('/v1/jobs', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...keyHeadersFor() },
    body: JSON.stringify(jobBody),
  });
  const body = await readJson(response);
  if (!response.ok) {
    setProgress(0, 'The job was not started.');
    showJobError(describeError(body, response.status));
    return;
  }
  page.runs += 1;
  const run = `job ${page.runs}`;
  page.jobId = body.jobId;
  page.jobCost = 0;
  showJobCost(`Cost so far: ${usd(0)}${jobBody.options.maxCostUsd ? ` of a budget of ${usd(jobBody.options.maxCostUsd)}` : ''}`);
  /** @type {HTMLButtonElement} */ ($('cancel-button')).disabled = false;
  setProgress(0, 'Queued.');
  setJobState('queued');
  setRunState('calling');
  followJob(body.jobId, run);
}

function followJob(jobId, run) {
  page.jobEvents?.close();
  const events = new EventSource(`/v1/jobs/${encodeURIComponent(jobId)}/events`);
  page.jobEvents = events;
  let finished = false;
  events.addEventListener('progress', (message) => {
    const data = JSON.parse(message.data);
    const part = data.parts ? `, part ${data.part} of ${data.parts}` : '';
    setProgress(data.progress, `${data.progress}% — ${data.stage ?? ''}${part}`);
    if (['notes', 'mcq', 'fill'].includes(data.stage)) setJobState('running', data.stage);
  });
  events.addEventListener('attempt', (message) => {
    const attempt = JSON.parse(message.data);
    addAttempts(run, [attempt]);
    if (typeof attempt.costUsd === 'number') {
      page.jobCost += attempt.costUsd;
      showJobCost(`Cost so far: ${usd(page.jobCost)}`);
    }
    setRunState(attempt.outcome === 'succeeded' ? 'succeeded' : 'deciding');
    // A failure in the middle of an answer, and the attempt that went on with it: said where the material is.
    const label = providerLabels[attempt.provider] ?? attempt.provider;
    if (attempt.outcome === 'failed' && attempt.streamed) setStreamNote(`${attempt.task}: ${label} failed in the middle of its answer (${attempt.errorClass}); the next attempt takes over.`);
    else if (attempt.continuation) setStreamNote(`${attempt.task}: ${label} continued the answer from where it was cut.`);
  });
  // The study material as it is written: each stage's items render as they arrive (notes forming, questions
  // appearing); a reset voids that stage's items (its answer starts over on the next attempt or provider).
  const live = emptyLiveResult();
  document.getElementById('stream-note')?.remove();
  events.addEventListener('item', (message) => {
    addLiveItem(live, JSON.parse(message.data));
    renderLiveResult(live);
  });
  events.addEventListener('reset', (message) => {
    const reset = JSON.parse(message.data);
    clearLiveStage(live, reset.task);
    renderLiveResult(live);
    setStreamNote(`${reset.task}: ${reset.reason}.`);
  });
  events.addEventListener('done', () => {
    finished = true;
    events.close();
    void finishJob(jobId, run);
  });
  events.addEventListener('error', () => {
    if (finished || events.readyState !== EventSource.CLOSED) return;
    // The stream is gone for good: read the job's state instead.
    void finishJob(jobId, run);
  });
}

async function finishJob(jobId, run) {
  if (page.jobId !== jobId) return;
  const response = await fetch(`/v1/jobs/${encodeURIComponent(jobId)}`);
  const job = await readJson(response);
  if (response.status === 503) {
    // The job store is briefly unreachable (JOB_STORE_UNAVAILABLE): the job may well exist, read it again.
    setTimeout(() => void finishJob(jobId, run), 1000 * Number(response.headers.get('retry-after') ?? 2));
    return;
  }
  if (!response.ok) {
    showJobError(describeError(job, response.status));
    return;
  }
  setJobState(job.status, job.stage);
  if (job.status === 'queued' || job.status === 'running') {
    setTimeout(() => void finishJob(jobId, run), 1000);
    return;
  }
  if (job.status === 'interrupted' && job.resumable && (await resumeInterrupted(jobId, run))) return;
  page.jobId = null;
  /** @type {HTMLButtonElement} */ ($('cancel-button')).disabled = true;
  void refreshKeyHealth();
  if (typeof job.costUsd === 'number') showJobCost(`Cost: ${usd(job.costUsd)}${job.meta?.maxCostUsd ? ` of a budget of ${usd(job.meta.maxCostUsd)}` : ''}`);
  const tableEmpty = /** @type {HTMLTableElement} */ ($('attempts')).tBodies[0].rows.length === 0;
  if (job.status === 'succeeded') {
    const stages = (job.meta && job.meta.stages) || {};
    const by = Object.entries(stages)
      .map(([stage, meta]) => `${stage}: ${providerLabels[meta.provider] ?? meta.provider}${meta.fallback ? ' (fallback)' : ''}${meta.cached ? ' (cached)' : ''}`)
      .join(', ');
    setProgress(100, `100% — done${by ? ` (${by})` : ''}.`);
    setRunState('succeeded');
    renderResult(job.result);
  } else if (job.status === 'cancelled') {
    setProgress(/** @type {HTMLProgressElement} */ ($('progress')).value, 'Cancelled.');
    setRunState('aborted');
  } else {
    setRunState('failed');
    setProgress(/** @type {HTMLProgressElement} */ ($('progress')).value, 'Failed.');
    const error = job.error ?? {};
    showJobError(`${error.code ?? 'FAILED'}: ${error.message ?? 'the job failed'}${error.retryAfterSeconds ? ` (retry after ${error.retryAfterSeconds} s)` : ''}`);
    // What the job finished before it stopped (a budget keeps what it paid for).
    if (job.result) renderResult(job.result);
    if (tableEmpty && Array.isArray(error.attempts)) addAttempts(run, error.attempts);
  }
}

/** How often this page resumed each job: an instance that keeps dying is not retried forever. */
const resumesByJob = new Map();

/**
 * The instance running the job stopped (restart, crash) and the job reads `interrupted`. The page
 * holds the keys the job was created with, so it resumes the job itself (POST /v1/jobs/:id/resume, at most
 * three times), says so, and follows it again; finished parts are not paid again. False when it could not.
 */
async function resumeInterrupted(jobId, run) {
  const resumes = (resumesByJob.get(jobId) ?? 0) + 1;
  if (resumes > 3) return false;
  resumesByJob.set(jobId, resumes);
  setProgress(/** @type {HTMLProgressElement} */ ($('progress')).value, 'The service instance running this job stopped; resuming it where it left off…');
  const response = await fetch(`/v1/jobs/${encodeURIComponent(jobId)}/resume`, { method: 'POST', headers: keyHeadersFor() });
  const body = await readJson(response);
  if (!response.ok) {
    showJobError(`The interrupted job could not be resumed: ${describeError(body, response.status)}`);
    return false;
  }
  setProgress(/** @type {HTMLProgressElement} */ ($('progress')).value, 'Resumed after an interruption: finished parts are kept.');
  setRunState('calling');
  followJob(jobId, run);
  return true;
}

async function onCancel() {
  if (page.jobId === null) return;
  await fetch(`/v1/jobs/${encodeURIComponent(page.jobId)}`, { method: 'DELETE' });
}

// ------------------------------------------------------------------ results: notes, quiz, fill

/** What a job's event stream has shown of each stage's result so far. */
function emptyLiveResult() {
  return { notes: { keyConcepts: [], sections: [], glossary: [] }, mcq: { questions: [] }, fill: { questions: [] }, items: 0 };
}

function addLiveItem(live, item) {
  const lists = { keyConcept: 'keyConcepts', section: 'sections', glossaryEntry: 'glossary' };
  if (item.task === 'notes' && lists[item.kind]) live.notes[lists[item.kind]].push(item.value);
  else if ((item.task === 'mcq' || item.task === 'fill') && item.kind === 'question') live[item.task].questions.push(item.value);
  live.items += 1;
}

function clearLiveStage(live, task) {
  if (task === 'notes') live.notes = { keyConcepts: [], sections: [], glossary: [] };
  else if (task === 'mcq' || task === 'fill') live[task] = { questions: [] };
}

/** The material so far; `data-live` marks it as still being written (the final result replaces it). */
function renderLiveResult(live) {
  renderResult(live);
  $('results').setAttribute('data-live', 'true');
}

/** One line under the results' title: what happened to the material while it was written. */
function setStreamNote(text) {
  let note = document.getElementById('stream-note');
  if (note === null) {
    note = element('p', { id: 'stream-note', class: 'hint', role: 'status' });
    $('results-title').after(note);
  }
  note.textContent = text;
}

function renderResult(result) {
  $('results').hidden = false;
  $('results').removeAttribute('data-live');
  renderNotes(result.notes ?? {});
  renderQuiz((result.mcq && result.mcq.questions) ?? []);
  renderFill((result.fill && result.fill.questions) ?? []);
}

/** The page(s) an item came from, beside it ("p. 4", "pp. 4–6", "pp. 2, 5"); nothing for text input. */
function pagesBadge(pages) {
  if (!Array.isArray(pages) || pages.length === 0) return document.createTextNode('');
  const sorted = [...new Set(pages)].sort((a, b) => a - b);
  const contiguous = sorted.every((value, index) => index === 0 || value === sorted[index - 1] + 1);
  const text = sorted.length === 1 ? `p. ${sorted[0]}` : contiguous ? `pp. ${sorted[0]}–${sorted.at(-1)}` : `pp. ${sorted.join(', ')}`;
  return element('span', { class: 'pages', title: 'Where in the document this comes from', text });
}

function renderNotes(notes) {
  const container = $('notes');
  container.replaceChildren();
  const concepts = element('ul', { class: 'concepts' });
  for (const concept of notes.keyConcepts ?? []) {
    concepts.append(element('li', {}, [element('strong', { text: concept.term }), document.createTextNode(` — ${concept.definition} `), element('em', { text: `(${concept.importance})` }), pagesBadge(concept.pages)]));
  }
  container.append(element('h4', { text: 'Key concepts' }), concepts);
  for (const section of notes.sections ?? []) {
    const bullets = element('ul', {});
    for (const bullet of section.bullets ?? []) bullets.append(element('li', { text: bullet }));
    container.append(element('h4', { text: section.title }, [pagesBadge(section.pages)]), element('p', { text: section.summary }), bullets);
  }
  if ((notes.glossary ?? []).length > 0) {
    const glossary = element('dl', { class: 'glossary' });
    for (const entry of notes.glossary) glossary.append(element('dt', { text: entry.term }, [pagesBadge(entry.pages)]), element('dd', { text: entry.definition }));
    container.append(element('h4', { text: 'Glossary' }), glossary);
  }
}

function renderQuiz(questions) {
  const container = $('quiz');
  container.replaceChildren();
  if (questions.length === 0) container.append(element('p', { class: 'hint', text: 'No questions.' }));
  questions.forEach((question, index) => {
    const name = `mcq-${index}`;
    const fieldset = element('fieldset', { class: 'question mcq-question', 'data-index': index });
    fieldset.append(element('legend', { text: `${index + 1}. ${question.question}` }, [pagesBadge(question.pages)]));
    for (const letter of ['A', 'B', 'C', 'D']) {
      const id = `${name}-${letter}`;
      fieldset.append(element('label', { for: id }, [element('input', { type: 'radio', name, id, value: letter }), document.createTextNode(` ${letter}. ${question.options?.[letter] ?? ''}`)]));
    }
    const result = element('p', { class: 'check-result', role: 'status', 'aria-live': 'polite' });
    const explanation = element('p', { class: 'explanation', hidden: true, text: question.explanation ?? '' });
    const check = element('button', { type: 'button', class: 'check-button', text: 'Check' });
    check.addEventListener('click', () => {
      const picked = /** @type {HTMLInputElement | null} */ (fieldset.querySelector(`input[name="${name}"]:checked`));
      if (!picked) {
        result.textContent = 'Pick an answer first.';
        result.className = 'check-result';
        return;
      }
      const right = picked.value === question.answer;
      result.textContent = right ? 'Correct.' : `Not quite: the answer is ${question.answer}.`;
      result.className = `check-result ${right ? 'right' : 'wrong'}`;
      explanation.hidden = false;
    });
    fieldset.append(check, result, explanation);
    container.append(fieldset);
  });
}

const normalize = (text) => String(text).normalize('NFC').trim().toLowerCase().replace(/\s+/g, ' ');

function renderFill(questions) {
  const container = $('fill');
  container.replaceChildren();
  if (questions.length === 0) container.append(element('p', { class: 'hint', text: 'No questions.' }));
  questions.forEach((question, index) => {
    const id = `fill-${index}`;
    const [before = '', after = ''] = String(question.sentence).split('___');
    const box = element('div', { class: 'question fill-question', 'data-index': index });
    const input = element('input', { type: 'text', id, autocomplete: 'off', size: 14 });
    box.append(element('p', {}, [element('label', { for: id, class: 'visually-hidden', text: `Blank ${index + 1}` }), document.createTextNode(`${index + 1}. ${before}`), input, document.createTextNode(after), pagesBadge(question.pages)]));
    const result = element('p', { class: 'check-result', role: 'status', 'aria-live': 'polite' });
    const check = element('button', { type: 'button', class: 'check-button', text: 'Check' });
    const hint = element('button', { type: 'button', class: 'secondary', text: 'Hint' });
    hint.addEventListener('click', () => {
      result.textContent = `Hint: ${question.hint ?? '—'}`;
      result.className = 'check-result';
    });
    const doCheck = () => {
      const given = normalize(/** @type {HTMLInputElement} */ (input).value);
      const accepted = [question.answer, ...(question.acceptableAnswers ?? [])].map(normalize);
      const right = given !== '' && accepted.includes(given);
      result.textContent = right ? 'Correct.' : `The answer is "${question.answer}".`;
      result.className = `check-result ${right ? 'right' : 'wrong'}`;
    };
    check.addEventListener('click', doCheck);
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') doCheck();
    });
    box.append(element('div', { class: 'row' }, [check, hint]), result);
    container.append(box);
  });
}

// ------------------------------------------------------------------ live providers

function secondsUntil(iso) {
  if (!iso) return null;
  return Math.ceil((Date.parse(iso) - Date.now()) / 1000);
}

function renderProviderCards() {
  const container = $('provider-cards');
  for (const status of page.providers) {
    let card = container.querySelector(`[data-provider="${status.id}"]`);
    if (!card) {
      card = element('article', { class: 'provider-card', 'data-provider': status.id, 'aria-label': `${providerLabels[status.id] ?? status.id} breaker` }, [
        element('h3', { text: providerLabels[status.id] ?? status.id }),
        element('dl', {}, [
          element('dt', { text: 'breaker' }), element('dd', {}, [element('span', { class: 'breaker-state' })]),
          element('dt', { text: 'failures' }), element('dd', { class: 'failures' }),
          element('dt', { text: 'next probe' }), element('dd', { class: 'next-probe' }),
          element('dt', { text: 'calls' }), element('dd', { class: 'calls' }),
          element('dt', { text: 'keys refused' }), element('dd', { class: 'refused-keys' }),
          element('dt', { text: 'model' }), element('dd', { class: 'model' }),
        ]),
      ]);
      container.append(card);
    }
    const breaker = status.breaker;
    card.setAttribute('data-state', breaker.state);
    card.querySelector('.breaker-state').textContent = `${stateLabels[breaker.state] ?? breaker.state}${breaker.forced ? ' (forced)' : ''}`;
    const quorum = breaker.minDistinctKeys > 1 ? `, ${breaker.distinctKeys} / ${breaker.minDistinctKeys} keys` : '';
    card.querySelector('.failures').textContent = `${breaker.consecutiveFailures} / ${breaker.threshold} in a row${quorum}`;
    const wait = secondsUntil(breaker.retryAt);
    card.querySelector('.next-probe').textContent =
      breaker.state === 'closed' ? '—' : breaker.forced ? 'held open by an operator' : breaker.state === 'halfOpen' ? 'the next request probes' : wait !== null && wait > 0 ? `in ${wait} s` : 'now';
    const stats = status.stats;
    card.querySelector('.calls').textContent = `${stats.calls} (${stats.successes} ok, ${stats.failures} counted, ${stats.ignored} ignored, ${stats.rejected} refused, ${stats.opens} opens)`;
    card.querySelector('.model').textContent = status.model;
    const refused = status.keys ?? { quarantined: 0, cooling: 0 };
    card.querySelector('.refused-keys').textContent = `${refused.quarantined} quarantined, ${refused.cooling} cooling`;
    highlightState($('machines'), 'breaker', status.id, breaker.forced ? 'forcedOpen' : breaker.state);
  }
}

function connectProviders() {
  const events = new EventSource('/v1/providers/events');
  events.addEventListener('open', () => {
    $('stream-state').textContent = 'live.';
    highlightState($('machines'), 'gateway', '', 'running');
    highlightState($('machines'), 'provider', '', ['serving', 'ready', 'idle']);
  });
  events.addEventListener('snapshot', (message) => {
    page.providers = JSON.parse(message.data).providers;
    renderProviderCards();
  });
  events.addEventListener('transition', (message) => {
    const t = JSON.parse(message.data);
    $('transition-announcer').textContent = `${providerLabels[t.provider] ?? t.provider} breaker: ${stateLabels[t.from] ?? t.from} to ${stateLabels[t.to] ?? t.to}`;
    markTransition($('machines'), 'breaker', t.provider, t.from, t.to);
  });
  events.addEventListener('error', () => {
    $('stream-state').textContent = 'reconnecting…';
    highlightState($('machines'), 'gateway', '', null);
    highlightState($('machines'), 'provider', '', null);
  });
}

// ------------------------------------------------------------------ demo: fault panel and one-off requests

async function setFault(id, fault, extra = {}) {
  const response = await fetch('/demo/faults', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ provider: id, fault, ...extra }),
  });
  const body = await readJson(response);
  if (!response.ok) {
    $('fault-status').textContent = describeError(body, response.status);
    return;
  }
  page.faults[id] = fault;
  renderFaultMarks();
  $('fault-status').textContent = `${providerLabels[id]}: ${fault} until reset.`;
}

function rateLimitKey(id) {
  if (!page.demo) return;
  setKey(id, page.demo.rateLimitedKeys[id]);
  page.faults[id] = 'rate-limited key';
  renderFaultMarks();
  $('fault-status').textContent = `${providerLabels[id]}: its key now starts with emu-ratelimit- (429, never counted by the breaker).`;
}

async function resetFaults() {
  const response = await fetch('/demo/faults', { method: 'DELETE' });
  if (!response.ok) {
    $('fault-status').textContent = describeError(await readJson(response), response.status);
    return;
  }
  if (page.demo) for (const id of providerIds) if (page.keys[id] === page.demo.rateLimitedKeys[id]) setKey(id, page.demo.keys[id]);
  page.faults = {};
  renderFaultMarks();
  $('fault-status').textContent = 'All faults reset. An open breaker closes after its next successful probe.';
}

function renderFaultMarks() {
  for (const id of providerIds) {
    const mark = document.getElementById(`fault-active-${id}`);
    if (mark) mark.textContent = page.faults[id] ? `(${page.faults[id]})` : '';
  }
}

function renderFaultPanel() {
  const rows = $('fault-rows');
  rows.replaceChildren();
  for (const id of providerIds) {
    const label = providerLabels[id];
    const button = (suffix, text, action) => {
      const node = element('button', { type: 'button', id: `fault-${id}-${suffix}`, text });
      node.addEventListener('click', () => void action());
      return node;
    };
    rows.append(
      element('div', { class: 'fault-row', 'data-provider': id }, [
        element('h3', {}, [document.createTextNode(label), element('span', { class: 'active', id: `fault-active-${id}` })]),
        element('div', { class: 'row' }, [
          button('down', 'Take down (HTTP 500)', () => setFault(id, 'http500')),
          button('overloaded', 'Overloaded', () => setFault(id, 'overloaded')),
          button('slow', 'Slow (3 s)', () => setFault(id, 'slow', { ms: 3000 })),
          button('ratelimit', 'Rate-limit key', () => rateLimitKey(id)),
        ]),
      ]),
    );
  }
}

async function sendOneRequest() {
  const button = /** @type {HTMLButtonElement} */ ($('probe-button'));
  button.disabled = true;
  page.runs += 1;
  const run = `request ${page.runs}`;
  $('probe-result').textContent = 'Sending…';
  setRunState('calling');
  try {
    const response = await fetch('/v1/generate', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...keyHeadersFor() },
      body: JSON.stringify({ task: 'notes', text: sampleText, providers: chosenOrder(), options: { lang: 'en' } }),
    });
    const body = await readJson(response);
    if (response.ok) {
      addAttempts(run, body.meta.attempts);
      setRunState('succeeded');
      $('probe-result').textContent = `${run}: answered by ${providerLabels[body.meta.provider]}${body.meta.fallback ? ' (fallback)' : ''} after ${body.meta.attempts.length} attempt(s).`;
    } else {
      addAttempts(run, (body.error && body.error.attempts) ?? []);
      setRunState('failed');
      $('probe-result').textContent = `${run}: ${describeError(body, response.status)}`;
    }
  } catch (error) {
    $('probe-result').textContent = `${run}: the service did not answer (${error instanceof Error ? error.message : String(error)}).`;
  } finally {
    button.disabled = false;
    void refreshKeyHealth();
  }
}

// ------------------------------------------------------------------ start

async function loadMachines() {
  $('machines').textContent = 'Loading the diagrams…';
  try {
    const response = await fetch('/web/machines.json');
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const { machines } = await response.json();
    renderMachines($('machines'), machines, providerIds, providerLabels);
  } catch {
    $('machines').textContent = 'The machine diagrams could not be loaded.';
  }
}

async function start() {
  try {
    const config = await (await fetch('/demo/config')).json();
    if (config.demo) {
      page.demo = { keys: config.keys, rateLimitedKeys: config.rateLimitedKeys };
      for (const id of providerIds) page.keys[id] = config.keys[id] ?? '';
      $('demo-badge').hidden = false;
      $('fault-panel').hidden = false;
      renderFaultPanel();
      $('fault-reset').addEventListener('click', () => void resetFaults());
    }
  } catch {
    // Not in demo mode, or the config route is unavailable: the user enters keys.
  }
  renderProviderOrder();
  void refreshKeyHealth();
  $('key-health-button').addEventListener('click', () => void refreshKeyHealth());
  $('upload-form').addEventListener('submit', (event) => void onUpload(event));
  $('cancel-button').addEventListener('click', () => void onCancel());
  $('plan').addEventListener('submit', (event) => void onStart(event));
  $('estimate-button').addEventListener('click', () => void onEstimate());
  $('probe-button').addEventListener('click', () => void sendOneRequest());
  // The streams do not wait for the drawings (the first layout after a start takes a moment): the live
  // states are remembered and shown when the drawings arrive.
  connectProviders();
  await loadMachines();
}

void start();
