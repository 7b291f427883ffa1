// Errors with a stable `code`. Errors thrown by the wasm core are plain `Error`s named
// `IdemgateError` with the core's code; `instanceof IdemgateError` recognises both kinds.

export class IdemgateError extends Error {
  /**
   * @param {string} code stable machine-readable code
   * @param {string} message human-readable text
   * @param {object} [details] extra properties (`cause` becomes the standard error cause)
   */
  constructor(code, message, details = {}) {
    const { cause, ...rest } = details;
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'IdemgateError';
    this.code = code;
    Object.assign(this, rest);
  }

  static [Symbol.hasInstance](value) {
    return value instanceof Error && value.name === 'IdemgateError' && typeof value.code === 'string';
  }
}

export function invalidArgument(message) {
  return new IdemgateError('invalid_argument', message);
}
