//! The request as the edge sees it: the method `fetch` puts on the wire and the path a
//! route spells — what a fingerprint hashes, from `idemgate_core::request::target`, the function
//! the Envoy filter calls too.

use crate::object::{Json, Member};
use wasm_bindgen::prelude::*;

/// `{method, path}` of a request an app sends with `fetch(pathAndQuery, {method})`, as the edge
/// sees it on a route with `caseSensitive` (`undefined`: the core's default, case-insensitive):
/// `post` → `POST`, `/Orders//x;v=1?Q` → `/orders/x?Q`.
#[wasm_bindgen(js_name = requestTarget)]
pub fn request_target(method: &str, path_and_query: &str, case_sensitive: Option<bool>) -> JsValue {
    target(method, path_and_query, case_sensitive).into_js()
}

pub fn target(method: &str, path_and_query: &str, case_sensitive: Option<bool>) -> Json {
    let case_sensitive =
        case_sensitive.unwrap_or(idemgate_core::request::target::CASE_SENSITIVE_BY_DEFAULT);
    let target = idemgate_core::request::target::of_fetch(method, path_and_query, case_sensitive);
    Json::object(&[
        ("method", Member::Text(target.method)),
        ("path", Member::Text(&target.path)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_edge_sees() {
        let seen = |m, p, cs| target(m, p, cs).0;
        let orders = r#"{"method":"POST","path":"/orders"}"#;
        assert_eq!(seen("post", "/Orders", None), orders);
        assert_eq!(seen("POST", "//orders;v=1", Some(false)), orders);
        assert_eq!(
            seen("patch", "/Orders/?Q=1", Some(true)),
            r#"{"method":"patch","path":"/Orders/?Q=1"}"#
        );
    }
}
