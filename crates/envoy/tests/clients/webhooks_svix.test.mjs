// Svix deliveries (preset `svix`) through the filter in a real Envoy: signed with the `svix`
// library's own `Webhook#sign` under `svix-id` / `svix-timestamp` / `svix-signature`, verified
// upstream with its `Webhook#verify`. The checks are in signed_suite.mjs; the rotating route names
// its two secrets inline (`secrets`), where the Standard Webhooks test uses `secrets_env`.

import { randomUUID } from 'node:crypto';
import { Webhook } from 'svix';
import { signedSchemeTests } from './signed_suite.mjs';

const secret = (text) => `whsec_${Buffer.from(text).toString('base64')}`;
const rotation = [secret('idemgate svix rotation, the old one'), secret('idemgate svix rotation, the new one')];

signedSchemeTests({
  name: 'svix',
  preset: 'svix',
  secret: secret('idemgate svix main endpoint secret'),
  wrong: secret('svix secret of another endpoint'),
  rotation,
  signature: { secret_env: 'SVIX_WEBHOOK_SECRET' },
  rotationConfig: { secrets: rotation },
  env: { SVIX_WEBHOOK_SECRET: secret('idemgate svix main endpoint secret') },
  newId: () => `msg_${randomUUID().replaceAll('-', '').slice(0, 27)}`,
  body: (id, n) => JSON.stringify({ eventType: 'user.created', data: { username: `user_${n}`, ref: id } }),
  sign: ({ id, body, secret: key, date }) => ({
    'content-type': 'application/json',
    'svix-id': id,
    'svix-timestamp': String(Math.floor(date.getTime() / 1000)),
    'svix-signature': new Webhook(key).sign(id, date, body),
  }),
  signatureHeaders: ['svix-signature'],
  stale: true,
  tamper: (body) => body.replace('user_', 'admin_'),
  verify: (req, secrets) => {
    const errors = [];
    for (const key of secrets) {
      try {
        new Webhook(key).verify(req.body, req.headers);
        return req.headers['svix-id'];
      } catch (e) { errors.push(String(e)); }
    }
    throw new Error(errors.join('; '));
  },
});
