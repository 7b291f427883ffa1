// Headless Debian Chromium driven by playwright-core, with a fresh profile that is removed after.
import { chromium } from 'playwright-core';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--no-first-run', '--disable-sync'];

/** Starts Chromium; `close()` stops it and deletes its profile. */
export async function launch() {
  const profile = await mkdtemp(join(tmpdir(), 'idemgate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    timeout: 30_000,
  });
  context.setDefaultTimeout(15_000);
  return {
    context,
    async newPage() {
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (error) => errors.push(error));
      page.on('console', (msg) => { if (msg.type() === 'error') errors.push(new Error(msg.text())); });
      page.errors = errors;
      return page;
    },
    async close() {
      await context.close().catch(() => {});
      await rm(profile, { recursive: true, force: true });
    },
  };
}
