export * from './cni/errors.js';
export * from './cni/versions.js';
export * from './cni/types.js';
export * from './cni/validate.js';
export * from './cni/env.js';
export * from './cni/convert.js';
export * from './api.js';
export * from './spool.js';
