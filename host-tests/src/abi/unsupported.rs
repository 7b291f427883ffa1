//! Host calls the proxy-wasm SDK's dispatcher links in but idemgate never needs: gRPC calls and
//! resolving a shared queue by name (the filter enqueues by id: `super::queues`). They are defined (the module must load) and answer `Unimplemented`; every call is
//! also recorded as an anomaly, so a test notices at once if the filter starts using one.

use super::{Status, ENV};
use crate::envoy::VmState;
use wasmtime::{Caller, Linker};

fn refuse(caller: &Caller<'_, VmState>, name: &str) -> i32 {
    caller.data().world.anomaly(format!(
        "the filter called {name}, which the harness does not emulate"
    ));
    Status::Unimplemented.code()
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_grpc_call",
        |c: Caller<'_, VmState>,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32| { refuse(&c, "proxy_grpc_call") },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_grpc_stream",
        |c: Caller<'_, VmState>,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32,
         _: i32| { refuse(&c, "proxy_grpc_stream") },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_grpc_send",
        |c: Caller<'_, VmState>, _: i32, _: i32, _: i32, _: i32| refuse(&c, "proxy_grpc_send"),
    )?;
    linker.func_wrap(
        ENV,
        "proxy_grpc_cancel",
        |c: Caller<'_, VmState>, _: i32| refuse(&c, "proxy_grpc_cancel"),
    )?;
    linker.func_wrap(ENV, "proxy_grpc_close", |c: Caller<'_, VmState>, _: i32| {
        refuse(&c, "proxy_grpc_close")
    })?;
    linker.func_wrap(
        ENV,
        "proxy_resolve_shared_queue",
        |c: Caller<'_, VmState>, _: i32, _: i32, _: i32, _: i32, _: i32| {
            refuse(&c, "proxy_resolve_shared_queue")
        },
    )?;
    Ok(())
}
