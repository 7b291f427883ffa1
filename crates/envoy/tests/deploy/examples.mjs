// Validates the Kubernetes examples (examples/istio, examples/envoy-gateway) offline.
//
// Each manifest is rendered with the digest of the image `make image` built (the placeholder
// ${IDEMGATE_IMAGE_SHA256} becomes its hex) into --out, then checked:
//  - against the CRD schemas shipped in npm packages, where one exists: @kubernetes-models/istio
//    (WasmPlugin, EnvoyFilter: generated from Istio's CRDs) and @kubernetes-models/gateway-api
//    (GatewayClass, Gateway, HTTPRoute: generated from the Gateway API CRDs). These check types,
//    enums and patterns, not unknown fields;
//  - with check-jsonschema against the minimal schemas in ./schemas (hand-written from the CRD
//    reference, as no registry package ships Envoy Gateway's CRD schemas; they refuse unknown
//    fields, so a typo fails);
//  - every manifest must be covered by at least one of the two;
//  - the filter configuration in the WasmPlugin and the EnvoyExtensionPolicy equals the one of
//    examples/envoy/envoy.yaml (the documented defaults), but for `upstream.cluster`, which names
//    a cluster of the platform;
//  - both validators must refuse a broken copy (so this check can fail).
// Prints `N passed, N failed`.
//
//   node examples.mjs --models target/k8s-models --digest HEX --out target/examples

import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isDeepStrictEqual, parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../../..");
const { values: args } = parseArgs({
  options: { models: { type: "string" }, digest: { type: "string" }, out: { type: "string" } },
});
if (!args.models || !/^[a-f0-9]{64}$/.test(args.digest ?? "") || !args.out) {
  console.error("usage: examples.mjs --models DIR --digest HEX64 --out DIR");
  process.exit(2);
}
const modules = join(resolve(args.models), "node_modules");
const load = async (path) => import(pathToFileURL(join(modules, path)).href);
const YAML = await load("yaml/dist/index.js");

// kind → the npm package's model (its validate() is the CRD's schema, compiled).
const models = {
  WasmPlugin: ["@kubernetes-models/istio/extensions.istio.io/v1alpha1/WasmPlugin.js", "WasmPlugin"],
  EnvoyFilter: ["@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter.js", "EnvoyFilter"],
  GatewayClass: ["@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/GatewayClass.js", "GatewayClass"],
  Gateway: ["@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/Gateway.js", "Gateway"],
  HTTPRoute: ["@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute.js", "HTTPRoute"],
  // The store service (examples/store): core Kubernetes types, from kubernetes-models.
  Deployment: ["kubernetes-models/apps/v1/Deployment.js", "Deployment"],
  Service: ["kubernetes-models/v1/Service.js", "Service"],
};
// kind → hand-written minimal schema (./schemas).
const schemas = {
  WasmPlugin: "wasmplugin.schema.json",
  EnvoyExtensionPolicy: "envoyextensionpolicy.schema.json",
  EnvoyProxy: "envoyproxy.schema.json",
  BackendTrafficPolicy: "backendtrafficpolicy.schema.json",
};

let passed = 0;
let failed = 0;
function check(name, fn) {
  return Promise.resolve()
    .then(fn)
    .then(
      () => {
        passed++;
        console.log(`test ${name} ... ok`);
      },
      (e) => {
        failed++;
        console.log(`test ${name} ... FAILED\n  ${String(e.message ?? e).replaceAll("\n", "\n  ")}`);
      },
    );
}

async function packageValidate(kind, doc) {
  const [path, name] = models[kind];
  const Model = (await load(path))[name];
  new Model(doc).validate(); // throws with the failing paths
}

function jsonschema(kind, file) {
  try {
    execFileSync("check-jsonschema", ["--schemafile", join(here, "schemas", schemas[kind]), file], {
      encoding: "utf8",
      stdio: "pipe",
    });
  } catch (e) {
    throw new Error(`check-jsonschema ${schemas[kind]}:\n${e.stdout}${e.stderr}`);
  }
}

// The filter configuration of examples/envoy/envoy.yaml (the JSON in the wasm filter's config).
function envoyExampleConfig() {
  const envoy = YAML.parse(readFileSync(join(root, "examples/envoy/envoy.yaml"), "utf8"));
  for (const listener of envoy.static_resources.listeners) {
    for (const chain of listener.filter_chains) {
      for (const filter of chain.filters) {
        for (const http of filter.typed_config?.http_filters ?? []) {
          if (http.name === "envoy.filters.http.wasm") {
            return JSON.parse(http.typed_config.config.configuration.value);
          }
        }
      }
    }
  }
  throw new Error("no wasm filter in examples/envoy/envoy.yaml");
}

const rendered = {}; // kind → { file, doc }
for (const dir of ["istio", "envoy-gateway", "store"]) {
  mkdirSync(join(args.out, dir), { recursive: true });
  for (const name of readdirSync(join(root, "examples", dir)).filter((f) => f.endsWith(".yaml")).sort()) {
    const text = readFileSync(join(root, "examples", dir, name), "utf8").replaceAll(
      "${IDEMGATE_IMAGE_SHA256}",
      args.digest,
    );
    const file = join(args.out, dir, name);
    writeFileSync(file, text);
    const doc = YAML.parse(text);
    const label = `${dir}/${name}`;
    rendered[doc.kind] = { file, doc };
    await check(`${label} (${doc.kind}) is covered by a schema`, () => {
      if (!models[doc.kind] && !schemas[doc.kind]) throw new Error(`no schema for kind ${doc.kind}`);
    });
    if (models[doc.kind]) {
      await check(`${label} (${doc.kind}) matches the CRD schema of its npm package`, () =>
        packageValidate(doc.kind, doc),
      );
    }
    if (schemas[doc.kind]) {
      await check(`${label} (${doc.kind}) matches ${schemas[doc.kind]}`, () => jsonschema(doc.kind, file));
    }
  }
}

// The platform names the upstream cluster (detached execution); everything else is equal.
function withoutCluster(config, where) {
  const copy = structuredClone(config);
  if (copy?.upstream) {
    if (typeof copy.upstream.cluster !== 'string' || !copy.upstream.cluster) {
      throw new Error(`${where}: upstream.cluster must name a cluster`);
    }
    delete copy.upstream.cluster;
  }
  return copy;
}

await check("the examples' filter configuration equals examples/envoy/envoy.yaml's", () => {
  const defaults = withoutCluster(envoyExampleConfig(), 'examples/envoy/envoy.yaml');
  const istio = rendered.WasmPlugin?.doc.spec.pluginConfig;
  const eg = rendered.EnvoyExtensionPolicy?.doc.spec.wasm?.[0]?.config;
  if (!isDeepStrictEqual(withoutCluster(istio, 'WasmPlugin'), defaults)) {
    throw new Error(`WasmPlugin.pluginConfig differs:\n${JSON.stringify(istio)}\n${JSON.stringify(defaults)}`);
  }
  if (!isDeepStrictEqual(withoutCluster(eg, 'EnvoyExtensionPolicy'), defaults)) {
    throw new Error(`EnvoyExtensionPolicy config differs:\n${JSON.stringify(eg)}\n${JSON.stringify(defaults)}`);
  }
});

// The store Deployment only sets options the service documents (crates/store/README.md's table).
await check("the store Deployment sets only documented idemgate-store options", () => {
  const documented = readFileSync(join(root, "crates/store/README.md"), "utf8");
  const container = rendered.Deployment.doc.spec.template.spec.containers[0];
  const names = [
    ...(container.env ?? []).map((e) => e.name),
    ...(container.args ?? []).filter((a) => a.startsWith("--")),
  ];
  if (names.length === 0) throw new Error("the Deployment sets no option at all");
  for (const name of names) {
    if (!documented.includes(`\`${name}`)) throw new Error(`${name} is not in crates/store/README.md`);
  }
  for (const [probe, path] of [["livenessProbe", "/healthz"], ["readinessProbe", "/readyz"]]) {
    if (container[probe]?.httpGet?.path !== path) throw new Error(`${probe} must GET ${path}`);
    if (!documented.includes(path)) throw new Error(`${path} is not in crates/store/README.md`);
  }
});

await check("the npm schema refuses a broken store Deployment", async () => {
  const broken = structuredClone(rendered.Deployment.doc);
  broken.spec.replicas = "two";
  let refused = false;
  try {
    await packageValidate("Deployment", broken);
  } catch {
    refused = true;
  }
  if (!refused) throw new Error("kubernetes-models accepted replicas: \"two\"");
});

await check("both validators refuse a broken WasmPlugin", async () => {
  const { file, doc } = rendered.WasmPlugin;
  const broken = structuredClone(doc);
  broken.spec.failStrategy = "FAIL_OPEN_SOMETIMES";
  let refused = false;
  try {
    await packageValidate("WasmPlugin", broken);
  } catch {
    refused = true;
  }
  if (!refused) throw new Error("the npm package's schema accepted failStrategy FAIL_OPEN_SOMETIMES");
  const typo = structuredClone(doc);
  typo.spec.sha265 = typo.spec.sha256;
  delete typo.spec.sha256;
  const typoFile = file.replace(/\.yaml$/, ".typo.json");
  writeFileSync(typoFile, JSON.stringify(typo));
  refused = false;
  try {
    jsonschema("WasmPlugin", typoFile);
  } catch {
    refused = true;
  }
  if (!refused) throw new Error("check-jsonschema accepted the unknown field `sha265`");
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
