//! The benchmark's request body: a JSON order of exactly `size` bytes (an array of line items,
//! padded with spaces before the closing brace). One definition for the core bench and host-tests'
//! `work` example (`bench.py`'s `json_body` writes the same bytes for wrk).

/// A JSON order of `size` bytes.
pub fn json_body(size: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"currency":"EUR","customer":"c-12345","items":["#);
    let mut i = 0;
    while s.len() + 80 < size {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"sku":"sku-{i:06}","name":"Item number {i}","qty":{},"price":{}.{:02}}}"#,
            i % 7 + 1,
            i * 3 % 500,
            i % 100
        ));
        i += 1;
    }
    s.push_str(r#"],"note":"leave at the door"}"#);
    while s.len() < size {
        s.insert(s.len() - 1, ' ');
    }
    s.into_bytes()
}
