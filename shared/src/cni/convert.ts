// Conversion of CNI results between the spec versions steward speaks (0.3.0 .. 1.1.0).
//
// The versions share one result shape; the differences (CNI spec, "Result"; libcni's types/040
// and types/100) are:
//   - 0.3.0, 0.3.1 and 0.4.0 IPs carry `version` ("4" | "6"); 1.0.0 and later have none.
//     Going up drops it; going down re-derives it from the address.
//   - 1.1.0 interfaces may carry `mtu`, `socketPath` and `pciID`; going below 1.1.0 drops them.
// Only the spec's result fields (cniVersion, interfaces, ips, routes, dns) are kept; unknown
// keys inside interfaces, ips and routes are carried over untouched. The input is never
// mutated: the output is a deep copy, and absent optional fields are omitted, never undefined.

import { CniError, ErrorCode } from './errors.js';
import type { CniDns, CniInterface, CniIpConfig, CniResult, CniRoute } from './types.js';
import { SUPPORTED_VERSIONS, compareVersions, isSupportedVersion, type CniVersion } from './versions.js';

/** Interface fields introduced by spec 1.1.0. */
const INTERFACE_FIELDS_1_1 = ['mtu', 'socketPath', 'pciID'] as const;

type Json = Record<string, unknown>;

/**
 * Converts a CNI result of any supported version to `toVersion` (up or down).
 * Throws CniError DecodeFailure (6) for a malformed result, IncompatibleVersion (1) for an
 * unsupported source or target version.
 */
export function convertResult(result: unknown, toVersion: string): CniResult {
  const { raw, version: fromVersion } = decodeEnvelope(result);
  if (!isSupportedVersion(toVersion)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `cannot convert a CNI result to unsupported version "${String(toVersion)}"`,
      `supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  return convert(raw, fromVersion, toVersion);
}

/**
 * Checks that `result` is a well-formed CNI result of a supported version and returns a
 * normalized deep copy in its own version (unknown top-level keys dropped).
 */
export function validateResult(result: unknown): CniResult {
  const { raw, version } = decodeEnvelope(result);
  return convert(raw, version, version);
}

/** Spec 0.3.0 .. 0.4.0 results carry `version` on their IPs. */
function ipsCarryVersion(version: string): boolean {
  return compareVersions(version, '1.0.0') < 0;
}

/** "6" for an address containing ':', else "4" (the address may carry a /prefix). */
function ipVersionOf(address: string): '4' | '6' {
  return address.includes(':') ? '6' : '4';
}

function decodeEnvelope(result: unknown): { raw: Json; version: CniVersion } {
  if (!isObject(result)) {
    throw decodeError(`a CNI result must be a JSON object, got ${describe(result)}`);
  }
  const v = result.cniVersion;
  if (v === undefined || v === null || v === '') {
    throw decodeError('the CNI result has no cniVersion');
  }
  if (typeof v !== 'string') {
    throw decodeError(`the CNI result's cniVersion must be a string, got ${describe(v)}`);
  }
  if (!isSupportedVersion(v)) {
    throw new CniError(
      ErrorCode.IncompatibleVersion,
      `cannot convert a CNI result from unsupported version "${v}"`,
      `supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  return { raw: result, version: v };
}

function convert(raw: Json, fromVersion: CniVersion, toVersion: CniVersion): CniResult {
  const out: CniResult = { cniVersion: toVersion };
  const interfaces = optionalArray(raw, 'interfaces', 'interfaces');
  if (interfaces !== undefined) {
    out.interfaces = interfaces.map((v, i) => convertInterface(v, `interfaces[${i}]`, toVersion));
  }
  const ips = optionalArray(raw, 'ips', 'ips');
  if (ips !== undefined) {
    out.ips = ips.map((v, i) => convertIp(v, `ips[${i}]`, fromVersion, toVersion));
  }
  const routes = optionalArray(raw, 'routes', 'routes');
  if (routes !== undefined) {
    out.routes = routes.map((v, i) => convertRoute(v, `routes[${i}]`));
  }
  const dns = raw.dns;
  if (dns !== undefined && dns !== null) out.dns = convertDns(dns, 'dns');
  return out;
}

function convertInterface(value: unknown, where: string, toVersion: CniVersion): CniInterface {
  const src = expectObject(value, where);
  if (typeof src.name !== 'string') throw decodeError(`${where}.name must be a string, got ${describe(src.name)}`);
  optionalString(src, 'mac', where);
  optionalString(src, 'sandbox', where);
  optionalNumber(src, 'mtu', where);
  optionalString(src, 'socketPath', where);
  optionalString(src, 'pciID', where);
  const out = cloneObject(src, ['mac', 'sandbox', 'mtu', 'socketPath', 'pciID']) as CniInterface;
  if (compareVersions(toVersion, '1.1.0') < 0) {
    for (const key of INTERFACE_FIELDS_1_1) delete out[key];
  }
  return out;
}

function convertIp(value: unknown, where: string, fromVersion: CniVersion, toVersion: CniVersion): CniIpConfig {
  const src = expectObject(value, where);
  const address = src.address;
  if (typeof address !== 'string' || address === '') {
    throw decodeError(`${where}.address must be a non-empty string, got ${describe(address)}`);
  }
  const index = src.interface;
  if (index !== undefined && index !== null && !(typeof index === 'number' && Number.isInteger(index) && index >= 0)) {
    throw decodeError(`${where}.interface must be a non-negative integer, got ${describe(index)}`);
  }
  optionalString(src, 'gateway', where);

  const { version: srcIpVersion, ...rest } = cloneObject(src, ['version', 'interface', 'gateway']);
  if (!ipsCarryVersion(toVersion)) return rest as unknown as CniIpConfig;
  // Keep a 0.x source's own (valid) version; anything else is derived from the address.
  const version =
    ipsCarryVersion(fromVersion) && (srcIpVersion === '4' || srcIpVersion === '6')
      ? srcIpVersion
      : ipVersionOf(address);
  return { version, ...rest } as unknown as CniIpConfig;
}

function convertRoute(value: unknown, where: string): CniRoute {
  const src = expectObject(value, where);
  if (typeof src.dst !== 'string' || src.dst === '') {
    throw decodeError(`${where}.dst must be a non-empty string, got ${describe(src.dst)}`);
  }
  optionalString(src, 'gw', where);
  return cloneObject(src, ['gw']) as CniRoute;
}

function convertDns(value: unknown, where: string): CniDns {
  const src = expectObject(value, where);
  const out: CniDns = {};
  for (const key of ['nameservers', 'search', 'options'] as const) {
    const list = optionalArray(src, key, `${where}.${key}`);
    if (list === undefined) continue;
    list.forEach((item, i) => {
      if (typeof item !== 'string') throw decodeError(`${where}.${key}[${i}] must be a string, got ${describe(item)}`);
    });
    out[key] = [...(list as string[])];
  }
  const domain = optionalString(src, 'domain', where);
  if (domain !== undefined) out.domain = domain;
  return out;
}

// ---- helpers ----

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v)}`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

function decodeError(msg: string): CniError {
  return new CniError(ErrorCode.DecodeFailure, `malformed CNI result: ${msg}`);
}

function expectObject(v: unknown, where: string): Json {
  if (!isObject(v)) throw decodeError(`${where} must be an object, got ${describe(v)}`);
  return v;
}

/** A present array, or undefined for an absent/null field; anything else is a decode error. */
function optionalArray(obj: Json, key: string, where: string): unknown[] | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw decodeError(`${where} must be an array, got ${describe(v)}`);
  return v;
}

function optionalString(obj: Json, key: string, where: string): string | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw decodeError(`${where}.${key} must be a string, got ${describe(v)}`);
  return v;
}

function optionalNumber(obj: Json, key: string, where: string): number | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw decodeError(`${where}.${key} must be a number, got ${describe(v)}`);
  return v;
}

/**
 * Deep copy of a JSON-like object. Keys whose value is undefined are omitted, and so are the
 * `optional` keys when null (a JSON null for an optional spec field means "absent", as it does
 * for libcni's decoder); other nulls are kept.
 */
function cloneObject(obj: Json, optional: readonly string[] = []): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value === undefined || (value === null && optional.includes(key))) continue;
    // Defined, not assigned: JSON.parse makes "__proto__" an own key, and assigning it would set the
    // copy's prototype instead (dropping the key and letting its members pass as the result's own).
    Object.defineProperty(out, key, { value: cloneValue(value), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function cloneValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => (item === undefined ? null : cloneValue(item)));
  if (isObject(value)) return cloneObject(value);
  return value;
}
