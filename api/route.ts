import type { Static, TSchema } from '@sinclair/typebox';
import type { Context } from 'koa';
import type { Logger } from '../lib/platform/logger';
import type { AppDeps } from './deps';
import type { LinkTokenPrincipal, ManagementPrincipal, TeamPrincipal, UserScopedPrincipal } from './middleware/auth';

/**
 * `link`: a link token in x-vital-link-token (the hosted link page, acting for one user of one team). `user`: a team
 * key, or a phone's SDK access token of the path's `user_id` (`authorization: Bearer …`).
 */
export type AuthKind = 'team' | 'management' | 'link' | 'user' | 'none';
export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface ResponseSpec {
  description: string;
  schema?: TSchema;
  /** Defaults to application/json. */
  contentType?: string;
}

export interface Reply {
  status?: number;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

type Val<S> = S extends TSchema ? Static<S> : Record<string, never>;

export interface HandlerArgs<P, Q, B, A extends AuthKind> {
  params: Val<P>;
  query: Val<Q>;
  body: Val<B>;
  auth: A extends 'team'
    ? TeamPrincipal
    : A extends 'management'
      ? ManagementPrincipal
      : A extends 'link'
        ? LinkTokenPrincipal
        : A extends 'user'
          ? UserScopedPrincipal
          : undefined;
  deps: AppDeps;
  log: Logger;
  requestId: string;
  ctx: Context;
}

/**
 * One row of the route table: everything the router, the validator and the OpenAPI document need.
 * Paths are written OpenAPI-style (`/v2/user/{user_id}`); a trailing slash is optional on every route.
 */
export interface RouteDef<
  P extends TSchema | undefined = TSchema | undefined,
  Q extends TSchema | undefined = TSchema | undefined,
  B extends TSchema | undefined = TSchema | undefined,
  A extends AuthKind = AuthKind,
> {
  operationId: string;
  method: HttpMethod;
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: A;
  deprecated?: boolean;
  /** Hidden from the OpenAPI document (docs assets). */
  internal?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /** A body that is not JSON (the handler reads it): documented with these media types. */
  textBody?: { contentTypes: string[]; description: string };
  responses: Record<number, ResponseSpec>;
  handler(args: HandlerArgs<P, Q, B, A>): Promise<Reply> | Reply;
}

export type AnyRoute = RouteDef<any, any, any, any>;

/** Identity function that gives handlers typed params/query/body from the schemas. */
export function defineRoute<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
  A extends AuthKind = 'none',
>(def: RouteDef<P, Q, B, A>): AnyRoute {
  return def as AnyRoute;
}
