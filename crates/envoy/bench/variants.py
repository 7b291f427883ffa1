"""The requests `make bench` measures, one row each: (id, which Envoy, what the report calls it,
method, path, body size, how keys are made, whether the upstream holds the request). Used by
bench.py to run them and report.py to write them."""

VARIANTS = [
    ("a_get", "plain", "(a) plain Envoy, GET", "GET", "/x", 0, "none", False),
    ("b_get", "idemgate", "(b) idemgate, GET /static/ (filter disabled per route, as shipped)", "GET", "/static/x", 0, "none", False),
    ("b2_get", "idemgate", "(b′) idemgate, GET / (filter runs, method not guarded)", "GET", "/x", 0, "none", False),
    ("a_post1k", "plain", "(a) plain Envoy, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("n_post1k", "noop", "(a′) no-op wasm filter + buffer, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("c_json1k", "idemgate", "(c) idemgate json, fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("c_raw1k", "idemgate-raw", "(c) idemgate raw, fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("a_post64k", "plain", "(a) plain Envoy, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("n_post64k", "noop", "(a′) no-op wasm filter + buffer, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("c_json64k", "idemgate", "(c) idemgate json, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("c_raw64k", "idemgate-raw", "(c) idemgate raw, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("n_post1k_c1", "noop", "(a′) no-op, POST 1 KB, 1 connection (unloaded latency)", "POST", "/orders", 1024, "fresh", False),
    ("c_json1k_c1", "idemgate", "(c) idemgate json, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("c_raw1k_c1", "idemgate-raw", "(c) idemgate raw, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("f_json1k", "idemgate-direct", "(f) idemgate json, detached straight to the cluster (skipping routes and filters), fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("f_json64k", "idemgate-direct", "(f) idemgate json, detached straight to the cluster, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("f_json1k_c1", "idemgate-direct", "(f) idemgate json, detached straight to the cluster, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("r_json1k", "idemgate-reentry", "(r) idemgate json, detached through re-entry (as shipped), fresh key, POST 1 KB", "POST", "/orders", 1024, "fresh", False),
    ("r_json64k", "idemgate-reentry", "(r) idemgate json, detached through re-entry, fresh key, POST 64 KB", "POST", "/orders", 65536, "fresh", False),
    ("r_json1k_c1", "idemgate-reentry", "(r) idemgate json, detached through re-entry, POST 1 KB, 1 connection", "POST", "/orders", 1024, "fresh", False),
    ("d_replay1k", "idemgate", "(d) idemgate json, replay of completed keys, POST 1 KB", "POST", "/orders", 1024, "cycle", False),
    ("e_409", "idemgate", "(e) idemgate json, key in flight: 409, POST 1 KB", "POST", "/hold", 1024, "fixed", True),
]
