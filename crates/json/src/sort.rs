//! One small sort for the canonical encoders (JSON object members, form pairs).

/// In place and without recursion: insertion sort for the small objects most bodies are made of,
/// a heapsort (O(n log n) worst case) beyond. About 15 KB smaller in the browser's `.wasm` than
/// the standard library's sort.
pub fn sort<T: Copy>(items: &mut [T], less: impl Fn(&T, &T) -> bool) {
    if items.len() <= 16 {
        for i in 1..items.len() {
            let mut j = i;
            while j > 0
                && matches!((items.get(j - 1), items.get(j)), (Some(a), Some(b)) if less(b, a))
            {
                items.swap(j - 1, j);
                j -= 1;
            }
        }
    } else {
        heap_sort(items, less);
    }
}

fn heap_sort<T: Copy>(items: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let sift_down = |items: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        let (Some(c), Some(r)) = (items.get(child), items.get(root)) else {
            return;
        };
        if child >= end {
            return;
        }
        let mut c = *c;
        if let Some(right) = items.get(child + 1) {
            if child + 1 < end && less(&c, right) {
                child += 1;
                c = *right;
            }
        }
        if !less(r, &c) {
            return;
        }
        items.swap(root, child);
        root = child;
    };
    let n = items.len();
    for root in (0..n / 2).rev() {
        sift_down(items, root, n);
    }
    for end in (1..n).rev() {
        items.swap(0, end);
        sift_down(items, 0, end);
    }
}
