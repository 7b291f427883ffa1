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

const headers = { authorization: 'Bearer demo-user' };
if (delay) headers['x-demo-delay-ms'] = delay;

guardSubmit(form, {
  url: '/api/orders',
  headers,
  payload: cart,
  fetchOptions: {
    timeoutMs,
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

form.addEventListener('input', showTotal);
showTotal();
refreshCount();
