// Where things are, for the JS tests.
export const webDir = new URL('../../../', import.meta.url);
export const pkgDir = new URL('pkg/', webDir);
export const vectorsDir = new URL('../../vectors/', webDir);
