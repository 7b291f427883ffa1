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

async function refreshCount() {
  const res = await fetch('/api/orders');
  if (res.ok) document.getElementById('count').textContent = String((await res.json()).count);
}

function say(state, text) {
  status.dataset.state = state;
  status.textContent = text;
}

// The live list of attempts: every request the page sends, and what the edge decided for it. The
// demo's Envoy copies idemgate's decision (the filter state its access logs print) into the
// response header `x-idemgate-decision`; a request whose answer never came has no decision to show.
const attempts = document.getElementById('attempts');
const EDGE = {
  claimed: 'claimed the key, forwarded to the order service',
  taken_over: 'lease over: took the key over, forwarded to the order service',
  replayed: 'replayed the stored answer; the order service was not called',
  conflict: 'the first attempt is still in flight: 409, retry later',
  mismatch: 'key reused for another cart: 422',
};
let attemptCount = 0;

function clock() {
  return new Date().toISOString().slice(11, 23);
}

async function observedFetch(url, init = {}) {
  const key = new Headers(init.headers).get('idempotency-key') ?? '—';
  const item = document.createElement('li');
  attemptCount += 1;
  item.dataset.status = 'pending';
  item.textContent = `#${attemptCount} ${clock()} key …${key.slice(-8)}: sent…`;
  attempts.append(item);
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
    if (state === 'in_flight') say(state, 'Paying…');
  },
  onSuccess: async (result) => {
    keyView.textContent = result.key;
    const order = await result.response.json();
    const how = result.replayed ? ' (stored answer replayed)' : '';
    say('succeeded', `Order #${order.id} placed${how}.`);
    await refreshCount();
  },
  onError: async (failure) => {
    const detail = failure?.response ? `HTTP ${failure.response.status}` : failure?.code ?? String(failure);
    say('failed_final', `Payment failed: ${detail}`);
    await refreshCount();
  },
});

// Pay is disabled in the HTML until the guard is on it: the package loads its wasm first (top-level
// await, which does not hold back the page's load event), and a click before that would submit
// the form without the guard. `data-ready` tells tests (and scripts) the page can take a payment.
document.getElementById('pay').disabled = false;
form.dataset.ready = 'true';

form.addEventListener('input', showTotal);
showTotal();
refreshCount();
