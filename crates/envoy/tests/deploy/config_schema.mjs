// The filter configuration's JSON Schema (docs/reference/idemgate-config.schema.json, rendered from
// the core's description of the configuration) checked with a real draft-07 validator, npm `ajv`
// (pinned in the Makefile, K8S_MODELS_NPM), in strict mode so a schema keyword ajv does not know
// fails too:
//  - every shipped filter configuration is valid (the caller passes them: examples/envoy,
//    examples/checkout and its fleet demo, examples/jwt, Istio's WasmPlugin, Envoy Gateway's
//    EnvoyExtensionPolicy);
//  - every configuration the vectors hold that the reader accepts is valid: vectors/config.json's
//    accepted cases and the `policy` of every other group's case;
//  - vectors/config.json's configurations the reader refuses for their shape (`config_syntax`)
//    are invalid;
//  - crates/core/src/config/describe/cases.json: its `accept` list valid, its `refuse` list
//    (an unknown field at each level, wrong types, bad durations, sizes, shares and choices)
//    invalid — the core's unit test holds the reader to the same verdicts, so the two agree;
//  - a broken copy of each shipped configuration (an unknown field at the top and in a route, a
//    bad duration, a bad choice) is invalid, so these checks can fail.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const SCHEMA = "docs/reference/idemgate-config.schema.json";
const CASES = "crates/core/src/config/describe/cases.json";

// The validator for the schema, from the npm packages in `modules`.
export async function configValidator(root, modules) {
  const ajv = await import(pathToFileURL(join(modules, "ajv/dist/ajv.js")).href);
  const Ajv = ajv.default.default ?? ajv.default;
  const schema = JSON.parse(readFileSync(join(root, SCHEMA), "utf8"));
  const validate = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true }).compile(schema);
  return (config, where) => {
    if (!validate(config)) {
      const errors = validate.errors.map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      throw new Error(`${where}: not valid against ${SCHEMA}: ${errors}`);
    }
  };
}

// Each vector group's configurations, with the reader's verdict: [name, config, accepted].
function vectorConfigs(root) {
  const out = [];
  for (const file of readdirSync(join(root, "vectors")).filter((f) => f.endsWith(".json")).sort()) {
    const group = JSON.parse(readFileSync(join(root, "vectors", file), "utf8"));
    for (const c of group.cases ?? []) {
      if (file === "config.json" && typeof c.input.config === "string") {
        // Raw text (the empty document, JSON syntax errors): the reader's own, before any schema.
        continue;
      } else if (file === "config.json") {
        // A refusal of the document's shape; others (`config_invalid`, a table's) need the
        // whole configuration, which no schema sees.
        const shape = c.expect?.error === "config_syntax";
        if ("ok" in (c.expect ?? {}) || shape) out.push([`${file}: ${c.name}`, c.input.config, !shape]);
      } else if (c.input?.policy !== undefined && file !== "retry.json") {
        // retry.json's `policy` is the client's retry policy, not a filter configuration.
        out.push([`${file}: ${c.name}`, c.input.policy, true]);
      }
    }
  }
  return out;
}

// `configs`: [where, config] of every shipped configuration. `check(name, fn)` and
// `refuses(what, expected, fn)` are examples.mjs's.
export async function configSchemaChecks({ root, modules, configs, check, refuses }) {
  const valid = await configValidator(root, modules);
  for (const [where, config] of configs) {
    await check(`the filter configuration of ${where} is valid against ${SCHEMA}`, () => valid(config, where));
  }
  await check(`every configuration the vectors hold that the reader accepts is valid, and each it refuses for its shape is not`, async () => {
    const cases = vectorConfigs(root);
    if (cases.filter(([, , ok]) => ok).length < 50) throw new Error(`only ${cases.length} vector configurations found`);
    for (const [name, config, accepted] of cases) {
      if (accepted) valid(config, name);
      else await refuses(name, "not valid", () => valid(config, name));
    }
  });
  await check(`${CASES}: the schema accepts and refuses as the reader does`, async () => {
    const cases = JSON.parse(readFileSync(join(root, CASES), "utf8"));
    for (const c of cases.accept) valid(c.config, `accept: ${c.name}`);
    for (const c of cases.refuse) await refuses(`refuse: ${c.name}`, "not valid", () => valid(c.config, `refuse: ${c.name}`));
  });
  await check(`the schema refuses a broken copy of each shipped configuration`, async () => {
    for (const [where, config] of configs) {
      const broken = (spoil) => {
        const copy = structuredClone(config);
        spoil(copy);
        return () => valid(copy, where);
      };
      await refuses(`${where}: an unknown field`, "must NOT have additional properties", broken((c) => (c.ttll = "1h")));
      await refuses(`${where}: an unknown route field`, "must NOT have additional properties", broken((c) => (c.routes[0].method = ["POST"])));
      await refuses(`${where}: a duration without a unit`, "must match pattern", broken((c) => (c.lease = "30")));
      await refuses(`${where}: an unknown choice`, "must be equal to one of the allowed values", broken((c) => (c.routes[0].key = "mandatory")));
    }
  });
}
