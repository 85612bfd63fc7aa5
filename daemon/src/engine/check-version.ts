// The version at which to CHECK a delegate declared older than 0.4.0 (CHECK did not exist before).
// Such a delegate is checked at the lowest version from 0.4.0 on that its plugin says it supports
// (VERSION), with prevResult converted to it; when the plugin supports none, CHECK fails with code
// 107 rather than answer "healthy" without having checked anything.

import { CniError, ErrorCode, SUPPORTED_VERSIONS, versionAtLeast } from '@cni-steward/shared';

export type VersionProbe = (call: {
  command: 'VERSION';
  type: string;
  stdin: Record<string, unknown>;
}) => Promise<unknown>;

export async function checkVersionFor(type: string, delegate: string, probe: VersionProbe): Promise<string> {
  const answer = await probe({ command: 'VERSION', type, stdin: { cniVersion: '0.4.0' } });
  const listed = (answer as { supportedVersions?: unknown } | undefined)?.supportedVersions;
  const supported = Array.isArray(listed) ? listed.filter((v): v is string => typeof v === 'string') : [];
  const usable = SUPPORTED_VERSIONS.filter((v) => versionAtLeast(v, '0.4.0') && supported.includes(v));
  const chosen = usable[0];
  if (chosen === undefined) {
    throw new CniError(
      ErrorCode.CheckUnverifiable,
      `CHECK cannot verify delegate ${delegate}: plugin ${type} supports no CNI version with CHECK (0.4.0 or later)`,
      `it supports: ${supported.join(', ') || 'nothing it would say'}`,
    );
  }
  return chosen;
}
