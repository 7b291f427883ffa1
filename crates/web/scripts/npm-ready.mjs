// Exits 0 when every devDependency of crates/web/package.json is installed at its pinned version,
// so `make setup-web` runs `npm ci` only when something is missing or stale.
import { readFileSync } from 'node:fs';

const dir = new URL('../', import.meta.url);
const wanted = JSON.parse(readFileSync(new URL('package.json', dir))).devDependencies ?? {};
for (const [name, version] of Object.entries(wanted)) {
  try {
    const installed = JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, dir))).version;
    if (installed !== version) process.exit(1);
  } catch {
    process.exit(1);
  }
}
