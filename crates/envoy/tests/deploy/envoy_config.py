"""The Envoy configuration the deploy test runs: the filter fetched with `code.remote` (the
module server's URL and its SHA-256), the example's routes, and the re-entry listener claimed
requests go back through, with the filters that follow idemgate. Used by deploy_test.py."""

import json

FILTER_CONFIG = {
    "routes": [{"prefix": "/orders", "methods": ["POST", "PATCH"], "key": "required"}],
    "scope": [{"header": "authorization"}, "peer"],
    "fingerprint": {"mode": "json", "headers": ["content-type"]},
    "lease": "60s",
    # Claimed requests go back into Envoy through the re-entry listener (`reentry_listener`).
    "upstream": {"reentry": "idemgate_reentry"},
}


def envoy_config(admin_port, port, module_port, module_sha256, upstream_port):
    filters = [
        {
            "name": "envoy.filters.http.wasm",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
                "config": {
                    "name": "idemgate",
                    "root_id": "idemgate",
                    "failure_policy": "FAIL_CLOSED",
                    "vm_config": {
                        "vm_id": "idemgate",
                        "runtime": "envoy.wasm.runtime.v8",
                        "code": {
                            "remote": {
                                "http_uri": {
                                    "uri": f"http://127.0.0.1:{module_port}/plugin.wasm",
                                    "cluster": "module_server",
                                    "timeout": "10s",
                                },
                                "sha256": module_sha256,
                                "retry_policy": {"num_retries": 1},
                            }
                        },
                    },
                    "configuration": {
                        "@type": "type.googleapis.com/google.protobuf.StringValue",
                        "value": json.dumps(FILTER_CONFIG),
                    },
                },
            },
        },
    ] + AFTER_IDEMGATE
    routes = {
        "virtual_hosts": [
            {
                "name": "app",
                "domains": ["*"],
                "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "app", "timeout": "15s"}}],
            }
        ]
    }

    def cluster(name, p):
        return {
            "name": name,
            "connect_timeout": "1s",
            "type": "STATIC",
            "load_assignment": {
                "cluster_name": name,
                "endpoints": [
                    {"lb_endpoints": [{"endpoint": {"address": _addr(p)}}]}
                ],
            },
        }

    return {
        "admin": {"address": _addr(admin_port)},
        "static_resources": {
            "listeners": [
                {
                    "name": "main",
                    "address": _addr(port),
                    "filter_chains": [
                        {
                            "filters": [
                                {
                                    "name": "envoy.filters.network.http_connection_manager",
                                    "typed_config": {
                                        "@type": "type.googleapis.com/envoy.extensions.filters."
                                        "network.http_connection_manager.v3.HttpConnectionManager",
                                        "stat_prefix": "ingress",
                                        "route_config": routes,
                                        "http_filters": filters,
                                    },
                                }
                            ]
                        }
                    ],
                },
                reentry_listener(routes),
            ],
            "clusters": [
                cluster("app", upstream_port),
                cluster("module_server", module_port),
                REENTRY_CLUSTER,
            ],
        },
        "bootstrap_extensions": [
            {
                "name": "envoy.bootstrap.internal_listener",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.bootstrap."
                    "internal_listener.v3.InternalListener"
                },
            }
        ],
    }


# The filters that follow idemgate in the main chain; the re-entry listener runs them too.
AFTER_IDEMGATE = [
    {
        "name": "envoy.filters.http.buffer",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
            "max_request_bytes": 1048576,
        },
    },
    {
        "name": "envoy.filters.http.router",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
    },
]

REENTRY_CLUSTER = {
    "name": "idemgate_reentry",
    "load_assignment": {
        "cluster_name": "idemgate_reentry",
        "endpoints": [
            {
                "lb_endpoints": [
                    {
                        "endpoint": {
                            "address": {
                                "envoy_internal_address": {"server_listener_name": "idemgate_reentry"}
                            }
                        }
                    }
                ]
            }
        ],
    },
}


def reentry_listener(routes):
    """The internal listener a detached exchange comes back into: the main listener's `routes`
    (the same value), the marker first, then the filters after idemgate (never idemgate)."""
    marker = {
        "name": "envoy.filters.http.header_mutation",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3."
            "HeaderMutation",
            "mutations": {
                "response_mutations": [
                    {
                        "append": {
                            "header": {
                                "key": "x-idemgate-reentry",
                                "value": "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%",
                            },
                            "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
                        }
                    }
                ]
            },
        },
    }
    return {
        "name": "idemgate_reentry",
        "internal_listener": {},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters."
                            "network.http_connection_manager.v3.HttpConnectionManager",
                            "stat_prefix": "idemgate_reentry",
                            "route_config": routes,
                            "http_filters": [marker] + AFTER_IDEMGATE,
                        },
                    }
                ]
            }
        ],
    }


def _addr(port):
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}
