// What examples.mjs checks of an Envoy configuration, as plain functions of the configuration:
// the filter configuration sends detached exchanges only to a re-entry listener, the re-entry
// listener and cluster of a platform are as examples/envoy/envoy.yaml ships them, the marker
// overwrites, and every route timeout stays within the exchange's bound and shorter than the
// lease. Each throws an Error that names what is wrong.

import { isDeepStrictEqual } from "node:util";

export const hcmOf = (listener) =>
  (listener?.filter_chains ?? [])
    .flatMap((chain) => chain.filters ?? [])
    .find((f) => f.name === "envoy.filters.network.http_connection_manager")?.typed_config;

// The marker must overwrite: with header_mutation's default (APPEND_IF_EXISTS_OR_ADD) a value the
// app sent comes first. The filter takes two marks as in doubt, but only an overwriting marker
// lets the app's own answer be stored.
export const REENTRY_MARK = "x-idemgate-reentry";
export const MARK_VALUE = "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%";
export function checkMarker(marker, where) {
  const mutations = marker?.mutations?.response_mutations ?? [];
  const append = mutations[0]?.append;
  if (mutations.length !== 1 || append?.header?.key?.toLowerCase() !== REENTRY_MARK || append.header.value !== MARK_VALUE) {
    throw new Error(`${where}: the marker must set ${REENTRY_MARK}: ${MARK_VALUE}, and nothing else, found ${JSON.stringify(mutations)}`);
  }
  if (append.append_action !== "OVERWRITE_IF_EXISTS_OR_ADD") {
    throw new Error(`${where}: the marker must overwrite an app-sent ${REENTRY_MARK} (append_action: OVERWRITE_IF_EXISTS_OR_ADD), found ${append.append_action ?? "the default, APPEND_IF_EXISTS_OR_ADD"}`);
  }
}

// The markers of a configuration's internal listeners (each one's first HTTP filter).
export function internalMarkers(doc, file) {
  const internal = (doc.static_resources?.listeners ?? []).filter((l) => l.internal_listener);
  if (internal.length === 0) throw new Error(`${file}: no internal listener`);
  return internal.map((l) => [`${file}: listener ${l.name}`, hcmOf(l)?.http_filters?.[0]?.typed_config]);
}

// A detached exchange goes to a re-entry listener only: the fields that send it anywhere else are
// refused (the filter refuses upstream.cluster and routes[].cluster; the opt-out is not shipped).
export function noBypass(config, where) {
  if (!config || typeof config !== "object") throw new Error(`${where}: no filter configuration`);
  for (const field of ["cluster", "cluster_skipping_routes_and_filters"]) {
    if (config.upstream && field in config.upstream) {
      throw new Error(`${where}: upstream.${field} is set (detached exchanges must re-enter: upstream.reentry)`);
    }
  }
  for (const [i, route] of (config.routes ?? []).entries()) {
    if ("cluster" in route) throw new Error(`${where}: routes[${i}].cluster is set`);
  }
  if (typeof config.upstream?.reentry !== "string" || !config.upstream.reentry) {
    throw new Error(`${where}: upstream.reentry must name the re-entry cluster`);
  }
}

export const HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
export const HEADER_MUTATION = "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation";
export const ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
export const INTERNAL_LISTENER = "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener";
// Istio's bootstrap extension, as every Istio proxy's bootstrap has carried it since 1.17
// (tools/packaging/common/envoy_bootstrap.json in istio/istio).
export const ISTIO_BOOTSTRAP_EXTENSION = {
  name: "envoy.bootstrap.internal_listener",
  typed_config: {
    "@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
    type_url: INTERNAL_LISTENER,
    value: { buffer_size_kb: 64 },
  },
};
// HTTP filters of Istio's proxy that upstream Envoy does not have (left out of `envoy --mode validate`).
export const ISTIO_ONLY_FILTERS = new Set(["istio.alpn"]);
// The port the default istio-ingressgateway pod listens on for a Service port (its chart's
// targetPort mapping); Istio names a gateway's HTTP routes http.<that port>.
export const ISTIO_INGRESS_TARGET_PORT = { 80: 8080, 443: 8443 };

// The internal listener names a cluster's endpoints lead to (each must be an internal address).
export function internalEndpoints(cluster, where) {
  if (!cluster) throw new Error(`${where}: no re-entry cluster`);
  const endpoints = (cluster.load_assignment?.endpoints ?? []).flatMap((e) => e.lb_endpoints ?? []);
  if (endpoints.length === 0) throw new Error(`${where}: cluster ${cluster.name} has no endpoint`);
  const names = endpoints.map((e) => e.endpoint?.address?.envoy_internal_address?.server_listener_name);
  if (names.some((n) => typeof n !== "string" || !n)) {
    throw new Error(`${where}: cluster ${cluster.name} has an endpoint that is not an envoy_internal_address`);
  }
  return [...new Set(names)];
}

export const isWasm = (f) =>
  String(f?.name).startsWith("envoy.filters.http.wasm") || String(f?.typed_config?.["@type"]).endsWith(".wasm.v3.Wasm");

// The re-entry listener and cluster of one platform, against the filter's configuration.
export function checkReentry({ where, config, listener, cluster, routeName, marker }) {
  if (cluster?.name !== config.upstream.reentry) {
    throw new Error(`${where}: no cluster named ${config.upstream.reentry} (upstream.reentry) is added`);
  }
  const targets = internalEndpoints(cluster, where);
  if (!listener || !targets.includes(listener.name) || targets.length !== 1) {
    throw new Error(`${where}: cluster ${cluster.name} leads to ${targets.join(", ")}, not to the added internal listener ${listener?.name}`);
  }
  if (!listener.internal_listener || typeof listener.internal_listener !== "object" || "address" in listener) {
    throw new Error(`${where}: listener ${listener.name} must be an internal listener (internal_listener: {}, no address)`);
  }
  if (listener.filter_chains?.length !== 1 || listener.filter_chains[0].filters?.length !== 1) {
    throw new Error(`${where}: listener ${listener.name} must have one filter chain with one filter (the HCM)`);
  }
  const hcm = listener.filter_chains[0].filters[0].typed_config;
  if (hcm?.["@type"] !== HCM) throw new Error(`${where}: listener ${listener.name}'s filter is not an HTTP connection manager`);
  if ("route_config" in hcm || hcm.rds?.route_config_name !== routeName || typeof hcm.rds?.config_source?.ads !== "object") {
    throw new Error(`${where}: listener ${listener.name} must share the route configuration ${routeName} by RDS over ADS, found ${JSON.stringify(hcm.rds ?? hcm.route_config)}`);
  }
  const filters = hcm.http_filters ?? [];
  const first = filters[0];
  if (first?.disabled || !isDeepStrictEqual(first?.typed_config, marker)) {
    throw new Error(`${where}: the first HTTP filter of ${listener.name} must be examples/envoy/envoy.yaml's marker ${JSON.stringify(marker)}, found ${JSON.stringify(first)}`);
  }
  if (filters.at(-1)?.typed_config?.["@type"] !== ROUTER || filters.slice(0, -1).some((f) => f.typed_config?.["@type"] === ROUTER)) {
    throw new Error(`${where}: the router must be the last HTTP filter of ${listener.name}, and only there`);
  }
  const wasm = filters.filter(isWasm);
  if (wasm.length) throw new Error(`${where}: listener ${listener.name} runs a Wasm filter (${wasm.map((f) => f.name).join(", ")}): a request would be claimed twice`);
}

export function hasInternalListenerExtension(extensions) {
  return (extensions ?? []).some(
    (e) =>
      e.name === "envoy.bootstrap.internal_listener" &&
      (e.typed_config?.["@type"] === INTERNAL_LISTENER || e.typed_config?.type_url === INTERNAL_LISTENER),
  );
}

// "15s", "0.3s", "250ms", "1m", "24h" → milliseconds.
export function millis(text, where) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(String(text));
  if (!m) throw new Error(`${where}: cannot read the duration ${JSON.stringify(text)}`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2]];
}

export function routeTimeoutsWithinTheLease(doc, file) {
  let config;
  const routeConfigs = [];
  for (const listener of doc.static_resources.listeners) {
    const hcm = hcmOf(listener);
    if (hcm?.route_config) routeConfigs.push(hcm.route_config);
    for (const http of hcm?.http_filters ?? []) {
      if (http.name === "envoy.filters.http.wasm") {
        config = JSON.parse(http.typed_config.config.configuration.value);
      }
    }
  }
  if (!config?.upstream?.reentry) throw new Error(`${file}: the filter does not re-enter`);
  const lease = millis(config.lease ?? "60s", `${file}: lease`);
  const upstream = millis(config.upstream.timeout ?? "15s", `${file}: upstream.timeout`);
  if (upstream >= lease) throw new Error(`${file}: upstream.timeout ${upstream} ms is not shorter than the lease ${lease} ms`);
  let routes = 0;
  for (const rc of routeConfigs) {
    for (const vh of rc.virtual_hosts ?? []) {
      for (const r of vh.routes ?? []) {
        // Routes that never carry a claimed request: Envoy's own answers, and the filter disabled.
        if (!r.route || r.typed_per_filter_config?.["envoy.filters.http.wasm"]?.disabled) continue;
        routes++;
        // Envoy's default route timeout is 15 s; 0 is none at all.
        const timeout = millis(r.route.timeout ?? "15s", `${file}: route ${JSON.stringify(r.match)}`);
        if (timeout === 0 || timeout > upstream) {
          throw new Error(`${file}: route ${JSON.stringify(r.match)} has timeout ${timeout} ms (0 = none), longer than upstream.timeout ${upstream} ms: a claimed request could still be running upstream when its exchange gives up`);
        }
      }
    }
  }
  if (routes === 0) throw new Error(`${file}: no routes found`);
}
