import { pipeline, Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';
import { ExportFileError } from './export-xml';

/**
 * `export.xml` inside the Health app's `export.zip`, read without unpacking the archive: the zip's central directory
 * (at its end, zip64 for archives over 4 GB) says where the entry's bytes are, and those are inflated as a stream.
 * The archive is read through `bytes` (a range of the stored upload), so nothing is held whole.
 */
export interface StoredBytes {
  size: number;
  /** Bytes [start, end) at once (small: the directory). */
  read(start: number, end: number): Promise<Buffer>;
  /** Bytes [start, end) as they come. */
  stream(start: number, end: number): AsyncIterable<Buffer>;
}

const EOCD = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_EOCD = 0x06064b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
const NOT_A_ZIP =
  'The upload is not a zip archive (content-type application/zip): send export.zip as the Health app made it, or export.xml as application/xml.';

interface Entry {
  name: string;
  method: number;
  compressedSize: number;
  localHeader: number;
}

async function centralDirectory(bytes: StoredBytes): Promise<{ offset: number; size: number; entries: number }> {
  // The end record is the last 22 bytes plus a comment of up to 64 KiB.
  const tailStart = Math.max(0, bytes.size - 22 - 0xffff);
  const tail = await bytes.read(tailStart, bytes.size);
  let at = -1;
  for (let i = tail.length - 22; i >= 0; i--) {
    if (tail.readUInt32LE(i) === EOCD) {
      at = i;
      break;
    }
  }
  if (at < 0) throw new ExportFileError(NOT_A_ZIP);
  let entries = tail.readUInt16LE(at + 10);
  let size = tail.readUInt32LE(at + 12);
  let offset = tail.readUInt32LE(at + 16);
  if (entries === 0xffff || size === 0xffffffff || offset === 0xffffffff) {
    const locator = at - 20;
    if (locator < 0 || tail.readUInt32LE(locator) !== ZIP64_LOCATOR) throw new ExportFileError(`${NOT_A_ZIP} (its zip64 locator is missing)`);
    const recordAt = Number(tail.readBigUInt64LE(locator + 8));
    const record = await bytes.read(recordAt, recordAt + 56);
    if (record.readUInt32LE(0) !== ZIP64_EOCD) throw new ExportFileError(`${NOT_A_ZIP} (its zip64 end record is missing)`);
    entries = Number(record.readBigUInt64LE(32));
    size = Number(record.readBigUInt64LE(40));
    offset = Number(record.readBigUInt64LE(48));
  }
  return { offset, size, entries };
}

function readEntries(dir: Buffer): Entry[] {
  const entries: Entry[] = [];
  for (let at = 0; at + 46 <= dir.length && dir.readUInt32LE(at) === CENTRAL; ) {
    const nameLength = dir.readUInt16LE(at + 28);
    const extraLength = dir.readUInt16LE(at + 30);
    const commentLength = dir.readUInt16LE(at + 32);
    let compressedSize = dir.readUInt32LE(at + 20);
    const uncompressedSize = dir.readUInt32LE(at + 24);
    let localHeader = dir.readUInt32LE(at + 42);
    const name = dir.toString('utf8', at + 46, at + 46 + nameLength);
    // Zip64 extended information (APPNOTE 4.5.3): the 64-bit values of the fields that overflowed, in this order.
    for (let x = at + 46 + nameLength; x + 4 <= at + 46 + nameLength + extraLength; ) {
      const id = dir.readUInt16LE(x);
      const length = dir.readUInt16LE(x + 2);
      if (id === 0x0001) {
        let field = x + 4;
        if (uncompressedSize === 0xffffffff) field += 8;
        if (compressedSize === 0xffffffff) {
          compressedSize = Number(dir.readBigUInt64LE(field));
          field += 8;
        }
        if (localHeader === 0xffffffff) localHeader = Number(dir.readBigUInt64LE(field));
      }
      x += 4 + length;
    }
    entries.push({ name, method: dir.readUInt16LE(at + 10), compressedSize, localHeader });
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** The decompressed bytes of the archive's `export.xml` (not `export_cda.xml`), as a stream. */
export async function exportXmlInZip(bytes: StoredBytes): Promise<AsyncIterable<Buffer>> {
  const dir = await centralDirectory(bytes);
  const entries = readEntries(await bytes.read(dir.offset, dir.offset + dir.size));
  const entry = entries.find((e) => e.name.split('/').pop() === 'export.xml');
  if (!entry) {
    throw new ExportFileError(
      `The archive holds no export.xml (it has ${entries
        .slice(0, 5)
        .map((e) => e.name)
        .join(', ')}${entries.length > 5 ? ' …' : ''}): send the export.zip the Health app made.`,
    );
  }
  const local = await bytes.read(entry.localHeader, entry.localHeader + 30);
  if (local.readUInt32LE(0) !== LOCAL) throw new ExportFileError(`${NOT_A_ZIP} (export.xml's local header is not where the directory says)`);
  const dataStart = entry.localHeader + 30 + local.readUInt16LE(26) + local.readUInt16LE(28);
  const data = bytes.stream(dataStart, dataStart + entry.compressedSize);
  if (entry.method === 0) return data;
  if (entry.method !== 8) throw new ExportFileError(`export.xml is compressed with method ${entry.method}; only deflate (8) and stored (0) are read.`);
  const inflate = createInflateRaw();
  // pipeline destroys the inflater with the source's error, so whoever reads it sees that error.
  pipeline(Readable.from(data), inflate, () => {});
  return inflate;
}
