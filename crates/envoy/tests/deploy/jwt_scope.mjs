// What examples.mjs checks of the platforms' scope: the filter configuration of the WasmPlugin and
// the EnvoyExtensionPolicy is examples/envoy/envoy.yaml's but for `scope`, and that scope reads the
// `sub` claim from where the platform's JWT manifest has jwt_authn put the verified payload, on the
// same workloads (Istio) or route (Envoy Gateway) as the filter. Plain functions of the manifests;
// each throws an Error that names what is wrong.
//
// Where each platform puts the payload (`payload_in_metadata` of the jwt_authn it generates):
//  - Istio (RequestAuthentication): "payload" for every rule (pilot's filters.EnvoyJwtFilterPayload);
//  - Envoy Gateway (SecurityPolicy jwt.providers[]): the provider's issuer
//    (internal/xds/translator/jwt.go); a provider without an issuer keeps no payload.

import { isDeepStrictEqual } from "node:util";

export const JWT_AUTHN = "envoy.filters.http.jwt_authn";
export const ISTIO_PAYLOAD_KEY = "payload";

// The scope source that reads `claim` from the payload kept under `key`.
export const claimSource = (key, claim = "sub") => ({
  property: ["metadata", "filter_metadata", JWT_AUTHN, key, claim],
});

// `config` without its scope equals `defaults` without theirs: the one difference allowed.
export function sameConfigButScope(config, defaults, where) {
  const { scope: _mine, ...rest } = config ?? {};
  const { scope: _theirs, ...expected } = defaults ?? {};
  if (!isDeepStrictEqual(rest, expected)) {
    throw new Error(`${where} differs from examples/envoy/envoy.yaml's in more than scope:\n${JSON.stringify(rest)}\n${JSON.stringify(expected)}`);
  }
}

// The scope must be the claim under each of `keys`, in order, then the peer address.
export function checkScope(scope, keys, where) {
  const expected = [...keys.map((key) => claimSource(key)), "peer"];
  if (!isDeepStrictEqual(scope, expected)) {
    throw new Error(`${where}: scope must read sub where the JWT policy puts the payload, ${JSON.stringify(expected)}, found ${JSON.stringify(scope)}`);
  }
}

// Istio: the RequestAuthentications that select the WasmPlugin's workloads in its namespace (at
// least one, with rules). Their jwt_authn keeps every payload under "payload".
export function istioPayloadKeys(wasmPlugin, requestAuthentications) {
  const { namespace } = wasmPlugin.metadata;
  const selector = wasmPlugin.spec.selector?.matchLabels;
  const selecting = requestAuthentications.filter(
    (r) => r.metadata.namespace === namespace && isDeepStrictEqual(r.spec?.selector?.matchLabels, selector),
  );
  if (selecting.length === 0) {
    throw new Error(`istio: no RequestAuthentication selects the WasmPlugin's workloads (${JSON.stringify(selector)} in ${namespace})`);
  }
  for (const r of selecting) {
    if (!(r.spec.jwtRules?.length > 0) || r.spec.jwtRules.some((rule) => !rule.issuer)) {
      throw new Error(`istio: RequestAuthentication ${r.metadata.name} must have jwtRules, each with an issuer`);
    }
  }
  return [ISTIO_PAYLOAD_KEY];
}

// Envoy Gateway: the one SecurityPolicy in the EnvoyExtensionPolicy's namespace that targets each
// HTTPRoute the EnvoyExtensionPolicy targets; its providers' issuers, in order.
export function envoyGatewayPayloadKeys(extensionPolicy, securityPolicies) {
  const { namespace } = extensionPolicy.metadata;
  const routes = extensionPolicy.spec.targetRefs.filter((t) => t.kind === "HTTPRoute").map((t) => t.name);
  const targets = (p) => p.spec.targetRefs?.filter((t) => t.kind === "HTTPRoute").map((t) => t.name) ?? [];
  const covering = securityPolicies.filter(
    (p) => p.metadata.namespace === namespace && p.spec.jwt && routes.every((r) => targets(p).includes(r)),
  );
  if (routes.length === 0 || covering.length !== 1) {
    throw new Error(`envoy-gateway: ${covering.length} SecurityPolicies with jwt target the guarded HTTPRoutes ${JSON.stringify(routes)} in ${namespace}, expected 1`);
  }
  const providers = covering[0].spec.jwt.providers ?? [];
  const issuers = providers.map((p) => p.issuer);
  if (issuers.length === 0 || issuers.some((issuer) => !issuer)) {
    throw new Error(`envoy-gateway: SecurityPolicy ${covering[0].metadata.name}: every jwt provider needs an issuer (the payload is kept under it)`);
  }
  return issuers;
}
