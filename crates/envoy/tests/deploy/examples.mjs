// Validates the Kubernetes examples (examples/istio, examples/envoy-gateway, examples/store) offline.
//
// Each manifest is rendered with the digests of the images `make image` and `make image-store`
// built (the placeholders ${IDEMGATE_IMAGE_SHA256} and ${IDEMGATE_STORE_IMAGE_SHA256} become their
// hex) into --out, then checked:
//  - against the CRD schemas shipped in npm packages, where one exists: @kubernetes-models/istio
//    (WasmPlugin, EnvoyFilter, Gateway, VirtualService: generated from Istio's CRDs) and
//    @kubernetes-models/gateway-api (GatewayClass, Gateway, HTTPRoute: generated from the Gateway
//    API CRDs). These check types, enums and patterns, not unknown fields;
//  - with check-jsonschema against the minimal schemas in ./schemas (hand-written from the CRD
//    reference, as no registry package ships Envoy Gateway's CRD schemas; they refuse unknown
//    fields, so a typo fails);
//  - every manifest must be covered by at least one of the two;
//  - the filter configuration in the WasmPlugin and the EnvoyExtensionPolicy equals the one of
//    examples/envoy/envoy.yaml (the documented defaults), `upstream.reentry` included, but for
//    `scope`, and none of them sends claimed requests anywhere but a re-entry listener
//    (`upstream.cluster`, `routes[].cluster` and `upstream.cluster_skipping_routes_and_filters`
//    are refused);
//  - that scope reads the verified `sub` claim where the platform's JWT manifest has jwt_authn put
//    the payload (Istio's RequestAuthentication: "payload"; Envoy Gateway's SecurityPolicy: the
//    provider's issuer), and that manifest selects the filter's workloads or targets its route
//    (./jwt_scope.mjs);
//  - re-entry: for each platform, the manifests add the internal listener and the
//    cluster `upstream.reentry` names (its endpoint: that listener), on the proxies the filter runs
//    in; the listener shares the platform's route configuration by RDS (the name the platform
//    gives the guarded listener's routes, derived from the Gateway manifests), its first filter is
//    the marker of examples/envoy/envoy.yaml's re-entry listener, its last the router, and it has
//    no Wasm filter; the bootstrap extension envoy.bootstrap.internal_listener is added (Envoy
//    Gateway: the EnvoyProxy the GatewayClass names) or provided by the platform (Istio's bootstrap);
//  - the listener and the cluster, with that bootstrap extension, pass `envoy --mode validate`
//    ($ENVOY or `envoy` on PATH; the Istio listener without istio.alpn, an extension of Istio's
//    proxy that upstream Envoy lacks);
//  - the re-entry marker of examples/envoy/envoy.yaml and examples/checkout/envoy.yaml overwrites
//    an x-idemgate-reentry the app sent (append_action: OVERWRITE_IF_EXISTS_OR_ADD);
//  - every shipped filter configuration (examples/envoy, examples/checkout and its fleet demo,
//    examples/jwt, the WasmPlugin, the EnvoyExtensionPolicy) is valid against the JSON Schema
//    generated from the core, which agrees with the reader on the vectors (./config_schema.mjs);
//  - every validator and re-entry check must refuse a broken copy (so these checks can fail).
// Prints `N passed, N failed`.
//
//   node examples.mjs --models target/k8s-models --digest HEX --store-digest HEX --out target/examples

import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isDeepStrictEqual, parseArgs } from "node:util";
import {
  hcmOf,
  REENTRY_MARK,
  MARK_VALUE,
  checkMarker,
  internalMarkers,
  noBypass,
  HCM,
  HEADER_MUTATION,
  ROUTER,
  INTERNAL_LISTENER,
  ISTIO_BOOTSTRAP_EXTENSION,
  ISTIO_ONLY_FILTERS,
  ISTIO_INGRESS_TARGET_PORT,
  internalEndpoints,
  isWasm,
  checkReentry,
  hasInternalListenerExtension,
  millis,
  routeTimeoutsWithinTheLease,
} from "./envoy_checks.mjs";
import { sameConfigButScope, checkScope, istioPayloadKeys, envoyGatewayPayloadKeys } from "./jwt_scope.mjs";
import { configSchemaChecks } from "./config_schema.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../../..");
const { values: args } = parseArgs({
  options: {
    models: { type: "string" },
    digest: { type: "string" },
    "store-digest": { type: "string" },
    out: { type: "string" },
  },
});
const hex64 = (text) => /^[a-f0-9]{64}$/.test(text ?? "");
if (!args.models || !hex64(args.digest) || !hex64(args["store-digest"]) || !args.out) {
  console.error("usage: examples.mjs --models DIR --digest HEX64 --store-digest HEX64 --out DIR");
  process.exit(2);
}
const modules = join(resolve(args.models), "node_modules");
const load = async (path) => import(pathToFileURL(join(modules, path)).href);
const YAML = await load("yaml/dist/index.js");

// apiVersion/kind → the npm package's model (its validate() is the CRD's schema, compiled).
const models = {
  "extensions.istio.io/v1alpha1/WasmPlugin": ["@kubernetes-models/istio/extensions.istio.io/v1alpha1/WasmPlugin.js", "WasmPlugin"],
  "networking.istio.io/v1alpha3/EnvoyFilter": ["@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter.js", "EnvoyFilter"],
  "networking.istio.io/v1/Gateway": ["@kubernetes-models/istio/networking.istio.io/v1/Gateway.js", "Gateway"],
  "networking.istio.io/v1/VirtualService": ["@kubernetes-models/istio/networking.istio.io/v1/VirtualService.js", "VirtualService"],
  "security.istio.io/v1/RequestAuthentication": ["@kubernetes-models/istio/security.istio.io/v1/RequestAuthentication.js", "RequestAuthentication"],
  "gateway.networking.k8s.io/v1/GatewayClass": ["@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/GatewayClass.js", "GatewayClass"],
  "gateway.networking.k8s.io/v1/Gateway": ["@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/Gateway.js", "Gateway"],
  "gateway.networking.k8s.io/v1/HTTPRoute": ["@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute.js", "HTTPRoute"],
  // The store service (examples/store): core Kubernetes types, from kubernetes-models.
  "apps/v1/Deployment": ["kubernetes-models/apps/v1/Deployment.js", "Deployment"],
  "v1/Service": ["kubernetes-models/v1/Service.js", "Service"],
};
// apiVersion/kind → hand-written minimal schema (./schemas).
const schemas = {
  "extensions.istio.io/v1alpha1/WasmPlugin": "wasmplugin.schema.json",
  "gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy": "envoyextensionpolicy.schema.json",
  "gateway.envoyproxy.io/v1alpha1/EnvoyProxy": "envoyproxy.schema.json",
  "gateway.envoyproxy.io/v1alpha1/BackendTrafficPolicy": "backendtrafficpolicy.schema.json",
  "gateway.envoyproxy.io/v1alpha1/ClientTrafficPolicy": "clienttrafficpolicy.schema.json",
  "gateway.envoyproxy.io/v1alpha1/EnvoyPatchPolicy": "envoypatchpolicy.schema.json",
  "gateway.envoyproxy.io/v1alpha1/SecurityPolicy": "securitypolicy.schema.json",
};
const typeOf = (doc) => `${doc?.apiVersion}/${doc?.kind}`;

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

// `fn` must throw; its message must contain `expected` (so a check refuses for the right reason).
async function refuses(what, expected, fn) {
  try {
    await fn();
  } catch (e) {
    const message = String(e.message ?? e);
    if (!message.includes(expected)) {
      throw new Error(`${what}: refused, but not for "${expected}":\n${message}`);
    }
    return;
  }
  throw new Error(`${what}: accepted`);
}

async function packageValidate(type, doc) {
  const [path, name] = models[type];
  const Model = (await load(path))[name];
  new Model(doc).validate(); // throws with the failing paths
}

function jsonschema(type, file) {
  try {
    execFileSync("check-jsonschema", ["--schemafile", join(here, "schemas", schemas[type]), file], {
      encoding: "utf8",
      stdio: "pipe",
    });
  } catch (e) {
    throw new Error(`check-jsonschema ${schemas[type]}:\n${e.stdout}${e.stderr}`);
  }
}

// --- examples/envoy/envoy.yaml: the documented defaults and the re-entry listener's marker ------

const envoyExample = YAML.parse(readFileSync(join(root, "examples/envoy/envoy.yaml"), "utf8"));

// The filter configuration of examples/envoy/envoy.yaml (the JSON in the wasm filter's config).
function envoyExampleConfig() {
  for (const listener of envoyExample.static_resources.listeners) {
    for (const http of hcmOf(listener)?.http_filters ?? []) {
      if (http.name === "envoy.filters.http.wasm") {
        return JSON.parse(http.typed_config.config.configuration.value);
      }
    }
  }
  throw new Error("no wasm filter in examples/envoy/envoy.yaml");
}

// The marker filter's typed_config: the first HTTP filter of the re-entry listener of
// examples/envoy/envoy.yaml (the internal listener the filter's upstream.reentry cluster leads to).
function envoyExampleMarker() {
  const config = envoyExampleConfig();
  const clusterName = config.upstream?.reentry;
  const cluster = envoyExample.static_resources.clusters?.find((c) => c.name === clusterName);
  if (!cluster) throw new Error(`examples/envoy/envoy.yaml: no cluster named by upstream.reentry (${clusterName})`);
  const [listenerName] = internalEndpoints(cluster, "examples/envoy/envoy.yaml");
  const listener = envoyExample.static_resources.listeners.find((l) => l.name === listenerName);
  const marker = hcmOf(listener)?.http_filters?.[0]?.typed_config;
  if (marker?.["@type"] !== HEADER_MUTATION) {
    throw new Error(`examples/envoy/envoy.yaml: listener ${listenerName} does not start with a header_mutation marker`);
  }
  return marker;
}

// --- render and validate every manifest ---------------------------------------------------------

const rendered = []; // { dir, name, label, file, text, doc }
for (const dir of ["istio", "envoy-gateway", "store"]) {
  mkdirSync(join(args.out, dir), { recursive: true });
  for (const name of readdirSync(join(root, "examples", dir)).filter((f) => f.endsWith(".yaml")).sort()) {
    const text = readFileSync(join(root, "examples", dir, name), "utf8")
      .replaceAll("${IDEMGATE_IMAGE_SHA256}", args.digest)
      .replaceAll("${IDEMGATE_STORE_IMAGE_SHA256}", args["store-digest"]);
    const file = join(args.out, dir, name);
    writeFileSync(file, text);
    const doc = YAML.parse(text);
    const label = `${dir}/${name}`;
    const type = typeOf(doc);
    rendered.push({ dir, name, label, file, text, doc });
    await check(`${label} (${doc.kind}) is covered by a schema`, () => {
      if (!models[type] && !schemas[type]) throw new Error(`no schema for ${type}`);
    });
    if (models[type]) {
      await check(`${label} (${doc.kind}) matches the CRD schema of its npm package`, () =>
        packageValidate(type, doc),
      );
    }
    if (schemas[type]) {
      await check(`${label} (${doc.kind}) matches ${schemas[type]}`, () => jsonschema(type, file));
    }
  }
}

// The manifests of `dir` of one apiVersion/kind.
const all = (dir, type) => rendered.filter((r) => r.dir === dir && typeOf(r.doc) === type);
function only(dir, type) {
  const found = all(dir, type);
  if (found.length !== 1) throw new Error(`examples/${dir}: ${found.length} manifests of ${type}, expected 1`);
  return found[0];
}

// --- the filter configuration --------------------------------------------------------------------

const filterConfigs = {
  istio: () => only("istio", "extensions.istio.io/v1alpha1/WasmPlugin").doc.spec.pluginConfig,
  "envoy-gateway": () => only("envoy-gateway", "gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy").doc.spec.wasm?.[0]?.config,
};

function sameConfig(config, defaults, where) {
  noBypass(config, where);
  sameConfigButScope(config, defaults, where);
}

await check("the examples' filter configuration equals examples/envoy/envoy.yaml's but for scope, upstream.reentry included", () => {
  const defaults = envoyExampleConfig();
  noBypass(defaults, "examples/envoy/envoy.yaml");
  sameConfig(filterConfigs.istio(), defaults, "WasmPlugin.pluginConfig");
  sameConfig(filterConfigs["envoy-gateway"](), defaults, "EnvoyExtensionPolicy config");
});

// Every shipped filter configuration against the schema generated from the core (and the
// schema against the vectors' and the core's cases: ./config_schema.mjs).
function envoyFileConfig(file) {
  // The demo's envoy.yaml is a template (`${PORT}`, `${FILTER_WASM}`): any value parses.
  const doc = YAML.parse(readFileSync(join(root, file), "utf8").replace(/\$\{[A-Z_]+\}/g, "0"));
  for (const listener of doc.static_resources.listeners) {
    const wasm = (hcmOf(listener)?.http_filters ?? []).find((f) => f.name === "envoy.filters.http.wasm");
    if (wasm) return JSON.parse(wasm.typed_config.config.configuration.value);
  }
  throw new Error(`no wasm filter in ${file}`);
}
// The fleet demo adds its remote store to the checkout demo's configuration (STORE_CONFIG).
function fleetDemoConfig() {
  const source = readFileSync(join(root, "examples/checkout/demo_fleet.py"), "utf8");
  const store = /STORE_CONFIG = \(('[^']*')\s*('[^']*')\)/.exec(source);
  if (!store) throw new Error("examples/checkout/demo_fleet.py: no STORE_CONFIG");
  const member = (store[1] + store[2]).replaceAll("'", "").replace(/,\s*$/, "");
  return { ...envoyFileConfig("examples/checkout/envoy.yaml"), ...JSON.parse(`{${member}}`) };
}
await configSchemaChecks({
  root,
  modules,
  check,
  refuses,
  configs: [
    ["examples/envoy/envoy.yaml", envoyExampleConfig()],
    ["examples/checkout/envoy.yaml", envoyFileConfig("examples/checkout/envoy.yaml")],
    ["examples/checkout/demo_fleet.py (remote store)", fleetDemoConfig()],
    ["examples/jwt/envoy.yaml", envoyFileConfig("examples/jwt/envoy.yaml")],
    ["examples/istio WasmPlugin pluginConfig", filterConfigs.istio()],
    ["examples/envoy-gateway EnvoyExtensionPolicy config", filterConfigs["envoy-gateway"]()],
  ],
});

await check("no manifest names upstream.cluster_skipping_routes_and_filters", () => {
  for (const { label, text } of rendered) {
    if (text.includes("cluster_skipping_routes_and_filters")) throw new Error(`${label} mentions the opt-out`);
  }
});

await check("the configuration check refuses upstream.cluster and the opt-out", async () => {
  const defaults = envoyExampleConfig();
  for (const [field, value] of [["cluster", "app"], ["cluster_skipping_routes_and_filters", "app"]]) {
    const broken = structuredClone(defaults);
    broken.upstream[field] = value;
    await refuses(`upstream.${field}`, `upstream.${field} is set`, () => sameConfig(broken, defaults, "copy"));
  }
  const routed = structuredClone(defaults);
  routed.routes[0].cluster = "app";
  await refuses("routes[].cluster", "routes[0].cluster is set", () => sameConfig(routed, defaults, "copy"));
});

// --- the scope: the verified claim, where the platform's JWT manifest puts it --------------------

// The filter's manifest and the platform's JWT manifests (RequestAuthentication, SecurityPolicy).
const jwtManifests = {
  istio: () => ({
    filter: only("istio", "extensions.istio.io/v1alpha1/WasmPlugin").doc,
    policies: all("istio", "security.istio.io/v1/RequestAuthentication").map((r) => r.doc),
  }),
  "envoy-gateway": () => ({
    filter: only("envoy-gateway", "gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy").doc,
    policies: all("envoy-gateway", "gateway.envoyproxy.io/v1alpha1/SecurityPolicy").map((r) => r.doc),
  }),
};
const claimScope = {
  istio: ({ filter, policies }) =>
    checkScope(filter.spec.pluginConfig?.scope, istioPayloadKeys(filter, policies), "istio: WasmPlugin.pluginConfig"),
  "envoy-gateway": ({ filter, policies }) =>
    checkScope(filter.spec.wasm?.[0]?.config?.scope, envoyGatewayPayloadKeys(filter, policies), "envoy-gateway: EnvoyExtensionPolicy config"),
};

await check("istio: the scope reads sub where the RequestAuthentication on the WasmPlugin's workloads puts it, then peer", () =>
  claimScope.istio(jwtManifests.istio()),
);
await check("envoy-gateway: the scope reads sub where the SecurityPolicy on the guarded route puts it (its issuer), then peer", () =>
  claimScope["envoy-gateway"](jwtManifests["envoy-gateway"]()),
);

await check("the scope check refuses a wrong path, a wrong issuer, a JWT policy elsewhere, another difference", async () => {
  const spoil = (dir, fn) => {
    const copy = structuredClone(jwtManifests[dir]());
    fn(copy);
    return () => claimScope[dir](copy);
  };
  const istioScope = (m) => m.filter.spec.pluginConfig.scope;
  const egScope = (m) => m.filter.spec.wasm[0].config.scope;
  const wrong = "scope must read sub where the JWT policy puts the payload";
  await refuses("istio: the plain Envoy example's key", wrong, spoil("istio", (m) => (istioScope(m)[0].property[3] = "jwt_payload")));
  await refuses("istio: the raw Authorization header", wrong, spoil("istio", (m) => (istioScope(m)[0] = { header: "authorization" })));
  await refuses("istio: no peer after the claim", wrong, spoil("istio", (m) => istioScope(m).pop()));
  await refuses("istio: a RequestAuthentication on other workloads", "no RequestAuthentication selects", spoil("istio", (m) =>
    (m.policies[0].spec.selector.matchLabels = { app: "order-service" }),
  ));
  await refuses("istio: a RequestAuthentication in another namespace", "no RequestAuthentication selects", spoil("istio", (m) =>
    (m.policies[0].metadata.namespace = "shop"),
  ));
  await refuses("envoy-gateway: another issuer", wrong, spoil("envoy-gateway", (m) =>
    (m.policies[0].spec.jwt.providers[0].issuer = "https://login.example.org"),
  ));
  await refuses("envoy-gateway: Istio's key", wrong, spoil("envoy-gateway", (m) => (egScope(m)[0].property[3] = "payload")));
  await refuses("envoy-gateway: a provider without an issuer", "needs an issuer", spoil("envoy-gateway", (m) =>
    delete m.policies[0].spec.jwt.providers[0].issuer,
  ));
  await refuses("envoy-gateway: a second issuer the scope does not read", wrong, spoil("envoy-gateway", (m) =>
    m.policies[0].spec.jwt.providers.push({ name: "other", issuer: "https://login.example.org", remoteJWKS: { uri: "https://login.example.org/jwks" } }),
  ));
  await refuses("envoy-gateway: a SecurityPolicy on another route", "SecurityPolicies with jwt target the guarded HTTPRoutes", spoil("envoy-gateway", (m) =>
    (m.policies[0].spec.targetRefs[0].name = "payments"),
  ));
  const defaults = envoyExampleConfig();
  const other = structuredClone(filterConfigs.istio());
  other.ttl = "1h";
  await refuses("a difference besides scope", "in more than scope", () => sameConfig(other, defaults, "copy"));
});

// --- re-entry ------------------------------------------------------------------------------------

// Istio: EnvoyFilter ADD patches in context GATEWAY on the WasmPlugin's workloads.
function istioReentry() {
  const wasm = only("istio", "extensions.istio.io/v1alpha1/WasmPlugin").doc;
  const { namespace } = wasm.metadata;
  const selector = wasm.spec.selector?.matchLabels;
  const patches = [];
  for (const { label, doc } of all("istio", "networking.istio.io/v1alpha3/EnvoyFilter")) {
    if (doc.metadata.namespace !== namespace || !isDeepStrictEqual(doc.spec.workloadSelector?.labels, selector)) {
      throw new Error(`${label}: must select the WasmPlugin's workloads (${JSON.stringify(selector)} in ${namespace})`);
    }
    patches.push(...doc.spec.configPatches.map((p) => ({ ...p, label })));
  }
  const added = (applyTo) => {
    const found = patches.filter((p) => p.applyTo === applyTo && p.patch?.operation === "ADD");
    for (const p of found) {
      if (p.match?.context !== "GATEWAY") throw new Error(`${p.label}: the ${applyTo} ADD patch must be in context GATEWAY`);
    }
    return found.map((p) => p.patch.value);
  };
  const config = filterConfigs.istio();
  const cluster = added("CLUSTER").find((c) => c.name === config.upstream?.reentry);
  const [listenerName] = cluster ? internalEndpoints(cluster, "istio") : [];
  const listener = added("LISTENER").find((l) => l.name === listenerName);
  // The route configuration of the guarded gateway server: http.<the pod's port for it>.
  const gateways = all("istio", "networking.istio.io/v1/Gateway").filter((g) => isDeepStrictEqual(g.doc.spec.selector, selector));
  const servers = gateways.flatMap((g) => g.doc.spec.servers).filter((s) => s.port.protocol === "HTTP");
  if (servers.length !== 1) throw new Error(`istio: ${servers.length} HTTP Gateway servers on the WasmPlugin's workloads, expected 1`);
  const port = ISTIO_INGRESS_TARGET_PORT[servers[0].port.number] ?? servers[0].port.number;
  const wasmPorts = (wasm.spec.match ?? []).flatMap((m) => m.ports ?? []).map((p) => p.number);
  if (!isDeepStrictEqual(wasmPorts, [port])) throw new Error(`istio: the WasmPlugin must match the gateway's port ${port}, matches ${wasmPorts}`);
  const bufferPorts = patches.filter((p) => p.applyTo === "HTTP_FILTER").map((p) => p.match?.listener?.portNumber);
  if (!bufferPorts.length || bufferPorts.some((p) => p !== port)) throw new Error(`istio: the buffer patch must match the gateway's port ${port}, matches ${bufferPorts}`);
  return { where: "istio", config, listener, cluster, routeName: `http.${port}`, extensions: [ISTIO_BOOTSTRAP_EXTENSION] };
}

// Envoy Gateway: an EnvoyPatchPolicy adding whole resources to the Gateway the filter's route is
// attached to, and the bootstrap extension in the EnvoyProxy of the Gateway's class.
function envoyGatewayReentry() {
  const dir = "envoy-gateway";
  const policy = only(dir, "gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy").doc;
  const { namespace } = policy.metadata;
  const routes = policy.spec.targetRefs.filter((t) => t.kind === "HTTPRoute").map((t) => t.name);
  const httpRoutes = all(dir, "gateway.networking.k8s.io/v1/HTTPRoute").filter(
    (r) => routes.includes(r.doc.metadata.name) && r.doc.metadata.namespace === namespace,
  );
  const parents = httpRoutes.flatMap((r) => r.doc.spec.parentRefs);
  const gateways = all(dir, "gateway.networking.k8s.io/v1/Gateway").filter((g) =>
    parents.some((p) => p.name === g.doc.metadata.name && (p.namespace ?? namespace) === g.doc.metadata.namespace),
  );
  if (gateways.length !== 1) throw new Error(`envoy-gateway: the filter's routes attach to ${gateways.length} Gateways, expected 1`);
  const gateway = gateways[0].doc;
  const sections = parents.map((p) => p.sectionName).filter(Boolean);
  const listeners = gateway.spec.listeners.filter((l) => l.protocol === "HTTP" && (!sections.length || sections.includes(l.name)));
  if (listeners.length !== 1) throw new Error(`envoy-gateway: ${listeners.length} HTTP Gateway listeners carry the filter's routes, expected 1`);
  const routeName = `${gateway.metadata.namespace}/${gateway.metadata.name}/${listeners[0].name}`;

  const added = (resourceType) =>
    all(dir, "gateway.envoyproxy.io/v1alpha1/EnvoyPatchPolicy").flatMap(({ label, doc }) => {
      const t = doc.spec.targetRef;
      if (t.kind !== "Gateway" || t.name !== gateway.metadata.name || doc.metadata.namespace !== gateway.metadata.namespace) {
        throw new Error(`${label}: must target Gateway ${gateway.metadata.namespace}/${gateway.metadata.name}`);
      }
      return doc.spec.jsonPatches
        .filter((p) => p.type === `type.googleapis.com/${resourceType}` && p.operation.op === "add" && !p.operation.path && !p.operation.jsonPath)
        .map((p) => p.operation.value);
    });
  const config = filterConfigs[dir]();
  const cluster = added("envoy.config.cluster.v3.Cluster").find((c) => c.name === config.upstream?.reentry);
  const [listenerName] = cluster ? internalEndpoints(cluster, dir) : [];
  const listener = added("envoy.config.listener.v3.Listener").find((l) => l.name === listenerName);

  const gatewayClass = all(dir, "gateway.networking.k8s.io/v1/GatewayClass").find((c) => c.doc.metadata.name === gateway.spec.gatewayClassName)?.doc;
  const ref = gatewayClass?.spec.parametersRef;
  const proxy = all(dir, "gateway.envoyproxy.io/v1alpha1/EnvoyProxy").find(
    (p) => ref?.kind === "EnvoyProxy" && p.doc.metadata.name === ref.name && p.doc.metadata.namespace === ref.namespace,
  )?.doc;
  if (!proxy) throw new Error(`envoy-gateway: GatewayClass ${gateway.spec.gatewayClassName} names no EnvoyProxy of these manifests`);
  const bootstrap = proxy.spec.bootstrap;
  if (bootstrap?.type !== "Merge") throw new Error("envoy-gateway: the EnvoyProxy must add to the bootstrap with type Merge");
  const extensions = YAML.parse(bootstrap.value)?.bootstrap_extensions;
  // Filters that read what earlier filters left in the stream run before idemgate (README.md).
  const order = proxy.spec.filterOrder ?? [];
  for (const name of ["envoy.filters.http.geoip", "envoy.filters.http.rbac", "envoy.filters.http.local_ratelimit", "envoy.filters.http.ratelimit"]) {
    if (!order.some((o) => o.name === name && o.before === "envoy.filters.http.wasm")) {
      throw new Error(`envoy-gateway: EnvoyProxy filterOrder must put ${name} before envoy.filters.http.wasm`);
    }
  }
  return { where: dir, config, listener, cluster, routeName, extensions };
}

const platforms = { istio: istioReentry, "envoy-gateway": envoyGatewayReentry };

function checkPlatform(reentry) {
  checkReentry({ ...reentry, marker: envoyExampleMarker() });
  if (!hasInternalListenerExtension(reentry.extensions)) {
    throw new Error(`${reentry.where}: the bootstrap has no envoy.bootstrap.internal_listener extension`);
  }
}

for (const [dir, platform] of Object.entries(platforms)) {
  await check(`${dir}: the manifests add the re-entry listener (shared routes, marker first, no Wasm) and cluster`, () =>
    checkPlatform(platform()),
  );
}

await check("istio: README.md names the bootstrap extension Istio provides (since 1.17)", () => {
  const readme = readFileSync(join(root, "examples/istio/README.md"), "utf8");
  if (!readme.includes("envoy.bootstrap.internal_listener") || !readme.includes("Istio 1.17")) {
    throw new Error("examples/istio/README.md must say that Istio's bootstrap has envoy.bootstrap.internal_listener since Istio 1.17");
  }
});

await check("the re-entry check refuses a broken copy", async () => {
  const base = envoyGatewayReentry();
  const mutate = (fn) => {
    const copy = structuredClone(base);
    fn(copy, copy.listener.filter_chains[0].filters[0].typed_config);
    return () => checkPlatform(copy);
  };
  await refuses("a Wasm filter in the inner chain", "runs a Wasm filter", mutate((_, hcm) =>
    hcm.http_filters.splice(1, 0, { name: "envoy.filters.http.wasm/idemgate", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm" } }),
  ));
  await refuses("the marker not first", "must be examples/envoy/envoy.yaml's marker", mutate((_, hcm) => hcm.http_filters.reverse()));
  await refuses("another route configuration", "must share the route configuration", mutate((_, hcm) => (hcm.rds.route_config_name = "shop/shop/https")));
  await refuses("an inline route configuration", "must share the route configuration", mutate((_, hcm) => {
    hcm.route_config = { virtual_hosts: [] };
    delete hcm.rds;
  }));
  await refuses("a cluster to a socket address", "not an envoy_internal_address", mutate((c) =>
    (c.cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address = { socket_address: { address: "127.0.0.1", port_value: 3000 } }),
  ));
  await refuses("another cluster name", "no cluster named", mutate((c) => (c.cluster.name = "app")));
  await refuses("no bootstrap extension", "no envoy.bootstrap.internal_listener", mutate((c) => (c.extensions = [])));
});

// --- the listener and the cluster in a real Envoy -----------------------------------------------

// A bootstrap holding one platform's listener and cluster (RDS over an ADS that validate mode does
// not contact), checked with `envoy --mode validate`.
function envoyValidate({ where, listener, cluster, extensions }, name) {
  const inner = structuredClone(listener);
  const hcm = inner.filter_chains[0].filters[0].typed_config;
  hcm.http_filters = hcm.http_filters.filter((f) => !ISTIO_ONLY_FILTERS.has(f.name));
  const bootstrap = {
    node: { id: "examples-validate", cluster: "examples-validate" },
    bootstrap_extensions: extensions,
    dynamic_resources: {
      ads_config: { api_type: "GRPC", transport_api_version: "V3", grpc_services: [{ envoy_grpc: { cluster_name: "xds" } }] },
    },
    static_resources: {
      listeners: [inner],
      clusters: [
        cluster,
        {
          name: "xds",
          type: "STATIC",
          typed_extension_protocol_options: {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
              "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
              explicit_http_config: { http2_protocol_options: {} },
            },
          },
          load_assignment: {
            cluster_name: "xds",
            endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: 1 } } } }] }],
          },
        },
      ],
    },
  };
  const file = join(args.out, where, name);
  writeFileSync(file, JSON.stringify(bootstrap, null, 2));
  const envoy = process.env.ENVOY || "envoy";
  try {
    execFileSync(envoy, ["--mode", "validate", "-c", file, "-l", "warning"], { encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    throw new Error(`${envoy} --mode validate -c ${file}:\n${e.stdout ?? ""}${e.stderr ?? e.message}`);
  }
}

for (const [dir, platform] of Object.entries(platforms)) {
  await check(`${dir}: envoy --mode validate accepts the re-entry listener, cluster and bootstrap extension`, () =>
    envoyValidate(platform(), "reentry.envoy.json"),
  );
}

await check("envoy --mode validate refuses the re-entry listener without the bootstrap extension", async () => {
  const reentry = envoyGatewayReentry();
  await refuses("no bootstrap extension", "InternalListener bootstrap extension is mandatory", () =>
    envoyValidate({ ...reentry, extensions: [] }, "reentry-broken.envoy.json"),
  );
});

// --- the store Deployment ------------------------------------------------------------------------

// The store Deployment only sets options the service documents (crates/store/README.md's table).
await check("the store Deployment sets only documented idemgate-store options", () => {
  const documented = readFileSync(join(root, "crates/store/README.md"), "utf8");
  const container = only("store", "apps/v1/Deployment").doc.spec.template.spec.containers[0];
  const names = [
    ...(container.env ?? []).map((e) => e.name),
    ...(container.args ?? []).filter((a) => a.startsWith("--")),
  ];
  if (names.length === 0) throw new Error("the Deployment sets no option at all");
  for (const name of names) {
    if (!documented.includes(`\`${name}`)) throw new Error(`${name} is not in crates/store/README.md`);
  }
  // Mutual TLS: every HTTP path needs a client certificate the kubelet does not have,
  // so the probes check the TLS port; the certificates come from a Secret volume.
  const port = container.ports?.[0]?.name;
  for (const probe of ["livenessProbe", "readinessProbe"]) {
    if (container[probe]?.tcpSocket?.port !== port) throw new Error(`${probe} must check port ${port}`);
  }
  const tls = ["IDEMGATE_STORE_TLS_CERT", "IDEMGATE_STORE_TLS_KEY", "IDEMGATE_STORE_CLIENT_CA"];
  const env = new Map((container.env ?? []).map((e) => [e.name, e.value]));
  const mounts = (container.volumeMounts ?? []).map((m) => m.mountPath);
  for (const name of tls) {
    const path = env.get(name);
    if (!path || !mounts.some((m) => path.startsWith(m + "/"))) {
      throw new Error(`${name} must name a file in a mounted volume (got ${path})`);
    }
  }
  if (env.has("IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED") || (container.args ?? []).includes("--plaintext-unauthenticated")) {
    throw new Error("the example must not turn authentication off");
  }
});

// The store Deployment runs the image `make image-store` built, pinned by its digest.
await check("the store Deployment pins the image make image-store built", () => {
  const container = only("store", "apps/v1/Deployment").doc.spec.template.spec.containers[0];
  if (!container.image.endsWith(`/idemgate-store@sha256:${args["store-digest"]}`)) {
    throw new Error(`image ${container.image} is not idemgate-store@sha256:<the built digest>`);
  }
  const security = container.securityContext ?? {};
  if (security.runAsNonRoot !== true || security.runAsUser !== 65532) {
    throw new Error("the store container must run as the image's non-root user 65532");
  }
});

// --- the validators themselves -------------------------------------------------------------------

await check("the npm schema refuses a broken store Deployment", async () => {
  const broken = structuredClone(only("store", "apps/v1/Deployment").doc);
  broken.spec.replicas = "two";
  await refuses("replicas: \"two\"", "", () => packageValidate("apps/v1/Deployment", broken));
});

// check-jsonschema must refuse `doc` with `spoil` applied (an unknown field, say).
function schemaRefuses(type, { file, doc }, spoil) {
  const broken = structuredClone(doc);
  spoil(broken);
  const brokenFile = file.replace(/\.yaml$/, ".broken.json");
  writeFileSync(brokenFile, JSON.stringify(broken));
  return refuses(`check-jsonschema ${schemas[type]}`, "check-jsonschema", () => jsonschema(type, brokenFile));
}

await check("both validators refuse a broken WasmPlugin", async () => {
  const type = "extensions.istio.io/v1alpha1/WasmPlugin";
  const wasm = only("istio", type);
  const broken = structuredClone(wasm.doc);
  broken.spec.failStrategy = "FAIL_OPEN_SOMETIMES";
  await refuses("failStrategy FAIL_OPEN_SOMETIMES", "", () => packageValidate(type, broken));
  await schemaRefuses(type, wasm, (typo) => {
    typo.spec.sha265 = typo.spec.sha256;
    delete typo.spec.sha256;
  });
});

await check("the npm schema refuses a broken EnvoyFilter", async () => {
  const type = "networking.istio.io/v1alpha3/EnvoyFilter";
  const broken = structuredClone(all("istio", type)[0].doc);
  broken.spec.configPatches[0].patch.operation = "APPEND";
  await refuses("operation APPEND", "", () => packageValidate(type, broken));
});

await check("the npm schema refuses a broken RequestAuthentication", async () => {
  const type = "security.istio.io/v1/RequestAuthentication";
  const broken = structuredClone(only("istio", type).doc);
  broken.spec.jwtRules[0].forwardOriginalToken = "yes";
  await refuses("forwardOriginalToken: \"yes\"", "", () => packageValidate(type, broken));
});

await check("the hand-written schema refuses a broken SecurityPolicy", async () => {
  const type = "gateway.envoyproxy.io/v1alpha1/SecurityPolicy";
  const policy = only("envoy-gateway", type);
  await schemaRefuses(type, policy, (b) => (b.spec.jwt.providers[0].issuers = [b.spec.jwt.providers[0].issuer]));
  await schemaRefuses(type, policy, (b) => (b.spec.jwt.providers[0].localJWKS = { type: "Inline", inline: "{}" }));
  await schemaRefuses(type, policy, (b) => delete b.spec.jwt.providers[0].remoteJWKS.uri);
});

await check("the hand-written schemas refuse a broken EnvoyPatchPolicy and EnvoyProxy bootstrap", async () => {
  const epp = "gateway.envoyproxy.io/v1alpha1/EnvoyPatchPolicy";
  await schemaRefuses(epp, only("envoy-gateway", epp), (b) => (b.spec.jsonPatches[0].operation.opp = "add"));
  await schemaRefuses(epp, only("envoy-gateway", epp), (b) => (b.spec.jsonPatches[0].type = "type.googleapis.com/envoy.config.listener.v3.Listeners"));
  const proxy = "gateway.envoyproxy.io/v1alpha1/EnvoyProxy";
  await schemaRefuses(proxy, only("envoy-gateway", proxy), (b) => delete b.spec.bootstrap.value);
  await schemaRefuses(proxy, only("envoy-gateway", proxy), (b) => (b.spec.bootstrap.type = "Append"));
});

await check("the hand-written schema refuses a broken ClientTrafficPolicy", async () => {
  const type = "gateway.envoyproxy.io/v1alpha1/ClientTrafficPolicy";
  await schemaRefuses(type, only("envoy-gateway", type), (b) => (b.spec.timeout.http.requestTimeout = "30s"));
  await schemaRefuses(type, only("envoy-gateway", type), (b) => (b.spec.timeout.http.requestReceivedTimeout = "thirty seconds"));
});

// --- the upstream timeout stays shorter than the lease across the inner hop ----------
// The filter cannot read Envoy's route timeouts, so the shipped static configurations are checked
// here: on re-entry a claimed request meets its route's timeout on the inner pass, which must be
// no longer than `upstream.timeout` (the exchange's bound) and shorter than the `lease`.

// The checkout demo's envoy.yaml is a template (`${PORT}`, ...): its placeholders are ports and a
// path, which do not take part in this check.
const readYaml = (file) =>
  YAML.parse(readFileSync(join(root, file), "utf8").replace(/\$\{[A-Z_]+\}/g, "1"));
for (const file of ["examples/envoy/envoy.yaml", "examples/checkout/envoy.yaml"]) {
  await check(`${file}: every route timeout is within upstream.timeout, shorter than the lease`, () =>
    routeTimeoutsWithinTheLease(readYaml(file), file),
  );
}
for (const file of ["examples/envoy/envoy.yaml", "examples/checkout/envoy.yaml"]) {
  await check(`${file}: the re-entry marker overwrites an app-sent ${REENTRY_MARK}`, () => {
    for (const [where, marker] of internalMarkers(readYaml(file), file)) checkMarker(marker, where);
  });
}
await check("the marker check refuses a marker that appends", async () => {
  const spoiled = structuredClone(envoyExampleMarker());
  delete spoiled.mutations.response_mutations[0].append.append_action;
  await refuses("the default append action", "must overwrite", () => checkMarker(spoiled, "spoiled"));
  spoiled.mutations.response_mutations[0].append.append_action = "APPEND_IF_EXISTS_OR_ADD";
  await refuses("an appending marker", "must overwrite", () => checkMarker(spoiled, "spoiled"));
  spoiled.mutations.response_mutations.push(structuredClone(spoiled.mutations.response_mutations[0]));
  await refuses("two marks", "nothing else", () => checkMarker(spoiled, "spoiled"));
});
await check("the route timeout check refuses a route that outlasts the exchange", async () => {
  const spoiled = readYaml("examples/envoy/envoy.yaml");
  const wasm = hcmOf(spoiled.static_resources.listeners[0]).http_filters.find((f) => f.name === "envoy.filters.http.wasm");
  const config = JSON.parse(wasm.typed_config.config.configuration.value);
  config.upstream.timeout = "5s";
  wasm.typed_config.config.configuration.value = JSON.stringify(config);
  await refuses("a 15 s route behind a 5 s exchange", "longer than upstream.timeout", () =>
    routeTimeoutsWithinTheLease(spoiled, "spoiled"),
  );
  config.upstream.timeout = "70s";
  wasm.typed_config.config.configuration.value = JSON.stringify(config);
  await refuses("an exchange not shorter than the lease", "not shorter than the lease", () =>
    routeTimeoutsWithinTheLease(spoiled, "spoiled"),
  );
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
