//! Header map calls: get/replace/add/remove one header, get/set all pairs. Map types 0–3 are the
//! stream's request/response headers/trailers, 6–7 the answer of an HTTP callout (readable, from
//! any context, only while `proxy_on_http_call_response` runs). A map that does not exist (yet)
//! answers `BadArgument` to every call but `proxy_get_header_map_pairs`, which reads it as empty —
//! as Envoy's `getMap`/`getConstMap` returning null do.

use super::maps;
use super::memory::{copy_out, read, read_text};
use super::{Status, ENV};
use crate::envoy::{HeaderMap, VmState};
use wasmtime::{Caller, Linker};

fn map(state: &VmState, kind: i32) -> Option<&HeaderMap> {
    match kind {
        0..=3 => {
            let stream = state.stream()?;
            match kind {
                0 => stream.request_headers.as_ref(),
                1 => stream.request_trailers.as_ref(),
                2 => stream.response_headers.as_ref(),
                _ => stream.response_trailers.as_ref(),
            }
        }
        6 => state.http_call_response.as_ref().map(|r| &r.headers),
        7 => state.http_call_response.as_ref().map(|r| &r.trailers),
        _ => None,
    }
}

fn map_mut(state: &mut VmState, kind: i32) -> Option<&mut HeaderMap> {
    let stream = state.stream_mut()?;
    match kind {
        0 => stream.request_headers.as_mut(),
        1 => stream.request_trailers.as_mut(),
        2 => stream.response_headers.as_mut(),
        3 => stream.response_trailers.as_mut(),
        _ => None,
    }
}

fn edit(caller: &mut Caller<'_, VmState>, kind: i32, change: impl FnOnce(&mut HeaderMap)) -> i32 {
    match map_mut(caller.data_mut(), kind) {
        Some(map) => {
            change(map);
            Status::Ok.code()
        }
        None => Status::BadArgument.code(),
    }
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_get_header_map_pairs",
        |mut caller: Caller<'_, VmState>, kind: i32, ret_ptr: i32, ret_len: i32| {
            if !(0..=7).contains(&kind) {
                return Ok(Status::BadArgument.code());
            }
            if caller.data().world.faults().take_header_map(kind) {
                return Ok(Status::InternalFailure.code());
            }
            // Envoy hands an absent or empty map over as "" (null pointer, size 0).
            let pairs = map(caller.data(), kind)
                .filter(|m| !m.pairs().is_empty())
                .map(|m| maps::encode(m.pairs()))
                .unwrap_or_default();
            copy_out(&mut caller, &pairs, ret_ptr, ret_len).map(Status::code)
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_set_header_map_pairs",
        |mut caller: Caller<'_, VmState>, kind: i32, ptr: i32, len: i32| {
            let Some(bytes) = read(&mut caller, ptr, len) else {
                return Status::InvalidMemoryAccess.code();
            };
            let Some(pairs) = maps::decode(&bytes) else {
                return Status::ParseFailure.code();
            };
            edit(&mut caller, kind, |map| {
                *map = HeaderMap::from_pairs(pairs.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
            })
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_get_header_map_value",
        |mut caller: Caller<'_, VmState>,
         kind: i32,
         key_ptr: i32,
         key_len: i32,
         ret_ptr: i32,
         ret_len: i32| {
            let Some(key) = read_text(&mut caller, key_ptr, key_len) else {
                return Ok(Status::InvalidMemoryAccess.code());
            };
            let value = match map(caller.data(), kind) {
                None => return Ok(Status::BadArgument.code()),
                Some(map) => map.get(&key).map(<[u8]>::to_vec),
            };
            match value {
                Some(value) => copy_out(&mut caller, &value, ret_ptr, ret_len).map(Status::code),
                None => Ok(Status::NotFound.code()),
            }
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_replace_header_map_value",
        |mut caller: Caller<'_, VmState>,
         kind: i32,
         key_ptr: i32,
         key_len: i32,
         value_ptr: i32,
         value_len: i32| {
            let (Some(key), Some(value)) = (
                read_text(&mut caller, key_ptr, key_len),
                read(&mut caller, value_ptr, value_len),
            ) else {
                return Status::InvalidMemoryAccess.code();
            };
            edit(&mut caller, kind, |map| map.replace(&key, &value))
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_add_header_map_value",
        |mut caller: Caller<'_, VmState>,
         kind: i32,
         key_ptr: i32,
         key_len: i32,
         value_ptr: i32,
         value_len: i32| {
            let (Some(key), Some(value)) = (
                read_text(&mut caller, key_ptr, key_len),
                read(&mut caller, value_ptr, value_len),
            ) else {
                return Status::InvalidMemoryAccess.code();
            };
            edit(&mut caller, kind, |map| map.add(&key, &value))
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_remove_header_map_value",
        |mut caller: Caller<'_, VmState>, kind: i32, key_ptr: i32, key_len: i32| {
            let Some(key) = read_text(&mut caller, key_ptr, key_len) else {
                return Status::InvalidMemoryAccess.code();
            };
            edit(&mut caller, kind, |map| map.remove(&key))
        },
    )?;
    Ok(())
}
