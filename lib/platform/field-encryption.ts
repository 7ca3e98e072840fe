import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { Binary } from 'mongodb';

/**
 * Field-level encryption at rest: AES-256-GCM with keys from configuration (DATA_ENCRYPTION_KEYS), for any
 * value a repository must not store in plaintext (webhook signing secrets now; insurance and patient data
 * later). Repositories encrypt on write and decrypt on read, so the rest of the code sees plaintext.
 *
 * A stored value is a plain subdocument, `{key_id, iv, tag, ciphertext}` (bytes as BSON binary): `key_id`
 * names the key that encrypted it, so a keyring of several keys reads values written under any of them
 * while encrypting only with the current (first) one. Each value is bound to a caller-chosen `context`
 * (GCM additional data, not stored), e.g. the collection, document id and field, so a ciphertext copied
 * into another document or field does not decrypt.
 */

export interface EncryptedValue {
  key_id: string;
  /** 12-byte GCM nonce, random per value. */
  iv: Binary;
  /** 16-byte GCM authentication tag. */
  tag: Binary;
  ciphertext: Binary;
}

export interface DataKey {
  id: string;
  /** 32 bytes. */
  key: Buffer;
}

const ALGORITHM = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

export class DecryptionError extends Error {}

/**
 * Parses `keyId:base64-of-32-bytes,...`: the first key is current (encrypts), the others only decrypt.
 * Throws an Error naming the problem (never the key material).
 */
export function parseDataKeys(spec: string): DataKey[] {
  const keys: DataKey[] = [];
  for (const entry of spec.split(',').map((e) => e.trim())) {
    const colon = entry.indexOf(':');
    const id = colon === -1 ? '' : entry.slice(0, colon);
    if (!KEY_ID.test(id)) throw new Error('each entry is keyId:base64-key, the id of letters, digits, ".", "_" or "-"');
    const key = Buffer.from(entry.slice(colon + 1), 'base64');
    if (key.length !== 32) throw new Error(`key "${id}" is ${key.length} bytes; AES-256 needs 32 (openssl rand -base64 32)`);
    if (keys.some((k) => k.id === id)) throw new Error(`key id "${id}" appears twice`);
    keys.push({ id, key });
  }
  return keys;
}

/** A fresh `keyId:base64` entry for DATA_ENCRYPTION_KEYS. */
export function generateDataKey(id = `k${new Date().toISOString().slice(0, 10).replace(/-/g, '')}`): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}

const bytesOf = (b: Binary | Uint8Array): Buffer => (b instanceof Binary ? Buffer.from(b.buffer.buffer, b.buffer.byteOffset, b.position) : Buffer.from(b));

export class FieldCipher {
  /** As key objects: a raw key would be imported again on every cipher made (twice the cost of the encryption itself). */
  private readonly keys: Map<string, KeyObject>;
  readonly currentKeyId: string;

  constructor(keys: DataKey[]) {
    if (!keys.length) throw new Error('a FieldCipher needs at least one key');
    this.keys = new Map(keys.map((k) => [k.id, createSecretKey(k.key)]));
    this.currentKeyId = keys[0].id;
  }

  static fromSpec(spec: string): FieldCipher {
    return new FieldCipher(parseDataKeys(spec));
  }

  /** Whether `value` has the stored shape of an encrypted value. */
  static isEncrypted(value: unknown): value is EncryptedValue {
    const v = value as Partial<EncryptedValue> | null;
    return typeof v === 'object' && v !== null && typeof v.key_id === 'string' && v.iv !== undefined && v.tag !== undefined && v.ciphertext !== undefined;
  }

  encrypt(plaintext: string | Buffer, context: string): EncryptedValue {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, this.keys.get(this.currentKeyId)!, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext), cipher.final()]);
    return { key_id: this.currentKeyId, iv: new Binary(iv), tag: new Binary(cipher.getAuthTag()), ciphertext: new Binary(ciphertext) };
  }

  /** The plaintext bytes; a DecryptionError if the key is unknown or the value was altered or moved. */
  decrypt(value: EncryptedValue, context: string): Buffer {
    const key = this.keys.get(value.key_id);
    if (!key) {
      throw new DecryptionError(
        `value encrypted with data key "${value.key_id}", which DATA_ENCRYPTION_KEYS does not hold ` +
          '(keep retired keys after the current one until `npm run reencrypt` has run)',
      );
    }
    try {
      const decipher = createDecipheriv(ALGORITHM, key, bytesOf(value.iv), { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(bytesOf(value.tag));
      return Buffer.concat([decipher.update(bytesOf(value.ciphertext)), decipher.final()]);
    } catch {
      throw new DecryptionError(`value under data key "${value.key_id}" does not authenticate (altered, or stored under another context)`);
    }
  }

  decryptString(value: EncryptedValue, context: string): string {
    return this.decrypt(value, context).toString('utf8');
  }

  /** Whether `value` was encrypted under a key other than the current one (`npm run reencrypt` rewrites it). */
  isStale(value: EncryptedValue): boolean {
    return value.key_id !== this.currentKeyId;
  }
}
