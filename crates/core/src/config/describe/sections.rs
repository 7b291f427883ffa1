//! The document's own fields and its sections but the route's: their shapes, defaults and
//! meanings.

use super::{field, required, Section, Type};

/// `key_format`: `"uuid"`, `{"prefix": text}` or `{"pattern": text}`.
pub(super) const KEY_FORMAT: [Type; 3] = [
    Type::Choice(&["uuid"]),
    Type::Member("prefix", &Type::Text),
    Type::Member("pattern", &Type::Text),
];

/// A `scope` source: `"peer"`, `{"header": name, "verified"?: bool}` or
/// `{"property": [segment, ...]}`.
const SCOPE_SOURCE: Type = Type::OneOf(&[
    Type::Choice(&["peer"]),
    Type::Section("scope[]"),
    Type::Member("property", &Type::Array(&Type::Text)),
]);

pub(super) const ROOT: Section = Section {
    path: "",
    about: r##"The filter's `configuration` (and `Policy::from_json`) is one JSON object; every field is optional and unknown fields are refused."##,
    nullable: true,
    fields: &[
        field(
            "header",
            Type::Header,
            r##"`"idempotency-key"`"##,
            r##"request header carrying the key"##,
        ),
        field(
            "routes",
            Type::Array(&Type::Section("routes[]")),
            r##"`[{"prefix": "/", "methods": ["POST","PATCH"], "key": "optional"}]`"##,
            r##"guarded routes, first match wins; a route that an earlier route always matches first (for any of its methods) is refused, naming both"##,
        ),
        field(
            "key_format",
            Type::OneOf(&KEY_FORMAT),
            r##"absent"##,
            r##"the default of every API route's own field of the same name (callback routes take only their own). The shapes of [`routes[].key_format`](#routes-key_format)."##,
        ),
        field(
            "key_mismatch",
            Type::Choice(&["refuse", "ignore"]),
            r##"`"refuse"`"##,
            r##"the default of every API route's own field of the same name (callback routes take only their own). The choices of [`routes[].key_mismatch`](#routes-key_mismatch)."##,
        ),
        field(
            "key_scope",
            Type::Choice(&["route", "client"]),
            r##"`"route"`"##,
            r##"the default of every API route's own field of the same name (callback routes take only their own). The choices of [`routes[].key_scope`](#routes-key_scope)."##,
        ),
        field(
            "upstream",
            Type::Section("upstream"),
            r##"absent (router path everywhere)"##,
            r##"how a request that claims its key reaches the upstream: the re-entry cluster (or the opt-out), the detached exchanges' timeout and body bound (fields below)"##,
        ),
        field(
            "scope",
            Type::Array(&SCOPE_SOURCE),
            r##"`[{"header":"authorization"}, "peer"]`"##,
            r##"whose key it is: the first source present is used; only these sources count (no fallback). An empty or whitespace-only value is absent. `{"header": NAME}` (the client's own word: its records are charged to its address too, see `shares`), `{"header": NAME, "verified": true}` (a header Envoy itself sets before this filter — `jwt_authn`'s `claim_to_headers`, an `ext_authz` response header — overwriting whatever the client sent: charged to the identity alone), `{"property": [path…]}` (an Envoy property such as a JWT claim in dynamic metadata: verified when the path starts with `metadata` or `filter_state` — what an earlier filter established — and the client's own word otherwise, e.g. `request.*`, the TLS SNI, `source.port`), `"peer"` (downstream address — the connection's only with `use_remote_address: true`: see [the listener settings](../deploy/envoy.md#listener-settings)). Values are hashed into the storage key, never stored in clear"##,
        ),
        field(
            "fingerprint",
            Type::Section("fingerprint"),
            r##"absent (every field's default)"##,
            r##"what makes two requests with one key the same request (fields below)"##,
        ),
        field(
            "ttl",
            Type::Duration,
            r##"`"24h"`"##,
            r##"life of a record"##,
        ),
        field(
            "lease",
            Type::Duration,
            r##"`"60s"`"##,
            r##"how long a claim is exclusive before a retry may take it over; ≤ `ttl`"##,
        ),
        field(
            "in_flight",
            Type::Section("in_flight"),
            r##"absent"##,
            r##"what a duplicate of a request still in flight gets, on every route that does not say its own (fields below)"##,
        ),
        field(
            "policy_path",
            Type::OneOf(&[Type::Path, Type::False]),
            r##"`"/.well-known/idempotency"`"##,
            r##"where the edge answers `GET` with the idempotency policy it runs, as JSON (`docs/semantics.md` §12); `false`: the path is the upstream's"##,
        ),
        field(
            "problems",
            Type::Section("problems"),
            r##"absent (every field's default)"##,
            r##"how the edge writes its problem answers (fields below)"##,
        ),
        field(
            "replay_headers",
            Type::Array(&Type::Header),
            r##"content-type, content-language, content-encoding, location, etag, last-modified, cache-control, link, vary"##,
            r##"response headers stored and replayed; `set-cookie`, hop-by-hop, `date`, `server`, `x-envoy-*`, `idempotent-replayed`, `idempotent-degraded` are refused"##,
        ),
        field(
            "store_responses",
            Type::Choice(&["not_done", "all", "2xx"]),
            r##"`"not_done"`"##,
            r##"`"not_done"`: store every upstream answer except `release_statuses`; `"all"`: store everything once started (Stripe-like); `"2xx"`: store only successes"##,
        ),
        field(
            "release_statuses",
            Type::Array(&Type::Integer(100, 599)),
            r##"`[408,425,429,502,503,504]`"##,
            r##"with `"not_done"`: statuses by which the upstream says it did not act"##,
        ),
        field(
            "max_request_body",
            Type::Size,
            r##"`"1MiB"`"##,
            r##"larger guarded requests get 413"##,
        ),
        field(
            "hashing_budget",
            Type::Size,
            r##"`"64MiB"` (at least `max_request_body` × the copies a route keeps)"##,
            r##"body bytes all streams of one Envoy worker (one VM) may have in fingerprinting at once — what the JSON hasher keeps for open objects is bounded by them — each copy of a body the filter keeps counted: a body key source's, the sequencer's and a detached exchange's copy (so up to 4 × `max_request_body` per stream). A stream that would go over it gets 503 `hashing_budget_exceeded` (`Retry-After: 1`), never a VM out of memory; its share is returned when its hashing ends (a detached exchange's copy when the exchange ends: Envoy keeps the body it sends until then). Set Envoy's `request_timeout` (30 s in `examples/envoy/envoy.yaml`) so slow bodies cannot hold it"##,
        ),
        field(
            "hashing_budget_per_peer",
            Type::Size,
            r##"an eighth of `hashing_budget`, at least what one stream needs (8 MiB): four address groups at their part leave half of it to others"##,
            r##"the part of `hashing_budget` one client's streams may hold together — a client is its address group as the shares count it (`source.address` without the port, masked by `shares.ipv4_prefix` / `shares.ipv6_prefix`: an IPv6 address's /64 by default) — so one client holding hundreds of slow bodies open leaves the rest to others; past it that client's streams get 503 `hashing_budget_exceeded`. At most `hashing_budget`; at least `max_request_body` × the copies a route keeps"##,
        ),
        field(
            "relay_budget",
            Type::Size,
            r##"64 × `upstream.max_body` (`"512MiB"` by default; at least `upstream.max_body`)"##,
            r##"answer bytes one Envoy worker (one VM) may have in transit on detached exchanges: Envoy's async client buffers each answer whole before the filter reads it (measured in Envoy 1.40: it sets no bound of its own, and buffers past `upstream.max_body` too), so every exchange reserves `upstream.max_body` from this once its claim is won and before anything is sent, and gives it back when its answer has been read (or it ended otherwise: reset, timeout). An exchange that does not fit is answered 503 `relay_budget_exceeded` and its key released — it was never forwarded, so no success is refused and the retry runs. 64 exchanges per worker, so that a client's default part is eight: a provider's burst of callbacks from one address passes on every worker. An app that may answer past `upstream.max_body` costs Envoy more than the budget counts"##,
        ),
        field(
            "relay_budget_per_peer",
            Type::Size,
            r##"an eighth of `relay_budget`, at least one exchange (64 MiB, eight exchanges, by default)"##,
            r##"the part of `relay_budget` one client's exchanges may hold together (its address group, as for `hashing_budget_per_peer`): past it only that client gets the 503, and four address groups at their part leave half of the budget to others"##,
        ),
        field(
            "max_response_body",
            Type::Size,
            r##"`"1MiB"`"##,
            r##"larger responses pass through untouched but are stored without body (so is one whose body finds no room in `max_memory`): their replay carries `Idempotent-Body-Omitted: true` and no header that describes the body ([A replay without its body](../guide/concepts.md#a-replay-without-its-body))"##,
        ),
        field(
            "capacity",
            Type::Integer(1, 4_294_967_295),
            r##"`10000`"##,
            r##"records the store holds at most (see `max_memory` for the bound in bytes). With `store.remote` it sizes only the shares (their percentages are of it): set it to the records the fleet's store should hold"##,
        ),
        field(
            "records_per_cell",
            Type::Integer(1, 64),
            r##"`8`"##,
            r##"records per store cell (`capacity / records_per_cell` cells). Changing it or `capacity` needs an Envoy restart: a reload (LDS, a new filter config on the same `vm_id`) with another layout is refused with `rejected: the store layout would change …`, and the running configuration keeps serving — another layout would remap every key and lose the stored records"##,
        ),
        field(
            "shares",
            Type::Section("shares"),
            r##"absent (every field's default)"##,
            r##"what one client, one identity and one callback route may hold in the store while it is under pressure (fields below)"##,
        ),
        field(
            "max_memory",
            Type::Size,
            r##"`"256MiB"`"##,
            r##"the local store's byte bound for stored answers: what a sidecar can spare. Each fill shard (128 cells, see `shares.pressure`) keeps its records' part of it (a tenth in the default store); an answer whose body would take its shard past that part is stored without its body — its client got it whole, a retry gets the honest no-body replay ([A replay without its body](../guide/concepts.md#a-replay-without-its-body)), never a second execution. The store's memory is then at most `max_memory` + `capacity` (rounded up to whole cells) × (60 KiB of replayed headers, Envoy's own response-header limit, if any header is replayed, + 160 bytes per record) for the records kept without a body: 256 MiB + 587 MiB by default in the worst case of every answer carrying 60 KiB of headers, 256 MiB + 1.5 MiB for 10,000 records with small headers. Refused (with both numbers, and the least `max_memory` that would do) when the smallest shard's part cannot hold one answer of `max_response_body` with its headers — a `capacity` in the millions needs a larger `max_memory` or a smaller `max_response_body`. The local store only: with `store.remote` it is what the byte shares' percentages are of"##,
        ),
        field(
            "on_store_full",
            Type::Choice(&["reject", "pass_through"]),
            r##"`"reject"`"##,
            r##"`"reject"` (503 + `Retry-After`) or `"pass_through"` (forward unprotected, the answer marked `Idempotent-Degraded: store_full`) when a cell is full of live records — live records are never evicted"##,
        ),
        field(
            "on_store_error",
            Type::Choice(&["reject", "pass_through"]),
            r##"`"reject"`"##,
            r##"the same choice when the store fails (passed through: `Idempotent-Degraded: store_unavailable`)"##,
        ),
        field(
            "store",
            Type::Section("store"),
            r##"absent (`{"kind": "local"}`)"##,
            r##"where records are kept: this Envoy's shared data, or the store service a fleet shares (fields below)"##,
        ),
        field(
            "token",
            Type::Section("token"),
            r##"absent (tokens off)"##,
            r##"one-time tokens: a secret, their life, the issuing endpoint and the header that carries them (fields below)"##,
        ),
    ],
};

pub(super) const IN_FLIGHT: Section = Section {
    path: "in_flight",
    about: r##"Every route's default for a duplicate of a request still in flight."##,
    nullable: true,
    fields: &[field(
        "wait",
        Type::Duration,
        r##"absent (`"0s"`: off)"##,
        r##"every route's default: how long a duplicate of a request in flight (same scope, key and payload) waits for the first's answer instead of getting 409 — replayed once stored, or 409 when the wait is over (or the worker holds 16 waiters on the key, 1024 in all, or 256 of the request's payer — its address group, or its verified identity — so one client cannot take the others' room); at most `"60s"` and shorter than `lease`"##,
    )],
};

pub(super) const VERIFIED_HEADER: Section = Section {
    path: "scope[]",
    about: r##"A scope source naming a header, as an object: `{"header": NAME}`, or `{"header": NAME, "verified": true}` for a header Envoy itself sets before this filter (see [`scope`](#scope))."##,
    nullable: false,
    fields: &[
        required(
            "header",
            Type::Header,
            r##"the request header whose value is the scope"##,
        ),
        field(
            "verified",
            Type::Bool,
            r##"`false`"##,
            r##"`true`: Envoy sets this header before this filter (`jwt_authn`'s `claim_to_headers`, an `ext_authz` response header), overwriting whatever the client sent, so its records are charged to the identity alone; `false`: the client's own word, charged to its address too"##,
        ),
    ],
};

pub(super) const UPSTREAM: Section = Section {
    path: "upstream",
    about: r##"How a request that claims its key reaches the upstream."##,
    nullable: true,
    fields: &[
        field(
            "reentry",
            Type::Text,
            r##"absent (router path everywhere)"##,
            r##"the Envoy cluster whose endpoint is the re-entry listener (same route configuration, the filters after idemgate, a first `header_mutation` that sets `x-idemgate-reentry`; see [detached execution](../guide/detached-execution.md) and [Deploy on Envoy](../deploy/envoy.md)); setting it makes `"detached"` the default on every route"##,
        ),
        field(
            "cluster_skipping_routes_and_filters",
            Type::Text,
            r##"absent"##,
            r##"the opt-out instead of `reentry`: claimed requests go straight to this cluster, **skipping the route's rewrites, header rules, direct responses, cluster choice, timeout, retries and every filter after idemgate**; not both"##,
        ),
        field(
            "timeout",
            Type::Duration,
            r##"`"15s"`"##,
            r##"timeout of a detached exchange; must be shorter than `lease` (refused otherwise, naming the field); refused without `reentry` or `cluster_skipping_routes_and_filters` (nothing is detached)"##,
        ),
        field(
            "max_body",
            Type::Size,
            r##"`"8MiB"`"##,
            r##"largest upstream body a detached exchange relays to the client (Envoy holds each answer whole until the filter has read it, a larger one too; `relay_budget` counts each exchange in flight at this bound); a larger answer is recorded (status, headers) and the client gets the upstream's own status and headers without the body, `Idempotent-Body-Omitted: true` — never a 5xx"##,
        ),
        field(
            "cluster",
            Type::Retired,
            r##"—"##,
            r##"no longer read, refused with the way forward: set `upstream.reentry` to the cluster of the internal listener that carries your routes and the filters after idemgate, or, to send claimed requests straight to a cluster and skip them, `upstream.cluster_skipping_routes_and_filters`"##,
        ),
    ],
};

pub(super) const FINGERPRINT: Section = Section {
    path: "fingerprint",
    about: r##"What makes two requests with one key the same request."##,
    nullable: true,
    fields: &[
        field(
            "mode",
            Type::Choice(&["auto", "raw", "json", "form", "fields", "none"]),
            r##"`"auto"`"##,
            r##"`"auto"` picks by the request's one `Content-Type` (essence only: parameters such as `charset` and case ignored): `application/json` and `*/*+json` → as `"json"`, `application/x-www-form-urlencoded` → as `"form"`, anything else (multipart, binary, text, no or several `Content-Type` fields, a `Content-Encoding` such as gzip) → as `"raw"`; `"raw"` body bytes; `"json"` canonical JSON (member order, whitespace, number spelling do not matter); `"form"` canonical form (decoded pairs: `+` = `%20` = space, `%40` = `@`; order of distinct names does not matter, order of a repeated name does; `flag` ≠ `flag=`; empty pieces skipped); `"fields"` only `fingerprint.fields`; `"none"` the key alone decides. A body is never kept: `form` holds the decoded pairs until the body ends (at most ~4× `max_request_body`)"##,
        ),
        field(
            "headers",
            Type::Array(&Type::Header),
            r##"`["content-type"]`"##,
            r##"request headers that are part of the fingerprint"##,
        ),
        field(
            "fields",
            Type::Array(&Type::Text),
            r##"—"##,
            r##"JSON pointers (RFC 6901), with `mode: "fields"` only"##,
        ),
        field(
            "max_depth",
            Type::Integer(1, 65_535),
            r##"`64`"##,
            r##"deepest JSON nesting accepted"##,
        ),
    ],
};

pub(super) const PROBLEMS: Section = Section {
    path: "problems",
    about: r##"How the edge writes its problem answers (RFC 9457 `application/problem+json`)."##,
    nullable: true,
    fields: &[
        field(
            "type_base",
            Type::Text,
            r##"`"urn:idemgate:problem:"`"##,
            r##"the prefix of every problem `type` (the rest is the stable code, e.g. `https://errors.example.com/problems/key_reused`): a URI prefix — a scheme, a colon, no spaces or quotes"##,
        ),
        field(
            "describedby",
            Type::Text,
            r##"—"##,
            r##"an absolute `http(s)` URL of the operator's documentation: every problem the edge makes carries `Link: <url>; rel="describedby"` (replays and relayed answers do not)"##,
        ),
        field(
            "compat",
            Type::Choice(&["none", "stripe"]),
            r##"`"none"`"##,
            r##"`"stripe"`: a problem's `code` and `error.code` are Stripe's where Stripe has one (`request_in_flight` → `idempotency_key_in_use`); the `type` keeps idemgate's code. `"none"`: idemgate's codes. Either way the `error` member's `type` and `Stripe-Should-Retry` are Stripe's (see [problem types](problem-types.md)), which a client of the draft ignores"##,
        ),
    ],
};

pub(super) const SHARES: Section = Section {
    path: "shares",
    about: r##"What one address group, one identity and one callback route may hold in the store while it is under pressure."##,
    nullable: true,
    fields: &[
        field(
            "peer",
            Type::Share,
            r##"`"10%"` of `capacity`"##,
            r##"records one address group may hold in the whole store at once (the local store, or with `store.remote` the fleet's store: the service charges it whichever Envoy a request goes through): every record its requests created, whatever identity they gave — made-up `Authorization` values do not multiply it. A number of records, a percentage of `capacity` (`"1%"`…`"100%"`), or `"off"` (not counted: no limit, no ledger write). Past it, while the store is under pressure (`shares.pressure`): 429 `scope_quota_exceeded` with a true `Retry-After`. A client below its share is never refused for its share (counted over the whole store, not per cell); its key's cell can still be full (`store_full`, see [`on_store_full`](#on_store_full))"##,
        ),
        field(
            "identity",
            Type::Share,
            r##"`"10%"` of `capacity`"##,
            r##"the same for one scope identity (a header value, a property). An unverified identity pays with its address group as well, so both shares bind; a verified one (see [`scope`](#scope)) pays alone"##,
        ),
        field(
            "peer_bytes",
            Type::ByteShare,
            r##"`"10%"` of `max_memory` (25.6 MiB by default)"##,
            r##"the bytes of stored answers one address group / one identity may hold at once, counted beside its records: each record counts its body, its replayed headers and 160 bytes of its own, so a client whose answers are large reaches its share with fewer records. A size (`"32MiB"`, a number of bytes), a percentage of `max_memory` (`"1%"`…`"100%"`), or `"off"` (records alone). Like the record shares they bind only under pressure (`shares.pressure`, which counts a fill shard's bytes as well as its records). A claim is charged when the payer is below both its shares; its answer is then stored (a finished request is never run again for want of space; its body only if the store has room, see `max_memory`), so a payer can pass its byte share by the answers of the claims it has in flight — and gets 429 until enough of them expire (the example: `"32MiB"`, so a flood of 60 KB answers stores 560 of them, 32 MiB, not its 1,000 records' 57 MiB). With `store.remote` the percentages are of `max_memory` too"##,
        ),
        field(
            "identity_bytes",
            Type::ByteShare,
            r##"`"10%"` of `max_memory` (25.6 MiB by default)"##,
            r##"the bytes of stored answers one address group / one identity may hold at once, counted beside its records: each record counts its body, its replayed headers and 160 bytes of its own, so a client whose answers are large reaches its share with fewer records. A size (`"32MiB"`, a number of bytes), a percentage of `max_memory` (`"1%"`…`"100%"`), or `"off"` (records alone). Like the record shares they bind only under pressure (`shares.pressure`, which counts a fill shard's bytes as well as its records). A claim is charged when the payer is below both its shares; its answer is then stored (a finished request is never run again for want of space; its body only if the store has room, see `max_memory`), so a payer can pass its byte share by the answers of the claims it has in flight — and gets 429 until enough of them expire (the example: `"32MiB"`, so a flood of 60 KB answers stores 560 of them, 32 MiB, not its 1,000 records' 57 MiB). With `store.remote` the percentages are of `max_memory` too"##,
        ),
        field(
            "ipv4_prefix",
            Type::Integer(1, 32),
            r##"`32`"##,
            r##"leading bits of the peer address that make one address group: an IPv6 host holds a whole /64, so its addresses count as one peer. A client with ten groups (ten IPv4 addresses, a /60 of IPv6) can still fill the store: lower `shares.peer` or widen the prefix where that matters. Behind a proxy whose hops are not trusted (`xff_num_trusted_hops`), every client is one address group with one share"##,
        ),
        field(
            "ipv6_prefix",
            Type::Integer(1, 128),
            r##"`64`"##,
            r##"leading bits of the peer address that make one address group: an IPv6 host holds a whole /64, so its addresses count as one peer. A client with ten groups (ten IPv4 addresses, a /60 of IPv6) can still fill the store: lower `shares.peer` or widen the prefix where that matters. Behind a proxy whose hops are not trusted (`xff_num_trusted_hops`), every client is one address group with one share"##,
        ),
        field(
            "pressure",
            Type::Pressure,
            r##"`"20%"`"##,
            r##"how full the store must be before shares bind: `"0%"` (always: shares are fixed caps) to `"100%"` (only a full store). Below it a client is served however much it holds; at or above it, a client over its share gets 429, one within it is served. The store counts its fill in *fill shards* of 128 cells (1,024 records by default, ten in the default store), each record in the shard of its cell, and the rule holds per shard: a client that grinds keys into the emptiest shard only fills that one to the pressure too, so every shard keeps the rest for clients within their shares. Not half by default: with 8 records per cell a store half full has a full cell for one key in 20 (`store_full` for everyone), a fifth full for one in 4,000. A cell full by chance answers 429, not 503, to a client over its share under pressure; a full shard is a full store (`store_full`). With `store.remote` the fleet's fill is counted the same way: `capacity` and `records_per_cell` place each record in a shard, whose count the service keeps as a key of its own, charged with the record; it is read only for a client over its share (`crates/store/README.md`)"##,
        ),
    ],
};

pub(super) const STORE: Section = Section {
    path: "store",
    about: r##"Where records are kept."##,
    nullable: true,
    fields: &[
        field(
            "kind",
            Type::Choice(&["local", "remote"]),
            r##"`"local"`"##,
            r##"`"local"`: records in this Envoy's shared data; `"remote"`: records in the store service shared by a fleet (see [Fleet](../deploy/fleet-store.md))"##,
        ),
        field(
            "cluster",
            Type::Text,
            r##"— (required with `"remote"`)"##,
            r##"Envoy cluster of `idemgate-store` (HTTP/2 inside mutual TLS)"##,
        ),
        field(
            "timeout",
            Type::Duration,
            r##"`"250ms"`"##,
            r##"how long one store operation may take (1ms…60s); no answer by then is a store failure (`on_store_error`). Keep it above the service's `--op-timeout`"##,
        ),
        field(
            "record_secret_env",
            Type::Text,
            r##"`record_secret_env: "IDEMGATE_RECORD_SECRET"` (required with `"remote"`; refused with `"local"`)"##,
            r##"the VM environment variable holding the secret (≥ 32 bytes) that seals every answer kept in the remote store (HMAC-SHA256 over its storage key, status, headers and body); a replay whose seal does not check is refused (502 `record_corrupt`). The sequencer's resource states are sealed alike (over the storage key, state and version): a state whose seal does not check decides nothing (503 `order_record_corrupt`). The list form rotates: the first variable seals, each is accepted. Every Envoy of a fleet needs the same secret; the store service never sees it. A remote store without it set is a configuration error naming the variable — there is no unsealed mode"##,
        ),
        field(
            "record_secrets_env",
            Type::Array(&Type::Text),
            r##"absent (`record_secret_env`)"##,
            r##"the VM environment variable holding the secret (≥ 32 bytes) that seals every answer kept in the remote store (HMAC-SHA256 over its storage key, status, headers and body); a replay whose seal does not check is refused (502 `record_corrupt`). The sequencer's resource states are sealed alike (over the storage key, state and version): a state whose seal does not check decides nothing (503 `order_record_corrupt`). The list form rotates: the first variable seals, each is accepted. Every Envoy of a fleet needs the same secret; the store service never sees it. A remote store without it set is a configuration error naming the variable — there is no unsealed mode"##,
        ),
    ],
};

pub(super) const TOKEN: Section = Section {
    path: "token",
    about: r##"One-time tokens (absent: tokens off)."##,
    nullable: true,
    fields: &[
        field(
            "secret",
            Type::Text,
            r##"absent"##,
            r##"HMAC secret (≥ 16 bytes), inline or from the VM's environment; `secret`: the secret itself"##,
        ),
        field(
            "secret_env",
            Type::Text,
            r##"`"IDEMGATE_TOKEN_SECRET"`"##,
            r##"HMAC secret (≥ 16 bytes), inline or from the VM's environment; `secret_env`: the VM environment variable holding it (used when `secret` is absent)"##,
        ),
        field("ttl", Type::Duration, r##"`"10m"`"##, r##"token life"##),
        field(
            "issue_path",
            Type::Path,
            r##"`"/.idemgate/token"`"##,
            r##"the filter's issuing endpoint"##,
        ),
        field(
            "header",
            Type::Header,
            r##"`"idemgate-token"`"##,
            r##"request header that carries a token"##,
        ),
    ],
};
