//! Time, timers and stream control: `proxy_get_current_time_nanoseconds`,
//! `proxy_set_tick_period_milliseconds`, `proxy_continue_stream`, `proxy_close_stream`,
//! `proxy_send_local_response`, `proxy_http_call`, `proxy_get_status`,
//! `proxy_set_effective_context`, `proxy_done`, `proxy_call_foreign_function`.
//!
//! As in Envoy, a local response and a resume are not carried out inside the call: they are
//! recorded on the stream and acted on when the callback returns (see [`crate::envoy::Worker`]).

use super::maps;
use super::memory::{copy_out, read, read_text, write_u32, write_u64};
use super::{Status, ENV};
use crate::envoy::{HeaderMap, LocalReply, VmState};
use wasmtime::{Caller, Linker};

#[allow(clippy::too_many_arguments)]
fn local_response(
    mut caller: Caller<'_, VmState>,
    status: i32,
    details_ptr: i32,
    details_len: i32,
    body_ptr: i32,
    body_len: i32,
    headers_ptr: i32,
    headers_len: i32,
    _grpc_status: i32,
) -> i32 {
    let (Some(details), Some(body), Some(headers)) = (
        read_text(&mut caller, details_ptr, details_len),
        read(&mut caller, body_ptr, body_len),
        read(&mut caller, headers_ptr, headers_len),
    ) else {
        return Status::InvalidMemoryAccess.code();
    };
    let Some(pairs) = maps::decode(&headers) else {
        return Status::ParseFailure.code();
    };
    let Ok(status) = u16::try_from(status) else {
        return Status::BadArgument.code();
    };
    let world = caller.data().world.clone();
    let Some(stream) = caller.data_mut().stream_mut() else {
        return Status::BadArgument.code();
    };
    if stream.local_reply_sent || stream.local_reply.is_some() {
        world.anomaly(format!(
            "a second local reply ({status}) was asked for on one stream; Envoy ignores it"
        ));
        return Status::Ok.code();
    }
    stream.local_reply = Some(LocalReply {
        status,
        details,
        headers: HeaderMap::from_pairs(pairs.iter().map(|(n, v)| (n.as_str(), v.as_slice()))),
        body,
    });
    Status::Ok.code()
}

/// `proxy_http_call`: as proxy-wasm-cpp-host, the token slot is checked (written 0) before the
/// call starts and written again after it, 0 when the call failed.
#[allow(clippy::too_many_arguments)]
fn http_call(
    mut caller: Caller<'_, VmState>,
    upstream_ptr: i32,
    upstream_len: i32,
    headers_ptr: i32,
    headers_len: i32,
    body_ptr: i32,
    body_len: i32,
    trailers_ptr: i32,
    trailers_len: i32,
    timeout_ms: i32,
    ret_token: i32,
) -> i32 {
    let (Some(upstream), Some(headers), Some(body), Some(trailers)) = (
        read_text(&mut caller, upstream_ptr, upstream_len),
        read(&mut caller, headers_ptr, headers_len),
        read(&mut caller, body_ptr, body_len),
        read(&mut caller, trailers_ptr, trailers_len),
    ) else {
        return Status::InvalidMemoryAccess.code();
    };
    let (Some(headers), Some(trailers)) = (maps::decode(&headers), maps::decode(&trailers)) else {
        return Status::ParseFailure.code();
    };
    if !write_u32(&mut caller, ret_token, 0) {
        return Status::InvalidMemoryAccess.code();
    }
    let map = |pairs: Vec<(String, Vec<u8>)>| {
        HeaderMap::from_pairs(pairs.iter().map(|(n, v)| (n.as_str(), v.as_slice())))
    };
    let result =
        caller
            .data_mut()
            .dispatch_callout(upstream, map(headers), body, map(trailers), timeout_ms);
    let (token, status) = match result {
        Ok(token) => (token, Status::Ok),
        Err(status) => (0, status),
    };
    write_u32(&mut caller, ret_token, token);
    status.code()
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_get_current_time_nanoseconds",
        |mut caller: Caller<'_, VmState>, ret: i32| {
            if caller.data().world.faults().take_clock() {
                return Status::InternalFailure.code();
            }
            let now = caller.data().world.clock().now_nanos();
            if write_u64(&mut caller, ret, now) {
                Status::Ok.code()
            } else {
                Status::InvalidMemoryAccess.code()
            }
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_set_tick_period_milliseconds",
        |mut caller: Caller<'_, VmState>, period: i32| {
            caller.data_mut().tick_period_ms = period as u32;
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_continue_stream",
        |mut caller: Caller<'_, VmState>, kind: i32| {
            let Some(stream) = caller.data_mut().stream_mut() else {
                return Status::BadArgument.code();
            };
            match kind {
                0 => stream.continue_request = true,
                1 => stream.continue_response = true,
                _ => return Status::BadArgument.code(),
            }
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_close_stream",
        |mut caller: Caller<'_, VmState>, kind: i32| {
            let Some(stream) = caller.data_mut().stream_mut() else {
                return Status::BadArgument.code();
            };
            if !(0..=1).contains(&kind) {
                return Status::BadArgument.code();
            }
            stream.reset_requested = true;
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(ENV, "proxy_send_local_response", local_response)?;
    linker.func_wrap(ENV, "proxy_http_call", http_call)?;
    linker.func_wrap(
        ENV,
        "proxy_get_status",
        |mut caller: Caller<'_, VmState>, ret_code: i32, ret_ptr: i32, ret_len: i32| {
            // The root context's status: `BrokenConnection` / "reset" after a failed callout.
            let (code, message) = caller.data().root_status.clone();
            if !write_u32(&mut caller, ret_code, code) {
                return Ok(Status::InvalidMemoryAccess.code());
            }
            copy_out(&mut caller, message.as_bytes(), ret_ptr, ret_len).map(Status::code)
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_set_effective_context",
        |mut caller: Caller<'_, VmState>, context: i32| {
            let state = caller.data_mut();
            let context = context as u32;
            let live = state.streams.get(&context).is_some_and(|s| !s.deleted);
            if context != state.root_context && !live {
                return Status::BadArgument.code();
            }
            state.effective = Some(context);
            Status::Ok.code()
        },
    )?;
    linker.func_wrap(ENV, "proxy_done", |_caller: Caller<'_, VmState>| {
        Status::Ok.code()
    })?;
    linker.func_wrap(
        ENV,
        "proxy_call_foreign_function",
        |_caller: Caller<'_, VmState>,
         _name_ptr: i32,
         _name_len: i32,
         _args_ptr: i32,
         _args_len: i32,
         _ret_ptr: i32,
         _ret_len: i32| { Status::NotFound.code() },
    )?;
    Ok(())
}
