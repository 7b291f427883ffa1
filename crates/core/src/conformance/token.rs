//! Group `token`:
//! - `{"op":"issue","secret_hex":..,"scope_hex":..(32 bytes),"now":ms,"ttl":"10m","nonce_hex":..(16 bytes)}`
//!   → `{"token": text, "expires_at": ms}`;
//! - `{"op":"verify","secret_hex":..,"scope_hex":..,"now":ms,"token":text}`
//!   → `{"issued_at": ms, "expires_at": ms, "nonce_hex": ..}` or the token error code.

use crate::client::token::{issue, verify, TokenSecret};
use crate::conformance::{bytes_field, str_field, u64_field, Outcome};
use crate::hash::to_hex;
use crate::request::json::Value;
use crate::time::{Span, UnixMillis};
use alloc::format;
use alloc::string::String;

fn fixed<const N: usize>(input: &Value, name: &str) -> Result<[u8; N], String> {
    bytes_field(input, name)?
        .and_then(|bytes| <[u8; N]>::try_from(bytes.as_slice()).ok())
        .ok_or_else(|| format!("vector_bad_input:{name}"))
}

pub fn eval(input: &Value) -> Outcome {
    let secret = bytes_field(input, "secret")?.ok_or("vector_bad_input:secret")?;
    let secret = TokenSecret::new(&secret).map_err(|e| String::from(e.code()))?;
    let scope: [u8; 32] = fixed(input, "scope")?;
    let now = UnixMillis(u64_field(input, "now")?);
    match str_field(input, "op")? {
        "issue" => {
            let ttl: Span = str_field(input, "ttl")?
                .parse()
                .map_err(|_| String::from("vector_bad_input:ttl"))?;
            let issued = issue(&secret, &scope, now, ttl, fixed(input, "nonce")?);
            Ok(object! { "token" => issued.text, "expires_at" => issued.claims.expires_at.0 })
        }
        "verify" => {
            let claims = verify(&secret, str_field(input, "token")?, &scope, now)
                .map_err(|e| String::from(e.code()))?;
            Ok(object! {
                "issued_at" => claims.issued_at.0,
                "expires_at" => claims.expires_at.0,
                "nonce_hex" => to_hex(&claims.nonce),
            })
        }
        _ => Err(String::from("vector_bad_input:op")),
    }
}
