"""The Envoy configurations `make bench` runs, as Python values: the plain Envoy and the
do-nothing Wasm filter it compares against, the stand-in upstream, and examples/envoy/envoy.yaml as
shipped, patched for a run (ports, the .wasm, capacity, the forward path). Used by bench.py and
fleet.py."""

import json
import os
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
if not TARGET.is_absolute():
    TARGET = ROOT / TARGET
FILTER_WASM = Path(os.environ.get("IDEMGATE_FILTER_WASM", TARGET / "wasm32-wasip1/release/idemgate_envoy.wasm"))
NOOP_WASM = TARGET / "wasm32-wasip1/release/examples/noop_filter.wasm"


def hcm(routes, filters):
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "ingress",
            "route_config": {"virtual_hosts": [{"name": "app", "domains": ["*"], "routes": routes}]},
            "http_filters": filters + [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
        },
    }


BUFFER = {"name": "envoy.filters.http.buffer", "typed_config": {
    "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer", "max_request_bytes": 1048576}}


def listener(filters):
    return {"name": "main", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
            "filter_chains": [{"filters": filters}]}


def cluster(name, port):
    return {"name": name, "connect_timeout": "1s", "type": "STATIC", "load_assignment": {
        "cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
            "socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]}}


def upstream_config():
    routes = [{"match": {"prefix": "/"}, "direct_response": {
        "status": 201, "body": {"inline_string": '{"id":"ord_123","status":"created"}'}}}]
    return {"static_resources": {"listeners": [listener([hcm(routes, [BUFFER])])]}}


def plain_config(up):
    routes = [{"match": {"prefix": "/"}, "route": {"cluster": "app"}}]
    return {"static_resources": {"listeners": [listener([hcm(routes, [])])], "clusters": [cluster("app", up)]}}


def noop_config(up):
    wasm = {"name": "envoy.filters.http.wasm", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
        "config": {"name": "noop", "root_id": "noop", "vm_config": {
            "vm_id": "noop", "runtime": "envoy.wasm.runtime.v8",
            "code": {"local": {"filename": str(NOOP_WASM)}}}}}}
    routes = [{"match": {"prefix": "/"}, "route": {"cluster": "app"}}]
    return {"static_resources": {"listeners": [listener([hcm(routes, [wasm, BUFFER])])],
                                 "clusters": [cluster("app", up)]}}


REENTRY = "idemgate_reentry"  # the internal listener and its cluster (examples/envoy/envoy.yaml)
MARKER = {"name": "envoy.filters.http.header_mutation", "typed_config": {
    "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
    "mutations": {"response_mutations": [{"append": {
        "header": {"key": "x-idemgate-reentry", "value": "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%"},
        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}}]}}}


def main_listener(config):
    """The listener clients connect to (not the internal re-entry listener)."""
    return next(lst for lst in config["static_resources"]["listeners"] if "internal_listener" not in lst)


def hcm_config(lst):
    return lst["filter_chains"][0]["filters"][0]["typed_config"]


def wasm_config(config):
    """The idemgate wasm filter's `config` in the main listener's chain."""
    filters = hcm_config(main_listener(config))["http_filters"]
    return next(f for f in filters if f["name"] == "envoy.filters.http.wasm")["typed_config"]["config"]


def ensure_reentry(config):
    """The re-entry listener `idemgate_reentry` and its cluster, as examples/envoy/envoy.yaml ships
    them: kept if the example has them, added the same way otherwise (the main listener's route
    configuration, the same object, so both passes route alike; the marker, then the filters after
    idemgate). Returns the re-entry listener."""
    res = config["static_resources"]
    inner = next((lst for lst in res["listeners"] if lst.get("name") == REENTRY), None)
    if inner is None:
        outer = hcm_config(main_listener(config))
        filters = outer["http_filters"]
        after = filters[next(i for i, f in enumerate(filters) if f["name"] == "envoy.filters.http.wasm") + 1:]
        inner = {"name": REENTRY, "internal_listener": {}, "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": REENTRY, "route_config": outer["route_config"],
                "http_filters": [MARKER] + after}}]}]}
        res["listeners"].append(inner)
    config.setdefault("bootstrap_extensions", [])
    if not any(e["name"] == "envoy.bootstrap.internal_listener" for e in config["bootstrap_extensions"]):
        config["bootstrap_extensions"].append({"name": "envoy.bootstrap.internal_listener", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener"}})
    return inner


def reentry_cluster(shipped=None):
    """The example's own `idemgate_reentry` cluster (as shipped: HTTP/2 into the internal
    listener), else a plain one."""
    for c in shipped or []:
        if c.get("name") == REENTRY:
            return c
    return {"name": REENTRY, "load_assignment": {"cluster_name": REENTRY, "endpoints": [{"lb_endpoints": [
        {"endpoint": {"address": {"envoy_internal_address": {"server_listener_name": REENTRY}}}}]}]}}


def idemgate_config(up, hold, mode="json", capacity=2_000_000, wasm_file=None, forward="router"):
    """examples/envoy/envoy.yaml as shipped, patched: ports, .wasm path, capacity (so that a run's
    fresh keys never fill the store), fingerprint mode, and a /hold route whose upstream accepts
    and never answers (its 0.3 s timeout leaves the key in doubt: kept in flight, so retries get 409).
    How a claimed request reaches the upstream (`forward`):
      * "router": Envoy's router carries it (the example's `upstream` section removed);
      * "reentry": the filter's detached exchange back into Envoy through the internal listener
        `idemgate_reentry` (`upstream.reentry`: as shipped);
      * "direct": the detached exchange straight to the `app` cluster, skipping the routes and the
        filters after idemgate (`upstream.cluster_skipping_routes_and_filters`: the first detached path)."""
    config = yaml.safe_load((ROOT / "examples/envoy/envoy.yaml").read_text())
    res = config["static_resources"]
    lst = main_listener(config)
    lst["address"]["socket_address"].update(address="127.0.0.1", port_value=0)
    ensure_reentry(config)
    # The route configuration is one object for both passes (a YAML anchor, or ensure_reentry).
    routes = hcm_config(lst)["route_config"]["virtual_hosts"][0]["routes"]
    routes.insert(len(routes) - 1, {"match": {"prefix": "/hold"}, "route": {"cluster": "hold", "timeout": "0.3s"}})
    wasm = wasm_config(config)
    wasm["vm_config"]["code"]["local"]["filename"] = str(wasm_file or FILTER_WASM)
    core = json.loads(wasm["configuration"]["value"])
    core["capacity"] = capacity
    if capacity > 10000:
        # Split over this many fill shards, the example's `max_memory` (256 MiB) leaves each too
        # little for one answer of `max_response_body`, and is refused, as it should be; this
        # store is large only so that a run's fresh keys never fill it, and its answers are a few
        # bytes: a bound that fits (what it may take is what its answers really take).
        core["max_memory"] = "32GiB"
    core["fingerprint"]["mode"] = mode
    # The 409 variant measures the answer a duplicate of a key in flight gets at once: with the
    # example's `in_flight.wait` it would be held for the wait instead (the held key never ends).
    core.pop("in_flight", None)
    if forward == "router":
        core.pop("upstream", None)
    else:
        upstream = core["upstream"] = {k: v for k, v in (core.get("upstream") or {}).items()
                                       if k not in ("cluster", "reentry", "cluster_skipping_routes_and_filters")}
        if forward == "reentry":
            upstream["reentry"] = REENTRY
        else:
            upstream["cluster_skipping_routes_and_filters"] = "app"
        # /hold's exchange ends as its route's timeout would (in doubt, kept in flight).
        core["routes"].insert(0, {"prefix": "/hold", "key": "optional", "upstream_timeout": "300ms"})
        # Every exchange comes from the load generator's one address: room for all of them in
        # the relay budget (each counted at upstream.max_body), so the runs measure the exchanges,
        # not the budget's refusals.
        core["relay_budget"] = core["relay_budget_per_peer"] = "8GiB"
    wasm["configuration"]["value"] = json.dumps(core)
    res["clusters"] = [cluster("app", up), cluster("hold", hold), reentry_cluster(res.get("clusters"))]
    return config
