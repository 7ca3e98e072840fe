import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Context } from 'koa';
import { ApiError, notFound } from '../platform/errors';
import type { TemporalDeps } from '../platform/temporal';
import type { Repositories } from '../repositories';
import { appleHealthImportWorkflow } from '../../workflows/apple-health-import';
import { workflowIds } from '../../workflows/ids';
import { CHUNK_BYTES, type AppleHealthImportDoc } from './imports-store';

/**
 * The upload of an Apple Health export (api/routes/apple-health-import.ts): the request body is stored in chunks as
 * it arrives (lib/phones/imports-store.ts), each one moving the upload on by one conditional write, and the request
 * that stores the last byte starts the import's workflow. A request that breaks leaves every whole chunk it sent; the
 * client continues from `received_bytes`.
 */

type UploadDeps = { repos: Repositories; temporal: TemporalDeps };

/** Starts the import's workflow (once: a second start of the same import finds it started). */
export async function startImport(deps: UploadDeps, importId: string): Promise<void> {
  try {
    await deps.temporal.client.workflow.start(appleHealthImportWorkflow, {
      workflowId: workflowIds.appleHealthImport(importId),
      taskQueue: deps.temporal.taskQueue,
      args: [{ importId }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Stores the body from `offset` on; returns the import as it stands after it. */
export async function receiveUpload(deps: UploadDeps, ctx: Context, doc: AppleHealthImportDoc, offset: number): Promise<AppleHealthImportDoc> {
  const imports = deps.repos.appleHealthImports;
  let at = offset;
  let current = doc;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const store = async (bytes: Buffer, complete: boolean) => {
    const after = await imports.append(doc._id, at, bytes, complete, new Date());
    if (!after) {
      const now = await imports.get(doc._id);
      if (!now) {
        // The import went (its user's erasure) while this request wrote: what it wrote goes too.
        await imports.dropBytes(doc._id);
        throw notFound('The import is gone: its user was erased.');
      }
      throw new ApiError(
        409,
        `Another request moved this upload on (it stands at byte ${now?.received_bytes}): continue from there with PATCH and upload-offset.`,
      );
    }
    at += bytes.length;
    current = after;
  };
  try {
    for await (const part of ctx.req as AsyncIterable<Buffer>) {
      pending.push(part);
      pendingBytes += part.length;
      if (doc.upload_length !== null && at + pendingBytes > doc.upload_length) {
        throw new ApiError(413, `The body runs past the file's announced length (${doc.upload_length} bytes, upload-length): nothing past it is stored.`);
      }
      while (pendingBytes >= CHUNK_BYTES) {
        const all = Buffer.concat(pending);
        pending = [all.subarray(CHUNK_BYTES)];
        pendingBytes = all.length - CHUNK_BYTES;
        const complete = doc.upload_length !== null && at + CHUNK_BYTES === doc.upload_length;
        await store(all.subarray(0, CHUNK_BYTES), complete);
      }
    }
  } catch (err) {
    // The client went away mid-body: the whole chunks it sent are stored; it resumes from received_bytes.
    if ((err as { code?: string }).code === 'ECONNRESET' || (err as Error).message === 'aborted') return current;
    throw err;
  }
  const rest = Buffer.concat(pending);
  // Without an announced length, a body that ended (not broken) is the whole file.
  const complete = doc.upload_length === null || at + rest.length === doc.upload_length;
  if (current.status === 'uploading' && (rest.length || complete)) await store(rest, complete);
  if (current.status === 'importing') await startImport(deps, doc._id);
  return current;
}

/** The import as the API shows it. */
export function importView(doc: AppleHealthImportDoc) {
  return {
    id: doc._id,
    user_id: doc.user_id,
    format: doc.format,
    status: doc.status,
    upload_length: doc.upload_length,
    received_bytes: doc.received_bytes,
    progress: doc.progress,
    error: doc.error,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
    uploaded_at: doc.uploaded_at?.toISOString() ?? null,
    completed_at: doc.completed_at?.toISOString() ?? null,
  };
}
