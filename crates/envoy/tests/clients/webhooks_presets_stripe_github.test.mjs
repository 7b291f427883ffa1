// The `stripe` and `github` presets (webhooks_stripe.test.mjs and webhooks_github.test.mjs spell
// the same routes out by hand: kind, key_from, signature.scheme): the checks of signed_suite.mjs,
// with rotation and the unguarded twin, signed by the Stripe SDK (`generateTestHeaderString`) and
// @octokit/webhooks (`sign`), verified upstream by `constructEvent` and `verify`.

import { Webhooks } from '@octokit/webhooks';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { signedSchemeTests } from './signed_suite.mjs';

const stripe = new Stripe('sk_test_idemgate');
const stripeRotation = ['whsec_idemgate_preset_rotation_old', 'whsec_idemgate_preset_rotation_new'];

signedSchemeTests({
  name: 'stripe',
  preset: 'stripe',
  secret: 'whsec_idemgate_preset_main_0123456789',
  wrong: 'whsec_attacker_guess_0000',
  rotation: stripeRotation,
  signature: { secret_env: 'STRIPE_WEBHOOK_SECRET' },
  rotationConfig: { secrets: stripeRotation },
  env: { STRIPE_WEBHOOK_SECRET: 'whsec_idemgate_preset_main_0123456789' },
  newId: () => `evt_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
  body: (id, n) => JSON.stringify({
    id,
    object: 'event',
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    type: 'payment_intent.succeeded',
    data: { object: { id: `pi_${n}`, object: 'payment_intent', amount: 1000 * n } },
  }),
  sign: ({ body, secret, date }) => ({
    'content-type': 'application/json',
    'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: Math.floor(date.getTime() / 1000) }),
  }),
  signatureHeaders: ['stripe-signature'],
  stale: true,
  tamper: (body) => body.replace('"amount":', '"amount":1'),
  verify: (req, secrets) => {
    const errors = [];
    for (const secret of secrets) {
      try {
        return stripe.webhooks.constructEvent(req.body, req.headers['stripe-signature'], secret).id;
      } catch (e) { errors.push(e.message); }
    }
    throw new Error(errors.join('; '));
  },
});

const githubRotation = ['gh_preset_rotation_old', 'gh_preset_rotation_new'];

signedSchemeTests({
  name: 'github',
  preset: 'github',
  secret: 'gh_preset_webhook_secret_main',
  wrong: 'not-the-shared-secret',
  rotation: githubRotation,
  signature: { secret_env: 'GITHUB_WEBHOOK_SECRET' },
  rotationConfig: { secrets_env: ['GITHUB_WEBHOOK_SECRET_OLD', 'GITHUB_WEBHOOK_SECRET_NEW'] },
  env: {
    GITHUB_WEBHOOK_SECRET: 'gh_preset_webhook_secret_main',
    GITHUB_WEBHOOK_SECRET_OLD: githubRotation[0],
    GITHUB_WEBHOOK_SECRET_NEW: githubRotation[1],
  },
  newId: () => randomUUID(),
  body: (id, n) => JSON.stringify({
    action: 'opened',
    issue: { number: n, title: `Issue ${n}`, user: { login: 'octocat' } },
    repository: { id: 1296269, full_name: 'octocat/Hello-World' },
    sender: { login: 'octocat' },
  }),
  sign: async ({ id, body, secret }) => ({
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/idemgate-test',
    'x-github-event': 'issues',
    'x-github-delivery': id,
    'x-hub-signature-256': await new Webhooks({ secret }).sign(body),
  }),
  signatureHeaders: ['x-hub-signature-256'],
  stale: false,
  tamper: (body) => body.replace('Issue', 'Pull'),
  verify: async (req, secrets) => {
    for (const secret of secrets) {
      if (await new Webhooks({ secret }).verify(req.body, req.headers['x-hub-signature-256'])) return req.headers['x-github-delivery'];
    }
    throw new Error('x-hub-signature-256 does not verify');
  },
});
