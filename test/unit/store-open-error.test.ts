// What an operator reads when the journal cannot be opened (daemon/src/store/open-error.ts,
// database.ts): the failing step, the path and the driver's cause, with a hint for the causes an
// operator can fix (read-only, permissions), the driver's code kept. Real failures where a test
// without root can cause them (a directory or a foreign file where the database should be, a file
// where its directory should be); the driver's own errors for the causes that need root or a
// read-only mount to happen.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import Database from 'better-sqlite3';
import { PathError, namingPath } from '../../daemon/src/store/open-error.js';
import { Store } from '../../daemon/src/store/store.js';

const root = mkdtempSync(join(tmpdir(), 'steward-open-error-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => join(root, `case-${++n}`);

const CANT_OPEN_HINT = ' (check that the directory exists and that stewardd may write it)';
const READ_ONLY_HINT = ' (the file or its directory is read-only: stewardd must be able to write it)';

describe('opening the journal', () => {
  test('a directory where the database file should be: "cannot open the journal database <path>", with a hint and the driver\'s code and error', () => {
    const path = join(fresh(), 'steward.db');
    mkdirSync(path, { recursive: true });
    assert.throws(
      () => new Store(path),
      (e: unknown) => {
        assert.ok(e instanceof PathError);
        assert.equal(e.name, 'PathError');
        assert.equal(e.code, 'SQLITE_CANTOPEN');
        assert.equal(
          e.message,
          `cannot open the journal database ${path}: unable to open database file${CANT_OPEN_HINT}`,
        );
        assert.ok(e.cause instanceof Database.SqliteError, 'the driver error is kept as the cause');
        assert.equal((e.cause as { code?: string }).code, 'SQLITE_CANTOPEN');
        return true;
      },
    );
  });

  test('a file that is not SQLite where the journal should be: named, with no hint (nothing to chmod)', () => {
    const dir = fresh();
    const path = join(dir, 'steward.db');
    mkdirSync(dir);
    writeFileSync(path, 'this is not a database '.repeat(300));
    assert.throws(
      () => new Store(path),
      (e: unknown) => {
        assert.ok(e instanceof PathError);
        assert.equal(e.code, 'SQLITE_NOTADB');
        assert.equal(e.message, `cannot open the journal database ${path}: file is not a database`);
        return true;
      },
    );
  });

  test("a file where the journal's directory should be: node's own error, which names the path, is not wrapped again", () => {
    const dir = fresh();
    mkdirSync(dir);
    writeFileSync(join(dir, 'state'), '');
    const journalDir = join(dir, 'state', 'db');
    assert.throws(
      () => new Store(join(journalDir, 'steward.db')),
      (e: unknown) => {
        assert.ok(!(e instanceof PathError));
        assert.equal((e as { code?: string }).code, 'ENOTDIR');
        assert.equal((e as Error).message, `ENOTDIR: not a directory, mkdir '${journalDir}'`);
        return true;
      },
    );
  });
});

describe('PathError: the hint for each cause', () => {
  const fsError = (code: string, text: string, path: string) =>
    Object.assign(new Error(`${code}: ${text}, open '${path}'`), { code, errno: -1, syscall: 'open', path });

  test('read-only: SQLite saying so (whatever its extended code), or a read-only file system', () => {
    for (const code of ['SQLITE_READONLY', 'SQLITE_READONLY_DIRECTORY', 'SQLITE_READONLY_DBMOVED']) {
      const e = new PathError(
        'open the journal database',
        '/ro/steward.db',
        new Database.SqliteError('attempt to write a readonly database', code),
      );
      assert.equal(
        e.message,
        `cannot open the journal database /ro/steward.db: attempt to write a readonly database${READ_ONLY_HINT}`,
      );
      assert.equal(e.code, code);
    }
    const erofs = new PathError('write the owner file', '/ro/x', fsError('EROFS', 'read-only file system', '/ro/y'));
    assert.equal(
      erofs.message,
      `cannot write the owner file /ro/x: EROFS: read-only file system, open '/ro/y'${READ_ONLY_HINT}`,
    );
  });

  test('permissions: EACCES and EPERM get the "may write it" hint; other causes none', () => {
    for (const code of ['EACCES', 'EPERM']) {
      const e = new PathError('write the owner file', '/s/x', fsError(code, 'permission denied', '/s/y'));
      assert.equal(
        e.message,
        `cannot write the owner file /s/x: ${code}: permission denied, open '/s/y'${CANT_OPEN_HINT}`,
      );
      assert.equal(e.code, code);
    }
    const full = new PathError(
      'open the journal database',
      '/s/db',
      new Database.SqliteError('database or disk is full', 'SQLITE_FULL'),
    );
    assert.equal(full.message, 'cannot open the journal database /s/db: database or disk is full');
  });
});

describe('namingPath: an error that already names the path', () => {
  const fsError = (code: string, text: string, path: string) =>
    Object.assign(new Error(`${code}: ${text}, mkdir '${path}'`), { code, errno: -1, syscall: 'mkdir', path });

  test('a node:fs error naming the path is thrown as itself, with the hint its cause has (none for others)', () => {
    // node:fs names the path, so the error is not wrapped: but a state directory stewardd may not
    // create (EACCES, EPERM) or that is on a read-only mount (EROFS) still gets what to check.
    const cases: Array<[string, string]> = [
      ['EACCES', CANT_OPEN_HINT],
      ['EPERM', CANT_OPEN_HINT],
      ['EROFS', READ_ONLY_HINT],
      ['ENOTDIR', ''],
    ];
    for (const [code, hint] of cases) {
      const thrown = fsError(code, 'some text', '/var/lib/steward');
      assert.throws(
        () =>
          namingPath('create the state directory', '/var/lib/steward', () => {
            throw thrown;
          }),
        (e: unknown) => {
          assert.equal(e, thrown, `${code}: the error itself, not wrapped`);
          assert.ok(!(e instanceof PathError));
          assert.equal((e as Error).message, `${code}: some text, mkdir '/var/lib/steward'${hint}`);
          assert.equal((e as { code?: string }).code, code);
          return true;
        },
      );
    }
  });

  test('an error not naming the path is wrapped in a PathError naming it; a value returned is passed through', () => {
    assert.equal(
      namingPath('open the owner lock', '/s/lock', () => 42),
      42,
    );
    assert.throws(
      () =>
        namingPath('open the owner lock', '/s/lock', () => {
          throw Object.assign(new Error('permission denied'), { code: 'EACCES' });
        }),
      (e: unknown) => {
        assert.ok(e instanceof PathError);
        assert.equal(e.message, `cannot open the owner lock /s/lock: permission denied${CANT_OPEN_HINT}`);
        assert.equal(e.code, 'EACCES');
        return true;
      },
    );
  });
});
