//! Who the client is and what it shows, compiled: the scope sources, the fingerprint, the one-time
//! token.

use super::*;

#[derive(Debug, Clone)]
pub(crate) enum ScopeConfig {
    Header(String),
    /// `{"header": name, "verified": true}`: set by Envoy, not by the client.
    VerifiedHeader(String),
    Property(Vec<String>),
    Peer,
}

#[derive(Debug, Clone)]
pub(crate) struct FingerprintConfig {
    pub(crate) mode: Option<ModeConfig>,
    pub(crate) headers: Option<Vec<String>>,
    pub(crate) fields: Option<Vec<String>>,
    pub(crate) max_depth: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModeConfig {
    Auto,
    Raw,
    Json,
    Form,
    Fields,
    None,
}

#[derive(Debug, Clone)]
pub(crate) struct TokenConfig {
    pub(crate) secret: Option<String>,
    pub(crate) secret_env: Option<String>,
    pub(crate) ttl: Option<String>,
    pub(crate) issue_path: Option<String>,
    pub(crate) header: Option<String>,
}

impl Config {
    pub(super) fn compile_scope(&self) -> Result<Vec<ScopeSource>, Refusal> {
        let Some(list) = &self.scope else {
            return Ok(alloc::vec![
                ScopeSource::Header(copy("authorization")),
                ScopeSource::Peer
            ]);
        };
        if list.is_empty() {
            return Err(invalid(
                "scope",
                &["must name at least one source (use [\"peer\"] for the client address)"],
            ));
        }
        let mut sources = Vec::new();
        for (i, source) in list.iter().enumerate() {
            sources.push(match source {
                ScopeConfig::Header(name) => {
                    ScopeSource::Header(header_name(&item("scope", i, ".header"), name)?)
                }
                ScopeConfig::VerifiedHeader(name) => {
                    ScopeSource::VerifiedHeader(header_name(&item("scope", i, ".header"), name)?)
                }
                ScopeConfig::Property(path)
                    if path.is_empty() || path.iter().any(String::is_empty) =>
                {
                    return Err(refuse(
                        item("scope", i, ".property"),
                        &["must be a non-empty list of non-empty path segments"],
                    ))
                }
                ScopeConfig::Property(path) => ScopeSource::Property(path.clone()),
                ScopeConfig::Peer => ScopeSource::Peer,
            });
        }
        Ok(sources)
    }

    pub(super) fn compile_fingerprint(&self) -> Result<FingerprintSpec, Refusal> {
        let Some(fp) = &self.fingerprint else {
            return Ok(FingerprintSpec::default());
        };
        let mut limits = JsonLimits::default();
        if let Some(depth) = fp.max_depth {
            if depth == 0 {
                return Err(invalid("fingerprint.max_depth", &["must be at least 1"]));
            }
            limits.max_depth = depth;
        }
        let mode = match (fp.mode.unwrap_or(ModeConfig::Auto), &fp.fields) {
            (ModeConfig::Fields, None) => {
                return Err(invalid(
                    "fingerprint.fields",
                    &["mode \"fields\" needs a list of JSON pointers"],
                ))
            }
            (ModeConfig::Fields, Some(fields)) => {
                let mut pointers = Vec::new();
                for (i, text) in fields.iter().enumerate() {
                    let pointer = JsonPointer::parse(text)
                        .map_err(|e| refuse(item("fingerprint.fields", i, ""), &[&e.message()]))?;
                    pointers.push(pointer);
                }
                FingerprintMode::Fields(pointers.into())
            }
            (_, Some(_)) => {
                return Err(invalid(
                    "fingerprint.fields",
                    &["only applies to mode \"fields\""],
                ))
            }
            (ModeConfig::Auto, None) => FingerprintMode::Auto,
            (ModeConfig::Raw, None) => FingerprintMode::Raw,
            (ModeConfig::Json, None) => FingerprintMode::Json,
            (ModeConfig::Form, None) => FingerprintMode::Form,
            (ModeConfig::None, None) => FingerprintMode::None,
        };
        let headers = match &fp.headers {
            None => FingerprintSpec::default().headers,
            Some(list) => {
                let mut headers = Vec::new();
                for (i, h) in list.iter().enumerate() {
                    headers.push(header_name(&item("fingerprint.headers", i, ""), h)?);
                }
                headers
            }
        };
        Ok(FingerprintSpec {
            mode,
            headers,
            json_limits: limits,
        })
    }

    pub(super) fn compile_token(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<TokenPolicy>, Refusal> {
        let Some(token) = &self.token else {
            return Ok(None);
        };
        let from_env;
        let secret = match (&token.secret, &token.secret_env) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "token.secret",
                    &["give either `secret` or `secret_env`, not both"],
                ))
            }
            (Some(secret), None) => secret,
            (None, env_name) => {
                let name = env_name.as_deref().unwrap_or(defaults::TOKEN_SECRET_ENV);
                from_env = env(name).ok_or_else(|| {
                    invalid(
                        "token.secret_env",
                        &["environment variable `", name, "` is not set for the VM"],
                    )
                })?;
                &from_env
            }
        };
        // The error names the rule, never the secret.
        let secret = TokenSecret::new(secret.as_bytes())
            .map_err(|e| invalid("token.secret", &[&shown(&e)]))?;
        let issue_path = token
            .issue_path
            .as_deref()
            .unwrap_or(defaults::TOKEN_ISSUE_PATH);
        if !issue_path.starts_with('/') {
            return Err(invalid("token.issue_path", &["must start with `/`"]));
        }
        let ttl = span("token.ttl", token.ttl.as_deref(), defaults::TOKEN_TTL)?;
        if ttl.as_millis() == 0 {
            return Err(invalid("token.ttl", &["must be longer than zero"]));
        }
        Ok(Some(TokenPolicy {
            secret,
            ttl,
            issue_path: copy(issue_path),
            header: header_name(
                "token.header",
                token.header.as_deref().unwrap_or(defaults::TOKEN_HEADER),
            )?,
        }))
    }
}
