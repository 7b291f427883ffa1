//! `proxy_get_property`, `proxy_set_property`: Envoy's attributes, looked up by their path
//! (segments separated by NUL on the wire, joined with `.` here: `request.path`,
//! `response.code_details`, `source.address`). Stream properties first, then node properties; a
//! path the fault plan hides answers `NotFound`.

use super::memory::{copy_out, read};
use super::{Status, ENV};
use crate::envoy::VmState;
use wasmtime::{Caller, Linker};

/// The wire path (NUL-separated segments) as a dotted name.
pub fn dotted(path: &[u8]) -> String {
    path.split(|b| *b == 0)
        .map(|segment| String::from_utf8_lossy(segment).into_owned())
        .collect::<Vec<_>>()
        .join(".")
}

pub fn add(linker: &mut Linker<VmState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        ENV,
        "proxy_get_property",
        |mut caller: Caller<'_, VmState>,
         path_ptr: i32,
         path_len: i32,
         ret_ptr: i32,
         ret_len: i32| {
            let Some(path) = read(&mut caller, path_ptr, path_len) else {
                return Ok(Status::InvalidMemoryAccess.code());
            };
            let name = dotted(&path);
            let state = caller.data();
            if state.world.faults().take_property(&name) {
                return Ok(Status::InternalFailure.code());
            }
            if state.world.faults().is_hidden(&name) {
                return Ok(Status::NotFound.code());
            }
            let value = state
                .stream()
                .and_then(|s| s.properties.get(&name))
                .or_else(|| state.node_properties.get(&name))
                .cloned();
            match value {
                Some(value) => copy_out(&mut caller, &value, ret_ptr, ret_len).map(Status::code),
                None => Ok(Status::NotFound.code()),
            }
        },
    )?;
    linker.func_wrap(
        ENV,
        "proxy_set_property",
        |mut caller: Caller<'_, VmState>,
         path_ptr: i32,
         path_len: i32,
         value_ptr: i32,
         value_len: i32| {
            let (Some(path), Some(value)) = (
                read(&mut caller, path_ptr, path_len),
                read(&mut caller, value_ptr, value_len),
            ) else {
                return Status::InvalidMemoryAccess.code();
            };
            let name = dotted(&path);
            match caller.data_mut().stream_mut() {
                Some(stream) => {
                    stream.properties.insert(name, value);
                    Status::Ok.code()
                }
                None => Status::BadArgument.code(),
            }
        },
    )?;
    Ok(())
}
