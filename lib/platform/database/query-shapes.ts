import { threadId } from 'node:worker_threads';
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { CommandStartedEvent, Document, MongoClient } from 'mongodb';

/**
 * The shape of a query as an index sees it: which collection, which operation, which fields the filter
 * names and which fields it sorts by (values left out). test/query-shapes.after-suite.ts checks every shape the
 * product issued during the test suite against the declared indexes: with the suite's small data a scan is
 * as fast as an index, so a query without one would otherwise first show in production.
 */
export interface ObservedQueryShape {
  collection: string;
  op: 'find' | 'update' | 'delete' | 'findAndModify' | 'aggregate' | 'count' | 'distinct';
  /** Filter fields (one entry per `$or` branch when the filter has one). */
  filter: string[];
  sort: string[];
}

/** Field names a filter constrains; `$and` is flattened, each `$or`/`$nor` branch is a separate alternative. */
export function filterAlternatives(filter: Document | undefined): string[][] {
  if (!filter) return [[]];
  let alternatives: string[][] = [[]];
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$and' && Array.isArray(value)) {
      for (const part of value) alternatives = cross(alternatives, filterAlternatives(part));
    } else if ((key === '$or' || key === '$nor') && Array.isArray(value)) {
      alternatives = cross(
        alternatives,
        value.flatMap((branch: Document) => filterAlternatives(branch)),
      );
    } else if (!key.startsWith('$')) {
      alternatives = alternatives.map((fields) => [...fields, key]);
    }
  }
  return alternatives.map((fields) => [...new Set(fields)].sort());
}

function cross(left: string[][], right: string[][]): string[][] {
  return left.flatMap((l) => right.map((r) => [...l, ...r]));
}

/** The fields of a sort in order; the driver sends a sort as a `Map` (which `Object.keys` sees as empty). */
export function sortFields(sort: unknown): string[] {
  if (!sort) return [];
  if (sort instanceof Map) return [...sort.keys()].map(String);
  if (Array.isArray(sort)) return sort.map((entry) => (Array.isArray(entry) ? String(entry[0]) : String(entry)));
  if (typeof sort === 'object') return Object.keys(sort);
  return [String(sort)];
}

/** The shapes one command issues (none for inserts, index and admin commands). */
export function shapesOf(command: Document): ObservedQueryShape[] {
  const make = (collection: string, op: ObservedQueryShape['op'], filter: Document | undefined, sort?: unknown) =>
    filterAlternatives(filter).map((fields) => ({ collection, op, filter: fields, sort: sortFields(sort) }));
  if (typeof command.find === 'string') return make(command.find, 'find', command.filter, command.sort);
  if (typeof command.update === 'string') return (command.updates ?? []).flatMap((u: Document) => make(command.update, 'update', u.q));
  if (typeof command.delete === 'string') return (command.deletes ?? []).flatMap((d: Document) => make(command.delete, 'delete', d.q));
  if (typeof command.findAndModify === 'string') return make(command.findAndModify, 'findAndModify', command.query, command.sort);
  // A count with no query is `estimatedDocumentCount`: read from the collection's metadata, no documents.
  if (typeof command.count === 'string') return command.query && Object.keys(command.query).length ? make(command.count, 'count', command.query) : [];
  if (typeof command.distinct === 'string') return make(command.distinct, 'distinct', command.query);
  if (typeof command.aggregate === 'string') {
    // The stages an index can serve: a leading $match and the $sort right after it (countDocuments is one).
    const [first, second] = (command.pipeline ?? []) as Document[];
    const match = first?.$match;
    const sort = match ? second?.$sort : first?.$sort;
    return make(command.aggregate, 'aggregate', match, sort);
  }
  return [];
}

/**
 * Records every distinct query shape this process sends through `client` into `<dir>/query-shapes-<pid>.jsonl`,
 * one line the first time each shape is seen (appended at once, so a killed process keeps what it recorded).
 * Diagnostic for the test suite (MONGO_QUERY_SHAPE_LOG); off unless configured.
 */
export function recordQueryShapes(client: MongoClient, dir: string): void {
  mkdirSync(dir, { recursive: true });
  // One file per process and thread (the Apple Health import reads and stores in a thread of its own).
  const file = path.join(dir, `query-shapes-${process.pid}${threadId ? `-${threadId}` : ''}.jsonl`);
  const seen = new Set<string>();
  client.on('commandStarted', (event: CommandStartedEvent) => {
    for (const shape of shapesOf(event.command)) {
      const line = JSON.stringify(shape);
      if (seen.has(line)) continue;
      seen.add(line);
      appendFileSync(file, `${line}\n`);
    }
  });
}
