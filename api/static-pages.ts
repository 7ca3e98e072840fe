import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { notFound } from '../lib/platform/errors';
import { ErrorDetail } from '../schemas/common';
import { defineRoute, type AnyRoute } from './route';

/**
 * The browser pages the api serves itself (the delivery-log page, the hosted link page): static files from a
 * folder of api/ that call the public API only. Everything comes from this origin (works offline, no CDN).
 */
export const STATIC_PAGE_HEADERS = {
  // Nothing may frame the pages (clickjacking of their buttons); scripts, styles and images from this origin only.
  'Content-Security-Policy': "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
};

const TYPES: Record<string, string> = { '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.html': 'text/html; charset=utf-8' };

export interface StaticFolder {
  /** A file of the folder (404 naming `what` when the build lacks the folder). */
  read(name: string): Buffer;
  /** `GET <prefix>/assets/{file}`: the folder's listed assets. */
  assetRoute(route: { operationId: string; summary: string; tags: string[] }): AnyRoute;
}

/**
 * `folder` of api/, from the sources (api/routes → api/<folder>) or the compiled build (dist/api → api/<folder>
 * beside dist, as the Dockerfile copies it). `assets` lists the files served under `<urlPrefix>/assets/`.
 */
export function staticFolder(folder: string, what: string, urlPrefix: string, assets: string[]): StaticFolder {
  const dir = [path.resolve(__dirname, folder), path.resolve(__dirname, '../../api', folder)].find((d) => existsSync(path.join(d, 'index.html')));
  const read = (name: string) => {
    if (!dir) throw notFound(`${what} is not installed with this build (api/${folder}/ is missing).`);
    return readFileSync(path.join(dir, name));
  };
  return {
    read,
    assetRoute: ({ operationId, summary, tags }) =>
      defineRoute({
        operationId,
        method: 'get',
        path: `${urlPrefix}/assets/{file}`,
        summary,
        tags,
        auth: 'none',
        internal: true,
        params: Type.Object({ file: Type.String() }),
        responses: { 200: { description: 'Asset' }, 404: { description: 'Unknown asset', schema: ErrorDetail } },
        handler: ({ params }) => {
          if (!assets.includes(params.file)) throw notFound(`Unknown asset '${params.file}'.`);
          return {
            body: read(params.file),
            contentType: TYPES[path.extname(params.file)],
            headers: { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' },
          };
        },
      }),
  };
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** A page template's `{{name}}` placeholders filled with text (escaped: never markup). */
export const fillTemplate = (template: Buffer | string, text: Record<string, string>) =>
  String(template).replace(/\{\{(\w+)\}\}/g, (_, name: string) => (text[name] ?? '').replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]));
