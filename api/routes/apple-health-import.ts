import { Type } from '@sinclair/typebox';
import { ApiError, notFound, ValidationError } from '../../lib/platform/errors';
import { receiveUpload, startImport, importView } from '../../lib/phones/import-upload';
import { activeUser } from '../../lib/users/views';
import { ErrorDetail, HTTPValidationError, Uuid } from '../../schemas/common';
import { AppleHealthImport, AppleHealthImportList } from '../../schemas/phones';
import { UserIdParams } from '../../schemas/user';
import { defineRoute } from '../route';
import { timeOrderedUuid } from '../../lib/platform/keys';

const tags = ['Phones'];
const FORMATS: Record<string, 'zip' | 'xml'> = { 'application/zip': 'zip', 'application/xml': 'xml', 'text/xml': 'xml' };
const ImportParams = Type.Object({ user_id: UserIdParams.properties.user_id, import_id: Uuid('The import, as its upload answered.') });

/** The `upload-length` / `upload-offset` header (tus 1.0), a byte count. */
function byteCount(value: string, header: string): number | null {
  if (!value) return null;
  if (!/^\d{1,16}$/.test(value)) throw ValidationError.field(['header', header], `${header} is a number of bytes.`);
  return Number(value);
}

const HOW_TO_RESUME =
  'A broken upload resumes: GET the import (or HEAD it) for `received_bytes` (header `upload-offset`), then PATCH it with `upload-offset: <received_bytes>` and the file from that byte on (tus 1.0 core).';

export const appleHealthImportRoutes = [
  defineRoute({
    operationId: 'importAppleHealthExport',
    method: 'post',
    path: '/v2/user/{user_id}/import/apple_health',
    summary: 'Import an Apple Health export',
    description: `The file the Health app's "Export All Health Data" makes: \`export.zip\` (content-type application/zip) or its \`export.xml\` (application/xml), any size, as the request body. It is stored as it arrives (never held whole); once whole, a workflow imports it (progress on GET of the import; \`historical.data.<resource>.created\` for each resource at the end). Importing the same file again stores nothing twice. ${HOW_TO_RESUME} Send \`upload-length\` with the file's size to upload it over several requests. Team key, or the user's SDK token.`,
    tags,
    auth: 'user',
    params: UserIdParams,
    textBody: { contentTypes: Object.keys(FORMATS), description: 'The export file, as it is.' },
    responses: {
      201: { description: 'Stored (status `importing` when whole, `uploading` while bytes are missing)', schema: AppleHealthImport },
      404: { description: 'No such user', schema: ErrorDetail },
      415: { description: 'Not a zip or an XML file', schema: ErrorDetail },
      422: { description: 'A header not understood', schema: HTTPValidationError },
    },
    async handler({ params, auth, deps, ctx }) {
      const format = FORMATS[ctx.get('content-type').split(';')[0].trim().toLowerCase()];
      if (!format) throw new ApiError(415, 'Send the export as content-type application/zip (export.zip) or application/xml (export.xml).');
      const length = byteCount(ctx.get('upload-length'), 'upload-length') ?? byteCount(ctx.get('content-length'), 'content-length');
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const doc = await deps.repos.appleHealthImports.create(
        { _id: timeOrderedUuid(), team_id: auth.teamId, user_id: user._id, format, upload_length: length },
        new Date(),
      );
      const stored = await receiveUpload(deps, ctx, doc, 0);
      return {
        status: 201,
        body: importView(stored),
        headers: { location: `/v2/user/${user._id}/import/apple_health/${doc._id}`, 'upload-offset': String(stored.received_bytes) },
      };
    },
  }),
  defineRoute({
    operationId: 'resumeAppleHealthUpload',
    method: 'patch',
    path: '/v2/user/{user_id}/import/apple_health/{import_id}',
    summary: "Continue an export's upload from its last stored byte",
    description: `${HOW_TO_RESUME} An \`upload-offset\` that is not where the upload stands is a 409 with where it stands; bytes past the file's announced length are refused.`,
    tags,
    auth: 'user',
    params: ImportParams,
    textBody: { contentTypes: ['application/offset+octet-stream', ...Object.keys(FORMATS)], description: 'The file from `upload-offset` on.' },
    responses: {
      200: { description: 'Stored', schema: AppleHealthImport },
      404: { description: 'No such import', schema: ErrorDetail },
      409: { description: '`upload-offset` is not where the upload stands (the answer says where)', schema: ErrorDetail },
      422: { description: '`upload-offset` missing', schema: HTTPValidationError },
    },
    async handler({ params, auth, deps, ctx }) {
      const offset = byteCount(ctx.get('upload-offset'), 'upload-offset');
      if (offset === null) throw ValidationError.field(['header', 'upload-offset'], 'Field required: the byte the body starts at (received_bytes).', 'missing');
      const doc = await deps.repos.appleHealthImports.find(auth.teamId, params.user_id, params.import_id);
      if (!doc) throw notFound('No such import for this user.');
      if (offset !== doc.received_bytes) {
        throw new ApiError(
          409,
          `The upload stands at byte ${doc.received_bytes}, not ${offset}: send upload-offset ${doc.received_bytes} and the file from there.`,
        );
      }
      if (doc.status !== 'uploading') {
        // The whole file is here: a client that lost the answer to its last bytes asks again (and the import is started, once).
        if (doc.status === 'importing') await startImport(deps, doc._id);
        return { body: importView(doc), headers: { 'upload-offset': String(doc.received_bytes) } };
      }
      const stored = await receiveUpload(deps, ctx, doc, offset);
      return { body: importView(stored), headers: { 'upload-offset': String(stored.received_bytes) } };
    },
  }),
  defineRoute({
    operationId: 'getAppleHealthImport',
    method: 'get',
    path: '/v2/user/{user_id}/import/apple_health/{import_id}',
    summary: "An export import's upload and progress",
    description: `Where the upload stands (\`received_bytes\`, also the \`upload-offset\` header), and the import's progress: elements read, samples and summaries stored (new, changed, unchanged), what was skipped. ${HOW_TO_RESUME}`,
    tags,
    auth: 'user',
    params: ImportParams,
    responses: { 200: { description: 'The import', schema: AppleHealthImport }, 404: { description: 'No such import', schema: ErrorDetail } },
    async handler({ params, auth, deps }) {
      const doc = await deps.repos.appleHealthImports.find(auth.teamId, params.user_id, params.import_id);
      if (!doc) throw notFound('No such import for this user.');
      return {
        body: importView(doc),
        headers: { 'upload-offset': String(doc.received_bytes), ...(doc.upload_length === null ? {} : { 'upload-length': String(doc.upload_length) }) },
      };
    },
  }),
  defineRoute({
    operationId: 'listAppleHealthImports',
    method: 'get',
    path: '/v2/user/{user_id}/import/apple_health',
    summary: "The user's export imports, newest first",
    description: 'The last 50: an upload whose answer was lost is found here, with the bytes it holds.',
    tags,
    auth: 'user',
    params: UserIdParams,
    responses: { 200: { description: 'The imports', schema: AppleHealthImportList }, 404: { description: 'No such user', schema: ErrorDetail } },
    async handler({ params, auth, deps }) {
      const user = await activeUser(deps, auth.teamId, params.user_id);
      return { body: { imports: (await deps.repos.appleHealthImports.listForUser(auth.teamId, user._id, 50)).map(importView) } };
    },
  }),
];
