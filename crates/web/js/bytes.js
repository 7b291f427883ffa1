// Request facts as the edge sees them: body bytes, header bytes, path and query.

import { invalidArgument } from './errors.js';

const encoder = new TextEncoder();

/** UTF-8 bytes of a string; bytes of a BufferSource as they are. */
export function toBytes(value) {
  if (typeof value === 'string') return encoder.encode(value);
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw invalidArgument('expected a string, an ArrayBuffer or a typed array');
}

/**
 * A header value as the bytes on the wire. `fetch` only sends ByteStrings (each character is one
 * byte, 0–255), so this is Latin-1, not UTF-8.
 */
export function headerBytes(value) {
  const text = String(value);
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0xff) throw invalidArgument(`header value has a character outside 0-255 at ${i}`);
    out[i] = code;
  }
  return out;
}

/** Byte strings as one buffer and their lengths (how lists cross into wasm). */
export function joinParts(parts) {
  const joined = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.length;
  }
  return { joined, lengths: Uint32Array.from(parts, (p) => p.length) };
}

/** Headers (a `Headers`, an object or a list of pairs) as `[lowercase name, value]` pairs. */
export function headerPairs(headers) {
  if (headers == null) return [];
  const pairs = typeof headers.entries === 'function' && !Array.isArray(headers)
    ? [...headers.entries()]
    : Array.isArray(headers) ? headers : Object.entries(headers);
  return pairs.map(([name, value]) => [String(name).toLowerCase(), String(value)]);
}

/** `pathname + search` of a URL, resolved against the page (or `http://localhost/` outside one). */
export function pathAndQuery(url) {
  const base = globalThis.location?.href ?? 'http://localhost/';
  const parsed = new URL(String(url), base);
  return parsed.pathname + parsed.search;
}

/**
 * Calls `sink(chunk)` for every chunk of a body: a string, a BufferSource, a Blob,
 * URLSearchParams, a ReadableStream, or nothing. FormData has no fixed bytes (its multipart
 * boundary is random per request); encode it once first (see `encodeBody`).
 */
export async function eachChunk(body, sink) {
  if (body == null) return;
  if (typeof body === 'string' || body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
    sink(toBytes(body));
  } else if (typeof URLSearchParams !== 'undefined' && body instanceof URLSearchParams) {
    sink(toBytes(body.toString()));
  } else if (typeof Blob !== 'undefined' && body instanceof Blob) {
    await eachChunk(body.stream(), sink);
  } else if (typeof body.getReader === 'function') {
    const reader = body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        sink(toBytes(value));
      }
    } finally {
      reader.releaseLock();
    }
  } else if (typeof FormData !== 'undefined' && body instanceof FormData) {
    throw invalidArgument('FormData has no fixed bytes; encode it once with encodeBody() first');
  } else {
    throw invalidArgument('unsupported body type');
  }
}

/**
 * Makes a body that sends the same bytes on every attempt. FormData gets one multipart encoding
 * (and the content type naming its boundary); a ReadableStream is read into a Blob once.
 * Returns `{ body, contentType }` (`contentType` only when the encoding chose one).
 */
export async function encodeBody(body) {
  if (typeof FormData !== 'undefined' && body instanceof FormData) {
    const encoded = new Response(body);
    return { body: await encoded.blob(), contentType: encoded.headers.get('content-type') };
  }
  if (body != null && typeof body.getReader === 'function') {
    return { body: await new Response(body).blob(), contentType: null };
  }
  return { body, contentType: null };
}
