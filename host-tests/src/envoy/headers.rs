//! A header map as Envoy keeps one: ordered pairs, names lowercase (the codec lowercases them),
//! lookups by lowercase name, the first value answering a single-value get.

/// Ordered (name, value) pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderMap(pub Vec<(String, Vec<u8>)>);

impl HeaderMap {
    pub fn new() -> Self {
        HeaderMap::default()
    }

    /// The first value of `name`, as Envoy's `getHeaderMapValue` answers.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let name = name.to_ascii_lowercase();
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_slice())
    }

    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    pub fn add(&mut self, name: &str, value: &[u8]) {
        self.0.push((name.to_ascii_lowercase(), value.to_vec()));
    }

    /// Envoy's `setCopy`: every existing value is replaced by this one.
    pub fn replace(&mut self, name: &str, value: &[u8]) {
        let name = name.to_ascii_lowercase();
        match self.0.iter().position(|(n, _)| *n == name) {
            Some(first) => {
                self.0[first].1 = value.to_vec();
                let mut i = 0;
                self.0.retain(|(n, _)| {
                    i += 1;
                    i - 1 == first || *n != name
                });
            }
            None => self.0.push((name, value.to_vec())),
        }
    }

    pub fn remove(&mut self, name: &str) {
        let name = name.to_ascii_lowercase();
        self.0.retain(|(n, _)| *n != name);
    }

    pub fn pairs(&self) -> &[(String, Vec<u8>)] {
        &self.0
    }

    /// Names lowercase, pseudo-headers first, as the codec hands a map to the filter chain.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.add(name, value);
        }
        map
    }
}
