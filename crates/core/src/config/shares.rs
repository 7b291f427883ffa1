//! The store's shares, compiled: what each payer may hold, in records and bytes, and from which
//! fill they bind; each amount read as a number, a percentage of `capacity` or `"off"`.

use super::*;

/// The `shares` section: what each payer may hold in the whole store.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharesConfig {
    pub(crate) identity: Option<ShareAmount>,
    pub(crate) peer: Option<ShareAmount>,
    /// Bytes: a size, a percentage of the memory bound (`"10%"`), or `"off"`.
    pub(crate) identity_bytes: Option<Size>,
    pub(crate) peer_bytes: Option<Size>,
    pub(crate) ipv4_prefix: Option<u16>,
    pub(crate) ipv6_prefix: Option<u16>,
    /// The fill, in percent of the store (`"50%"`), from which shares bind.
    pub(crate) pressure: Option<String>,
}

/// A share as written: records, or a percentage of `capacity` (`"10%"`).
#[derive(Debug, Clone)]
pub(crate) enum ShareAmount {
    Records(u64),
    Text(String),
}

impl Config {
    /// The shares of a store of `records` whose byte bound is `max_memory` bytes, counted in its
    /// fill shards where `memory_counted`.
    pub(super) fn compile_shares(
        &self,
        records: u32,
        (max_memory, memory_counted): (u64, bool),
    ) -> Result<Shares, Refusal> {
        let given = self.shares.clone().unwrap_or_default();
        let records = u64::from(records);
        let prefix = |field: &str, value: Option<u16>, default: u8, max: u16| match value {
            None => Ok(default),
            Some(n) if (1..=max).contains(&n) => Ok(n as u8),
            Some(_) => Err(invalid(
                field,
                &["must be between 1 and ", &decimal(u64::from(max))],
            )),
        };
        // One kind of payer's share: its records, then its bytes within them.
        let kind = |name: &str, count: Option<&ShareAmount>, bytes: Option<&Size>| {
            let Some(records) = share(&["shares.", name].concat(), count, records)? else {
                return Ok(None);
            };
            let field = ["shares.", name, "_bytes"].concat();
            let bytes = byte_share(&field, bytes, max_memory)?;
            Ok::<_, Refusal>(Some(Share { records, bytes }))
        };
        Ok(Shares {
            identity: kind(
                "identity",
                given.identity.as_ref(),
                given.identity_bytes.as_ref(),
            )?,
            peer: kind("peer", given.peer.as_ref(), given.peer_bytes.as_ref())?,
            ipv4_prefix: prefix(
                "shares.ipv4_prefix",
                given.ipv4_prefix,
                defaults::IPV4_PREFIX,
                32,
            )?,
            ipv6_prefix: prefix(
                "shares.ipv6_prefix",
                given.ipv6_prefix,
                defaults::IPV6_PREFIX,
                128,
            )?,
            pressure: match given.pressure.as_deref() {
                None => defaults::PRESSURE_PERCENT,
                Some(text) => pressure(text)?,
            },
            memory: max_memory,
            memory_counted,
        })
    }

    /// Each callback route's own share (`routes[i].share`), of a store of `records` records, its
    /// bytes the same part of `max_memory`. An API route has none to give: its clients are the
    /// payers, each within `shares.identity` and `shares.peer`.
    pub(super) fn compile_route_shares(
        &self,
        routes: &mut [Route],
        shares: &Shares,
        records: u32,
    ) -> Result<(), Refusal> {
        for (i, (route, config)) in routes
            .iter_mut()
            .zip(self.routes.iter().flatten())
            .enumerate()
        {
            let Some(given) = &config.share else {
                continue;
            };
            let field = item("routes", i, ".share");
            if route.kind != RouteKind::Callback {
                return Err(refuse(
                    field,
                    &["only applies to routes of kind \"callback\" (or with a `preset`), whose deliveries the route itself pays for; an API route's clients each pay within `shares.identity` and `shares.peer`"],
                ));
            }
            if !shares.counted() {
                return Err(refuse(
                    field,
                    &["is counted only while shares are: `shares.identity` and `shares.peer` are both \"off\""],
                ));
            }
            route.share = share(&field, Some(given), u64::from(records))?.map(|held| Share {
                records: held,
                bytes: byte_part(held, u64::from(records), shares.memory),
            });
        }
        Ok(())
    }
}

/// The default share of `whole` (records, or the memory bound's bytes):
/// [`defaults::SHARE_PERCENT`] of it, at least one.
pub(super) fn defaults_share(whole: u64) -> u64 {
    percent_of(whole, defaults::SHARE_PERCENT)
}

pub(super) fn percent_of(whole: u64, percent: u64) -> u64 {
    let part = u128::from(whole) * u128::from(percent) / 100;
    u64::try_from(part).unwrap_or(u64::MAX).max(1)
}

/// `"N%"` with N from 1 to 100: N; anything else `None`. Both kinds of share take percentages.
pub(super) fn percentage(text: &str) -> Option<u64> {
    text.strip_suffix('%')
        .and_then(|p| p.trim().parse::<u64>().ok())
        .filter(|p| (1..=100).contains(p))
}

/// `shares.pressure`: `"0%"` (shares always bind) to `"100%"` (never).
pub(super) fn pressure(text: &str) -> Result<u8, Refusal> {
    text.strip_suffix('%')
        .and_then(|p| p.trim().parse::<u8>().ok())
        .filter(|p| *p <= 100)
        .ok_or_else(|| {
            invalid(
                "shares.pressure",
                &["expected a percentage of `capacity` from \"0%\" to \"100%\""],
            )
        })
}

/// Each fill shard of the local store keeps its part of `max_memory`: the smallest part must hold
/// one answer of `max_response_body`, or such answers could never be kept there. The refusal
/// names the `max_memory` that would do.
pub(super) fn fits_one_answer_per_shard(
    capacity: Capacity,
    max_memory: u64,
    max_response_body: u64,
    replay_headers: &[String],
) -> Result<(), Refusal> {
    let layout = crate::store::Layout { capacity };
    let one = crate::policy::record_bound(max_response_body, replay_headers);
    let smallest = layout.smallest_fill_part(max_memory);
    if smallest >= one {
        return Ok(());
    }
    Err(invalid(
        "max_memory",
        &[
            "gives the smallest fill shard of the local store ",
            &decimal(smallest),
            " bytes, less than one answer of max_response_body with its replayed headers and \
             record overhead (",
            &decimal(one),
            "): raise max_memory to at least ",
            &decimal(layout.max_memory_for(one)),
            ", or lower max_response_body or capacity",
        ],
    ))
}

/// The default byte share of a payer in a store of `max_memory` bytes: the same part of it as
/// the default record share is of `capacity`, so ten flooding clients are needed to fill it.
pub(super) fn default_bytes(max_memory: u64) -> u64 {
    percent_of(max_memory, defaults::SHARE_PERCENT)
}

/// A byte share as configured, of a store whose byte bound is `bound` bytes (`max_memory`):
/// by default [`default_bytes`]; `u64::MAX` (never reached) for `"off"`.
pub(super) fn byte_share(field: &str, value: Option<&Size>, bound: u64) -> Result<u64, Refusal> {
    const EXPECTED: &str =
        "expected a size such as \"16MiB\", a percentage of `max_memory` from \"1%\" to \"100%\", or \"off\"";
    let bytes = match value {
        None => default_bytes(bound),
        Some(Size::Bytes(n)) => *n,
        Some(Size::Text(text)) if text == "off" => return Ok(u64::MAX),
        Some(Size::Text(text)) if text.ends_with('%') => percentage(text)
            .map(|p| percent_of(bound, p))
            .ok_or_else(|| invalid(field, &[EXPECTED]))?,
        Some(Size::Text(text)) => parse_size(text).ok_or_else(|| invalid(field, &[EXPECTED]))?,
    };
    if bytes == 0 {
        return Err(invalid(field, &["must be at least 1 byte"]));
    }
    Ok(bytes)
}

/// A share as configured, in records of a store of `records`; `None` for `"off"`.
pub(super) fn share(
    field: &str,
    value: Option<&ShareAmount>,
    records: u64,
) -> Result<Option<u64>, Refusal> {
    let n = match value {
        None => defaults_share(records),
        Some(ShareAmount::Records(n)) => *n,
        Some(ShareAmount::Text(text)) if text == "off" => return Ok(None),
        Some(ShareAmount::Text(text)) => {
            let percent = percentage(text).ok_or_else(|| {
                invalid(
                    field,
                    &["expected a number of records, a percentage from \"1%\" to \"100%\", or \"off\""],
                )
            })?;
            percent_of(records, percent)
        }
    };
    if n == 0 || n > records {
        return Err(invalid(
            field,
            &["must be between 1 and `capacity` (", &decimal(records), ")"],
        ));
    }
    Ok(Some(n))
}
