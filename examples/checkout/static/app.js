// The checkout page: one Pay button guarded by idemgate. The `idemgate` package is served from /pkg/
// (the build of crates/web); a bundler would `import { guardSubmit } from 'idemgate'`.
import { guardSubmit } from '/pkg/index.js';

const PRICES = { beans: 2400, grinder: 8900 };
const params = new URLSearchParams(location.search);
// Test hooks: ?delay=MS makes the order service answer late; ?timeout=MS is the page's per-attempt timeout.
const delay = params.get('delay');
const timeoutMs = Number(params.get('timeout') || 8000);

const form = document.getElementById('cart');
const status = document.getElementById('status');
const keyView = document.getElementById('key');

function cart() {
  const items = [];
  for (const [sku, price] of Object.entries(PRICES)) {
    const qty = Number(form.elements[sku].value);
    if (qty > 0) items.push({ sku, qty, price_cents: price });
  }
  return { items };
}

function showTotal() {
  const cents = cart().items.reduce((sum, i) => sum + i.qty * i.price_cents, 0);
  document.getElementById('total').textContent = `€${(cents / 100).toFixed(2)}`;
}

// What the server holds: its order count, the events it applied and the last order's status
// (unpaid, paid, shipped, cancelled). Refreshed at load and
// after each payment, before the page says how it ended (so "Order #N placed" never shows next to
// an older count); an answer older than one already shown is dropped.
let refreshes = 0;
let shown = 0;
async function refreshCount() {
  const asked = ++refreshes;
  try {
    const res = await fetch('/api/orders');
    if (!res.ok) return;
    const doc = await res.json();
    if (asked < shown) return;
    shown = asked;
    document.getElementById('count').textContent = String(doc.count);
    document.getElementById('events').textContent = String(doc.events_applied ?? 0);
    const last = doc.orders?.at(-1);
    document.getElementById('last').textContent = last ? `#${last.id} ${last.status}` : '—';
  } catch {
    // The count is informative only: the payment's own outcome is already known.
  }
}

function say(state, text) {
  status.dataset.state = state;
  status.textContent = text;
}

// The live list of what happened, in order: every click on Pay (the one that starts a payment, and
// the ones the guard absorbed), and every request the page sends, with what the edge decided for
// it. The demo's Envoy copies idemgate's decision (the filter state its access logs print) into the
// response header `x-idemgate-decision`; a request whose answer never came has no decision to show.
const attempts = document.getElementById('attempts');
const pay = document.getElementById('pay');
const EDGE = {
  claimed: 'claimed the key, forwarded to the order service',
  taken_over: 'lease over: took the key over, forwarded to the order service',
  replayed: 'replayed the stored answer; the order service was not called',
  conflict: 'the first attempt is still in flight: 409, retry later',
  mismatch: 'key reused for another cart: 422',
};
let attemptCount = 0;
let clickCount = 0;
let payments = 0;
// The guard's last state (a submission after `failed_retryable` retries the same payment).
let guardState = 'idle';
// The click whose fate is being decided: its own submission (if any) happens during its dispatch.
let deciding = null;
// The latest request of the current payment (it gets the order's number once known).
let lastRequest = null;

function clock() {
  return new Date().toISOString().slice(11, 23);
}

function logItem(kind, text) {
  const item = document.createElement('li');
  item.dataset.kind = kind;
  item.textContent = `${clock()} ${text}`;
  attempts.append(item);
  return item;
}

function clickItem(fate, text) {
  clickCount += 1;
  const item = logItem('click', `click ${clickCount} on Pay: ${text}`);
  item.dataset.click = fate;
  return item;
}

// Every click on Pay, as a person made it. While a payment is in flight the guard keeps Pay
// disabled, and a disabled button gets no `click` event at all; it does get pointer events, so a
// press and release on it is shown as the click it absorbed. An enabled button's click is either
// the 2nd or 3rd click of one double or triple click, which the guard cancels (its own click
// listener on Pay, so the event reaches the form below already cancelled), or it submits: the
// guard goes in_flight during the click's own dispatch.
let pressed = false;
pay.addEventListener('pointerdown', (event) => { pressed = event.isPrimary && event.button === 0; });
pay.addEventListener('pointerup', () => {
  if (!pressed || !pay.disabled) return;
  pressed = false;
  if (guardState === 'in_flight') {
    clickItem('absorbed', `click absorbed — the order was already being placed (payment ${payments})`);
  } else {
    clickItem('ignored', 'ignored — the page was still loading');
  }
});
const MULTI = { 2: 'double', 3: 'triple' };
form.addEventListener('click', (event) => {
  if (!pay.contains(event.target)) return;
  pressed = false;
  if (event.defaultPrevented) {
    const gesture = `${MULTI[event.detail] ?? 'multiple'} click`;
    clickItem('absorbed', payments > 0
      ? `click absorbed — click ${event.detail} of the ${gesture} whose first click started payment ${payments}; no new order`
      : `click absorbed — click ${event.detail} of a ${gesture}`);
    return;
  }
  const click = {};
  deciding = click;
  // It submits within its own dispatch; had it not (nothing known does that), say so.
  setTimeout(() => {
    if (deciding !== click) return;
    deciding = null;
    clickItem('ignored', 'did not start a payment');
  });
});

// The guard went in_flight: a payment starts (a new one, or a retry of one that failed retryably).
function startPayment(previous) {
  const retry = previous === 'failed_retryable';
  if (!retry) payments += 1;
  lastRequest = null;
  const what = retry ? `retries payment ${payments} with the same key` : `starts payment ${payments} (a new order)`;
  if (deciding) {
    deciding = null;
    clickItem('submitted', what);
  } else {
    logItem('submit', `${what}, not from a click`);
  }
}

async function observedFetch(url, init = {}) {
  const key = new Headers(init.headers).get('idempotency-key') ?? '—';
  attemptCount += 1;
  const item = logItem('request', `request ${attemptCount} (payment ${payments}, key …${key.slice(-8)}): sent…`);
  item.dataset.status = 'pending';
  lastRequest = item;
  const settle = (status, decision, text) => {
    item.dataset.status = status;
    item.dataset.decision = decision;
    item.textContent = `${item.textContent.replace(/sent…$/, '')}${text}`;
  };
  try {
    const res = await fetch(url, init);
    const decision = res.headers.get('x-idemgate-decision') ?? '';
    const said = EDGE[decision] ?? (decision || 'no decision (not guarded)');
    settle(String(res.status), decision, `HTTP ${res.status} — edge: ${said}`);
    return res;
  } catch (error) {
    const lost = error?.name === 'AbortError'
      ? 'no answer: the page gave up waiting (the edge lets the order service finish)'
      : `no answer: ${error?.message ?? error}`;
    settle('none', '', lost);
    throw error;
  }
}

const headers = { authorization: 'Bearer demo-user' };
if (delay) headers['x-demo-delay-ms'] = delay;

guardSubmit(form, {
  url: '/api/orders',
  headers,
  payload: cart,
  fetchOptions: {
    timeoutMs,
    fetch: observedFetch,
    onRetry: ({ attempt, status: code, outcome, key }) => {
      keyView.textContent = key;
      say('in_flight', `Retrying (attempt ${attempt + 1}) after ${code ?? outcome}…`);
    },
  },
  onStateChange: (state) => {
    const previous = guardState;
    guardState = state;
    if (state === 'in_flight') {
      startPayment(previous);
      say(state, 'Paying…');
    }
  },
  onSuccess: async (result) => {
    keyView.textContent = result.key;
    const order = await result.response.json();
    const how = result.replayed ? ' (stored answer replayed)' : '';
    if (lastRequest) lastRequest.textContent += ` → order #${order.id}`;
    await refreshCount();
    say('succeeded', `Order #${order.id} placed${how}.`);
  },
  onError: async (failure) => {
    const detail = failure?.response ? `HTTP ${failure.response.status}` : failure?.code ?? String(failure);
    await refreshCount();
    say('failed_final', `Payment failed: ${detail}`);
  },
});

// Pay is disabled in the HTML until the guard is on it: the package loads its wasm first (top-level
// await, which does not hold back the page's load event), and a click before that would submit
// the form without the guard. `data-ready` tells tests (and scripts) the page can take a payment.
pay.disabled = false;
form.dataset.ready = 'true';

form.addEventListener('input', showTotal);
showTotal();
refreshCount();
