// The sandbox ("pause") image of the CRI pods, built here with no registry: pause.c compiled with
// gcc -static into a one-file root filesystem, packaged by hand as an OCI image layout archive
// (oci-layout, index.json, blobs/sha256/{layer tar, config, manifest}) that
// `ctr -n k8s.io image import` loads under the name given (annotation io.containerd.image.name).

import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from '../runtimes/exec.js';

const SOURCE = fileURLToPath(new URL('./pause.c', import.meta.url));

function sha256(b: Buffer | string): string {
  return createHash('sha256').update(b).digest('hex');
}

function goArch(): string {
  return (
    ({ x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' } as Record<string, string>)[
      process.arch
    ] ?? process.arch
  );
}

/** Builds the archive in `dir`; returns its path. */
export async function buildPauseArchive(dir: string, ref: string): Promise<string> {
  const rootfs = join(dir, 'pause-rootfs');
  const layout = join(dir, 'pause-oci');
  const blobs = join(layout, 'blobs', 'sha256');
  mkdirSync(rootfs, { recursive: true });
  mkdirSync(blobs, { recursive: true });
  const cc = await run('gcc', ['-static', '-Os', '-s', '-o', join(rootfs, 'pause'), SOURCE]);
  if (cc.code !== 0) throw new Error(`gcc -static pause.c failed (${cc.code}): ${cc.stderr}`);

  const layerFile = join(dir, 'pause-layer.tar');
  const tar = await run('tar', [
    '--numeric-owner',
    '--owner=0',
    '--group=0',
    '--mtime=@0',
    '-C',
    rootfs,
    '-cf',
    layerFile,
    'pause',
  ]);
  if (tar.code !== 0) throw new Error(`tar of the pause rootfs failed: ${tar.stderr}`);
  const layer = readFileSync(layerFile);
  const layerDigest = sha256(layer);

  const blob = (text: string): { digest: string; size: number } => {
    const digest = sha256(text);
    writeFileSync(join(blobs, digest), text);
    return { digest: `sha256:${digest}`, size: Buffer.byteLength(text) };
  };
  writeFileSync(join(blobs, layerDigest), layer);
  const config = blob(
    JSON.stringify({
      architecture: goArch(),
      os: 'linux',
      config: { Entrypoint: ['/pause'], WorkingDir: '/' },
      rootfs: { type: 'layers', diff_ids: [`sha256:${layerDigest}`] },
    }),
  );
  const manifest = blob(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
      layers: [
        { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: `sha256:${layerDigest}`, size: layer.length },
      ],
    }),
  );
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(layout, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          platform: { architecture: goArch(), os: 'linux' },
          annotations: { 'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': ref.split(':').pop() },
        },
      ],
    }),
  );
  const archive = join(dir, 'pause.oci.tar');
  const pack = await run('tar', [
    '--numeric-owner',
    '--owner=0',
    '--group=0',
    '-C',
    layout,
    '-cf',
    archive,
    'oci-layout',
    'index.json',
    'blobs',
  ]);
  if (pack.code !== 0) throw new Error(`tar of the OCI layout failed: ${pack.stderr}`);
  return archive;
}
