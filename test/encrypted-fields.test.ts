import type { Collection, Db } from 'mongodb';
import { FieldCipher, generateDataKey } from '../lib/platform/field-encryption';
import { EncryptedFields, type Sealed } from '../lib/platform/database/encrypted-fields';
import { Hl7IntakeRepository } from '../lib/labs/hl7-intake-store';
import { SecretsRepository } from '../lib/platform/secrets-store';
import { ownDatabase, startTestApp, type OwnDatabase, type TestApp } from './support/harness';

/**
 * The re-encryption pass (`npm run reencrypt`) rewrites a document without any lock: its write names the
 * ciphertext it read, so a writer that changed a sealed field meanwhile (a new value, an erasure) is never
 * overwritten with the older value. The interleaving is made exact here: the document changes right after the
 * pass has listed it, before the pass writes.
 */
interface Note {
  _id: string;
  note: string | null;
}

describe('re-encrypting sealed fields while others write them', () => {
  let app: TestApp;
  let own: OwnDatabase;
  let db: Db;
  const oldKey = generateDataKey('old');
  const newKey = generateDataKey('new');
  const fields = (keys: string) => new EncryptedFields<Note, 'note'>(FieldCipher.fromSpec(keys), 'notes', ['note']);

  beforeAll(async () => {
    app = await startTestApp();
    own = await ownDatabase(app, 'sealed');
    db = own.db;
  });
  afterAll(async () => {
    await own.drop();
    await app.close();
  });

  /** The real collection; `afterListing` runs once the pass has read its page, before it writes anything. */
  const interleaved = (coll: Collection<Sealed<Note, 'note'>>, afterListing: () => Promise<void>) =>
    new Proxy(coll, {
      get(target, prop, receiver) {
        if (prop !== 'find') return Reflect.get(target, prop, receiver);
        return (...args: Parameters<typeof target.find>) => {
          const cursor = target.find(...args);
          const toArray = cursor.toArray.bind(cursor);
          return Object.assign(cursor, {
            toArray: async () => {
              const page = await toArray();
              await afterListing();
              return page;
            },
          });
        };
      },
    });

  it('leaves a value written after the pass read the document, and an erasure, as they are', async () => {
    const coll = db.collection<Sealed<Note, 'note'>>('notes');
    const underOld = fields(oldKey);
    const current = fields(`${newKey},${oldKey}`);
    await coll.insertMany([
      underOld.seal('a', { _id: 'a', note: 'first' }),
      underOld.seal('b', { _id: 'b', note: 'to be erased' }),
      underOld.seal('c', { _id: 'c', note: 'untouched' }),
    ]);

    const rewritten = await current.rewriteStale(
      interleaved(coll, async () => {
        await coll.updateOne({ _id: 'a' }, { $set: current.seal('a', { note: 'second' }) }); // the owner's new value
        await coll.updateOne({ _id: 'b' }, { $set: { note: null } }); // an erasure
      }),
    );

    const opened = async (id: string) => current.open((await coll.findOne({ _id: id }))!).note;
    expect(await opened('a')).toBe('second'); // not the re-encrypted 'first'
    expect(await opened('b')).toBeNull(); // stays erased
    expect(await opened('c')).toBe('untouched');
    expect(rewritten).toBe(1); // only c: a was current by then, b empty
    // Everything readable with the new key alone: the old one can be dropped.
    const onlyNew = fields(newKey);
    for (const id of ['a', 'c']) expect(onlyNew.open((await coll.findOne({ _id: id }))!).note).toBeTruthy();
  });
});

describe('deployment secrets (the document-URL signing key)', () => {
  let app: TestApp;
  let own: OwnDatabase;

  beforeAll(async () => {
    app = await startTestApp();
    own = await ownDatabase(app, 'secrets');
  });
  afterAll(async () => {
    await own.drop();
    await app.close();
  });

  it('are stored encrypted with the data key; two processes agree on one key; one stored in plaintext is encrypted in place', async () => {
    const cipher = FieldCipher.fromSpec(generateDataKey('k1'));
    const [first, second] = [new SecretsRepository(own.db, cipher), new SecretsRepository(own.db, cipher)];
    const [a, b] = await Promise.all([first.key('document-url-signing'), second.key('document-url-signing')]);
    expect(a.equals(b)).toBe(true);
    const stored = await own.db.collection('deployment_secrets').findOne({ _id: 'document-url-signing' as never });
    expect(FieldCipher.isEncrypted(stored!.value)).toBe(true);
    expect(JSON.stringify(stored)).not.toContain(a.toString('base64'));

    // A key an earlier version stored in plaintext keeps working, and is encrypted at its first read.
    const legacy = Buffer.alloc(32, 7).toString('base64');
    await own.db.collection('deployment_secrets').insertOne({ _id: 'legacy' as never, value: legacy, created_at: new Date() });
    expect((await new SecretsRepository(own.db, cipher).key('legacy')).toString('base64')).toBe(legacy);
    const migrated = await own.db.collection('deployment_secrets').findOne({ _id: 'legacy' as never });
    expect(FieldCipher.isEncrypted(migrated!.value)).toBe(true);
    expect((await new SecretsRepository(own.db, cipher).key('legacy')).toString('base64')).toBe(legacy);
  });
});

describe('data key rotation of the deployment secrets and of stored lab intake messages (npm run reencrypt)', () => {
  let app: TestApp;
  let own: OwnDatabase;
  beforeAll(async () => {
    app = await startTestApp();
    own = await ownDatabase(app, 'rotation');
  });
  afterAll(async () => {
    await own.drop();
    await app.close();
  });

  it('rewrites them under the new key; afterwards the old key can go', async () => {
    const [keyA, keyB] = [generateDataKey('A'), generateDataKey('B')];
    const underA = FieldCipher.fromSpec(keyA);
    const signing = await new SecretsRepository(own.db, underA).key('document-url-signing');
    const report = {
      results: [],
      labFlags: {},
      missing: [],
      dateCollected: new Date(0),
      dateReceived: new Date(0),
      sampleInformation: { s1: { note: 'hemolysed' } },
    };
    const message = {
      _id: 'm1',
      team_id: 't',
      control_id: 'c1',
      message_sha256: 'x',
      order_id: 'o',
      state: 'pending' as const,
      claim: 'k',
      claimed_at: new Date(),
      report,
      ack: null,
      created_at: new Date(),
      applied_at: null,
    };
    await new Hl7IntakeRepository(own.db, underA).claim(message);

    const both = FieldCipher.fromSpec(`${keyB},${keyA}`);
    expect(await new SecretsRepository(own.db, both).reencrypt()).toBe(1);
    expect(await new Hl7IntakeRepository(own.db, both).reencrypt()).toBe(1);

    const onlyB = FieldCipher.fromSpec(keyB);
    expect((await new SecretsRepository(own.db, onlyB).key('document-url-signing')).equals(signing)).toBe(true);
    expect((await new Hl7IntakeRepository(own.db, onlyB).find('m1'))?.report.sampleInformation).toEqual({ s1: { note: 'hemolysed' } });
  });
});
