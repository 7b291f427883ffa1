//! The VM's environment variables (`vm_config.environment_variables` in Envoy), for
//! `token.secret_env`. Read straight through WASI's `environ_sizes_get`/`environ_get`: the `.wasm`
//! has no std (`std::env::var` and the wasi-libc environment code behind it), and it reads the
//! environment once per configuration, so it keeps no copy.
#![allow(unsafe_code)]

#[allow(unused_imports)]
use crate::prelude::*;

/// The value of `name`, if it is set and UTF-8.
#[cfg(target_arch = "wasm32")]
pub fn var(name: &str) -> Option<String> {
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    extern "C" {
        fn environ_sizes_get(count: *mut usize, buf_size: *mut usize) -> u16;
        fn environ_get(environ: *mut *mut u8, environ_buf: *mut u8) -> u16;
    }
    let (mut count, mut size) = (0usize, 0usize);
    // SAFETY: pointers to live locals.
    if unsafe { environ_sizes_get(&mut count, &mut size) } != 0 || count == 0 {
        return None;
    }
    let mut pointers: Vec<*mut u8> = vec![core::ptr::null_mut(); count];
    let mut buffer: Vec<u8> = vec![0; size];
    // SAFETY: room for `count` pointers and `size` bytes, as the host just said it needs; it
    // writes `NAME=VALUE\0` entries into `buffer` (and pointers into it, which are not used:
    // the entries are found by their NUL separators instead).
    if unsafe { environ_get(pointers.as_mut_ptr(), buffer.as_mut_ptr()) } != 0 {
        return None;
    }
    lookup(&buffer, name)
}

/// The value of `name`, if it is set and UTF-8.
#[cfg(not(target_arch = "wasm32"))]
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Finds `name` in WASI's environment block: `NAME=VALUE` entries, each ending in a NUL byte.
#[cfg_attr(not(any(target_arch = "wasm32", test)), allow(dead_code))]
fn lookup(block: &[u8], name: &str) -> Option<String> {
    block.split(|&b| b == 0).find_map(|entry| {
        let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        String::from_utf8(value.to_vec()).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::lookup;

    #[test]
    fn finds_a_name_only_as_a_whole_name() {
        let block = b"A=1\0IDEMGATE_TOKEN_SECRET_X=no\0IDEMGATE_TOKEN_SECRET=s3cret=x\0EMPTY=\0";
        assert_eq!(
            lookup(block, "IDEMGATE_TOKEN_SECRET").as_deref(),
            Some("s3cret=x")
        );
        assert_eq!(lookup(block, "A").as_deref(), Some("1"));
        assert_eq!(lookup(block, "EMPTY").as_deref(), Some(""));
        assert_eq!(lookup(block, "B"), None);
        assert_eq!(lookup(b"", "A"), None);
    }
}
