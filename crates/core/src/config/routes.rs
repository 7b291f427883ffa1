//! The routes, compiled: each route's methods, key, scope, signature, forward and order rules,
//! every refusal naming the route's field.

use super::*;

#[derive(Debug, Clone)]
pub(crate) struct RouteConfig {
    pub(crate) prefix: String,
    pub(crate) methods: Option<Vec<String>>,
    pub(crate) key: Option<KeyConfig>,
    pub(crate) token: Option<TokenRequirementConfig>,
    pub(crate) case_sensitive: Option<bool>,
    pub(crate) forward: Option<ForwardConfig>,
    pub(crate) cluster: Option<String>,
    pub(crate) upstream_timeout: Option<String>,
    pub(crate) kind: Option<RouteKindConfig>,
    pub(crate) key_from: Option<Vec<KeySourceConfig>>,
    pub(crate) signature: Option<SignatureConfig>,
    /// A sender's usual settings (`preset`); every other field overrides them.
    pub(crate) preset: Option<PresetConfig>,
    pub(crate) pass_through: Option<PassThroughConfig>,
    /// The ordering rules ([`crate::order`]), carried out by the sequencer; callback routes only.
    pub(crate) order: Option<OrderConfig>,
    /// What the route itself may hold in the whole store under pressure; callback routes only.
    pub(crate) share: Option<ShareAmount>,
    pub(crate) precondition: Option<PreconditionConfig>,
    /// `key_format`, `key_mismatch`, `key_scope`: over the top-level defaults.
    pub(crate) keys: super::keys::KeyRulesConfig,
    /// What a duplicate of a request in flight gets here; `None`: the top level's.
    pub(crate) in_flight: Option<InFlightConfig>,
}

/// `routes[i].order`: where the resource id and the event type are, the state table (kept as JSON
/// for [`DeclaredTable`](crate::order::transition::DeclaredTable) to read), and `early.retry_after`
/// / `early.forward_after`.
#[derive(Debug, Clone, Default)]
pub(crate) struct OrderConfig {
    pub(crate) resource: Option<KeySourceConfig>,
    pub(crate) event: Option<KeySourceConfig>,
    pub(crate) table: Option<crate::request::json::Value>,
    pub(crate) retry_after: Option<String>,
    pub(crate) forward_after: Option<String>,
    /// `unsigned: "allow"`: the guard on a route that checks no signature, said explicitly.
    pub(crate) allow_unsigned: bool,
}

/// `routes[i].precondition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PreconditionConfig {
    /// `"if-match"`: a version required (`If-Match: *` refused).
    IfMatch,
    /// `"if-match-or-any"`: a version, or `If-Match: *`.
    IfMatchOrAny,
}

/// `routes[i].pass_through`: `{"header": name, "values": [value, ...]}`, or `{"json": pointer,
/// "values": [...]}` where the message type is a field of the (signed) body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassThroughConfig {
    pub(crate) header: Option<String>,
    pub(crate) json: Option<String>,
    pub(crate) values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteKindConfig {
    Api,
    Callback,
}

/// `{"header": name}`, `{"json": pointer}`, `{"form": field}` or `{"cloudevents": true}`.
#[derive(Debug, Clone)]
pub(crate) enum KeySourceConfig {
    Header(String),
    Json(String),
    Form(String),
    CloudEvent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignatureSchemeConfig {
    GitHub,
    Stripe,
    StandardWebhooks,
    Svix,
    Shopify,
    Slack,
}

/// `routes[i].signature`. The scheme may come from the route's preset; the secret is exactly one
/// of `secret`, `secret_env`, `secrets` or `secrets_env` (the lists: several secrets at once, while
/// a sender rotates them).
#[derive(Debug, Clone, Default)]
pub(crate) struct SignatureConfig {
    pub(crate) scheme: Option<SignatureSchemeConfig>,
    pub(crate) secret: Option<String>,
    pub(crate) secret_env: Option<String>,
    pub(crate) secrets: Option<Vec<String>>,
    pub(crate) secrets_env: Option<Vec<String>>,
    pub(crate) tolerance: Option<String>,
}

/// `routes[i].forward`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForwardConfig {
    Detached,
    Router,
}

/// The `upstream` section: where detached exchanges go by default.
#[derive(Debug, Clone, Default)]
pub(crate) struct UpstreamConfig {
    /// The cluster of the internal listener that carries the routes.
    pub(crate) reentry: Option<String>,
    /// The explicit opt-out: a cluster reached directly, skipping routes and later filters.
    pub(crate) cluster_skipping_routes_and_filters: Option<String>,
    /// The name before re-entry was built; read only to refuse it with the way forward.
    pub(crate) cluster: Option<String>,
    pub(crate) timeout: Option<String>,
    pub(crate) max_body: Option<Size>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyConfig {
    Required,
    Optional,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum TokenRequirementConfig {
    None,
    Required,
}

impl Config {
    pub(super) fn compile_routes(
        &self,
        lease: Span,
        header: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<Route>, Refusal> {
        let default_key_from: Arc<[KeySource]> =
            alloc::vec![KeySource::Header(copy(header))].into();
        let Some(list) = &self.routes else {
            return Ok(alloc::vec![Route {
                prefix: copy("/"),
                methods: owned(defaults::METHODS),
                key: KeyRequirement::Optional,
                keys: self.compile_keys(None, RouteKind::Api, KeyRequirement::Optional)?,
                token: TokenRequirement::None,
                case_sensitive: crate::request::target::CASE_SENSITIVE_BY_DEFAULT,
                forward: self.compile_forward(None, lease)?,
                kind: RouteKind::Api,
                key_from: default_key_from,
                signature: None,
                pass_through: None,
                order: None,
                precondition: None,
                share: None,
                wait: self.compile_wait(None, lease)?,
            }]);
        };
        let mut routes = Vec::new();
        for (i, route) in list.iter().enumerate() {
            let filled;
            let route = match route.preset {
                Some(preset) => {
                    filled = preset.fill(i, route)?;
                    &filled
                }
                None => route,
            };
            if !route.prefix.starts_with('/') {
                return Err(refuse(
                    item("routes", i, ".prefix"),
                    &["must start with `/`"],
                ));
            }
            if route.prefix.contains(['?', '#']) {
                return Err(refuse(
                    item("routes", i, ".prefix"),
                    &["is matched against the path without its query, so it may not contain `?` or `#`"],
                ));
            }
            let kind = match route.kind {
                Some(RouteKindConfig::Callback) => RouteKind::Callback,
                Some(RouteKindConfig::Api) | None => RouteKind::Api,
            };
            let methods = match &route.methods {
                None if kind == RouteKind::Callback => alloc::vec![copy("POST")],
                None => owned(defaults::METHODS),
                Some(methods) if methods.is_empty() => {
                    return Err(refuse(
                        item("routes", i, ".methods"),
                        &["must name at least one method"],
                    ))
                }
                Some(methods) => {
                    let mut out = Vec::new();
                    for (j, m) in methods.iter().enumerate() {
                        if m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic()) {
                            return Err(refuse(
                                item(&item("routes", i, ".methods"), j, ""),
                                &["`", m, "` is not an HTTP method"],
                            ));
                        }
                        let mut m = copy(m);
                        m.make_ascii_uppercase();
                        out.push(m);
                    }
                    out
                }
            };
            let key_from = match (&route.key_from, kind) {
                (None, RouteKind::Api) => Arc::clone(&default_key_from),
                (None, RouteKind::Callback) => {
                    return Err(refuse(
                        item("routes", i, ".key_from"),
                        &["a callback route needs the provider's delivery id, e.g. [{\"header\": \"x-github-delivery\"}] or [{\"json\": \"/id\"}]"],
                    ))
                }
                (Some(list), _) => compile_key_from(i, list)?,
            };
            let signature = match (&route.signature, kind) {
                (None, _) => None,
                (Some(_), RouteKind::Api) => {
                    return Err(refuse(
                        item("routes", i, ".signature"),
                        &["only applies to routes of kind \"callback\""],
                    ))
                }
                (Some(sig), RouteKind::Callback) => Some(compile_signature(i, sig, env)?),
            };
            let pass_through = match (&route.pass_through, kind) {
                (None, _) => None,
                (Some(_), RouteKind::Api) => {
                    return Err(refuse(
                        item("routes", i, ".pass_through"),
                        &["only applies to routes of kind \"callback\""],
                    ))
                }
                (Some(pass), RouteKind::Callback) => {
                    let at = item("routes", i, ".pass_through.values");
                    if pass.values.is_empty() {
                        return Err(refuse(at, &["must name at least one value"]));
                    }
                    let from = match (&pass.header, &pass.json) {
                        (Some(name), None) => PassThroughSource::Header(header_name(
                            &item("routes", i, ".pass_through.header"),
                            name,
                        )?),
                        (None, Some(pointer)) => {
                            PassThroughSource::Json(JsonPointer::parse(pointer).map_err(|e| {
                                refuse(item("routes", i, ".pass_through.json"), &[&e.message()])
                            })?)
                        }
                        _ => {
                            return Err(refuse(
                                item("routes", i, ".pass_through"),
                                &["needs exactly one of `header` and `json`"],
                            ))
                        }
                    };
                    Some(Arc::new(PassThrough {
                        from,
                        values: pass.values.clone(),
                    }))
                }
            };
            // Stored in the form requests are compared in (see `crate::request::path`).
            let case_sensitive = route
                .case_sensitive
                .unwrap_or(crate::request::target::CASE_SENSITIVE_BY_DEFAULT);
            let mut prefix = crate::request::path::normalize(&route.prefix);
            if !case_sensitive {
                prefix.make_ascii_lowercase();
            }
            let order = order::compile(i, route.order.as_ref(), kind, signature.is_some())?;
            let precondition = route.precondition.map(|p| match p {
                PreconditionConfig::IfMatch => crate::order::Precondition::IfMatch,
                PreconditionConfig::IfMatchOrAny => crate::order::Precondition::IfMatchOrAny,
            });
            let key = match (route.key, kind) {
                (Some(KeyConfig::Required), _) | (None, RouteKind::Callback) => {
                    KeyRequirement::Required
                }
                (Some(KeyConfig::Optional), _) | (None, RouteKind::Api) => KeyRequirement::Optional,
            };
            let keys = self.compile_keys(Some((i, &route.keys)), kind, key)?;
            routes.push(Route {
                prefix,
                case_sensitive,
                methods,
                kind,
                key_from,
                signature,
                pass_through,
                order,
                precondition,
                share: None,
                key,
                keys,
                token: match route.token {
                    Some(TokenRequirementConfig::Required) => TokenRequirement::Required,
                    Some(TokenRequirementConfig::None) | None => TokenRequirement::None,
                },
                forward: self.compile_forward(Some((i, route)), lease)?,
                wait: self.compile_wait(Some((i, route)), lease)?,
            });
        }
        shadow::refuse_shadowed(&routes)?;
        Ok(routes)
    }

    /// A route's [`Forward`]: detached wherever a destination is configured (`upstream.reentry`,
    /// or the explicit `upstream.cluster_skipping_routes_and_filters`), unless the route opts back
    /// into `"router"`; without one the router path is the only one possible. The upstream timeout
    /// must be shorter than the lease.
    pub(super) fn compile_forward(
        &self,
        route: Option<(usize, &RouteConfig)>,
        lease: Span,
    ) -> Result<Forward, Refusal> {
        let upstream = self.upstream.as_ref();
        let upstream_timeout = upstream.and_then(|u| u.timeout.as_deref());
        // `.field` of the route, or of `upstream`.
        let at = |field: &str| match route {
            Some((i, _)) => item("routes", i, field),
            None => ["upstream", field].concat(),
        };
        let (forward, timeout) = match route {
            Some((_, r)) => {
                if r.cluster.is_some() {
                    return Err(refuse(
                        at(".cluster"),
                        &["is no longer read: on re-entry Envoy's route configuration picks the cluster (match this path with an Envoy route instead; docs/deploy/envoy.md)"],
                    ));
                }
                (r.forward, r.upstream_timeout.as_ref())
            }
            None => (None, None),
        };
        if upstream.is_some_and(|u| u.cluster.is_some()) {
            return Err(refuse(
                copy("upstream.cluster"),
                &["is no longer read: set `upstream.reentry` to the cluster of the internal listener that carries your routes and the filters after idemgate (docs/deploy/envoy.md), or, to send claimed requests straight to a cluster and skip them, `upstream.cluster_skipping_routes_and_filters`"],
            ));
        }
        if forward == Some(ForwardConfig::Router) {
            if timeout.is_some() {
                return Err(refuse(
                    at(".upstream_timeout"),
                    &["only applies when `forward` is \"detached\""],
                ));
            }
            return Ok(Forward::Router);
        }
        let destination = match upstream {
            Some(UpstreamConfig {
                reentry: Some(_),
                cluster_skipping_routes_and_filters: Some(_),
                ..
            }) => {
                return Err(refuse(
                    copy("upstream.cluster_skipping_routes_and_filters"),
                    &["cannot be set together with `upstream.reentry`: pick one"],
                ))
            }
            Some(UpstreamConfig {
                reentry: Some(cluster),
                ..
            }) => Some(("upstream.reentry", cluster, Via::Reentry)),
            Some(UpstreamConfig {
                cluster_skipping_routes_and_filters: Some(cluster),
                ..
            }) => Some((
                "upstream.cluster_skipping_routes_and_filters",
                cluster,
                Via::SkippingRoutesAndFilters,
            )),
            _ => None,
        };
        let Some((field, cluster, via)) = destination else {
            if forward == Some(ForwardConfig::Detached) {
                return Err(refuse(
                    at(".forward"),
                    &["a detached route needs `upstream.reentry`: the cluster of the internal listener that carries the routes (docs/deploy/envoy.md)"],
                ));
            }
            // Nothing is detached, so a timeout bounds nothing: refused rather than left unread,
            // where a typo in it would wait for the day `upstream.reentry` is set.
            let unread = match (timeout, upstream_timeout) {
                (Some(_), _) => Some(at(".upstream_timeout")),
                (None, Some(_)) => Some(copy("upstream.timeout")),
                (None, None) => None,
            };
            if let Some(field) = unread {
                return Err(refuse(
                    field,
                    &["only applies to detached routes: set `upstream.reentry` (or `upstream.cluster_skipping_routes_and_filters`) first"],
                ));
            }
            return Ok(Forward::Router);
        };
        if cluster.is_empty() {
            return Err(refuse(copy(field), &["must name an Envoy cluster"]));
        }
        let (timeout_field, timeout) = match timeout {
            Some(t) => (at(".upstream_timeout"), Some(t.as_str())),
            None => (copy("upstream.timeout"), upstream_timeout),
        };
        let timeout = span(&timeout_field, timeout, defaults::UPSTREAM_TIMEOUT)?;
        if timeout.as_millis() == 0 || timeout >= lease {
            return Err(refuse(
                timeout_field,
                &[
                    "must be longer than zero and shorter than `lease` (",
                    &decimal(lease.as_millis()),
                    " ms): a retry must never take over a key whose upstream exchange may still answer",
                ],
            ));
        }
        Ok(Forward::Detached(Detached {
            cluster: copy(cluster),
            via,
            timeout,
        }))
    }
}

pub(super) fn compile_key_from(
    route: usize,
    list: &[KeySourceConfig],
) -> Result<Arc<[KeySource]>, Refusal> {
    let list_field = item("routes", route, ".key_from");
    if list.is_empty() {
        return Err(refuse(list_field, &["must name at least one source"]));
    }
    let mut sources = Vec::new();
    for (j, source) in list.iter().enumerate() {
        let field = item(&list_field, j, "");
        sources.push(match source {
            KeySourceConfig::Header(name) => KeySource::Header(header_name(&field, name)?),
            KeySourceConfig::Json(pointer) => KeySource::Json(
                JsonPointer::parse(pointer).map_err(|e| refuse(field, &[&e.message()]))?,
            ),
            KeySourceConfig::Form(name) if name.is_empty() => {
                return Err(refuse(field, &["the form field name may not be empty"]))
            }
            KeySourceConfig::Form(name) => KeySource::Form(copy(name)),
            KeySourceConfig::CloudEvent => KeySource::CloudEvent,
        });
    }
    Ok(sources.into())
}

pub(super) fn compile_signature(
    route: usize,
    sig: &SignatureConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SignatureRule, Refusal> {
    let at = |name: &str| item("routes", route, &[".signature.", name].concat());
    let from_env = |field: &str, name: &str| {
        env(name).ok_or_else(|| {
            refuse(
                at(field),
                &["environment variable `", name, "` is not set for the VM"],
            )
        })
    };
    let secrets: Vec<String> = match (&sig.secret, &sig.secret_env, &sig.secrets, &sig.secrets_env)
    {
        (Some(secret), None, None, None) => alloc::vec![copy(secret)],
        (None, Some(name), None, None) => alloc::vec![from_env("secret_env", name)?],
        (None, None, Some(list), None) if !list.is_empty() => list.clone(),
        (None, None, None, Some(names)) if !names.is_empty() => {
            let mut out = Vec::new();
            for name in names {
                out.push(from_env("secrets_env", name)?);
            }
            out
        }
        (None, None, Some(_), None) | (None, None, None, Some(_)) => {
            return Err(refuse(at("secrets"), &["must name at least one secret"]))
        }
        _ => {
            return Err(refuse(
                at("secret"),
                &["give exactly one of `secret`, `secret_env`, `secrets` or `secrets_env`"],
            ))
        }
    };
    let Some(scheme) = sig.scheme else {
        return Err(refuse(
            at("scheme"),
            &["missing field (or give the route a `preset` that names one)"],
        ));
    };
    let tolerance = || -> Result<Span, Refusal> {
        match &sig.tolerance {
            None => Ok(DEFAULT_TOLERANCE),
            Some(text) => text
                .parse::<Span>()
                .map_err(|e| refuse(at("tolerance"), &[e.text()])),
        }
    };
    let scheme = match scheme {
        SignatureSchemeConfig::GitHub | SignatureSchemeConfig::Shopify if sig.tolerance.is_some() => {
            return Err(refuse(
                at("tolerance"),
                &["only applies to schemes that sign a timestamp (stripe, standard-webhooks, svix, slack); this one signs none"],
            ))
        }
        SignatureSchemeConfig::GitHub => SignatureScheme::GitHub,
        SignatureSchemeConfig::Shopify => SignatureScheme::Shopify,
        SignatureSchemeConfig::Stripe => SignatureScheme::Stripe {
            tolerance: tolerance()?,
        },
        SignatureSchemeConfig::StandardWebhooks => SignatureScheme::StandardWebhooks {
            tolerance: tolerance()?,
        },
        SignatureSchemeConfig::Svix => SignatureScheme::Svix {
            tolerance: tolerance()?,
        },
        SignatureSchemeConfig::Slack => SignatureScheme::Slack {
            tolerance: tolerance()?,
        },
    };
    let secrets: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
    // The error names the rule, never the secret.
    SignatureRule::new(scheme, &secrets).map_err(|e| refuse(at("secret"), &[&shown(&e)]))
}
