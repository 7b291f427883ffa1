//! The `store` section compiled: the local store (the default), or the remote store service with
//! the secrets that seal its answers ([`crate::record::seal`]: nothing that can write the engine
//! plants a replay).

use super::{copy, defaults, invalid, shown, span, Config, Refusal, StoreBackendConfig};
use crate::policy::StoreKind;
use crate::record::seal::{RecordSecrets, SealError, MIN_SECRET_LEN};
use alloc::string::String;
use alloc::vec::Vec;

impl Config {
    /// The `store` section: local (the default) or the remote store service.
    pub(super) fn compile_store(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<StoreKind, Refusal> {
        let Some(store) = &self.store else {
            return Ok(StoreKind::Local);
        };
        match store.kind.as_deref() {
            None | Some("local") => {
                let remote_only = match (&store.cluster, &store.timeout) {
                    (Some(_), _) => Some("store.cluster"),
                    (None, Some(_)) => Some("store.timeout"),
                    (None, None) => None,
                };
                if let Some(field) = remote_only {
                    return Err(invalid(field, &["only applies when `kind` is \"remote\""]));
                }
                if store.record_secret_env.is_some() || store.record_secrets_env.is_some() {
                    return Err(invalid(
                        "store.record_secret_env",
                        &["only applies when `kind` is \"remote\": the local store is written by this Envoy alone"],
                    ));
                }
                Ok(StoreKind::Local)
            }
            Some("remote") => {
                let cluster = match store.cluster.as_deref() {
                    Some(c) if !c.is_empty() => copy(c),
                    _ => {
                        return Err(invalid(
                            "store.cluster",
                            &["a remote store needs the Envoy cluster of the store service"],
                        ))
                    }
                };
                let timeout = span("store.timeout", store.timeout.as_deref(), "250ms")?;
                if timeout.as_millis() == 0 || timeout.as_millis() > 60_000 {
                    return Err(invalid("store.timeout", &["must be between 1ms and 60s"]));
                }
                let secrets = record_secrets(store, env)?;
                Ok(StoreKind::Remote {
                    cluster,
                    timeout,
                    secrets,
                })
            }
            Some(_) => Err(invalid("store.kind", &["expected \"local\" or \"remote\""])),
        }
    }
}

/// The secrets that seal a remote store's answers, read from the VM's environment. Required: a
/// remote store without them would replay whatever its engine holds (no unsealed fallback).
fn record_secrets(
    store: &StoreBackendConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RecordSecrets, Refusal> {
    let (field, names): (&str, Vec<&str>) =
        match (&store.record_secret_env, &store.record_secrets_env) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "store.record_secret_env",
                    &["give either `record_secret_env` or `record_secrets_env`, not both"],
                ))
            }
            (Some(name), None) => ("store.record_secret_env", alloc::vec![name.as_str()]),
            (None, Some(names)) => (
                "store.record_secrets_env",
                names.iter().map(String::as_str).collect(),
            ),
            (None, None) => (
                "store.record_secret_env",
                alloc::vec![defaults::RECORD_SECRET_ENV],
            ),
        };
    let mut values = Vec::with_capacity(names.len());
    for name in &names {
        let value = env(name).ok_or_else(|| {
            invalid(
                field,
                &[
                    "environment variable `",
                    name,
                    "` is not set for the VM (a remote store's answers are sealed with it)",
                ],
            )
        })?;
        // The error names the variable and the rule, never the secret.
        if value.len() < MIN_SECRET_LEN {
            let error = SealError::SecretTooShort { len: value.len() };
            return Err(invalid(
                field,
                &["environment variable `", name, "`: ", &shown(&error)],
            ));
        }
        values.push(value);
    }
    let secrets: Vec<&[u8]> = values.iter().map(String::as_bytes).collect();
    RecordSecrets::new(&secrets).map_err(|e| invalid(field, &[&shown(&e)]))
}
