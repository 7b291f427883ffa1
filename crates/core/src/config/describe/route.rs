//! A route's sections: the route, its signature, pass-through and ordering rule, and its own
//! `in_flight`.

use super::sections::KEY_FORMAT;
use super::{field, required, Section, Type};

/// `routes[].preset`: the senders whose settings the filter knows.
const PRESETS: [&str; 9] = [
    "standard-webhooks",
    "svix",
    "stripe",
    "github",
    "shopify",
    "slack",
    "cloudevents",
    "pubsub-push",
    "sns",
];

/// Where a key comes from: `{"header": name}`, `{"json": pointer}`, `{"form": field}` or
/// `{"cloudevents": true}`.
const KEY_SOURCE: Type = Type::OneOf(&[
    Type::Member("header", &Type::Header),
    Type::Member("json", &Type::Text),
    Type::Member("form", &Type::Text),
    Type::Member("cloudevents", &Type::True),
]);

/// Where the sequencer reads a resource or an event type: a key source but a CloudEvent.
const ORDER_SOURCE: [Type; 3] = [
    Type::Member("json", &Type::Text),
    Type::Member("form", &Type::Text),
    Type::Member("header", &Type::Header),
];

pub(super) const ROUTE: Section = Section {
    path: "routes[]",
    about: r##"A guarded route (`routes` is a list; the first whose `prefix` and `methods` match a request is its rule)."##,
    nullable: true,
    fields: &[
        required(
            "prefix",
            Type::Path,
            r##"path prefix, matched against the normalised path without the query: percent-escapes of unreserved characters and `/` decoded, `\` read as `/`, `;params` cut from each segment, empty and `.` segments dropped, `..` resolved. So `//payments`, `/payments;x`, `/%70ayments`, `/a/../payments` all meet a `/payments` rule, and the storage key and the fingerprint use that one spelling"##,
        ),
        field(
            "case_sensitive",
            Type::Bool,
            r##"`false`"##,
            r##"`false`: `/Payments` meets a `/payments` rule too (and is the same path for the storage key and fingerprint), as in most upstreams' routers; `true`: case matters"##,
        ),
        field(
            "methods",
            Type::Array(&Type::Text),
            r##"`["POST","PATCH"]`"##,
            r##"guarded methods; others pass through untouched"##,
        ),
        field(
            "key",
            Type::Choice(&["required", "optional"]),
            r##"`"optional"`"##,
            r##"`"required"`: a missing key is a 400; `"optional"`: passed through"##,
        ),
        field(
            "key_format",
            Type::OneOf(&KEY_FORMAT),
            r##"top-level `key_format`, else absent (any valid key)"##,
            r##"the format of the route's keys: `"uuid"` (8-4-4-4-12 hexadecimal digits, either case), `{"prefix": "ord_"}` (starts with the prefix, exact, and has more after it) or `{"pattern": "ord_\\d{8}"}` (the whole key matches; a small language, not a regular expression: atoms — a visible ASCII character, `\` plus one of `\[]{}().*+?^$|` for itself, `\d`, `\w`, `\x`, `.`, a class `[a-z0-9_-]` never negated — each optionally followed by `{n}`, `{m,n}`, `?`, `*` or `+` (up to 255), no groups, alternation or anchors, at most 256 characters and 64 atoms; see `docs/semantics.md` §1; anything else is refused at `routes[i].key_format.pattern`). A valid key of another format is refused (400 `key_format`, naming the format) or ignored, as `key_mismatch` says. The published policy lists it"##,
        ),
        field(
            "key_mismatch",
            Type::Choice(&["refuse", "ignore"]),
            r##"top-level `key_mismatch`, else `"refuse"`"##,
            r##"`"refuse"`: a key of another format is 400 `key_format`; `"ignore"`: the request is taken as sent without a key — on a route where the key is optional it passes unguarded, like any request without a key (the header still reaches the upstream). For keys a browser adds of its own accord (Firefox can add an `Idempotency-Key` to a form POST): they must not lock a user out with a 422. Refused where the key is `"required"` (there no key is no option: set `"refuse"`), and on a route without a `key_format`"##,
        ),
        field(
            "key_scope",
            Type::Choice(&["route", "client"]),
            r##"top-level `key_scope`, else `"route"`"##,
            r##"`"route"`: a key names a request on its method and path (the same key on another endpoint is another record); `"client"`: a key is the client's across every route that says so — the storage key leaves the method and path out and the fingerprint binds them, so the same key on another such endpoint is 422 `key_reused` (Stripe's rule), never a second run nor the other endpoint's answer. API routes only (a callback route's delivery ids are the route's own)"##,
        ),
        field(
            "token",
            Type::Choice(&["none", "required"]),
            r##"`"none"`"##,
            r##"`"required"`: a one-time token must accompany the request"##,
        ),
        field(
            "kind",
            Type::Choice(&["api", "callback"]),
            r##"`"api"`"##,
            r##"`"callback"`: a provider's at-least-once deliveries (see [Key sources and callback routes](../guide/callbacks-and-presets.md)): the route is the scope, only 2xx is stored, `methods` default to `["POST"]`, `key` defaults to `"required"`"##,
        ),
        field(
            "preset",
            Type::Choice(&PRESETS),
            r##"absent"##,
            r##"a sender's settings: `"standard-webhooks"`, `"svix"`, `"stripe"`, `"github"`, `"shopify"`, `"slack"`, `"cloudevents"`, `"pubsub-push"`, `"sns"` (table in [Presets](../guide/callbacks-and-presets.md#presets)); makes a callback route; every field the route sets wins"##,
        ),
        field(
            "key_from",
            Type::Array(&KEY_SOURCE),
            r##"`[{"header": <header>}]`; required for callbacks without a preset"##,
            r##"where the key comes from, in order, the first present wins: `{"header": NAME}`, `{"json": POINTER}` (RFC 6901, in a JSON body; a string, or a number by its value), `{"form": FIELD}` (in an `application/x-www-form-urlencoded` body), `{"cloudevents": true}` (a CloudEvent's source and id). A body none of the body sources can read is 400 `key_body_unreadable`"##,
        ),
        field(
            "signature",
            Type::Section("routes[].signature"),
            r##"absent (required by the signed presets)"##,
            r##"callback routes only: `{"scheme": "github" | "stripe" | "standard-webhooks" | "svix" | "shopify" | "slack", "secret": S | "secret_env": VAR | "secrets": [S…] | "secrets_env": [VAR…], "tolerance": "5m"}`; `scheme` defaults to the preset's; secrets (≥ 8 bytes; `whsec_…` base64 or `whpk_…` Ed25519 public keys for Standard Webhooks and Svix) inline or from the VM's environment, several while rotating; `tolerance` (schemes that sign a timestamp: stripe, standard-webhooks, svix, slack; default `"5m"`) bounds its distance from now (behind it, only a stored acknowledgement answers: late redeliveries)"##,
        ),
        field(
            "share",
            Type::Share,
            r##"absent: the whole store"##,
            r##"callback routes only (refused on an API route, whose clients are the payers): the records the route itself may hold in the whole store while it is under pressure (`shares.pressure`), as the payer of its deliveries' records — a number of records or a percentage of `capacity`, and the same part of `max_memory` in bytes. Past it, under pressure: 429 `scope_quota_exceeded`. By default the route is charged nothing and only a full store refuses it, so a provider's volume is never held at one client's share. A route without a `signature` also charges each delivery to the sender's address group (`shares.peer`): one address cannot fill the store through it. Refused while `shares.identity` and `shares.peer` are both `"off"` (the store's fill is then not counted)"##,
        ),
        field(
            "pass_through",
            Type::Section("routes[].pass_through"),
            r##"absent (`sns`: its confirmations, by the body's `/Type`)"##,
            r##"callback routes only: `{"header": NAME, "values": [V…]}`: a request whose every value of that header is one of `values` is a control message and passes unguarded, never stored (its signature is still checked); or `{"json": POINTER, "values": [V…]}`: the JSON body's string field decides, at the end of the body (a copy of the body is kept until then)"##,
        ),
        field(
            "forward",
            Type::Choice(&["detached", "router"]),
            r##"`"detached"` if `upstream.reentry` (or the opt-out) is configured, else `"router"`"##,
            r##"how a request that claims its key reaches the upstream: `"detached"` (the filter sends it on an exchange that outlives the client, see [detached execution](../guide/detached-execution.md)) or `"router"` (Envoy's router on the client's stream; client gone = in doubt)"##,
        ),
        field(
            "upstream_timeout",
            Type::Duration,
            r##"`upstream.timeout`"##,
            r##"timeout of this route's detached exchanges; shorter than `lease`; refused on a route that is not detached"##,
        ),
        field(
            "cluster",
            Type::Retired,
            r##"—"##,
            r##"no longer read, refused with the way forward: on re-entry Envoy's route configuration picks the cluster (match this path with an Envoy route instead)"##,
        ),
        field(
            "order",
            Type::Section("routes[].order"),
            r##"absent"##,
            r##"callback routes only (refused elsewhere): keep each resource's events in the order of a state table (see [Event order and versions](../guide/ordering.md)). On a route without a `signature` it is refused unless `order.unsigned` says so: there anyone can make up events for made-up resources, each keeping a resource record for `ttl`. A new resource record is charged like a claim's record: to the route's `share` if it has one and, on a route without a `signature`, to the sender's address group (`shares.peer`), so past its share while the store is under pressure the sender gets 429 `scope_quota_exceeded` (counted by the share that refused), never a 5xx, and the event is not forwarded — on the local store and the remote store alike"##,
        ),
        field(
            "precondition",
            Type::Choice(&["if-match", "if-match-or-any"]),
            r##"absent"##,
            r##"`"if-match"`: on this route's `methods`, a PUT, PATCH or DELETE needs a well-formed `If-Match` that names a version (428 `precondition_required`, 400 `precondition_malformed`, 428 `precondition_version_required` for `If-Match: *`); `"if-match-or-any"`: the same, and `If-Match: *` is accepted too. On either, `If-Match` is part of the fingerprint (a record stored on such a route by an earlier filter was fingerprinted without it: a retry of it answers 422 `key_reused` until the record expires, `ttl`); list PUT and DELETE in `methods` to guard them (the default is `["POST","PATCH"]`)"##,
        ),
        field(
            "in_flight",
            Type::Section("routes[].in_flight"),
            r##"absent (top-level `in_flight`)"##,
            r##"this route's own `in_flight` (below)"##,
        ),
    ],
};

pub(super) const SIGNATURE: Section = Section {
    path: "routes[].signature",
    about: r##"How a callback route checks its sender's signature (its shape as a whole: [`routes[].signature`](#routes-signature))."##,
    nullable: true,
    fields: &[
        field(
            "scheme",
            Type::Choice(&[
                "github",
                "stripe",
                "standard-webhooks",
                "svix",
                "shopify",
                "slack",
            ]),
            r##"the preset's"##,
            r##"the provider's signature scheme; required unless the route's `preset` gives it"##,
        ),
        field(
            "secret",
            Type::Text,
            r##"absent"##,
            r##"the secret (≥ 8 bytes; `whsec_…` base64 or a `whpk_…` Ed25519 public key for Standard Webhooks and Svix), inline"##,
        ),
        field(
            "secret_env",
            Type::Text,
            r##"absent"##,
            r##"the VM environment variable holding the secret"##,
        ),
        field(
            "secrets",
            Type::Array(&Type::Text),
            r##"absent"##,
            r##"several secrets, inline, while rotating: a signature made with any of them is accepted"##,
        ),
        field(
            "secrets_env",
            Type::Array(&Type::Text),
            r##"absent"##,
            r##"several environment variables, while rotating"##,
        ),
        field(
            "tolerance",
            Type::Duration,
            r##"`"5m"`"##,
            r##"schemes that sign a timestamp (stripe, standard-webhooks, svix, slack): how far from now it may be (behind it, only a stored acknowledgement answers: late redeliveries)"##,
        ),
    ],
};

pub(super) const PASS_THROUGH: Section = Section {
    path: "routes[].pass_through",
    about: r##"Control messages of a callback route, which pass unguarded (see [`routes[].pass_through`](#routes-pass_through))."##,
    nullable: true,
    fields: &[
        field(
            "header",
            Type::Header,
            r##"absent"##,
            r##"the request header whose every value must be one of `values`; give `header` or `json`, not both"##,
        ),
        field(
            "json",
            Type::Text,
            r##"absent"##,
            r##"a JSON pointer (RFC 6901) to the body's string field that must be one of `values`, decided at the end of the body"##,
        ),
        required(
            "values",
            Type::Array(&Type::Text),
            r##"the values that make a request a control message"##,
        ),
    ],
};

pub(super) const ORDER: Section = Section {
    path: "routes[].order",
    about: r##"Keep each resource's events in the order of a state table (callback routes only)."##,
    nullable: true,
    fields: &[
        required(
            "resource",
            Type::OneOf(&ORDER_SOURCE),
            r##"where the resource id is: `{"json": POINTER}`, `{"form": FIELD}` or `{"header": NAME}` (as in `key_from`); a JSON number is its decimal text (order 7 → `"7"`); empty or over 255 bytes counts as absent"##,
        ),
        required(
            "event",
            Type::OneOf(&ORDER_SOURCE),
            r##"where the event type is, from the same sources; a type the table does not name is not ordered"##,
        ),
        required(
            "table",
            Type::Section("routes[].order.table"),
            r##"the state table, the format `StateTable.fromJSON` reads; a bad one is refused with its `transition_table_*` code and the field"##,
        ),
        field(
            "early",
            Type::Section("routes[].order.early"),
            r##"absent"##,
            r##"what an event that comes before its turn gets (below)"##,
        ),
        field(
            "unsigned",
            Type::Choice(&["allow"]),
            r##"absent (refused on a route without a `signature`)"##,
            r##"`"allow"`: keep the sequencer on a route that checks no signature (a sender that signs nothing, or one verified before this filter), knowing that its resource records are then the senders' own word; refused on a signed route"##,
        ),
    ],
};

pub(super) const TABLE: Section = Section {
    path: "routes[].order.table",
    about: r##"The state table, the format `StateTable.fromJSON` reads; any other member is refused."##,
    nullable: false,
    fields: &[
        required(
            "transitions",
            Type::Array(&Type::Tuple(&[Type::Text, Type::Text, Type::Text])),
            r##"`[[from, event, to], …]`; one `to` per (`from`, `event`)"##,
        ),
        field(
            "initial",
            Type::Text,
            r##"the first state"##,
            r##"the state of a resource the edge has not seen"##,
        ),
        field(
            "states",
            Type::Array(&Type::Text),
            r##"every state named, in order of first appearance (`initial` first)"##,
            r##"the states"##,
        ),
        field(
            "terminal",
            Type::Array(&Type::Text),
            r##"the states with no outgoing transition"##,
            r##"end states (may have no transitions)"##,
        ),
    ],
};

pub(super) const EARLY: Section = Section {
    path: "routes[].order.early",
    about: r##"An early event: one whose resource is not yet in a state the event leaves."##,
    nullable: true,
    fields: &[
        field(
            "retry_after",
            Type::Duration,
            r##"`"10s"`"##,
            r##"the `Retry-After` of an early event's 409; longer than zero"##,
        ),
        field(
            "forward_after",
            Type::Duration,
            r##"absent (never)"##,
            r##"forward an early event anyway once this long has passed since the edge first saw it (the edge does not advance the state for it)"##,
        ),
    ],
};

pub(super) const ROUTE_IN_FLIGHT: Section = Section {
    path: "routes[].in_flight",
    about: r##"A route's own `in_flight`, instead of the top-level one."##,
    nullable: true,
    fields: &[field(
        "wait",
        Type::Duration,
        r##"`in_flight.wait`"##,
        r##"the same for this route; `"0s"`: this route does not wait"##,
    )],
};
